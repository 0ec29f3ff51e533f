// sampling.h — choosing the next token from a row of logits.
//
// Greedy: argmax, ties to the lowest id; consumes no randomness.
// Temperature 1: the full vocabulary, no top-k/top-p, no suppression. One
// Philox uniform u per sampled token; the token is the first i with
// Σ_{j≤i} p_j > u (inverse CDF), p the float64 softmax of the logits. The
// generator's (seed, stream, counter) is its whole state, so a resumed run
// draws the same tokens.
// Both return the token's log-prob under the logits, log_softmax(logits)[token],
// computed as the trainer computes it (lm_head.h: z[token] − row_logsumexp(z)
// in FP32), so a sampled token's log-prob is its teacher-forced one bit for
// bit wherever the logits are (numerics.h: decode = prefill).
#pragma once
#include <cstdint>

#include "util/rng.h"

namespace ppolab {

struct SampledToken {
    int32_t token = -1;
    float logp = 0;  // log_softmax(logits)[token], lm_head.h's arithmetic
};

SampledToken sample_greedy(const float* logits, int64_t V);
SampledToken sample_temperature1(const float* logits, int64_t V, Philox& rng);
// The same with the uniform u in [0, 1) given: sample_temperature1(logits, V,
// rng) is sample_temperature1_at(logits, V, rng.uniform()), so a batch can
// draw its rows' uniforms in row order and pick their tokens in parallel.
SampledToken sample_temperature1_at(const float* logits, int64_t V, double u);
// log_softmax(logits)[token], computed in float64.
double log_softmax_at(const float* logits, int64_t V, int64_t token);

}  // namespace ppolab
