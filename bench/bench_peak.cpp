// bench_peak.cpp — what this machine delivers right now: the BF16 dot-product
// peak (vdpbf16ps, the instruction of every BF16 product in ppolab and in
// oneDNN), the FP32 FMA peak, and the streaming read bandwidth from DRAM,
// each on 1 thread and on T threads at once (OpenMP; T = OMP_NUM_THREADS).
//
// SPEC §11's anchors (780 GFLOP/s BF16, 420 FP32, ~67 GB/s for two cores)
// were measured on one machine of this kind; a virtual machine's two vCPUs
// may not be two full cores of that speed at every moment. run_benchmarks.sh
// runs this before and after the side-by-side workloads, so a result can be
// read against the machine it ran on, not only against the anchors.
//
//   OMP_NUM_THREADS=2 build/bin/bench_peak [--seconds S]
//
// Prints one JSON line per measurement: {"name", "threads", "gflop_s" or
// "gb_s", "seconds"}.
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// Horizontal sum through memory (GCC 12 warns inside _mm512_reduce_add_ps).
__attribute__((target("avx512f"))) float sum16(__m512 v) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, v);
    float s = 0;
    for (float x : lanes) s += x;
    return s;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// 12 independent accumulators: more than latency × issue width, so the loop
// is bound by how many vdpbf16ps the core retires per cycle.
__attribute__((target("avx512f,avx512bf16"))) double bf16_loop(long iterations) {
    __m512 acc[12];
    for (auto& a : acc) a = _mm512_setzero_ps();
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3c00);
    for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, y);
        __asm__ volatile("" : "+v"(x));  // keep the loop from being folded
    }
    float s = 0;
    for (auto& a : acc) s += sum16(a);
    return s;
}

__attribute__((target("avx512f"))) double fma_loop(long iterations) {
    __m512 acc[12];
    for (auto& a : acc) a = _mm512_setzero_ps();
    __m512 x = _mm512_set1_ps(0.5f), y = _mm512_set1_ps(1e-3f);
    for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = _mm512_fmadd_ps(x, y, acc[j]);
        __asm__ volatile("" : "+v"(x));
    }
    float s = 0;
    for (auto& a : acc) s += sum16(a);
    return s;
}

__attribute__((target("avx512f"))) double read_loop(const float* p, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return sum16(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// Runs body(thread) on `threads` threads at once, each for `iterations`
// units, and returns the wall time of the slowest.
template <class F>
double timed(int threads, F body) {
    double t0 = 0, t1 = 0;
    volatile double sink = 0;
#pragma omp parallel num_threads(threads)
    {
#pragma omp barrier
#pragma omp single
        t0 = now();
        double s = body(omp_get_thread_num());
#pragma omp barrier
#pragma omp single
        t1 = now();
#pragma omp critical
        sink = sink + s;
    }
    return t1 - t0;
}

}  // namespace

int main(int argc, char** argv) {
    double seconds = 1.0;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atof(argv[++i]);
        else {
            std::fprintf(stderr, "bench_peak: unknown argument '%s'; expected --seconds S\n", argv[i]);
            return 2;
        }
    }
    if (!__builtin_cpu_supports("avx512bf16")) {
        std::fprintf(stderr, "bench_peak: this CPU has no AVX-512 BF16; nothing to measure\n");
        return 1;
    }
    const int T = omp_get_max_threads();
    std::vector<int> counts = {1};
    if (T > 1) counts.push_back(T);

    // Calibrate the compute loops to ~`seconds` on one thread.
    const long probe = 2'000'000;
    double t = timed(1, [&](int) { return bf16_loop(probe); });
    const long bf16_iters = static_cast<long>(probe * seconds / t);
    t = timed(1, [&](int) { return fma_loop(probe); });
    const long fma_iters = static_cast<long>(probe * seconds / t);

    // 512 MiB per thread: far beyond the 32 MiB L3, read as decode reads weights.
    const size_t per_thread = (size_t{512} << 20) / sizeof(float);
    float* buf = static_cast<float*>(std::aligned_alloc(64, per_thread * T * sizeof(float)));
    if (!buf) {
        std::fprintf(stderr, "bench_peak: cannot allocate %zu MiB\n", (per_thread * T * sizeof(float)) >> 20);
        return 1;
    }
#pragma omp parallel for num_threads(T) schedule(static)
    for (long i = 0; i < static_cast<long>(per_thread * T); ++i) buf[i] = 1e-9f;  // first touch by its reader

    for (int n : counts) {
        double s = timed(n, [&](int) { return bf16_loop(bf16_iters); });
        std::printf("{\"name\": \"bf16 vdpbf16ps\", \"threads\": %d, \"gflop_s\": %.1f, \"seconds\": %.3f}\n", n,
                    n * bf16_iters * 12.0 * 64 / s / 1e9, s);
        s = timed(n, [&](int) { return fma_loop(fma_iters); });
        std::printf("{\"name\": \"fp32 fma\", \"threads\": %d, \"gflop_s\": %.1f, \"seconds\": %.3f}\n", n,
                    n * fma_iters * 12.0 * 32 / s / 1e9, s);
        const int passes = 4;
        read_loop(buf, per_thread);  // warm the TLB
        s = timed(n, [&](int th) {
            double r = 0;
            for (int p = 0; p < passes; ++p) {
                r += read_loop(buf + th * per_thread, per_thread);
                __asm__ volatile("" ::: "memory");  // one real read per pass, not one for all
            }
            return r;
        });
        std::printf("{\"name\": \"stream read\", \"threads\": %d, \"gb_s\": %.1f, \"seconds\": %.3f}\n", n,
                    n * passes * per_thread * sizeof(float) / s / 1e9, s);
        std::fflush(stdout);
    }
    std::free(buf);
    return 0;
}
