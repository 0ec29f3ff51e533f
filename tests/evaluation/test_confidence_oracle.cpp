// test_confidence_oracle.cpp — the study's statistics against an independent
// numpy re-implementation (tests/oracle/confidence_ref.py, run by
// $PPOLAB_PYTHON): this test computes intervals, resamples, best-of-n
// estimates and fits on fixed fixtures, writes them with the fixtures to one
// JSON file, and the script replays the splitmix64 stream (vectorised and
// sequentially), the two-stage resampling, numpy.percentile, a brute-force
// enumeration of all C(N, n) subsets and numpy.linalg.lstsq, and must agree
// to 1e-12. The script exits non-zero on any mismatch and when numpy is
// missing, which fails this test (never a skip).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "evaluation/confidence.h"
#include "evaluation/overoptimisation_math.h"
#include "support/test_support.h"
#include "util/rng.h"

namespace ppolab {
namespace {

// R × C values: a per-replicate offset (sd `between`) plus per-context noise (sd `within`) around `centre`.
ClusteredValues design(int64_t R, int64_t C, double centre, double between, double within, Philox& rng) {
    ClusteredValues v(static_cast<size_t>(R));
    for (auto& row : v) {
        const double offset = centre + between * rng.normal();
        for (int64_t c = 0; c < C; ++c) row.push_back(offset + within * rng.normal());
    }
    return v;
}

json settings_json(const BootstrapSettings& s) {
    return json{{"resamples", s.resamples}, {"level", s.level}, {"seed", s.seed}};
}

json resample_json(const Resample& s) { return json{{"replicates", s.replicates}, {"contexts", s.contexts}}; }

// The bootstrap cases: means, a paired difference, one replicate, and a best-of-n fit over 6 KL levels.
json bootstrap_cases(Philox& rng) {
    json out;
    out["A"] = design(5, 180, 0.4, 0.05, 0.45, rng);
    out["B"] = design(5, 180, 0.3, 0.05, 0.45, rng);
    out["C1"] = design(1, 200, 1.5, 0.0, 1.0, rng);
    const ClusteredValues A = out["A"], B = out["B"], C1 = out["C1"];
    const BootstrapSettings standard{}, other{777, 0.9, 7};
    json cases = json::array();
    for (const BootstrapSettings& s : {standard, other}) {
        cases.push_back({{"kind", "mean"},
                         {"a", "A"},
                         {"settings", settings_json(s)},
                         {"intervals", {interval_json(bootstrap_mean(A, s))}}});
        cases.push_back({{"kind", "paired"},
                         {"a", "A"},
                         {"b", "B"},
                         {"settings", settings_json(s)},
                         {"intervals", {interval_json(bootstrap_paired_difference(A, B, s))}}});
        cases.push_back({{"kind", "mean"},
                         {"a", "C1"},
                         {"settings", settings_json(s)},
                         {"intervals", {interval_json(bootstrap_mean(C1, s))}}});
    }
    // Gold at 6 KL levels on the same 4 × 60 prompts: r = d(0.15 − 0.05 d) plus noise, fitted per resample; a
    // resample whose fit has no peak gives d* = NaN and is dropped from d*'s percentiles.
    const std::vector<double> d = {0.5, 1.0, 1.5, 2.0, 2.5, 3.0};
    std::vector<ClusteredValues> levels;
    for (double x : d) levels.push_back(design(4, 60, x * (0.15 - 0.05 * x), 0.1, 1.0, rng));
    out["levels"] = levels;
    out["d_levels"] = d;
    const BootstrapSettings fit_settings{1500, 0.95, 99};
    auto statistic = [&](const Resample& s) {
        std::vector<double> r;
        for (const ClusteredValues& v : levels) r.push_back(resample_mean(v, s));
        const OveroptFit f = fit_best_of_n(d, r);
        return std::vector<double>{f.alpha, f.beta, f.d_star};
    };
    json intervals = json::array();
    for (const Interval& i : bootstrap(4, 60, statistic, fit_settings)) intervals.push_back(interval_json(i));
    cases.push_back({{"kind", "fit_best_of_n"}, {"settings", settings_json(fit_settings)}, {"intervals", intervals}});
    out["cases"] = cases;
    json head = json::array();
    const auto resamples = hierarchical_resamples(5, 180, standard);
    for (size_t b = 0; b < 3; ++b) head.push_back(resample_json(resamples[b]));
    head.push_back(resample_json(resamples.back()));
    out["resamples_head"] = {{"R", 5}, {"C", 180}, {"settings", settings_json(standard)}, {"first3_and_last", head}};
    return out;
}

json best_of_n_cases(Philox& rng) {
    json out = json::array();
    for (int64_t N : {1, 5, 9, 12}) {
        for (bool ties : {false, true}) {
            std::vector<double> proxy, value;
            for (int64_t i = 0; i < N; ++i) {
                proxy.push_back(ties ? static_cast<double>(rng.below(3)) : rng.normal());
                value.push_back(ties ? static_cast<double>(rng.below(2)) : rng.uniform());
            }
            std::vector<double> estimates;
            for (int64_t n = 1; n <= N; ++n) estimates.push_back(best_of_n_estimate(proxy, value, n));
            out.push_back({{"proxy", proxy}, {"value", value}, {"estimates", estimates}});
        }
    }
    return out;
}

json fit_cases(Philox& rng) {
    json out = json::array();
    for (int k = 0; k < 4; ++k) {
        std::vector<double> d = {0.0}, r = {0.0};  // a d = 0 point, which both fits leave out
        for (int i = 1; i <= 12; ++i) {
            const double x = 0.3 * i;
            d.push_back(x);
            r.push_back(x * (0.6 - 0.15 * x) + 0.05 * (k + 1) * rng.normal());
        }
        out.push_back({{"d", d}, {"r", r}, {"bon", fit_json(fit_best_of_n(d, r))}, {"rl", fit_json(fit_rl(d, r))}});
    }
    return out;
}

TEST(ConfidenceOracle, NumpyReplayAgreesTo1e12) {
    const char* python = std::getenv("PPOLAB_PYTHON");
    ASSERT_TRUE(python && *python)
        << "PPOLAB_PYTHON is not set: run this test through ctest (it names the interpreter)";
    Philox rng(20261201);
    json fixture = bootstrap_cases(rng);
    fixture["best_of_n"] = best_of_n_cases(rng);
    fixture["fits"] = fit_cases(rng);
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("ppolab_confidence_oracle_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "fixture.json") << fixture.dump();
    const std::filesystem::path script = test::source_dir() / "tests/oracle/confidence_ref.py";
    const test::Output o = test::run_shell("'" + std::string(python) + "' '" + script.string() + "' '" +
                                           (dir / "fixture.json").string() + "'");
    EXPECT_EQ(o.rc, 0) << o.out;
    EXPECT_NE(o.out.find("confidence oracle: all agree"), std::string::npos) << o.out;
    std::cout << o.out;
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ppolab
