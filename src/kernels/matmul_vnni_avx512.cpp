// matmul_vnni_avx512.cpp — the frozen base's decode-sized products
// (M ≤ kSmallM rows, forward) on a CPU with AVX-512 but no AMX tiles, and
// where BF16 products run as FP32 its larger ones too (forward, and backward
// to the input on the pack of W; matmul.cpp chooses), read from the weight's
// VNNI pack (matmul_amx.h, the pack the AMX path reads), one input value or
// pair broadcast to every lane:
//   * BF16 products native (matmul_backend.h): `vdpbf16ps`, one input pair
//     against one reduction pair of 16 columns;
//   * BF16 products as FP32 (a CPU whose `vdpbf16ps` is slow or absent, as
//     the Emerald Rapids without AMX of session 13): the 64-byte row of the
//     pack widened in registers to the two FP32 vectors of its pair (a shift
//     and a mask), then two `vfmadd231ps` per input row, the odd term first.
// Both are the reference loops' arithmetic exactly, bit for bit on any data
// (NaN payloads aside): the products are exact, each lane sums them from
// zero pair by pair, the odd term first, and with the denormals flushed on
// every thread (numerics.h) `vdpbf16ps`'s two roundings are two FMAs'.
//
// The row stream of matmul_avx512.cpp forms dot products along K, so each
// of its multiply-adds needs an input load beside the weight's and ends in a
// sum across lanes per output; at 8 and more rows it ran at 28 % of
// `vdpbf16ps`'s rate (Zen 4, BENCHMARKS.md session 22). Here a 64-byte row
// of the pack holds one reduction pair for 16 output columns, so one weight
// load feeds MR rows, one broadcast input pair feeds U column blocks, and
// each lane accumulates one output element from start to end: no sum across
// lanes.
//
// With FMA and more than MR rows, a column group's weights are widened to
// FP32 once into a per-thread panel (in chunks of kChunkPairs reduction
// pairs, the partial sums kept in FP32 between chunks) and the other row
// blocks read the panel: the widening no longer competes with the FMAs for
// the vector ports. Where few row blocks read a panel, the first widens and
// stores it as it computes (a separate widening pass left the FMAs idle
// while it waited on the pack: 18 % of a 32-row product), and the row
// blocks bring the next panel's pack into L2 as they go. Few column blocks
// and many rows: the threads split the rows.
//
// Order of the sums: output element (m, n) is one lane's FP32 accumulator,
// starting from zero and taking the reduction pairs in order; with
// `accumulate` the finished sum is then added to the destination, as the
// reference does. The order depends on K only — not on M, the blocking or
// the thread count — so row invariance (matmul.h) holds and results are the
// same bytes at any number of threads.
//
// Compiled for -march=x86-64-v3: the vector functions carry a target
// attribute (PPOLAB_AVX512F: F/BW/VL/DQ; PPOLAB_AVX512: also BF16) and run
// only after the matching cpuid check.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/matmul_amx.h"
#include "kernels/matmul_backend.h"
#include "kernels/numerics.h"
#include "kernels/simd.h"
#include "util/error.h"

#define PPOLAB_AVX512F __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define PPOLAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace ppolab {
namespace {

constexpr int64_t kBlockCols = 16;     // output columns of a pack's column block (one zmm of FP32)
constexpr int64_t kPairElems = 32;     // BF16 elements of one reduction pair of a column block (64 bytes)
constexpr int64_t kBlockPairs = 16;    // reduction pairs per 1 KiB tile of the pack
constexpr int kRowsPerBlock = 8;       // MR: input rows per register block
constexpr int64_t kChunkPairs = 1024;  // reduction pairs per widened panel (U·128 KiB: stays in L2)
// Up to this many row blocks per panel the first widens it as it computes
// and the next panel is prefetched; above, a separate pass widens it
// (BENCHMARKS.md session 26: at 4 row blocks the pass was 18 % of a
// product; at 64, whole-model LoRA 4×128 was not shown faster).
constexpr int64_t kFusedWideningBlocks = 16;
constexpr int64_t kDpbf16ChunkRows = 256;  // rows of X per pass over a thread's column blocks
constexpr int kColumnBlocksPerStep =
    3;  // U: column blocks per register block (8·3 accumulators + 3 or 6 + 1 of 32 zmm)

// A 64-byte-aligned FP32 buffer that only grows (one per thread).
class AlignedFloats {
public:
    float* at_least(int64_t n) {
        if (n > size_) {
            data_.reset(static_cast<float*>(std::aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64)));
            PPOLAB_ASSERT(data_ != nullptr);
            size_ = n;
        }
        return data_.get();
    }

private:
    struct Free {
        void operator()(float* p) const { std::free(p); }
    };
    std::unique_ptr<float[], Free> data_;
    int64_t size_ = 0;
};

// How a register block multiplies: `vdpbf16ps` on BF16 pairs (X: one
// uint32 = one BF16 pair per reduction pair), or `vfmadd231ps` on the
// weights widened to FP32 (X: BF16-rounded values in FP32, two per pair).
enum class Op { dpbf16, fma };
template <Op op>
using XElem = std::conditional_t<op == Op::dpbf16, uint32_t, float>;

// Stores (or adds, with accumulate) the MR×U accumulators to Y's columns below N.
template <int MR, int U>
PPOLAB_AVX512F inline void store_block(float* Y, int64_t ldy, const __m512 (&acc)[MR][U], int64_t N, bool accumulate) {
    for (int u = 0; u < U; ++u) {
        const int64_t n = u * kBlockCols;
        if (n >= N) break;
        const int64_t cols = std::min(kBlockCols, N - n);
        const __mmask16 mask = static_cast<__mmask16>(cols == 16 ? 0xffff : (1u << cols) - 1);
        for (int m = 0; m < MR; ++m) {
            float* y = Y + m * ldy + n;
            __m512 v = acc[m][u];
            if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), v);
            _mm512_mask_storeu_ps(y, mask, v);
        }
    }
}

// Y[m, 16u + c] for m < MR, u < U, c < 16, columns below N: MR input rows
// (X, row stride ldx elements) against U column blocks of the pack (the
// first at w, the next `stride` elements further), `pairs` reduction pairs.
template <int MR, int U>
PPOLAB_AVX512 void register_block_dpbf16(float* Y, int64_t ldy, const uint32_t* X, int64_t ldx, const bf16* w,
                                         int64_t stride, int64_t pairs, int64_t N, bool accumulate) {
    __m512 acc[MR][U] = {};  // zeros
    for (int64_t r = 0; r < pairs; ++r) {
        __m512bh wv[U];
        for (int u = 0; u < U; ++u) wv[u] = (__m512bh)_mm512_load_si512(w + u * stride + r * kPairElems);
        for (int m = 0; m < MR; ++m) {
            const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(X[m * ldx + r]));
            for (int u = 0; u < U; ++u) acc[m][u] = _mm512_dpbf16_ps(acc[m][u], x, wv[u]);
        }
    }
    store_block<MR, U>(Y, ldy, acc, N, accumulate);
}

// A pack row in FP32: lane c holds (B[2r][c], B[2r+1][c]), the first in
// its low half, so a shift left by 16 gives B[2r][c] in FP32 and clearing the
// low half leaves B[2r+1][c]. (The all-lanes maskz form: gcc 12 warns
// -Wmaybe-uninitialized of the unmasked shift's undefined-register temporary.)
PPOLAB_AVX512F inline void widen_pair(__m512i v, __m512& even, __m512& odd) {
    even = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, v, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

// One pack row (at w) widened into a panel's 32 floats at q: B[2r] then
// B[2r + 1], also left in even and odd.
PPOLAB_AVX512F inline void widen_to_panel(float* q, const bf16* w, __m512& even, __m512& odd) {
    widen_pair(_mm512_load_si512(w), even, odd);
    _mm512_store_ps(q, even);
    _mm512_store_ps(q + kBlockCols, odd);
}

// One reduction pair r of an FP32 register block: each accumulator takes
// 2r + 1, then 2r (`vdpbf16ps`'s order, the reference's for BF16 products).
template <int MR, int U>
PPOLAB_AVX512F inline void fma_pair(__m512 (&acc)[MR][U], const __m512 (&even)[U], const __m512 (&odd)[U],
                                    const float* X, int64_t ldx, int64_t r) {
    for (int m = 0; m < MR; ++m) {
        const __m512 x1 = _mm512_set1_ps(X[m * ldx + 2 * r + 1]);
        for (int u = 0; u < U; ++u) acc[m][u] = _mm512_fmadd_ps(x1, odd[u], acc[m][u]);
        const __m512 x0 = _mm512_set1_ps(X[m * ldx + 2 * r]);
        for (int u = 0; u < U; ++u) acc[m][u] = _mm512_fmadd_ps(x0, even[u], acc[m][u]);
    }
}

// The same block in FP32, each pack row widened in registers (decode: the
// weights are read once, for at most MR rows).
template <int MR, int U>
PPOLAB_AVX512F void register_block_fma(float* Y, int64_t ldy, const float* X, int64_t ldx, const bf16* w,
                                       int64_t stride, int64_t pairs, int64_t N, bool accumulate) {
    __m512 acc[MR][U] = {};  // zeros
    for (int64_t r = 0; r < pairs; ++r) {
        __m512 even[U], odd[U];
        for (int u = 0; u < U; ++u) widen_pair(_mm512_load_si512(w + u * stride + r * kPairElems), even[u], odd[u]);
        fma_pair<MR, U>(acc, even, odd, X, ldx, r);
    }
    store_block<MR, U>(Y, ldy, acc, N, accumulate);
}

// Lines of the pack to bring into L2 while a row block computes: reduction
// pairs [0, pairs) of `streams` column blocks, the first at w, the next
// `stride` elements further (the next panel's share of this row block).
struct PackLines {
    const bf16* w = nullptr;
    int64_t stride = 0;
    int streams = 0;
    int64_t pairs = 0;
    void fetch(int64_t r) const {
        for (int s = 0; s < streams; ++s)
            _mm_prefetch(reinterpret_cast<const char*>(w + s * stride + r * kPairElems), _MM_HINT_T1);
    }
};

// The same block on weights widened to FP32 in a panel: for reduction pair
// r, column block u, 16 floats of B[2r] then 16 of B[2r+1] at
// panel + (r·U + u)·32. With Widen the block reads the pack instead (U column
// blocks, the first at w, the next `stride` elements further), widens it in
// registers and stores the panel for the row blocks after it. Same products,
// same order: the same bytes. `next`: pack lines to prefetch, one group of
// them per reduction pair. A long reduction runs in chunks: `in` (when not
// null) holds the sums of the chunks before, MR rows of U·16 floats `ldp`
// apart, and `out` (when not null) takes the sums so far instead of Y; FP32
// values pass through memory unchanged, so the sums are those of one pass.
template <int MR, int U, bool Widen = false>
PPOLAB_AVX512F void register_block_fma_wide(float* Y, int64_t ldy, const float* X, int64_t ldx, float* panel,
                                            int64_t pairs, int64_t N, bool accumulate, const float* in, float* out,
                                            int64_t ldp, const PackLines& next, const bf16* w = nullptr,
                                            int64_t stride = 0) {
    __m512 acc[MR][U] = {};  // zeros
    if (in)
        for (int m = 0; m < MR; ++m)
            for (int u = 0; u < U; ++u) acc[m][u] = _mm512_loadu_ps(in + m * ldp + u * kBlockCols);
    const int64_t spread = std::min(pairs, next.pairs);
    for (int64_t r = 0; r < pairs; ++r) {
        if (r < spread) next.fetch(r);
        __m512 even[U], odd[U];
        for (int u = 0; u < U; ++u) {
            float* q = panel + (r * U + u) * 2 * kBlockCols;
            if constexpr (Widen) {
                widen_to_panel(q, w + u * stride + r * kPairElems, even[u], odd[u]);
            } else {
                even[u] = _mm512_load_ps(q);
                odd[u] = _mm512_load_ps(q + kBlockCols);
            }
        }
        fma_pair<MR, U>(acc, even, odd, X, ldx, r);
    }
    for (int64_t r = spread; r < next.pairs; ++r) next.fetch(r);
    if (!out) return store_block<MR, U>(Y, ldy, acc, N, accumulate);
    for (int m = 0; m < MR; ++m)
        for (int u = 0; u < U; ++u) _mm512_storeu_ps(out + m * ldp + u * kBlockCols, acc[m][u]);
}

// U column blocks of the pack (the first at w, the next `stride` elements
// further) widened to FP32 in register_block_fma_wide's order, once for all
// the row blocks that read them.
template <int U>
PPOLAB_AVX512F void widen_panel(float* panel, const bf16* w, int64_t stride, int64_t pairs) {
    for (int64_t r = 0; r < pairs; ++r)
        for (int u = 0; u < U; ++u) {
            __m512 even, odd;
            widen_to_panel(panel + (r * U + u) * 2 * kBlockCols, w + u * stride + r * kPairElems, even, odd);
        }
}

template <Op op, int MR, int U>
PPOLAB_AVX512F inline void register_block(float* Y, int64_t ldy, const XElem<op>* X, int64_t ldx, const bf16* w,
                                          int64_t stride, int64_t pairs, int64_t N, bool accumulate) {
    if constexpr (op == Op::dpbf16) register_block_dpbf16<MR, U>(Y, ldy, X, ldx, w, stride, pairs, N, accumulate);
    else register_block_fma<MR, U>(Y, ldy, X, ldx, w, stride, pairs, N, accumulate);
}

// U column blocks (their weights at w) against the M rows of X, in blocks of
// up to MR rows: the group's weights come from DRAM for the first block and
// from L1/L2 for the others.
template <Op op, int U>
PPOLAB_AVX512F void column_group(float* Y, int64_t ldy, const XElem<op>* X, int64_t ldx, int64_t M, const bf16* w,
                                 int64_t stride, int64_t pairs, int64_t N, bool accumulate, int next_blocks) {
    if constexpr (op == Op::fma) {
        if (M > kRowsPerBlock) {  // several row blocks: widen the weights once, not once per block
            thread_local AlignedFloats panel, partial;
            const int64_t chunk = std::min(pairs, kChunkPairs), ldp = U * kBlockCols;
            const int64_t blocks = (M + kRowsPerBlock - 1) / kRowsPerBlock;
            const bool fused = blocks <= kFusedWideningBlocks;
            float* p = panel.at_least(chunk * U * 2 * kBlockCols);
            float* part = pairs > chunk ? partial.at_least(M * ldp) : nullptr;
            for (int64_t c0 = 0; c0 < pairs; c0 += chunk) {
                const int64_t cp = std::min(chunk, pairs - c0);
                if (!fused) widen_panel<U>(p, w + c0 * kPairElems, stride, cp);
                // The next panel (this group's next chunk, or the next
                // group's first) comes into L2 while the row blocks compute,
                // its column blocks shared out between the first row blocks.
                const bool more = c0 + cp < pairs;
                const bf16* nw = more ? w + (c0 + cp) * kPairElems : w + U * stride;
                const int nu = more ? U : next_blocks;
                const int64_t ncp = more ? std::min(chunk, pairs - c0 - cp) : chunk;
                for (int64_t m0 = 0; m0 < M; m0 += kRowsPerBlock) {
                    const int64_t b = m0 / kRowsPerBlock;
                    PackLines next;
                    if (fused && b < nu)
                        next = {nw + b * stride, blocks * stride, static_cast<int>((nu - 1 - b) / blocks + 1), ncp};
                    float* y = Y + m0 * ldy;
                    const float* x = X + m0 * ldx + 2 * c0;
                    const float* in = c0 > 0 ? part + m0 * ldp : nullptr;
                    float* out = c0 + cp < pairs ? part + m0 * ldp : nullptr;
                    if (fused && m0 == 0) {  // the first block (M > MR: all MR rows) widens the panel as it goes
                        register_block_fma_wide<kRowsPerBlock, U, true>(y, ldy, x, ldx, p, cp, N, accumulate, in, out,
                                                                        ldp, next, w + c0 * kPairElems, stride);
                        continue;
                    }
#define PPOLAB_WIDE(MR) register_block_fma_wide<MR, U>(y, ldy, x, ldx, p, cp, N, accumulate, in, out, ldp, next)
                    switch (std::min<int64_t>(kRowsPerBlock, M - m0)) {
                        case 1: PPOLAB_WIDE(1); break;
                        case 2: PPOLAB_WIDE(2); break;
                        case 3: PPOLAB_WIDE(3); break;
                        case 4: PPOLAB_WIDE(4); break;
                        case 5: PPOLAB_WIDE(5); break;
                        case 6: PPOLAB_WIDE(6); break;
                        case 7: PPOLAB_WIDE(7); break;
                        default: PPOLAB_WIDE(8); break;
                    }
#undef PPOLAB_WIDE
                }
            }
            return;
        }
    }
    for (int64_t m0 = 0; m0 < M; m0 += kRowsPerBlock) {
        float* y = Y + m0 * ldy;
        const XElem<op>* x = X + m0 * ldx;
        switch (std::min<int64_t>(kRowsPerBlock, M - m0)) {
            case 1: register_block<op, 1, U>(y, ldy, x, ldx, w, stride, pairs, N, accumulate); break;
            case 2: register_block<op, 2, U>(y, ldy, x, ldx, w, stride, pairs, N, accumulate); break;
            case 3: register_block<op, 3, U>(y, ldy, x, ldx, w, stride, pairs, N, accumulate); break;
            case 4: register_block<op, 4, U>(y, ldy, x, ldx, w, stride, pairs, N, accumulate); break;
            case 5: register_block<op, 5, U>(y, ldy, x, ldx, w, stride, pairs, N, accumulate); break;
            case 6: register_block<op, 6, U>(y, ldy, x, ldx, w, stride, pairs, N, accumulate); break;
            case 7: register_block<op, 7, U>(y, ldy, x, ldx, w, stride, pairs, N, accumulate); break;
            default: register_block<op, 8, U>(y, ldy, x, ldx, w, stride, pairs, N, accumulate); break;
        }
    }
}

// The M rows of X against column blocks [j0, j1), in groups of U blocks
// (the last group narrower).
template <Op op>
PPOLAB_AVX512F void columns_range(float* Y, const XElem<op>* X, int64_t ldx, int64_t M, const AmxPack& P, int64_t j0,
                                  int64_t j1, int64_t pairs, bool accumulate) {
    constexpr int U = kColumnBlocksPerStep;
    const int64_t stride = P.kb * kBlockPairs * kPairElems;  // elements between column blocks
    for (int64_t j = j0; j < j1; j += U) {
        const bf16* w = P.tiles.get() + j * stride;
        float* y = Y + j * kBlockCols;
        const int64_t N = P.n - j * kBlockCols;                                    // columns from this group's first on
        const int next = static_cast<int>(std::clamp<int64_t>(j1 - j - U, 0, U));  // the next group's blocks
        switch (std::min<int64_t>(U, j1 - j)) {
            case 1: column_group<op, 1>(y, P.n, X, ldx, M, w, stride, pairs, N, accumulate, next); break;
            case 2: column_group<op, 2>(y, P.n, X, ldx, M, w, stride, pairs, N, accumulate, next); break;
            default: column_group<op, U>(y, P.n, X, ldx, M, w, stride, pairs, N, accumulate, next); break;
        }
    }
}

// The product on the pack P, X prepared for op (ldx elements per row), over
// the column blocks that hold outputs, split between the threads.
template <Op op>
void product(float* Y, const XElem<op>* X, int64_t ldx, int64_t M, int64_t K, const AmxPack& P, bool accumulate) {
    const int64_t pairs = (K + 1) / 2;
    const int64_t nb = (P.n + kBlockCols - 1) / kBlockCols;  // column blocks holding outputs
    const bool parallel = M * P.n * K >= (int64_t(1) << 18) && nb > 1;
#pragma omp parallel if (parallel)
    {
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
        // Few column blocks (k and v: 8) and many rows: the threads split
        // the rows (in whole register blocks) instead; every output's sum is
        // the same either way.
        if (M > kSmallM && nb < 4 * kColumnBlocksPerStep * T) {
            const int64_t rb = (M + kRowsPerBlock - 1) / kRowsPerBlock;
            const int64_t m0 = rb * t / T * kRowsPerBlock, m1 = std::min(M, rb * (t + 1) / T * kRowsPerBlock);
            if (m1 > m0) columns_range<op>(Y + m0 * P.n, X + m0 * ldx, ldx, m1 - m0, P, 0, nb, pairs, accumulate);
        } else {
            const int64_t j0 = nb * t / T, j1 = nb * (t + 1) / T;
            // `vdpbf16ps` reads X itself: in row chunks that stay in L2
            // while the thread's column groups pass over them (the FMA
            // path reads X from its own widened panels, column_group).
            const int64_t rows = op == Op::dpbf16 ? kDpbf16ChunkRows : M;
            for (int64_t m0 = 0; m0 < M && j1 > j0; m0 += rows)
                columns_range<op>(Y + m0 * P.n, X + m0 * ldx, ldx, std::min(rows, M - m0), P, j0, j1, pairs,
                                  accumulate);
        }
    }
}

}  // namespace

// In both modes: `vdpbf16ps` computes the reference's chain of FMAs, pair
// by pair with the odd term first, under the flushed denormals of every
// thread (numerics.h), bit for bit.
bool small_m_vnni_uses_dpbf16() { return matmul_has_avx512bf16() && bf16_products_native(); }

namespace matmul_detail {

namespace {

// Y (M × P.n) = X (M × P.k) · B on the pack P: X rounded to BF16, each row
// padded with a zero to whole pairs (the pack's padding is zero too).
void vnni_product(float* Y, const float* X, const AmxPack& P, int64_t M, bool accumulate) {
    const int64_t K = P.k, pairs = (K + 1) / 2;
    if (small_m_vnni_uses_dpbf16()) {
        thread_local std::vector<uint32_t> xb;  // one BF16 pair per element
        if (static_cast<int64_t>(xb.size()) < M * pairs) xb.resize(M * pairs);
        uint32_t* x = xb.data();
#pragma omp parallel for schedule(static) if (M * K >= (int64_t(1) << 16))
        for (int64_t m = 0; m < M; ++m) {
            x[m * pairs + pairs - 1] = 0;
            convert_to_bf16(reinterpret_cast<bf16*>(x + m * pairs), X + m * K, K);
        }
        product<Op::dpbf16>(Y, xb.data(), pairs, M, K, P, accumulate);
    } else {
        thread_local std::vector<float> xr;  // BF16 values in FP32
        const int64_t ldx = 2 * pairs;
        if (static_cast<int64_t>(xr.size()) < M * ldx) xr.resize(M * ldx);
        float* x = xr.data();
#pragma omp parallel for schedule(static) if (M * K >= (int64_t(1) << 16))
        for (int64_t m = 0; m < M; ++m) {
            x[m * ldx + ldx - 1] = 0.f;
            round_to_bf16_values(x + m * ldx, X + m * K, K);
        }
        product<Op::fma>(Y, xr.data(), ldx, M, K, P, accumulate);
    }
}

}  // namespace

void small_m_vnni_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    PPOLAB_ASSERT(W.type == WeightType::bf16 && simd::simd_cpu_level() == simd::SimdLevel::avx512);
    if (M == 0 || W.rows == 0) return;
    vnni_product(Y, X, amx_pack_for(W, AmxOperand::forward), M, accumulate);
}

void small_m_vnni_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    PPOLAB_ASSERT(W.type == WeightType::bf16 && simd::simd_cpu_level() == simd::SimdLevel::avx512);
    if (M == 0 || W.cols == 0) return;
    vnni_product(dX, dY, amx_pack_for(W, AmxOperand::backward_input), M, accumulate);
}

}  // namespace matmul_detail
}  // namespace ppolab
