// lm_head.h — log-probabilities of chosen tokens under the output layer,
// computed in chunks of rows so that the (N × vocab) logits never exist at
// once (vocab 151936 × 1280 rows would be 0.8 GB).
//
//   logits[n] = h[n] · Wᵀ (W: (V, H), BF16 or FP32; see matmul.h)
//   logp[n]   = logits[n][target[n]] − logsumexp(logits[n])
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace ppolab {

// The logits of a forward kept for the backward of the same rows, so that
// training does not compute them twice (on the 0.5B shape the recompute was
// 88 ms of an 840 ms LoRA step: BENCHMARKS.md). Kept only while N × V
// floats fit in max_bytes; otherwise the backward recomputes them chunk by
// chunk as without a keeper. Either way the backward gets the same logits:
// the forward's chunks of rows are the ones a full recompute would make.
struct LmKeep {
    int64_t max_bytes = int64_t{1} << 30;
    std::vector<float> logits;  // (N, V) when valid
    std::vector<float> lse;     // (N) log-sum-exp of each row
    const float* h = nullptr;   // what they were computed from
    const void* w = nullptr;
    int64_t N = 0;
    bool valid = false;
};

// Rows go through the output layer in chunks of lm_chunk_rows(V): as many
// rows as fit in the chunk budget (160 MiB of logits: 256 rows of
// Qwen2.5's vocabulary of 151936), a multiple of 32, at least 64. Each chunk
// reads the whole weight once, so larger chunks read it fewer times; the
// forward, the backward and the recompute use the same chunks.
inline constexpr int64_t kLmChunkBytes = int64_t{160} << 20;
int64_t lm_chunk_rows(int64_t V);
// Sets the chunk budget in bytes (0: chunks of 64 rows, the engine before
// session 18) and returns the previous one. For tests and benchmarks
// (bench_model --ab-lm-chunk); the engine never changes it.
int64_t lm_set_chunk_bytes(int64_t bytes);

// h: (N, H) final hidden states; targets: (N) token ids in [0, V).
// keep (optional): receives the logits for the backward.
void lm_logprobs_forward(float* logp, const float* h, const int32_t* targets, WeightView W, int64_t N,
                         LmKeep* keep = nullptr);
// dh (N, H) is overwritten with Σ_n dlogp[n] · ∂logp[n]/∂h[n]; dW (V, H), if
// not nullptr, accumulates the FP32 weight gradient (W FP32, or the BF16
// copy of FP32 masters in mixed precision). keep: the forward's keeper of
// the same h, W and N, if any (used when valid; it may be overwritten).
void lm_logprobs_backward(float* dh, float* dW, const float* dlogp, const float* h, const int32_t* targets,
                          WeightView W, int64_t N, LmKeep* keep = nullptr);

// The per-row passes, the same bits on every path (AVX-512, AVX2, portable)
// and thread count. row_logsumexp: log Σ_i e^(z[i]) as max + log Σ_i
// e^(z[i] − max), the exp canon_expf (= simd::vexp lanes), the terms widened
// to double and summed in 16 interleaved lanes (lane i mod 16, i ascending)
// closed by the fixed tree of simd.h, the log canon_log.
float row_logsumexp(const float* z, int64_t n);
// z[i] ← e^(z[i] − lse) · (−g), elementwise with the same exp.
void row_scaled_softmax(float* z, int64_t n, float lse, float g);

}  // namespace ppolab
