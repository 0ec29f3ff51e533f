// test_confidence.cpp — the hierarchical bootstrap (evaluation/confidence.h)
// against closed forms, a direct single-level bootstrap, splitmix64's
// published test vector, and the verdict (evaluation/verdict.h) on
// constructed intervals for all nine combinations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "evaluation/confidence.h"
#include "evaluation/verdict.h"
#include "support/test_support.h"
#include "util/rng.h"

namespace ppolab {
namespace {

using test::error_of;

// An R × C design of standard normals plus a per-replicate offset (Philox, not the bootstrap's RNG).
ClusteredValues normal_design(int64_t R, int64_t C, double between, uint64_t seed) {
    Philox rng(seed);
    ClusteredValues v(static_cast<size_t>(R));
    for (auto& row : v) {
        const double offset = between * rng.normal();
        for (int64_t c = 0; c < C; ++c) row.push_back(offset + rng.normal());
    }
    return v;
}

// An independent splitmix64 (the update in confidence.h, written again here).
uint64_t splitmix_next(uint64_t& state) {
    state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double variance(const std::vector<double>& x) {
    double m = 0, s = 0;
    for (double v : x) m += v;
    m /= static_cast<double>(x.size());
    for (double v : x) s += (v - m) * (v - m);
    return s / static_cast<double>(x.size());
}

TEST(Confidence, SplitMix64MatchesItsPublishedTestVector) {
    // Vigna's splitmix64.c with seed 1234567 gives 6457827717110365317, 3203168211198807973, 9817491932198370423.
    BootstrapSettings s{1, 0.95, 1234567};
    const Resample r = hierarchical_resamples(1, 1000, s).front();
    EXPECT_EQ(r.replicates, std::vector<int64_t>{0});  // R = 1: no replicate draw
    EXPECT_EQ(r.contexts[0][0], 317);
    EXPECT_EQ(r.contexts[0][1], 973);
    EXPECT_EQ(r.contexts[0][2], 423);
    // With R > 1 the replicate draws come first: 6457827717110365317 % 7 etc.
    const Resample h = hierarchical_resamples(7, 1000, s).front();
    EXPECT_EQ(h.replicates[0], static_cast<int64_t>(6457827717110365317ULL % 7));
    EXPECT_EQ(h.replicates[1], static_cast<int64_t>(3203168211198807973ULL % 7));
    EXPECT_EQ(h.replicates[2], static_cast<int64_t>(9817491932198370423ULL % 7));
}

TEST(Confidence, EqualValuesGiveAZeroWidthInterval) {
    for (double x : {0.375, 0.37, -2.5}) {
        const ClusteredValues v(5, std::vector<double>(20, x));
        const Interval i = bootstrap_mean(v, {500, 0.95, 7});
        EXPECT_EQ(i.low, i.high) << x;
        EXPECT_EQ(i.mean, i.low) << x;
        EXPECT_NEAR(i.mean, x, 1e-15);
        EXPECT_EQ(i.replicates, 5);
        EXPECT_EQ(i.contexts, 20);
        EXPECT_EQ(i.resamples, 500);
        EXPECT_EQ(i.level, 0.95);
    }
    EXPECT_EQ(bootstrap_mean({{0.375, 0.375}}, {}).mean, 0.375);  // exact in binary
}

TEST(Confidence, ReplicateLevelClosedFormWithTwoReplicates) {
    // Values constant within each replicate (0 and 1): a resample's mean is the mean of 2 picks from {0, 1},
    // i.e. 0, 1/2, 1 with probabilities 1/4, 1/2, 1/4; the 2.5% and 97.5% percentiles are therefore 0 and 1.
    const ClusteredValues v = {std::vector<double>(10, 0.0), std::vector<double>(10, 1.0)};
    const Interval i = bootstrap_mean(v, {4000, 0.95, 3});
    EXPECT_EQ(i.mean, 0.5);
    EXPECT_EQ(i.low, 0.0);
    EXPECT_EQ(i.high, 1.0);
    int64_t halves = 0;
    for (const Resample& s : hierarchical_resamples(2, 10, {4000, 0.95, 3})) halves += resample_mean(v, s) == 0.5;
    // Binomial(4000, 1/2): sd = 31.6; 4 sd = 126.
    EXPECT_NEAR(static_cast<double>(halves), 2000.0, 126.0);
}

TEST(Confidence, BootstrapVarianceMatchesTheTwoStageClosedForm) {
    // The statistic is the mean of R i.i.d. picks m_i, each the mean of C draws from a uniformly picked replicate:
    // Var = (Var_r(μ_r) + E_r[σ_r²] / C) / R with plug-in (1/n) variances. With B = 20000 resamples the variance
    // estimate has a relative standard error ≈ sqrt(2/B) = 1%; 5% is 5 standard errors.
    const int64_t R = 4, C = 30;
    const ClusteredValues v = normal_design(R, C, 0.7, 11);
    std::vector<double> mu;
    double within = 0;
    for (const auto& row : v) {
        double m = 0;
        for (double x : row) m += x;
        mu.push_back(m / C);
        within += variance(row) / static_cast<double>(R);
    }
    const double expected = (variance(mu) + within / C) / R;
    std::vector<double> stats;
    for (const Resample& s : hierarchical_resamples(R, C, {20000, 0.95, 5})) stats.push_back(resample_mean(v, s));
    EXPECT_NEAR(variance(stats) / expected, 1.0, 0.05) << "expected variance " << expected;
}

TEST(Confidence, OneReplicateIsADirectSingleLevelBootstrap) {
    const int64_t C = 37, B = 999;
    const ClusteredValues v = normal_design(1, C, 0.0, 2);
    const BootstrapSettings settings{B, 0.9, 424242};
    // The direct bootstrap: B × C draws of one splitmix64 stream, index = draw % C, no replicate draw.
    uint64_t state = settings.seed;
    std::vector<double> means;
    for (int64_t b = 0; b < B; ++b) {
        double sum = 0;
        for (int64_t c = 0; c < C; ++c) sum += v[0][splitmix_next(state) % C];
        means.push_back(sum / C);
    }
    std::sort(means.begin(), means.end());
    auto linear = [&](double p) {  // numpy's 'linear' percentile
        const double h = (B - 1) * p;
        const auto lo = static_cast<size_t>(h);
        return means[lo] + (h - static_cast<double>(lo)) * (means[lo + 1] - means[lo]);
    };
    const Interval i = bootstrap_mean(v, settings);
    double mean = 0;
    for (double x : v[0]) mean += x;
    EXPECT_NEAR(i.mean, mean / C, 1e-15);
    EXPECT_NEAR(i.low, linear(0.05), 1e-15);
    EXPECT_NEAR(i.high, linear(0.95), 1e-15);
    EXPECT_LT(i.low, i.mean);
    EXPECT_GT(i.high, i.mean);
    for (const Resample& s : hierarchical_resamples(1, C, settings)) ASSERT_EQ(s.replicates, std::vector<int64_t>{0});
}

TEST(Confidence, PairedDifferenceOfIdenticalInputsIsExactlyZero) {
    const ClusteredValues a = normal_design(3, 25, 1.0, 9);
    const Interval d = bootstrap_paired_difference(a, a, {300, 0.95, 1});
    EXPECT_EQ(d.mean, 0.0);
    EXPECT_EQ(d.low, 0.0);
    EXPECT_EQ(d.high, 0.0);
    EXPECT_EQ(d.replicates, 3);
    EXPECT_EQ(d.contexts, 25);
}

TEST(Confidence, PairedDifferenceIsTheBootstrapOfTheDifferences) {
    const ClusteredValues a = normal_design(3, 25, 1.0, 9), b = normal_design(3, 25, 1.0, 10);
    ClusteredValues d = a;
    for (size_t r = 0; r < a.size(); ++r)
        for (size_t c = 0; c < a[r].size(); ++c) d[r][c] = a[r][c] - b[r][c];
    const Interval paired = bootstrap_paired_difference(a, b, {300, 0.95, 1});
    const Interval direct = bootstrap_mean(d, {300, 0.95, 1});
    EXPECT_EQ(paired.mean, direct.mean);
    EXPECT_EQ(paired.low, direct.low);
    EXPECT_EQ(paired.high, direct.high);
    // A shift of b by a constant moves the whole interval by exactly that constant (to rounding).
    ClusteredValues shifted = a;
    for (auto& row : shifted)
        for (double& x : row) x += 0.25;
    const Interval s = bootstrap_paired_difference(shifted, a, {300, 0.95, 1});
    EXPECT_NEAR(s.mean, 0.25, 1e-14);
    EXPECT_NEAR(s.low, 0.25, 1e-14);
    EXPECT_NEAR(s.high, 0.25, 1e-14);
}

TEST(Confidence, ResamplesAreDeterministicInTheSeed) {
    const auto a = hierarchical_resamples(5, 180, {50, 0.95, 77});
    const auto b = hierarchical_resamples(5, 180, {50, 0.95, 77});
    const auto c = hierarchical_resamples(5, 180, {50, 0.95, 78});
    ASSERT_EQ(a.size(), 50u);
    bool same = true, differs = false;
    for (size_t i = 0; i < a.size(); ++i) {
        same = same && a[i].replicates == b[i].replicates && a[i].contexts == b[i].contexts;
        differs = differs || a[i].contexts != c[i].contexts;
        ASSERT_EQ(a[i].contexts.size(), 5u);
        for (const auto& pick : a[i].contexts) {
            ASSERT_EQ(pick.size(), 180u);
            for (int64_t x : pick) ASSERT_TRUE(x >= 0 && x < 180);
        }
        for (int64_t r : a[i].replicates) ASSERT_TRUE(r >= 0 && r < 5);
    }
    EXPECT_TRUE(same);
    EXPECT_TRUE(differs);
    // bootstrap() draws the same stream lazily: its resample b is hierarchical_resamples' b.
    size_t calls = 0;
    bool lazy_same = true;
    bootstrap(5, 180,
              [&](const Resample& s) {
                  if (calls > 0) lazy_same = lazy_same && s.contexts == a[calls - 1].contexts;
                  ++calls;
                  return std::vector<double>{0.0};
              },
              {50, 0.95, 77});
    EXPECT_EQ(calls, 51u);  // the identity resample, then 50
    EXPECT_TRUE(lazy_same);
}

TEST(Confidence, NonFiniteStatisticsAreDroppedPerComponent) {
    const auto resamples = hierarchical_resamples(2, 10, {400, 0.95, 5});
    auto stat = [](const Resample& s) {
        const double first = static_cast<double>(s.contexts[0][0]);
        return std::vector<double>{first, first < 5 ? std::numeric_limits<double>::quiet_NaN() : first,
                                   std::numeric_limits<double>::infinity()};
    };
    const std::vector<Interval> out = bootstrap(2, 10, stat, {400, 0.95, 5});
    ASSERT_EQ(out.size(), 3u);
    int64_t kept = 0;
    for (const Resample& s : resamples) kept += s.contexts[0][0] >= 5;
    EXPECT_EQ(out[0].resamples, 400);
    EXPECT_EQ(out[1].resamples, kept);
    EXPECT_GT(kept, 100);
    EXPECT_GE(out[1].low, 5.0);
    EXPECT_EQ(out[2].resamples, 0);
    EXPECT_TRUE(std::isnan(out[2].low) && std::isnan(out[2].high));
    const json j = interval_json(out[2]);
    EXPECT_TRUE(j.at("low").is_null() && j.at("high").is_null() && j.at("mean").is_null());
    EXPECT_EQ(interval_json(out[0]).at("resamples"), 400);
    EXPECT_EQ(interval_json(out[0]).at("contexts"), 10);
}

TEST(Confidence, BadInputIsAnErrorSayingWhatItFound) {
    EXPECT_NE(error_of([] {
                  bootstrap_mean({{1, 2, 3}, {1, 2, 3}, {1, 2}}, {});
              }).find("replicate 2 has 2 contexts, replicate 0 has 3"),
              std::string::npos);
    EXPECT_NE(error_of([] { bootstrap_mean({}, {}); }).find("at least 1 replicate"), std::string::npos);
    EXPECT_NE(error_of([] { bootstrap_mean({{}}, {}); }).find("no contexts"), std::string::npos);
    EXPECT_NE(error_of([] {
                  bootstrap_mean({{1, std::nan("")}}, {});
              }).find("replicate 0 context 1 is not finite"),
              std::string::npos);
    EXPECT_NE(error_of([] {
                  bootstrap_paired_difference({{1, 2}}, {{1, 2}, {3, 4}}, {});
              }).find("a has 1 replicates × 2 contexts but b has 2 × 2"),
              std::string::npos);
    EXPECT_NE(error_of([] {
                  bootstrap_mean({{1}}, {0, 0.95, 1});
              }).find("'resamples' must be at least 1; got 0"),
              std::string::npos);
    EXPECT_NE(error_of([] {
                  bootstrap_mean({{1}}, {10, 1.0, 1});
              }).find("'level' must be in (0, 1); got 1"),
              std::string::npos);
    EXPECT_NE(error_of([] { hierarchical_resamples(0, 3, {}); }).find("got 0 × 3"), std::string::npos);
    EXPECT_NE(error_of([] {
                  int64_t calls = 0;
                  bootstrap(2, 2, [&](const Resample&) { return std::vector<double>(calls++ == 0 ? 2 : 1); }, {});
              }).find("returned 1 values for resample 0; expected 2"),
              std::string::npos);
}

TEST(Confidence, PercentileIsNumpysLinearRule) {
    // numpy.percentile([4, 1, 3, 2], q) = 1 + 3q/100 for the sorted [1, 2, 3, 4].
    EXPECT_DOUBLE_EQ(percentile_linear({4, 1, 3, 2}, 0.025), 1.075);
    EXPECT_DOUBLE_EQ(percentile_linear({4, 1, 3, 2}, 0.975), 3.925);
    EXPECT_EQ(percentile_linear({4, 1, 3, 2}, 0.0), 1.0);
    EXPECT_EQ(percentile_linear({4, 1, 3, 2}, 1.0), 4.0);
    EXPECT_EQ(percentile_linear({7}, 0.3), 7.0);
}

// ---- the verdict -------------------------------------------------------------------------------------------

Interval interval(double mean, double low, double high, int64_t R = 5, int64_t C = 180) {
    Interval i;
    i.mean = mean;
    i.low = low;
    i.high = high;
    i.replicates = R;
    i.contexts = C;
    i.resamples = 2000;
    i.level = 0.95;
    return i;
}

TEST(Verdict, TheExploitedSentence) {
    const Verdict v = study_verdict(interval(-0.14, -0.22, -0.06), interval(1.8, 1.2, 2.4), "test");
    EXPECT_EQ(v.code, "exploited");
    EXPECT_EQ(v.gold, "down");
    EXPECT_EQ(v.proxy, "up");
    EXPECT_EQ(v.text,
              "PPO lowered rubric success on test by 14 points [\u221222, \u22126] while the judge's score rose by "
              "1.8 [1.2, 2.4] (5 replicates \u00d7 180 prompts, 95% intervals): the policy exploited the judge");
    const json j = verdict_json(v);
    EXPECT_EQ(j.at("code"), "exploited");
    EXPECT_EQ(j.at("text"), v.text);
}

TEST(Verdict, AllNineCombinations) {
    const Interval gold_down = interval(-0.10, -0.18, -0.02), gold_flat = interval(0.02, -0.04, 0.08),
                   gold_up = interval(0.09, 0.03, 0.15);
    const Interval proxy_down = interval(-0.5, -0.9, -0.1), proxy_flat = interval(0.05, -0.1, 0.2),
                   proxy_up = interval(0.034, 0.012, 0.056);
    struct Case {
        Interval g, p;
        const char* code;
        const char* fragment;
    };
    const std::vector<Case> cases = {
        {gold_up, proxy_up, "improved",
         "raised rubric success on probe by 9 points [3, 15] and the judge's score "
         "rose by 0.034 [0.012, 0.056]"},
        {gold_up, proxy_flat, "improved_judge_flat",
         "while the judge's score changed by +0.05 [\u22120.10, 0.20], not distinguishable from noise"},
        {gold_up, proxy_down, "improved_judge_down", "while the judge's score fell by 0.50 [\u22120.90, \u22120.10]"},
        {gold_flat, proxy_up, "judge_gain_only",
         "changed rubric success on probe by +2 points [\u22124, 8], not distinguishable from noise, while"},
        {gold_flat, proxy_flat, "no_change", "no change distinguishable from noise"},
        {gold_flat, proxy_down, "judge_down_only", "the judge's own score fell and the rubric did not move"},
        {gold_down, proxy_up, "exploited", "lowered rubric success on probe by 10 points [\u221218, \u22122] while"},
        {gold_down, proxy_flat, "degraded_judge_flat", "without a distinguishable gain in the judge's score"},
        {gold_down, proxy_down, "degraded", "lowered rubric success on probe by 10 points [\u221218, \u22122] and"},
    };
    std::vector<std::string> codes;
    for (const Case& c : cases) {
        const Verdict v = study_verdict(c.g, c.p, "probe");
        EXPECT_EQ(v.code, c.code);
        EXPECT_NE(v.text.find(c.fragment), std::string::npos) << v.text;
        EXPECT_NE(v.text.find("(5 replicates \u00d7 180 prompts, 95% intervals)"), std::string::npos) << v.text;
        EXPECT_EQ(v.text.find('-'), std::string::npos) << "ASCII minus in: " << v.text;
        codes.push_back(v.code);
    }
    std::sort(codes.begin(), codes.end());
    EXPECT_EQ(std::unique(codes.begin(), codes.end()), codes.end()) << "the nine codes are distinct";
}

TEST(Verdict, BoundariesUnitsAndBadIntervals) {
    // An interval touching 0 holds it: flat.
    EXPECT_EQ(interval_direction(interval(-0.1, -0.2, 0.0), "x"), "flat");
    EXPECT_EQ(interval_direction(interval(0.1, 0.0, 0.2), "x"), "flat");
    // One replicate: the sentence says only prompt noise is in the interval; a rounded −0 prints as 0.
    const Verdict one =
        study_verdict(interval(-0.001, -0.004, 0.003, 1, 200), interval(0.0, -0.2, 0.2, 1, 200), "test");
    EXPECT_EQ(one.code, "no_change");
    EXPECT_NE(one.text.find("by 0 points [0, 0]"), std::string::npos) << one.text;
    EXPECT_NE(one.text.find("(1 replicate \u00d7 200 prompts, 95% intervals; one replicate: prompt noise only)"),
              std::string::npos)
        << one.text;
    // Different units are each named.
    const Verdict mixed = study_verdict(interval(0.1, 0.05, 0.15), interval(1, 0.5, 1.5, 5, 200), "all");
    EXPECT_NE(mixed.text.find("(rubric: 5 replicates \u00d7 180 prompts; judge: 5 replicates \u00d7 200 prompts"),
              std::string::npos)
        << mixed.text;
    EXPECT_NE(error_of([] {
                  study_verdict(interval(0, NAN, 1), interval(0, 0, 1), "test");
              }).find("rubric-success difference interval must have finite mean, low and high"),
              std::string::npos);
    EXPECT_NE(error_of([] {
                  study_verdict(interval(0, 0, 1), interval(0, 2, 1), "test");
              }).find("judge-score difference interval has low 2 above high 1"),
              std::string::npos);
}

}  // namespace
}  // namespace ppolab
