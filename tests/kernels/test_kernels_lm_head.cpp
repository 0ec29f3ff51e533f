// lm_logprobs: closed form in double, finite differences of the float code,
// chunk boundaries, rows without a loss, the BF16 contract, bad input; and
// simd.h's float64 e^x (sequence_kl.cpp) against std::exp.
// PyTorch's log_softmax is the oracle in test_kernels_oracle.
#include "kernels/lm_head.h"
#include "test_kernels_common.h"
#include "util/canon_math.h"
#include "util/error.h"

using namespace ppolab;

namespace {

// logp[n] = z[n][t[n]] − log Σ_v exp z[n][v],  z = h Wᵀ, all in double.
std::vector<double> logprobs_double(const std::vector<float>& h, const std::vector<float>& W,
                                    const std::vector<int32_t>& t, int64_t N, int64_t H, int64_t V) {
    std::vector<double> out(N);
    for (int64_t n = 0; n < N; ++n) {
        std::vector<double> z(V);
        double mx = -1e300;
        for (int64_t v = 0; v < V; ++v) {
            for (int64_t k = 0; k < H; ++k) z[v] += static_cast<double>(h[n * H + k]) * W[v * H + k];
            mx = std::max(mx, z[v]);
        }
        double s = 0;
        for (double x : z) s += std::exp(x - mx);
        out[n] = z[t[n]] - mx - std::log(s);
    }
    return out;
}

std::vector<int32_t> random_targets(int64_t N, int64_t V, uint64_t seed) {
    ppolab::Philox rng(seed);
    std::vector<int32_t> t;
    for (int64_t n = 0; n < N; ++n) t.push_back(static_cast<int32_t>(rng.below(V)));
    return t;
}

// simd::vexp_f64 over n values (n a multiple of 8), 8 lanes (AVX-512) or 4 (AVX2).
template <class VD>
PPOLAB_SIMD_INLINE void exp_f64_lanes(const double* x, double* y, size_t n) {
    for (size_t i = 0; i < n; i += sizeof(VD) / sizeof(double)) {
        VD v;
        std::memcpy(&v, x + i, sizeof v);
        v = simd::vexp_f64(v);
        std::memcpy(y + i, &v, sizeof v);
    }
}
PPOLAB_SIMD_AVX512 void exp_f64_avx512(const double* x, double* y, size_t n) { exp_f64_lanes<simd::vd8>(x, y, n); }
PPOLAB_SIMD_AVX2 void exp_f64_avx2(const double* x, double* y, size_t n) { exp_f64_lanes<simd::vd4>(x, y, n); }

}  // namespace

// Within 2 ulp of glibc's exp (itself within 1 ulp; vexp_f64 is canon_exp's
// body: 1.5 ulp, util/canon_math.h) over [−745.13, 709.78]: every integer,
// small |x| around 0 and around ln 2 / 2 (the reduction's boundary), random
// points, denormal results (not flushed); exactly 0 below −745.1332 (−∞
// too), e^0 exactly 1, +∞ above log(DBL_MAX). Each lane equals canon_exp.
TEST(SimdExp, Float64WithinTwoUlpOfStdExp) {
    std::vector<double> x = {0.0,     -0.0,   -INFINITY, -708.4, -745.2, -1e6,    709.0,
                             -708.39, 1e-300, -1e-300,   -740.0, 710.0,  INFINITY};
    for (int i = -745; i <= 709; ++i) x.push_back(i);
    for (int i = -2000; i <= 2000; ++i) x.push_back(i * 1e-4), x.push_back(0.34657359 + i * 1e-9);
    ppolab::Philox rng(5);
    for (int i = 0; i < 20000; ++i) x.push_back(-745.0 * rng.uniform());
    while (x.size() % 8) x.push_back(1.0);
    std::vector<double> y(x.size());
    auto check = [&](const char* path) {
        SCOPED_TRACE(path);
        double worst = 0;
        for (size_t i = 0; i < x.size(); ++i) {
            EXPECT_EQ(y[i], ppolab::canon_exp(x[i])) << x[i];
            if (x[i] < -745.1332191019412) {
                EXPECT_EQ(y[i], 0.0) << x[i];
                continue;
            }
            if (x[i] > 709.782712893384) {
                EXPECT_EQ(y[i], INFINITY) << x[i];
                continue;
            }
            const double want = std::exp(x[i]);
            const double ulp = std::nextafter(want, INFINITY) - want;
            worst = std::max(worst, std::fabs(y[i] - want) / ulp);
        }
        EXPECT_LE(worst, 2.0);
        EXPECT_EQ(y[0], 1.0);
        EXPECT_EQ(y[1], 1.0);
    };
    if (simd::simd_cpu_level() >= simd::SimdLevel::avx512) {
        exp_f64_avx512(x.data(), y.data(), x.size());
        check("avx512");
    }
    if (simd::simd_cpu_level() >= simd::SimdLevel::avx2) {
        exp_f64_avx2(x.data(), y.data(), x.size());
        check("avx2");
    }
}

TEST(LmHead, ForwardMatchesClosedFormAcrossChunks) {
    kt::for_each_simd_path([&] {
        // 64-row chunks: 64 + 64 + 2, and a single short chunk.
        for (int64_t N : {130, 3}) {
            const int64_t H = 40, V = 777;
            auto h = kt::cast<float>(kt::random_vec(N * H, 1, -2, 2));
            auto W = kt::cast<float>(kt::random_vec(V * H, 2, -1, 1));
            auto t = random_targets(N, V, 3);
            std::vector<float> logp(N);
            lm_logprobs_forward(logp.data(), h.data(), t.data(), {WeightType::f32, W.data(), V, H}, N);
            // Float logits (40 products of size ≤ 2): ~1e-6 absolute; logsumexp over 777: 1e-5.
            kt::expect_close(logp, logprobs_double(h, W, t, N, H, V), 2e-5, 1e-5, "logp N=" + std::to_string(N));
        }
    });
}

TEST(LmHead, GradientsMatchFiniteDifferencesOfTheFloatCode) {
    kt::for_each_simd_path([&] {
        // The kernel exists in float only, so the differences are taken of the float
        // forward with a large step: h = 1e-2 gives truncation h²/6·|f'''| ≲ 2e-5 and
        // rounding ≈ 1e-7·|L|/h ≈ 1e-4 (|L| ≲ 10); 5e-4 absolute sits above both and
        // well below the gradients' size (~0.1–1).
        const int64_t N = 5, H = 8, V = 20;
        auto hd = kt::random_vec(N * H, 4, -1, 1), Wd = kt::random_vec(V * H, 5, -1, 1);
        auto t = random_targets(N, V, 6);
        auto dlogp = kt::cast<float>(kt::random_vec(N, 7));
        dlogp[2] = 0.f;  // a row without a loss
        auto loss = [&] {
            auto h = kt::cast<float>(hd), W = kt::cast<float>(Wd);
            std::vector<float> logp(N);
            lm_logprobs_forward(logp.data(), h.data(), t.data(), {WeightType::f32, W.data(), V, H}, N);
            double L = 0;
            for (int64_t n = 0; n < N; ++n) L += static_cast<double>(dlogp[n]) * logp[n];
            return L;
        };
        auto h = kt::cast<float>(hd), W = kt::cast<float>(Wd);
        std::vector<float> dh(N * H, 4.f), dW(V * H, 0.f);
        lm_logprobs_backward(dh.data(), dW.data(), dlogp.data(), h.data(), t.data(), {WeightType::f32, W.data(), V, H},
                             N);
        kt::expect_close(dh, kt::numeric_grad(hd, loss, 1e-2), 5e-4, 1e-3, "dh");
        kt::expect_close(dW, kt::numeric_grad(Wd, loss, 1e-2), 5e-4, 1e-3, "dW");
        for (int64_t k = 0; k < H; ++k) EXPECT_EQ(dh[2 * H + k], 0.f) << "row with dlogp = 0";

        // dW accumulates; dh is overwritten; no dW requested leaves dh unchanged.
        std::vector<float> dh2(N * H, -7.f), dW2(V * H, 1.f);
        lm_logprobs_backward(dh2.data(), dW2.data(), dlogp.data(), h.data(), t.data(),
                             {WeightType::f32, W.data(), V, H}, N);
        for (auto& x : dW2) x -= 1.f;
        kt::expect_close(dh2, dh, 0, 0, "dh overwritten");
        // Adding onto 1 and subtracting it again costs up to one ulp of 1 (1.2e-7) per element.
        kt::expect_close(dW2, dW, 2.5e-7, 0, "dW accumulated");
        lm_logprobs_backward(dh2.data(), nullptr, dlogp.data(), h.data(), t.data(), {WeightType::f32, W.data(), V, H},
                             N);
        kt::expect_close(dh2, dh, 0, 0, "dh without dW");
    });
}

TEST(LmHead, Bf16WeightSeesTheInputRoundedToBf16) {
    kt::for_each_simd_path([&] {
        const int64_t N = 70, H = 32, V = 300;
        auto h = kt::cast<float>(kt::random_vec(N * H, 8, -2, 2));
        auto Wf = kt::cast<float>(kt::random_vec(V * H, 9, -1, 1));
        auto t = random_targets(N, V, 10);
        std::vector<bf16> Wb(Wf.size());
        for (size_t i = 0; i < Wf.size(); ++i) Wb[i] = float_to_bf16(Wf[i]), Wf[i] = bf16_to_float(Wb[i]);
        std::vector<float> hr(h.size());
        for (size_t i = 0; i < h.size(); ++i) hr[i] = round_to_bf16(h[i]);
        std::vector<float> logp(N);
        lm_logprobs_forward(logp.data(), h.data(), t.data(), {WeightType::bf16, Wb.data(), V, H}, N);
        // Products of two BF16 values are exact in float; only the float accumulation order
        // differs between backends: 1e-5.
        kt::expect_close(logp, logprobs_double(hr, Wf, t, N, H, V), 1e-5, 1e-5, "logp (bf16) vs rounded input");
    });
}

// Sets the LM head's chunk budget for a scope.
struct ChunkBudget {
    explicit ChunkBudget(int64_t bytes) : previous(lm_set_chunk_bytes(bytes)) {}
    ~ChunkBudget() { lm_set_chunk_bytes(previous); }
    ChunkBudget(const ChunkBudget&) = delete;
    ChunkBudget& operator=(const ChunkBudget&) = delete;
    int64_t previous;
};

// Logits kept by the forward (LmKeep) give the backward exactly what the
// recompute gives: dh and dW bit for bit, with every row live (read in
// place) and with rows whose dlogp is 0 (gathered), in one chunk and across
// several 64-row chunks; a keeper too small, or one from other rows, falls
// back to the recompute; the forward's log-probs are the same with or
// without one.
TEST(LmHead, KeptLogitsGiveTheRecomputedGradientsBitForBit) {
    const int64_t N = 150, H = 24, V = 500;
    for (int64_t chunk_bytes : {kLmChunkBytes, int64_t{0}}) {
        const ChunkBudget budget_scope(chunk_bytes);
        ASSERT_EQ(lm_chunk_rows(V), chunk_bytes ? 83872 : 64);
        auto h = kt::cast<float>(kt::random_vec(N * H, 21, -2, 2));
        auto Wf = kt::cast<float>(kt::random_vec(V * H, 22, -1, 1));
        std::vector<bf16> Wb(Wf.size());
        for (size_t i = 0; i < Wf.size(); ++i) Wb[i] = float_to_bf16(Wf[i]);
        auto t = random_targets(N, V, 23);
        for (WeightView W :
             {WeightView{WeightType::f32, Wf.data(), V, H}, WeightView{WeightType::bf16, Wb.data(), V, H}})
            for (bool some_dead : {false, true}) {
                auto dlogp = kt::cast<float>(kt::random_vec(N, 24));
                if (some_dead)
                    for (int64_t n = 0; n < N; n += 3) dlogp[n] = 0.f;
                std::vector<float> logp0(N), dh0(N * H), dW0(V * H, 0.f);
                lm_logprobs_forward(logp0.data(), h.data(), t.data(), W, N);
                lm_logprobs_backward(dh0.data(), dW0.data(), dlogp.data(), h.data(), t.data(), W, N);
                for (int64_t budget : {int64_t{1} << 30, int64_t{1000}}) {
                    LmKeep keep;
                    keep.max_bytes = budget;
                    std::vector<float> logp(N), dh(N * H), dW(V * H, 0.f);
                    lm_logprobs_forward(logp.data(), h.data(), t.data(), W, N, &keep);
                    EXPECT_EQ(keep.valid, budget > N * V * 4);
                    lm_logprobs_backward(dh.data(), dW.data(), dlogp.data(), h.data(), t.data(), W, N, &keep);
                    EXPECT_FALSE(keep.valid) << "a keeper serves one backward";
                    const std::string what = std::string(W.type == WeightType::bf16 ? "bf16" : "f32") +
                                             (some_dead ? ", some rows dead" : ", all rows live") +
                                             (budget > N * V * 4 ? ", kept" : ", recomputed");
                    kt::expect_close(logp, logp0, 0, 0, "logp " + what);
                    kt::expect_close(dh, dh0, 0, 0, "dh " + what);
                    kt::expect_close(dW, dW0, 0, 0, "dW " + what);
                }
                // A keeper of other rows (another h) is not used.
                LmKeep other;
                std::vector<float> logp(N), dh(N * H), dW(V * H, 0.f), h2 = h;
                lm_logprobs_forward(logp.data(), h2.data(), t.data(), W, N, &other);
                lm_logprobs_backward(dh.data(), dW.data(), dlogp.data(), h.data(), t.data(), W, N, &other);
                kt::expect_close(dh, dh0, 0, 0, "dh with a keeper of another h");
            }
    }
}

// The chunk: a multiple of 32 rows within the budget, at least 64 rows (256
// for Qwen2.5's vocabulary at the default budget). Log-probs and gradients
// do not depend on it beyond float summation order.
TEST(LmHead, ChunkRowsAndResultsAcrossChunkSizes) {
    EXPECT_EQ(lm_chunk_rows(151936), 256);
    EXPECT_EQ(lm_chunk_rows(kLmChunkBytes / 4 / 40), 64);  // 40 rows fit: still 64
    {
        const ChunkBudget small(0);
        EXPECT_EQ(lm_chunk_rows(151936), 64);
        EXPECT_EQ(lm_chunk_rows(10), 64);
    }
    const ChunkBudget mid(int64_t{4} * 100 * 96);  // 96 rows of V = 100
    EXPECT_EQ(lm_chunk_rows(100), 96);
    const int64_t N = 200, H = 16, V = 100;
    auto h = kt::cast<float>(kt::random_vec(N * H, 31, -2, 2));
    auto W = kt::cast<float>(kt::random_vec(V * H, 32, -1, 1));
    auto t = random_targets(N, V, 33);
    auto dlogp = kt::cast<float>(kt::random_vec(N, 34));
    const WeightView Wv{WeightType::f32, W.data(), V, H};
    std::vector<float> logp_a(N), dh_a(N * H), dW_a(V * H, 0.f), logp_b(N), dh_b(N * H), dW_b(V * H, 0.f);
    lm_logprobs_forward(logp_a.data(), h.data(), t.data(), Wv, N);  // chunks of 96, 96, 8
    lm_logprobs_backward(dh_a.data(), dW_a.data(), dlogp.data(), h.data(), t.data(), Wv, N);
    {
        const ChunkBudget whole(kLmChunkBytes);  // one chunk
        lm_logprobs_forward(logp_b.data(), h.data(), t.data(), Wv, N);
        lm_logprobs_backward(dh_b.data(), dW_b.data(), dlogp.data(), h.data(), t.data(), Wv, N);
    }
    kt::expect_close(logp_a, logp_b, 1e-6, 1e-6, "logp, chunks of 96 vs one chunk");
    kt::expect_close(dh_a, dh_b, 1e-6, 1e-6, "dh, chunks of 96 vs one chunk");
    kt::expect_close(dW_a, dW_b, 1e-5, 1e-5, "dW, chunks of 96 vs one chunk");
    kt::expect_close(logp_a, logprobs_double(h, W, t, N, H, V), 1e-5, 1e-5, "logp vs double");
}

// A BF16 weight with a weight gradient is mixed precision (the BF16 copy of
// FP32 masters): dW += dlogitsᵀ h with both rounded to BF16. Against the FP32
// weight of the same values and h rounded beforehand, only the rounding of
// dlogits differs: 2^-9 relative per element, so 4e-3.
TEST(LmHead, Bf16WeightGradientIsTheMixedPrecisionProduct) {
    const int64_t N = 3, V = 5, H = 8;
    auto h = kt::cast<float>(kt::random_vec(N * H, 11, -1, 1));
    auto Wf = kt::cast<float>(kt::random_vec(V * H, 12, -1, 1));
    std::vector<bf16> Wb(Wf.size());
    for (size_t i = 0; i < Wf.size(); ++i) Wb[i] = float_to_bf16(Wf[i]), Wf[i] = bf16_to_float(Wb[i]);
    std::vector<float> hr(h.size());
    for (size_t i = 0; i < h.size(); ++i) hr[i] = round_to_bf16(h[i]);
    const std::vector<int32_t> t = {1, 4, 0};
    const std::vector<float> g = {-0.5f, 1.f, 0.25f};
    std::vector<float> dh(N * H), dWb(V * H, 0.f), dWf(V * H, 0.f);
    lm_logprobs_backward(dh.data(), dWb.data(), g.data(), h.data(), t.data(), {WeightType::bf16, Wb.data(), V, H}, N);
    lm_logprobs_backward(dh.data(), dWf.data(), g.data(), hr.data(), t.data(), {WeightType::f32, Wf.data(), V, H}, N);
    kt::expect_close(dWb, dWf, 4e-3, 4e-3, "dW (bf16 copy) vs FP32 weight of the same values");
}

TEST(LmHead, RejectsBadTargets) {
    std::vector<float> h(8), W(4 * 8), logp(1);
    const std::vector<int32_t> bad = {4}, neg = {-1}, ok = {3};
    EXPECT_THROW(lm_logprobs_forward(logp.data(), h.data(), bad.data(), {WeightType::f32, W.data(), 4, 8}, 1), Error);
    EXPECT_THROW(lm_logprobs_forward(logp.data(), h.data(), neg.data(), {WeightType::f32, W.data(), 4, 8}, 1), Error);
    lm_logprobs_forward(logp.data(), h.data(), ok.data(), {WeightType::f32, W.data(), 4, 8}, 1);
    EXPECT_NEAR(logp[0], -std::log(4.0), 1e-6);  // zero logits: uniform
}
