// The supervised losses (SPEC §3) and DPO's (§12) against hand computations.
#include <gtest/gtest.h>

#include <cmath>

#include "training/losses.h"

using namespace ppolab;

// Three rows of different lengths (by position, 0 = prompt or padding):
// row 0 has 2 active response tokens, row 1 has 3, row 2 has 1.
TEST(SftTokenLoss, NormalisedByTotalActiveTokensNotMeanOfMeans) {
    const float logp[] = {0.f,   -1.f,  -2.f, 0.f,  //
                          -0.5f, -0.5f, -2.f, 0.f,  //
                          0.f,   0.f,   0.f,  -3.f};
    const uint8_t mask[] = {0, 1, 1, 0,  //
                            1, 1, 1, 0,  //
                            0, 0, 0, 1};
    float dlogp[12];
    // total active tokens = 6; summed NLL = 3 + 3 + 3 = 9 → 9 / 6 = 1.5
    const double loss = sft_token_loss(logp, mask, 12, 6.0, dlogp);
    EXPECT_DOUBLE_EQ(loss, 1.5);
    // A mean of per-row means would give (1.5 + 1 + 3) / 3 = 1.8333: not this.
    EXPECT_NE(loss, (1.5 + 1.0 + 3.0) / 3.0);
    for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(dlogp[i], mask[i] ? -1.f / 6.f : 0.f) << i;
}

TEST(BradleyTerry, HandCase) {
    const float chosen[] = {2.f, 0.f, -1.f};
    const float rejected[] = {1.f, 0.f, 1.f};
    float dc[3], dr[3];
    const double loss = bradley_terry_loss(chosen, rejected, 3, dc, dr);
    // margins 1, 0, −2: −log σ(m) = log(1 + e^{−m})
    const double want = (std::log1p(std::exp(-1.0)) + std::log(2.0) + std::log1p(std::exp(2.0))) / 3.0;
    EXPECT_NEAR(loss, want, 1e-12);
    const double margins[] = {1.0, 0.0, -2.0};
    for (int i = 0; i < 3; ++i) {
        const double g = -1.0 / (1.0 + std::exp(margins[i])) / 3.0;  // −σ(−m)/n
        EXPECT_NEAR(dc[i], g, 1e-7);
        EXPECT_NEAR(dr[i], -g, 1e-7);
    }
}

TEST(BradleyTerry, StableForLargeMargins) {
    const float c[] = {1000.f, -1000.f}, r[] = {0.f, 0.f};
    float dc[2], dr[2];
    const double loss = bradley_terry_loss(c, r, 2, dc, dr);
    EXPECT_NEAR(loss, 500.0, 1e-9);  // (0 + 1000) / 2
    EXPECT_TRUE(std::isfinite(dc[0]) && std::isfinite(dc[1]));
    EXPECT_NEAR(dc[1], -0.5, 1e-7);
}

TEST(BradleyTerry, GradientMatchesFiniteDifferences) {
    const float c[] = {0.3f, -0.7f}, r[] = {0.1f, 0.4f};
    float dc[2], dr[2];
    bradley_terry_loss(c, r, 2, dc, dr);
    for (int i = 0; i < 2; ++i) {
        float cp[2] = {c[0], c[1]}, cm[2] = {c[0], c[1]};
        const float h = 1e-3f;
        cp[i] += h;
        cm[i] -= h;
        const double fd =
            (bradley_terry_loss(cp, r, 2, nullptr, nullptr) - bradley_terry_loss(cm, r, 2, nullptr, nullptr)) /
            (2.0 * h);
        EXPECT_NEAR(dc[i], fd, 1e-5);
    }
}

// DPO by hand. Pair 0: π_c − ρ_c = 1, π_r − ρ_r = −1, β = 0.5 → z = 0.5·2 = 1,
// loss softplus(−1) = log(1 + e^−1); ∂/∂π_c = −β σ(−1)/n. Pair 1: the
// policy prefers the rejected answer, z = 0.5·(0 − 2) = −1, softplus(1).
TEST(Dpo, HandCase) {
    const double pc[] = {-3.0, -5.0}, pr[] = {-6.0, -2.0}, rc[] = {-4.0, -5.0}, rr[] = {-5.0, -4.0};
    double dc[2], dr[2];
    DpoPairTerms t[2];
    const double loss = dpo_loss(pc, pr, rc, rr, 2, 0.5, dc, dr, t);
    const double s1 = 1.0 / (1.0 + std::exp(1.0));  // σ(−1)
    EXPECT_NEAR(loss, (std::log1p(std::exp(-1.0)) + std::log1p(std::exp(1.0))) / 2, 1e-15);
    EXPECT_NEAR(dc[0], -0.5 * s1 / 2, 1e-15);
    EXPECT_NEAR(dr[0], 0.5 * s1 / 2, 1e-15);
    EXPECT_NEAR(dc[1], -0.5 * (1 - s1) / 2, 1e-15);  // σ(1) = 1 − σ(−1)
    EXPECT_NEAR(dr[1], 0.5 * (1 - s1) / 2, 1e-15);
    EXPECT_DOUBLE_EQ(t[0].chosen_reward, 0.5);
    EXPECT_DOUBLE_EQ(t[0].rejected_reward, -0.5);
    EXPECT_DOUBLE_EQ(t[0].margin, 1.0);
    EXPECT_DOUBLE_EQ(t[1].margin, -1.0);
    EXPECT_EQ(dpo_loss(pc, pr, rc, rr, 2, 0.5, nullptr, nullptr, nullptr), loss);
}

// The policy equal to its reference (DPO's first update from SFT), β → 0 and
// y_c = y_r all give log 2; β → 0 also takes the gradient to 0, and y_c = y_r
// gives the two answers opposite gradients that cancel on the one sequence.
TEST(Dpo, Log2CasesAndLimits) {
    const double pc[] = {-3.0}, pr[] = {-7.0}, rc[] = {-1.0}, rr[] = {-9.0};
    double dc, dr;
    EXPECT_NEAR(dpo_loss(pc, pr, pc, pr, 1, 0.1, &dc, &dr, nullptr), std::log(2.0), 1e-15);  // π = ρ
    EXPECT_NEAR(dc, -0.1 * 0.5, 1e-15);
    EXPECT_NEAR(dr, 0.1 * 0.5, 1e-15);
    for (double beta : {1e-3, 1e-6, 1e-9}) {
        const double loss = dpo_loss(pc, pr, rc, rr, 1, beta, &dc, &dr, nullptr);
        EXPECT_NEAR(loss, std::log(2.0), 10 * beta) << beta;  // |loss − log 2| ≤ β|Δ|/2 = 3β
        EXPECT_LE(std::fabs(dc), beta) << beta;
        EXPECT_EQ(dc, -dr);
    }
    // y_c = y_r: the same sums for both answers
    EXPECT_NEAR(dpo_loss(pc, pc, rc, rc, 1, 0.7, &dc, &dr, nullptr), std::log(2.0), 1e-15);
    EXPECT_EQ(dc + dr, 0.0);
    // Far apart margins stay finite (softplus, not log(σ))
    const double big_pc[] = {0.0}, big_pr[] = {-2000.0}, zero[] = {0.0};
    EXPECT_NEAR(dpo_loss(big_pc, big_pr, zero, zero, 1, 1.0, &dc, nullptr, nullptr), 0.0, 1e-300);
    EXPECT_NEAR(dpo_loss(big_pr, big_pc, zero, zero, 1, 1.0, &dc, nullptr, nullptr), 2000.0, 1e-9);
    EXPECT_NEAR(dc, -1.0, 1e-15);
}

// A chunk of an update divides by the update's pair count: the chunks'
// losses and gradients are the whole update's (training/chunked_update.h).
TEST(BradleyTerry, ChunksDivideByTheUpdatesPairCount) {
    const float c[5] = {0.3f, -1.2f, 2.0f, 0.0f, 0.7f}, r[5] = {0.1f, 0.4f, -0.5f, 0.0f, 1.1f};
    float dc[5], dr[5], pc[5], pr[5];
    const double whole = bradley_terry_loss(c, r, 5, dc, dr);
    const double first = bradley_terry_loss(c, r, 2, pc, pr, 5.0);
    const double rest = bradley_terry_loss(c + 2, r + 2, 3, pc + 2, pr + 2, 5.0);
    EXPECT_NEAR(first + rest, whole, 1e-15);
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(pc[i], dc[i]) << i;  // the same division, the same bits
        EXPECT_EQ(pr[i], dr[i]) << i;
    }
    EXPECT_EQ(bradley_terry_loss(c, r, 5, nullptr, nullptr, 5.0), whole);  // denominator n = the default
}

TEST(Dpo, ChunksDivideByTheUpdatesPairCount) {
    const double pc[3] = {-3.0, -8.0, -1.5}, pr[3] = {-4.0, -2.0, -1.0}, rc[3] = {-3.5, -7.0, -2.0},
                 rr[3] = {-3.0, -3.0, -1.2};
    double dc[3], dr[3], qc[3], qr[3];
    const double whole = dpo_loss(pc, pr, rc, rr, 3, 0.1, dc, dr, nullptr);
    const double first = dpo_loss(pc, pr, rc, rr, 1, 0.1, qc, qr, nullptr, 3.0);
    const double rest = dpo_loss(pc + 1, pr + 1, rc + 1, rr + 1, 2, 0.1, qc + 1, qr + 1, nullptr, 3.0);
    EXPECT_NEAR(first + rest, whole, 1e-15);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(qc[i], dc[i]) << i;
        EXPECT_EQ(qr[i], dr[i]) << i;
    }
}
