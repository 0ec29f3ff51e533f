// findings.h — `ppolab findings`: what the study's chains found, with
// measured confidence (issue "replicates, intervals, gold and proxy against
// exact KL, best-of-n").
//
// Input: the scored held-out generations of every chain (RUN/eval/ of a
// single run, RUN/replicates/<k>/eval/ of a set) and, where the
// over-optimisation step ran, RUN[/replicates/<k>]/eval/overoptimisation.json.
// Output: RUN/findings.json (no durations; the same chains give the same
// bytes):
//
//   policies.<sft|ppo>.<test|probe>.<metric>   mean over replicates of the
//        mean over contexts, with its 95 % hierarchical-bootstrap interval
//        (confidence.h: replicates, then contexts within a replicate; the 4
//        rows of a probe context are averaged into one context first);
//        metrics: rubric_success, relevant (fractions of all outputs),
//        learned_score, kl_exact_to_sft, response_tokens
//   ppo_minus_sft.<population>.<metric>        the paired difference on the
//        same prompts of the same replicate
//   verdict                                    verdict.h, from the test
//        population's rubric-success and learned-score differences
//   overoptimisation                           Gao, Schulman & Hilton (2022):
//        snapshots [{iteration, kl_exact, kl_k1, sqrt_kl, gold, proxy,
//        gold_absolute, proxy_absolute}], best_of_n [{n, kl_bon, sqrt_kl,
//        gold, proxy}] (gold, proxy relative to SFT: R(0) = 0), fits {rl,
//        best_of_n} × {gold, proxy} (overoptimisation_math.h) and `answer`:
//        at PPO's final KL, did PPO buy more gold than best-of-n?
//   diagnostics                                the first chain's
//        eval/diagnostics.json, when evaluation wrote one
#pragma once
#include <vector>

#include "evaluation/confidence.h"
#include "training/run_layout.h"
#include "util/json.h"

namespace ppolab {

// The bootstrap every interval of the findings uses (a fixed seed).
BootstrapSettings findings_bootstrap();

// The findings of `chains` (every one evaluated on the same prompts):
// Error naming the file when a chain's evaluation is missing or its
// prompts differ from the first chain's.
json compute_findings(const std::vector<RunLayout>& chains);

// The metrics of one chain's scored generations of `policy`, per
// population ("test", "probe") and context (distinct prompt, first-seen
// order): values[population][metric] = per-context means, and the
// contexts' prompts (to check that chains agree).
struct ChainValues {
    std::vector<std::string> populations;                  // "test", "probe"
    std::vector<std::vector<std::string>> prompts;         // [population][context]
    std::vector<std::vector<std::vector<double>>> values;  // [population][metric][context]
    std::vector<std::string> metrics;                      // names of the metric axis
};
ChainValues chain_values(const json& scored, const std::string& where);

}  // namespace ppolab
