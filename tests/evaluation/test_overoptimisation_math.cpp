// test_overoptimisation_math.cpp — best-of-n against direct Monte-Carlo and
// closed forms, its KL, and the two over-optimisation fits on noiseless and
// noisy data from known (α, β) (evaluation/overoptimisation_math.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "evaluation/overoptimisation_math.h"
#include "support/test_support.h"
#include "util/rng.h"

namespace ppolab {
namespace {

using test::error_of;

struct MonteCarlo {
    double mean, standard_error;
};

// Draws n of N without replacement (partial Fisher–Yates) `draws` times; the value of the max-proxy draw, ties in
// the max broken uniformly at random (a uniformly random one of the tied, via a second Philox draw).
MonteCarlo monte_carlo(const std::vector<double>& proxy, const std::vector<double>& value, int64_t n, int64_t draws,
                       uint64_t seed) {
    Philox rng(seed);
    const size_t N = proxy.size();
    std::vector<size_t> idx(N);
    double sum = 0, sum2 = 0;
    for (int64_t t = 0; t < draws; ++t) {
        std::iota(idx.begin(), idx.end(), size_t{0});
        for (size_t i = 0; i < static_cast<size_t>(n); ++i) std::swap(idx[i], idx[i + rng.below(N - i)]);
        double best = -INFINITY;
        std::vector<size_t> tied;
        for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
            if (proxy[idx[i]] > best) {
                best = proxy[idx[i]];
                tied.clear();
            }
            if (proxy[idx[i]] == best) tied.push_back(idx[i]);
        }
        const double x = value[tied[rng.below(tied.size())]];
        sum += x;
        sum2 += x * x;
    }
    const double mean = sum / static_cast<double>(draws);
    const double var = std::max(0.0, sum2 / static_cast<double>(draws) - mean * mean);
    return {mean, std::sqrt(var / static_cast<double>(draws))};
}

void make_samples(int64_t N, uint64_t seed, bool discrete_proxy, std::vector<double>& proxy,
                  std::vector<double>& value) {
    Philox rng(seed);
    proxy.clear();
    value.clear();
    for (int64_t i = 0; i < N; ++i) {
        proxy.push_back(discrete_proxy ? static_cast<double>(rng.below(3)) : rng.normal());
        value.push_back(rng.uniform() < 0.4 ? 1.0 : 0.0);  // a rubric success, 0 or 1
    }
}

TEST(BestOfN, AgreesWithDirectMonteCarlo) {
    // 200 000 draws: the Monte-Carlo mean's standard error is computed from the draws; 4 standard errors
    // (a two-sided 6e-5 chance per comparison) is the tolerance, plus 1e-12 where the draws have no spread.
    for (bool discrete : {false, true}) {
        std::vector<double> proxy, value;
        make_samples(20, discrete ? 5 : 4, discrete, proxy, value);
        for (int64_t n : {1, 2, 3, 7, 13, 20}) {
            const double estimate = best_of_n_estimate(proxy, value, n);
            const MonteCarlo mc = monte_carlo(proxy, value, n, 200000, 100 + n);
            EXPECT_NEAR(estimate, mc.mean, 4 * mc.standard_error + 1e-12)
                << "n = " << n << (discrete ? " (ties)" : "") << ", standard error " << mc.standard_error;
        }
    }
}

TEST(BestOfN, ClosedForms) {
    std::vector<double> proxy, value;
    make_samples(50, 8, false, proxy, value);
    const double mean = std::accumulate(value.begin(), value.end(), 0.0) / 50;
    EXPECT_NEAR(best_of_n_estimate(proxy, value, 1), mean, 1e-15);
    const size_t top = std::max_element(proxy.begin(), proxy.end()) - proxy.begin();
    EXPECT_NEAR(best_of_n_estimate(proxy, value, 50), value[top], 1e-15);
    // Sorted by proxy 3 > 2 > 1, n = 2: weights C(2,1)/C(3,2) = 2/3, C(1,1)/C(3,2) = 1/3, 0.
    EXPECT_NEAR(best_of_n_estimate({2, 3, 1}, {10, 4, 100}, 2), (2 * 4 + 10) / 3.0, 1e-14);
}

TEST(BestOfN, TiesAreAveragedAsUnderRandomTieBreaking) {
    // Two tied best at n = N: either is kept with probability 1/2.
    EXPECT_DOUBLE_EQ(best_of_n_estimate({5, 5, 1}, {0, 1, 7}, 3), 0.5);
    // All tied: every ranking is equally likely, so the estimate is the mean for every n.
    for (int64_t n = 1; n <= 4; ++n) EXPECT_NEAR(best_of_n_estimate({2, 2, 2, 2}, {1, 2, 3, 6}, n), 3.0, 1e-15);
    // proxy 3, 3, 1 with values a, b, c and n = 2: positions 1–2 (weights 2/3, 1/3) take (a + b)/2, position 3 has
    // weight 0: (a + b)/2. Enumerating the 3 subsets: {a,b} → (a+b)/2, {a,c} → a, {b,c} → b: mean (a+b)/2.
    EXPECT_NEAR(best_of_n_estimate({3, 3, 1}, {2, 8, 100}, 2), 5.0, 1e-15);
    // The estimate does not depend on the input order.
    std::vector<double> proxy, value;
    make_samples(30, 21, true, proxy, value);
    std::vector<size_t> perm(30);
    std::iota(perm.begin(), perm.end(), size_t{0});
    std::reverse(perm.begin(), perm.end());
    std::vector<double> p2, v2;
    for (size_t i : perm) p2.push_back(proxy[i]), v2.push_back(value[i]);
    for (int64_t n : {1, 4, 17, 30})
        EXPECT_NEAR(best_of_n_estimate(proxy, value, n), best_of_n_estimate(p2, v2, n), 1e-14) << n;
}

TEST(BestOfN, WeightsAreSafeUpTo1024Samples) {
    // Against log-gamma (whose logs carry ~1e-13 absolute error at these sizes, hence 1e-10 relative).
    const int64_t N = 1024;
    for (int64_t n : {1, 2, 16, 100, 512, 1000, 1024}) {
        const std::vector<double> w = best_of_n_weights(N, n);
        EXPECT_NEAR(std::accumulate(w.begin(), w.end(), 0.0), 1.0, 1e-12) << n;
        const double log_total = std::lgamma(N + 1.0) - std::lgamma(n + 1.0) - std::lgamma(N - n + 1.0);
        for (int64_t k = 1; k <= N; ++k) {
            const double got = w[static_cast<size_t>(k - 1)];
            if (N - k < n - 1) {
                ASSERT_EQ(got, 0.0) << "n " << n << " k " << k;
                continue;
            }
            const double lw = std::lgamma(N - k + 1.0) - std::lgamma(static_cast<double>(n)) -
                              std::lgamma(N - k - n + 2.0) - log_total;
            if (lw < -700) continue;  // below double's normal range: both are ~0
            ASSERT_NEAR(got, std::exp(lw), 1e-10 * std::exp(lw)) << "n " << n << " k " << k;
        }
    }
}

TEST(BestOfN, BadInput) {
    EXPECT_NE(error_of([] {
                  best_of_n_estimate({1, 2}, {1}, 1);
              }).find("proxy has 2 samples but value has 1"),
              std::string::npos);
    EXPECT_NE(error_of([] { best_of_n_estimate({1, 2}, {1, 2}, 3); }).find("n = 3 with N = 2"), std::string::npos);
    EXPECT_NE(error_of([] { best_of_n_estimate({1, 2}, {1, 2}, 0); }).find("n = 0"), std::string::npos);
    EXPECT_NE(error_of([] {
                  best_of_n_estimate({1, NAN}, {1, 2}, 1);
              }).find("proxy[1] is not finite"),
              std::string::npos);
}

TEST(BestOfN, KlFormula) {
    EXPECT_EQ(kl_best_of_n(1), 0.0);
    EXPECT_NEAR(kl_best_of_n(2), std::log(2.0) - 0.5, 1e-16);
    EXPECT_NEAR(kl_best_of_n(1024), std::log(1024.0) - 1023.0 / 1024.0, 1e-15);
    for (int64_t n = 1; n < 200; ++n) EXPECT_LT(kl_best_of_n(n), kl_best_of_n(n + 1));
    EXPECT_NE(error_of([] { kl_best_of_n(0); }).find("at least 1; got 0"), std::string::npos);
}

// ---- the fits ---------------------------------------------------------------------------------------------

std::vector<double> grid(double from, double step, int count) {
    std::vector<double> d;
    for (int i = 0; i < count; ++i) d.push_back(from + step * i);
    return d;
}

double bon(double a, double b, double d) { return d * (a - b * d); }
double rl(double a, double b, double d) { return d * (a - b * std::log(d)); }

TEST(OveroptFit, NoiselessDataGiveAlphaBetaExactly) {
    const std::vector<double> d = grid(0.0, 0.25, 17);  // 0 .. 4, the d = 0 point is left out
    std::vector<double> r;
    for (double x : d) r.push_back(bon(0.8, 0.3, x));
    const OveroptFit f = fit_best_of_n(d, r);
    EXPECT_NEAR(f.alpha, 0.8, 1e-12);
    EXPECT_NEAR(f.beta, 0.3, 1e-12);
    EXPECT_EQ(f.points, 16);
    EXPECT_TRUE(f.has_peak);
    EXPECT_NEAR(f.d_star, 0.8 / 0.6, 1e-12);
    EXPECT_LT(f.rmse, 1e-14);
    const json j = fit_json(f);
    EXPECT_NEAR(j.at("kl_star").get<double>(), (0.8 / 0.6) * (0.8 / 0.6), 1e-11);
    EXPECT_EQ(j.at("points"), 16);

    const std::vector<double> e = grid(0.1, 0.2, 25);  // 0.1 .. 4.9
    std::vector<double> s;
    for (double x : e) s.push_back(rl(0.5, 0.2, x));
    const OveroptFit g = fit_rl(e, s);
    EXPECT_NEAR(g.alpha, 0.5, 1e-12);
    EXPECT_NEAR(g.beta, 0.2, 1e-12);
    EXPECT_TRUE(g.has_peak);
    EXPECT_NEAR(g.d_star, std::exp(0.5 / 0.2 - 1.0), 1e-11);
    // d* is the maximum of the fitted curve (its derivative changes sign there).
    EXPECT_GT(rl(g.alpha, g.beta, g.d_star), rl(g.alpha, g.beta, g.d_star * 1.001));
    EXPECT_GT(rl(g.alpha, g.beta, g.d_star), rl(g.alpha, g.beta, g.d_star / 1.001));
}

TEST(OveroptFit, NoPeak) {
    const std::vector<double> d = grid(0.5, 0.5, 8);
    std::vector<double> up, down;
    for (double x : d) up.push_back(bon(0.2, -0.1, x)), down.push_back(bon(-0.2, 0.1, x));
    const OveroptFit a = fit_best_of_n(d, up);  // β < 0: rising ever faster
    EXPECT_NEAR(a.beta, -0.1, 1e-12);
    EXPECT_FALSE(a.has_peak);
    EXPECT_TRUE(std::isnan(a.d_star));
    EXPECT_TRUE(fit_json(a).at("d_star").is_null());
    const OveroptFit b = fit_best_of_n(d, down);  // α < 0: falling from the start, the "peak" would be at d < 0
    EXPECT_NEAR(b.alpha, -0.2, 1e-12);
    EXPECT_FALSE(b.has_peak);
    std::vector<double> rl_up;
    for (double x : d) rl_up.push_back(rl(0.3, -0.05, x));
    EXPECT_FALSE(fit_rl(d, rl_up).has_peak);
}

// The ordinary least-squares standard errors σ·sqrt(diag((XᵀX)⁻¹)) for columns (d, x2), by a 2×2 inverse.
std::pair<double, double> standard_errors(const std::vector<double>& d, const std::vector<double>& x2, double sigma) {
    double a = 0, b = 0, c = 0;
    for (size_t i = 0; i < d.size(); ++i) a += d[i] * d[i], b += d[i] * x2[i], c += x2[i] * x2[i];
    const double det = a * c - b * b;
    return {sigma * std::sqrt(c / det), sigma * std::sqrt(a / det)};
}

TEST(OveroptFit, NoisyDataRecoverAlphaBetaWithinFourStandardErrors) {
    // Gaussian noise σ = 0.02 on 40 points: the estimates are unbiased with the OLS covariance
    // σ²(XᵀX)⁻¹; each is checked within 4 of its standard errors (a 6e-5 chance to fail per check for
    // a correct fit; the seeds are fixed so the test is deterministic). rmse² = SSE/40 with
    // SSE/σ² ~ χ²(38): rmse/σ ≈ sqrt(38/40) with a standard deviation ≈ sqrt(76)/38/2 = 11%;
    // ±0.45 is 4 of them.
    const double sigma = 0.02;
    const std::vector<double> d = grid(0.1, 0.1, 40);
    for (uint64_t seed : {1, 2, 3}) {
        Philox rng(seed);
        std::vector<double> r1, r2, c1, c2;
        for (double x : d) {
            r1.push_back(bon(0.8, 0.3, x) + sigma * rng.normal());
            r2.push_back(rl(0.5, 0.2, x) + sigma * rng.normal());
            c1.push_back(-x * x);
            c2.push_back(-x * std::log(x));
        }
        const OveroptFit f = fit_best_of_n(d, r1), g = fit_rl(d, r2);
        const auto [sa, sb] = standard_errors(d, c1, sigma);
        const auto [ta, tb] = standard_errors(d, c2, sigma);
        EXPECT_NEAR(f.alpha, 0.8, 4 * sa) << "se " << sa;
        EXPECT_NEAR(f.beta, 0.3, 4 * sb) << "se " << sb;
        EXPECT_NEAR(g.alpha, 0.5, 4 * ta) << "se " << ta;
        EXPECT_NEAR(g.beta, 0.2, 4 * tb) << "se " << tb;
        EXPECT_NEAR(f.rmse / sigma, std::sqrt(38.0 / 40.0), 0.45);
        EXPECT_NEAR(g.rmse / sigma, std::sqrt(38.0 / 40.0), 0.45);
        EXPECT_GT(std::fabs(f.alpha - 0.8) + std::fabs(g.beta - 0.2), 0.0);  // the noise did move them
    }
}

TEST(OveroptFit, TooFewPointsOrBadInputAreErrors) {
    EXPECT_NE(error_of([] {
                  fit_best_of_n({0, 0, 1}, {0, 0, 0.5});
              })
                  .find("best-of-n fit r = d(alpha - beta d): needs at least 2 points with distinct d > 0; got 3 "
                        "points, 1 with d > 0, 1 distinct"),
              std::string::npos);
    EXPECT_NE(error_of([] {
                  fit_rl({2, 2, 2}, {1, 1, 1});
              }).find("RL fit r = d(alpha - beta log d): needs at least 2"),
              std::string::npos);
    EXPECT_NE(error_of([] { fit_rl({1, 2}, {1}); }).find("d has 2 points but r has 1"), std::string::npos);
    EXPECT_NE(error_of([] { fit_rl({1, -2}, {1, 1}); }).find("d[1] = -2 is negative"), std::string::npos);
    EXPECT_NE(error_of([] { fit_best_of_n({1, 2}, {1, NAN}); }).find("r[1] is not finite"), std::string::npos);
}

}  // namespace
}  // namespace ppolab
