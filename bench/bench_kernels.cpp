// Layer kernels at the shapes that matter for Qwen2.5-0.5B on 2 cores:
// attention over B=4 rows of T=320 (14 query heads, 2 KV heads, head dim 64),
// lm_logprobs over 256 rows of the 151936-token vocabulary (BF16 weight),
// and the cheap element-wise layers at B·T = 1280 rows.
#include <benchmark/benchmark.h>

#include <vector>

#include "kernels/attention.h"
#include "kernels/lm_head.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "util/rng.h"

using namespace ppolab;

namespace {

std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.f) {
    Philox rng(seed);
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>((2 * rng.uniform() - 1) * scale);
    return v;
}

constexpr AttentionShape kAttn{4, 320, 14, 2, 64};

struct AttnData {
    AttentionShape s = kAttn;
    std::vector<float> q = random_floats(s.B * s.T * s.nH * s.hd, 1, 2.f);
    std::vector<float> k = random_floats(s.B * s.T * s.nKV * s.hd, 2, 2.f);
    std::vector<float> v = random_floats(s.B * s.T * s.nKV * s.hd, 3);
    std::vector<float> out = std::vector<float>(q.size()), dout = random_floats(q.size(), 4);
    std::vector<float> probs = std::vector<float>(s.B * s.nH * s.T * s.T);
    std::vector<float> dq = std::vector<float>(q.size()), dk = std::vector<float>(k.size()),
                       dv = std::vector<float>(v.size());
    std::vector<uint8_t> mask = std::vector<uint8_t>(s.B * s.T, 1);
};

// FLOPs of q·kᵀ and p·v over the causal half, per query head and row.
double attention_flops(const AttentionShape& s) { return 2.0 * 2 * s.B * s.nH * (s.T * (s.T + 1) / 2.0) * s.hd; }

void BM_attention_forward(benchmark::State& st) {
    AttnData d;
    for (auto _ : st)
        attention_forward<float>(d.out.data(), d.probs.data(), d.q.data(), d.k.data(), d.v.data(), d.mask.data(), d.s);
    st.counters["GFLOP/s"] =
        benchmark::Counter(attention_flops(d.s) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_attention_forward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_attention_backward(benchmark::State& st) {
    AttnData d;
    attention_forward<float>(d.out.data(), d.probs.data(), d.q.data(), d.k.data(), d.v.data(), d.mask.data(), d.s);
    for (auto _ : st)
        attention_backward<float>(d.dq.data(), d.dk.data(), d.dv.data(), d.dout.data(), d.probs.data(), d.q.data(),
                                  d.k.data(), d.v.data(), d.mask.data(), d.s);
    // dP = dout·vᵀ, dq = dS·k, dk = dSᵀ·q, dv = Pᵀ·dout: twice the forward.
    st.counters["GFLOP/s"] =
        benchmark::Counter(2 * attention_flops(d.s) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_attention_backward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_attention_decode(benchmark::State& st) {
    const int64_t B = 4, S = 320, nH = 14, nKV = 2, hd = 64;
    auto q = random_floats(B * nH * hd, 5), kc = random_floats(B * S * nKV * hd, 6),
         vc = random_floats(B * S * nKV * hd, 7);
    std::vector<float> out(q.size());
    std::vector<uint8_t> mask(B * S, 1);
    for (auto _ : st) attention_decode(out.data(), q.data(), kc.data(), vc.data(), mask.data(), B, S, S, nH, nKV, hd);
}
BENCHMARK(BM_attention_decode)->Unit(benchmark::kMicrosecond)->UseRealTime();

struct LmData {
    int64_t N = 256, V = 151936, H = 896;
    std::vector<bf16> W;
    std::vector<float> h = random_floats(N * H, 8), logp = std::vector<float>(N), dh = std::vector<float>(N * H),
                       dlogp = random_floats(N, 9);
    std::vector<int32_t> targets;
    LmData() {
        auto w = random_floats(V * H, 10, 0.05f);
        W.resize(w.size());
        for (size_t i = 0; i < w.size(); ++i) W[i] = float_to_bf16(w[i]);
        Philox rng(11);
        for (int64_t n = 0; n < N; ++n) targets.push_back(static_cast<int32_t>(rng.below(V)));
    }
    WeightView view() const { return {WeightType::bf16, W.data(), V, H}; }
};

void BM_lm_logprobs_forward(benchmark::State& st) {
    static LmData d;
    for (auto _ : st) lm_logprobs_forward(d.logp.data(), d.h.data(), d.targets.data(), d.view(), d.N);
    st.counters["GFLOP/s"] =
        benchmark::Counter(2.0 * d.N * d.V * d.H * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_lm_logprobs_forward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_lm_logprobs_backward(benchmark::State& st) {
    static LmData d;
    for (auto _ : st)
        lm_logprobs_backward(d.dh.data(), nullptr, d.dlogp.data(), d.h.data(), d.targets.data(), d.view(), d.N);
    st.counters["GFLOP/s"] =
        benchmark::Counter(4.0 * d.N * d.V * d.H * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_lm_logprobs_backward)->Unit(benchmark::kMillisecond)->UseRealTime();

constexpr int64_t kRows = 1280, kWidth = 896, kMlp = 4864;

void BM_rmsnorm_forward_backward(benchmark::State& st) {
    auto x = random_floats(kRows * kWidth, 12), w = random_floats(kWidth, 13), g = random_floats(kRows * kWidth, 14);
    std::vector<float> out(x.size()), rstd(kRows), dx(x.size()), dw(kWidth);
    for (auto _ : st) {
        rmsnorm_forward<float>(out.data(), rstd.data(), x.data(), w.data(), kRows, kWidth, 1e-6);
        rmsnorm_backward<float>(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), kRows, kWidth);
    }
}
BENCHMARK(BM_rmsnorm_forward_backward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_swiglu_forward_backward(benchmark::State& st) {
    auto gate = random_floats(kRows * kMlp, 15, 4.f), up = random_floats(kRows * kMlp, 16),
         g = random_floats(kRows * kMlp, 17);
    std::vector<float> out(gate.size()), dgate(gate.size()), dup(gate.size());
    for (auto _ : st) {
        swiglu_forward<float>(out.data(), gate.data(), up.data(), kRows * kMlp);
        swiglu_backward<float>(dgate.data(), dup.data(), g.data(), gate.data(), up.data(), kRows * kMlp);
    }
}
BENCHMARK(BM_swiglu_forward_backward)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_rope_forward(benchmark::State& st) {
    auto x = random_floats(kRows * 14 * 64, 18);
    std::vector<int32_t> pos(kRows);
    for (int64_t n = 0; n < kRows; ++n) pos[n] = static_cast<int32_t>(n % 320);
    for (auto _ : st) rope_forward<float>(x.data(), pos.data(), kRows, 14, 64, 1e6);
}
BENCHMARK(BM_rope_forward)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
