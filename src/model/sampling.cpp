// sampling.cpp — the per-row passes over the vocabulary (sampling.h): the
// maximum, Σ_v e^{z_v − max} in float64, and the inverse-CDF scan, each with
// an AVX-512 (8 float64 lanes) and an AVX2 (4 lanes) copy of the portable
// loop, chosen at run time (simd.h). Every path gives the same bits: e^x is
// canon_exp (util/canon_math.h), which simd::vexp_f64 equals lane for lane;
// Σ is one association on every path — 16 interleaved partial sums (token v
// in lane v mod 16, v ascending) closed by simd.h's fixed tree; the scan
// adds the terms one at a time in token order on every path, so the first
// token whose cumulative sum passes u·Σ is the one picked; log is canon_log.
// A −0 maximum is made +0 (the max is otherwise exact in any order).
#include "model/sampling.h"

#include <cmath>

#include "kernels/lm_head.h"
#include "kernels/simd.h"
#include "util/canon_math.h"
#include "util/error.h"

namespace ppolab {

namespace {

// ------------------------------------------------------------ portable

double max_portable(const float* z, int64_t V) {
    double mx = -INFINITY;  // NaN entries never win (std::max keeps the first argument)
    for (int64_t i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(z[i]));
    return mx;
}

// e^{z_i − mx} for i ≥ from added to the 16 lanes (lane i mod 16), then the
// lanes closed (the portable loop, and the vector loop's tail).
double sum_exp_portable(const float* z, int64_t from, int64_t V, double mx, double* lanes) {
    for (int64_t i = from; i < V; ++i) lanes[i % 16] += canon_exp(static_cast<double>(z[i]) - mx);
    return simd::lanes16_close(lanes);
}

// The first token whose cumulative sum passes `target` (and whose term is
// positive); if rounding leaves the sum short, the last token with a
// positive term. From token `from` on, with the sum `cum` and that last
// token `pick` so far (the vector loop's tail); true when found.
bool pick_portable(const float* z, int64_t from, int64_t V, double mx, double target, double& cum, int64_t& pick) {
    for (int64_t i = from; i < V; ++i) {
        const double e = canon_exp(static_cast<double>(z[i]) - mx);
        if (e > 0) pick = i;
        cum += e;
        if (cum > target && e > 0) return true;
    }
    return false;
}

// ------------------------------------------------------------ vectors

template <class VF>
PPOLAB_SIMD_INLINE double max_simd(const float* z, int64_t V) {
    constexpr int64_t L = sizeof(VF) / sizeof(float);
    VF m = VF{} - INFINITY;
    int64_t i = 0;
    for (; i + L <= V; i += L) {
        const VF x = simd::vload<VF>(z + i);
        m = x > m ? x : m;  // NaN never wins, as in the portable loop
    }
    double mx = -INFINITY;
    for (int64_t l = 0; l < L; ++l) mx = std::max(mx, static_cast<double>(m[l]));
    for (; i < V; ++i) mx = std::max(mx, static_cast<double>(z[i]));
    return mx;
}

template <class VD, class VF>
PPOLAB_SIMD_INLINE double sum_exp_simd(const float* z, int64_t V, double mx) {
    constexpr int64_t L = sizeof(VD) / sizeof(double);
    simd::Lanes16<VD, double> acc;
    int64_t i = 0;
    for (; i + L <= V; i += L) acc.add(i, simd::vexp_f64(__builtin_convertvector(simd::vload<VF>(z + i), VD) - mx));
    double lanes[16];
    acc.store(lanes);
    return sum_exp_portable(z, i, V, mx, lanes);
}

template <class VD, class VF>
PPOLAB_SIMD_INLINE int64_t pick_simd(const float* z, int64_t V, double mx, double target) {
    constexpr int64_t L = sizeof(VD) / sizeof(double);
    double cum = 0;
    int64_t pick = -1, i = 0;
    for (; i + L <= V; i += L) {
        const VD e = simd::vexp_f64(__builtin_convertvector(simd::vload<VF>(z + i), VD) - mx);
        for (int64_t l = 0; l < L; ++l) {
            if (e[l] > 0) pick = i + l;
            cum += e[l];
            if (cum > target && e[l] > 0) return i + l;
        }
    }
    pick_portable(z, i, V, mx, target, cum, pick);
    return pick;
}

PPOLAB_SIMD_AVX512 double max_avx512(const float* z, int64_t V) { return max_simd<simd::vf16>(z, V); }
PPOLAB_SIMD_AVX512 double sum_exp_avx512(const float* z, int64_t V, double mx) {
    return sum_exp_simd<simd::vd8, simd::vf8>(z, V, mx);
}
PPOLAB_SIMD_AVX512 int64_t pick_avx512(const float* z, int64_t V, double mx, double target) {
    return pick_simd<simd::vd8, simd::vf8>(z, V, mx, target);
}
PPOLAB_SIMD_AVX2 double max_avx2(const float* z, int64_t V) { return max_simd<simd::vf8>(z, V); }
PPOLAB_SIMD_AVX2 double sum_exp_avx2(const float* z, int64_t V, double mx) {
    return sum_exp_simd<simd::vd4, simd::vf4>(z, V, mx);
}
PPOLAB_SIMD_AVX2 int64_t pick_avx2(const float* z, int64_t V, double mx, double target) {
    return pick_simd<simd::vd4, simd::vf4>(z, V, mx, target);
}

// ------------------------------------------------------------ dispatch

double max_logit(const float* logits, int64_t V) {
    const double mx = simd::simd_has_avx512() ? max_avx512(logits, V)
                      : simd::simd_has_avx2() ? max_avx2(logits, V)
                                              : max_portable(logits, V);
    if (!std::isfinite(mx)) fail("sampling: logits are not finite (max ", mx, ")");
    return mx + 0.0;  // a −0 maximum made +0
}

double sum_exp(const float* logits, int64_t V, double mx) {
    if (simd::simd_has_avx512()) return sum_exp_avx512(logits, V, mx);
    if (simd::simd_has_avx2()) return sum_exp_avx2(logits, V, mx);
    double lanes[16] = {};
    return sum_exp_portable(logits, 0, V, mx, lanes);
}

int64_t pick(const float* logits, int64_t V, double mx, double target) {
    if (simd::simd_has_avx512()) return pick_avx512(logits, V, mx, target);
    if (simd::simd_has_avx2()) return pick_avx2(logits, V, mx, target);
    double cum = 0;
    int64_t i = -1;
    pick_portable(logits, 0, V, mx, target, cum, i);
    return i;
}

// The chosen token's log-prob exactly as the trainer computes it for the same
// logits (lm_logprobs_forward: z[token] − row_logsumexp(z), in FP32), so a
// rollout's sampling log-probs are its teacher-forced ones bit for bit.
float token_logprob(const float* logits, int64_t V, int64_t token) { return logits[token] - row_logsumexp(logits, V); }

}  // namespace

double log_softmax_at(const float* logits, int64_t V, int64_t token) {
    PPOLAB_ASSERT(token >= 0 && token < V);
    const double mx = max_logit(logits, V);
    return static_cast<double>(logits[token]) - mx - canon_log(sum_exp(logits, V, mx));
}

SampledToken sample_greedy(const float* logits, int64_t V) {
    PPOLAB_ASSERT(V > 0);
    const double mx = max_logit(logits, V);  // the largest logit (an error if none is finite)
    int64_t best = 0;
    while (static_cast<double>(logits[best]) != mx) ++best;  // the first: ties keep the lowest id
    return {static_cast<int32_t>(best), token_logprob(logits, V, best)};
}

SampledToken sample_temperature1(const float* logits, int64_t V, Philox& rng) {
    return sample_temperature1_at(logits, V, rng.uniform());
}

SampledToken sample_temperature1_at(const float* logits, int64_t V, double u) {
    PPOLAB_ASSERT(V > 0);
    const double mx = max_logit(logits, V);
    const double z = sum_exp(logits, V, mx);
    const int64_t i = pick(logits, V, mx, u * z);  // u · Σ exp: the CDF without dividing every term
    PPOLAB_ASSERT(i >= 0);
    return {static_cast<int32_t>(i), token_logprob(logits, V, i)};
}

}  // namespace ppolab
