// ppo.h — PPO against the frozen judge (SPEC §2, §4–§6): four roles on one
// frozen base, rollouts with the per-token numbers kept, two explicit
// losses (ppo_math.h), and a checkpoint only at iteration boundaries so a
// resumed run repeats no rollout and ends bit-for-bit where a continuous one
// ends.
//
// One iteration (PpoRun::iterate):
//   1. rollout    4 prompts (seeded permutation + cursor), temperature-1
//                 full-vocabulary sampling (slot-keyed streams), old_logp of
//                 every sampled token
//   2. score      reference log-probs, critic values before each token,
//                 the judge's score at the last active token
//   (1–2 run chunk by chunk of slots, parallel.chunks, on the ranks that own
//   them; every rank then holds every rollout and runs 3–6 identically, the
//   gradients of 5 summed in chunk order: chunked_update.h)
//   3. rewards    −β(old_logp − ref_logp) per token, score (or −1) at the end
//   4. advantages GAE (γ, λ), returns = A + V_old
//   5. update ×2  actor: clipped surrogate; critic: ½(V − R)²; each its own
//                 AdamW, clip 1, its own schedule
//   (the design switches, off in the seed: whitening after 4, value clipping
//   and k3 in the losses of 5; ppo_math.h 7–9)
//   6. record     metrics (TRL names), the rollouts with their per-token table
//
// run_ppo wraps the iterations in the stage lifecycle (stage_lifecycle.h):
// restore, checkpoints, the exact state and the report.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "data/corpus.h"
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

namespace ppolab {

// Writes RUN/ppo/<mode>.state.gz, <mode>.json, <mode>.metrics.jsonl,
// (RUN/<PpoSettings::stage()>/… with a design switch on)
// rollouts/<mode>/iteration-NNN.json (and final/actor, final/critic for the
// continuous run). `interrupt` stops after ppo.interrupt_iteration
// iterations; `resume` continues from the interrupt state.
// The continuous run also saves the actor every ppo.snapshot_every
// iterations i (0 < i < ppo.iterations) to RUN/ppo/snapshots/iteration-NNNN
// (save_role, as final/actor): read-only, it changes no number. A fresh
// start removes the folder (a killed attempt's); a restart from a crash
// checkpoint keeps it: a snapshot it reaches again must be byte-identical
// (Error otherwise), and half-written ones (".*" temporaries: a snapshot
// is renamed into place complete) are removed.
json run_ppo(const Study& study, StageMode mode);

// Every PPO setting, read once from the config ("ppo." keys, adamw.*, checkpoint.every_iterations).
struct PpoSettings {
    int64_t iterations = 0, prompts_per_iteration = 0, updates_per_iteration = 0, interrupt_iteration = 0;
    double actor_lr = 0, critic_lr = 0, warmup_ratio = 0, min_lr_ratio = 0;
    AdamWConfig adam;     // adamw.beta1/beta2/eps, ppo.weight_decay
    RewardConfig reward;  // ppo.beta, ppo.missing_eos, ppo.missing_eos_penalty, ppo.kl_penalty
    double gamma = 1, lambda = 1, clip_epsilon = 0.2, value_loss_coef = 0.5, clip = 1;
    // The design switches of ppo_math.h (7–9), off in the seed.
    bool whiten_advantages = false, value_clipping = false;
    double cliprange_value = 0.2;
    uint64_t sampler_seed = 0, generation_seed = 0;
    int64_t checkpoint_every = 0;                        // checkpoint.every_iterations
    int64_t snapshot_every = 0;                          // ppo.snapshot_every (continuous mode only)
    int64_t chunks = 1;                                  // parallel.chunks: of the slots and of each update's rows
    static PpoSettings read(const StudyConfig& config);  // Error unless ppo.temperature is 1
    // The switches as every identity block and report names them.
    json design_switches() const;
    // The stage's folder: "ppo" with every switch as in the seed, else
    // "ppo-" and the switches on, in this order: whiten, vclip, k3
    // ("ppo-whiten", "ppo-vclip-k3", …). missing_eos does not rename it.
    std::string stage() const;
};

// Steps 3–4 summed over the rollouts of one iteration (means over responses).
struct RolloutStats {
    double mean_score = 0, mean_kl = 0, mean_non_score = 0, mean_len = 0;
    int64_t num_eos = 0;
    std::vector<double> all_returns, all_values;  // every token's, for val/explained_variance
};
// Step 5 over the updates of one iteration.
struct UpdateStats {
    json log = json::array();                                            // one entry per update
    double clipfrac = 0, approxkl = 0, policy_loss = 0, value_loss = 0;  // sums over the updates
};

// The four roles, their optimisers and the position of the stage: one PPO
// run, one iteration at a time.
class PpoRun {
public:
    // Loads the roles (RUN/sft/final, RUN/reward/final) and the rollout
    // prompts; rollout files go to `rollout_dir`.
    PpoRun(const Study& study, const FaultHooks& hooks, fs::path rollout_dir);
    PpoRun(const PpoRun&) = delete;
    PpoRun& operator=(const PpoRun&) = delete;

    // One iteration, steps 1–6; returns its rollouts.
    std::vector<Rollout> iterate();

    std::vector<Rollout> rollout();                                                                  // 1.–2.
    void score(std::vector<Rollout>& chunk);                                                         // 2.
    RolloutStats advantages(std::vector<Rollout>& rollouts) const;                                   // 3.–4.
    UpdateStats update(const std::vector<Rollout>& rollouts);                                        // 5.
    void record(const std::vector<Rollout>& rollouts, const RolloutStats& r, const UpdateStats& u);  // 6.

    // The stream tag of PPO's slot generators (rollouts.h slot_generator).
    static constexpr uint64_t kSlotStreamTag = 4;

    // The state at an iteration boundary (SPEC §6): the same at the end and in checkpoints.
    ResumeState exact_state();
    void restore(const ResumeState& state, const fs::path& from);
    // The frozen roles and base unchanged, the learners changed (after `done` iterations).
    void check_roles(int64_t done);

    const PpoSettings& settings() const { return cfg_; }
    const json& identity() const { return identity_; }
    int64_t iteration() const { return pos_.iteration; }
    int64_t updates() const { return pos_.updates; }
    const json& history() const { return pos_.history; }
    const json& consumed() const { return pos_.consumed; }
    Role& actor() { return actor_.role; }
    Role& critic() { return critic_.role; }
    Role& reference() { return reference_.role; }
    Role& judge() { return judge_.role; }
    const std::string& reference_identity() const { return reference_.initial_identity; }
    const std::string& judge_identity() const { return judge_.initial_identity; }

    // Beside the exact state: per-iteration phase seconds ({"iteration",
    // "seconds": {phase: s}}) and the re-score probe of the report (per-token
    // sampling vs teacher-forced log-probs before the first update).
    json iteration_seconds = json::array();
    json rescore_probe = json();

private:
    void check_isolation();
    // Step 1–2's checks over every rollout, in slot order, on every rank.
    void check_rollouts(std::vector<Rollout>& rollouts) const;
    // One chunk of an update: rows [begin, end) of the rollouts.
    ChunkOutput actor_chunk(const std::vector<Rollout>& rollouts, int64_t begin, int64_t end, int64_t u,
                            const std::string& where);
    ChunkOutput critic_chunk(const std::vector<Rollout>& rollouts, int64_t begin, int64_t end, int64_t u,
                             const std::string& where);
    void add_seconds(const char* phase, double seconds);

    const Study& s_;
    const FaultHooks& hooks_;
    const fs::path rollout_dir_;
    const PpoSettings cfg_;
    // Four roles (SPEC §2): actor and critic from SFT, reference an independent
    // frozen SFT copy, the judge frozen. The BF16 base is shared read-only.
    RoleModel actor_, reference_, critic_, judge_;
    RolloutPrompts prompts_;
    Schedule actor_schedule_, critic_schedule_;
    ParamList actor_params_, critic_params_;
    AdamW actor_opt_, critic_opt_;
    Philox sampler_;
    json identity_;
    OnlinePosition pos_;  // the position: prompt order, iterations, updates, history, consumed ids
    json phase_seconds_;  // this iteration's
    // The critic's values (B, T) of the whole iteration's batch from step 2,
    // whose forward kept its activations: the first update's critic forward
    // would compute these very values (same weights, same batch), so it runs
    // the backward on them instead. Empty when the rollouts were scored in
    // several chunks (parallel.chunks > 1) and after the first update.
    std::vector<float> fresh_values_;
};

}  // namespace ppolab
