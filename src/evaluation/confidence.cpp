// confidence.cpp — the hierarchical percentile bootstrap (see confidence.h).
#include "evaluation/confidence.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace ppolab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// splitmix64 (Steele, Lea & Flood 2014), the exact update documented in confidence.h.
class SplitMix64 {
public:
    explicit SplitMix64(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        state_ += 0x9E3779B97F4A7C15ULL;
        uint64_t z = state_;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    int64_t index(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

private:
    uint64_t state_;
};

void check_design(int64_t R, int64_t C) {
    if (R < 1 || C < 1) fail("bootstrap: the design must have at least 1 replicate and 1 context; got ", R, " × ", C);
}

// One resample drawn from `rng` in the documented order.
Resample draw_resample(SplitMix64& rng, int64_t R, int64_t C) {
    Resample s;
    s.replicates.resize(static_cast<size_t>(R), 0);
    if (R > 1)
        for (auto& r : s.replicates) r = rng.index(R);
    s.contexts.assign(static_cast<size_t>(R), std::vector<int64_t>(static_cast<size_t>(C)));
    for (auto& pick : s.contexts)
        for (auto& c : pick) c = rng.index(C);
    return s;
}

// The interval of one component from the identity value and the resampled values.
Interval component_interval(double mean, std::vector<double> values, int64_t R, int64_t C, double level) {
    values.erase(std::remove_if(values.begin(), values.end(), [](double x) { return !std::isfinite(x); }),
                 values.end());
    Interval out;
    out.mean = mean;
    out.replicates = R;
    out.contexts = C;
    out.level = level;
    out.resamples = static_cast<int64_t>(values.size());
    if (values.empty()) {
        out.low = out.high = kNaN;
        return out;
    }
    out.low = percentile_linear(values, (1.0 - level) / 2.0);
    out.high = percentile_linear(std::move(values), (1.0 + level) / 2.0);
    return out;
}

}  // namespace

json interval_json(const Interval& i) {
    auto number = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
    return json{
        {"mean", number(i.mean)}, {"low", number(i.low)},     {"high", number(i.high)}, {"replicates", i.replicates},
        {"contexts", i.contexts}, {"resamples", i.resamples}, {"level", i.level}};
}

void check_settings(const BootstrapSettings& s) {
    if (s.resamples < 1) fail("bootstrap settings: 'resamples' must be at least 1; got ", s.resamples);
    if (!(s.level > 0.0 && s.level < 1.0)) fail("bootstrap settings: 'level' must be in (0, 1); got ", s.level);
}

void check_clustered(const ClusteredValues& v, const std::string& what) {
    if (v.empty()) fail(what, ": expected at least 1 replicate; got none");
    const size_t C = v.front().size();
    if (C == 0) fail(what, ": replicate 0 has no contexts; expected at least 1");
    for (size_t r = 0; r < v.size(); ++r) {
        if (v[r].size() != C)
            fail(what, ": every replicate must have the same contexts; replicate ", r, " has ", v[r].size(),
                 " contexts, replicate 0 has ", C);
        for (size_t c = 0; c < C; ++c)
            if (!std::isfinite(v[r][c]))
                fail(what, ": replicate ", r, " context ", c, " is not finite (", v[r][c], ")");
    }
}

double percentile_linear(std::vector<double> x, double p) {
    if (x.empty()) fail("percentile: no values");
    if (!(p >= 0.0 && p <= 1.0)) fail("percentile: the fraction must be in [0, 1]; got ", p);
    std::sort(x.begin(), x.end());
    const double h = static_cast<double>(x.size() - 1) * p;
    const auto lo = static_cast<size_t>(std::floor(h));
    if (lo + 1 >= x.size()) return x.back();
    return x[lo] + (h - static_cast<double>(lo)) * (x[lo + 1] - x[lo]);
}

Resample identity_resample(int64_t R, int64_t C) {
    check_design(R, C);
    Resample s;
    for (int64_t r = 0; r < R; ++r) s.replicates.push_back(r);
    std::vector<int64_t> all(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) all[static_cast<size_t>(c)] = c;
    s.contexts.assign(static_cast<size_t>(R), all);
    return s;
}

std::vector<Resample> hierarchical_resamples(int64_t R, int64_t C, const BootstrapSettings& settings) {
    check_design(R, C);
    check_settings(settings);
    SplitMix64 rng(settings.seed);
    std::vector<Resample> out;
    out.reserve(static_cast<size_t>(settings.resamples));
    for (int64_t b = 0; b < settings.resamples; ++b) out.push_back(draw_resample(rng, R, C));
    return out;
}

std::vector<Interval> bootstrap(int64_t R, int64_t C, const ResampleStatistic& statistic,
                                const BootstrapSettings& settings) {
    check_design(R, C);
    check_settings(settings);
    const std::vector<double> original = statistic(identity_resample(R, C));
    const size_t K = original.size();
    std::vector<std::vector<double>> values(K);  // (K, B)
    SplitMix64 rng(settings.seed);               // the same stream as hierarchical_resamples, drawn lazily
    for (int64_t b = 0; b < settings.resamples; ++b) {
        const std::vector<double> s = statistic(draw_resample(rng, R, C));
        if (s.size() != K)
            fail("bootstrap: the statistic returned ", s.size(), " values for resample ", b, "; expected ", K,
                 " (as on the original data)");
        for (size_t k = 0; k < K; ++k) values[k].push_back(s[k]);
    }
    std::vector<Interval> out;
    for (size_t k = 0; k < K; ++k)
        out.push_back(component_interval(original[k], std::move(values[k]), R, C, settings.level));
    return out;
}

double resample_mean(const ClusteredValues& v, const Resample& s) {
    double total = 0.0;
    for (size_t i = 0; i < s.replicates.size(); ++i) {
        const std::vector<double>& row = v[static_cast<size_t>(s.replicates[i])];
        double sum = 0.0;
        for (int64_t c : s.contexts[i]) sum += row[static_cast<size_t>(c)];
        total += sum / static_cast<double>(s.contexts[i].size());
    }
    return total / static_cast<double>(s.replicates.size());
}

Interval bootstrap_mean(const ClusteredValues& v, const BootstrapSettings& settings) {
    check_clustered(v, "bootstrap_mean");
    const auto R = static_cast<int64_t>(v.size());
    const auto C = static_cast<int64_t>(v.front().size());
    return bootstrap(
               R, C, [&](const Resample& s) { return std::vector<double>{resample_mean(v, s)}; }, settings)
        .front();
}

Interval bootstrap_paired_difference(const ClusteredValues& a, const ClusteredValues& b,
                                     const BootstrapSettings& settings) {
    check_clustered(a, "paired difference (a)");
    check_clustered(b, "paired difference (b)");
    if (a.size() != b.size() || a.front().size() != b.front().size())
        fail("paired difference: a has ", a.size(), " replicates × ", a.front().size(), " contexts but b has ",
             b.size(), " × ", b.front().size(), "; the pairs must be the same prompts of the same replicates");
    ClusteredValues d = a;
    for (size_t r = 0; r < a.size(); ++r)
        for (size_t c = 0; c < a[r].size(); ++c) d[r][c] = a[r][c] - b[r][c];
    return bootstrap_mean(d, settings);
}

}  // namespace ppolab
