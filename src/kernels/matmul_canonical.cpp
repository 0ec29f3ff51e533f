// matmul_canonical.cpp — the canonical products (engine.numerics =
// canonical, numerics.h) on AVX2 and AVX-512, and on one core without them.
//
// The arithmetic is the reference's (matmul_reference.cpp): output (i, j) of
//   C[i, j] = Σ_p A(i, p) · B(p, j)
// is one FP32 accumulator that starts at +0 and takes fma(A(i, p), B(p, j), ·)
// for p = 0, 1, …, P − 1 in order — for a BF16 product (`pairs`) pair by
// pair, p = 1, 0, 3, 2, …, as `vdpbf16ps` sums; with `accumulate` the
// finished sum is then added to C. (Starting from +0, an accumulator is never −0, so padding the
// reduction with zero terms changes nothing.) The three products of matmul.h:
//   forward           Y[m, n]  = Σ_k X[m, k] · W[n, k]      A = X,  B = Wᵀ
//   backward to input dX[m, k] = Σ_n dY[m, n] · W[n, k]     A = dY, B = W
//   weight gradient   dW[n, k] += Σ_m dY[m, n] · X[m, k]    A = dYᵀ, B = X
// with the inputs rounded to BF16 first where the contract says so.
//
// The vector path: each lane of a register holds one output and the lanes
// are consecutive j, so a lane's sum is exactly the reference's whatever the
// vector width. B is copied, a panel of kPanelK reduction steps × NB columns
// at a time, into FP32 (widened from BF16, transposed where B = Wᵀ, zero
// beyond the last column) and read by MR × NR register blocks; a reduction
// longer than one panel keeps its partial sums in an FP32 tile between
// panels (FP32 values pass through memory unchanged). Threads split the
// outputs (column panels, or row blocks where there are few panels), never
// a reduction: the bytes are the same at any thread count, any M, and for a
// row whatever other rows come with it.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/matmul_amx.h"
#include "kernels/matmul_backend.h"
#include "kernels/simd.h"
#include "util/error.h"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace ppolab {
namespace {

using simd::vf16;
using simd::vf8;

constexpr int64_t kPanelK = 256;                     // reduction steps per panel
constexpr int64_t kParallelWork = int64_t(1) << 16;  // multiply-adds below which one thread works
constexpr int64_t kRowBlocksPerThreadSplit = 4;      // few panels and at least this many row blocks per
                                                     // thread: the threads split the rows

// Where B(p, j) lives.
enum class Src { rows_f32, rows_bf16, cols_f32, cols_bf16, vnni };
struct BSource {
    Src kind;
    const void* data;
    int64_t ld;  // rows: B(p, j) = data[p·ld + j]; cols: B(p, j) = data[j·ld + p];
                 // vnni: elements between column blocks of the pack (matmul_amx.h), whose
                 // pair r of block c holds B(2r + e, 16c + i) at r·32 + 2i + e
};

// A(i, p) = a[i·row + p·step], FP32 (already rounded to BF16 where the
// contract says so, and then `pairs`: the sums take the steps pair by pair,
// the odd one first).
struct ASource {
    const float* a;
    int64_t row, step;
    bool pairs = false;
};

// panel[p·NB + jj] = B(p0 + p, j0 + jj) for p < kc, jj < cols; 0 for cols ≤ jj < NB.
template <int64_t NB>
PPOLAB_SIMD_INLINE void pack_panel(float* panel, const BSource& b, int64_t p0, int64_t kc, int64_t j0, int64_t cols) {
    if (b.kind == Src::vnni) {  // p0, kc even, j0 a multiple of 16; the pack's padding is zero
        static_assert(NB % 16 == 0);
        for (int64_t u = 0; u < NB / 16; ++u) {
            const uint32_t* block = static_cast<const uint32_t*>(b.data) + (j0 / 16 + u) * (b.ld / 2);
            const bool real = j0 + u * 16 < j0 + cols;
            for (int64_t p = 0; p < kc; p += 2) {
                const uint32_t* pair = block + (p0 + p) / 2 * 16;  // 16 columns' (even, odd) BF16 pairs
                uint32_t* even = reinterpret_cast<uint32_t*>(panel + p * NB + u * 16);
                uint32_t* odd = even + NB;
                for (int64_t i = 0; i < 16; ++i) {
                    even[i] = real ? pair[i] << 16 : 0u;
                    odd[i] = real && p + 1 < kc ? pair[i] & 0xffff0000u : 0u;
                }
            }
        }
        return;
    }
    if (b.kind == Src::rows_f32 || b.kind == Src::rows_bf16) {
        for (int64_t p = 0; p < kc; ++p) {
            float* dst = panel + p * NB;
            if (b.kind == Src::rows_f32) {
                const float* src = static_cast<const float*>(b.data) + (p0 + p) * b.ld + j0;
                for (int64_t jj = 0; jj < cols; ++jj) dst[jj] = src[jj];
            } else {
                const bf16* src = static_cast<const bf16*>(b.data) + (p0 + p) * b.ld + j0;
                for (int64_t jj = 0; jj < cols; ++jj) dst[jj] = bf16_to_float(src[jj]);
            }
            for (int64_t jj = cols; jj < NB; ++jj) dst[jj] = 0.f;
        }
        return;
    }
    for (int64_t jj = 0; jj < cols; ++jj) {
        if (b.kind == Src::cols_f32) {
            const float* src = static_cast<const float*>(b.data) + (j0 + jj) * b.ld + p0;
            for (int64_t p = 0; p < kc; ++p) panel[p * NB + jj] = src[p];
        } else {
            const bf16* src = static_cast<const bf16*>(b.data) + (j0 + jj) * b.ld + p0;
            for (int64_t p = 0; p < kc; ++p) panel[p * NB + jj] = bf16_to_float(src[p]);
        }
    }
    for (int64_t p = 0; p < kc; ++p)
        for (int64_t jj = cols; jj < NB; ++jj) panel[p * NB + jj] = 0.f;
}

// One FMA per lane (a · b + c, rounded once). Spelt as the instruction (as
// simd.h's broadcasts are): the templates that call it carry no target
// attribute of their own, and are inlined into the AVX2 or AVX-512 driver.
template <class V>
PPOLAB_SIMD_INLINE V vfma(V a, V b, V c) {
#if defined(__clang__)
    for (size_t i = 0; i < sizeof(V) / 4; ++i) c[i] = std::fma(a[i], b[i], c[i]);
#else
    asm("vfmadd231ps %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
#endif
    return c;
}

// Reduction step p of a register block: acc[r][v] += A(i0 + r, p0 + p) · panel row p.
template <class V, int MR, int NR>
PPOLAB_SIMD_INLINE void block_step(V (&acc)[MR][NR], const float* const (&a)[MR], int64_t step, const float* panel,
                                   int64_t p) {
    constexpr int64_t L = sizeof(V) / 4, NB = NR * L;
    V b[NR];
    for (int v = 0; v < NR; ++v) b[v] = simd::vload<V>(panel + p * NB + v * L);
    for (int r = 0; r < MR; ++r) {
        // A(i, p) broadcast: an asm that broadcasts from memory (simd::vbcast)
        // names that memory, which GCC then assumes may be the accumulators'
        // (float and float vectors alias), so it stored every accumulator to
        // the stack on every step. For 8 lanes GCC's own {s, s, …} broadcasts
        // from memory (`vbroadcastss m32`, a load); for 16 it builds the
        // vector lane by lane, so there the scalar is loaded and broadcast
        // from its register.
        V x;
        if constexpr (sizeof(V) == 32) {
            const float s = a[r][p * step];
            x = V{s, s, s, s, s, s, s, s};
        } else {
            x = simd::vset<V>(a[r][p * step]);
        }
        for (int v = 0; v < NR; ++v) acc[r][v] = vfma(x, b[v], acc[r][v]);
    }
}

// Rows [i0, i0 + MR) against one panel (reduction steps [p0, p0 + kc)).
// first: the accumulators start at +0, else from the tile; last: the sums
// go to C's `cols` valid columns (added when accumulate), else to the tile.
template <class V, int MR, int NR>
PPOLAB_SIMD_INLINE void register_block(float* C, int64_t ldc, float* tile, const ASource& A, int64_t i0,
                                       const float* panel, int64_t p0, int64_t kc, int64_t cols, bool first, bool last,
                                       bool accumulate) {
    constexpr int64_t L = sizeof(V) / 4, NB = NR * L;
    V acc[MR][NR];
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NR; ++v) acc[r][v] = first ? V{} : simd::vload<V>(tile + (i0 + r) * NB + v * L);
    const float* a[MR];
    for (int r = 0; r < MR; ++r) a[r] = A.a + (i0 + r) * A.row + p0 * A.step;
    if (A.pairs) {  // p0 is even (kPanelK is), so the panel's pairs are the product's
        int64_t p = 0;
        for (; p + 1 < kc; p += 2) {
            block_step<V, MR, NR>(acc, a, A.step, panel, p + 1);
            block_step<V, MR, NR>(acc, a, A.step, panel, p);
        }
        if (p < kc) {  // the product's last pair: +0·+0, then step p
            for (int r = 0; r < MR; ++r)
                for (int v = 0; v < NR; ++v) acc[r][v] = vfma(V{}, V{}, acc[r][v]);
            block_step<V, MR, NR>(acc, a, A.step, panel, p);
        }
    } else {
        for (int64_t p = 0; p < kc; ++p) block_step<V, MR, NR>(acc, a, A.step, panel, p);
    }
    if (!last) {
        for (int r = 0; r < MR; ++r)
            for (int v = 0; v < NR; ++v) simd::vstore(tile + (i0 + r) * NB + v * L, acc[r][v]);
        return;
    }
    for (int r = 0; r < MR; ++r) {
        float* c = C + (i0 + r) * ldc;
        if (cols == NB && !accumulate) {
            for (int v = 0; v < NR; ++v) simd::vstore(c + v * L, acc[r][v]);
            continue;
        }
        float out[NB];
        for (int v = 0; v < NR; ++v) simd::vstore(out + v * L, acc[r][v]);
        for (int64_t jj = 0; jj < cols; ++jj) c[jj] = accumulate ? c[jj] + out[jj] : out[jj];
    }
}

// Rows [i, i1) against one panel: blocks of MR rows, the rest in blocks of
// MR/2, MR/4, … rows (each row's sums are the same in any block).
template <class V, int MR, int NR>
PPOLAB_SIMD_INLINE void row_blocks(float* C, int64_t ldc, float* tile, const ASource& A, int64_t i, int64_t i1,
                                   const float* panel, int64_t p0, int64_t kc, int64_t cols, bool first, bool last,
                                   bool accumulate) {
    for (; i + MR <= i1; i += MR)
        register_block<V, MR, NR>(C, ldc, tile, A, i, panel, p0, kc, cols, first, last, accumulate);
    if constexpr (MR > 1)
        if (i < i1) row_blocks<V, MR / 2, NR>(C, ldc, tile, A, i, i1, panel, p0, kc, cols, first, last, accumulate);
}

// C rows [i0, i1) × columns [j0, j0 + cols) (cols ≤ NB), the whole reduction.
template <class V, int MR, int NR>
PPOLAB_SIMD_INLINE void column_panel(float* C, int64_t ldc, const ASource& A, const BSource& B, int64_t P, int64_t i0,
                                     int64_t i1, int64_t j0, int64_t cols, bool accumulate) {
    constexpr int64_t NB = NR * static_cast<int64_t>(sizeof(V) / 4);
    thread_local std::vector<float> panel_buf, tile_buf;
    if (panel_buf.size() < static_cast<size_t>(kPanelK * NB)) panel_buf.resize(kPanelK * NB);
    const bool tiled = P > kPanelK;
    if (tiled && tile_buf.size() < static_cast<size_t>(i1 * NB)) tile_buf.resize(i1 * NB);
    float* panel = panel_buf.data();
    float* tile = tile_buf.data();
    float* Cj = C + j0;
    for (int64_t p0 = 0; p0 < P; p0 += kPanelK) {
        const int64_t kc = std::min(kPanelK, P - p0);
        const bool first = p0 == 0, last = p0 + kc == P;
        pack_panel<NB>(panel, B, p0, kc, j0, cols);
        row_blocks<V, MR, NR>(Cj, ldc, tile, A, i0, i1, panel, p0, kc, cols, first, last, accumulate);
    }
}

// The whole product C (M × N) on the calling team: column panels, or row
// ranges where there are few panels and many rows.
template <class V, int MR, int NR>
PPOLAB_SIMD_INLINE void product_share(float* C, int64_t ldc, const ASource& A, const BSource& B, int64_t M, int64_t N,
                                      int64_t P, bool accumulate, int64_t t, int64_t T) {
    constexpr int64_t NB = NR * static_cast<int64_t>(sizeof(V) / 4);
    const int64_t panels = (N + NB - 1) / NB, row_blocks = (M + MR - 1) / MR;
    if (panels < T && row_blocks >= kRowBlocksPerThreadSplit * T) {
        const int64_t i0 = std::min(M, row_blocks * t / T * MR), i1 = std::min(M, row_blocks * (t + 1) / T * MR);
        for (int64_t q = 0; q < panels && i1 > i0; ++q)
            column_panel<V, MR, NR>(C, ldc, A, B, P, i0, i1, q * NB, std::min(NB, N - q * NB), accumulate);
        return;
    }
    for (int64_t q = panels * t / T; q < panels * (t + 1) / T; ++q)
        column_panel<V, MR, NR>(C, ldc, A, B, P, 0, M, q * NB, std::min(NB, N - q * NB), accumulate);
}

// Decode on AVX2 (a frozen BF16 weight's VNNI pack, at most
// kDirectRows rows): the pack read once, each 64-byte pair row widened in
// registers (a shift gives the even step's 8 + 8 columns, a mask the odd
// step's) instead of into a panel that the few rows would read once. Rows
// [0, MR) × U column blocks of 16 from block c0, the whole reduction.
constexpr int64_t kDirectRows = 4;

template <int MR, int U>
PPOLAB_SIMD_INLINE void pack_direct_block(float* C, int64_t ldc, const ASource& A, const BSource& B, int64_t P,
                                          int64_t c0, int64_t N, bool accumulate) {
    using simd::vi8;
    const uint32_t* block[U];
    for (int u = 0; u < U; ++u) block[u] = static_cast<const uint32_t*>(B.data) + (c0 + u) * (B.ld / 2);
    vf8 acc[MR][U][2] = {};
    const vi8 high = vi8{} - 65536;  // 0xffff0000 in every lane
    for (int64_t q = 0; q < P / 2 + P % 2; ++q) {
        vf8 even[U][2], odd[U][2];
        for (int u = 0; u < U; ++u)
            for (int h = 0; h < 2; ++h) {
                vi8 v;
                std::memcpy(&v, block[u] + q * 16 + h * 8, sizeof v);
                even[u][h] = reinterpret_cast<vf8>(v << 16);
                odd[u][h] = reinterpret_cast<vf8>(v & high);
            }
        for (int r = 0; r < MR; ++r) {
            const float* a = A.a + r * A.row + 2 * q * A.step;
            const vf8 x1 = simd::vset<vf8>(2 * q + 1 < P ? a[A.step] : 0.f);  // +0·+0 past an odd end
            const float s0 = a[0];
            const vf8 x0 = vf8{s0, s0, s0, s0, s0, s0, s0, s0};
            for (int u = 0; u < U; ++u)
                for (int h = 0; h < 2; ++h) acc[r][u][h] = vfma(x1, odd[u][h], acc[r][u][h]);
            for (int u = 0; u < U; ++u)
                for (int h = 0; h < 2; ++h) acc[r][u][h] = vfma(x0, even[u][h], acc[r][u][h]);
        }
    }
    for (int r = 0; r < MR; ++r)
        for (int u = 0; u < U; ++u) {
            const int64_t j0 = (c0 + u) * 16, cols = std::min<int64_t>(16, N - j0);
            if (cols <= 0) break;
            float out[16];
            simd::vstore(out, acc[r][u][0]);
            simd::vstore(out + 8, acc[r][u][1]);
            float* c = C + r * ldc + j0;
            for (int64_t jj = 0; jj < cols; ++jj) c[jj] = accumulate ? c[jj] + out[jj] : out[jj];
        }
}

// One thread's share of the column blocks, in groups of U (as wide as the
// 16 registers allow for MR rows: 8 accumulators, 8 widened vectors).
template <int MR>
PPOLAB_SIMD_INLINE void pack_direct_rows(float* C, int64_t ldc, const ASource& A, const BSource& B, int64_t P,
                                         int64_t N, bool accumulate, int64_t b0, int64_t b1) {
    constexpr int U = MR == 1 ? 4 : MR == 2 ? 2 : 1;
    int64_t c = b0;
    for (; c + U <= b1; c += U) pack_direct_block<MR, U>(C, ldc, A, B, P, c, N, accumulate);
    for (; c < b1; ++c) pack_direct_block<MR, 1>(C, ldc, A, B, P, c, N, accumulate);
}

PPOLAB_SIMD_INLINE void pack_direct(float* C, int64_t ldc, const ASource& A, const BSource& B, int64_t M, int64_t N,
                                    int64_t P, bool accumulate, int64_t t, int64_t T) {
    const int64_t blocks = (N + 15) / 16, b0 = blocks * t / T, b1 = blocks * (t + 1) / T;
    switch (M) {
        case 1: return pack_direct_rows<1>(C, ldc, A, B, P, N, accumulate, b0, b1);
        case 2: return pack_direct_rows<2>(C, ldc, A, B, P, N, accumulate, b0, b1);
        case 3: return pack_direct_rows<3>(C, ldc, A, B, P, N, accumulate, b0, b1);
        default: return pack_direct_rows<4>(C, ldc, A, B, P, N, accumulate, b0, b1);
    }
}

// AVX2: 16 registers, 6 rows × 2 vectors of 8 (12 accumulators; 16
// columns, a VNNI pack's column block).
PPOLAB_SIMD_AVX2 void product_avx2(float* C, int64_t ldc, ASource A, BSource B, int64_t M, int64_t N, int64_t P,
                                   bool accumulate) {
    if (B.kind == Src::vnni && M <= kDirectRows) {
        PPOLAB_ASSERT(A.pairs);
#pragma omp parallel if (M * N * P >= kParallelWork)
        pack_direct(C, ldc, A, B, M, N, P, accumulate, omp_get_thread_num(), omp_get_num_threads());
        return;
    }
#pragma omp parallel if (M * N * P >= kParallelWork)
    product_share<vf8, 6, 2>(C, ldc, A, B, M, N, P, accumulate, omp_get_thread_num(), omp_get_num_threads());
}

// AVX-512: 32 registers. Panels as wide as the outputs need (a LoRA
// factor's 8 to 64 columns would leave most of a wider one idle): 6 rows × 4
// vectors of 16 (24 accumulators), 12 × 2 up to 32 columns, 24 × 1 up to 16.

PPOLAB_SIMD_AVX512 void product_avx512(float* C, int64_t ldc, ASource A, BSource B, int64_t M, int64_t N, int64_t P,
                                       bool accumulate) {
#pragma omp parallel if (M * N * P >= kParallelWork)
    {
        const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
        if (N <= 16) product_share<vf16, 8, 1>(C, ldc, A, B, M, N, P, accumulate, t, T);
        else if (N <= 32) product_share<vf16, 6, 2>(C, ldc, A, B, M, N, P, accumulate, t, T);
        else product_share<vf16, 6, 4>(C, ldc, A, B, M, N, P, accumulate, t, T);
    }
}

// Without vector units (PPOLAB_ISA=scalar, or a CPU without AVX2): the
// same panels, each output its own scalar accumulator (std::fma: one
// instruction where the CPU has FMA, glibc's correctly rounded fma
// elsewhere; the same value either way).
template <int64_t MR>
PPOLAB_SIMD_INLINE void scalar_rows(float* C, int64_t ldc, float* tile, const ASource& A, int64_t i0,
                                    const float* panel, int64_t p0, int64_t kc, int64_t cols, bool first, bool last,
                                    bool accumulate) {
    constexpr int64_t NB = 16;
    float acc[MR][NB];
    for (int64_t r = 0; r < MR; ++r)
        for (int64_t jj = 0; jj < NB; ++jj) acc[r][jj] = first ? 0.f : tile[(i0 + r) * NB + jj];
    auto step = [&](int64_t p) {
        for (int64_t r = 0; r < MR; ++r) {
            const float x = A.a[(i0 + r) * A.row + (p0 + p) * A.step];
            for (int64_t jj = 0; jj < NB; ++jj) acc[r][jj] = std::fma(x, panel[p * NB + jj], acc[r][jj]);
        }
    };
    int64_t p = 0;
    if (A.pairs) {
        for (; p + 1 < kc; p += 2) {
            step(p + 1);
            step(p);
        }
        if (p < kc)  // the product's last pair: +0·+0, then step p
            for (int64_t r = 0; r < MR; ++r)
                for (int64_t jj = 0; jj < NB; ++jj) acc[r][jj] = std::fma(0.f, 0.f, acc[r][jj]);
    }
    for (; p < kc; ++p) step(p);
    for (int64_t r = 0; r < MR; ++r) {
        if (!last) {
            for (int64_t jj = 0; jj < NB; ++jj) tile[(i0 + r) * NB + jj] = acc[r][jj];
            continue;
        }
        float* c = C + (i0 + r) * ldc;
        for (int64_t jj = 0; jj < cols; ++jj) c[jj] = accumulate ? c[jj] + acc[r][jj] : acc[r][jj];
    }
}

// One thread's share of the column panels (OpenMP regions stay in the
// drivers below: an outlined region takes its function's target).
PPOLAB_SIMD_INLINE void scalar_share(float* C, int64_t ldc, const ASource& A, const BSource& B, int64_t M, int64_t N,
                                     int64_t P, bool accumulate, int64_t t, int64_t T) {
    constexpr int64_t NB = 16, MR = 4;
    const int64_t panels = (N + NB - 1) / NB;
    thread_local std::vector<float> panel_buf, tile_buf;
    if (panel_buf.size() < static_cast<size_t>(kPanelK * NB)) panel_buf.resize(kPanelK * NB);
    if (P > kPanelK && tile_buf.size() < static_cast<size_t>(M * NB)) tile_buf.resize(M * NB);
    for (int64_t q = panels * t / T; q < panels * (t + 1) / T; ++q) {
        const int64_t j0 = q * NB, cols = std::min(NB, N - j0);
        for (int64_t p0 = 0; p0 < P; p0 += kPanelK) {
            const int64_t kc = std::min(kPanelK, P - p0);
            const bool first = p0 == 0, last = p0 + kc == P;
            pack_panel<NB>(panel_buf.data(), B, p0, kc, j0, cols);
            int64_t i = 0;
            for (; i + MR <= M; i += MR)
                scalar_rows<MR>(C + j0, ldc, tile_buf.data(), A, i, panel_buf.data(), p0, kc, cols, first, last,
                                accumulate);
            for (; i < M; ++i)
                scalar_rows<1>(C + j0, ldc, tile_buf.data(), A, i, panel_buf.data(), p0, kc, cols, first, last,
                               accumulate);
        }
    }
}

__attribute__((target("fma"))) void product_scalar_fma(float* C, int64_t ldc, ASource A, BSource B, int64_t M,
                                                       int64_t N, int64_t P, bool accumulate) {
#pragma omp parallel if (M * N * P >= kParallelWork)
    scalar_share(C, ldc, A, B, M, N, P, accumulate, omp_get_thread_num(), omp_get_num_threads());
}

void product_scalar(float* C, int64_t ldc, ASource A, BSource B, int64_t M, int64_t N, int64_t P, bool accumulate) {
    static const bool fma = __builtin_cpu_supports("fma");
    if (fma) return product_scalar_fma(C, ldc, A, B, M, N, P, accumulate);
#pragma omp parallel if (M * N * P >= kParallelWork)
    scalar_share(C, ldc, A, B, M, N, P, accumulate, omp_get_thread_num(), omp_get_num_threads());
}

void product(float* C, int64_t ldc, ASource A, BSource B, int64_t M, int64_t N, int64_t P, bool accumulate) {
    switch (simd::simd_level()) {
        case simd::SimdLevel::avx512: return product_avx512(C, ldc, A, B, M, N, P, accumulate);
        case simd::SimdLevel::avx2: return product_avx2(C, ldc, A, B, M, N, P, accumulate);
        default: return product_scalar(C, ldc, A, B, M, N, P, accumulate);
    }
}

// The input rounded to BF16 (held in FP32) where the weight is BF16; else itself.
const float* rounded(const float* x, int64_t n, bool round, std::vector<float>& buf) {
    if (!round) return x;
    buf.resize(static_cast<size_t>(n));
    round_to_bf16_values(buf.data(), x, n);
    return buf.data();
}

// A frozen BF16 weight's VNNI pack (kept by its PrepackedWeight) where the
// vector paths run: contiguous panels to widen instead of a strided
// transpose of the row-major weight.
bool use_pack(const WeightView& W) {
    return W.type == WeightType::bf16 && W.prepacked != nullptr && W.prepacked->matches(W) &&
           simd::simd_level() != simd::SimdLevel::portable;
}

BSource pack_source(const WeightView& W, AmxOperand op) {
    const AmxPack& P = amx_pack_for(W, op);
    return {Src::vnni, P.tiles.get(), P.kb * 512};  // bf16 elements between column blocks (kb tiles of 512)
}

}  // namespace

namespace matmul_detail {

void canonical_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    thread_local std::vector<float> xr;
    const bool bf = W.type == WeightType::bf16;
    const ASource A{rounded(X, M * K, bf, xr), K, 1, bf};
    const BSource B =
        use_pack(W) ? pack_source(W, AmxOperand::forward) : BSource{bf ? Src::cols_bf16 : Src::cols_f32, W.data, K};
    product(Y, N, A, B, M, N, K, accumulate);
}

void canonical_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    thread_local std::vector<float> gr;
    const bool bf = W.type == WeightType::bf16;
    const ASource A{rounded(dY, M * N, bf, gr), N, 1, bf};
    const BSource B = use_pack(W) ? pack_source(W, AmxOperand::backward_input)
                                  : BSource{bf ? Src::rows_bf16 : Src::rows_f32, W.data, K};
    product(dX, K, A, B, M, K, N, accumulate);
}

void canonical_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                               WeightType inputs) {
    thread_local std::vector<float> gr, xr;
    const bool bf = inputs == WeightType::bf16;
    const ASource A{rounded(dY, M * N, bf, gr), 1, N, bf};  // A(n, m) = dY[m, n]
    product(dW, K, A, {Src::rows_f32, rounded(X, M * K, bf, xr), K}, N, K, M, true);
}

}  // namespace matmul_detail
}  // namespace ppolab
