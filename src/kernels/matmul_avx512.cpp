// matmul_avx512.cpp — small-M (decode) kernels: Y[M,N] = X[M,K]·W[N,K]ᵀ for
// M ≤ kSmallM rows (32). At one row a GEMM library is slow (it is built for
// reuse of the weights, and at M = 1 there is none): here the weight matrix
// is simply streamed from memory, front to back, against up to 8 input rows
// held in L1 (once per block of 8 rows), which makes the kernel memory-bound
// at the machine's bandwidth.
//
// BF16 weights: `vdpbf16ps` (32 bf16 products per instruction, FP32
// accumulation), X rounded to BF16 once with `vcvtne2ps2bf16` (round to
// nearest even, as float_to_bf16); it flushes denormal inputs to zero (an
// AVX-512 BF16 property; documented difference from the reference loops,
// irrelevant for real activations). On a CPU without AVX-512 BF16 (or with
// Bf16Products::f32 forced) the same stream runs with `vfmadd231ps` on the
// weights widened to FP32 in registers and X rounded to BF16 values held in
// FP32 — exact products, FP32 sums, as the contract asks. FP32 weights:
// `vfmadd231ps`.
//
// Compiled for -march=x86-64-v3: every AVX-512 function carries a target
// attribute (PPOLAB_AVX512F: F/BW/VL/DQ; PPOLAB_AVX512: also BF16) and is
// only called after the matching cpuid check.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/matmul_backend.h"
#include "kernels/numerics.h"
#include "kernels/simd.h"
#include "util/error.h"

#define PPOLAB_AVX512F __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define PPOLAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace ppolab {

bool matmul_has_avx512bf16() {
    static const bool has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512bf16") && isa_cap() >= IsaCap::avx512_bf16;
    }();
    return has;
}

namespace {

PPOLAB_AVX512 void convert_to_bf16_avx512(bf16* out, const float* in, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 lo = _mm512_loadu_ps(in + i);
        __m512 hi = _mm512_loadu_ps(in + i + 16);
        _mm512_storeu_si512(out + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
    if (i < n) {
        int64_t r = n - i;  // 1..31
        __mmask16 mlo = static_cast<__mmask16>(r >= 16 ? 0xffff : (1u << r) - 1);
        __mmask16 mhi = static_cast<__mmask16>(r > 16 ? (1u << (r - 16)) - 1 : 0);
        __m512 lo = _mm512_maskz_loadu_ps(mlo, in + i);
        __m512 hi = _mm512_maskz_loadu_ps(mhi, in + i + 16);
        __mmask32 m = static_cast<__mmask32>((1ull << r) - 1);
        _mm512_mask_storeu_epi16(out + i, m, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
}

// Sum of the 16 lanes (not _mm512_reduce_add_ps: gcc 12 warns about its
// undefined-register temporaries under -Wall).
PPOLAB_AVX512F inline float lane_sum(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_maskz_extractf32x8_ps(0xff, v, 0), _mm512_maskz_extractf32x8_ps(0xff, v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

// One weight row against MR input rows, read front to back in U·64-byte
// steps with U independent accumulators per input row: each thread's
// range of rows is then a single sequential stream (the hardware
// prefetcher's best case), which the NR-row tiles above are not.
//
// Columns [k0, k1) only, where the input rows do not fit in L1 (K-spans,
// stream_rows below): k0 is a multiple of the step (32·U); the
// accumulators start from `carry` unless k0 == 0 and go back to it unless
// k1 == K, where the masked tail runs and the row's sums go to Y. Each
// accumulator sees the same products in the same order whatever the spans.
template <int MR, int U>
PPOLAB_AVX512 inline void row_bf16(float* Y, int64_t ldy, const bf16* Xb, int64_t ldx, const bf16* W, int64_t k0,
                                   int64_t k1, int64_t K, float* carry, bool accumulate) {
    static_assert(U >= 2 && U <= 4);
    __m512 acc[MR][U];
    for (int j = 0; j < MR; ++j)
        for (int u = 0; u < U; ++u)
            acc[j][u] = k0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(carry + (j * U + u) * 16);
    int64_t k = k0;
    for (; k + 32 * U <= k1; k += 32 * U) {
        __m512bh w[U];
        for (int u = 0; u < U; ++u) w[u] = (__m512bh)_mm512_loadu_si512(W + k + 32 * u);
        for (int j = 0; j < MR; ++j)
            for (int u = 0; u < U; ++u)
                acc[j][u] = _mm512_dpbf16_ps(acc[j][u], (__m512bh)_mm512_loadu_si512(Xb + j * ldx + k + 32 * u), w[u]);
    }
    if (k1 < K) {
        for (int j = 0; j < MR; ++j)
            for (int u = 0; u < U; ++u) _mm512_store_ps(carry + (j * U + u) * 16, acc[j][u]);
        return;
    }
    for (; k < K; k += 32) {
        const int64_t r = std::min<int64_t>(32, K - k);
        __mmask32 m = static_cast<__mmask32>(r == 32 ? 0xffffffffu : (1u << r) - 1);
        __m512bh w = (__m512bh)_mm512_maskz_loadu_epi16(m, W + k);
        for (int j = 0; j < MR; ++j)
            acc[j][0] = _mm512_dpbf16_ps(acc[j][0], (__m512bh)_mm512_maskz_loadu_epi16(m, Xb + j * ldx + k), w);
    }
    for (int j = 0; j < MR; ++j) {
        __m512 t = acc[j][0];
        for (int u = 1; u < U; ++u) t = _mm512_add_ps(t, acc[j][u]);
        float s = lane_sum(t);
        Y[j * ldy] = accumulate ? Y[j * ldy] + s : s;
    }
}

// Register budget (32 zmm): MR·U accumulators + U weight vectors + 1 input,
// so U = 3 at MR = 8. The same U at every MR: a row's sums are then formed
// in the same order whatever the number of rows (row invariance, matmul.h).
constexpr int kStreamU = 3;

// The input rows stay in L1 while the weight streams past: up to
// kInputInL1 bytes of them (8 × 896 FP32: 28 KiB); more (K = 4864 at M ≥ 2)
// go in K-spans of at most kSpanBytes, kSpanRows weight rows at a time
// carrying their accumulators. Measured at 2 threads, FP32 FMA stream
// (BENCHMARKS.md, session 14): down projection 896 × 4864 1.3–1.4× faster
// at M = 4 and 8; gate 4864 × 896 at M = 8 1.2–1.4× slower when spanned.
constexpr int64_t kInputInL1 = 32 << 10;
constexpr int64_t kSpanBytes = 16 << 10;
constexpr int64_t kSpanRows = 8;

// Y (MR, N): row_fn(n, k0, k1, carry) for each weight row n, the rows split
// between the OpenMP threads in contiguous ranges; in K-spans of `span`
// columns (a multiple of the step) when span < K.
template <int MR, int U, class RowFn>
PPOLAB_AVX512F inline void stream_rows(int64_t N, int64_t K, int64_t span, RowFn row_fn) {
    const bool parallel = N * K >= (1 << 16);
    if (span >= K) {
#pragma omp parallel for schedule(static) if (parallel)
        for (int64_t n = 0; n < N; ++n) row_fn(n, 0, K, nullptr);
        return;
    }
    const int64_t blocks = (N + kSpanRows - 1) / kSpanRows;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t blk = 0; blk < blocks; ++blk) {
        alignas(64) float carry[kSpanRows][MR * U * 16];
        const int64_t n0 = blk * kSpanRows, n1 = std::min(N, n0 + kSpanRows);
        for (int64_t k0 = 0; k0 < K; k0 += span)
            for (int64_t n = n0; n < n1; ++n) row_fn(n, k0, std::min(K, k0 + span), carry[n - n0]);
    }
}

// The K-span for MR input rows of `bytes` per element and a step of `step` columns.
constexpr int64_t input_span(int64_t MR, int64_t bytes, int64_t step, int64_t K) {
    return MR * K * bytes <= kInputInL1 ? K : std::max<int64_t>(1, kSpanBytes / (MR * bytes * step)) * step;
}

template <int MR, int U = kStreamU>
PPOLAB_AVX512 void stream_rows_bf16(float* Y, int64_t ldy, const bf16* X, int64_t ldx, const bf16* W, int64_t N,
                                    int64_t K, bool accumulate) {
    stream_rows<MR, U>(N, K, input_span(MR, 2, 32 * U, K), [&](int64_t n, int64_t k0, int64_t k1, float* carry) {
        row_bf16<MR, U>(Y + n, ldy, X, ldx, W + n * K, k0, k1, K, carry, accumulate);
    });
}

// 16 BF16 values widened to FP32 (a BF16 value is the top half of its FP32).
// The all-lanes maskz forms: gcc 12 warns (-Wmaybe-uninitialized) about the
// undefined-register temporaries of the unmasked shifts and widenings.
PPOLAB_AVX512F inline __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, h), 16));
}

// The same stream without BF16 instructions: 16 weights widened per load, X
// as BF16 values in FP32 (K-spans as row_bf16, a step of 16·U).
template <int MR, int U>
PPOLAB_AVX512F inline void row_bf16_fma(float* Y, int64_t ldy, const float* Xr, int64_t ldx, const bf16* W, int64_t k0,
                                        int64_t k1, int64_t K, float* carry, bool accumulate) {
    static_assert(U >= 2 && U <= 4);
    __m512 acc[MR][U];
    for (int j = 0; j < MR; ++j)
        for (int u = 0; u < U; ++u)
            acc[j][u] = k0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(carry + (j * U + u) * 16);
    int64_t k = k0;
    for (; k + 16 * U <= k1; k += 16 * U) {
        __m512 w[U];
        for (int u = 0; u < U; ++u) w[u] = widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(W + k + 16 * u)));
        for (int j = 0; j < MR; ++j)
            for (int u = 0; u < U; ++u)
                acc[j][u] = _mm512_fmadd_ps(_mm512_loadu_ps(Xr + j * ldx + k + 16 * u), w[u], acc[j][u]);
    }
    if (k1 < K) {
        for (int j = 0; j < MR; ++j)
            for (int u = 0; u < U; ++u) _mm512_store_ps(carry + (j * U + u) * 16, acc[j][u]);
        return;
    }
    for (; k < K; k += 16) {
        const int64_t r = std::min<int64_t>(16, K - k);
        __mmask16 m = static_cast<__mmask16>(r == 16 ? 0xffffu : (1u << r) - 1);
        __m512 w = widen(_mm256_maskz_loadu_epi16(m, W + k));
        for (int j = 0; j < MR; ++j)
            acc[j][0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, Xr + j * ldx + k), w, acc[j][0]);
    }
    for (int j = 0; j < MR; ++j) {
        __m512 t = acc[j][0];
        for (int u = 1; u < U; ++u) t = _mm512_add_ps(t, acc[j][u]);
        float s = lane_sum(t);
        Y[j * ldy] = accumulate ? Y[j * ldy] + s : s;
    }
}

template <int MR, int U = kStreamU>
PPOLAB_AVX512F void stream_rows_bf16_fma(float* Y, int64_t ldy, const float* X, int64_t ldx, const bf16* W, int64_t N,
                                         int64_t K, bool accumulate) {
    stream_rows<MR, U>(N, K, input_span(MR, 4, 16 * U, K), [&](int64_t n, int64_t k0, int64_t k1, float* carry) {
        row_bf16_fma<MR, U>(Y + n, ldy, X, ldx, W + n * K, k0, k1, K, carry, accumulate);
    });
}

template <int NR, int MR>
PPOLAB_AVX512F inline void tile_f32(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int64_t K,
                                    bool accumulate) {
    __m512 acc[NR][MR];
    for (int i = 0; i < NR; ++i)
        for (int j = 0; j < MR; ++j) acc[i][j] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 w[NR];
        for (int i = 0; i < NR; ++i) w[i] = _mm512_loadu_ps(W + i * K + k);
        for (int j = 0; j < MR; ++j) {
            __m512 x = _mm512_loadu_ps(X + j * ldx + k);
            for (int i = 0; i < NR; ++i) acc[i][j] = _mm512_fmadd_ps(x, w[i], acc[i][j]);
        }
    }
    if (k < K) {
        __mmask16 m = static_cast<__mmask16>((1u << (K - k)) - 1);
        __m512 w[NR];
        for (int i = 0; i < NR; ++i) w[i] = _mm512_maskz_loadu_ps(m, W + i * K + k);
        for (int j = 0; j < MR; ++j) {
            __m512 x = _mm512_maskz_loadu_ps(m, X + j * ldx + k);
            for (int i = 0; i < NR; ++i) acc[i][j] = _mm512_fmadd_ps(x, w[i], acc[i][j]);
        }
    }
    for (int j = 0; j < MR; ++j)
        for (int i = 0; i < NR; ++i) {
            float s = lane_sum(acc[i][j]);
            Y[j * ldy + i] = accumulate ? Y[j * ldy + i] + s : s;
        }
}

// Y (MR, N) for MR input rows: the weight streamed once, NR rows per tile,
// tiles split between the OpenMP threads in contiguous ranges.
template <int NR, int MR>
PPOLAB_AVX512F void rows_kernel(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* W, int64_t N,
                                int64_t K, bool accumulate) {
    const int64_t tiles = (N + NR - 1) / NR;
    const bool parallel = N * K >= (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < tiles; ++t) {
        const int64_t n0 = t * NR;
        if (n0 + NR <= N) {
            tile_f32<NR, MR>(Y + n0, ldy, X, ldx, W + n0 * K, K, accumulate);
        } else {
            for (int64_t n = n0; n < N; ++n) tile_f32<1, MR>(Y + n, ldy, X, ldx, W + n * K, K, accumulate);
        }
    }
}

// Calls kernel(y, x, Rows) for each block of up to 8 rows of an M-row
// product, with the block's row count as a compile-time constant: the
// kernels are specialised per MR, and every row count takes the same path
// whatever M is (kRowInvariantRows).
template <class In, class Kernel>
void by_row_blocks(float* Y, const In* X, int64_t M, int64_t N, int64_t K, Kernel&& kernel) {
    for (int64_t m0 = 0; m0 < M; m0 += 8) {
        float* y = Y + m0 * N;
        const In* x = X + m0 * K;
        switch (std::min<int64_t>(8, M - m0)) {
            case 1: kernel(y, x, std::integral_constant<int, 1>{}); break;
            case 2: kernel(y, x, std::integral_constant<int, 2>{}); break;
            case 3: kernel(y, x, std::integral_constant<int, 3>{}); break;
            case 4: kernel(y, x, std::integral_constant<int, 4>{}); break;
            case 5: kernel(y, x, std::integral_constant<int, 5>{}); break;
            case 6: kernel(y, x, std::integral_constant<int, 6>{}); break;
            case 7: kernel(y, x, std::integral_constant<int, 7>{}); break;
            default: kernel(y, x, std::integral_constant<int, 8>{}); break;
        }
    }
}

// BF16 weights: one sequential stream per thread (measured 15–23 GB/s per
// core vs 11–12 for 8-row tiles at K = 896 under load; BENCHMARKS.md).
void small_m_bf16(float* Y, const bf16* X, const bf16* W, int64_t M, int64_t N, int64_t K, bool accumulate) {
    by_row_blocks(Y, X, M, N, K, [&](float* y, const bf16* x, auto rows) {
        stream_rows_bf16<decltype(rows)::value>(y, N, x, K, W, N, K, accumulate);
    });
}

// BF16 weights without BF16 instructions; X: BF16 values held in FP32.
void small_m_bf16_fma(float* Y, const float* X, const bf16* W, int64_t M, int64_t N, int64_t K, bool accumulate) {
    by_row_blocks(Y, X, M, N, K, [&](float* y, const float* x, auto rows) {
        stream_rows_bf16_fma<decltype(rows)::value>(y, N, x, K, W, N, K, accumulate);
    });
}

// FP32 weights: NR-row tiles.
// Register budget (32 zmm): NR·MR accumulators + NR weight vectors + 1 input.
constexpr int f32_tile_rows(int mr) { return mr == 1 ? 8 : mr == 2 ? 6 : mr <= 5 ? 4 : 3; }

// FP32 weights with K ≤ 16 (LoRA's B: K = the rank): W transposed once per
// call into (K, N), then 16 outputs of a row at a time (columns n0…n0+15), Σ_k x[k] · Wᵀ[k][n…]
// by FMA in k order from zero, added to Y at the end when accumulating. Each
// row is computed alone (the same bits at any M). A tile_f32 would reduce
// every output horizontally for K multiply-adds.
template <int K>
PPOLAB_AVX512F inline void small_k_columns(float* Y, const float* X, const float* Wt, int64_t M, int64_t N, int64_t n0,
                                           bool accumulate) {
    const __mmask16 mask = static_cast<__mmask16>(N - n0 >= 16 ? 0xffffu : (1u << (N - n0)) - 1);
    __m512 w[K];
    for (int k = 0; k < K; ++k) w[k] = _mm512_maskz_loadu_ps(mask, Wt + k * N + n0);
    for (int64_t m = 0; m < M; ++m) {
        __m512 acc = _mm512_setzero_ps();
        for (int k = 0; k < K; ++k) acc = _mm512_fmadd_ps(_mm512_set1_ps(X[m * K + k]), w[k], acc);
        float* y = Y + m * N + n0;
        if (accumulate) acc = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), acc);
        _mm512_mask_storeu_ps(y, mask, acc);
    }
}

// The OpenMP region only calls the vector code: Clang's outlined region
// does not inherit the function's target.
template <int K>
PPOLAB_AVX512F void small_k_rows(float* Y, const float* X, const float* Wt, int64_t M, int64_t N, bool accumulate) {
    const bool parallel = N * K >= (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t n0 = 0; n0 < N; n0 += 16) small_k_columns<K>(Y, X, Wt, M, N, n0, accumulate);
}

template <size_t... Ks>
constexpr auto small_k_table(std::index_sequence<Ks...>) {
    return std::array{&small_k_rows<static_cast<int>(Ks) + 1>...};
}
constexpr auto kSmallKRows = small_k_table(std::make_index_sequence<16>{});  // [K − 1]

void small_k_f32(float* Y, const float* X, const float* W, int64_t M, int64_t N, int64_t K, bool accumulate) {
    thread_local std::vector<float> wt;  // (K, N)
    wt.resize(static_cast<size_t>(K * N));
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) wt[static_cast<size_t>(k * N + n)] = W[n * K + k];
    PPOLAB_ASSERT(K >= 1 && K <= 16);
    kSmallKRows[K - 1](Y, X, wt.data(), M, N, accumulate);
}

void small_m_f32(float* Y, const float* X, const float* W, int64_t M, int64_t N, int64_t K, bool accumulate) {
    if (K <= 16) return small_k_f32(Y, X, W, M, N, K, accumulate);
    by_row_blocks(Y, X, M, N, K, [&](float* y, const float* x, auto rows) {
        constexpr int mr = decltype(rows)::value;
        rows_kernel<f32_tile_rows(mr), mr>(y, N, x, K, W, N, K, accumulate);
    });
}

}  // namespace

namespace {
PPOLAB_AVX512F void convert_to_bf16_exact_avx512(bf16* out, const float* in, int64_t n);
}  // namespace

void convert_to_bf16(bf16* out, const float* in, int64_t n) {
    const int64_t chunk = 1 << 15;
    const int64_t chunks = (n + chunk - 1) / chunk;
    // vcvtne2ps2bf16 flushes denormal inputs to zero: fast mode only (numerics.h).
    const bool fast = matmul_has_avx512bf16() && !numerics_canonical();
    const bool exact16 = simd::simd_cpu_level() == simd::SimdLevel::avx512;  // float_to_bf16 on 16 lanes
    auto convert = [&](int64_t c) {
        const int64_t b = c * chunk, e = std::min(n, b + chunk);
        if (fast) {
            convert_to_bf16_avx512(out + b, in + b, e - b);
        } else if (exact16) {
            convert_to_bf16_exact_avx512(out + b, in + b, e - b);
        } else {
            for (int64_t i = b; i < e; ++i) out[i] = float_to_bf16(in[i]);
        }
    };
    // Small inputs never enter OpenMP: even a region that runs on one thread
    // (`if` false, or nested inside another region) makes and frees a team,
    // which cost the AMX path's per-row conversions 3–5× their work.
    if (chunks <= 2) {
        for (int64_t c = 0; c < chunks; ++c) convert(c);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) convert(c);
}

namespace {

// round_to_bf16 on 16 lanes: add 0x7fff plus the lowest kept bit, clear the
// low half; a NaN keeps its top half with the quiet bit set (as float_to_bf16).
PPOLAB_AVX512F inline __m512i round16(__m512i x) {
    const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(0xffff, x, 16), _mm512_set1_epi32(1));
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), high);
    const __mmask16 nan =
        _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_mov_epi32(r, nan, _mm512_and_si512(_mm512_or_si512(x, _mm512_set1_epi32(0x00400000)), high));
}

PPOLAB_AVX512F void round_to_bf16_values_avx512(float* out, const float* in, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_si512(out + i, round16(_mm512_loadu_si512(in + i)));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
        _mm512_mask_storeu_epi32(out + i, m, round16(_mm512_maskz_loadu_epi32(m, in + i)));
    }
}

// float_to_bf16 on 16 lanes: round16's top halves, packed.
PPOLAB_AVX512F void convert_to_bf16_exact_avx512(bf16* out, const float* in, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i r = _mm512_maskz_srli_epi32(0xffff, round16(_mm512_loadu_si512(in + i)), 16);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_maskz_cvtepi32_epi16(0xffff, r));
    }
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
        const __m512i r = _mm512_maskz_srli_epi32(0xffff, round16(_mm512_maskz_loadu_epi32(m, in + i)), 16);
        _mm512_mask_cvtepi32_storeu_epi16(out + i, m, r);
    }
}

}  // namespace

void round_to_bf16_values(float* out, const float* in, int64_t n) {
    const int64_t chunk = 1 << 15;
    const int64_t chunks = (n + chunk - 1) / chunk;
    const bool fast = simd::simd_cpu_level() == simd::SimdLevel::avx512;
#pragma omp parallel for schedule(static) if (chunks > 2)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t b = c * chunk, e = std::min(n, b + chunk);
        if (fast) {
            round_to_bf16_values_avx512(out + b, in + b, e - b);
        } else {
            for (int64_t i = b; i < e; ++i) out[i] = round_to_bf16(in[i]);
        }
    }
}

namespace matmul_detail {

void small_m_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    if (simd::simd_cpu_level() != simd::SimdLevel::avx512) return portable_forward(Y, X, W, M, accumulate);
    if (W.type == WeightType::f32) return small_m_f32(Y, X, static_cast<const float*>(W.data), M, N, K, accumulate);
    if (matmul_has_avx512bf16() && bf16_products_native()) {
        thread_local std::vector<bf16> xb;  // (M, K) X rounded to BF16
        if (static_cast<int64_t>(xb.size()) < M * K) xb.resize(M * K);
        convert_to_bf16(xb.data(), X, M * K);
        small_m_bf16(Y, xb.data(), static_cast<const bf16*>(W.data), M, N, K, accumulate);
    } else {
        thread_local std::vector<float> xr;  // (M, K) X rounded to BF16 values, in FP32
        if (static_cast<int64_t>(xr.size()) < M * K) xr.resize(M * K);
        round_to_bf16_values(xr.data(), X, M * K);
        small_m_bf16_fma(Y, xr.data(), static_cast<const bf16*>(W.data), M, N, K, accumulate);
    }
}

}  // namespace matmul_detail
}  // namespace ppolab
