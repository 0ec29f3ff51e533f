#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "training/adamw.h"
#include "util/error.h"
#include "util/rng.h"

using namespace ppolab;

namespace {

// Two small parameters with their own storage.
struct Toy {
    std::vector<float> w{0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f};  // (2, 3)
    std::vector<float> b{0.1f, -0.2f};                             // (2)
    std::vector<float> gw = std::vector<float>(6, 0.0f);
    std::vector<float> gb = std::vector<float>(2, 0.0f);
    ParamList params() { return {{"layer.w", {2, 3}, w.data(), gw.data()}, {"layer.b", {2}, b.data(), gb.data()}}; }
    void random_grads(Philox& rng, double scale) {
        for (float& g : gw) g = static_cast<float>(rng.normal() * scale);
        for (float& g : gb) g = static_cast<float>(rng.normal() * scale);
    }
};

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace

TEST(AdamW, ZeroGradientIsPureDecoupledDecay) {
    Toy t;
    AdamW opt(t.params(), AdamWConfig{0.9, 0.999, 1e-8, 0.01});
    std::vector<float> expect = t.w;
    for (int s = 0; s < 5; ++s) {
        opt.step(0.5);
        for (float& x : expect) x = x * static_cast<float>(1.0 - 0.5 * 0.01);
    }
    EXPECT_TRUE(bits_equal(t.w, expect));
    EXPECT_EQ(opt.steps(), 5);
}

TEST(AdamW, FirstStepIsSignStepPlusDecay) {
    // After one step m̂ = g and v̂ = g², so the update is lr·g/(|g| + eps) ≈ lr·sign(g).
    Toy t;
    AdamW opt(t.params(), AdamWConfig{0.9, 0.999, 1e-8, 0.01});
    t.gw = {1.0f, -2.0f, 0.5f, -0.1f, 3.0f, -4.0f};
    t.gb = {0.01f, -0.02f};
    std::vector<float> w0 = t.w;
    const double lr = 1e-3;
    opt.step(lr);
    for (size_t i = 0; i < w0.size(); ++i) {
        double expect = w0[i] * (1 - lr * 0.01) - lr * (t.gw[i] > 0 ? 1 : -1);
        EXPECT_NEAR(t.w[i], expect, 1e-6) << i;
    }
    AdamWState s = opt.state();
    EXPECT_EQ(s.step, 1);
    EXPECT_NEAR(s.exp_avg[0].values[1], 0.1 * -2.0, 1e-7);
    EXPECT_NEAR(s.exp_avg_sq[0].values[4], 0.001 * 9.0, 1e-8);
}

TEST(AdamW, MissingOrNonFiniteGradientNamesTheParameterAndChangesNothing) {
    Toy t;
    ParamList params = t.params();
    params[1].grad = nullptr;
    AdamW opt(params, AdamWConfig{});
    std::vector<float> w0 = t.w;
    try {
        opt.step(1e-3);
        FAIL() << "a missing gradient must be an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'layer.b'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("no gradient"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(bits_equal(t.w, w0));
    EXPECT_EQ(opt.steps(), 0);

    Toy u;
    AdamW opt2(u.params(), AdamWConfig{});
    u.gw[4] = std::numeric_limits<float>::quiet_NaN();
    try {
        opt2.step(1e-3);
        FAIL() << "a NaN gradient must be an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'layer.w'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("element 4"), std::string::npos) << e.what();
    }
    u.gw[4] = std::numeric_limits<float>::infinity();
    EXPECT_THROW(clip_grad_norm(u.params(), 1.0), Error);
    EXPECT_EQ(opt2.steps(), 0);
}

TEST(ClipGradNorm, ScalesOnlyAboveTheLimitAndReturnsTheUnclippedNorm) {
    std::vector<float> d(2, 0.0f), g{3.0f, 4.0f};
    ParamList p{{"x", {2}, d.data(), g.data()}};
    EXPECT_DOUBLE_EQ(clip_grad_norm(p, 1.0), 5.0);
    const float scale = static_cast<float>(1.0 / (5.0 + 1e-6));
    EXPECT_EQ(g[0], 3.0f * scale);
    EXPECT_EQ(g[1], 4.0f * scale);
    std::vector<float> before = g;  // norm now ≈ 1 < 2: untouched
    double n = clip_grad_norm(p, 2.0);
    EXPECT_NEAR(n, 1.0, 1e-6);
    EXPECT_TRUE(bits_equal(g, before));
    EXPECT_THROW(clip_grad_norm(p, 0.0), Error);
}

TEST(AdamW, StateRoundTripContinuesBitwise) {
    Toy a, b;
    AdamW oa(a.params(), AdamWConfig{});
    Philox ra(7, 1);
    for (int s = 0; s < 3; ++s) {
        a.random_grads(ra, 2.0);
        clip_grad_norm(a.params(), 1.0);
        oa.step(1e-2);
    }
    // b takes a's values and optimiser state, then both continue.
    b.w = a.w;
    b.b = a.b;
    AdamW ob(b.params(), AdamWConfig{});
    ob.load_state(oa.state(), "test state");
    Philox rb = ra;
    for (int s = 0; s < 3; ++s) {
        a.random_grads(ra, 2.0);
        b.random_grads(rb, 2.0);
        clip_grad_norm(a.params(), 1.0);
        clip_grad_norm(b.params(), 1.0);
        oa.step(1e-2);
        ob.step(1e-2);
    }
    EXPECT_TRUE(bits_equal(a.w, b.w));
    EXPECT_TRUE(bits_equal(a.b, b.b));
    EXPECT_EQ(first_tensor_difference(oa.state().exp_avg_sq, ob.state().exp_avg_sq), "");
    EXPECT_EQ(ob.steps(), 6);
}

TEST(AdamW, LoadStateRefusesMismatches) {
    Toy a;
    AdamW opt(a.params(), AdamWConfig{});
    AdamWState s = opt.state();
    AdamWState renamed = s;
    renamed.exp_avg[1].name = "layer.bias";
    try {
        opt.load_state(renamed, "ckpt.gz: optimiser 'actor'");
        FAIL();
    } catch (const Error& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("ckpt.gz: optimiser 'actor'"), std::string::npos) << m;
        EXPECT_NE(m.find("'layer.bias'"), std::string::npos) << m;
    }
    AdamWState reshaped = s;
    reshaped.exp_avg_sq[0].shape = {3, 2};
    EXPECT_THROW(opt.load_state(reshaped, "x"), Error);
    AdamWState other = s;
    other.config.weight_decay = 0.0;
    EXPECT_THROW(opt.load_state(other, "x"), Error);
    AdamWState fewer = s;
    fewer.exp_avg.pop_back();
    EXPECT_THROW(opt.load_state(fewer, "x"), Error);
}

TEST(AdamW, ConfigValidation) {
    EXPECT_THROW(
        AdamWConfig::from_json(json{{"beta1", 1.0}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}}, "c"),
        Error);
    EXPECT_THROW(
        AdamWConfig::from_json(json{{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 0.0}, {"weight_decay", 0.01}}, "c"),
        Error);
    AdamWConfig c;
    EXPECT_EQ(AdamWConfig::from_json(c.to_json(), "c"), c);
    Toy t;
    ParamList dup = t.params();
    dup[1].name = dup[0].name;
    EXPECT_THROW(AdamW(dup, AdamWConfig{}), Error);
}
