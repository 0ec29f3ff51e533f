// attention.cpp — grouped-query causal self-attention over left-padded rows
// (see attention.h).
//   S[t,s] = q[t]·k[s] / √hd  for s ≤ t with s visible to t (attention.h:
//            mask[s] = 1, or the same branch; others excluded)
//   P[t,:] = softmax(S[t,:]),  out[t] = Σ_s P[t,s] v[s];  padded query rows: out = 0, P = 0
// Backward (per query head, real row t):
//   dP[t,s] = dout[t]·v[s],  dS[t,s] = P[t,s] (dP[t,s] − Σ_s' P[t,s'] dP[t,s'])
//   dq[t] = Σ_s dS[t,s] k[s] / √hd,  dk[s] += Σ_t dS[t,s] q[t] / √hd,  dv[s] += Σ_t P[t,s] dout[t]
// The KV heads of a group collect the gradients of all its query heads; the
// backward runs one (batch row, KV head) per task so no two threads write
// the same dk/dv.
//
// One order of operations on every path (the float generic loops, AVX2,
// AVX-512, and the decode), so all give the same bits, whatever the thread
// count, the batch or the other rows (no FMA: -ffp-contract=off):
//   S[t,s]   = (Σ_d q[d]·k[d], d ascending, a product then a sum) · scale + 0
//   max      exact (any order); e = exp(S − max): simd::vexp / canon_expf
//   Σ_s e    one running sum over the visible keys, s ascending, from +0
//            (keys hidden by padding, the causal order or another branch add
//            exact zeros in the vector paths: no change); P = e · (1/Σ)
//   out[t]   = Σ_s P[t,s]·v[s], s ascending from +0 (masked or future keys
//            add exact zeros in the vector paths: no change)
//   dP       as S's dot; Σ_s P·dP one running sum, s ascending;
//            dS = P·(dP − Σ)·scale; dq = Σ_s dS·k (s ascending);
//            dk, dv: Σ over the group's heads ascending, then t ascending.
// attention_decode computes a position exactly as attention_forward does
// (same scores, same sums, same P·V order): decode = prefill. The sums run
// over keys, never over lanes by position, so a row's bytes do not depend on
// its left padding or on the branches packed beside it either (a rollout
// re-scored in another batch gives the sampler's bits).
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/simd.h"
#include "util/canon_math.h"
#include "util/error.h"

namespace ppolab {

static void attention_check(const AttentionShape& s) {
    if (s.B < 0 || s.T < 0 || s.nH <= 0 || s.nKV <= 0 || s.hd <= 0)
        fail("attention: bad shape B=", s.B, " T=", s.T, " nH=", s.nH, " nKV=", s.nKV, " hd=", s.hd);
    if (s.nH % s.nKV != 0) fail("attention: nH (", s.nH, ") must be a multiple of nKV (", s.nKV, ")");
}

// Threads only pay off above ~0.1 MFLOP (tiny test shapes run inline).
static bool attention_parallel(const AttentionShape& s) { return s.B * s.nH * s.T * s.T * s.hd > 65536; }

// e^x: canon_expf for float (simd::vexp's scalar twin), std::exp for double
// (gradient checks only: never a saved result).
template <typename T>
static T attention_exp(T x) {
    if constexpr (std::is_same_v<T, float>) return canon_expf(x);
    else return std::exp(x);
}

// Σ_d a[d]·b[d], d ascending, each product then a sum (the vector paths'
// order for every score and every dP).
template <typename T>
static T attention_dot(const T* a, const T* b, int64_t hd) {
    T dot = 0;
    for (int64_t d = 0; d < hd; ++d) dot += a[d] * b[d];
    return dot;
}

template <typename T>
static void attention_forward_generic(T* out, T* probs, const T* q, const T* k, const T* v, const uint8_t* mask,
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
                T* p = probs + ((b * nH + h) * Tn + t) * Tn;  // (T)
                T* o = out + ((b * Tn + t) * nH + h) * hd;    // (hd)
                std::fill(p, p + Tn, T(0));
                std::fill(o, o + hd, T(0));
                if (!mb[t]) continue;
                const T* qt = q + ((b * Tn + t) * nH + h) * hd;  // (hd)
                T mx = -std::numeric_limits<T>::infinity();
                for (int64_t j = 0; j <= t; ++j) {
                    if (!attention_visible(mb[j], mb[t])) continue;
                    const T* kj = k + ((b * Tn + j) * nKV + kvh) * hd;  // (hd)
                    p[j] = attention_dot(qt, kj, hd) * scale + T(0);    // + 0: as the vector path's bias
                    mx = p[j] > mx ? p[j] : mx;
                }
                T sum = 0;  // Σ_j e_j, j ascending
                for (int64_t j = 0; j <= t; ++j) {
                    if (!attention_visible(mb[j], mb[t])) continue;
                    p[j] = attention_exp(p[j] - mx);
                    sum += p[j];
                }
                const T inv = T(1) / sum;
                for (int64_t j = 0; j <= t; ++j) {  // out = Σ_j p_j v_j, j ascending
                    if (!attention_visible(mb[j], mb[t])) continue;
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
static void attention_backward_generic(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q, const T* k,
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
                        T dot_pdp = 0;                                      // Σ_j P·dP, j ascending
                        for (int64_t j = 0; j <= t; ++j) {
                            if (!attention_visible(mb[j], mb[t])) continue;
                            const T* vj = v + ((b * Tn + j) * nKV + kvh) * hd;  // (hd)
                            ds[j] = attention_dot(go, vj, hd);
                            dot_pdp += p[j] * ds[j];
                        }
                        for (int64_t j = 0; j <= t; ++j) {
                            if (!attention_visible(mb[j], mb[t])) continue;
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

// ---------------------------------------------------------------------------
// Fast float path (head_dim a multiple of the vector width; simd.h): one
// body for AVX-512 (16 lanes) and AVX2 (8 lanes), chosen at run time; the
// generic loops above serve double (gradient checks), other head sizes and
// CPUs without AVX2.
//   forward, per (batch row, query head): Kᵀ is built once, in contiguous
//   (hd × NW vectors) panels; blocks of
//   R = 4 query rows compute S = q·Kᵀ with R×NW vector accumulators (NW = 4
//   vectors of columns on AVX-512, 2 on AVX2; no horizontal sums), the
//   softmax runs on whole vectors (masked scores are −∞, a polynomial exp
//   maps them to exactly 0), then out = P·V, R rows × NW vectors of hd.
//   backward, per (batch row, KV head): per head, row blocks give dP = dout·Vᵀ,
//   dS (kept whole, T × Tp) and dq = dS·K; then dk += dSᵀ·q and dv += Pᵀ·dout
//   run over blocks of 4 key positions (accumulators in registers, t ≥ j).
// Padding columns before the first real token are skipped whole.
// Every helper taking or returning a vector is always inlined: no ABI is involved.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

using namespace simd;

constexpr int kRows = 4;  // query rows per block

// Scratch of the calling thread, reused across calls (no allocation in steady state).
PPOLAB_SIMD_INLINE float* attn_scratch(size_t n) {
    thread_local std::vector<float> buf;
    if (buf.size() < n) buf.resize(n);
    return buf.data();
}

// Columns padded to a multiple of the vector width.
PPOLAB_SIMD_INLINE int64_t attn_padded(int64_t T, int64_t L) { return (T + L - 1) / L * L; }

// Xᵀ in column blocks of CB = NW·L: element (d, j) at (j / CB)·hd·CB + d·CB + j % CB,
// so the microkernel below streams one contiguous (hd × CB) panel per block.
template <class V, int NW>
PPOLAB_SIMD_INLINE int64_t attn_panel_cols(int64_t T) {
    constexpr int64_t CB = NW * static_cast<int64_t>(sizeof(V) / 4);
    return (T + CB - 1) / CB * CB;
}
template <class V, int NW>
PPOLAB_SIMD_INLINE const float* attn_panel_at(const float* XT, int64_t hd, int64_t d, int64_t j) {
    constexpr int64_t CB = NW * static_cast<int64_t>(sizeof(V) / 4);
    return XT + (j / CB) * hd * CB + d * CB + j % CB;
}

// X (T rows of stride `stride`, hd wide) → XT panels (hd × attn_panel_cols), zero beyond T.
template <class V, int NW>
PPOLAB_SIMD_INLINE void attn_transpose(float* XT, const float* X, int64_t stride, int64_t T, int64_t hd) {
    constexpr int64_t CB = NW * static_cast<int64_t>(sizeof(V) / 4);
    const int64_t Tb = attn_panel_cols<V, NW>(T);
    for (int64_t j0 = 0; j0 < Tb; j0 += CB) {
        float* panel = XT + (j0 / CB) * hd * CB;  // (hd, CB)
        for (int64_t jj = 0; jj < CB; ++jj) {
            const int64_t j = j0 + jj;
            if (j < T)
                for (int64_t d = 0; d < hd; ++d) panel[d * CB + jj] = X[j * stride + d];
            else
                for (int64_t d = 0; d < hd; ++d) panel[d * CB + jj] = 0.f;
        }
    }
}

// S[r][j] = a_r · Xᵀ[:, j] for the R rows a_r (length hd), j in [j0, j1) (multiples
// of L): whole panels with R×NW accumulators, single vectors at the edges.
// One vector of columns at jv (a multiple of L) of the product below.
template <class V, int NW>
PPOLAB_SIMD_INLINE void attn_rows_times_xt_single(float* S, int64_t Tp, const float* const* a, const float* XT,
                                                  int64_t hd, int64_t jv) {
    constexpr int64_t CB = NW * static_cast<int64_t>(sizeof(V) / 4);
    V acc[kRows] = {};
    const float* x = attn_panel_at<V, NW>(XT, hd, 0, jv);
    for (int64_t d = 0; d < hd; ++d) {
        const V xv = vload<V>(x + d * CB);
        for (int r = 0; r < kRows; ++r) acc[r] += vbcast<V>(a[r] + d) * xv;
    }
    for (int r = 0; r < kRows; ++r) vstore(S + r * Tp + jv, acc[r]);
}

template <class V, int NW>
PPOLAB_SIMD_INLINE void attn_rows_times_xt(float* S, int64_t Tp, const float* const* a, const float* XT, int64_t hd,
                                           int64_t j0, int64_t j1) {
    constexpr int64_t L = sizeof(V) / 4, CB = NW * L;
    int64_t j = j0;
    for (; j < j1 && j % CB != 0; j += L) attn_rows_times_xt_single<V, NW>(S, Tp, a, XT, hd, j);
    for (; j + CB <= j1; j += CB) {
        V acc[kRows][NW] = {};
        const float* panel = attn_panel_at<V, NW>(XT, hd, 0, j);  // (hd, CB)
        for (int64_t d = 0; d < hd; ++d) {
            V x[NW];
            for (int n = 0; n < NW; ++n) x[n] = vload<V>(panel + d * CB + n * L);
            for (int r = 0; r < kRows; ++r) {
                const V ab = vbcast<V>(a[r] + d);
                for (int n = 0; n < NW; ++n) acc[r][n] += ab * x[n];
            }
        }
        for (int r = 0; r < kRows; ++r)
            for (int n = 0; n < NW; ++n) vstore(S + r * Tp + j + n * L, acc[r][n]);
    }
    for (; j < j1; j += L) attn_rows_times_xt_single<V, NW>(S, Tp, a, XT, hd, j);
}

// y_r[c] = Σ_{j in [j0, j1]} W[r][j] · x_j[c] (x_j = X + j·stride) for all R rows,
// hd in chunks of NW vectors, then single vectors. Rows past the block's end
// point at a sink: a fixed trip count keeps the accumulators in registers.
template <class V, int NW>
PPOLAB_SIMD_INLINE void attn_weights_times_rows(float* const* y, const float* W, int64_t ldw, const float* X,
                                                int64_t stride, int64_t hd, int64_t j0, int64_t j1) {
    constexpr int64_t L = sizeof(V) / 4;
    int64_t c = 0;
    for (; c + NW * L <= hd; c += NW * L) {
        V acc[kRows][NW] = {};
        for (int64_t j = j0; j <= j1; ++j) {
            V x[NW];
            for (int n = 0; n < NW; ++n) x[n] = vload<V>(X + j * stride + c + n * L);
            for (int r = 0; r < kRows; ++r) {
                const V w = vbcast<V>(W + r * ldw + j);
                for (int n = 0; n < NW; ++n) acc[r][n] += w * x[n];
            }
        }
        for (int r = 0; r < kRows; ++r)
            for (int n = 0; n < NW; ++n) vstore(y[r] + c + n * L, acc[r][n]);
    }
    for (; c < hd; c += L) {
        V acc[kRows] = {};
        for (int64_t j = j0; j <= j1; ++j) {
            const V x = vload<V>(X + j * stride + c);
            for (int r = 0; r < kRows; ++r) acc[r] += vbcast<V>(W + r * ldw + j) * x;
        }
        for (int r = 0; r < kRows; ++r) vstore(y[r] + c, acc[r]);
    }
}

// D_j += Σ_{t in [j, T)} A[t][j] · X_t for JB consecutive j from jb (rows D_j,
// X_t of stride ldd, ldx; A row-major with stride lda, lower triangular, so
// t < j contributes nothing and the loop starts at jb).
template <class V, int NW, int JB>
PPOLAB_SIMD_INLINE void attn_transposed_block(float* D, int64_t ldd, const float* A, int64_t lda, const float* X,
                                              int64_t ldx, int64_t hd, int64_t jb, int64_t T) {
    constexpr int64_t L = sizeof(V) / 4;
    int64_t c = 0;
    for (; c + NW * L <= hd; c += NW * L) {
        V acc[JB][NW];
        for (int jj = 0; jj < JB; ++jj)
            for (int n = 0; n < NW; ++n) acc[jj][n] = vload<V>(D + (jb + jj) * ldd + c + n * L);
        for (int64_t t = jb; t < T; ++t) {
            V x[NW];
            for (int n = 0; n < NW; ++n) x[n] = vload<V>(X + t * ldx + c + n * L);
            for (int jj = 0; jj < JB; ++jj) {
                const V a = vbcast<V>(A + t * lda + jb + jj);
                for (int n = 0; n < NW; ++n) acc[jj][n] += a * x[n];
            }
        }
        for (int jj = 0; jj < JB; ++jj)
            for (int n = 0; n < NW; ++n) vstore(D + (jb + jj) * ldd + c + n * L, acc[jj][n]);
    }
    if constexpr (NW > 1) {  // hd is a multiple of L: single vectors finish the row
        if (c < hd) attn_transposed_block<V, 1, JB>(D + c, ldd, A, lda, X + c, ldx, hd - c, jb, T);
    }
}

// D_j += Σ_t A[t][j] · X_t for every j in [j0, T).
template <class V, int NW>
PPOLAB_SIMD_INLINE void attn_transposed_product(float* D, int64_t ldd, const float* A, int64_t lda, const float* X,
                                                int64_t ldx, int64_t hd, int64_t j0, int64_t T) {
    int64_t j = j0;
    for (; j + kRows <= T; j += kRows) attn_transposed_block<V, NW, kRows>(D, ldd, A, lda, X, ldx, hd, j, T);
    for (; j < T; ++j) attn_transposed_block<V, NW, 1>(D, ldd, A, lda, X, ldx, hd, j, T);
}

template <class V, int NW>
PPOLAB_SIMD_INLINE void attn_forward_head(float* out, float* probs, const float* q, const float* k, const float* v,
                                          const uint8_t* mask, const AttentionShape& s, int64_t b, int64_t h) {
    constexpr int64_t L = sizeof(V) / 4;
    const int64_t Tn = s.T, nH = s.nH, nKV = s.nKV, hd = s.hd, kvh = h / (nH / nKV), Tp = attn_padded(Tn, L);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    const uint8_t* mb = mask + b * Tn;  // (T)
    const int64_t Tb = attn_panel_cols<V, NW>(Tn);
    float* kt = attn_scratch(static_cast<size_t>(hd * Tb + (kRows + 1) * Tp + hd));  // Kᵀ panels (hd × Tb)
    float* S = kt + hd * Tb;                                                         // (R, Tp) scores, then weights
    float* bias = S + kRows * Tp;                                                    // (Tp) 0 or −∞
    float* sink = bias + Tp;                                                         // (hd) output of rows past T
    const float* kb = k + (b * Tn * nKV + kvh) * hd;                                 // row j at kb + j·nKV·hd
    const float* vb = v + (b * Tn * nKV + kvh) * hd;
    int64_t first = 0;  // first real key position
    while (first < Tn && !mb[first]) ++first;
    bool branches = false;
    for (int64_t j = 0; j < Tn; ++j) branches |= mb[j] > 1;
    for (int64_t j = 0; j < Tp; ++j) bias[j] = j < Tn && mb[j] ? 0.f : -std::numeric_limits<float>::infinity();
    attn_transpose<V, NW>(kt, kb, nKV * hd, Tn, hd);
    for (int64_t t0 = 0; t0 < Tn; t0 += kRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kRows, Tn - t0));
        const int64_t tmax = t0 + rows - 1;
        bool any = false;
        for (int r = 0; r < rows; ++r) any |= mb[t0 + r] != 0;
        if (!any) {  // a block of padded rows: zeros
            for (int r = 0; r < rows; ++r) {
                std::fill_n(probs + ((b * nH + h) * Tn + t0 + r) * Tn, Tn, 0.f);
                std::fill_n(out + ((b * Tn + t0 + r) * nH + h) * hd, hd, 0.f);
            }
            continue;
        }
        const int64_t j0 = first / L * L, j1 = (tmax + L) / L * L;  // [j0, j1) ⊂ [0, Tp)
        const float* qr[kRows];
        float* outr[kRows];
        for (int r = 0; r < kRows; ++r) {
            const int64_t t = t0 + std::min(r, rows - 1);
            qr[r] = q + ((b * Tn + t) * nH + h) * hd;
            outr[r] = r < rows ? out + ((b * Tn + t) * nH + h) * hd : sink;
        }
        attn_rows_times_xt<V, NW>(S, Tp, qr, kt, hd, j0, j1);
        for (int r = 0; r < rows; ++r) {
            const int64_t t = t0 + r;
            float* Sr = S + r * Tp;                           // (Tp)
            float* p = probs + ((b * nH + h) * Tn + t) * Tn;  // (T)
            if (!mb[t]) {
                std::fill(Sr + j0, Sr + j1, 0.f);
                std::fill_n(p, Tn, 0.f);
                continue;
            }
            for (int64_t j = j0; j < j1; j += L) vstore(Sr + j, vload<V>(Sr + j) * scale + vload<V>(bias + j));
            for (int64_t j = t + 1; j < j1; ++j) Sr[j] = -std::numeric_limits<float>::infinity();
            if (branches)  // other branches' keys are hidden (attention.h)
                for (int64_t j = j0; j <= t; ++j)
                    if (mb[j] && !attention_visible(mb[j], mb[t])) Sr[j] = -std::numeric_limits<float>::infinity();
            V m = vload<V>(Sr + j0);
            for (int64_t j = j0 + L; j < j1; j += L) {
                const V x = vload<V>(Sr + j);
                m = x > m ? x : m;
            }
            const float mx = vhmax(m);
            for (int64_t j = j0; j < j1; j += L) vstore(Sr + j, vexp<V>(vload<V>(Sr + j) - mx));
            float sum = 0.f;  // Σ_j e_j, j ascending (hidden keys: exact zeros)
            for (int64_t j = j0; j < j1; ++j) sum += Sr[j];
            const float inv = 1.f / sum;
            for (int64_t j = j0; j < j1; j += L) vstore(Sr + j, vload<V>(Sr + j) * inv);
            std::fill(p, p + j0, 0.f);
            std::copy(Sr + j0, Sr + std::min(j1, Tn), p + j0);
            if (j1 < Tn) std::fill(p + j1, p + Tn, 0.f);
        }
        attn_weights_times_rows<V, NW>(outr, S, Tp, vb, nKV * hd, hd, j0, tmax);
    }
}

template <class V, int NW>
PPOLAB_SIMD_INLINE void attn_backward_group(float* dq, float* dk, float* dv, const float* dout, const float* probs,
                                            const float* q, const float* k, const float* v, const uint8_t* mask,
                                            const AttentionShape& s, int64_t b, int64_t kvh) {
    constexpr int64_t L = sizeof(V) / 4;
    const int64_t Tn = s.T, nH = s.nH, nKV = s.nKV, hd = s.hd, group = nH / nKV, Tp = attn_padded(Tn, L);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    const uint8_t* mb = mask + b * Tn;  // (T)
    const int64_t Tb = attn_panel_cols<V, NW>(Tn);
    float* vt = attn_scratch(static_cast<size_t>(hd * Tb + (Tn + 2 * kRows) * Tp + hd));  // Vᵀ panels (hd × Tb)
    float* dS = vt + hd * Tb;                                                             // (T, Tp) dS of one head
    float* dP = dS + Tn * Tp;                                                             // (R, Tp) dP of a block
    float* P = dP + kRows * Tp;                                                           // (R, Tp) probabilities
    float* sink = P + kRows * Tp;                                                         // (hd) dq of rows past T
    const int64_t kvstride = nKV * hd, qstride = nH * hd;
    const float* kb = k + (b * Tn * nKV + kvh) * hd;  // row j at kb + j·kvstride
    const float* vb = v + (b * Tn * nKV + kvh) * hd;
    float* dkb = dk + (b * Tn * nKV + kvh) * hd;
    float* dvb = dv + (b * Tn * nKV + kvh) * hd;
    for (int64_t j = 0; j < Tn; ++j) {
        std::fill_n(dkb + j * kvstride, hd, 0.f);
        std::fill_n(dvb + j * kvstride, hd, 0.f);
    }
    int64_t first = 0;
    while (first < Tn && !mb[first]) ++first;
    if (first == Tn) {  // nothing but padding
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
            for (int64_t t = 0; t < Tn; ++t) std::fill_n(dq + ((b * Tn + t) * nH + h) * hd, hd, 0.f);
        return;
    }
    attn_transpose<V, NW>(vt, vb, kvstride, Tn, hd);
    for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const float* ph = probs + (b * nH + h) * Tn * Tn;  // (T, T)
        const float* qh = q + (b * Tn * nH + h) * hd;      // row t at qh + t·qstride
        const float* gh = dout + (b * Tn * nH + h) * hd;
        for (int64_t t0 = 0; t0 < Tn; t0 += kRows) {
            const int rows = static_cast<int>(std::min<int64_t>(kRows, Tn - t0));
            const int64_t tmax = t0 + rows - 1;
            bool any = false;
            for (int r = 0; r < rows; ++r) any |= mb[t0 + r] != 0;
            if (!any) {
                for (int r = 0; r < rows; ++r) {
                    std::fill_n(dq + ((b * Tn + t0 + r) * nH + h) * hd, hd, 0.f);
                    std::fill_n(dS + (t0 + r) * Tp, Tp, 0.f);
                }
                continue;
            }
            const int64_t j0 = first / L * L, j1 = (tmax + L) / L * L;
            const float* gr[kRows];
            float* dqr[kRows];
            for (int r = 0; r < kRows; ++r) {
                const int64_t t = t0 + std::min(r, rows - 1);
                gr[r] = gh + t * qstride;
                dqr[r] = r < rows ? dq + ((b * Tn + t) * nH + h) * hd : sink;
            }
            attn_rows_times_xt<V, NW>(dP, Tp, gr, vt, hd, j0, j1);  // dP = dout·Vᵀ
            for (int r = 0; r < kRows; ++r) {
                const int64_t t = t0 + r;
                float* Pr = P + r * Tp;    // (Tp)
                float* dPr = dP + r * Tp;  // (Tp)
                if (r >= rows) break;
                float* dSr = dS + t * Tp;  // (Tp)
                if (!mb[t]) {
                    std::fill_n(dSr, Tp, 0.f);
                    continue;
                }
                std::copy(ph + t * Tn + j0, ph + t * Tn + t + 1, Pr + j0);
                std::fill(Pr + t + 1, Pr + j1, 0.f);
                float dot = 0.f;  // Σ_j P·dP, j ascending (hidden keys: exact zeros)
                for (int64_t j = j0; j < j1; ++j) dot += Pr[j] * dPr[j];
                std::fill(dSr, dSr + j0, 0.f);
                for (int64_t j = j0; j < j1; j += L)
                    vstore(dSr + j, vload<V>(Pr + j) * (vload<V>(dPr + j) - dot) * scale);
                std::fill(dSr + j1, dSr + Tp, 0.f);
            }
            // dq = dS·K. A short last block reads rows past T from the dP/P scratch
            // behind dS (in bounds, any value): their results go to the sink.
            attn_weights_times_rows<V, NW>(dqr, dS + t0 * Tp, Tp, kb, kvstride, hd, j0, tmax);
        }
        // dk += dSᵀ·q,  dv += Pᵀ·dout  (both lower triangular: t ≥ j)
        attn_transposed_product<V, NW>(dkb, kvstride, dS, Tp, qh, qstride, hd, first, Tn);
        attn_transposed_product<V, NW>(dvb, kvstride, ph, Tn, gh, qstride, hd, first, Tn);
    }
}

// Decode, per (batch row, KV head): the group's G ≤ 8 query heads are the 8
// lanes of the score vectors, so q·k needs no horizontal sums and the softmax
// over cached positions is lane-wise: Sc[j] = Σ_d Qᵀ[d] · k_j[d] (4 positions
// at a time), then P (heads × positions) · V in blocks of R heads.
template <class V, int NW>
PPOLAB_SIMD_INLINE void attn_decode_group(float* out, const float* q, const float* kcache, const float* vcache,
                                          const uint8_t* cache_mask, int64_t b, int64_t kvh, int64_t S, int64_t S_max,
                                          int64_t nH, int64_t nKV, int64_t hd) {
    constexpr int64_t L = sizeof(V) / 4;
    const int64_t G = nH / nKV, Sp = attn_padded(S, L), kvstride = nKV * hd;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    const uint8_t* mb = cache_mask + b * S_max;  // (S_max)
    if (!mb[S - 1]) {                            // the new token is padding: zeros, as attention_forward
        for (int64_t g = 0; g < G; ++g) std::fill_n(out + (b * nH + kvh * G + g) * hd, hd, 0.f);
        return;
    }
    float* qt = attn_scratch(static_cast<size_t>(8 * hd + 8 * S + 8 * Sp + hd));  // (hd, 8) Qᵀ
    float* sc = qt + 8 * hd;                                                      // (S, 8) scores → weights
    float* P = sc + 8 * S;                                                        // (8, Sp) weights per head
    float* sink = P + 8 * Sp;                                                     // (hd)
    for (int64_t d = 0; d < hd; ++d)
        for (int64_t g = 0; g < 8; ++g) qt[d * 8 + g] = g < G ? q[(b * nH + kvh * G + g) * hd + d] : 0.f;
    const float* kb = kcache + (b * S_max * nKV + kvh) * hd;  // row j at kb + j·kvstride
    const float* vb = vcache + (b * S_max * nKV + kvh) * hd;
    int64_t first = 0;
    while (!mb[first]) ++first;  // stops at S − 1 at the latest
    const vf8 minus_inf = vset<vf8>(-std::numeric_limits<float>::infinity());
    int64_t j = first;
    for (; j + 4 <= S; j += 4) {
        vf8 acc[4] = {};
        for (int64_t d = 0; d < hd; ++d) {
            const vf8 qv = vload<vf8>(qt + d * 8);
            for (int jj = 0; jj < 4; ++jj) acc[jj] += qv * vbcast<vf8>(kb + (j + jj) * kvstride + d);
        }
        for (int jj = 0; jj < 4; ++jj) vstore(sc + (j + jj) * 8, mb[j + jj] ? acc[jj] * scale + 0.f : minus_inf);
    }
    for (; j < S; ++j) {
        vf8 acc = {};
        for (int64_t d = 0; d < hd; ++d) acc += vload<vf8>(qt + d * 8) * vbcast<vf8>(kb + j * kvstride + d);
        vstore(sc + j * 8, mb[j] ? acc * scale + 0.f : minus_inf);
    }
    vf8 mx = vload<vf8>(sc + (S - 1) * 8);  // a real position
    for (j = first; j < S; ++j) {
        const vf8 x = vload<vf8>(sc + j * 8);
        mx = x > mx ? x : mx;
    }
    vf8 sum = {};  // per head (lane), Σ_j e_j, j ascending, as the forward
    for (j = first; j < S; ++j) {
        const vf8 e = vexp<vf8>(vload<vf8>(sc + j * 8) - mx);
        vstore(sc + j * 8, e);
        sum += e;
    }
    const vf8 inv = 1.f / sum;
    for (int64_t g = 0; g < 8; ++g)
        for (j = first; j < S; ++j) P[g * Sp + j] = sc[j * 8 + g] * inv[g];
    for (int64_t g0 = 0; g0 < G; g0 += kRows) {
        float* y[kRows];
        for (int r = 0; r < kRows; ++r) y[r] = g0 + r < G ? out + (b * nH + kvh * G + g0 + r) * hd : sink;
        attn_weights_times_rows<V, NW>(y, P + g0 * Sp, Sp, vb, kvstride, hd, first, S - 1);
    }
}

PPOLAB_SIMD_AVX2 void attention_decode_avx2(float* out, const float* q, const float* kcache, const float* vcache,
                                            const uint8_t* cache_mask, int64_t B, int64_t S, int64_t S_max, int64_t nH,
                                            int64_t nKV, int64_t hd) {
#pragma omp parallel for collapse(2) schedule(static) if (B * nH * S * hd > 32768)
    for (int64_t b = 0; b < B; ++b)
        for (int64_t kvh = 0; kvh < nKV; ++kvh)
            attn_decode_group<vf8, 2>(out, q, kcache, vcache, cache_mask, b, kvh, S, S_max, nH, nKV, hd);
}

PPOLAB_SIMD_AVX512 void attention_decode_avx512(float* out, const float* q, const float* kcache, const float* vcache,
                                                const uint8_t* cache_mask, int64_t B, int64_t S, int64_t S_max,
                                                int64_t nH, int64_t nKV, int64_t hd) {
#pragma omp parallel for collapse(2) schedule(static) if (B * nH * S * hd > 32768)
    for (int64_t b = 0; b < B; ++b)
        for (int64_t kvh = 0; kvh < nKV; ++kvh)
            attn_decode_group<vf16, 4>(out, q, kcache, vcache, cache_mask, b, kvh, S, S_max, nH, nKV, hd);
}

// One query of a tree (attention_tree): attn_decode_group's operations in
// its order over the keys path[0..S) (the query's ancestors, then itself),
// read where they lie instead of from a cache.
PPOLAB_SIMD_INLINE void attn_tree_group(float* out, const float* q, const float* k, const float* v, const int32_t* path,
                                        int64_t S, int64_t t, int64_t kvh, int64_t nH, int64_t nKV, int64_t hd) {
    const int64_t G = nH / nKV, kvstride = nKV * hd;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    float* qt = attn_scratch(static_cast<size_t>(8 * hd + 8 * S + 8 * S));  // (hd, 8) Qᵀ
    float* sc = qt + 8 * hd;                                                // (S, 8) scores → weights
    float* P = sc + 8 * S;                                                  // (8, S) weights per head
    for (int64_t d = 0; d < hd; ++d)
        for (int64_t g = 0; g < 8; ++g) qt[d * 8 + g] = g < G ? q[(t * nH + kvh * G + g) * hd + d] : 0.f;
    int64_t j = 0;
    for (; j + 8 <= S; j += 8) {  // 8 keys at once: independent chains
        const float* kj[8];
        for (int jj = 0; jj < 8; ++jj) kj[jj] = k + static_cast<int64_t>(path[j + jj]) * kvstride + kvh * hd;
        vf8 acc[8] = {};
        for (int64_t d = 0; d < hd; ++d) {
            const vf8 qv = vload<vf8>(qt + d * 8);
            for (int jj = 0; jj < 8; ++jj) acc[jj] += qv * vbcast<vf8>(kj[jj] + d);
        }
        for (int jj = 0; jj < 8; ++jj) vstore(sc + (j + jj) * 8, acc[jj] * scale + 0.f);
    }
    for (; j < S; ++j) {
        const float* kj = k + static_cast<int64_t>(path[j]) * kvstride + kvh * hd;
        vf8 acc = {};
        for (int64_t d = 0; d < hd; ++d) acc += vload<vf8>(qt + d * 8) * vbcast<vf8>(kj + d);
        vstore(sc + j * 8, acc * scale + 0.f);
    }
    vf8 mx = vload<vf8>(sc + (S - 1) * 8);
    for (j = 0; j < S; ++j) {
        const vf8 x = vload<vf8>(sc + j * 8);
        mx = x > mx ? x : mx;
    }
    vf8 sum = {};  // per head (lane), Σ_j e_j, j ascending
    for (j = 0; j < S; ++j) {
        const vf8 e = vexp<vf8>(vload<vf8>(sc + j * 8) - mx);
        vstore(sc + j * 8, e);
        sum += e;
    }
    const vf8 inv = 1.f / sum;
    for (int64_t g = 0; g < G; ++g) {
        for (j = 0; j < S; ++j) P[g * S + j] = sc[j * 8 + g] * inv[g];
        float* o = out + (t * nH + kvh * G + g) * hd;
        for (int64_t c0 = 0; c0 < hd; c0 += 64) {  // Σ_j P_j·v_j, j ascending from +0, 8 vectors at once
            const int nv = static_cast<int>(std::min<int64_t>(8, (hd - c0) / 8));
            vf8 acc[8] = {};
            for (j = 0; j < S; ++j) {
                const vf8 w = vset<vf8>(P[g * S + j]);
                const float* vj = v + static_cast<int64_t>(path[j]) * kvstride + kvh * hd + c0;
                for (int n = 0; n < nv; ++n) acc[n] += w * vload<vf8>(vj + n * 8);
            }
            for (int n = 0; n < nv; ++n) vstore(o + c0 + n * 8, acc[n]);
        }
    }
}

PPOLAB_SIMD_AVX2 void attention_tree_avx2(float* out, const float* q, const float* k, const float* v,
                                          const int32_t* parent, const int32_t* depth, int64_t T, int64_t nH,
                                          int64_t nKV, int64_t hd) {
#pragma omp parallel if (T * nH * hd > 32768)
    {
        std::vector<int32_t> path;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; ++t) {
            const int64_t S = depth[t] + 1;
            path.resize(static_cast<size_t>(S));
            int64_t j = S - 1;
            for (int64_t a = t; a >= 0; a = parent[a]) path[static_cast<size_t>(j--)] = static_cast<int32_t>(a);
            for (int64_t kvh = 0; kvh < nKV; ++kvh) attn_tree_group(out, q, k, v, path.data(), S, t, kvh, nH, nKV, hd);
        }
    }
}

// Drivers: the OpenMP region sits in a function of each instruction set so
// that its outlined body is compiled for it too.
PPOLAB_SIMD_AVX2 void attention_forward_avx2(float* out, float* probs, const float* q, const float* k, const float* v,
                                             const uint8_t* mask, AttentionShape s) {
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (attention_parallel(s))
    for (int64_t b = 0; b < s.B; ++b)
        for (int64_t h = 0; h < s.nH; ++h) attn_forward_head<vf8, 2>(out, probs, q, k, v, mask, s, b, h);
}

PPOLAB_SIMD_AVX512 void attention_forward_avx512(float* out, float* probs, const float* q, const float* k,
                                                 const float* v, const uint8_t* mask, AttentionShape s) {
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (attention_parallel(s))
    for (int64_t b = 0; b < s.B; ++b)
        for (int64_t h = 0; h < s.nH; ++h) attn_forward_head<vf16, 4>(out, probs, q, k, v, mask, s, b, h);
}

PPOLAB_SIMD_AVX2 void attention_backward_avx2(float* dq, float* dk, float* dv, const float* dout, const float* probs,
                                              const float* q, const float* k, const float* v, const uint8_t* mask,
                                              AttentionShape s) {
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (attention_parallel(s))
    for (int64_t b = 0; b < s.B; ++b)
        for (int64_t kvh = 0; kvh < s.nKV; ++kvh)
            attn_backward_group<vf8, 2>(dq, dk, dv, dout, probs, q, k, v, mask, s, b, kvh);
}

PPOLAB_SIMD_AVX512 void attention_backward_avx512(float* dq, float* dk, float* dv, const float* dout,
                                                  const float* probs, const float* q, const float* k, const float* v,
                                                  const uint8_t* mask, AttentionShape s) {
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (attention_parallel(s))
    for (int64_t b = 0; b < s.B; ++b)
        for (int64_t kvh = 0; kvh < s.nKV; ++kvh)
            attn_backward_group<vf16, 4>(dq, dk, dv, dout, probs, q, k, v, mask, s, b, kvh);
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const uint8_t* mask, AttentionShape s) {
    attention_check(s);
    if constexpr (std::is_same_v<T, float>) {
        if (s.hd % 16 == 0 && simd_has_avx512()) return attention_forward_avx512(out, probs, q, k, v, mask, s);
        if (s.hd % 8 == 0 && simd_has_avx2()) return attention_forward_avx2(out, probs, q, k, v, mask, s);
    }
    attention_forward_generic<T>(out, probs, q, k, v, mask, s);
}

template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q, const T* k, const T* v,
                        const uint8_t* mask, AttentionShape s) {
    attention_check(s);
    if constexpr (std::is_same_v<T, float>) {
        if (s.hd % 16 == 0 && simd_has_avx512())
            return attention_backward_avx512(dq, dk, dv, dout, probs, q, k, v, mask, s);
        if (s.hd % 8 == 0 && simd_has_avx2()) return attention_backward_avx2(dq, dk, dv, dout, probs, q, k, v, mask, s);
    }
    attention_backward_generic<T>(dq, dk, dv, dout, probs, q, k, v, mask, s);
}

void attention_decode(float* out, const float* q, const float* kcache, const float* vcache, const uint8_t* cache_mask,
                      int64_t B, int64_t S, int64_t S_max, int64_t nH, int64_t nKV, int64_t hd) {
    // out (B, nH, hd); q (B, nH, hd); kcache, vcache (B, S_max, nKV, hd); cache_mask (B, S_max)
    attention_check({B, S, nH, nKV, hd});
    if (S < 1 || S > S_max) fail("attention_decode: filled length S=", S, " must be in [1, S_max=", S_max, "]");
    if (nH / nKV <= 8) {
        if (hd % 16 == 0 && simd_has_avx512())
            return attention_decode_avx512(out, q, kcache, vcache, cache_mask, B, S, S_max, nH, nKV, hd);
        if (hd % 8 == 0 && simd_has_avx2())
            return attention_decode_avx2(out, q, kcache, vcache, cache_mask, B, S, S_max, nH, nKV, hd);
    }
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
                if (!mb[S - 1]) continue;                 // the new token is padding: zeros, as attention_forward
                const float* qh = q + (b * nH + h) * hd;  // (hd)
                float mx = -std::numeric_limits<float>::infinity();
                for (int64_t j = 0; j < S; ++j) {
                    if (!mb[j]) continue;
                    const float* kj = kcache + ((b * S_max + j) * nKV + kvh) * hd;  // (hd)
                    p[j] = attention_dot(qh, kj, hd) * scale + 0.f;
                    mx = p[j] > mx ? p[j] : mx;
                }
                float sum = 0.f;  // Σ_j e_j, j ascending, as the forward
                for (int64_t j = 0; j < S; ++j) {
                    if (!mb[j]) continue;
                    p[j] = canon_expf(p[j] - mx);
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

void attention_tree(float* out, const float* q, const float* k, const float* v, const int32_t* parent, int64_t T,
                    int64_t nH, int64_t nKV, int64_t hd) {
    attention_check({1, T, nH, nKV, hd});
    std::vector<int32_t> depth(static_cast<size_t>(T));  // path length − 1
    for (int64_t t = 0; t < T; ++t) {
        if (parent[t] < -1 || parent[t] >= t)
            fail("attention_tree: parent of token ", t, " is ", parent[t], "; expected -1 or a token before it");
        depth[static_cast<size_t>(t)] = parent[t] < 0 ? 0 : depth[static_cast<size_t>(parent[t])] + 1;
    }
    // The vector path reads the keys in place (attn_tree_group: the decode's
    // operations); the others gather each query's path right-aligned into a
    // cache and run attention_decode on it (left padding masked: its sums run
    // over keys, so the padding changes no bit).
    if (nH / nKV <= 8 && hd % 8 == 0 && simd_has_avx2())
        return attention_tree_avx2(out, q, k, v, parent, depth.data(), T, nH, nKV, hd);
    constexpr int64_t kChunk = 64;
    const int64_t KV = nKV * hd;
    std::vector<float> kc, vc;
    std::vector<uint8_t> mc;
    for (int64_t t0 = 0; t0 < T; t0 += kChunk) {
        const int64_t n = std::min(kChunk, T - t0);
        int64_t S = 0;
        for (int64_t i = 0; i < n; ++i) S = std::max<int64_t>(S, depth[static_cast<size_t>(t0 + i)] + 1);
        kc.resize(static_cast<size_t>(n * S * KV));
        vc.resize(kc.size());
        mc.assign(static_cast<size_t>(n * S), 0);
        for (int64_t i = 0; i < n; ++i) {
            int64_t j = S - 1;
            for (int64_t a = t0 + i; a >= 0; a = parent[a], --j) {
                std::memcpy(kc.data() + (i * S + j) * KV, k + a * KV, static_cast<size_t>(KV) * sizeof(float));
                std::memcpy(vc.data() + (i * S + j) * KV, v + a * KV, static_cast<size_t>(KV) * sizeof(float));
                mc[static_cast<size_t>(i * S + j)] = 1;
            }
        }
        attention_decode(out + t0 * nH * hd, q + t0 * nH * hd, kc.data(), vc.data(), mc.data(), n, S, S, nH, nKV, hd);
    }
}

template void attention_forward<float>(float*, float*, const float*, const float*, const float*, const uint8_t*,
                                       AttentionShape);
template void attention_forward<double>(double*, double*, const double*, const double*, const double*, const uint8_t*,
                                        AttentionShape);
template void attention_backward<float>(float*, float*, float*, const float*, const float*, const float*, const float*,
                                        const float*, const uint8_t*, AttentionShape);
template void attention_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, const uint8_t*, AttentionShape);

}  // namespace ppolab
