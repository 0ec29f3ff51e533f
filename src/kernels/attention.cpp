// attention.cpp — grouped-query causal self-attention over left-padded rows
// (see attention.h).
//   S[t,s] = q[t]·k[s] / √hd  for s ≤ t with mask[s] = 1 (others excluded)
//   P[t,:] = softmax(S[t,:]),  out[t] = Σ_s P[t,s] v[s];  padded query rows: out = 0, P = 0
// Backward (per query head, real row t):
//   dP[t,s] = dout[t]·v[s],  dS[t,s] = P[t,s] (dP[t,s] − Σ_s' P[t,s'] dP[t,s'])
//   dq[t] = Σ_s dS[t,s] k[s] / √hd,  dk[s] += Σ_t dS[t,s] q[t] / √hd,  dv[s] += Σ_t P[t,s] dout[t]
// The KV heads of a group collect the gradients of all its query heads; the
// backward runs one (batch row, KV head) per task so no two threads write
// the same dk/dv.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "util/error.h"

namespace ppolab {

static void attention_check(const AttentionShape& s) {
    if (s.B < 0 || s.T < 0 || s.nH <= 0 || s.nKV <= 0 || s.hd <= 0)
        fail("attention: bad shape B=", s.B, " T=", s.T, " nH=", s.nH, " nKV=", s.nKV, " hd=", s.hd);
    if (s.nH % s.nKV != 0) fail("attention: nH (", s.nH, ") must be a multiple of nKV (", s.nKV, ")");
}

// Threads only pay off above ~0.1 MFLOP (tiny test shapes run inline).
static bool attention_parallel(const AttentionShape& s) { return s.B * s.nH * s.T * s.T * s.hd > 65536; }

template <typename T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const uint8_t* mask,
                       AttentionShape s) {
    // out (B, T, nH, hd); probs (B, nH, T, T); q (B, T, nH, hd); k, v (B, T, nKV, hd); mask (B, T)
    attention_check(s);
    const int64_t B = s.B, Tn = s.T, nH = s.nH, nKV = s.nKV, hd = s.hd, group = nH / nKV;
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (attention_parallel(s))
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < nH; ++h) {
            const int64_t kvh = h / group;
            const uint8_t* mb = mask + b * Tn;  // (T)
            for (int64_t t = 0; t < Tn; ++t) {
                T* p = probs + ((b * nH + h) * Tn + t) * Tn;   // (T)
                T* o = out + ((b * Tn + t) * nH + h) * hd;     // (hd)
                std::fill(p, p + Tn, T(0));
                std::fill(o, o + hd, T(0));
                if (!mb[t]) continue;
                const T* qt = q + ((b * Tn + t) * nH + h) * hd;  // (hd)
                T mx = -std::numeric_limits<T>::infinity();
                for (int64_t j = 0; j <= t; ++j) {
                    if (!mb[j]) continue;
                    const T* kj = k + ((b * Tn + j) * nKV + kvh) * hd;  // (hd)
                    T dot = 0;
#pragma omp simd reduction(+ : dot)
                    for (int64_t d = 0; d < hd; ++d) dot += qt[d] * kj[d];
                    p[j] = dot * scale;
                    mx = std::max(mx, p[j]);
                }
                T sum = 0;
                for (int64_t j = 0; j <= t; ++j) {
                    if (!mb[j]) continue;
                    p[j] = std::exp(p[j] - mx);
                    sum += p[j];
                }
                const T inv = T(1) / sum;
                for (int64_t j = 0; j <= t; ++j) {
                    if (!mb[j]) continue;
                    p[j] *= inv;
                    const T* vj = v + ((b * Tn + j) * nKV + kvh) * hd;  // (hd)
                    const T pj = p[j];
#pragma omp simd
                    for (int64_t d = 0; d < hd; ++d) o[d] += pj * vj[d];
                }
            }
        }
}

template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q, const T* k,
                        const T* v, const uint8_t* mask, AttentionShape s) {
    // dq (B, T, nH, hd), dk, dv (B, T, nKV, hd): overwritten; dout (B, T, nH, hd);
    // probs (B, nH, T, T); q (B, T, nH, hd); k, v (B, T, nKV, hd); mask (B, T)
    attention_check(s);
    const int64_t B = s.B, Tn = s.T, nH = s.nH, nKV = s.nKV, hd = s.hd, group = nH / nKV;
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
#pragma omp parallel if (attention_parallel(s))
    {
        std::vector<T> ds(static_cast<size_t>(Tn));  // (T) dS of one row
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int64_t b = 0; b < B; ++b)
            for (int64_t kvh = 0; kvh < nKV; ++kvh) {
                const uint8_t* mb = mask + b * Tn;  // (T)
                for (int64_t t = 0; t < Tn; ++t) {
                    std::fill_n(dk + ((b * Tn + t) * nKV + kvh) * hd, hd, T(0));
                    std::fill_n(dv + ((b * Tn + t) * nKV + kvh) * hd, hd, T(0));
                }
                for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
                    for (int64_t t = 0; t < Tn; ++t) {
                        T* dqt = dq + ((b * Tn + t) * nH + h) * hd;  // (hd)
                        std::fill_n(dqt, hd, T(0));
                        if (!mb[t]) continue;
                        const T* p = probs + ((b * nH + h) * Tn + t) * Tn;  // (T)
                        const T* go = dout + ((b * Tn + t) * nH + h) * hd;  // (hd)
                        const T* qt = q + ((b * Tn + t) * nH + h) * hd;     // (hd)
                        T dot_pdp = 0;
                        for (int64_t j = 0; j <= t; ++j) {
                            if (!mb[j]) continue;
                            const T* vj = v + ((b * Tn + j) * nKV + kvh) * hd;  // (hd)
                            T dp = 0;
#pragma omp simd reduction(+ : dp)
                            for (int64_t d = 0; d < hd; ++d) dp += go[d] * vj[d];
                            ds[j] = dp;
                            dot_pdp += p[j] * dp;
                        }
                        for (int64_t j = 0; j <= t; ++j) {
                            if (!mb[j]) continue;
                            const T dsj = p[j] * (ds[j] - dot_pdp) * scale;
                            const T pj = p[j];
                            const T* kj = k + ((b * Tn + j) * nKV + kvh) * hd;  // (hd)
                            T* dkj = dk + ((b * Tn + j) * nKV + kvh) * hd;      // (hd)
                            T* dvj = dv + ((b * Tn + j) * nKV + kvh) * hd;      // (hd)
#pragma omp simd
                            for (int64_t d = 0; d < hd; ++d) {
                                dqt[d] += dsj * kj[d];
                                dkj[d] += dsj * qt[d];
                                dvj[d] += pj * go[d];
                            }
                        }
                    }
            }
    }
}

void attention_decode(float* out, const float* q, const float* kcache, const float* vcache,
                      const uint8_t* cache_mask, int64_t B, int64_t S, int64_t S_max, int64_t nH,
                      int64_t nKV, int64_t hd) {
    // out (B, nH, hd); q (B, nH, hd); kcache, vcache (B, S_max, nKV, hd); cache_mask (B, S_max)
    attention_check({B, S, nH, nKV, hd});
    if (S < 1 || S > S_max) fail("attention_decode: filled length S=", S, " must be in [1, S_max=", S_max, "]");
    const int64_t group = nH / nKV;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
#pragma omp parallel if (B * nH * S * hd > 32768)
    {
        std::vector<float> p(static_cast<size_t>(S));  // (S) scores, then weights
#pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < nH; ++h) {
                const int64_t kvh = h / group;
                const uint8_t* mb = cache_mask + b * S_max;  // (S_max)
                float* o = out + (b * nH + h) * hd;          // (hd)
                std::fill_n(o, hd, 0.f);
                if (!mb[S - 1]) continue;  // the new token is padding: zeros, as attention_forward
                const float* qh = q + (b * nH + h) * hd;  // (hd)
                float mx = -std::numeric_limits<float>::infinity();
                for (int64_t j = 0; j < S; ++j) {
                    if (!mb[j]) continue;
                    const float* kj = kcache + ((b * S_max + j) * nKV + kvh) * hd;  // (hd)
                    float dot = 0;
#pragma omp simd reduction(+ : dot)
                    for (int64_t d = 0; d < hd; ++d) dot += qh[d] * kj[d];
                    p[j] = dot * scale;
                    mx = std::max(mx, p[j]);
                }
                float sum = 0;
                for (int64_t j = 0; j < S; ++j) {
                    if (!mb[j]) continue;
                    p[j] = std::exp(p[j] - mx);
                    sum += p[j];
                }
                const float inv = 1.f / sum;
                for (int64_t j = 0; j < S; ++j) {
                    if (!mb[j]) continue;
                    const float pj = p[j] * inv;
                    const float* vj = vcache + ((b * S_max + j) * nKV + kvh) * hd;  // (hd)
#pragma omp simd
                    for (int64_t d = 0; d < hd; ++d) o[d] += pj * vj[d];
                }
            }
    }
}

template void attention_forward<float>(float*, float*, const float*, const float*, const float*, const uint8_t*,
                                       AttentionShape);
template void attention_forward<double>(double*, double*, const double*, const double*, const double*,
                                        const uint8_t*, AttentionShape);
template void attention_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, const uint8_t*, AttentionShape);
template void attention_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, const uint8_t*, AttentionShape);

}  // namespace ppolab
