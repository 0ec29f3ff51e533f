// test_matmul.cpp — the fast matrix backend (oneDNN, AVX-512 small-M kernels,
// portable fallback) against the reference loops of matmul_reference.cpp.
// These tests run under engine.numerics = fast (numerics.h), where the
// automatic choice takes those paths; test_matmul_canonical.cpp checks the
// canonical ones bit for bit.
//
// Two kinds of checks:
//  * exact: inputs chosen so that every product and every partial sum is
//    exactly representable in FP32 (small integers times multiples of 2^-7
//    or 2^-12, sums far below 2^24), so any summation order gives the same
//    bits and the paths must agree with the reference bit for bit. The BF16
//    inputs are drawn at 0, ¼, ½ and ¾ of a BF16 ulp above a BF16 value, so a
//    path that truncates, rounds ties away from zero or forgets to round
//    gives a different sum (and an FP32 path that wrongly rounds is caught by
//    inputs with 12 fractional bits).
//  * bounded: Gaussian inputs, compared with a double-precision evaluation of
//    the same (rounded) products; any FP32 summation order of K terms is
//    within γ_K·Σ|x_k w_k| of it, γ_K = K·u/(1 − K·u), u = 2^-24 (Higham,
//    Accuracy and Stability, eq. 3.5); FP32 products add one more u.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_backend.h"
#include "kernels/matmul_reference.h"
#include "kernels/numerics.h"
#include "kernels/simd.h"
#include "kernels/unit_rates.h"
#include "util/error.h"
#include "util/rng.h"

using namespace ppolab;

namespace {

// The fast backend's choices are what this file tests.
const bool fast_numerics = [] {
    numerics_set_mode(Numerics::fast);
    return true;
}();

// A path and, for oneDNN, how it computes BF16 products (matmul_backend.h:
// both modes run on every CPU, natively or emulated by oneDNN). The AMX path
// runs where the tiles are granted; elsewhere forcing it runs oneDNN (its
// own test below says which ran).
struct Variant {
    MatmulPath path;
    Bf16Products bf16;
};

const Variant kPaths[] = {
    {MatmulPath::automatic, Bf16Products::automatic}, {MatmulPath::small_m, Bf16Products::native},
    {MatmulPath::small_m, Bf16Products::f32},         {MatmulPath::small_m_vnni, Bf16Products::native},
    {MatmulPath::small_m_vnni, Bf16Products::f32},    {MatmulPath::amx, Bf16Products::native},
    {MatmulPath::dnnl, Bf16Products::native},         {MatmulPath::dnnl, Bf16Products::f32},
    {MatmulPath::portable, Bf16Products::automatic}};

const char* path_label(const Variant& v) {
    switch (v.path) {
        case MatmulPath::automatic: return "automatic";
        case MatmulPath::small_m:
            return v.bf16 == Bf16Products::f32 ? "small_m (BF16 as FP32)" : "small_m (BF16 native)";
        case MatmulPath::small_m_vnni:
            return simd::simd_cpu_level() != simd::SimdLevel::avx512 ? "small_m_vnni (no AVX-512 here: portable)"
                   : v.bf16 == Bf16Products::f32                     ? "small_m_vnni (FMA)"
                   : matmul_has_avx512bf16()                         ? "small_m_vnni (vdpbf16ps)"
                                                                     : "small_m_vnni (no AVX-512 BF16 here: FMA)";
        case MatmulPath::amx: return matmul_has_amx() ? "amx" : "amx (not granted here: dnnl)";
        case MatmulPath::dnnl: return v.bf16 == Bf16Products::f32 ? "dnnl (BF16 as FP32)" : "dnnl (BF16 native)";
        default: return "portable";
    }
}

struct PathGuard {
    explicit PathGuard(const Variant& v) {
        matmul_set_path(v.path);
        matmul_set_bf16_products(v.bf16);
    }
    ~PathGuard() {
        matmul_set_path(MatmulPath::automatic);
        matmul_set_bf16_products(Bf16Products::automatic);
    }
};

// A weight matrix owning its storage.
struct TestWeight {
    WeightType type;
    int64_t N, K;
    std::vector<bf16> b;   // (N, K)
    std::vector<float> f;  // (N, K)
    WeightView view() const { return {type, type == WeightType::bf16 ? (const void*)b.data() : f.data(), N, K}; }
    float at(int64_t i) const { return type == WeightType::bf16 ? bf16_to_float(b[i]) : f[i]; }
};

// Small integers in [-lim, lim].
TestWeight integer_weight(WeightType type, int64_t N, int64_t K, int lim, Philox& rng) {
    TestWeight w{type, N, K, {}, {}};
    for (int64_t i = 0; i < N * K; ++i) {
        float v = static_cast<float>(static_cast<int64_t>(rng.below(2 * lim + 1)) - lim);
        if (type == WeightType::bf16) w.b.push_back(float_to_bf16(v));
        else w.f.push_back(v);
    }
    return w;
}

TestWeight gaussian_weight(WeightType type, int64_t N, int64_t K, Philox& rng) {
    TestWeight w{type, N, K, {}, {}};
    for (int64_t i = 0; i < N * K; ++i) {
        float v = static_cast<float>(rng.normal());
        if (type == WeightType::bf16) w.b.push_back(float_to_bf16(v));
        else w.f.push_back(v);
    }
    return w;
}

// For a BF16 product: a BF16 value in ±[1, 4) plus 0, ¼, ½ or ¾ of its ulp
// (the rounded value is a multiple of 2^-7 of magnitude ≤ 4).
// For an FP32 product: a multiple of 2^-12 in (-2, 2) (not BF16-exact).
std::vector<float> exact_inputs(WeightType type, int64_t n, Philox& rng) {
    std::vector<float> v(n);
    for (auto& x : v) {
        if (type == WeightType::bf16) {
            float base = 1.f + static_cast<float>(rng.below(384)) / 128.f;  // [1, 4): multiples of 2^-7
            base = round_to_bf16(base);                                     // a BF16 value
            float ulp = base >= 2.f ? 1.f / 64.f : 1.f / 128.f;
            float frac = static_cast<float>(rng.below(4)) / 4.f;
            x = (base + frac * ulp) * (rng.below(2) ? -1.f : 1.f);
        } else {
            x = static_cast<float>(static_cast<int64_t>(rng.below(2 * 8191 + 1)) - 8191) / 4096.f;
        }
    }
    return v;
}

std::vector<float> gaussian(int64_t n, Philox& rng) {
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(rng.normal());
    return v;
}

// Bitwise equality; the message names the first differing element.
::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want, int64_t cols) {
    for (size_t i = 0; i < want.size(); ++i)
        if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0)
            return ::testing::AssertionFailure()
                   << "element [" << i / cols << ", " << i % cols << "]: got " << got[i] << ", expected " << want[i];
    return ::testing::AssertionSuccess();
}

struct Shape {
    int64_t M, N, K;
};

std::vector<Shape> shapes() {
    std::vector<Shape> s;
    for (int64_t M : {1, 2, 3, 4, 5, 7, 8, 9, 128})
        for (auto [N, K] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {65, 129}, {97, 300}}) s.push_back({M, N, K});
    s.push_back({128, 33, 7});
    s.push_back({4, 128, 96});
    s.push_back({512, 129, 65});
    s.push_back({512, 64, 300});
    s.push_back({37, 256, 1000});  // K above a small-M register tile's reach, odd M
    // LoRA adapters in decode (FP32: the small-M kernels at any size): A (N = rank), B (K = rank, transposed)
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{8, 8, 896},
                           {3, 8, 40},
                           {8, 896, 8},
                           {5, 4864, 8},
                           {2, 33, 16},
                           {7, 40, 1},
                           {32, 130, 3}})
        s.push_back({M, N, K});
    return s;
}

std::string describe(const Variant& p, WeightType t, const Shape& s, bool acc) {
    return std::string(path_label(p)) + (t == WeightType::bf16 ? " bf16" : " f32") + " M=" + std::to_string(s.M) +
           " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K) + (acc ? " accumulate" : "");
}

}  // namespace

TEST(Matmul, ReportsCpuAndPaths) {
    // Not a check of the machine: a record in the test log of what ran.
    std::printf("avx512bf16: %d; M=1 → %s, M=128 → %s\n", matmul_has_avx512bf16() ? 1 : 0,
                matmul_path_name(1, 896, 896), matmul_path_name(128, 896, 896));
    EXPECT_STREQ(matmul_path_name(128, 896, 896), "dnnl");
    EXPECT_STREQ(matmul_path_name(kSmallM, 896, 896),
                 simd::simd_cpu_level() == simd::SimdLevel::avx512 ? "small_m_avx512" : "portable");
    EXPECT_STREQ(matmul_path_name(2, 8, 8), "portable");  // tiny: no thread, no library call
    {  // but an FP32 weight in decode (LoRA adapters) takes the small-M kernels at any size
        std::vector<float> a(8 * 896);
        const WeightView adapter{WeightType::f32, a.data(), 8, 896};
        EXPECT_STREQ(matmul_path_name(4, adapter),
                     simd::simd_cpu_level() == simd::SimdLevel::avx512 ? "small_m_avx512" : "portable");
    }
    EXPECT_STREQ(matmul_path_name(4, 896, 4864), matmul_path_name(1, 896, 4864));  // row invariance: not by M
    // BF16 products: the automatic choice (its own test below), or forced.
    EXPECT_EQ(bf16_products_native(), bf16_products_automatic().native);
    matmul_set_bf16_products(Bf16Products::f32);
    EXPECT_FALSE(bf16_products_native());
    matmul_set_bf16_products(Bf16Products::native);
    EXPECT_TRUE(bf16_products_native());
    matmul_set_bf16_products(Bf16Products::automatic);
}

// Native BF16 products only with a BF16 dot product; with AMX tiles always;
// otherwise exactly when the measured vdpbf16ps rate is at least 3/4 of the
// FP32 FMA's, and the reason names the figures it read.
TEST(Matmul, AutomaticBf16ChoiceFollowsItsMeasurement) {
    const Bf16Decision& d = bf16_products_automatic();
    std::printf("automatic BF16 products: %s (%s)\n", d.native ? "native" : "fp32", d.why.c_str());
    EXPECT_EQ(&d, &bf16_products_automatic());  // decided once per process
    if (!matmul_has_avx512bf16()) {
        EXPECT_FALSE(d.native);
        EXPECT_NE(d.why.find("no AVX-512 BF16"), std::string::npos) << d.why;
    } else if (unit_rates::request_amx_tiles(nullptr)) {
        EXPECT_TRUE(d.native);
        EXPECT_EQ(d.why, "AMX-BF16 tiles");
    } else {
        ASSERT_GT(d.bf16_gflop_s, 0);
        ASSERT_GT(d.fp32_gflop_s, 0);
        EXPECT_EQ(d.native, d.bf16_gflop_s >= kBf16NativeAtLeast * d.fp32_gflop_s);
        char figure[32];
        std::snprintf(figure, sizeof figure, "vdpbf16ps %.0f GFLOP/s", d.bf16_gflop_s);
        EXPECT_NE(d.why.find(figure), std::string::npos) << d.why;
    }
}

// The probe's loops run and give finite positive rates (the figures of
// bench_peak come from the same loops).
TEST(Matmul, UnitRateLoopsRun) {
    if (!unit_rates::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512: the loops cannot run here";
    unit_rates::fp32_fma_loop(1000);
    alignas(64) static float buf[4096] = {};
    unit_rates::stream_read(buf, 4096);
    if (unit_rates::cpu_has_avx512_bf16()) {
        const unit_rates::Bf16Probe p = unit_rates::probe_bf16_against_fp32();
        EXPECT_GT(p.bf16_gflop_s, 1.0);
        EXPECT_GT(p.fp32_gflop_s, 1.0);
        EXPECT_LT(p.bf16_gflop_s, 1e5);
    }
}

TEST(Matmul, ConvertToBf16MatchesScalarRounding) {
    Philox rng(11, 0);
    std::vector<float> in;
    // Ties (exactly half an ulp: even and odd mantissa), near-ties, extremes.
    for (float v :
         {1.f + 0x1p-8f, 1.f + 3 * 0x1p-8f, 1.f + 0x1p-8f + 0x1p-20f, -1.f - 0x1p-8f, 0.f, -0.f, 3.4e38f, -3.4e38f,
          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 1e-30f, 65504.f})
        in.push_back(v);
    while (in.size() < 1000) in.push_back(static_cast<float>(rng.normal() * std::pow(10.0, rng.uniform() * 8 - 4)));
    for (int64_t n : {0, 1, 15, 16, 17, 31, 32, 33, 63, 100, 1000}) {
        std::vector<bf16> got(n + 1, 0xabcd);
        convert_to_bf16(got.data(), in.data(), n);
        for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(got[i], float_to_bf16(in[i])) << "n=" << n << " i=" << i << " x=" << in[i];
        EXPECT_EQ(got[n], 0xabcd) << "wrote past the end, n=" << n;
    }
    // Large (parallel, chunked) conversion.
    std::vector<float> big = gaussian(200003, rng);
    std::vector<bf16> out(big.size());
    convert_to_bf16(out.data(), big.data(), static_cast<int64_t>(big.size()));
    for (size_t i = 0; i < big.size(); ++i) ASSERT_EQ(out[i], float_to_bf16(big[i])) << i;
    // NaN stays NaN.
    float nan = std::numeric_limits<float>::quiet_NaN();
    bf16 b;
    convert_to_bf16(&b, &nan, 1);
    EXPECT_TRUE(std::isnan(bf16_to_float(b)));
    // round_to_bf16_values: the same rounding, held in FP32 (the FP32 mode of
    // BF16 products), small and large (chunked) inputs.
    for (const std::vector<float>* v : {&in, &big}) {
        std::vector<float> held(v->size() + 1, 7.f);
        round_to_bf16_values(held.data(), v->data(), static_cast<int64_t>(v->size()));
        for (size_t i = 0; i < v->size(); ++i) ASSERT_EQ(float_to_bf16(held[i]), float_to_bf16((*v)[i])) << i;
        for (size_t i = 0; i < v->size(); ++i) ASSERT_EQ(held[i], round_to_bf16((*v)[i])) << i;
        EXPECT_EQ(held.back(), 7.f) << "wrote past the end";
    }
    float held_nan = 0.f;
    round_to_bf16_values(&held_nan, &nan, 1);
    EXPECT_TRUE(std::isnan(held_nan));
}

TEST(Matmul, ForwardExactOnEveryPath) {
    Philox rng(1, 0);
    for (WeightType type : {WeightType::bf16, WeightType::f32})
        for (const Shape& s : shapes()) {
            TestWeight W = integer_weight(type, s.N, s.K, type == WeightType::bf16 ? 2 : 1, rng);
            std::vector<float> X = exact_inputs(type, s.M * s.K, rng);              // (M, K)
            std::vector<float> Y0 = exact_inputs(WeightType::f32, s.M * s.N, rng);  // (M, N) prior contents
            for (bool acc : {false, true}) {
                std::vector<float> want = Y0;
                linear_forward_reference(want.data(), X.data(), W.view(), s.M, acc);
                for (const Variant& p : kPaths) {
                    PathGuard guard(p);
                    std::vector<float> got = Y0;
                    linear_forward(got.data(), X.data(), W.view(), s.M, acc);
                    ASSERT_TRUE(same_bits(got, want, s.N)) << describe(p, type, s, acc);
                }
            }
        }
}

TEST(Matmul, BackwardInputExactOnEveryPath) {
    Philox rng(2, 0);
    for (WeightType type : {WeightType::bf16, WeightType::f32})
        for (const Shape& s : shapes()) {
            TestWeight W = integer_weight(type, s.N, s.K, type == WeightType::bf16 ? 2 : 1, rng);
            std::vector<float> dY = exact_inputs(type, s.M * s.N, rng);              // (M, N)
            std::vector<float> dX0 = exact_inputs(WeightType::f32, s.M * s.K, rng);  // (M, K)
            for (bool acc : {false, true}) {
                std::vector<float> want = dX0;
                linear_backward_input_reference(want.data(), dY.data(), W.view(), s.M, acc);
                for (const Variant& p : kPaths) {
                    PathGuard guard(p);
                    std::vector<float> got = dX0;
                    linear_backward_input(got.data(), dY.data(), W.view(), s.M, acc);
                    ASSERT_TRUE(same_bits(got, want, s.K)) << describe(p, type, s, acc);
                }
            }
        }
}

TEST(Matmul, BackwardWeightExactOnEveryPath) {
    Philox rng(3, 0);
    for (const Shape& s : shapes()) {
        TestWeight G = integer_weight(WeightType::f32, s.M, s.N, 1, rng);        // dY (M, N) small integers
        std::vector<float> X = exact_inputs(WeightType::f32, s.M * s.K, rng);    // (M, K)
        std::vector<float> dW0 = exact_inputs(WeightType::f32, s.N * s.K, rng);  // (N, K)
        std::vector<float> want = dW0;
        linear_backward_weight_reference(want.data(), G.f.data(), X.data(), s.M, s.N, s.K);
        for (const Variant& p : kPaths) {
            PathGuard guard(p);
            std::vector<float> got = dW0;
            linear_backward_weight(got.data(), G.f.data(), X.data(), s.M, s.N, s.K);
            ASSERT_TRUE(same_bits(got, want, s.K)) << describe(p, WeightType::f32, s, true);
        }
    }
}

// Mixed precision (inputs = bf16): dY and X are rounded to BF16 before the
// product. Inputs off the BF16 grid whose rounded values make an exact sum:
// dY a nonzero integer in ±[1, 3] plus 0 or ¼ ulp (rounds back to the
// integer), X as exact_inputs(bf16) (rounds to a multiple of 2^-7 ≤ 4); every
// product is a multiple of 2^-7 of magnitude ≤ 12 and sums of up to 512 of
// them need 20 bits: exact in FP32 in any order. The reference is the FP32
// product of the rounded values; the unrounded FP32 product must differ.
TEST(Matmul, BackwardWeightBf16InputsRoundFirstOnEveryPath) {
    Philox rng(4, 0);
    for (const Shape& s : shapes()) {
        std::vector<float> dY(static_cast<size_t>(s.M * s.N)), dYr(dY.size());
        for (size_t i = 0; i < dY.size(); ++i) {
            const float v = static_cast<float>(1 + rng.below(3));
            const float ulp = v >= 2.f ? 1.f / 64.f : 1.f / 128.f;
            const float sign = rng.below(2) ? -1.f : 1.f;
            dYr[i] = sign * v;
            dY[i] = sign * (v + (rng.below(2) ? 0.25f * ulp : 0.f));
        }
        std::vector<float> X = exact_inputs(WeightType::bf16, s.M * s.K, rng), Xr = X;
        for (float& v : Xr) v = round_to_bf16(v);
        std::vector<float> dW0 = exact_inputs(WeightType::f32, s.N * s.K, rng);
        std::vector<float> want = dW0, unrounded = dW0;
        linear_backward_weight_reference(want.data(), dYr.data(), Xr.data(), s.M, s.N, s.K);
        linear_backward_weight_reference(unrounded.data(), dY.data(), X.data(), s.M, s.N, s.K);
        if (s.M * s.N * s.K >= 64) {
            EXPECT_FALSE(same_bits(unrounded, want, s.K)) << "inputs not perturbed";
        }
        for (const Variant& p : kPaths) {
            PathGuard guard(p);
            std::vector<float> got = dW0;
            linear_backward_weight(got.data(), dY.data(), X.data(), s.M, s.N, s.K, WeightType::bf16);
            ASSERT_TRUE(same_bits(got, want, s.K)) << describe(p, WeightType::bf16, s, true);
        }
    }
}

// Gaussian data, model-sized K: every path within the FP32 summation bound
// of a double-precision evaluation of the same rounded products.
TEST(Matmul, GaussianWithinSummationBound) {
    Philox rng(4, 0);
    const double u = 0x1p-24;
    for (WeightType type : {WeightType::bf16, WeightType::f32})
        for (Shape s : {Shape{1, 64, 4864}, Shape{4, 96, 896}, Shape{7, 50, 4864}, Shape{128, 64, 896}}) {
            TestWeight W = gaussian_weight(type, s.N, s.K, rng);
            std::vector<float> X = gaussian(s.M * s.K, rng);  // (M, K)
            std::vector<double> exact(s.M * s.N), bound(s.M * s.N);
            const double gamma = (s.K + 1) * u / (1 - (s.K + 1) * u);
            for (int64_t m = 0; m < s.M; ++m)
                for (int64_t n = 0; n < s.N; ++n) {
                    double sum = 0, mag = 0;
                    for (int64_t k = 0; k < s.K; ++k) {
                        double x = type == WeightType::bf16 ? round_to_bf16(X[m * s.K + k]) : X[m * s.K + k];
                        double t = x * W.at(n * s.K + k);
                        sum += t;
                        mag += std::fabs(t);
                    }
                    exact[m * s.N + n] = sum;
                    bound[m * s.N + n] = gamma * mag;
                }
            auto check = [&](const std::vector<float>& y, const std::string& what) {
                for (int64_t i = 0; i < s.M * s.N; ++i)
                    ASSERT_LE(std::fabs(y[i] - exact[i]), bound[i])
                        << what << " M=" << s.M << " N=" << s.N << " K=" << s.K << " element " << i << ": got " << y[i]
                        << ", exact " << exact[i];
            };
            std::vector<float> ref(s.M * s.N);
            linear_forward_reference(ref.data(), X.data(), W.view(), s.M);
            check(ref, "reference");
            for (const Variant& p : kPaths) {
                PathGuard guard(p);
                std::vector<float> y(s.M * s.N);
                linear_forward(y.data(), X.data(), W.view(), s.M);
                check(y, path_label(p));
            }
        }
}

// Row invariance (matmul.h): up to kRowInvariantRows rows, each row of a
// product is bitwise the product of that row alone, on the automatic path
// (unfrozen, and frozen: the AMX tiles where granted) and on each decode
// path forced (small-M native and as FP32, AMX for a BF16 weight, portable);
// Gaussian data so that a change of summation order shows. Shapes: tiny
// (portable), the 0.5B's K = 896 and the down projection's K = 4864.
TEST(Matmul, DecodeRowsAreBitwiseTheirRowAlone) {
    Philox rng(12, 0);
    const Variant decode_paths[] = {
        {MatmulPath::automatic, Bf16Products::automatic}, {MatmulPath::small_m, Bf16Products::native},
        {MatmulPath::small_m, Bf16Products::f32},         {MatmulPath::small_m_vnni, Bf16Products::native},
        {MatmulPath::small_m_vnni, Bf16Products::f32},    {MatmulPath::amx, Bf16Products::native},
        {MatmulPath::portable, Bf16Products::automatic}};
    for (WeightType type : {WeightType::bf16, WeightType::f32})
        for (auto [N, K] :
             {std::pair<int64_t, int64_t>{8, 40}, {96, 896}, {40, 4864}, {33, 1000}, {896, 8}, {8, 896}}) {
            TestWeight W = gaussian_weight(type, N, K, rng);
            std::unique_ptr<PrepackedWeight> packed;
            if (type == WeightType::bf16) packed = std::make_unique<PrepackedWeight>(W.view());
            std::vector<float> X = gaussian(kRowInvariantRows * K, rng);  // (8, K)
            for (bool frozen : {false, true})
                for (const Variant& p : decode_paths) {
                    if (frozen && (!packed || p.path != MatmulPath::automatic)) continue;
                    // A forced AMX path computes BF16 weights only (an FP32 one goes to oneDNN) and needs the tiles.
                    if (p.path == MatmulPath::amx && (type != WeightType::bf16 || !matmul_has_amx())) continue;
                    WeightView view = W.view();
                    if (frozen) view.prepacked = packed.get();
                    const std::string label = std::string(path_label(p)) + (frozen ? " frozen" : "") +
                                              (type == WeightType::bf16 ? " bf16" : " f32") + " (" +
                                              matmul_path_name(1, view) + ")";
                    PathGuard guard(p);
                    std::vector<float> alone(kRowInvariantRows * N);  // row m computed with M = 1
                    for (int64_t m = 0; m < kRowInvariantRows; ++m)
                        linear_forward(alone.data() + m * N, X.data() + m * K, view, 1);
                    for (int64_t M = 2; M <= kRowInvariantRows; ++M) {
                        EXPECT_STREQ(matmul_path_name(M, view), matmul_path_name(1, view)) << label;
                        for (int64_t first : {int64_t(0), kRowInvariantRows - M}) {  // rows [first, first + M)
                            std::vector<float> y(M * N);
                            linear_forward(y.data(), X.data() + first * K, view, M);
                            std::vector<float> want(alone.begin() + first * N, alone.begin() + (first + M) * N);
                            EXPECT_TRUE(same_bits(y, want, N))
                                << label << " M=" << M << " from row " << first << " N=" << N << " K=" << K;
                        }
                    }
                }
        }
}

// A cached oneDNN primitive must not remember the buffers of an earlier call.
TEST(Matmul, SameShapeNewBuffers) {
    Philox rng(5, 0);
    for (int64_t M : {1, 128})  // small_m, dnnl
        for (int round = 0; round < 3; ++round) {
            TestWeight W = integer_weight(WeightType::bf16, 140, 270, 2, rng);
            std::vector<float> X = exact_inputs(WeightType::bf16, M * 270, rng);
            std::vector<float> want(M * 140), got(M * 140);
            linear_forward_reference(want.data(), X.data(), W.view(), M);
            linear_forward(got.data(), X.data(), W.view(), M);
            ASSERT_TRUE(same_bits(got, want, 140)) << matmul_path_name(M, 140, 270) << " M=" << M << " round " << round;
        }
}

TEST(Matmul, ConcurrentCallersGetTheirOwnResults) {
    Philox rng(6, 0);
    struct Job {
        TestWeight W;
        std::vector<float> X, want;
        int64_t M;
    };
    std::vector<Job> jobs;
    for (int64_t M : {1, 64, 128, 3}) {  // small_m, dnnl, dnnl, small_m
        Job j{integer_weight(WeightType::bf16, 160, 256, 2, rng), exact_inputs(WeightType::bf16, M * 256, rng), {}, M};
        j.want.resize(M * 160);
        linear_forward_reference(j.want.data(), j.X.data(), j.W.view(), M);
        jobs.push_back(std::move(j));
    }
    std::vector<int> failures(jobs.size(), 0);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < jobs.size(); ++t)
        threads.emplace_back([&, t] {
            const Job& j = jobs[t];
            std::vector<float> y(j.M * 160);
            for (int it = 0; it < 50; ++it) {
                linear_forward(y.data(), j.X.data(), j.W.view(), j.M);
                if (std::memcmp(y.data(), j.want.data(), y.size() * sizeof(float)) != 0) ++failures[t];
            }
        });
    for (auto& th : threads) th.join();
    for (size_t t = 0; t < jobs.size(); ++t) EXPECT_EQ(failures[t], 0) << "job M=" << jobs[t].M;
}

// Frozen (prepacked) weights: same results as the reference, for both
// products that read them, at several row counts (layouts may differ per M);
// a PrepackedWeight is used only by views of the very weight it was made for.
TEST(Matmul, FrozenWeightsGiveTheReferenceResults) {
    Philox rng(7, 0);
    const int64_t N = 200, K = 300;
    TestWeight W = integer_weight(WeightType::bf16, N, K, 2, rng);
    auto packed = std::make_unique<PrepackedWeight>(W.view());
    WeightView frozen = W.view();
    frozen.prepacked = packed.get();
    EXPECT_TRUE(packed->matches(frozen));
    EXPECT_EQ(packed->bytes(), 0);
    int64_t native_bytes = 0;
    for (Bf16Products mode : {Bf16Products::native, Bf16Products::f32})
        for (int64_t M : {1, 9, 64, 128, 300}) {
            PathGuard guard({MatmulPath::automatic, mode});
            const char* how = mode == Bf16Products::f32 ? " (BF16 as FP32)" : " (BF16 native)";
            std::vector<float> X = exact_inputs(WeightType::bf16, M * K, rng);   // (M, K)
            std::vector<float> dY = exact_inputs(WeightType::bf16, M * N, rng);  // (M, N)
            std::vector<float> want(M * N), got(M * N), wantx(M * K), gotx(M * K);
            linear_forward_reference(want.data(), X.data(), W.view(), M);
            linear_forward(got.data(), X.data(), frozen, M);
            ASSERT_TRUE(same_bits(got, want, N)) << "frozen forward M=" << M << how;
            linear_backward_input_reference(wantx.data(), dY.data(), W.view(), M);
            linear_backward_input(gotx.data(), dY.data(), frozen, M);
            ASSERT_TRUE(same_bits(gotx, wantx, K)) << "frozen backward_input M=" << M << how;
            if (mode == Bf16Products::native) native_bytes = packed->bytes();
        }
    EXPECT_GT(native_bytes, 0) << "no packed BF16 copy was made: the frozen path did not run";
    // The FP32 mode packs the weight widened to FP32: its own copies, each at
    // least N·K floats (how many layouts each mode packs, and their padding,
    // depend on the CPU: on one with AVX-512 BF16 the native copies were
    // 1.88x smaller than the FP32 ones, not 2x).
    EXPECT_GE(packed->bytes() - native_bytes, N * K * static_cast<int64_t>(sizeof(float)))
        << "no packed FP32 copy was made";
    // A view of other data, or of other dimensions, does not match: never read packed.
    TestWeight other = integer_weight(WeightType::bf16, N, K, 2, rng);
    WeightView foreign = other.view();
    foreign.prepacked = packed.get();
    EXPECT_FALSE(packed->matches(foreign));
    WeightView fewer = frozen;
    fewer.rows = N / 2;
    EXPECT_FALSE(packed->matches(fewer));
    std::vector<float> X = exact_inputs(WeightType::bf16, 128 * K, rng);
    std::vector<float> want(128 * N), got(128 * N);
    linear_forward_reference(want.data(), X.data(), other.view(), 128);
    linear_forward(got.data(), X.data(), foreign, 128);
    ASSERT_TRUE(same_bits(got, want, N)) << "a foreign weight read through a stale prepacked copy";
    // After the copies are gone a changed weight is read afresh.
    packed.reset();
    for (auto& b : W.b) b = float_to_bf16(-bf16_to_float(b) + 1.f);
    linear_forward_reference(want.data(), X.data(), W.view(), 128);
    linear_forward(got.data(), X.data(), W.view(), 128);
    ASSERT_TRUE(same_bits(got, want, N)) << "after the prepacked copies were dropped";
}

TEST(Matmul, PrepackedWeightRefusesWhatItCannotPack) {
    std::vector<float> f(6, 1.f);
    std::vector<bf16> b(6);
    EXPECT_THROW(PrepackedWeight(WeightView{WeightType::f32, f.data(), 2, 3}), Error);
    EXPECT_THROW(PrepackedWeight(WeightView{WeightType::bf16, nullptr, 2, 3}), Error);
    EXPECT_THROW(PrepackedWeight(WeightView{WeightType::bf16, b.data(), 0, 3}), Error);
    EXPECT_NO_THROW(PrepackedWeight(WeightView{WeightType::bf16, b.data(), 2, 3}));
}

TEST(Matmul, EmptySumIsZeroOrKeepsAccumulator) {
    std::vector<float> Y = {1.f, 2.f, 3.f, 4.f};  // (2, 2)
    float dummy = 0.f;
    WeightView W{WeightType::bf16, &dummy, 2, 0};
    linear_forward(Y.data(), &dummy, W, 2, true);
    EXPECT_EQ(Y, (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
    linear_forward(Y.data(), &dummy, W, 2, false);
    EXPECT_EQ(Y, (std::vector<float>{0.f, 0.f, 0.f, 0.f}));
    WeightView bad{WeightType::f32, nullptr, 3, 3};
    EXPECT_THROW(linear_forward(Y.data(), &dummy, bad, 1), Error);
}

// The AMX path's packed operand (matmul_amx.h), element by element: tile
// (j, p) row r holds, for column c, the pair B[32p + 2r][16j + c],
// B[32p + 2r + 1][16j + c]; everything past the matrix is zero. Plain C++:
// runs on every CPU.
TEST(Matmul, AmxPackPlacesEveryElementInVnniOrder) {
    for (auto [N, K] : {std::pair<int64_t, int64_t>{1, 1}, {17, 33}, {40, 64}, {33, 95}}) {
        std::vector<bf16> w(N * K);
        for (int64_t i = 0; i < N * K; ++i) w[i] = float_to_bf16(static_cast<float>(i + 1));
        const WeightView W{WeightType::bf16, w.data(), N, K};
        for (AmxOperand op : {AmxOperand::forward, AmxOperand::backward_input}) {
            const AmxPack P = amx_pack(W, op);
            const bool fwd = op == AmxOperand::forward;
            ASSERT_EQ(P.k, fwd ? K : N);
            ASSERT_EQ(P.n, fwd ? N : K);
            EXPECT_EQ(P.kb, (P.k + 31) / 32);
            EXPECT_EQ(P.nb % 2, 0);
            EXPECT_GE(P.nb * 16, P.n);
            EXPECT_EQ(reinterpret_cast<uintptr_t>(P.tiles.get()) % 64, 0u);
            for (int64_t j = 0; j < P.nb; ++j)
                for (int64_t p = 0; p < P.kb; ++p)
                    for (int64_t r = 0; r < 16; ++r)
                        for (int64_t c = 0; c < 16; ++c)
                            for (int64_t i = 0; i < 2; ++i) {
                                const int64_t k = 32 * p + 2 * r + i, n = 16 * j + c;
                                const bf16 want = k < P.k && n < P.n ? (fwd ? w[n * K + k] : w[k * K + n]) : bf16{0};
                                ASSERT_EQ(P.tiles[(j * P.kb + p) * 512 + r * 32 + 2 * c + i], want)
                                    << (fwd ? "forward" : "backward_input") << " N=" << N << " K=" << K << " tile ("
                                    << j << ", " << p << ") row " << r << " column " << c << " pair " << i;
                            }
        }
    }
}

// The automatic path sends products through a frozen BF16 weight, decode
// (M ≤ kSmallM) included, to the AMX tiles exactly where they are granted and
// BF16 products are native; an unfrozen or FP32 weight, BF16 products as
// FP32, and a forced AMX path that cannot run all go to oneDNN. A frozen
// product that ran on tiles leaves the weight's VNNI copy behind.
TEST(Matmul, AmxPathTakenExactlyWhereItCanRun) {
    Philox rng(21, 0);
    const int64_t N = 96, K = 160, M = 64;
    TestWeight W = integer_weight(WeightType::bf16, N, K, 2, rng);
    PrepackedWeight packed(W.view());
    WeightView frozen = W.view();
    frozen.prepacked = &packed;
    std::printf("AMX tiles: %s; frozen M=%lld → %s, unfrozen → %s\n", matmul_has_amx() ? "granted" : "not here",
                static_cast<long long>(M), matmul_path_name(M, frozen), matmul_path_name(M, W.view()));
    EXPECT_EQ(matmul_has_amx(), matmul_has_avx512bf16() && unit_rates::request_amx_tiles(nullptr));
    std::string why;
    const bool amx = amx_frozen_products(&why);
    auto env_is = [](const char* name, const char* value) {
        const char* v = std::getenv(name);
        return v != nullptr && std::strcmp(v, value) == 0;
    };
    EXPECT_EQ(amx, matmul_has_amx() && bf16_products_native() && !env_is("PPOLAB_AMX", "off")) << why;
    if (!amx) {
        EXPECT_FALSE(why.empty());
    }
    EXPECT_STREQ(matmul_path_name(M, frozen), amx ? "amx" : "dnnl");
    EXPECT_STREQ(matmul_path_name(M, W.view()), "dnnl");
    // Without the tiles, the frozen base's decode reads the same VNNI pack
    // (`vdpbf16ps` where BF16 products are native, else FMA).
    const bool vnni = !amx && simd::simd_cpu_level() == simd::SimdLevel::avx512;
    const char* vnni_name = small_m_vnni_uses_dpbf16() ? "small_m_vnni_avx512" : "small_m_vnni_fma_avx512";
    EXPECT_EQ(small_m_vnni_uses_dpbf16(), matmul_has_avx512bf16() && bf16_products_native());
    {  // decode (M ≤ kSmallM): on tiles too, unless the weight is tiny (one row's work under kTinyWork)
        const int64_t K2 = 512;
        TestWeight W2 = integer_weight(WeightType::bf16, N, K2, 2, rng);
        PrepackedWeight packed2(W2.view());
        WeightView frozen2 = W2.view();
        frozen2.prepacked = &packed2;
        ASSERT_LT(N * K, kTinyWork);
        ASSERT_GE(N * K2, kTinyWork);
        for (int64_t m = 1; m <= kSmallM; ++m) {
            EXPECT_STREQ(matmul_path_name(m, frozen2), amx    ? "amx"
                                                       : vnni ? vnni_name
                                                              : matmul_path_name(m, N, K2))
                << "M=" << m;
            EXPECT_STREQ(matmul_path_name(m, frozen), "portable") << "M=" << m;
        }
        const int64_t m = 5;
        std::vector<float> X2 = exact_inputs(WeightType::bf16, m * K2, rng), want2(m * N), got2(m * N);
        linear_forward_reference(want2.data(), X2.data(), W2.view(), m);
        linear_forward(got2.data(), X2.data(), frozen2, m);
        ASSERT_TRUE(same_bits(got2, want2, N)) << "frozen decode on " << matmul_path_name(m, frozen2);
        EXPECT_EQ(packed2.amx_copies().forward != nullptr, amx || vnni)
            << "the frozen decode " << (amx || vnni ? "did not read" : "read") << " the VNNI pack";
    }
    {  // above kSmallM, BF16 products as FP32: a wide frozen weight on the VNNI pack with FMA, forward and
        // backward to the input (no oneDNN copy made), a narrow one (outputs or reduction under 512) on oneDNN
        PathGuard guard({MatmulPath::automatic, Bf16Products::f32});
        const bool wide_vnni = simd::simd_cpu_level() == simd::SimdLevel::avx512;  // no tiles as FP32
        for (auto [N3, K3] : {std::pair<int64_t, int64_t>{512, 512}, {600, 2100}, {511, 896}, {896, 128}}) {
            TestWeight W3 = gaussian_weight(WeightType::bf16, N3, K3, rng);
            PrepackedWeight packed3(W3.view());
            WeightView frozen3 = W3.view();
            frozen3.prepacked = &packed3;
            const bool wide = N3 >= 512 && K3 >= 512 && wide_vnni;
            EXPECT_STREQ(matmul_path_name(M, frozen3), wide ? "small_m_vnni_fma_avx512" : "dnnl")
                << "N=" << N3 << " K=" << K3;
            std::vector<float> X3 = gaussian(M * K3, rng), dY3 = gaussian(M * N3, rng);
            std::vector<float> y(M * N3), want_y(M * N3), dx(M * K3), want_dx(M * K3);
            linear_forward(y.data(), X3.data(), frozen3, M);
            linear_backward_input(dx.data(), dY3.data(), frozen3, M);
            linear_forward_reference(want_y.data(), X3.data(), W3.view(), M);
            linear_backward_input_reference(want_dx.data(), dY3.data(), W3.view(), M);
            if (wide) {  // the reference loops' sums, bit for bit, and only the VNNI packs made
                EXPECT_TRUE(same_bits(y, want_y, N3)) << "N=" << N3 << " K=" << K3;
                EXPECT_TRUE(same_bits(dx, want_dx, K3)) << "N=" << N3 << " K=" << K3;
                EXPECT_TRUE(packed3.amx_copies().forward != nullptr && packed3.amx_copies().backward_input != nullptr);
                EXPECT_EQ(packed3.bytes(),
                          packed3.amx_copies().forward->bytes() + packed3.amx_copies().backward_input->bytes());
            }
        }
    }
    {
        PathGuard guard({MatmulPath::automatic, Bf16Products::f32});
        EXPECT_STREQ(matmul_path_name(M, frozen), "dnnl");
        EXPECT_FALSE(amx_frozen_products(&why));
        if (amx_allowed()) {
            EXPECT_EQ(why, "BF16 products run as FP32");
        }
    }
    {
        PathGuard guard({MatmulPath::automatic, Bf16Products::native});
        EXPECT_STREQ(matmul_path_name(M, frozen), amx_allowed() ? "amx" : "dnnl");
    }
    {
        PathGuard guard({MatmulPath::amx, Bf16Products::native});
        EXPECT_STREQ(matmul_path_name(M, W.view()), matmul_has_amx() ? "amx" : "dnnl");
        TestWeight F = integer_weight(WeightType::f32, N, K, 1, rng);
        EXPECT_STREQ(matmul_path_name(M, F.view()), "dnnl");
    }
    std::vector<float> X = exact_inputs(WeightType::bf16, M * K, rng), want(M * N), got(M * N);
    linear_forward_reference(want.data(), X.data(), W.view(), M);
    linear_forward(got.data(), X.data(), frozen, M);
    ASSERT_TRUE(same_bits(got, want, N));
    const bool made = packed.amx_copies().forward != nullptr;
    EXPECT_EQ(made, amx) << "the frozen forward " << (amx ? "did not run" : "ran") << " on the AMX tiles";
    if (made) {
        EXPECT_GE(packed.bytes(), packed.amx_copies().forward->bytes());
    }
}

// The VNNI pack's kernels (`vdpbf16ps` where AVX-512 BF16 is there, and
// FMA): each output is one lane's sum over K in order, so Gaussian data give
// the same bytes on 1 and 2 threads and at any row count (up to and past
// kSmallM, partial column and row blocks).
TEST(Matmul, VnniSameBytesAtAnyThreadCountAndRowCount) {
    if (simd::simd_cpu_level() != simd::SimdLevel::avx512)
        GTEST_SKIP() << "no AVX-512 on this CPU: the path cannot run here";
    Philox rng(23, 0);
    for (Bf16Products mode : {Bf16Products::native, Bf16Products::f32})
        for (auto [N, K] : {std::pair<int64_t, int64_t>{200, 301}, {896, 896}, {130, 4864}, {1000, 64}}) {
            PathGuard guard({MatmulPath::small_m_vnni, mode});
            SCOPED_TRACE(small_m_vnni_uses_dpbf16() ? "vdpbf16ps" : "FMA");
            TestWeight W = gaussian_weight(WeightType::bf16, N, K, rng);
            PrepackedWeight packed(W.view());
            WeightView frozen = W.view();
            frozen.prepacked = &packed;
            const int64_t M = 43;
            std::vector<float> X = gaussian(M * K, rng);
            std::vector<float> y[2];
            const int before = omp_get_max_threads();
            for (int threads : {1, 2}) {
                omp_set_num_threads(threads);
                y[threads - 1].resize(M * N);
                linear_forward(y[threads - 1].data(), X.data(), frozen, M);
            }
            omp_set_num_threads(before);
            EXPECT_TRUE(same_bits(y[0], y[1], N)) << "N=" << N << " K=" << K;
            for (auto [first, rows] : {std::pair<int64_t, int64_t>{0, 1}, {3, 9}, {11, 32}, {42, 1}}) {
                std::vector<float> part(rows * N);
                linear_forward(part.data(), X.data() + first * K, W.view(), rows);  // unfrozen: packed per call
                EXPECT_TRUE(
                    same_bits(part, std::vector<float>(y[0].begin() + first * N, y[0].begin() + (first + rows) * N), N))
                    << "rows " << first << ".." << first + rows - 1 << " alone, N=" << N << " K=" << K;
            }
        }
}

// The VNNI pack read with FMA (BF16 products as FP32) does the reference
// loops' arithmetic exactly: exact products summed one by one in index order
// from zero, then added to the destination with accumulate. Gaussian data, so
// any other order or a lost product shows; odd K (the pack's padding pair),
// partial column blocks, every row count of a register block and past it;
// forward and backward to the input.
TEST(Matmul, VnniFmaIsTheReferenceBitForBit) {
    if (simd::simd_cpu_level() != simd::SimdLevel::avx512)
        GTEST_SKIP() << "no AVX-512 on this CPU: the path cannot run here";
    Philox rng(24, 0);
    PathGuard guard({MatmulPath::small_m_vnni, Bf16Products::f32});
    ASSERT_FALSE(small_m_vnni_uses_dpbf16());
    for (auto [N, K] : {std::pair<int64_t, int64_t>{1, 1}, {17, 3}, {200, 301}, {896, 896}, {130, 4864}, {49, 64}}) {
        TestWeight W = gaussian_weight(WeightType::bf16, N, K, rng);
        PrepackedWeight packed(W.view());
        WeightView frozen = W.view();
        frozen.prepacked = &packed;
        EXPECT_STREQ(matmul_path_name(1, frozen), "small_m_vnni_fma_avx512");
        for (int64_t M : {1, 3, 8, 11, 32, 77, 133})  // 133: above kFusedWideningBlocks' 128 rows
            for (bool acc : {false, true}) {
                const std::vector<float> X = gaussian(M * K, rng), Y0 = gaussian(M * N, rng);
                std::vector<float> want = Y0, got = Y0;
                linear_forward_reference(want.data(), X.data(), W.view(), M, acc);
                linear_forward(got.data(), X.data(), frozen, M, acc);
                EXPECT_TRUE(same_bits(got, want, N))
                    << "forward M=" << M << " N=" << N << " K=" << K << (acc ? " accumulate" : "");
                // Backward to the input on the pack of W (its pairs along N).
                const std::vector<float> dY = gaussian(M * N, rng), dX0 = gaussian(M * K, rng);
                std::vector<float> dwant = dX0, dgot = dX0;
                linear_backward_input_reference(dwant.data(), dY.data(), W.view(), M, acc);
                linear_backward_input(dgot.data(), dY.data(), frozen, M, acc);
                EXPECT_TRUE(same_bits(dgot, dwant, K))
                    << "backward_input M=" << M << " N=" << N << " K=" << K << (acc ? " accumulate" : "");
            }
    }
}

// The AMX path's sums depend on K alone: Gaussian data (any change of
// summation order shows) give the same bytes on 1 and 2 threads, at row
// counts that leave partial tiles, and each row block is what it is alone.
TEST(Matmul, AmxSameBytesAtAnyThreadCountAndRowCount) {
    if (!matmul_has_amx()) GTEST_SKIP() << "AMX tiles not granted on this CPU: the path cannot run here";
    Philox rng(22, 0);
    PathGuard guard({MatmulPath::amx, Bf16Products::native});
    for (auto [N, K] : {std::pair<int64_t, int64_t>{200, 300}, {896, 896}, {130, 4864}}) {
        TestWeight W = gaussian_weight(WeightType::bf16, N, K, rng);
        const int64_t M = 77;
        std::vector<float> X = gaussian(M * K, rng), dY = gaussian(M * N, rng);
        std::vector<float> y[2], dx[2];
        const int before = omp_get_max_threads();
        for (int threads : {1, 2}) {
            omp_set_num_threads(threads);
            y[threads - 1].resize(M * N);
            dx[threads - 1].resize(M * K);
            linear_forward(y[threads - 1].data(), X.data(), W.view(), M);
            linear_backward_input(dx[threads - 1].data(), dY.data(), W.view(), M);
        }
        omp_set_num_threads(before);
        EXPECT_TRUE(same_bits(y[0], y[1], N)) << "forward N=" << N << " K=" << K;
        EXPECT_TRUE(same_bits(dx[0], dx[1], K)) << "backward_input N=" << N << " K=" << K;
        // Rows 32..63 alone equal the same rows of the 77-row product.
        std::vector<float> part(32 * N);
        linear_forward(part.data(), X.data() + 32 * K, W.view(), 32);
        EXPECT_TRUE(same_bits(part, std::vector<float>(y[0].begin() + 32 * N, y[0].begin() + 64 * N), N))
            << "rows 32..63 alone, N=" << N << " K=" << K;
    }
}
