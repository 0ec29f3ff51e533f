// bench_matmul.cpp — the projection GEMMs of Qwen2.5-0.5B (q/k/v/o, gate/up,
// down, the tied 151936 × 896 LM head) at M = 1, 4, 8, 128, 512 rows, BF16
// weights, through linear_forward (the automatic path) and, for comparison,
// oneDNN with row-major weights at small M and with frozen (prepacked,
// PrepackedWeight) weights at large M; plus the two backwards of training at
// M = 128/512 and the LM head at the 64-row chunks of lm_logprobs; and
// bf16/…: the frozen forward with BF16 products native against BF16 as FP32
// (Bf16Products, matmul_backend.h) at the 0.5B's and the tiny default's
// shapes (and at M = 1 the portable loops that decode used before the FP32
// FMA stream); amx/: frozen products on the AMX tiles against oneDNN's;
// decode/: 1, 8 and 32 rows on the tiles, the VNNI pack and the small-M stream — all to be
// read as ratios of one interleaved run:
//
//   build/bin/bench_matmul --benchmark_filter=bf16/ --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//
// Counters: GFLOP/s (2·M·N·K per call) and GB/s (bytes of weight + input +
// output per call). Weights are rotated among enough copies to exceed the
// 32 MiB L3, so small-M numbers are DRAM bandwidth as in decode (where each
// matrix is read once per token), not cache bandwidth.
//
//   OMP_NUM_THREADS=2 build/bin/bench_matmul --benchmark_filter=fwd
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_backend.h"
#include "util/rng.h"

using namespace ppolab;

namespace {

struct Proj {
    const char* name;
    int64_t N, K;
};

// Qwen2.5-0.5B: H 896, 14 query heads and 2 KV heads of 64, MLP 4864, vocab 151936.
const Proj kProjections[] = {{"q", 896, 896},     {"k", 128, 896},   {"v", 128, 896},     {"o", 896, 896},
                             {"gate", 4864, 896}, {"up", 4864, 896}, {"down", 896, 4864}, {"lm_head", 151936, 896}};

constexpr int64_t kColdBytes = int64_t(96) << 20;  // > L3: rotate copies up to this size

// Copies of one random BF16 weight (values ~ N(0, 0.02), as the model init).
struct WeightSet {
    std::vector<std::vector<bf16>> copies;                 // each (N, K)
    std::vector<std::unique_ptr<PrepackedWeight>> packed;  // frozen sets: one per copy
    int64_t N = 0, K = 0;
    size_t next = 0;
    WeightView view() {
        const size_t i = next;
        next = (next + 1) % copies.size();
        return {WeightType::bf16, copies[i].data(), N, K, packed.empty() ? nullptr : packed[i].get()};
    }
};

// frozen: a separate set, each copy with its PrepackedWeight for good (the
// packed copies are made by a warm-up pass outside the timed loop).
WeightSet& weights(const Proj& p, bool frozen = false) {
    static std::map<std::string, std::unique_ptr<WeightSet>> sets;
    auto& s = sets[std::string(p.name) + (frozen ? "/frozen" : "")];
    if (!s) {
        s = std::make_unique<WeightSet>();
        s->N = p.N;
        s->K = p.K;
        const int64_t bytes = p.N * p.K * 2;
        const int64_t n = std::max<int64_t>(1, (kColdBytes + bytes - 1) / bytes);
        Philox rng(42, static_cast<uint64_t>(p.N * 7 + p.K));
        std::vector<bf16> base(p.N * p.K);
        for (auto& v : base) v = float_to_bf16(static_cast<float>(rng.normal() * 0.02));
        for (int64_t i = 0; i < n; ++i) s->copies.push_back(base);
        if (frozen)
            for (const auto& c : s->copies)
                s->packed.push_back(
                    std::make_unique<PrepackedWeight>(WeightView{WeightType::bf16, c.data(), p.N, p.K}));
    }
    return *s;
}

std::vector<float> activations(int64_t n) {
    Philox rng(7, static_cast<uint64_t>(n));
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(rng.normal());
    return v;
}

void set_counters(benchmark::State& state, int64_t M, int64_t N, int64_t K, const char* path) {
    const double flops = 2.0 * M * N * K;
    const double bytes = 2.0 * N * K + 4.0 * M * K + 4.0 * M * N;
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(path);
}

enum class Variant { automatic, dnnl_plain, frozen };

void bench_forward(benchmark::State& state, Proj p, int64_t M, Variant v) {
    WeightSet& w = weights(p, v == Variant::frozen);
    std::vector<float> X = activations(M * p.K);  // (M, K)
    std::vector<float> Y(M * p.N, 0.f);           // (M, N)
    if (v == Variant::frozen)                     // packed copies made here, not in the timed loop
        for (size_t i = 0; i < w.copies.size(); ++i) linear_forward(Y.data(), X.data(), w.view(), M);
    const char* path = v == Variant::automatic    ? matmul_path_name(M, p.N, p.K)
                       : v == Variant::dnnl_plain ? "dnnl row-major W"
                                                  : "dnnl frozen W";
    for (auto _ : state) {
        WeightView W = w.view();
        if (v == Variant::dnnl_plain) matmul_detail::dnnl_forward(Y.data(), X.data(), W, M, false);
        else linear_forward(Y.data(), X.data(), W, M);
        benchmark::DoNotOptimize(Y.data());
        benchmark::ClobberMemory();
    }
    set_counters(state, M, p.N, p.K, path);
}

// dX (M, K) = dY (M, N) · W (N, K), BF16 W (the frozen base under LoRA).
void bench_backward_input(benchmark::State& state, Proj p, int64_t M, bool frozen) {
    WeightSet& w = weights(p, frozen);
    std::vector<float> dY = activations(M * p.N);  // (M, N)
    std::vector<float> dX(M * p.K, 0.f);           // (M, K)
    if (frozen)
        for (size_t i = 0; i < w.copies.size(); ++i) linear_backward_input(dX.data(), dY.data(), w.view(), M);
    for (auto _ : state) {
        linear_backward_input(dX.data(), dY.data(), w.view(), M);
        benchmark::DoNotOptimize(dX.data());
        benchmark::ClobberMemory();
    }
    set_counters(state, M, p.N, p.K, frozen ? "dnnl frozen W" : matmul_path_name(M, p.N, p.K));
}

// dW (N, K) += dY (M, N)ᵀ · X (M, K), FP32 (full-parameter training).
void bench_backward_weight(benchmark::State& state, Proj p, int64_t M) {
    std::vector<float> dY = activations(M * p.N);  // (M, N)
    std::vector<float> X = activations(M * p.K);   // (M, K)
    std::vector<float> dW(p.N * p.K, 0.f);         // (N, K)
    for (auto _ : state) {
        linear_backward_weight(dW.data(), dY.data(), X.data(), M, p.N, p.K);
        benchmark::DoNotOptimize(dW.data());
        benchmark::ClobberMemory();
    }
    const double flops = 2.0 * M * p.N * p.K;
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel("dnnl f32");
}

// The tiny default (width 256, MLP 688, 2 KV heads of 64, vocab 1024).
const Proj kTinyProjections[] = {{"tiny_q", 256, 256},
                                 {"tiny_k", 128, 256},
                                 {"tiny_gate", 688, 256},
                                 {"tiny_down", 256, 688},
                                 {"tiny_head", 1024, 256}};

// The frozen forward with BF16 products computed one way (native BF16
// instructions, or emulated by oneDNN where the CPU has none; or FP32).
void bench_bf16_products(benchmark::State& state, Proj p, int64_t M, Bf16Products mode, bool portable) {
    matmul_set_bf16_products(mode);
    if (portable) matmul_set_path(MatmulPath::portable);
    WeightSet& w = weights(p, true);
    std::vector<float> X = activations(M * p.K);  // (M, K)
    std::vector<float> Y(M * p.N, 0.f);           // (M, N)
    for (size_t i = 0; i < w.copies.size(); ++i) linear_forward(Y.data(), X.data(), w.view(), M);
    for (auto _ : state) {
        linear_forward(Y.data(), X.data(), w.view(), M);
        benchmark::DoNotOptimize(Y.data());
        benchmark::ClobberMemory();
    }
    set_counters(state, M, p.N, p.K,
                 portable                    ? "portable"
                 : mode == Bf16Products::f32 ? "BF16 as FP32"
                                             : "BF16 native");
    matmul_set_bf16_products(Bf16Products::automatic);
    matmul_set_path(MatmulPath::automatic);
}

// A frozen weight's product forced onto one path (the AMX tiles or oneDNN's
// own kernels, both reading their prepacked copies), forward or backward to
// the input: the amx/ pairs, read as ratios of one interleaved run.
void bench_frozen_path(benchmark::State& state, Proj p, int64_t M, bool backward, MatmulPath path) {
    matmul_set_path(path);
    WeightSet& w = weights(p, true);
    std::vector<float> in = activations(M * (backward ? p.N : p.K));
    std::vector<float> out(M * (backward ? p.K : p.N), 0.f);
    auto run = [&] {
        if (backward) linear_backward_input(out.data(), in.data(), w.view(), M);
        else linear_forward(out.data(), in.data(), w.view(), M);
    };
    for (size_t i = 0; i < w.copies.size(); ++i) run();  // the packed copies, outside the timed loop
    for (auto _ : state) {
        run();
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    set_counters(state, M, p.N, p.K,
                 path == MatmulPath::amx || path == MatmulPath::small_m_vnni ? matmul_path_name(M, w.view())
                 : path == MatmulPath::small_m                               ? "small_m frozen W"
                                                                             : "dnnl frozen W");
    matmul_set_path(MatmulPath::automatic);
}

}  // namespace

int main(int argc, char** argv) {
    if (!std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(2);
    for (const Proj& p : kProjections)
        for (int64_t M : {1, 4, 8, 128, 512}) {
            const std::string base = std::string("fwd/") + p.name + "/M" + std::to_string(M);
            benchmark::RegisterBenchmark(base.c_str(), bench_forward, p, M, Variant::automatic)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
            if (M <= kSmallM)
                benchmark::RegisterBenchmark((base + "/dnnl").c_str(), bench_forward, p, M, Variant::dnnl_plain)
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime();
            else
                benchmark::RegisterBenchmark((base + "/frozen").c_str(), bench_forward, p, M, Variant::frozen)
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime();
        }
    // The LM head as lm_logprobs runs it: chunks of 64 rows, forward and dlogits·W.
    const Proj& head = kProjections[7];
    benchmark::RegisterBenchmark("fwd/lm_head/M64", bench_forward, head, 64, Variant::automatic)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("fwd/lm_head/M64/frozen", bench_forward, head, 64, Variant::frozen)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("bwd_input/lm_head/M64", bench_backward_input, head, 64, false)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("bwd_input/lm_head/M64/frozen", bench_backward_input, head, 64, true)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    for (const Proj& p : kProjections) {
        if (std::string(p.name) == "lm_head") continue;
        for (int64_t M : {128, 512}) {
            const std::string bi = std::string("bwd_input/") + p.name + "/M" + std::to_string(M);
            benchmark::RegisterBenchmark(bi.c_str(), bench_backward_input, p, M, false)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
            benchmark::RegisterBenchmark((bi + "/frozen").c_str(), bench_backward_input, p, M, true)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
            benchmark::RegisterBenchmark((std::string("bwd_weight/") + p.name + "/M" + std::to_string(M)).c_str(),
                                         bench_backward_weight, p, M)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
        }
    }
    auto bf16_pair = [](const Proj& p, int64_t M) {
        const std::string base = std::string("bf16/") + p.name + "/M" + std::to_string(M);
        for (auto [mode, name] : {std::pair{Bf16Products::native, "/native"}, std::pair{Bf16Products::f32, "/fp32"}})
            benchmark::RegisterBenchmark((base + name).c_str(), bench_bf16_products, p, M, mode, false)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
        if (M <= kSmallM)
            benchmark::RegisterBenchmark((base + "/portable").c_str(), bench_bf16_products, p, M,
                                         Bf16Products::automatic, true)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
    };
    for (const Proj& p : kTinyProjections)
        for (int64_t M : {1, 672}) bf16_pair(p, M);
    for (int i : {0, 4, 6})
        for (int64_t M : {1, 512}) bf16_pair(kProjections[i], M);
    // amx/: the AMX tiles against oneDNN on frozen weights (this CPU's AMX
    // where granted; elsewhere both run oneDNN and the label says so).
    auto amx_pair = [](const Proj& p, int64_t M, bool backward) {
        const std::string base =
            std::string("amx/") + p.name + "/M" + std::to_string(M) + (backward ? "/bwd_input" : "/fwd");
        for (auto [path, name] : {std::pair{MatmulPath::amx, "/amx"}, std::pair{MatmulPath::dnnl, "/dnnl"}})
            benchmark::RegisterBenchmark((base + name).c_str(), bench_frozen_path, p, M, backward, path)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
    };
    for (const Proj& p : kProjections)
        for (int64_t M : {64, 128, 512})
            for (bool backward : {false, true})
                if (std::string(p.name) != "lm_head" || M == 64) amx_pair(p, M, backward);
    for (const Proj& p : kTinyProjections)
        for (int64_t M : {128, 672}) amx_pair(p, M, false);
    // vnni/: the VNNI pack's kernel against oneDNN on frozen weights at
    // training's row counts, forward and backward to the input.
    std::vector<Proj> vnni_shapes(std::begin(kProjections), std::end(kProjections));
    vnni_shapes.insert(vnni_shapes.end(), std::begin(kTinyProjections), std::end(kTinyProjections));
    for (const Proj& p : vnni_shapes)
        for (int64_t M : {128, 512})
            for (bool backward : {false, true})
                if (std::string(p.name) != "lm_head" || M == 128)
                    for (auto [path, name] :
                         {std::pair{MatmulPath::small_m_vnni, "/vnni"}, std::pair{MatmulPath::dnnl, "/dnnl"}})
                        benchmark::RegisterBenchmark((std::string("vnni/") + p.name + "/M" + std::to_string(M) +
                                                      (backward ? "/bwd_input" : "/fwd") + name)
                                                         .c_str(),
                                                     bench_frozen_path, p, M, backward, path)
                            ->Unit(benchmark::kMillisecond)
                            ->UseRealTime();
    // decode/: a decode step's products (1, 8 and 32 rows, frozen weights
    // read from DRAM) on the AMX tiles, the VNNI pack's kernel (`vdpbf16ps`,
    // or FMA where BF16 products run as FP32) and the small-M stream.
    std::vector<Proj> decode_shapes(std::begin(kProjections), std::end(kProjections));
    decode_shapes.insert(decode_shapes.end(), std::begin(kTinyProjections), std::end(kTinyProjections));
    for (const Proj& p : decode_shapes)
        for (int64_t M : {1, 8, 32})
            for (auto [path, name] : {std::pair{MatmulPath::amx, "/amx"}, std::pair{MatmulPath::small_m_vnni, "/vnni"},
                                      std::pair{MatmulPath::small_m, "/small_m"}})
                benchmark::RegisterBenchmark(
                    (std::string("decode/") + p.name + "/M" + std::to_string(M) + name).c_str(), bench_frozen_path, p,
                    M, false, path)
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
