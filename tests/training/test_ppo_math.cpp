// The PPO arithmetic (SPEC §4–§5) against hand computations, a second
// independent GAE, and finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "training/ppo_math.h"
#include "util/error.h"
#include "util/rng.h"

using namespace ppolab;

TEST(PpoRewards, KlPenaltyPerTokenAndScoreOnceAtTheEnd) {
    RewardConfig c;  // β 0.02, replace, −1
    auto r = ppo_token_rewards({-1.f, -2.f, -0.5f}, {-1.5f, -1.f, -0.5f}, 3.0, true, c);
    ASSERT_EQ(r.size(), 3u);
    EXPECT_NEAR(r[0], -0.02 * 0.5, 1e-12);
    EXPECT_NEAR(r[1], -0.02 * -1.0, 1e-12);
    EXPECT_NEAR(r[2], 3.0, 1e-12);  // log-ratio 0 there; the score once, only at the last token
}

TEST(PpoRewards, CutWithoutEosGetsPenaltyInsteadOfScore) {
    RewardConfig replace;
    auto r = ppo_token_rewards({-1.f, -1.f}, {-1.f, -1.f}, 5.0, false, replace);
    EXPECT_DOUBLE_EQ(r[0], 0.0);
    EXPECT_DOUBLE_EQ(r[1], -1.0);
    RewardConfig add;
    add.missing_eos = MissingEos::add;
    r = ppo_token_rewards({-1.f, -1.f}, {-1.f, -1.f}, 5.0, false, add);
    EXPECT_DOUBLE_EQ(r[1], 4.0);
    EXPECT_THROW(parse_missing_eos("drop"), std::exception);
}

TEST(PpoRewards, TerminalRewardIsTheLastTokensExtra) {
    const RewardConfig replace{0.1, MissingEos::replace, -1.0}, add{0.1, MissingEos::add, -1.0};
    EXPECT_EQ(ppo_terminal_reward(0.75, true, replace), 0.75);
    EXPECT_EQ(ppo_terminal_reward(0.75, false, replace), -1.0);
    EXPECT_EQ(ppo_terminal_reward(0.75, false, add), 0.75 - 1.0);
    // ppo_token_rewards adds exactly this to the last token's KL term, bit for bit.
    const std::vector<float> old_logp = {-0.3f, -1.7f}, ref_logp = {-0.5f, -1.1f};
    for (const RewardConfig& c : {replace, add})
        for (bool eos : {true, false}) {
            const std::vector<double> r = ppo_token_rewards(old_logp, ref_logp, 0.75, eos, c);
            const double kl_last = -c.beta * (static_cast<double>(old_logp[1]) - static_cast<double>(ref_logp[1]));
            EXPECT_EQ(r[1], kl_last + ppo_terminal_reward(0.75, eos, c));
        }
}

TEST(PpoRewards, ResponseKlSumsFloatDifferencesInOrder) {
    const std::vector<float> old_logp = {-0.25f, -2.5f, -0.125f}, ref_logp = {-0.5f, -2.0f, -0.375f};
    EXPECT_DOUBLE_EQ(ppo_response_kl(old_logp, ref_logp), 0.25 - 0.5 + 0.25);
    // Each difference is taken in float, as the rollout files and metrics always had it.
    const std::vector<float> a = {0.1f}, b = {0.3f};
    EXPECT_EQ(ppo_response_kl(a, b), static_cast<double>(a[0] - b[0]));
    EXPECT_EQ(ppo_response_kl({}, {}), 0.0);
    EXPECT_THROW(ppo_response_kl(a, {}), Error);
}

TEST(PpoGae, ThreeStepsByHand) {
    // γ = 1, λ = 0.95, done at the last token, no bootstrap beyond it.
    const std::vector<double> r = {0.1, -0.2, 1.0};
    const std::vector<float> v = {0.5f, 0.25f, -0.5f};
    const double lam = 0.95;
    const double d2 = 1.0 - (-0.5);                // r2 + 0 − V2 = 1.5
    const double d1 = -0.2 + 1.0 * (-0.5) - 0.25;  // −0.95
    const double d0 = 0.1 + 0.25 - 0.5;            // −0.15
    const double a2 = d2, a1 = d1 + lam * a2, a0 = d0 + lam * a1;
    Advantages g = ppo_gae(r, v, 1.0, lam);
    EXPECT_NEAR(g.advantages[2], a2, 1e-12);
    EXPECT_NEAR(g.advantages[1], a1, 1e-12);
    EXPECT_NEAR(g.advantages[0], a0, 1e-12);
    EXPECT_NEAR(g.returns[0], a0 + 0.5, 1e-12);
    EXPECT_NEAR(g.returns[2], 1.0, 1e-12);  // terminal: return = reward, no bootstrap
}

// A second, independent GAE: A_t = Σ_{l≥0} (γλ)^l δ_{t+l} with δ computed
// forwards and V_{n} = 0 (the episode ends at n−1).
static std::vector<double> gae_by_sums(const std::vector<double>& r, const std::vector<float>& v, double g, double l) {
    const size_t n = r.size();
    std::vector<double> delta(n), a(n, 0.0);
    for (size_t t = 0; t < n; ++t) delta[t] = r[t] + (t + 1 < n ? g * v[t + 1] : 0.0) - v[t];
    for (size_t t = 0; t < n; ++t) {
        double w = 1.0;
        for (size_t k = t; k < n; ++k) {
            a[t] += w * delta[k];
            w *= g * l;
        }
    }
    return a;
}

TEST(PpoGae, AgreesWithIndependentSumFormulaOnRandomData) {
    Philox rng(11, 0);
    for (int trial = 0; trial < 50; ++trial) {
        const size_t n = 1 + rng.below(40);
        std::vector<double> r(n);
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) {
            r[i] = rng.normal();
            v[i] = static_cast<float>(rng.normal());
        }
        const double gamma = trial % 2 ? 1.0 : 0.9, lambda = 0.95;
        Advantages g = ppo_gae(r, v, gamma, lambda);
        auto want = gae_by_sums(r, v, gamma, lambda);
        for (size_t i = 0; i < n; ++i) EXPECT_NEAR(g.advantages[i], want[i], 1e-9) << trial << " " << i;
    }
}

TEST(PpoActorLoss, ClipSideChosenByAdvantageSign) {
    // ratio e^{0.5} ≈ 1.65 > 1.2: with A > 0 the clipped branch (1.2 A) is
    // smaller → clipped, no gradient; with A < 0 the unclipped one is smaller.
    auto pos = ppo_actor_loss({0.5f}, {0.f}, {1.0}, 0.2);
    EXPECT_NEAR(pos.loss, -1.2, 1e-6);
    EXPECT_DOUBLE_EQ(pos.dlogp[0], 0.0);
    EXPECT_DOUBLE_EQ(pos.clipfrac, 1.0);
    auto neg = ppo_actor_loss({0.5f}, {0.f}, {-1.0}, 0.2);
    EXPECT_NEAR(neg.loss, std::exp(0.5), 1e-6);
    EXPECT_NEAR(neg.dlogp[0], std::exp(0.5), 1e-6);
    EXPECT_DOUBLE_EQ(neg.clipfrac, 0.0);
    // ratio e^{−0.5} ≈ 0.61 < 0.8: A < 0 clips at 0.8, A > 0 does not.
    auto low_neg = ppo_actor_loss({-0.5f}, {0.f}, {-1.0}, 0.2);
    EXPECT_NEAR(low_neg.loss, 0.8, 1e-6);
    EXPECT_DOUBLE_EQ(low_neg.clipfrac, 1.0);
    auto low_pos = ppo_actor_loss({-0.5f}, {0.f}, {1.0}, 0.2);
    EXPECT_NEAR(low_pos.loss, -std::exp(-0.5), 1e-6);
    EXPECT_DOUBLE_EQ(low_pos.clipfrac, 0.0);
}

TEST(PpoActorLoss, MeanOverTokensGivesLongAndShortResponsesEqualWeight) {
    // Same per-token situation, 1 token vs 10 tokens: the same loss.
    auto one = ppo_actor_loss({0.1f}, {0.f}, {0.7}, 0.2);
    auto ten =
        ppo_actor_loss(std::vector<float>(10, 0.1f), std::vector<float>(10, 0.f), std::vector<double>(10, 0.7), 0.2);
    EXPECT_NEAR(one.loss, ten.loss, 1e-12);
    auto c1 = ppo_critic_loss({1.f}, {0.0}, 0.5);
    auto c10 = ppo_critic_loss(std::vector<float>(10, 1.f), std::vector<double>(10, 0.0), 0.5);
    EXPECT_NEAR(c1.loss, 0.5, 1e-12);  // 0.5 · (1 − 0)², no hidden second ½
    EXPECT_NEAR(c1.loss, c10.loss, 1e-12);
}

TEST(PpoLosses, GradientsMatchFiniteDifferences) {
    Philox rng(5, 0);
    const size_t n = 7;
    std::vector<float> now(n), old(n), vals(n);
    std::vector<double> adv(n), ret(n);
    for (size_t i = 0; i < n; ++i) {
        old[i] = static_cast<float>(-1.0 + 0.3 * rng.normal());
        now[i] = old[i] + static_cast<float>(0.05 * rng.normal());  // inside the clip range: gradients flow
        adv[i] = rng.normal();
        vals[i] = static_cast<float>(rng.normal());
        ret[i] = rng.normal();
    }
    auto a = ppo_actor_loss(now, old, adv, 0.2);
    auto c = ppo_critic_loss(vals, ret, 0.5);
    for (size_t i = 0; i < n; ++i) {
        const float h = 1e-3f;
        auto p = now, m = now;
        p[i] += h;
        m[i] -= h;
        const double fd = (ppo_actor_loss(p, old, adv, 0.2).loss - ppo_actor_loss(m, old, adv, 0.2).loss) / (2.0 * h);
        EXPECT_NEAR(a.dlogp[i], fd, 1e-4) << i;
        auto vp = vals, vm = vals;
        vp[i] += h;
        vm[i] -= h;
        const double fdv = (ppo_critic_loss(vp, ret, 0.5).loss - ppo_critic_loss(vm, ret, 0.5).loss) / (2.0 * h);
        EXPECT_NEAR(c.dvalues[i], fdv, 1e-4) << i;
    }
}

TEST(PpoStats, ExplainedVariance) {
    EXPECT_NEAR(explained_variance({1, 2, 3}, {1, 2, 3}), 1.0, 1e-12);
    EXPECT_NEAR(explained_variance({1, 2, 3}, {0, 0, 0}), 0.0, 1e-12);
}

// ---- The design switches (ppo_math.h 7–9), each against a hand computation.

TEST(PpoSwitches, KlPenaltyInTheLossLeavesOnlyTheTerminalReward) {
    RewardConfig c;
    c.kl_penalty = KlPenalty::loss_k3;
    const auto r = ppo_token_rewards({-1.f, -2.f, -0.5f}, {-1.5f, -1.f, -0.5f}, 3.0, true, c);
    EXPECT_EQ(r, (std::vector<double>{0.0, 0.0, 3.0}));
    EXPECT_EQ(parse_kl_penalty("reward_k1"), KlPenalty::reward_k1);
    EXPECT_EQ(parse_kl_penalty("loss_k3"), KlPenalty::loss_k3);
    EXPECT_THROW(parse_kl_penalty("k2"), Error);
}

TEST(PpoSwitches, K3LossByHandAndItsGradient) {
    // x = ref − now: token 0 x = 0 (k3 0), token 1 x = ln 2 (k3 = 2 − ln 2 − 1).
    const std::vector<float> now = {-1.f, -1.f}, ref = {-1.f, static_cast<float>(-1.0 + std::log(2.0))};
    const KlLoss k = ppo_k3_loss(now, ref, 0.5);
    const double x1 = static_cast<double>(ref[1]) + 1.0;
    const double k3_1 = std::exp(x1) - x1 - 1.0;
    EXPECT_NEAR(k.mean_k3, k3_1 / 2, 1e-15);
    EXPECT_NEAR(k.loss, 0.5 * k3_1 / 2, 1e-15);
    EXPECT_NEAR(k.dlogp[0], 0.0, 1e-15);
    EXPECT_NEAR(k.dlogp[1], 0.5 * (1.0 - std::exp(x1)) / 2, 1e-15);  // ≈ −0.25: raising logp lowers k3 here
    EXPECT_GE(ppo_k3_loss({-3.f}, {-0.1f}, 1.0).loss, 0.0);          // k3 ≥ 0 on either side
    EXPECT_GE(ppo_k3_loss({-0.1f}, {-3.f}, 1.0).loss, 0.0);
    for (size_t i = 0; i < 2; ++i) {
        const float h = 1e-3f;
        auto p = now, m = now;
        p[i] += h;
        m[i] -= h;
        // Divided by the step the floats really took (p[i] − m[i] is not exactly 2h).
        const double step = static_cast<double>(p[i]) - static_cast<double>(m[i]);
        const double fd = (ppo_k3_loss(p, ref, 0.5).loss - ppo_k3_loss(m, ref, 0.5).loss) / step;
        EXPECT_NEAR(k.dlogp[i], fd, 1e-6) << i;
    }
}

TEST(PpoSwitches, WhiteningByHand) {
    // Tokens {1, 2} and {3, 6}: mean 3, squares 4 + 1 + 0 + 9 = 14, unbiased var 14/3.
    std::vector<std::vector<double>> a = {{1, 2}, {3, 6}};
    ppo_whiten(a);
    const double s = 1.0 / std::sqrt(14.0 / 3.0 + 1e-8);
    EXPECT_NEAR(a[0][0], -2 * s, 1e-14);
    EXPECT_NEAR(a[0][1], -1 * s, 1e-14);
    EXPECT_NEAR(a[1][0], 0.0, 1e-14);
    EXPECT_NEAR(a[1][1], 3 * s, 1e-14);
    std::vector<std::vector<double>> one = {{4.0}};
    EXPECT_THROW(ppo_whiten(one), Error);
}

TEST(PpoSwitches, ValueClippingByHand) {
    // old 0, c 0.2; returns 1 for every token.
    //  V = 0.1: inside the range, clipped = V: the ordinary loss (0.9²) and gradient.
    //  V = 0.5: clipped 0.2 → (0.8)² > (0.5)²: the clipped branch, no gradient.
    //  V = −0.5: clipped −0.2 → (1.2)² < (1.5)²: the unclipped branch, gradient.
    const std::vector<float> v = {0.1f, 0.5f, -0.5f}, old = {0.f, 0.f, 0.f};
    const std::vector<double> R = {1, 1, 1};
    const ClippedCriticLoss c = ppo_clipped_critic_loss(v, old, R, 0.5, 0.2);
    const double e0 = 0.1f - 1.0, e2 = -0.5 - 1.0, e1c = 0.2 - 1.0;
    EXPECT_NEAR(c.loss, 0.5 * (e0 * e0 + e1c * e1c + e2 * e2) / 3, 1e-7);
    EXPECT_NEAR(c.dvalues[0], 2 * 0.5 * e0 / 3, 1e-12);
    EXPECT_EQ(c.dvalues[1], 0.0);
    EXPECT_NEAR(c.dvalues[2], 2 * 0.5 * e2 / 3, 1e-12);
    EXPECT_NEAR(c.clipfrac, 1.0 / 3, 1e-15);
    // A huge range never clips: exactly the unclipped loss.
    const ClippedCriticLoss wide = ppo_clipped_critic_loss(v, old, R, 0.5, 1e9);
    const CriticLoss plain = ppo_critic_loss(v, R, 0.5);
    EXPECT_EQ(wide.loss, plain.loss);
    EXPECT_EQ(wide.dvalues, plain.dvalues);
    EXPECT_EQ(wide.clipfrac, 0.0);
}

// ---- The group baselines (ppo_math.h 10–11).

TEST(GroupBaselines, SequenceRewardIsTheTerminalRewardMinusBetaTimesTheLogRatioSum) {
    const RewardConfig c{0.5, MissingEos::replace, -1.0};
    EXPECT_NEAR(sequence_reward({-1.f, -2.f}, {-1.5f, -1.f}, 3.0, true, c), 3.0 - 0.5 * (0.5 - 1.0), 1e-12);
    EXPECT_NEAR(sequence_reward({-1.f}, {-1.f}, 3.0, false, c), -1.0, 1e-12);  // cut: the penalty instead
}

TEST(GroupBaselines, LeaveOneOutByHand) {
    // R = {1, 2, 6}: baselines (2+6)/2 = 4, (1+6)/2 = 3.5, (1+2)/2 = 1.5.
    const std::vector<double> A = group_advantages({1, 2, 6}, GroupAdvantage::rloo, "t");
    EXPECT_EQ(A, (std::vector<double>{1 - 4.0, 2 - 3.5, 6 - 1.5}));
    // Leave-one-out advantages sum to zero, and equal k/(k−1) times the mean-centred reward.
    EXPECT_NEAR(A[0] + A[1] + A[2], 0.0, 1e-15);
    EXPECT_NEAR(A[0], 1.5 * (1 - 3.0), 1e-15);
}

TEST(GroupBaselines, GroupNormalisedByHand) {
    // R = {1, 2, 6}: mean 3, unbiased std √((4 + 1 + 9)/2) = √7.
    const std::vector<double> A = group_advantages({1, 2, 6}, GroupAdvantage::grpo, "t");
    const double sd = std::sqrt(7.0) + 1e-4;
    EXPECT_NEAR(A[0], -2 / sd, 1e-15);
    EXPECT_NEAR(A[1], -1 / sd, 1e-15);
    EXPECT_NEAR(A[2], 3 / sd, 1e-15);
    // Equal rewards: no signal, exactly zero (the 1e-4 keeps it finite).
    EXPECT_EQ(group_advantages({0.5, 0.5}, GroupAdvantage::grpo, "t"), (std::vector<double>{0.0, 0.0}));
    EXPECT_EQ(group_advantages({0.5, 0.5}, GroupAdvantage::rloo, "t"), (std::vector<double>{0.0, 0.0}));
}

TEST(GroupBaselines, AGroupOfOneIsRefusedWithTheKey) {
    for (GroupAdvantage kind : {GroupAdvantage::rloo, GroupAdvantage::grpo}) {
        try {
            group_advantages({1.0}, kind, "rloo iteration 3 prompt p-7");
            FAIL() << "a group of one was accepted";
        } catch (const Error& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find("rloo iteration 3 prompt p-7: a group of 1 response(s)"), std::string::npos) << m;
            EXPECT_NE(m.find("rl.samples_per_prompt"), std::string::npos) << m;
        }
    }
    EXPECT_EQ(parse_group_advantage("grpo"), GroupAdvantage::grpo);
    EXPECT_THROW(parse_group_advantage("ppo"), Error);
}
