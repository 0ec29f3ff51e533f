// losses.h — the supervised losses of the study (SPEC §3) and DPO's (§12),
// each with its gradient, as small pure functions.
#pragma once
#include <cstdint>

namespace ppolab {

// SFT cross-entropy of one accumulation group: the summed negative
// log-likelihood of every active response token (EOS included) divided by
// `denominator`, the total number of active tokens of the whole group — not
// a mean of per-example means. logp and mask are (n) by position; dlogp (n)
// receives ∂loss/∂logp (−1/denominator at active positions, 0 elsewhere).
double sft_token_loss(const float* logp, const uint8_t* response_mask, int64_t n, double denominator, float* dlogp);

// Bradley–Terry: P(chosen ≻ rejected) = σ(r_c − r_r), loss = −mean log σ(r_c − r_r)
// over n pairs (computed as softplus(−margin), stable for any margin).
// dchosen, drejected (n) receive the gradients (may be nullptr).
// `denominator` (0: n) divides the sum instead of n: a chunk of an update
// divides by the update's pair count, so the chunks' losses add up to it.
double bradley_terry_loss(const float* chosen, const float* rejected, int64_t n, float* dchosen, float* drejected,
                          double denominator = 0);

// DPO (Rafailov et al. 2023) over n pairs, from the summed response
// log-probabilities (EOS included) of the policy π and the frozen reference
// ρ for the chosen (c) and rejected (r) response of each pair:
//   z_i = β [(π_c − ρ_c) − (π_r − ρ_r)],   loss = mean_i softplus(−z_i)
// (= −mean log σ(z_i)); ∂loss/∂π_c = −β σ(−z_i)/n, ∂loss/∂π_r = +β σ(−z_i)/n,
// the reference gets none. At β → 0 or y_c = y_r the loss is log 2. The
// implicit rewards β(π − ρ) of each answer (and z, their margin) are what the
// stage logs. Outputs may be nullptr; n ≥ 1, β > 0. `denominator` (0: n)
// divides instead of n, as bradley_terry_loss's.
struct DpoPairTerms {
    double chosen_reward = 0, rejected_reward = 0, margin = 0;  // β(π_c − ρ_c), β(π_r − ρ_r), z
};
double dpo_loss(const double* policy_chosen, const double* policy_rejected, const double* reference_chosen,
                const double* reference_rejected, int64_t n, double beta, double* dchosen, double* drejected,
                DpoPairTerms* terms, double denominator = 0);

}  // namespace ppolab
