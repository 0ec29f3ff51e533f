// supervised_stage.h — what the supervised stages share (SPEC §3, §6, §12):
// SFT (sft.h), the judge (reward_model.h) and DPO (dpo.h) each supply their
// examples and an objective (loss and gradient of one group, validation);
// train_supervised runs the epochs — seeded permutation per epoch, groups of
// `per_update` examples, clip, AdamW, the schedule — with mid-epoch and
// epoch-end checkpoints, over the stage lifecycle (stage_lifecycle.h). Each
// update's group is cut into parallel.chunks chunks (chunked_update.h): the
// ranks of an MPI job share them, and any world size gives the same bits.
//
// Both run in three modes that prove exact resume: `interrupt` stops after
// `interrupt_epoch` epochs and saves its state; `resume` loads that state and
// finishes; `continuous` runs every epoch at once. Durations live in the stage
// report, never in the compared state.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "model/scoring.h"
#include "training/roles.h"
#include "training/stage_lifecycle.h"
#include "training/study.h"
#include "util/json.h"

namespace ppolab {

// One example: SFT rows are (prompt, response); judge rows are pairs,
// encoded as two scoring rows.
struct SupervisedExample {
    std::string id;
    ScoringRow first;   // SFT: the demonstration; reward: chosen
    ScoringRow second;  // reward: rejected
};

// Every row must fit the limits before the first update: refused, never
// truncated (Error naming the example). `pairs`: check `second` too.
void check_limits(const Study& study, const std::vector<SupervisedExample>& rows, bool pairs);

// The corpus's preference pairs as examples (first: chosen, second:
// rejected), and the identity of the pair files they came from (the judge's
// and DPO's data block).
std::vector<SupervisedExample> encode_pairs(const Study& study, const std::vector<PreferencePair>& pairs);
json pairs_data_identity(const Study& study, const Manifest& manifest);
// The sha256 of each of `files` (corpus-relative) from the manifest, and the
// manifest's own: a supervised stage's data block. Error naming a missing entry.
json corpus_files_identity(const Study& study, const Manifest& manifest, const std::vector<std::string>& files);
// The scoring rows of pairs in the Bradley–Terry order [first 1..n, second 1..n].
std::vector<ScoringRow> pair_rows(const std::vector<const SupervisedExample*>& pairs);
std::vector<ScoringRow> pair_rows(const std::vector<SupervisedExample>& pairs, size_t begin, size_t end);

// The loss of one stage on the role it trains.
class SupervisedObjective {
public:
    virtual ~SupervisedObjective() = default;
    virtual Role& role() = 0;
    // The whole update's denominator (active response tokens, or pairs).
    virtual double denominator(const std::vector<const SupervisedExample*>& group) const = 0;
    // The loss of `chunk` (part or all of an update's group: its summed terms
    // over the update's `denominator`), gradients accumulated into the role,
    // one trace entry per example. The chunks' losses and gradients add up to
    // the update's (chunked_update.h). `where` names the stage and update in
    // non-finite errors; `update` is 1-based.
    virtual double loss_and_grad(const std::vector<const SupervisedExample*>& chunk, double denominator, json& trace,
                                 const std::string& where, int64_t update) = 0;
    // Validation, never used to select anything (SPEC §3).
    virtual json validate(const std::vector<SupervisedExample>& rows) = 0;
};

// The stage's settings, read once from the typed config (`sft`, `reward` or `dpo`).
struct SupervisedSettings {
    int64_t per_update = 0;  // sft.accumulation | reward.pairs_per_update | dpo.pairs_per_update
    int64_t epochs = 0;
    int64_t interrupt_epoch = 0;
    double lr = 0, warmup_ratio = 0, min_lr_ratio = 0, weight_decay = 0, clip = 0;
    double beta1 = 0, beta2 = 0, eps = 0;  // adamw.*
    uint64_t sampler_seed = 0;
    std::optional<int64_t> max_updates;  // smoke runs
    int64_t checkpoint_every = 0;        // checkpoint.every_updates
    int64_t chunks = 1;                  // parallel.chunks
    static SupervisedSettings read(const StudyConfig& config, const std::string& stage);
};

// What a supervised stage hands to train_supervised.
struct SupervisedData {
    std::vector<SupervisedExample> rows, validation;
    json data_identity;            // the identity's "data" block
    std::string initial_identity;  // the role's learned identity before training
    uint64_t sampler_stream = 0;   // Philox stream of the epoch permutations
    std::string denominator_kind;  // "active_response_tokens" | "pairs"
};

// Trains `objective` over `life`: writes <mode>.state.gz and <mode>.json (and,
// continuous, RUN/<stage>/final/). Returns the stage report.
json train_supervised(const Study& study, StageLifecycle& life, const SupervisedSettings& settings,
                      SupervisedObjective& objective, const SupervisedData& data);

}  // namespace ppolab
