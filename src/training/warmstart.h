// warmstart.h — the two supervised stages before PPO (SPEC §3, §6):
//
//   sft     LoRA on the base learns the demonstrations: token cross-entropy
//           on response tokens (EOS included), accumulation of `sft.accumulation`
//           examples normalised by their total active tokens.
//   reward  the judge: its own LoRA (seed `reward.adapter_seed`) and a scalar
//           head on the base learn the train pairs with the Bradley–Terry
//           loss, `reward.pairs_per_update` pairs per update; then frozen.
//
// Both run in three modes that prove exact resume: `interrupt` stops after
// `interrupt_epoch` epochs and saves its state; `resume` loads that state and
// finishes; `continuous` runs every epoch at once. `resume-check` compares
// the final states of continuous and resume bit for bit. Durations live in
// the stage report, never in the compared state.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "training/study.h"
#include "util/json.h"

namespace ppolab {

enum class WarmstartBranch { sft, reward };
enum class StageMode { interrupt, continuous, resume };

const char* branch_name(WarmstartBranch branch);
const char* stage_mode_name(StageMode mode);
StageMode parse_stage_mode(std::string_view text);  // Error naming the accepted values

// The judge's data when it learns from votes (SPEC §8, training/feedback_stage.h)
// instead of the corpus pairs: binary labels as token pairs, the responses'
// ids exactly as sampled.
struct VotePair {
    std::string id;                         // pair id / participant
    std::string prompt;                     // the user's text (rendered by the chat template)
    std::vector<int32_t> chosen, rejected;  // response ids, EOS last when the response ended with it
};
struct VoteData {
    std::vector<VotePair> train, validation;
    json data_identity;  // replaces the corpus files in the judge's identity: provenance, labels sha256
};

// Trains, writes RUN/<branch>/<mode>.state.gz and <mode>.json (and, for the
// continuous run, RUN/<branch>/final/). Refuses to overwrite any of them.
// `votes` (reward branch only): learn from votes instead of the corpus pairs.
// Returns the stage report.
json run_warmstart(const Study& study, WarmstartBranch branch, StageMode mode, const VoteData* votes = nullptr);

// Compares RUN/<stage>/continuous.state.gz with resume.state.gz bit for bit;
// writes RUN/<stage>/resume-check.json {status PASS|FAIL, first_difference,
// both file sha256 and content sha256}. Returns it.
json resume_check(const RunLayout& run, const std::string& stage);

// Loads two resume states and compares them bit for bit
// (states_first_difference): {status PASS|FAIL, first_difference, both
// files' sha256 and content sha256}. Used by `resume-check --states A B`
// (the crash harness compares a killed-and-restarted run with an
// uninterrupted one).
json compare_state_files(const fs::path& a, const fs::path& b);

// The frozen judge on the held-out test pairs (gold/test_pairs.jsonl):
// accuracy, ties and every pair's scores; RUN/reward/reward-test.json.
json reward_test(const Study& study);

}  // namespace ppolab
