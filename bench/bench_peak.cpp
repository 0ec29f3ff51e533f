// bench_peak.cpp — what this machine delivers right now, per unit: the AMX
// BF16 tile peak (`tdpbf16ps` on Gaussian operands, where the CPU has
// AMX-BF16 and Linux grants the tile state; zero operands also printed, for
// the record), the AVX-512 BF16 dot-product peak (`vdpbf16ps`), the FP32 FMA
// peak (512-bit where the CPU has AVX-512; 256-bit on every CPU, the
// canonical sums' unit on an AVX2-only one), and the streaming read
// bandwidth from DRAM (512- or 256-bit loads), each on 1 thread and on T
// threads at once (OpenMP; T = OMP_NUM_THREADS).
//
// SPEC §11's anchors (780 GFLOP/s BF16, 420 FP32, ~67 GB/s for two cores)
// were measured on one machine of this kind; a virtual machine's two vCPUs
// may not be two full cores of that speed at every moment, and the CPU model
// changes between machines. run_benchmarks.sh runs this in every round of
// its side-by-side workloads, so a result is read against the machine it ran
// on in the same minutes.
//
//   OMP_NUM_THREADS=2 [PPOLAB_ISA=avx2] build/bin/bench_peak [--seconds S] [--trials N]
//
// The loops are src/kernels/unit_rates.h's (assembly, 12 independent
// accumulators: bound by how many of those instructions a core retires), the
// same that decide how ppolab computes BF16 products on this CPU. Each
// measurement is the best of N trials (default 3) after a warm-up, since a
// vCPU's first milliseconds or a descheduled moment are not its rate.
// Prints one JSON line per measurement: {"name", "threads", "gflop_s" or
// "gb_s", "seconds", "trials"}, and {"name", "present": false, "why"} for a
// unit this machine lacks.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/numerics.h"
#include "kernels/unit_rates.h"
#include "util/error.h"

namespace {

using namespace ppolab::unit_rates;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Runs body(thread) on `threads` threads at once and returns the wall time
// from a common start to the slowest thread's end.
template <class F>
double timed(int threads, F body) {
    double t0 = 0, t1 = 0;
#pragma omp parallel num_threads(threads)
    {
#pragma omp barrier
#pragma omp single
        t0 = now();
        body(omp_get_thread_num());
#pragma omp barrier
#pragma omp single
        t1 = now();
    }
    return t1 - t0;
}

// The AMX loop on zero operands (printed for the record beside the Gaussian
// one, unit_rates.h).
void amx_zero_operands(long iterations) {
    alignas(64) static const uint16_t zeros[2 * 16 * 32] = {};
    amx_tile_loop_on(iterations, zeros, zeros);
}

// The best of `trials` runs of loop(iterations) on n threads, iterations
// calibrated to ~`seconds` on one thread after a warm-up of about as long.

double best_seconds(int n, void (*loop)(long), long& iterations, double seconds, int trials) {
    if (iterations == 0) {
        long probe = 100'000;
        double t = 0;
        while ((t = timed(1, [&](int) { loop(probe); })) < 0.05) probe *= 2;  // also the warm-up
        iterations = std::max(1L, static_cast<long>(probe * seconds / t));
        timed(1, [&](int) { loop(iterations); });
    }
    double best = 1e300;
    for (int k = 0; k < trials; ++k) best = std::min(best, timed(n, [&](int) { loop(iterations); }));
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    double seconds = 0.5;
    int trials = 3;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atof(argv[++i]);
        else if (!std::strcmp(argv[i], "--trials") && i + 1 < argc) trials = std::max(1, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "bench_peak: unknown argument '%s'; expected --seconds S, --trials N\n", argv[i]);
            return 2;
        }
    }
    if (!(seconds > 0)) {
        std::fprintf(stderr, "bench_peak: --seconds must be positive\n");
        return 2;
    }
    // PPOLAB_ISA caps the units measured, as it caps the kernels (numerics.h):
    // PPOLAB_ISA=avx2 measures what an AVX2-only CPU's kernels can reach.
    try {
        ppolab::numerics_check_environment();
    } catch (const ppolab::Error& e) {
        std::fprintf(stderr, "bench_peak: %s\n", e.what());
        return 2;
    }
    const ppolab::IsaCap cap = ppolab::isa_cap();
    const bool has_avx512 = cpu_has_avx512() && cap >= ppolab::IsaCap::avx512, has_avx2 = cpu_has_avx2_fma();
    if (!has_avx2) {
        std::fprintf(stderr, "bench_peak: this CPU has neither AVX2 + FMA nor AVX-512; nothing to measure\n");
        return 1;
    }
    if (!has_avx512)
        std::printf("{\"name\": \"fp32 fma\", \"present\": false, \"why\": \"%s\"}\n",
                    cpu_has_avx512() ? "capped by PPOLAB_ISA" : "no AVX-512 in cpuid");
    const bool has_bf16 = cpu_has_avx512_bf16() && cap >= ppolab::IsaCap::avx512_bf16;
    std::string amx_why;
    bool has_amx = request_amx_tiles(&amx_why);
    if (has_amx && cap < ppolab::IsaCap::amx) {
        has_amx = false;
        amx_why = "capped by PPOLAB_ISA";
    }
    if (!has_amx)
        std::printf("{\"name\": \"bf16 amx tdpbf16ps\", \"present\": false, \"why\": \"%s\"}\n", amx_why.c_str());
    if (!has_bf16)
        std::printf("{\"name\": \"bf16 vdpbf16ps\", \"present\": false, \"why\": \"%s\"}\n",
                    cpu_has_avx512_bf16() ? "capped by PPOLAB_ISA" : "no AVX-512 BF16 in cpuid");

    const int T = omp_get_max_threads();
    std::vector<int> counts = {1};
    if (T > 1) counts.push_back(T);

    // 512 MiB per thread: far beyond the 32 MiB L3, read as decode reads weights.
    const size_t per_thread = (size_t{512} << 20) / sizeof(float);
    float* buf = static_cast<float*>(std::aligned_alloc(64, per_thread * T * sizeof(float)));
    if (!buf) {
        std::fprintf(stderr, "bench_peak: cannot allocate %zu MiB\n", (per_thread * T * sizeof(float)) >> 20);
        return 1;
    }
#pragma omp parallel for num_threads(T) schedule(static)
    for (long i = 0; i < static_cast<long>(per_thread * T); ++i) buf[i] = 1e-9f;  // first touch by its reader

    auto print = [&](const char* name, int n, const char* unit, double rate, double s) {
        std::printf("{\"name\": \"%s\", \"threads\": %d, \"%s\": %.1f, \"seconds\": %.3f, \"trials\": %d}\n", name, n,
                    unit, rate, s, trials);
        std::fflush(stdout);
    };
    long amx_iters = 0, bf16_iters = 0, fma_iters = 0, fma_avx2_iters = 0;
    for (int n : counts) {
        if (has_amx) {
            double s = best_seconds(n, amx_tile_loop, amx_iters, seconds, trials);
            print("bf16 amx tdpbf16ps", n, "gflop_s", n * amx_iters * kAmxTileFlop / s / 1e9, s);
            // The same loop on zero operands, for the record: not a rate a real product reaches.
            s = best_seconds(n, amx_zero_operands, amx_iters, seconds, trials);
            print("bf16 amx tdpbf16ps, zero operands", n, "gflop_s", n * amx_iters * kAmxTileFlop / s / 1e9, s);
        }
        if (has_bf16) {
            double s = best_seconds(n, bf16_dot_loop, bf16_iters, seconds, trials);
            print("bf16 vdpbf16ps", n, "gflop_s", n * bf16_iters * kBf16DotFlop / s / 1e9, s);
        }
        double s = 0;
        if (has_avx512) {
            s = best_seconds(n, fp32_fma_loop, fma_iters, seconds, trials);
            print("fp32 fma", n, "gflop_s", n * fma_iters * kFp32FmaFlop / s / 1e9, s);
        }
        // 256-bit FMAs: the canonical sums' unit on an AVX2-only CPU (and
        // under PPOLAB_ISA=avx2 elsewhere).
        s = best_seconds(n, fp32_fma_avx2_loop, fma_avx2_iters, seconds, trials);
        print("fp32 fma avx2", n, "gflop_s", n * fma_avx2_iters * kFp32FmaAvx2Flop / s / 1e9, s);
        auto read = has_avx512 ? stream_read : stream_read_avx2;
        read(buf, per_thread);  // warm the TLB
        s = 1e300;
        for (int k = 0; k < trials; ++k)
            s = std::min(s, timed(n, [&](int th) { read(buf + th * per_thread, per_thread); }));
        print("stream read", n, "gb_s", n * per_thread * sizeof(float) / s / 1e9, s);
    }
    std::free(buf);
    return 0;
}
