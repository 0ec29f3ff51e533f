// fma_block.cpp — the inner loop of the frozen base's FMA kernel
// (src/kernels/matmul_vnni_avx512.cpp, register_block_fma_wide<8, 3>: 8
// input rows against 3 column blocks of a panel widened to FP32, two
// broadcast FMAs per row and pair) measured apart from the rest of a
// product, to tell how much of a product's time is the loop and how much is
// around it (BENCHMARKS.md, session 25). Not part of the build: one file,
// no ppolab headers, the same loop compiled with the same options. `widen`
// measures session 25's separate widening pass; since session 26 the
// kernel's first row block widens the panel as it computes instead.
//
//   g++ -O3 -fopenmp -o /tmp/fma_block bench/fma_block.cpp
//   OMP_NUM_THREADS=2 /tmp/fma_block PAIRS ROWS COLS [widen]
//
// Every thread runs its own copy: ROWS input rows of 2·PAIRS values against
// COLS output columns in groups of 48; GFLOP/s is the threads' total, best
// of 5 trials of 0.3 s. Without `widen` every group reads one panel that
// stays in L2, and the outputs go to one small block (the loop alone); with
// `widen` each group first widens its 3 column blocks from a BF16 pack of
// all COLS columns (read from memory, as a real product does) and the
// outputs go to an ROWS × COLS matrix.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

namespace {

constexpr int64_t kBlockCols = 16;
constexpr int kRows = 8, kBlocks = 3;

template <int MR, int U>
AVX512 __attribute__((noinline)) void block(float* Y, int64_t ldy, const float* X, int64_t ldx, const float* panel,
                                            int64_t pairs) {
    __m512 acc[MR][U] = {};
    for (int64_t r = 0; r < pairs; ++r) {
        __m512 even[U], odd[U];
        for (int u = 0; u < U; ++u) {
            even[u] = _mm512_load_ps(panel + (r * U + u) * 2 * kBlockCols);
            odd[u] = _mm512_load_ps(panel + (r * U + u) * 2 * kBlockCols + kBlockCols);
        }
        for (int m = 0; m < MR; ++m) {
            const __m512 x0 = _mm512_set1_ps(X[m * ldx + 2 * r]);
            for (int u = 0; u < U; ++u) acc[m][u] = _mm512_fmadd_ps(x0, even[u], acc[m][u]);
            const __m512 x1 = _mm512_set1_ps(X[m * ldx + 2 * r + 1]);
            for (int u = 0; u < U; ++u) acc[m][u] = _mm512_fmadd_ps(x1, odd[u], acc[m][u]);
        }
    }
    for (int m = 0; m < MR; ++m)
        for (int u = 0; u < U; ++u) _mm512_storeu_ps(Y + m * ldy + u * kBlockCols, acc[m][u]);
}

AVX512 __attribute__((noinline)) void widen(float* panel, const uint16_t* w, int64_t stride, int64_t pairs) {
    for (int64_t r = 0; r < pairs; ++r)
        for (int u = 0; u < kBlocks; ++u) {
            const __m512i v = _mm512_load_si512(w + u * stride + r * 32);
            float* q = panel + (r * kBlocks + u) * 2 * kBlockCols;
            _mm512_store_ps(q, _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, v, 16)));
            _mm512_store_ps(q + kBlockCols,
                            _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u)))));
        }
}

template <typename T>
T* buffer(int64_t n) {
    auto* p = static_cast<T*>(std::aligned_alloc(64, ((n * sizeof(T) + 63) / 64) * 64));
    if (!p) {
        std::fprintf(stderr, "fma_block: out of memory\n");
        std::exit(1);
    }
    return p;
}

AVX512 double run(int64_t pairs, int64_t rows, int64_t cols, bool widening) {
    const int64_t blocks = cols / kBlockCols, groups = blocks / kBlocks, stride = pairs * 32;
    double best = 1e30;  // thread 0's fastest trial, seconds per repetition
#pragma omp parallel
    {
        float* panel = buffer<float>(pairs * kBlocks * 2 * kBlockCols);
        uint16_t* pack = buffer<uint16_t>(blocks * stride);
        float* X = buffer<float>(rows * 2 * pairs);
        float* Y = buffer<float>(widening ? rows * cols : kRows * kBlocks * kBlockCols);
        for (int64_t i = 0; i < blocks * stride; ++i) pack[i] = static_cast<uint16_t>(0x3c00 + i % 7);
        for (int64_t i = 0; i < pairs * kBlocks * 2 * kBlockCols; ++i) panel[i] = 1e-3f * static_cast<float>(i % 7);
        for (int64_t i = 0; i < rows * 2 * pairs; ++i) X[i] = 1e-3f * static_cast<float>(i % 5);
        for (int trial = 0; trial < 5; ++trial) {
#pragma omp barrier
            const auto t0 = std::chrono::steady_clock::now();
            int64_t reps = 0;
            double s = 0;
            while ((s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) < 0.3) {
                for (int64_t g = 0; g < groups; ++g) {
                    if (widening) widen(panel, pack + g * kBlocks * stride, stride, pairs);
                    for (int64_t m0 = 0; m0 + kRows <= rows; m0 += kRows)
                        block<kRows, kBlocks>(widening ? Y + m0 * cols + g * kBlocks * kBlockCols : Y,
                                              widening ? cols : kBlocks * kBlockCols, X + m0 * 2 * pairs, 2 * pairs,
                                              panel, pairs);
                }
                ++reps;
            }
            if (omp_get_thread_num() == 0) best = std::min(best, s / static_cast<double>(reps));
        }
        std::free(panel);
        std::free(pack);
        std::free(X);
        std::free(Y);
    }
    const double flop = 2.0 * 2 * pairs * (rows / kRows * kRows) * (groups * kBlocks * kBlockCols);
    return flop * omp_get_max_threads() / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4 || argc > 5 || (argc == 5 && std::string(argv[4]) != "widen")) {
        std::fprintf(stderr, "usage: fma_block PAIRS ROWS COLS [widen]\n");
        return 2;
    }
    const int64_t pairs = std::atol(argv[1]), rows = std::atol(argv[2]), cols = std::atol(argv[3]);
    const bool widening = argc == 5;
    if (pairs < 1 || rows < kRows || cols < kBlocks * kBlockCols) {
        std::fprintf(stderr, "fma_block: need PAIRS >= 1, ROWS >= %d, COLS >= %lld (got %s %s %s)\n", kRows,
                     static_cast<long long>(kBlocks * kBlockCols), argv[1], argv[2], argv[3]);
        return 2;
    }
    if (!__builtin_cpu_supports("avx512f")) {
        std::fprintf(stderr, "fma_block: this CPU has no AVX-512\n");
        return 2;
    }
    std::printf(
        "{\"name\": \"fma block 8x3%s\", \"pairs\": %lld, \"rows\": %lld, \"cols\": %lld, \"threads\": %d, "
        "\"gflop_s\": %.1f}\n",
        widening ? " + widening" : "", static_cast<long long>(pairs), static_cast<long long>(rows),
        static_cast<long long>(cols), omp_get_max_threads(), run(pairs, rows, cols, widening));
}
