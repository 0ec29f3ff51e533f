// The kernels against PyTorch (tests/oracle/kernels_ref.py, float64, written
// from the Hugging Face Qwen2 definitions): RoPE's rotate_half convention,
// GQA attention with left padding, and lm_logprobs with FP32 and BF16 weights.
// All cases are written first and the script runs once (importing torch
// costs seconds); each test then compares its own case.
#include "kernels/attention.h"
#include "kernels/lm_head.h"
#include "kernels/rope.h"
#include "test_kernels_common.h"
#include "util/bf16.h"

using namespace ppolab;

namespace {

struct RopeCase {
    int64_t N = 6, heads = 3, hd = 64;
    double theta = 1e6;  // Qwen2.5
    std::vector<int32_t> pos = {0, 1, 2, 77, 511, 4095};
    std::vector<double> x = kt::random_vec(N * heads * hd, 1, -2, 2);  // (N, heads, hd)
    kt::TorchOracle o{"rope"};
    RopeCase() {
        o.meta() = {{"op", "rope"}, {"N", N}, {"heads", heads}, {"head_dim", hd}, {"theta", theta}};
        o.put("x", x);
        o.put("positions", pos);
    }
};

struct AttentionCase {
    AttentionShape s{3, 12, 14, 2, 16};  // Qwen2.5 head grouping (7 query heads per KV head)
    std::vector<int64_t> pad = {0, 5, 11};
    std::vector<double> q = kt::random_vec(s.B * s.T * s.nH * s.hd, 10, -1.5, 1.5);   // (B, T, nH, hd)
    std::vector<double> k = kt::random_vec(s.B * s.T * s.nKV * s.hd, 11, -1.5, 1.5);  // (B, T, nKV, hd)
    std::vector<double> v = kt::random_vec(s.B * s.T * s.nKV * s.hd, 12);             // (B, T, nKV, hd)
    std::vector<double> dout = kt::random_vec(q.size(), 13);                          // (B, T, nH, hd)
    std::vector<uint8_t> mask = std::vector<uint8_t>(s.B * s.T, 1);                   // (B, T)
    kt::TorchOracle o{"attention"};
    AttentionCase() {
        for (int64_t b = 0; b < s.B; ++b)
            for (int64_t t = 0; t < pad[b]; ++t) mask[b * s.T + t] = 0;
        o.meta() = {{"op", "attention"}, {"B", s.B}, {"T", s.T}, {"nH", s.nH}, {"nKV", s.nKV}, {"hd", s.hd}};
        o.put("q", q);
        o.put("k", k);
        o.put("v", v);
        o.put("mask", mask);
        o.put("dout", dout);
    }
};

// One lm_logprobs problem: N rows (more than one chunk of 64), a small vocabulary.
struct LmCase {
    int64_t N = 150, H = 48, V = 500;
    bool bf16_weight;
    std::vector<float> h = kt::cast<float>(kt::random_vec(N * H, 20, -2, 2));      // (N, H)
    std::vector<float> W = kt::cast<float>(kt::random_vec(V * H, 21, -0.5, 0.5));  // (V, H)
    std::vector<bf16> Wb;                                                          // (V, H) when bf16_weight
    std::vector<int32_t> targets;                                                  // (N)
    std::vector<float> dlogp = kt::cast<float>(kt::random_vec(N, 22));             // (N)
    kt::TorchOracle o{"lm_logprobs"};
    explicit LmCase(bool bf16) : bf16_weight(bf16) {
        ppolab::Philox rng(23);
        for (int64_t n = 0; n < N; ++n) targets.push_back(static_cast<int32_t>(rng.below(V)));
        for (int64_t n = 0; n < N; n += 7) dlogp[n] = 0.f;  // rows without a loss
        if (bf16) {                                         // W becomes the BF16 values, exactly, as float
            Wb.resize(W.size());
            for (size_t i = 0; i < W.size(); ++i) Wb[i] = float_to_bf16(W[i]), W[i] = bf16_to_float(Wb[i]);
        }
        o.meta() = {{"op", "lm_logprobs"}, {"N", N}, {"H", H}, {"V", V}, {"bf16", bf16}};
        o.put("h", h);
        o.put("W", W);
        o.put("targets", targets);
        o.put("dlogp", dlogp);
    }
    WeightView view() const {
        return bf16_weight ? WeightView{WeightType::bf16, Wb.data(), V, H}
                           : WeightView{WeightType::f32, W.data(), V, H};
    }
};

struct Cases {
    RopeCase rope;
    AttentionCase attention;
    LmCase lm_f32{false}, lm_bf16{true};
    bool ran = kt::TorchOracle::run_all({&rope.o, &attention.o, &lm_f32.o, &lm_bf16.o});
};

Cases& cases() {
    static Cases* c = new Cases;  // one script run for the whole file; kept to the end
    return *c;
}

}  // namespace

TEST(Oracle, RopeMatchesHuggingFaceRotateHalf) {
    ASSERT_TRUE(cases().ran);
    RopeCase& c = cases().rope;
    auto want = c.o.get("out", c.x.size());
    auto y = c.x;
    rope_forward<double>(y.data(), c.pos.data(), c.N, c.heads, c.hd, c.theta);
    // Both in double; the angles (p·θ^(-2i/d), p ≤ 4095) are formed in a different order:
    // ~1e-12 absolute at most.
    kt::expect_close(y, want, 1e-11, 1e-11, "rope double vs HF");
    auto yf = kt::cast<float>(c.x);
    rope_forward<float>(yf.data(), c.pos.data(), c.N, c.heads, c.hd, c.theta);
    // Float: cos/sin rounded to float and two float products on |x| ≤ 2: ≤ 1e-6.
    kt::expect_close(yf, want, 1e-6, 1e-6, "rope float vs HF");
}

TEST(Oracle, AttentionMatchesTorchSoftmaxWithCausalPaddingMask) {
    ASSERT_TRUE(cases().ran);
    AttentionCase& c = cases().attention;
    const AttentionShape s = c.s;
    const auto want_out = c.o.get("out", c.q.size()), want_probs = c.o.get("probs", s.B * s.nH * s.T * s.T);
    const auto want_dq = c.o.get("dq", c.q.size()), want_dk = c.o.get("dk", c.k.size()),
               want_dv = c.o.get("dv", c.v.size());
    std::vector<double> out(c.q.size()), probs(want_probs.size()), dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
    attention_forward<double>(out.data(), probs.data(), c.q.data(), c.k.data(), c.v.data(), c.mask.data(), s);
    attention_backward<double>(dq.data(), dk.data(), dv.data(), c.dout.data(), probs.data(), c.q.data(), c.k.data(),
                               c.v.data(), c.mask.data(), s);
    // Both in double, different summation orders: 1e-12.
    kt::expect_close(out, want_out, 1e-12, 1e-10, "out");
    kt::expect_close(probs, want_probs, 1e-12, 1e-10, "probs");
    kt::expect_close(dq, want_dq, 1e-12, 1e-10, "dq");
    kt::expect_close(dk, want_dk, 1e-12, 1e-10, "dk");
    kt::expect_close(dv, want_dv, 1e-12, 1e-10, "dv");

    // The engine's float paths against the same reference.
    auto qf = kt::cast<float>(c.q), kf = kt::cast<float>(c.k), vf = kt::cast<float>(c.v), gf = kt::cast<float>(c.dout);
    kt::for_each_simd_path([&] {
        std::vector<float> outf(out.size()), pf(probs.size()), dqf(dq.size()), dkf(dk.size()), dvf(dv.size());
        attention_forward<float>(outf.data(), pf.data(), qf.data(), kf.data(), vf.data(), c.mask.data(), s);
        attention_backward<float>(dqf.data(), dkf.data(), dvf.data(), gf.data(), pf.data(), qf.data(), kf.data(),
                                  vf.data(), c.mask.data(), s);
        // Float inputs and float sums over ≤ 16-term dots, ≤ 12 keys, ≤ 7 heads: a few 1e-7 of O(1) values.
        kt::expect_close(outf, want_out, 2e-6, 1e-5, "out (float)");
        kt::expect_close(pf, want_probs, 1e-6, 1e-5, "probs (float)");
        kt::expect_close(dqf, want_dq, 2e-6, 1e-5, "dq (float)");
        kt::expect_close(dkf, want_dk, 2e-6, 1e-5, "dk (float)");
        kt::expect_close(dvf, want_dv, 2e-6, 1e-5, "dv (float)");
    });
}

TEST(Oracle, LmLogprobsFp32MatchesTorchLogSoftmax) {
    ASSERT_TRUE(cases().ran);
    LmCase& c = cases().lm_f32;
    const auto want_logp = c.o.get("logp", c.N), want_dh = c.o.get("dh", c.N * c.H), want_dW = c.o.get("dW", c.V * c.H);
    kt::for_each_simd_path([&] {
        std::vector<float> logp(c.N), dh(c.N * c.H, 3.f), dW(c.V * c.H, 0.5f);
        lm_logprobs_forward(logp.data(), c.h.data(), c.targets.data(), c.view(), c.N);
        lm_logprobs_backward(dh.data(), dW.data(), c.dlogp.data(), c.h.data(), c.targets.data(), c.view(), c.N);
        for (auto& x : dW) x -= 0.5f;  // dW accumulates
        // Logits are float sums of 48 products of size ≤ 1 (error ≲ 1e-6), logsumexp over
        // 500 of them adds ~1e-6: 2e-5 absolute on log-probabilities of size ~5.
        kt::expect_close(logp, want_logp, 2e-5, 1e-5, "logp");
        // Gradients are sums of ≤ 500 (dh) or ≤ 150 (dW) float terms of size ≤ 1: 2e-5
        // (the 0.5 added to dW and taken away again costs at most 6e-8 more).
        kt::expect_close(dh, want_dh, 2e-5, 1e-4, "dh");
        kt::expect_close(dW, want_dW, 2e-5, 1e-4, "dW");
    });
}

TEST(Oracle, LmLogprobsBf16RoundsTheInputLikeTheMatmulContract) {
    ASSERT_TRUE(cases().ran);
    LmCase& c = cases().lm_bf16;
    const auto want = c.o.get("logp", c.N), unrounded = c.o.get("logp_unrounded", c.N),
               want_dh = c.o.get("dh", c.N * c.H);
    double gap = 0;
    for (int64_t n = 0; n < c.N; ++n) gap = std::max(gap, std::fabs(want[n] - unrounded[n]));
    EXPECT_GT(gap, 1e-3) << "the case is too weak to tell a rounded input from an unrounded one";
    kt::for_each_simd_path([&] {
        std::vector<float> logp(c.N), dh(c.N * c.H);
        lm_logprobs_forward(logp.data(), c.h.data(), c.targets.data(), c.view(), c.N);
        lm_logprobs_backward(dh.data(), nullptr, c.dlogp.data(), c.h.data(), c.targets.data(), c.view(), c.N);
        // As with FP32 weights: 2e-5. Not rounding h would miss by more than 1e-3 (checked above).
        kt::expect_close(logp, want, 2e-5, 1e-5, "logp (bf16)");
        // matmul.h rounds dlogits to BF16 (2^-9 relative) before the product with W; the
        // reference does not. dh[k] = Σ_v dlogits[v] W[v,k] with |W| ≤ 0.5: the rounding error
        // is ≤ 2^-9 · Σ_v |dlogits[v]| · 0.5 ≤ 2^-9 · 2|dlogp| · 0.5 ≤ 2e-3.
        kt::expect_close(dh, want_dh, 2e-3, 0, "dh (bf16)");
    });
}
