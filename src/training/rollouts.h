// rollouts.h — what the online stages share about sampled responses (PPO,
// ppo.h; the group baselines RLOO and GRPO, rl.h): the rollout prompts and
// their seeded order, one sampled response with its per-token numbers, and
// the copies between a ScoringBatch's per-position buffers and one response.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "model/qwen2.h"
#include "model/scoring.h"
#include "training/study.h"
#include "util/json.h"
#include "util/rng.h"

namespace ppolab {

// How a sampled response ended. The JSON spells it "eos" | "length".
enum class Finish { eos, length };
const char* finish_name(Finish finish);

// One sampled response and every number an online stage derives from it
// (the critic's values and returns: PPO only).
struct Rollout {
    std::string id;         // iteration-NNN-slot-K, unique, consumed once
    std::string prompt_id;  // the rollout prompt it answers
    ScoringRow row;         // prompt ids, response ids (EOS last when it ended the row)
    Finish finish = Finish::length;
    std::vector<float> old_logp, ref_logp, values;  // (n) detached, from the sampling/old policies
    double score = 0;                               // the judge's predicted simulated-preference score
    std::vector<double> rewards, advantages, returns;
};

// The prompts rolled out on: learn/ only — or, for a judge that learned from
// votes, the prompts of its train-split labels (SPEC §8) — rendered and
// checked against limits.max_prompt (refused, never truncated).
struct RolloutPrompts {
    std::vector<PromptRow> prompts;
    std::vector<std::vector<int32_t>> ids;  // the rendered prompt of each
    json data_identity;                     // the file(s) they came from, for the identity block
    static RolloutPrompts load(const Study& study);
    int64_t size() const { return static_cast<int64_t>(prompts.size()); }
};

// A seeded permutation of the prompts and the cursor in it; a new
// permutation is drawn each time it runs out (part of the exact state).
struct PromptOrder {
    std::vector<int64_t> order;
    int64_t cursor = 0;
    int64_t next(Philox& sampler, int64_t count);
};

// Where an online stage stands at an iteration boundary (SPEC §6): the
// prompt order, the iterations and updates done, the per-iteration history
// and every rollout id consumed — its exact state's `extra`, no rollout
// pending (a checkpoint is only written between iterations).
struct OnlinePosition {
    PromptOrder order;
    int64_t iteration = 0, updates = 0;
    json history = json::array(), consumed = json::array();
    std::set<std::string> seen;  // the consumed ids, to refuse a repeat
    json to_json() const;
    // Error naming `from` (and `stage` for a pending rollout) on a bad field.
    void restore(const json& extra, const std::string& from, const std::string& stage);
};

// The generator of rollout slot `slot` of iteration `iteration` (1-based)
// of the stage whose streams are tagged `tag` (PPO 4, RLOO/GRPO 6):
// Philox(seed, tag << 56 | iteration << 24 | slot) from counter 0. Keyed,
// so a slot's draws depend on nothing else: not on the other slots, the
// chunks, or the rank that sampled it (SPEC §13).
Philox slot_generator(uint64_t seed, uint64_t tag, int64_t iteration, int64_t slot);

// Samples slots [begin, end) of an iteration's `repeats` responses to each
// of `chosen` (indices into `prompts`) — slot K = j·repeats + r answers
// chosen[j] — as one batch (temperature 1, full vocabulary, EOS or
// limits.max_response), slot K drawing from slot_generator(seed, tag,
// iteration, K). The ids are iteration-NNN-slot-K. old_logp is the
// sampling forward's, never replaced.
std::vector<Rollout> sample_rollouts(Qwen2& model, const Study& study, const RolloutPrompts& prompts,
                                     const std::vector<int64_t>& chosen, int64_t repeats, uint64_t seed, uint64_t tag,
                                     int64_t iteration, int64_t begin, int64_t end);

// Every slot's rollout, on every rank, in slot order. The `slots` are cut
// into `chunks` fixed chunks (chunk_items); `produce(begin, end)` samples
// and scores one chunk's slots as one batch and runs for this rank's
// chunks only; the other chunks' rollouts arrive from their ranks as bytes
// (floats bit for bit). An id already in `seen` is an Error; the new ones
// are added.
std::vector<Rollout> rollouts_by_chunks(int64_t chunks, int64_t slots, std::set<std::string>& seen,
                                        const std::function<std::vector<Rollout>(int64_t begin, int64_t end)>& produce);

// Rollouts [begin, end) as one scoring batch (their prompts and responses).
ScoringBatch rollout_batch(const Study& study, const std::vector<Rollout>& rollouts, int64_t begin, int64_t end);

// The response positions of batch row `row` of a per-position buffer (B × T).
std::vector<float> response_slice(const ScoringBatch& batch, const float* per_position, int64_t row);
// Before the first update of an iteration the trainer's re-score of a
// rollout (`now`) is its sampling log-probs: under engine.numerics =
// canonical the same bits (decode = prefill, numerics.h), so the first ratio
// is exactly 1; a difference fails the stage naming the rollout and token.
// Returns the largest |now − old_logp| (0 under canonical).
double check_on_policy(const std::vector<float>& now, const Rollout& r, const std::string& where);
// Scatters one row's per-token gradient, divided by `rows` (the mean over the
// batch's rows), into a per-position buffer.
void scatter_row(const ScoringBatch& batch, int64_t row, const std::vector<double>& d, double rows, float* out);

}  // namespace ppolab
