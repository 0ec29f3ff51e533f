// test_canon_math.cpp — ppolab's own exp, log, log1p, sin, cos, pow and the
// float exp (util/canon_math.h) against independent references: glibc's
// long double functions (64-bit significands: their own error is ~2^-11 of a
// double ulp, so they stand in for the exact value), on seeded random points
// over each function's range and on the edge cases (±0, denormals, ±∞, NaN,
// the overflow and underflow thresholds).
//
// Errors are measured in ulps of the exact result rounded to the format
// (denormal results: in units of the least denormal). The bounds are the
// documented accuracy of each function (canon_math.h) with the reason noted
// at each test; a correctly rounded result has error ≤ 0.5 ulp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "util/canon_math.h"
#include "util/rng.h"

namespace {

using ppolab::canon_cos;
using ppolab::canon_exp;
using ppolab::canon_expf;
using ppolab::canon_log;
using ppolab::canon_log1p;
using ppolab::canon_pow;
using ppolab::canon_sin;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// |got − exact| in ulps of the exact value's format T (double or float).
template <typename T>
double ulp_error(T got, long double exact) {
    if (std::isnan(static_cast<double>(got)) || std::isnan(static_cast<double>(exact)))
        return got != got && exact != exact ? 0 : 1e300;
    if (std::isinf(static_cast<double>(got)) || std::isinf(static_cast<double>(exact)))
        return static_cast<long double>(got) == exact ? 0 : 1e300;
    const T rounded = static_cast<T>(exact);
    int e = 0;
    std::frexp(static_cast<double>(rounded == 0 ? std::numeric_limits<T>::min() : rounded), &e);
    // ulp of [2^(e−1), 2^e) is 2^(e − digits), never below the least denormal.
    const int digits = std::numeric_limits<T>::digits;
    const int min_exp = std::numeric_limits<T>::min_exponent;  // FLT/DBL_MIN = 2^(min_exp − 1)
    const long double ulp = std::ldexp(1.0L, std::max(e, min_exp) - digits);
    return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

// Runs f over the points, records the worst error against ref.
template <typename T, class F, class R>
void check_max_ulp(const std::vector<T>& xs, F f, R ref, double bound, const std::string& what) {
    double worst = 0;
    T at = 0;
    for (T x : xs) {
        const double e = ulp_error<T>(f(x), ref(x));
        if (e > worst) worst = e, at = x;
    }
    EXPECT_LE(worst, bound) << what << ": worst error " << worst << " ulp at x = " << static_cast<double>(at);
}

std::vector<double> uniform_points(double lo, double hi, int n, uint64_t seed) {
    ppolab::Philox rng(seed, 3);
    std::vector<double> v;
    for (int i = 0; i < n; ++i) v.push_back(lo + (hi - lo) * rng.uniform());
    return v;
}

// Points spread over every binade of [2^lo, 2^hi), both signs when `negative`.
std::vector<double> log_spread(int lo, int hi, int per_binade, bool negative, uint64_t seed) {
    ppolab::Philox rng(seed, 5);
    std::vector<double> v;
    for (int e = lo; e < hi; ++e)
        for (int i = 0; i < per_binade; ++i) {
            const double x = std::ldexp(1.0 + rng.uniform(), e);
            v.push_back(x);
            if (negative) v.push_back(-x);
        }
    return v;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// ---------------------------------------------------------------- exp

// Bound 1.5 ulp: the Taylor tail is < 5e-18 relative; the last Horner step
// 1 + y·r rounds twice (≤ 0.5 ulp, and ≤ 0.5 ulp of |y·r| ≤ 0.41, i.e. ≤ 0.25
// ulp of the result) on a y that carries its own earlier roundings (≤ 0.5 ulp
// of y, times |r| ≤ 0.35); r = x − n·ln 2 errs by < 2^-60. The scaling by 2^n
// is exact (normal results) or one rounding (denormal ones). Measured: 1.07.
TEST(CanonMath, ExpWithinOneAndAHalfUlps) {
    std::vector<double> xs = uniform_points(-745.0, 709.78, 200000, 1);
    for (double x : uniform_points(-1.0, 1.0, 50000, 2)) xs.push_back(x);
    for (double x : log_spread(-1074, 0, 40, true, 3)) xs.push_back(x);  // tiny arguments, denormals
    for (double x : {0.0, -0.0, 1.0, -1.0, 0.5, 709.782712893383, 709.78, -708.39, -708.4, -744.44, -745.0, -745.13,
                     4.9406564584124654e-324})
        xs.push_back(x);
    check_max_ulp<double>(
        xs, canon_exp, [](double x) { return std::exp(static_cast<long double>(x)); }, 1.5, "exp");
}

TEST(CanonMath, ExpEdgeCases) {
    EXPECT_EQ(canon_exp(0.0), 1.0);
    EXPECT_EQ(canon_exp(-0.0), 1.0);
    EXPECT_EQ(canon_exp(kInf), kInf);
    EXPECT_TRUE(same_bits(canon_exp(-kInf), 0.0));
    EXPECT_TRUE(std::isnan(canon_exp(kNaN)));
    EXPECT_EQ(canon_exp(709.782712893384), std::exp(709.782712893384));  // the largest finite result
    EXPECT_EQ(canon_exp(709.7827128933841), kInf);                       // overflow
    EXPECT_EQ(canon_exp(1000.0), kInf);
    EXPECT_TRUE(same_bits(canon_exp(-746.0), 0.0));
    EXPECT_EQ(canon_exp(-745.0), 4.9406564584124654e-324);  // the least denormal
    EXPECT_GT(canon_exp(-740.0), 0.0);                      // denormal results are not flushed
    EXPECT_LT(canon_exp(-740.0), 2.2250738585072014e-308);
}

// ---------------------------------------------------------------- float exp

// Bound 2 ulp: the Cephes expf polynomial (relative error < 2e-7 ≈ 1.7 ulp
// of float at worst near the ends of |r| ≤ ln2/2) plus its roundings.
TEST(CanonMath, ExpfWithinTwoUlps) {
    std::vector<float> xs;
    for (double x : uniform_points(-87.33, 88.37, 200000, 4)) xs.push_back(static_cast<float>(x));
    for (double x : log_spread(-149, 0, 40, true, 5)) xs.push_back(static_cast<float>(x));
    for (float x : {0.f, -0.f, 1.f, -1.f, 88.376f, -87.336f}) xs.push_back(x);
    check_max_ulp<float>(
        xs, canon_expf, [](float x) { return std::exp(static_cast<long double>(x)); }, 2.0, "expf");
}

TEST(CanonMath, ExpfEdgeCases) {
    EXPECT_EQ(canon_expf(0.f), 1.f);
    EXPECT_EQ(canon_expf(-0.f), 1.f);
    const float zero = 0.f;
    for (float x : {-87.34f, -100.f, -std::numeric_limits<float>::infinity()}) {
        const float e = canon_expf(x);
        EXPECT_EQ(std::memcmp(&e, &zero, sizeof e), 0) << x << ": below −87.33654 the result is exactly +0";
    }
    // Above 88.37626 the argument saturates: e^88.37626, finite (documented).
    EXPECT_EQ(canon_expf(100.f), canon_expf(88.37626f));
    EXPECT_EQ(canon_expf(std::numeric_limits<float>::infinity()), canon_expf(88.37626f));
    EXPECT_TRUE(std::isfinite(canon_expf(100.f)));
    EXPECT_TRUE(std::isnan(canon_expf(std::numeric_limits<float>::quiet_NaN())));
}

// ---------------------------------------------------------------- log, log1p

// Bound 1 ulp: fdlibm's e_log.c is documented "< 1 ulp".
TEST(CanonMath, LogWithinOneUlp) {
    std::vector<double> xs = log_spread(-1074, 1024, 60, false, 6);
    for (double x : uniform_points(0.5, 2.0, 100000, 7)) xs.push_back(x);
    for (double x : {1.0, 2.0, 0.5, std::sqrt(2.0), 1.0 + 2.220446049250313e-16, 1.0 - 1.1102230246251565e-16,
                     4.9406564584124654e-324, 2.2250738585072014e-308, 1.7976931348623157e308})
        xs.push_back(x);
    check_max_ulp<double>(
        xs, canon_log, [](double x) { return std::log(static_cast<long double>(x)); }, 1.0, "log");
}

TEST(CanonMath, LogEdgeCases) {
    EXPECT_TRUE(same_bits(canon_log(1.0), 0.0));
    EXPECT_EQ(canon_log(0.0), -kInf);
    EXPECT_EQ(canon_log(-0.0), -kInf);
    EXPECT_EQ(canon_log(kInf), kInf);
    EXPECT_TRUE(std::isnan(canon_log(-1.0)));
    EXPECT_TRUE(std::isnan(canon_log(-kInf)));
    EXPECT_TRUE(std::isnan(canon_log(kNaN)));
}

// Bound 1 ulp: fdlibm's s_log1p.c is documented "< 1 ulp".
TEST(CanonMath, Log1pWithinOneUlp) {
    std::vector<double> xs = log_spread(-1074, 1024, 40, false, 8);
    for (double x : log_spread(-1074, 0, 40, false, 9)) xs.push_back(-x);  // (−1, 0)
    for (double x : uniform_points(-0.5, 1.0, 100000, 10)) xs.push_back(x);
    for (double x : {0.0, -0.0, -0.2928932188134524, 0.41421356237309503, 1e-300, -1e-300, -0.9999999999999999})
        xs.push_back(x);
    check_max_ulp<double>(
        xs, canon_log1p, [](double x) { return std::log1p(static_cast<long double>(x)); }, 1.0, "log1p");
}

TEST(CanonMath, Log1pEdgeCases) {
    EXPECT_TRUE(same_bits(canon_log1p(0.0), 0.0));
    EXPECT_TRUE(same_bits(canon_log1p(-0.0), -0.0));
    EXPECT_EQ(canon_log1p(-1.0), -kInf);
    EXPECT_TRUE(std::isnan(canon_log1p(-1.5)));
    EXPECT_TRUE(std::isnan(canon_log1p(kNaN)));
    EXPECT_EQ(canon_log1p(kInf), kInf);
    EXPECT_EQ(canon_log1p(4.9406564584124654e-324), 4.9406564584124654e-324);
}

// ---------------------------------------------------------------- sin, cos

// Bound 1 ulp on |x| < 2^20·π/2: fdlibm's kernels are "< 1 ulp" and the
// three-part reduction is exact to 118+ bits there (RoPE angles stay under
// 32768; Box–Muller's under 2π).
TEST(CanonMath, SinCosWithinOneUlp) {
    std::vector<double> xs = uniform_points(-7.0, 7.0, 100000, 11);
    for (double x : uniform_points(0.0, 32768.0, 100000, 12)) xs.push_back(x);
    for (double x : uniform_points(-1.6e6, 1.6e6, 50000, 13)) xs.push_back(x);
    for (double x : log_spread(-1074, 20, 30, true, 14)) xs.push_back(x);
    // Near multiples of π/2, where the reduction cancels most.
    for (int k = 1; k < 20000; k += 7) {
        const double m = k * 1.5707963267948966;
        xs.push_back(m);
        xs.push_back(std::nextafter(m, 0.0));
        xs.push_back(std::nextafter(m, 1e9));
    }
    for (double x : {0.0, -0.0, 0.7853981633974483, 3.141592653589793, 6.283185307179586, 32767.0, 32768.0})
        xs.push_back(x);
    check_max_ulp<double>(
        xs, canon_sin, [](double x) { return std::sin(static_cast<long double>(x)); }, 1.0, "sin");
    check_max_ulp<double>(
        xs, canon_cos, [](double x) { return std::cos(static_cast<long double>(x)); }, 1.0, "cos");
}

TEST(CanonMath, SinCosEdgeCases) {
    EXPECT_TRUE(same_bits(canon_sin(0.0), 0.0));
    EXPECT_TRUE(same_bits(canon_sin(-0.0), -0.0));
    EXPECT_EQ(canon_cos(0.0), 1.0);
    EXPECT_EQ(canon_cos(-0.0), 1.0);
    EXPECT_EQ(canon_sin(4.9406564584124654e-324), 4.9406564584124654e-324);
    for (double x : {kInf, -kInf, kNaN}) {
        EXPECT_TRUE(std::isnan(canon_sin(x))) << x;
        EXPECT_TRUE(std::isnan(canon_cos(x))) << x;
    }
}

// ---------------------------------------------------------------- pow

// Bound 2 ulp: e^(z.hi)·(1 + z.lo) with canon_exp's 1.5 ulp, the product's
// rounding (≤ 0.5 ulp) and the double-double exponent's error (< 2^-60
// relative for results in range).
TEST(CanonMath, PowWithinTwoUlps) {
    std::vector<std::pair<double, double>> xy;
    ppolab::Philox rng(15, 1);
    // RoPE's θ^(2i/d): θ in [1e3, 1e7], exponents in [0, 1).
    for (int i = 0; i < 20000; ++i) xy.emplace_back(std::pow(10.0, 3 + 4 * rng.uniform()), rng.uniform());
    for (double theta : {10000.0, 1000000.0})
        for (int d : {64, 128})
            for (int i = 0; i < d / 2; ++i) xy.emplace_back(theta, static_cast<double>(2 * i) / d);
    // AdamW's β^t: β in [0.8, 1), t = 1 … 1e6.
    for (double beta : {0.9, 0.95, 0.98, 0.99, 0.999, 0.9999})
        for (double t = 1; t < 1e6; t = std::floor(t * 1.3) + 1) xy.emplace_back(beta, t);
    for (int i = 0; i < 20000; ++i) xy.emplace_back(0.8 + 0.2 * rng.uniform(), std::floor(1 + 1e5 * rng.uniform()));
    // General x > 0 and y with results in range.
    for (int i = 0; i < 50000; ++i) {
        const double x = std::ldexp(1.0 + rng.uniform(), static_cast<int>(rng.below(200)) - 100);
        const double lx = std::log(x);
        const double y = (2 * rng.uniform() - 1) * (lx == 0 ? 1.0 : 700 / std::fabs(lx));
        xy.emplace_back(x, y);
    }
    // Bases near √2 and √½ (the widest atanh arguments) with large exponents.
    for (int i = 0; i < 20000; ++i) {
        const double x = (rng.uniform() < 0.5 ? 1.4142135623730951 : 0.7071067811865476) * (1 + 1e-3 * rng.uniform());
        xy.emplace_back(x, (2 * rng.uniform() - 1) * 2000);
    }
    double worst = 0, wx = 0, wy = 0;
    for (auto [x, y] : xy) {
        const double e =
            ulp_error<double>(canon_pow(x, y), std::pow(static_cast<long double>(x), static_cast<long double>(y)));
        if (e > worst) worst = e, wx = x, wy = y;
    }
    EXPECT_LE(worst, 2.0) << "pow: worst error " << worst << " ulp at x = " << wx << ", y = " << wy;
}

TEST(CanonMath, PowEdgeCases) {
    EXPECT_EQ(canon_pow(2.0, 10.0), 1024.0);
    EXPECT_EQ(canon_pow(2.0, -1.0), 0.5);
    EXPECT_EQ(canon_pow(1.0, kNaN), 1.0);
    EXPECT_EQ(canon_pow(kNaN, 0.0), 1.0);
    EXPECT_EQ(canon_pow(7.0, 0.0), 1.0);
    EXPECT_EQ(canon_pow(0.0, 2.0), 0.0);
    EXPECT_EQ(canon_pow(0.0, -2.0), kInf);
    EXPECT_EQ(canon_pow(kInf, 0.5), kInf);
    EXPECT_EQ(canon_pow(kInf, -0.5), 0.0);
    EXPECT_EQ(canon_pow(0.5, kInf), 0.0);
    EXPECT_EQ(canon_pow(2.0, kInf), kInf);
    EXPECT_EQ(canon_pow(2.0, 2000.0), kInf);
    EXPECT_EQ(canon_pow(2.0, -2000.0), 0.0);
    EXPECT_EQ(canon_pow(2.0, -1074.0), 4.9406564584124654e-324);
    EXPECT_TRUE(std::isnan(canon_pow(-2.0, 2.0)));
    EXPECT_TRUE(std::isnan(canon_pow(kNaN, 2.0)));
    EXPECT_TRUE(std::isnan(canon_pow(2.0, kNaN)));
}

// Box–Muller (util/rng.h) now draws through canon_log and canon_cos: its
// normals are fixed numbers. The first few of one stream, computed from the
// same uniforms with the long double functions, agree to 1e-15.
TEST(CanonMath, PhiloxNormalUsesCanonicalFunctions) {
    ppolab::Philox a(42, 9), b(42, 9);
    for (int i = 0; i < 1000; ++i) {
        const auto blk = b.next_block();
        const long double u1 = (static_cast<long double>(blk[0]) + 1.0L) * 0x1.0p-32L;
        const long double u2 = static_cast<long double>(blk[1]) * 0x1.0p-32L;
        const long double want = std::sqrt(-2.0L * std::log(u1)) * std::cos(6.283185307179586L * u2);
        EXPECT_NEAR(a.normal(), static_cast<double>(want), 1e-14);
    }
}

}  // namespace
