// evaluate.h — `ppolab evaluate` (SPEC §7): held-out greedy generation, then
// rubric scoring, in two steps that read different things.
//
//   1. generation (study opened with StageScope::eval: corpus eval/ + the
//      manifest, the model, the policy and judge checkpoints — never gold/,
//      never learn/) generates greedily, 32 rows per decode each bitwise what
//      it is alone (generate.h independent_rows), every test and
//      probe row for each policy (sft = RUN/sft/final, ppo =
//      RUN/ppo/final/actor), checks the 4 rows of each probe context are
//      identical, adds the frozen judge's learned score, the teacher-forced
//      actor and reference (SFT) log-probs and the exact sequence KL to SFT
//      (kl_exact_to_sft, model/sequence_kl.h; 0 for sft), then measures the
//      rubric's grammar exactly under the policy (exact_gold.h: the
//      probability of each of its 192 sentences after every distinct prompt,
//      the first evaluation.exact_prompts of each population, and the
//      judge's expectation over them, the judge's scores of the grammar
//      computed once per population: judge_grammar_path), and writes
//      RUN/eval/<policy>-generations.json;
//   2. scoring (StageScope::all) reads gold/ labels, runs the rubric on every
//      row and writes RUN/eval/<policy>-scored.json and RUN/eval/metrics.json
//      {policy: {population: metrics}} (see populations.h; the exact
//      expectations, which need each prompt's expected action, under "exact").
//
// Those files hold no durations and no absolute path inside the run (the
// readable roots are relative to RUN), so the same evaluation in two run
// folders, or one killed and resumed, writes them byte for byte the same
// (results.json records their sha256). The durations of both steps go to
// RUN/eval/timings.json instead.
//
// `--population validation` does the same on the 180 validation prompts for
// development checks and the choice of settings, with policies base (no
// adapters), then sft and ppo where the run has them, into
// RUN/eval/validation-*.json; its generation reads learn/ (where validation
// prompts live), never gold/.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "evaluation/exact_gold.h"
#include "evaluation/populations.h"
#include "training/roles.h"
#include "training/study.h"

namespace ppolab {

enum class EvalSet { held_out, validation };    // test + probes | validation prompts
EvalSet parse_eval_set(std::string_view text);  // "held-out" (test + probes) | "validation"; Error otherwise
const char* eval_set_name(EvalSet set);

// The study scope each step needs.
StageScope evaluation_generation_scope(EvalSet set);  // eval | learn (validation prompts live in learn/)

// The baselines to PPO a run may have trained (SPEC §12): dpo
// (RUN/dpo/final), rloo and grpo, and PPO with one design switch on:
// ppo-whiten, ppo-vclip, ppo-k3 (RUN/<m>/final/actor).
const std::vector<std::string>& compared_methods();
// The policies evaluated: {"sft", "ppo"}; for validation the base, then
// "sft" and "ppo" where RUN/sft/final and RUN/ppo/final/actor exist; then,
// in both, each of compared_methods() whose adapters exist.
std::vector<std::string> evaluation_policies(const RunLayout& run, EvalSet set);
// Where a policy's adapters live; nullopt for the base (no adapters).
std::optional<fs::path> policy_dir(const RunLayout& run, const std::string& policy);

fs::path generations_path(const RunLayout& run, EvalSet set, const std::string& policy);
fs::path scored_path(const RunLayout& run, EvalSet set, const std::string& policy);
fs::path metrics_path(const RunLayout& run, EvalSet set);
// The durations of the evaluation (RUN/eval/[validation-]timings.json):
// {"<policy>": {generation_seconds, scoring_seconds, seconds}, "score":
// {seconds}}, each entry written when its step finishes; a policy whose
// generations a killed evaluation had finished keeps the entry of the
// process that generated them.
fs::path timings_path(const RunLayout& run, EvalSet set);
// The frozen judge's score of every grammar spelling (exact_gold.h) after
// each distinct prompt of the population: {"identity", "prompts": [{"prompt",
// "scores" (spellings)}]}. It does not depend on the policy, so the first
// policy's evaluation computes it and the others read it (a file of another
// judge or other prompts is computed again and replaced).
fs::path judge_grammar_path(const RunLayout& run, EvalSet set);
std::map<std::string, std::vector<float>> judge_grammar_scores(const Study& study, EvalSet set, RoleModel& judge,
                                                               const std::vector<EvalRow>& rows,
                                                               const GrammarTree& grammar);
// Crash safety: the rows generated so far for one policy, every
// `checkpoint.every_rows` rows (RUN/eval/checkpoints/…-generations.json),
// removed once the policy's generations file is written.
fs::path generations_checkpoint_path(const RunLayout& run, EvalSet set, const std::string& policy);
// Every file `evaluate` writes for `set`. metrics_path is written last: while
// it is absent the evaluation is unfinished and a rerun continues it (a
// policy's complete generations file with the same identity is kept, its
// checkpoint resumed, scored files rewritten).
std::vector<fs::path> evaluation_outputs(const RunLayout& run, EvalSet set);

// The prompts to generate on, without labels, through the reader: test rows
// then probe rows (180 + 80), or the validation pair prompts (180).
std::vector<EvalRow> evaluation_prompts(const GuardedReader& reader, const fs::path& corpus_dir, EvalSet set);

// Step 1 for one policy on a study opened with evaluation_generation_scope:
// writes generations_path and returns its content (an existing one with the
// same identity is kept and returned; a different one is refused).
json evaluate_generate(const Study& study, EvalSet set, const std::string& policy);
// Step 2 on a study opened with StageScope::all: scores every policy's
// generations, writes the scored files and the metrics; returns the metrics.
json evaluate_score(const Study& study, EvalSet set);

// Labels of scoring: the expected action of each row from gold/ (Error if a
// row has no label or its family differs), then the rubric verdict.
void score_rows(std::vector<EvalRow>& rows, const GoldLabels& gold);

}  // namespace ppolab
