// rl.h — the critic-free group baselines to PPO (SPEC §12): RLOO
// (Ahmadian et al. 2024) and GRPO (Shao et al. 2024) against the same frozen
// judge, from the same SFT, with the frozen SFT as reference. Two roles on
// the frozen base: the policy learns, the reference only scores.
//
// One iteration (RlRun::iterate):
//   1. rollout    rl.prompts_per_iteration prompts (seeded permutation +
//                 cursor), each answered rl.samples_per_prompt = k times at
//                 temperature 1: one group per prompt
//   2. score      reference log-probs, the judge's score at the last token
//   3. rewards    R_i = terminal reward − β Σ_t (old_logp − ref_logp)  (ppo_math.h 10)
//   4. advantages one per response from its group (ppo_math.h 11):
//                 rloo A_i = R_i − mean_{j≠i} R_j;  grpo (R_i − mean) / (std + 1e-4);
//                 every token of response i gets A_i
//   5. update ×U  PPO's clipped surrogate with the same reductions (mean over
//                 a response's tokens, then over the responses), AdamW, clip,
//                 the schedule
//   6. record     metrics (TRL names), the rollouts with their per-token table
//
// Checkpoints only at iteration boundaries, so a resumed run repeats no
// rollout and ends bit for bit where a continuous one ends (SPEC §6), as PPO.
// `ppolab rloo` runs rl.advantage: RUN/rloo/ or RUN/grpo/.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "model/qwen2.h"
#include "model/scoring.h"
#include "training/adamw.h"
#include "training/chunked_update.h"
#include "training/fault_hooks.h"
#include "training/ppo_math.h"
#include "training/resume_state.h"
#include "training/roles.h"
#include "training/rollouts.h"
#include "training/schedule.h"
#include "training/stage_lifecycle.h"
#include "training/study.h"
#include "util/json.h"
#include "util/rng.h"
#include "util/stopwatch.h"

namespace ppolab {

// Every setting, read once from the config (rl.*, adamw.*, the reward rule
// ppo.missing_eos / ppo.missing_eos_penalty, checkpoint.every_iterations).
struct RlSettings {
    GroupAdvantage advantage = GroupAdvantage::rloo;
    int64_t iterations = 0, prompts_per_iteration = 0, samples_per_prompt = 0, updates_per_iteration = 0;
    int64_t interrupt_iteration = 0, checkpoint_every = 0;
    double lr = 0, warmup_ratio = 0, min_lr_ratio = 0, clip_epsilon = 0.2, clip = 1;
    AdamWConfig adam;
    RewardConfig reward;  // rl.beta, PPO's missing-EOS rule
    uint64_t sampler_seed = 0, generation_seed = 0;
    int64_t chunks = 1;  // parallel.chunks: of the slots and of each update's rows
    static RlSettings read(const StudyConfig& config);
    std::string stage() const { return group_advantage_name(advantage); }  // the folder: rloo | grpo
};

// Writes RUN/<rloo|grpo>/<mode>.state.gz, <mode>.json, <mode>.metrics.jsonl,
// rollouts/<mode>/iteration-NNN.json (and final/actor for the continuous
// run). Needs RUN/sft/final and RUN/reward/final. Returns the stage report.
json run_rl(const Study& study, StageMode mode);

class RlRun {
public:
    RlRun(const Study& study, const FaultHooks& hooks, fs::path rollout_dir);
    RlRun(const RlRun&) = delete;  // the models point into the roles, the scorers into the models
    RlRun& operator=(const RlRun&) = delete;

    void iterate();  // steps 1–6

    ResumeState exact_state();
    void restore(const ResumeState& state, const fs::path& from);
    void check_roles(int64_t done);  // the frozen unchanged, the policy changed

    const RlSettings& settings() const { return cfg_; }
    const json& identity() const { return identity_; }
    int64_t iteration() const { return pos_.iteration; }
    int64_t updates() const { return pos_.updates; }
    const json& history() const { return pos_.history; }
    const json& consumed() const { return pos_.consumed; }
    Role& policy() { return policy_.role; }
    const std::string& reference_identity() const { return reference_.initial_identity; }
    const std::string& judge_identity() const { return judge_.initial_identity; }
    json phase_totals = json::object();  // seconds per phase over this process's iterations (not in the state)

    // The steps of iterate, in order.
    struct GroupRewards {
        std::vector<double> rewards, advantages;  // R_i and A_i, one per response, in slot order
    };
    std::vector<Rollout> rollout();                                 // 1.–2. (by chunks of slots)
    void score(std::vector<Rollout>& chunk);                        // 2.
    GroupRewards advantages(std::vector<Rollout>& rollouts) const;  // 3.–4.
    json update(const std::vector<Rollout>& rollouts);              // 5. the updates' log
    void record(const std::vector<Rollout>& rollouts, const GroupRewards& g, const json& update_log);  // 6.

    // The stream tag of the slot generators (rollouts.h slot_generator).
    static constexpr uint64_t kSlotStreamTag = 6;

private:
    std::string where() const;  // "rloo iteration N" of the iteration being run
    // One chunk of an update: rows [begin, end) of the rollouts; the
    // iteration's first update checks the re-score against old_logp.
    ChunkOutput policy_chunk(const std::vector<Rollout>& rollouts, int64_t begin, int64_t end, const std::string& where,
                             bool first_update);
    void add_seconds(const char* phase, Clock::time_point started);

    const Study& s_;
    const FaultHooks& hooks_;
    const fs::path rollout_dir_;
    const RlSettings cfg_;
    RoleModel policy_, reference_, judge_;
    RolloutPrompts prompts_;
    Schedule schedule_;
    ParamList params_;
    AdamW opt_;
    Philox sampler_;
    json identity_;
    OnlinePosition pos_;  // the position: prompt order, iterations, updates, history, consumed ids
};

}  // namespace ppolab
