// sequence_kl.h — the exact KL divergence between two policies along given
// sequences (SPEC §12: snapshots placed by d = √KL(π‖π_SFT)), forward only.
//
// For each row of a scoring batch (scoring.h: prompt, response with EOS
// when it ended the row), both models are teacher-forced over the same
// tokens and, at every response position t (EOS included),
//   kl_exact = Σ_t Σ_v p(v | <t) (log p(v | <t) − log q(v | <t))   full vocabulary
//   kl_k1    = Σ_t (log p(y_t | <t) − log q(y_t | <t))             the sampled token only
// with p the policy and q the reference. The logits are FP32 (qwen2.h);
// log-softmax, the products and every sum are float64. Rows of logits are
// made kSequenceKlChunk at a time: (B·T × vocab) logits never exist.
// Two models with bit-identical logits give exactly 0 for both.
#pragma once
#include <cstdint>
#include <vector>

#include "model/qwen2.h"
#include "model/scoring.h"

namespace ppolab {

inline constexpr int64_t kSequenceKlChunk = 64;  // response positions whose logits exist at once

struct SequenceKl {
    double kl_exact = 0;  // Σ_t KL(p(·|<t) ‖ q(·|<t)), ≥ 0
    double kl_k1 = 0;     // Σ_t log p(y_t|<t) − log q(y_t|<t) (the k1 estimator of the same)
};

// One entry per batch row. Error for a packed pair batch, a batch whose
// shape is inconsistent, or two models whose vocabularies differ.
std::vector<SequenceKl> sequence_kl(Qwen2& policy, Qwen2& reference, const ScoringBatch& batch);
// The same from both models' final hidden states at the rows that produce
// the response tokens (hp, hq: (M, H), M = response_positions(batch).size(),
// in that order; what Scorer::selected_hidden holds after response_logprobs
// over the same batch): bit for bit the result above, without running the
// two forwards again. Wp, Wq: the models' output matrices.
std::vector<SequenceKl> sequence_kl(const std::vector<float>& hp, const std::vector<float>& hq, WeightView Wp,
                                    WeightView Wq, const ScoringBatch& batch);

// The per-position terms of one position from its two logit rows (V):
// {Σ_v p_v (log p_v − log q_v), log p_target − log q_target}, in float64.
SequenceKl position_kl(const float* policy_logits, const float* reference_logits, int64_t V, int32_t target);

}  // namespace ppolab
