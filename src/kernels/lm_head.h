// lm_head.h — log-probabilities of chosen tokens under the output layer,
// computed in chunks of rows so that the (N × vocab) logits never exist at
// once (vocab 151936 × 1280 rows would be 0.8 GB).
//
//   logits[n] = h[n] · Wᵀ (W: (V, H), BF16 or FP32; see matmul.h)
//   logp[n]   = logits[n][target[n]] − logsumexp(logits[n])
#pragma once
#include <cstdint>

#include "kernels/matmul.h"

namespace ppolab {

// h: (N, H) final hidden states; targets: (N) token ids in [0, V).
void lm_logprobs_forward(float* logp, const float* h, const int32_t* targets, WeightView W, int64_t N);
// dh (N, H) is overwritten with Σ_n dlogp[n] · ∂logp[n]/∂h[n]; dW (V, H), if
// not nullptr, accumulates the FP32 weight gradient (W FP32, or the BF16
// copy of FP32 masters in mixed precision).
void lm_logprobs_backward(float* dh, float* dW, const float* dlogp, const float* h, const int32_t* targets,
                          WeightView W, int64_t N);

}  // namespace ppolab
