// overoptimisation_math.cpp — best-of-n estimate, its KL, the two fits (see overoptimisation_math.h).
#include "evaluation/overoptimisation_math.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "util/canon_math.h"
#include "util/error.h"

namespace ppolab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void check_finite(const std::vector<double>& x, const char* fn, const char* name) {
    for (size_t i = 0; i < x.size(); ++i)
        if (!std::isfinite(x[i])) fail(fn, ": ", name, "[", i, "] is not finite (", x[i], ")");
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// Least squares r ≈ α·x1 + β·x2 by a two-column QR (Gram–Schmidt, once re-orthogonalised).
void least_squares_2(const std::vector<double>& x1, const std::vector<double>& x2, const std::vector<double>& r,
                     const char* fit, double& alpha, double& beta) {
    const double r11 = std::sqrt(dot(x1, x1));
    std::vector<double> q1(x1.size()), v = x2;
    for (size_t i = 0; i < x1.size(); ++i) q1[i] = x1[i] / r11;
    double r12 = 0.0;
    for (int pass = 0; pass < 2; ++pass) {
        const double c = dot(q1, v);
        for (size_t i = 0; i < v.size(); ++i) v[i] -= c * q1[i];
        r12 += c;
    }
    const double r22 = std::sqrt(dot(v, v));
    if (!(r22 > 1e-12 * std::sqrt(dot(x2, x2))))
        fail(fit, ": the least-squares system is singular (its two columns are parallel over ", x1.size(), " points)");
    const double y1 = dot(q1, r), y2 = dot(v, r) / r22;
    beta = y2 / r22;
    alpha = (y1 - r12 * beta) / r11;
}

// The informative points (d > 0) after the input checks; an Error naming the fit and the counts when too few.
void informative_points(const std::vector<double>& d, const std::vector<double>& r, const char* fit,
                        std::vector<double>& dk, std::vector<double>& rk) {
    if (d.size() != r.size()) fail(fit, ": d has ", d.size(), " points but r has ", r.size());
    check_finite(d, fit, "d");
    check_finite(r, fit, "r");
    for (size_t i = 0; i < d.size(); ++i) {
        if (d[i] < 0) fail(fit, ": d[", i, "] = ", d[i], " is negative; d is sqrt(KL) ≥ 0");
        if (d[i] > 0) {
            dk.push_back(d[i]);
            rk.push_back(r[i]);
        }
    }
    const size_t distinct = std::set<double>(dk.begin(), dk.end()).size();
    if (dk.size() < 2 || distinct < 2)
        fail(fit, ": needs at least 2 points with distinct d > 0; got ", d.size(), " points, ", dk.size(),
             " with d > 0, ", distinct, " distinct");
}

OveroptFit fit_two_columns(const std::vector<double>& d, const std::vector<double>& r, const char* fit, bool rl) {
    std::vector<double> dk, rk;
    informative_points(d, r, fit, dk, rk);
    std::vector<double> x2(dk.size());
    for (size_t i = 0; i < dk.size(); ++i) x2[i] = rl ? -dk[i] * canon_log(dk[i]) : -dk[i] * dk[i];
    OveroptFit f;
    least_squares_2(dk, x2, rk, fit, f.alpha, f.beta);
    f.points = static_cast<int64_t>(dk.size());
    double sse = 0.0;
    for (size_t i = 0; i < dk.size(); ++i) {
        const double e = rk[i] - (f.alpha * dk[i] + f.beta * x2[i]);
        sse += e * e;
    }
    f.rmse = std::sqrt(sse / static_cast<double>(dk.size()));
    f.has_peak = f.beta > 0 && (rl || f.alpha > 0);
    f.d_star = !f.has_peak ? kNaN : rl ? canon_exp(f.alpha / f.beta - 1.0) : f.alpha / (2.0 * f.beta);
    return f;
}

}  // namespace

std::vector<double> best_of_n_weights(int64_t N, int64_t n) {
    if (N < 1 || n < 1 || n > N) fail("best_of_n: n must be in 1..N; got n = ", n, " with N = ", N, " samples");
    std::vector<double> w(static_cast<size_t>(N), 0.0);
    w[0] = static_cast<double>(n) / static_cast<double>(N);
    for (int64_t k = 1; k < N; ++k)  // w_{k+1} = w_k (N − k − n + 1) / (N − k), zero once N − k < n − 1
        w[static_cast<size_t>(k)] =
            N - k - n + 1 <= 0
                ? 0.0
                : w[static_cast<size_t>(k - 1)] * static_cast<double>(N - k - n + 1) / static_cast<double>(N - k);
    return w;
}

double best_of_n_estimate(const std::vector<double>& proxy, const std::vector<double>& value, int64_t n) {
    if (proxy.size() != value.size())
        fail("best_of_n: proxy has ", proxy.size(), " samples but value has ", value.size());
    check_finite(proxy, "best_of_n", "proxy");
    check_finite(value, "best_of_n", "value");
    const auto N = static_cast<int64_t>(proxy.size());
    const std::vector<double> w = best_of_n_weights(N, n);
    std::vector<size_t> order(proxy.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return proxy[a] > proxy[b]; });
    double estimate = 0.0;
    for (size_t a = 0; a < order.size();) {  // one tie group, positions a..b−1
        size_t b = a;
        double sum_value = 0.0, sum_weight = 0.0;
        for (; b < order.size() && proxy[order[b]] == proxy[order[a]]; ++b) {
            sum_value += value[order[b]];
            sum_weight += w[b];
        }
        estimate += sum_weight * (sum_value / static_cast<double>(b - a));
        a = b;
    }
    return estimate;
}

double kl_best_of_n(int64_t n) {
    if (n < 1) fail("kl_best_of_n: n must be at least 1; got ", n);
    const auto x = static_cast<double>(n);
    return canon_log(x) - (x - 1.0) / x;
}

OveroptFit fit_best_of_n(const std::vector<double>& d, const std::vector<double>& r) {
    return fit_two_columns(d, r, "best-of-n fit r = d(alpha - beta d)", false);
}

OveroptFit fit_rl(const std::vector<double>& d, const std::vector<double>& r) {
    return fit_two_columns(d, r, "RL fit r = d(alpha - beta log d)", true);
}

json fit_json(const OveroptFit& f) {
    const json d_star = f.has_peak ? json(f.d_star) : json(nullptr);
    const json kl_star = f.has_peak ? json(f.d_star * f.d_star) : json(nullptr);
    return json{{"alpha", f.alpha},       {"beta", f.beta},     {"d_star", d_star}, {"kl_star", kl_star},
                {"has_peak", f.has_peak}, {"points", f.points}, {"rmse", f.rmse}};
}

}  // namespace ppolab
