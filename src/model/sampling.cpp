// sampling.cpp — the per-row passes over the vocabulary (sampling.h): the
// maximum, Σ_v e^{z_v − max} in float64, and the inverse-CDF scan, each with
// an AVX-512 (8 float64 lanes) and an AVX2 (4 lanes) copy of the portable
// loop, chosen at run time (simd.h). The vector copies take e^x from
// simd::vexp_f64 (within 2 ulp of std::exp) and sum Σ in lanes, so their
// log-probs may differ from the portable loop's in the last bits; the scan
// adds the terms one at a time in token order, as the portable loop does, so
// the first token whose cumulative sum passes u·Σ is the one picked.
#include "model/sampling.h"

#include <cmath>

#include "kernels/simd.h"
#include "util/error.h"

namespace ppolab {

namespace {

// ------------------------------------------------------------ portable

double max_portable(const float* z, int64_t V) {
    double mx = -INFINITY;  // NaN entries never win (std::max keeps the first argument)
    for (int64_t i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(z[i]));
    return mx;
}

// Σ_{i ≥ from} e^{z_i − mx} added to s (the portable loop, and the vector loop's tail).
double sum_exp_portable(const float* z, int64_t from, int64_t V, double mx, double s = 0) {
    for (int64_t i = from; i < V; ++i) s += std::exp(static_cast<double>(z[i]) - mx);
    return s;
}

// The first token whose cumulative sum passes `target` (and whose term is
// positive); if rounding leaves the sum short, the last token with a
// positive term. From token `from` on, with the sum `cum` and that last
// token `pick` so far (the vector loop's tail); true when found.
bool pick_portable(const float* z, int64_t from, int64_t V, double mx, double target, double& cum, int64_t& pick) {
    for (int64_t i = from; i < V; ++i) {
        const double e = std::exp(static_cast<double>(z[i]) - mx);
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
    VD acc{};
    int64_t i = 0;
    for (; i + L <= V; i += L) acc += simd::vexp_f64(__builtin_convertvector(simd::vload<VF>(z + i), VD) - mx);
    double s = 0;
    for (int64_t l = 0; l < L; ++l) s += acc[l];
    return sum_exp_portable(z, i, V, mx, s);
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
    return mx;
}

double sum_exp(const float* logits, int64_t V, double mx) {
    if (simd::simd_has_avx512()) return sum_exp_avx512(logits, V, mx);
    if (simd::simd_has_avx2()) return sum_exp_avx2(logits, V, mx);
    return sum_exp_portable(logits, 0, V, mx);
}

int64_t pick(const float* logits, int64_t V, double mx, double target) {
    if (simd::simd_has_avx512()) return pick_avx512(logits, V, mx, target);
    if (simd::simd_has_avx2()) return pick_avx2(logits, V, mx, target);
    double cum = 0;
    int64_t i = -1;
    pick_portable(logits, 0, V, mx, target, cum, i);
    return i;
}

}  // namespace

double log_softmax_at(const float* logits, int64_t V, int64_t token) {
    PPOLAB_ASSERT(token >= 0 && token < V);
    const double mx = max_logit(logits, V);
    return static_cast<double>(logits[token]) - mx - std::log(sum_exp(logits, V, mx));
}

SampledToken sample_greedy(const float* logits, int64_t V) {
    PPOLAB_ASSERT(V > 0);
    const double mx = max_logit(logits, V);  // the largest logit (an error if none is finite)
    int64_t best = 0;
    while (static_cast<double>(logits[best]) != mx) ++best;  // the first: ties keep the lowest id
    return {static_cast<int32_t>(best),
            static_cast<float>(static_cast<double>(logits[best]) - mx - std::log(sum_exp(logits, V, mx)))};
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
    const double logp = static_cast<double>(logits[i]) - mx - std::log(z);
    return {static_cast<int32_t>(i), static_cast<float>(logp)};
}

}  // namespace ppolab
