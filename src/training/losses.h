// losses.h — the two supervised losses of the study (SPEC §3), each with its
// gradient, as small pure functions.
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
double bradley_terry_loss(const float* chosen, const float* rejected, int64_t n, float* dchosen, float* drejected);

}  // namespace ppolab
