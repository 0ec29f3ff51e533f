// The kernels against PyTorch (tests/oracle/kernels_ref.py, float64, written
// from the Hugging Face Qwen2 definitions): RoPE's rotate_half convention,
// GQA attention with left padding, and lm_logprobs with FP32 and BF16 weights.
#include "kernels/attention.h"
#include "kernels/lm_head.h"
#include "kernels/rope.h"
#include "test_kernels_common.h"
#include "util/bf16.h"

using namespace ppolab;

TEST(Oracle, RopeMatchesHuggingFaceRotateHalf) {
    const int64_t N = 6, heads = 3, hd = 64;
    const double theta = 1e6;  // Qwen2.5
    const std::vector<int32_t> pos = {0, 1, 2, 77, 511, 4095};
    auto x = kt::random_vec(N * heads * hd, 1, -2, 2);
    kt::TorchOracle o("rope");
    o.meta() = {{"op", "rope"}, {"N", N}, {"heads", heads}, {"head_dim", hd}, {"theta", theta}};
    o.put("x", x);
    o.put("positions", pos);
    ASSERT_TRUE(o.run());
    auto want = o.get("out", x.size());
    auto y = x;
    rope_forward<double>(y.data(), pos.data(), N, heads, hd, theta);
    // Both in double; the angles (p·θ^(-2i/d), p ≤ 4095) are formed in a different order:
    // ~1e-12 absolute at most.
    kt::expect_close(y, want, 1e-11, 1e-11, "rope double vs HF");
    auto yf = kt::cast<float>(x);
    rope_forward<float>(yf.data(), pos.data(), N, heads, hd, theta);
    // Float: cos/sin rounded to float and two float products on |x| ≤ 2: ≤ 1e-6.
    kt::expect_close(yf, want, 1e-6, 1e-6, "rope float vs HF");
}

TEST(Oracle, AttentionMatchesTorchSoftmaxWithCausalPaddingMask) {
    const AttentionShape s{3, 12, 14, 2, 16};  // Qwen2.5 head grouping (7 query heads per KV head)
    const std::vector<int64_t> pad = {0, 5, 11};
    auto q = kt::random_vec(s.B * s.T * s.nH * s.hd, 10, -1.5, 1.5);
    auto k = kt::random_vec(s.B * s.T * s.nKV * s.hd, 11, -1.5, 1.5);
    auto v = kt::random_vec(s.B * s.T * s.nKV * s.hd, 12);
    auto dout = kt::random_vec(q.size(), 13);
    std::vector<uint8_t> mask(s.B * s.T, 1);
    for (int64_t b = 0; b < s.B; ++b)
        for (int64_t t = 0; t < pad[b]; ++t) mask[b * s.T + t] = 0;
    kt::TorchOracle o("attention");
    o.meta() = {{"op", "attention"}, {"B", s.B}, {"T", s.T}, {"nH", s.nH}, {"nKV", s.nKV}, {"hd", s.hd}};
    o.put("q", q);
    o.put("k", k);
    o.put("v", v);
    o.put("mask", mask);
    o.put("dout", dout);
    ASSERT_TRUE(o.run());
    std::vector<double> out(q.size()), probs(s.B * s.nH * s.T * s.T), dq(q.size()), dk(k.size()), dv(v.size());
    attention_forward<double>(out.data(), probs.data(), q.data(), k.data(), v.data(), mask.data(), s);
    attention_backward<double>(dq.data(), dk.data(), dv.data(), dout.data(), probs.data(), q.data(), k.data(),
                               v.data(), mask.data(), s);
    // Both in double, different summation orders: 1e-12.
    kt::expect_close(out, o.get("out", out.size()), 1e-12, 1e-10, "out");
    kt::expect_close(probs, o.get("probs", probs.size()), 1e-12, 1e-10, "probs");
    kt::expect_close(dq, o.get("dq", dq.size()), 1e-12, 1e-10, "dq");
    kt::expect_close(dk, o.get("dk", dk.size()), 1e-12, 1e-10, "dk");
    kt::expect_close(dv, o.get("dv", dv.size()), 1e-12, 1e-10, "dv");

    // The engine's float path against the same reference.
    auto qf = kt::cast<float>(q), kf = kt::cast<float>(k), vf = kt::cast<float>(v), gf = kt::cast<float>(dout);
    std::vector<float> outf(out.size()), pf(probs.size()), dqf(q.size()), dkf(k.size()), dvf(v.size());
    attention_forward<float>(outf.data(), pf.data(), qf.data(), kf.data(), vf.data(), mask.data(), s);
    attention_backward<float>(dqf.data(), dkf.data(), dvf.data(), gf.data(), pf.data(), qf.data(), kf.data(),
                              vf.data(), mask.data(), s);
    // Float inputs and float sums over ≤ 16-term dots, ≤ 12 keys, ≤ 7 heads: a few 1e-7 of O(1) values.
    kt::expect_close(outf, o.get("out", out.size()), 2e-6, 1e-5, "out (float)");
    kt::expect_close(dqf, o.get("dq", dq.size()), 2e-6, 1e-5, "dq (float)");
    kt::expect_close(dkf, o.get("dk", dk.size()), 2e-6, 1e-5, "dk (float)");
    kt::expect_close(dvf, o.get("dv", dv.size()), 2e-6, 1e-5, "dv (float)");
}

namespace {

// One lm_logprobs problem: N rows (more than one chunk of 64), a small vocabulary.
struct LmCase {
    int64_t N = 150, H = 48, V = 500;
    std::vector<float> h = kt::cast<float>(kt::random_vec(N * H, 20, -2, 2));  // (N, H)
    std::vector<float> W = kt::cast<float>(kt::random_vec(V * H, 21, -0.5, 0.5));  // (V, H)
    std::vector<int32_t> targets;                                                   // (N)
    std::vector<float> dlogp = kt::cast<float>(kt::random_vec(N, 22));              // (N)
    LmCase() {
        ppolab::Philox rng(23);
        for (int64_t n = 0; n < N; ++n) targets.push_back(static_cast<int32_t>(rng.below(V)));
        for (int64_t n = 0; n < N; n += 7) dlogp[n] = 0.f;  // rows without a loss
    }
};

}  // namespace

TEST(Oracle, LmLogprobsFp32MatchesTorchLogSoftmax) {
    LmCase c;
    kt::TorchOracle o("lm_logprobs");
    o.meta() = {{"op", "lm_logprobs"}, {"N", c.N}, {"H", c.H}, {"V", c.V}, {"bf16", false}};
    o.put("h", c.h);
    o.put("W", c.W);
    o.put("targets", c.targets);
    o.put("dlogp", c.dlogp);
    ASSERT_TRUE(o.run());
    const WeightView W{WeightType::f32, c.W.data(), c.V, c.H};
    std::vector<float> logp(c.N), dh(c.N * c.H, 3.f), dW(c.V * c.H, 0.5f);
    lm_logprobs_forward(logp.data(), c.h.data(), c.targets.data(), W, c.N);
    lm_logprobs_backward(dh.data(), dW.data(), c.dlogp.data(), c.h.data(), c.targets.data(), W, c.N);
    for (auto& x : dW) x -= 0.5f;  // dW accumulates
    // Logits are float sums of 48 products of size ≤ 1 (error ≲ 1e-6), logsumexp over
    // 500 of them adds ~1e-6: 2e-5 absolute on log-probabilities of size ~5.
    kt::expect_close(logp, o.get("logp", c.N), 2e-5, 1e-5, "logp");
    // Gradients are sums of ≤ 500 (dh) or ≤ 150 (dW) float terms of size ≤ 1: 2e-5.
    kt::expect_close(dh, o.get("dh", c.N * c.H), 2e-5, 1e-4, "dh");
    kt::expect_close(dW, o.get("dW", c.V * c.H), 2e-5, 1e-4, "dW");
}

TEST(Oracle, LmLogprobsBf16RoundsTheInputLikeTheMatmulContract) {
    LmCase c;
    std::vector<bf16> Wb(c.W.size());
    std::vector<float> Wr(c.W.size());  // the BF16 values, exactly, as float
    for (size_t i = 0; i < c.W.size(); ++i) Wb[i] = float_to_bf16(c.W[i]), Wr[i] = bf16_to_float(Wb[i]);
    kt::TorchOracle o("lm_logprobs");
    o.meta() = {{"op", "lm_logprobs"}, {"N", c.N}, {"H", c.H}, {"V", c.V}, {"bf16", true}};
    o.put("h", c.h);
    o.put("W", Wr);
    o.put("targets", c.targets);
    o.put("dlogp", c.dlogp);
    ASSERT_TRUE(o.run());
    const WeightView W{WeightType::bf16, Wb.data(), c.V, c.H};
    std::vector<float> logp(c.N), dh(c.N * c.H);
    lm_logprobs_forward(logp.data(), c.h.data(), c.targets.data(), W, c.N);
    lm_logprobs_backward(dh.data(), nullptr, c.dlogp.data(), c.h.data(), c.targets.data(), W, c.N);
    auto want = o.get("logp", c.N);
    // As with FP32 weights: 2e-5. Not rounding h would miss by far more (checked below).
    kt::expect_close(logp, want, 2e-5, 1e-5, "logp (bf16)");
    auto unrounded = o.get("logp_unrounded", c.N);
    double gap = 0;
    for (int64_t n = 0; n < c.N; ++n) gap = std::max(gap, std::fabs(want[n] - unrounded[n]));
    EXPECT_GT(gap, 1e-3) << "the case is too weak to tell a rounded input from an unrounded one";
    // matmul.h rounds dlogits to BF16 (2^-9 relative) before the product with W; the
    // reference does not. dh[k] = Σ_v dlogits[v] W[v,k] with |W| ≤ 0.5: the rounding error
    // is ≤ 2^-9 · Σ_v |dlogits[v]| · 0.5 ≤ 2^-9 · 2|dlogp| · 0.5 ≤ 2e-3.
    kt::expect_close(dh, o.get("dh", c.N * c.H), 2e-3, 0, "dh (bf16)");
}
