// overoptimisation.h — `ppolab overoptimisation` (SPEC §12, Gao, Schulman,
// Hilton 2022): the raw per-sequence data that places PPO's snapshots and
// best-of-n sampling from SFT by d = √KL(π‖π_SFT) and measures gold (the
// reserved rubric) and proxy (the frozen judge) at each. The estimators and
// fits are another step's; this one samples, judges and labels.
//
//   points      iteration 0 = RUN/sft/final, every saved snapshot
//               (RUN/ppo/snapshots/iteration-NNNN, ppo.snapshot_every) and
//               the last iteration = RUN/ppo/final/actor;
//   1. sampling (StageScope::eval: never gold/, never learn/) for each point
//               evaluation.snapshot_samples temperature-1 responses per test
//               prompt, each with the judge's score (proxy) and the exact
//               and k1 sequence KL to SFT (model/sequence_kl.h); then
//               evaluation.best_of_n SFT samples per test prompt, judged
//               (their KL to SFT is 0 and is not computed);
//   2. labels   (StageScope::all) the rubric on every sampled response.
//
// Sample s of prompt p at point i draws from its own Philox stream
// (evaluation.sample_seed, overoptimisation_stream(kind, i, p, s)), so its
// tokens do not depend on which rows share its batch; the batches have a
// fixed composition (kOverOptRowsPerBatch rows in prompt-major order), so
// the same run writes the same bytes.
//
// RUN/eval/overoptimisation.json holds no duration and no absolute path
// (durations: RUN/eval/overoptimisation-timings.json); it is written once,
// atomically, at the end: a killed command leaves nothing of it (a rerun
// starts over).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/rubric.h"
#include "training/study.h"
#include "util/json.h"

namespace ppolab {

inline constexpr int64_t kOverOptRowsPerBatch = 96;  // rows generated together (one decode step for all)
inline constexpr int64_t kOverOptScoringRows = 16;   // rows teacher-forced together (judge, KL)

fs::path overoptimisation_path(const RunLayout& run);
fs::path overoptimisation_timings_path(const RunLayout& run);

// One policy on the KL axis.
struct OverOptPoint {
    int64_t iteration = 0;
    std::string policy;  // "sft/final", "ppo/snapshots/iteration-0020", "ppo/final/actor" (relative to RUN)
    fs::path dir;        // its learned state
};
// The points of a finished continuous PPO: Error if RUN/ppo/continuous.json
// or ppo/final/actor is missing (PPO has not finished), or a snapshot that
// the report lists ("snapshots": {"iterations": […]}) is missing (naming its
// folder). The list comes from the PPO report, not from this command's
// config, so the points are those the run saved.
std::vector<OverOptPoint> overoptimisation_points(const Study& study);

// The Philox stream of one sample: kind 0 = a point's sample, 1 = best-of-n.
// Error when iteration ≥ 2^22, prompt ≥ 2^20 or sample ≥ 2^20.
uint64_t overoptimisation_stream(int kind, int64_t iteration, int64_t prompt, int64_t sample);

// One sampled response.
struct OverOptSample {
    int64_t prompt = 0, sample = 0;  // index into the prompts; sample number
    std::vector<int32_t> response;   // EOS included when it ended the row
    std::string text, finish_reason;
    bool decodable = true;
    double proxy = 0;                       // the frozen judge's score
    std::optional<double> kl_exact, kl_k1;  // to SFT (points only)
    std::optional<RubricVerdict> verdict;   // step 2
};

// What step 1 hands to step 2 (nothing of it is written before step 2 ends).
struct OverOptSamples {
    json identity;
    std::vector<PromptRow> prompts;  // the test prompts, in corpus order
    std::vector<OverOptPoint> points;
    std::vector<std::vector<OverOptSample>> at_point;  // (points)(prompts × samples_per_prompt)
    std::vector<OverOptSample> best_of_n;              // (prompts × best_of_n), prompt-major
    int64_t samples_per_prompt = 0, n = 0;
    json seconds = json::object();
};

// Step 1 on a study opened with StageScope::eval.
OverOptSamples overoptimisation_sample(const Study& study);
// Step 2 on a study opened with StageScope::all: the rubric on every sample
// (the prompts checked against the corpus again), then writes both files.
// Returns the written document.
json overoptimisation_label(const Study& study, OverOptSamples& samples);

}  // namespace ppolab
