// reward_model.h — the judge (SPEC §3, §8): its own LoRA (seed
// `reward.adapter_seed`) and a scalar head on the frozen base learn the train
// pairs — or, from votes, binary labels (training/feedback_stage.h) — with the
// Bradley–Terry loss, `reward.pairs_per_update` pairs per update; then frozen.
// Validation: loss, accuracy and ties on the validation pairs (never used to
// select). reward_test: the frozen judge on the held-out test pairs.
// The epochs, modes and checkpoints: supervised_stage.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "training/stage_lifecycle.h"
#include "training/study.h"
#include "util/json.h"

namespace ppolab {

// The judge's data when it learns from votes instead of the corpus pairs:
// binary labels as token pairs, the responses' ids exactly as sampled.
struct VotePair {
    std::string id;                         // pair id / participant
    std::string prompt;                     // the user's text (rendered by the chat template)
    std::vector<int32_t> chosen, rejected;  // response ids, EOS last when the response ended with it
};
struct VoteData {
    std::vector<VotePair> train, validation;
    json data_identity;  // replaces the corpus files in the judge's identity: provenance, labels sha256
};

// Trains the judge; writes RUN/reward/<mode>.state.gz and <mode>.json (and,
// continuous, RUN/reward/final/). Refuses to overwrite a finished report.
// `votes`: learn from votes instead of the corpus pairs. Returns the report.
json run_reward_model(const Study& study, StageMode mode, const VoteData* votes = nullptr);

// The frozen judge on the held-out test pairs (gold/test_pairs.jsonl):
// accuracy, ties and every pair's scores; RUN/reward/reward-test.json.
json reward_test(const Study& study);

}  // namespace ppolab
