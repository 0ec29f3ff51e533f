// The two supervised losses against hand computations (SPEC §3).
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
