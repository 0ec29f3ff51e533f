// feedback_stage.h — the model side of learning from people (SPEC §8):
// exporting candidate pairs from an SFT checkpoint, turning validated vote
// files into the judge's data, the judge's result on the held-out test
// votes, and the rollout prompts of PPO when its judge learned from votes.
// Formats and rules live in src/feedback (candidates.h, votes.h).
//
// The SFT checkpoint's sha256 ("checkpoint_sha256") is the sha256 of its
// learned.safetensors file (the adapters, with their identity in the
// metadata): RUN/sft/final/learned.safetensors for the run's SFT.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "feedback/candidates.h"
#include "feedback/votes.h"
#include "training/reward_model.h"
#include "training/stage_lifecycle.h"
#include "training/study.h"
#include "util/json.h"

namespace ppolab {

// sha256 of DIR/learned.safetensors, read through the study's guard.
std::string sft_checkpoint_sha256(const Study& study, const fs::path& sft_dir);

// `ppolab feedback export`: feedback.pairs prompts drawn (Philox
// feedback.candidate_seed) from the corpus's learn/ train rollout prompts
// and validation-pair prompts (never test or probe), two responses each
// sampled from the SFT policy at temperature 1 (max limits.max_response
// tokens). A prompt whose two samples are identical is skipped (nothing to
// compare) and counted in skipped_identical. Splits by feedback.split_seed
// and feedback.{train,validation}_fraction. Writes `out` (refuses an
// existing file) and returns the file.
CandidateFile export_candidates(const Study& study, const fs::path& sft_dir, const fs::path& out);

// Everything `ppolab reward --votes` needs, validated before anything is
// written: collect_votes (every SPEC §8 rule) against the run's SFT
// checkpoint, then every labelled response against the model (token ids
// known to the tokenizer, text equal to their decoding, rows within the
// limits), then the run folder (one kind of judge per run, nothing
// overwritten).
struct PreparedVotes {
    VoteCollection collection;
    VoteData data;     // train/validation pairs for run_reward_model
    json labels;       // RUN/reward/feedback.json
    json test_labels;  // RUN/feedback/test_votes.json
};
PreparedVotes prepare_votes(const Study& study, StageMode mode, const fs::path& candidates,
                            const std::vector<fs::path>& vote_files, const std::string& feedback_kind);

// Writes the label files (or checks that identical ones exist) and trains
// the judge on the votes (run_reward_model). Returns the stage report with the
// provenance at "feedback".
json run_reward_from_votes(const Study& study, StageMode mode, const PreparedVotes& votes);

// True when RUN/reward holds a judge learning from votes.
bool judge_learns_from_votes(const RunLayout& run);

// The frozen judge on the held-out test votes: examples, correct, score
// ties, pair loss (−log σ(s_preferred − s_other), mean), accuracy, and every
// label's scores; never used for selection. Writes RUN/reward/vote-test.json.
json vote_test(const Study& study);

// PPO on a judge that learned from votes: the distinct prompts of the
// train-split labels (in label order), and the data identity (provenance).
// nullopt when the judge learned from the corpus pairs.
struct FeedbackPrompts {
    std::vector<PromptRow> prompts;  // id = the corpus prompt id
    json data_identity;
};
std::optional<FeedbackPrompts> feedback_rollout_prompts(const Study& study);

}  // namespace ppolab
