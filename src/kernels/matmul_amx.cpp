// matmul_amx.cpp — the AMX-BF16 path: products with a BF16 weight (the
// frozen base's forward and backward to the input, decode included),
// on Intel's tile unit (`tdpbf16ps`: a 16 × 16 FP32 tile += a 16 × 32 BF16
// tile · a 32 × 16 BF16 tile, 16 384 FLOP per instruction).
//
// The contract of matmul.h: the FP32 left operand is rounded to BF16 (round
// to nearest even, convert_to_bf16) into a zero-padded buffer of whole
// tiles, the weight is read as packed VNNI tiles (matmul_amx.h; a frozen
// weight's pack is made once and kept by its PrepackedWeight, any other is
// packed per call), and every product is accumulated in FP32 in the tile.
// Like `vdpbf16ps`, `tdpbf16ps` treats BF16 denormal inputs as zero and
// flushes denormal results (the small-M path's documented difference from
// the reference loops, irrelevant for real activations).
//
// Order of the sums: each output element is the sum over the reduction in
// blocks of 32, in block order, starting from zero; with `accumulate` the
// finished sum is then added to the destination, as the reference does.
// The order depends on the reduction length only — not on M, the thread
// count or the column split — so results are the same bytes at any number
// of threads.
//
// Register blocking: 2 × 2 output tiles (32 rows × 32 columns) in tmm0–3,
// two A tiles in tmm4–5 and two B tiles in tmm6–7: four tile loads feed four
// `tdpbf16ps`; 1 × 2 where the lower 16 rows are all padding (decode), with
// each element's sum the same. The threads split the column pairs of a
// large weight, or the rows of a small one (amx_product); a thread walks its
// columns in pairs of blocks, and for each pair the rows of a pass (as many
// as keep A in L2).
#include "kernels/matmul_amx.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/numerics.h"
#include "kernels/unit_rates.h"
#include "util/error.h"

#define PPOLAB_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace ppolab {
namespace {

constexpr int64_t kTileRows = 16;  // rows of an A or C tile; reduction pairs of a B tile
constexpr int64_t kTileK = 32;     // BF16 reduction steps of one tile
constexpr int64_t kTileN = 16;     // FP32 output columns of one tile
constexpr int64_t kTileElems = kTileRows * kTileK;

int64_t blocks(int64_t n, int64_t b) { return (n + b - 1) / b; }

const unit_rates::AmxTileConfig kFullTiles{};  // palette 1, tmm0–7 all 16 × 64 bytes

// A 64-byte aligned, zero-filled BF16 buffer of n elements.
std::unique_ptr<bf16[], AmxPack::Free> aligned_bf16(int64_t n) {
    const size_t bytes = (static_cast<size_t>(n) * sizeof(bf16) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, std::max<size_t>(bytes, 64));
    if (p == nullptr) fail("AMX path: could not allocate ", bytes, " bytes");
    std::memset(p, 0, bytes);
    return std::unique_ptr<bf16[], AmxPack::Free>(static_cast<bf16*>(p));
}

// The left operand's buffer: whole tiles (rows to a multiple of 32, row
// length ld, a multiple of 32), per calling thread, 64-byte aligned.
bf16* left_buffer(int64_t rows, int64_t ld) {
    thread_local std::vector<bf16> buffer;
    const size_t need = static_cast<size_t>(rows * ld + 32);  // + room to align
    if (buffer.size() < need) buffer.resize(need);
    bf16* a = buffer.data();
    return a + (64 - reinterpret_cast<uintptr_t>(a) % 64) % 64 / sizeof(bf16);
}

// Row m of the left operand: x's row rounded to BF16, zero past `cols`
// (and a zero row past M).
void left_row(bf16* a, const float* x, int64_t m, int64_t M, int64_t cols, int64_t ld) {
    bf16* row = a + m * ld;
    if (m >= M) return std::fill(row, row + ld, bf16{0});
    convert_to_bf16(row, x + m * cols, cols);
    std::fill(row + cols, row + ld, bf16{0});
}

// Rows of A per pass over a thread's columns: as many 32-row blocks as fit
// in about 1 MiB (half of an L2), so that A is read from L2, not L3, by
// every column pair of the pass (the weight is read once per pass).
constexpr int64_t kPassBytes = int64_t(1) << 20;
// A weight of this many bytes is read by all threads even for one row: a
// thread alone read a 1.6 MB weight at half the small-M stream's speed.
constexpr int64_t kParallelBytes = int64_t(1) << 17;

// Where the finished 16 × 16 tile at row m, column n of C (M × N, row
// stride ldc) goes: in place when whole and not accumulating, else to the
// scratch tile and from there into C (finish). The caller stores the tile
// (`_tile_stored` names its tile register by a literal: GCC pastes it into
// the instruction, so no helper can take it as a parameter).
struct TileOut {
    float* to = nullptr;  // nullptr: the tile lies wholly in the padding
    int64_t stride = 0;   // bytes between its rows at `to`
    float* c = nullptr;
    int64_t ldc = 0, rows = 0, cols = 0;
    bool via_scratch = false, accumulate = false;
    const float* scratch = nullptr;

    void finish() const {
        if (!via_scratch) return;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t q = 0; q < cols; ++q)
                c[r * ldc + q] = accumulate ? c[r * ldc + q] + scratch[r * kTileN + q] : scratch[r * kTileN + q];
    }
};

TileOut tile_out(float* C, int64_t ldc, int64_t M, int64_t N, int64_t m, int64_t n, bool accumulate, float* scratch) {
    TileOut o;
    if (m >= M || n >= N) return o;
    o.c = C + m * ldc + n;
    o.ldc = ldc;
    o.rows = std::min(kTileRows, M - m);
    o.cols = std::min(kTileN, N - n);
    o.accumulate = accumulate;
    o.scratch = scratch;
    o.via_scratch = accumulate || o.rows < kTileRows || o.cols < kTileN;
    o.to = o.via_scratch ? scratch : o.c;
    o.stride = (o.via_scratch ? kTileN : ldc) * static_cast<int64_t>(sizeof(float));
    return o;
}

// One thread's share: rows [r0, r1) (r0 a multiple of 32) and column-block
// pairs [j0, j1) of C (M × N, row stride ldc) = A (whole tiles, row stride
// lda) · B.
PPOLAB_AMX void amx_block(float* C, int64_t ldc, int64_t M, int64_t N, const bf16* A, int64_t lda, const AmxPack& B,
                          int64_t r0, int64_t r1, int64_t j0, int64_t j1, bool accumulate) {
    // The operands were written before the OpenMP region; the barrier keeps
    // the compiler from moving any store past the tile loads (GCC 12's
    // _tile_loadd does not say it reads memory).
    __asm__ volatile("" ::: "memory");
    _tile_loadconfig(&kFullTiles);
    alignas(64) float scratch[kTileRows * kTileN];
    const int64_t kb = B.kb, a_stride = lda * static_cast<int64_t>(sizeof(bf16));
    // The weight is read once per pass, mostly from DRAM: the tiles of the
    // next column pair are prefetched while this pair runs, spread over its
    // reduction steps (1.3–1.5× measured at the 0.5B's shapes, BENCHMARKS.md),
    // and the first pair's before the pass. Into L2, not L1: a pair is 56 KB
    // at K = 896 (311 KB at 4864), more than L1 holds beside the pair being
    // read, and an L1 prefetch holds one of L1's few fill buffers until DRAM
    // answers; decode read the weights 1.11–1.21× faster (session 20).
    const int64_t pair_lines = 2 * kb * kTileElems * static_cast<int64_t>(sizeof(bf16)) / 64;
    const int64_t pass_rows = std::max<int64_t>(1, kPassBytes / (2 * kTileRows * a_stride)) * 2 * kTileRows;
    for (int64_t m0 = r0; m0 < r1; m0 += pass_rows) {
        const int64_t m1 = std::min(r1, m0 + pass_rows);
        const int64_t steps = blocks(m1 - m0, 2 * kTileRows) * kb, per_step = blocks(pair_lines, steps);
        if (j0 < j1)
            for (int64_t l = 0; l < pair_lines; ++l)
                _mm_prefetch(reinterpret_cast<const char*>(B.tiles.get() + j0 * kb * kTileElems) + 64 * l, _MM_HINT_T1);
        for (int64_t j = j0; j < j1; j += 2) {
            const bf16* b0 = B.tiles.get() + j * kb * kTileElems;
            const bf16* b1 = b0 + kb * kTileElems;
            const int64_t n = j * kTileN;
            const char* next = j + 2 < j1 ? reinterpret_cast<const char*>(b1 + kb * kTileElems) : nullptr;
            const char* next_end = next ? next + 64 * pair_lines : nullptr;
            for (int64_t m = m0; m < m1; m += 2 * kTileRows) {
                const bf16* a0 = A + m * lda;
                const bf16* a1 = a0 + kTileRows * lda;
                // The lower tiles wholly padding (decode: M ≤ 16): 1 × 2 tiles, each element's sum the same.
                const bool lower = m + kTileRows < M;
                _tile_zero(0);
                _tile_zero(1);
                if (lower) {
                    _tile_zero(2);
                    _tile_zero(3);
                }
                for (int64_t p = 0; p < kb; ++p) {
                    _tile_loadd(4, a0 + p * kTileK, a_stride);
                    _tile_loadd(6, b0 + p * kTileElems, 64);
                    _tile_loadd(7, b1 + p * kTileElems, 64);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    if (lower) {
                        _tile_loadd(5, a1 + p * kTileK, a_stride);
                        _tile_dpbf16ps(2, 5, 6);
                        _tile_dpbf16ps(3, 5, 7);
                    }
                    for (int64_t q = 0; q < per_step && next < next_end; ++q, next += 64)
                        _mm_prefetch(next, _MM_HINT_T1);
                }
                TileOut out = tile_out(C, ldc, M, N, m, n, accumulate, scratch);
                if (out.to) {
                    _tile_stored(0, out.to, out.stride);
                    out.finish();
                }
                out = tile_out(C, ldc, M, N, m, n + kTileN, accumulate, scratch);
                if (out.to) {
                    _tile_stored(1, out.to, out.stride);
                    out.finish();
                }
                out = tile_out(C, ldc, M, N, m + kTileRows, n, accumulate, scratch);
                if (out.to) {
                    _tile_stored(2, out.to, out.stride);
                    out.finish();
                }
                out = tile_out(C, ldc, M, N, m + kTileRows, n + kTileN, accumulate, scratch);
                if (out.to) {
                    _tile_stored(3, out.to, out.stride);
                    out.finish();
                }
            }
        }
    }
    _tile_release();
}

// C (M × B.n) = rounded x (M × B.k) · B, on every OpenMP thread. A large
// weight (a pack over 1 MiB) with at least 4 column pairs per thread: the
// threads split the pairs in contiguous ranges, so the weight is read once,
// and every thread reads all of A (rounded by all threads first). A small
// one (k and v projections, the tiny model) or few pairs: the threads split
// the rows in 32-row blocks, each rounds and reads its own rows only, and
// every thread reads the whole (small) weight (measured up to 2.4× faster
// there, BENCHMARKS.md). Either way each output element is the same sum.
void amx_product(float* C, const float* x, int64_t M, const AmxPack& B, bool accumulate) {
    const int64_t lda = B.kb * kTileK, rows = blocks(M, 2 * kTileRows) * 2 * kTileRows;
    bf16* A = left_buffer(rows, lda);
    const int64_t pairs = B.nb / 2, row_blocks = rows / (2 * kTileRows);
    // Threads where the work is large or the weight is (decode: reading it is the work).
    const bool parallel =
        (M * B.n * B.k >= (int64_t(1) << 20) || B.bytes() >= kParallelBytes) && (pairs > 1 || row_blocks > 1);
#pragma omp parallel if (parallel)
    {
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
        const bool split_rows = row_blocks >= T && (B.bytes() <= kPassBytes || pairs < 4 * T);
        if (!split_rows) {
#pragma omp for schedule(static)
            for (int64_t m = 0; m < rows; ++m) left_row(A, x, m, M, B.k, lda);
            const int64_t p0 = pairs * t / T, p1 = pairs * (t + 1) / T;
            if (p1 > p0) amx_block(C, B.n, M, B.n, A, lda, B, 0, rows, 2 * p0, 2 * p1, accumulate);
        } else {
            const int64_t r0 = row_blocks * t / T * 2 * kTileRows, r1 = row_blocks * (t + 1) / T * 2 * kTileRows;
            for (int64_t m = r0; m < r1; ++m) left_row(A, x, m, M, B.k, lda);
            if (r1 > r0) amx_block(C, B.n, M, B.n, A, lda, B, r0, r1, 0, B.nb, accumulate);
        }
    }
}

}  // namespace

// The pack of a weight for one product: the frozen copy (made once), or a
// fresh one in a per-thread buffer.
const AmxPack& amx_pack_for(const WeightView& W, AmxOperand op) {
    if (W.prepacked && W.prepacked->matches(W)) {
        PrepackedWeight::AmxCopies& copies = W.prepacked->amx_copies();
        std::lock_guard lock(copies.mu);
        std::unique_ptr<AmxPack>& slot = op == AmxOperand::forward ? copies.forward : copies.backward_input;
        if (!slot) slot = std::make_unique<AmxPack>(amx_pack(W, op));
        return *slot;
    }
    thread_local AmxPack fresh;
    fresh = amx_pack(W, op);
    return fresh;
}

AmxPack amx_pack(const WeightView& W, AmxOperand op) {
    PPOLAB_ASSERT(W.type == WeightType::bf16 && W.data != nullptr && W.rows > 0 && W.cols > 0);
    const bf16* w = static_cast<const bf16*>(W.data);
    AmxPack P;
    // B[k][n] = w[k * sk + n * sn]
    const bool fwd = op == AmxOperand::forward;
    P.k = fwd ? W.cols : W.rows;
    P.n = fwd ? W.rows : W.cols;
    const int64_t sk = fwd ? 1 : W.cols, sn = fwd ? W.cols : 1;
    P.kb = blocks(P.k, kTileK);
    P.nb = blocks(P.n, 2 * kTileN) * 2;
    P.tiles = aligned_bf16(P.nb * P.kb * kTileElems);
    bf16* out = P.tiles.get();
    const int64_t K = P.k, N = P.n, kb = P.kb;
#pragma omp parallel for schedule(static) if (N * K >= (int64_t(1) << 18))
    for (int64_t j = 0; j < P.nb; ++j)
        for (int64_t p = 0; p < kb; ++p) {
            bf16* tile = out + (j * kb + p) * kTileElems;
            for (int64_t c = 0; c < kTileN; ++c) {
                const int64_t n = j * kTileN + c;
                if (n >= N) break;
                for (int64_t e = 0; e < kTileK; ++e) {  // e = 2r + i
                    const int64_t k = p * kTileK + e;
                    if (k >= K) break;
                    tile[(e / 2) * 2 * kTileN + 2 * c + e % 2] = w[k * sk + n * sn];
                }
            }
        }
    return P;
}

bool matmul_has_amx() {
    static const bool has =
        matmul_has_avx512bf16() && isa_cap() >= IsaCap::amx && unit_rates::request_amx_tiles(nullptr);
    return has;
}

namespace {
std::atomic<bool> amx_switched_on{true};
}  // namespace

void matmul_set_amx_allowed(bool allowed) { amx_switched_on.store(allowed); }

bool amx_allowed(std::string* why) {
    static const bool switched_off = [] {
        const char* v = std::getenv("PPOLAB_AMX");
        if (v == nullptr || *v == '\0' || std::strcmp(v, "on") == 0) return false;
        if (std::strcmp(v, "off") == 0) return true;
        fail("environment variable PPOLAB_AMX: expected on or off, found '", v, "'");
    }();
    if (switched_off) {
        if (why) *why = "switched off by PPOLAB_AMX=off";
        return false;
    }
    if (numerics_canonical()) {
        if (why) *why = "engine.numerics = canonical";
        return false;
    }
    if (!amx_switched_on.load(std::memory_order_relaxed)) {
        if (why) *why = "switched off by matmul_set_amx_allowed(false)";
        return false;
    }
    if (matmul_has_amx()) return true;
    if (why) {
        std::string reason;
        *why = isa_cap() < IsaCap::amx                   ? std::string("PPOLAB_ISA=") + isa_cap_name(isa_cap())
               : !unit_rates::cpu_has_amx_bf16()         ? "no AMX-BF16/AMX-TILE in cpuid"
               : !matmul_has_avx512bf16()                ? "no AVX-512 BF16 for the operand conversion"
               : !unit_rates::request_amx_tiles(&reason) ? reason
                                                         : "unavailable";
    }
    return false;
}

namespace matmul_detail {

void amx_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    PPOLAB_ASSERT(W.type == WeightType::bf16 && matmul_has_amx());
    if (M == 0 || W.rows == 0) return;
    amx_product(Y, X, M, amx_pack_for(W, AmxOperand::forward), accumulate);
}

void amx_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    PPOLAB_ASSERT(W.type == WeightType::bf16 && matmul_has_amx());
    if (M == 0 || W.cols == 0) return;
    amx_product(dX, dY, M, amx_pack_for(W, AmxOperand::backward_input), accumulate);
}

}  // namespace matmul_detail

}  // namespace ppolab
