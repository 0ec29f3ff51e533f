// ppo.h — PPO against the frozen judge (SPEC §2, §4–§6): four roles on one
// frozen base, rollouts with the per-token numbers kept, two explicit
// losses (ppo_math.h), and a checkpoint only at iteration boundaries so a
// resumed run repeats no rollout and ends bit-for-bit where a continuous one
// ends.
//
// One iteration:
//   1. rollout    4 prompts (seeded permutation + cursor), temperature-1
//                 full-vocabulary sampling, old_logp of every sampled token
//   2. score      reference log-probs, critic values before each token,
//                 the judge's score at the last active token
//   3. rewards    −β(old_logp − ref_logp) per token, score (or −1) at the end
//   4. advantages GAE (γ, λ), returns = A + V_old
//   5. update ×2  actor: clipped surrogate; critic: ½(V − R)²; each its own
//                 AdamW, clip 1, its own schedule
//   6. record     metrics (TRL names), the rollouts with their per-token table
#pragma once
#include "training/study.h"
#include "training/warmstart.h"
#include "util/json.h"

namespace ppolab {

// Writes RUN/ppo/<mode>.state.gz, <mode>.json, <mode>.metrics.jsonl,
// rollouts/<mode>/iteration-NNN.json (and final/actor, final/critic for the
// continuous run). `interrupt` stops after ppo.interrupt_iteration
// iterations; `resume` continues from the interrupt state.
json run_ppo(const Study& study, StageMode mode);

}  // namespace ppolab
