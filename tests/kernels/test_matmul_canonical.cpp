// test_matmul_canonical.cpp — the canonical products (numerics.h) equal the
// reference loops (matmul_reference.cpp: k ascending, one FP32 FMA per term
// from +0, BF16 products pair by pair with the odd term first, denormals
// flushed) bit for bit, on every instruction-set path this CPU can run
// (scalar, AVX2, AVX-512 with the frozen base's products as FP32 FMAs, and
// with `vdpbf16ps` where the CPU has AVX-512 BF16), at 1, 2 and 3 threads,
// for every row count
// (a row's bytes do not depend on the rows beside it), on adversarial data:
// ±0, denormals, values at BF16 rounding ties, huge and tiny exponents, and
// lengths that are not multiples of 8, 16 or 32.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_backend.h"
#include "kernels/matmul_reference.h"
#include "kernels/numerics.h"
#include "kernels/simd.h"
#include "util/rng.h"

using namespace ppolab;

namespace {

// Mostly Gaussian, with one element in eight drawn from the hard cases.
std::vector<float> adversarial(int64_t n, uint64_t seed) {
    Philox rng(seed, 11);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) {
        const double u = rng.uniform();
        const double g = rng.normal();
        const int kind = static_cast<int>(rng.uniform() * 64);
        switch (kind) {
            case 0: x = 0.f; break;
            case 1: x = -0.f; break;
            case 2: x = static_cast<float>(g * 1e-39); break;  // FP32 denormal
            case 3: x = static_cast<float>(g * 1e-20); break;  // products underflow
            case 4: x = static_cast<float>(g * 1e18); break;   // products near overflow
            case 5: {                                          // exactly halfway between two BF16 values
                uint32_t bits = (static_cast<uint32_t>(u * 65536.0) << 16) | 0x8000u;
                bits &= 0xbfffffffu;  // keep it finite
                std::memcpy(&x, &bits, 4);
                break;
            }
            case 6: x = std::ldexp(static_cast<float>(g), -126); break;  // near the smallest normal
            default: x = static_cast<float>(g);
        }
    }
    return v;
}

std::vector<bf16> to_bf16(const std::vector<float>& v) {
    std::vector<bf16> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = float_to_bf16(v[i]);
    return out;
}

// The paths this CPU can run: an instruction-set level, and at AVX-512
// whether BF16 products run as `vdpbf16ps` (native) or as FP32 FMAs.
struct Level {
    simd::SimdLevel simd;
    Bf16Products bf16;
};
std::vector<Level> levels() {
    std::vector<Level> out = {{simd::SimdLevel::portable, Bf16Products::f32}};
    if (simd::simd_cpu_level() >= simd::SimdLevel::avx2) out.push_back({simd::SimdLevel::avx2, Bf16Products::f32});
    if (simd::simd_cpu_level() >= simd::SimdLevel::avx512) {
        out.push_back({simd::SimdLevel::avx512, Bf16Products::f32});
        if (matmul_has_avx512bf16()) out.push_back({simd::SimdLevel::avx512, Bf16Products::native});
    }
    return out;
}
std::string level_name(Level l) {
    return l.simd == simd::SimdLevel::avx512 ? std::string("avx512") + (l.bf16 == Bf16Products::native ? "_bf16" : "")
           : l.simd == simd::SimdLevel::avx2 ? "avx2"
                                             : "scalar";
}

struct LevelGuard {
    simd::SimdLevel saved = simd::simd_level();
    int threads = omp_get_max_threads();
    LevelGuard() { numerics_set_mode(Numerics::canonical); }
    ~LevelGuard() {
        simd::simd_level() = saved;
        matmul_set_bf16_products(Bf16Products::automatic);
        omp_set_num_threads(threads);
    }
    static void set(Level l) {
        simd::simd_level() = l.simd;
        matmul_set_bf16_products(l.bf16);
    }
};

// The first differing element, or "" when the two are the same bytes.
std::string first_difference(const std::vector<float>& got, const std::vector<float>& want) {
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &want[i], 4) != 0) {
            uint32_t a, b;
            std::memcpy(&a, &got[i], 4);
            std::memcpy(&b, &want[i], 4);
            char buf[160];
            std::snprintf(buf, sizeof buf, "element %zu: %.9g (0x%08x), reference %.9g (0x%08x)", i, got[i], a, want[i],
                          b);
            return buf;
        }
    return "";
}

struct Shape {
    int64_t M, N, K;
};

enum class Product { forward, backward_input, backward_weight };

// Runs one product on every level and thread count; each must be the reference's bytes.
void check(Product product, Shape s, WeightType type, bool frozen, bool accumulate, uint64_t seed) {
    const std::vector<float> w32 = adversarial(s.N * s.K, seed);
    const std::vector<bf16> w16 = to_bf16(w32);
    WeightView W{type, type == WeightType::bf16 ? static_cast<const void*>(w16.data()) : w32.data(), s.N, s.K};
    std::unique_ptr<PrepackedWeight> pack;
    if (frozen) {
        pack = std::make_unique<PrepackedWeight>(W);
        W.prepacked = pack.get();
    }
    const int64_t in_n = product == Product::backward_input ? s.M * s.N : s.M * s.K;
    const std::vector<float> x = adversarial(in_n, seed + 1);
    const std::vector<float> g = adversarial(s.M * s.N, seed + 2);  // dY of the weight gradient
    const int64_t out_n = product == Product::forward          ? s.M * s.N
                          : product == Product::backward_input ? s.M * s.K
                                                               : s.N * s.K;
    const std::vector<float> start = adversarial(out_n, seed + 3);  // accumulate onto this
    auto run = [&](bool reference) {
        std::vector<float> y = accumulate || product == Product::backward_weight ? start : std::vector<float>(out_n);
        if (product == Product::forward)
            (reference ? linear_forward_reference : linear_forward)(y.data(), x.data(), W, s.M, accumulate);
        else if (product == Product::backward_input)
            (reference ? linear_backward_input_reference : linear_backward_input)(y.data(), x.data(), W, s.M,
                                                                                  accumulate);
        else if (reference) linear_backward_weight_reference(y.data(), g.data(), x.data(), s.M, s.N, s.K, type);
        else linear_backward_weight(y.data(), g.data(), x.data(), s.M, s.N, s.K, type);
        return y;
    };
    const std::vector<float> want = run(true);
    LevelGuard guard;
    for (Level level : levels())
        for (int threads : {1, 2, 3}) {
            LevelGuard::set(level);
            omp_set_num_threads(threads);
            const std::string diff = first_difference(run(false), want);
            EXPECT_EQ(diff, "") << "product " << static_cast<int>(product) << " M=" << s.M << " N=" << s.N
                                << " K=" << s.K << (type == WeightType::bf16 ? " bf16" : " f32")
                                << (frozen ? " frozen" : "") << (accumulate ? " accumulate" : "") << " on "
                                << level_name(level) << " (" << matmul_path_name(s.M, W) << ") at " << threads
                                << " threads";
        }
}

const Shape kShapes[] = {{1, 1, 1},    {1, 17, 33},  {2, 31, 15},  {3, 64, 257}, {7, 100, 96},
                         {8, 33, 896}, {9, 48, 513}, {31, 65, 40}, {33, 16, 17}, {64, 130, 300}};

TEST(MatmulCanonical, ForwardIsTheReferenceOnEveryPath) {
    uint64_t seed = 100;
    for (const Shape& s : kShapes)
        for (WeightType t : {WeightType::f32, WeightType::bf16}) {
            check(Product::forward, s, t, false, false, seed++);
            check(Product::forward, s, t, false, true, seed++);
            if (t == WeightType::bf16) check(Product::forward, s, t, true, s.M % 2 == 1, seed++);
        }
}

TEST(MatmulCanonical, BackwardInputIsTheReferenceOnEveryPath) {
    uint64_t seed = 200;
    for (const Shape& s : kShapes)
        for (WeightType t : {WeightType::f32, WeightType::bf16}) {
            check(Product::backward_input, s, t, false, s.M % 2 == 0, seed++);
            if (t == WeightType::bf16) check(Product::backward_input, s, t, true, s.M % 2 == 1, seed++);
        }
}

TEST(MatmulCanonical, WeightGradientIsTheReferenceOnEveryPath) {
    uint64_t seed = 300;
    for (const Shape& s : kShapes)
        for (WeightType t : {WeightType::f32, WeightType::bf16})
            check(Product::backward_weight, s, t, false, true, seed++);
}

// The seed's shapes: the longest reduction (4864, the MLP's down projection),
// and row counts around the blocking (1 to 513), on the frozen path too.
TEST(MatmulCanonical, SeedShapesAndManyRows) {
    check(Product::forward, {3, 40, 4864}, WeightType::bf16, true, false, 400);
    check(Product::forward, {5, 24, 4864}, WeightType::f32, false, true, 401);
    check(Product::backward_input, {4, 4864, 40}, WeightType::bf16, true, false, 402);
    check(Product::backward_weight, {300, 8, 24}, WeightType::f32, false, true, 403);
    check(Product::backward_weight, {65, 37, 70}, WeightType::bf16, false, true, 407);  // odd M
    check(Product::forward, {65, 37, 71}, WeightType::bf16, false, false, 408);         // packed per call
    check(Product::forward, {513, 20, 70}, WeightType::bf16, true, false, 404);
    check(Product::forward, {513, 37, 64}, WeightType::f32, false, false, 405);
    check(Product::backward_input, {130, 33, 520}, WeightType::bf16, false, true, 406);
}

// A row's bytes do not depend on the rows computed with it (batch
// invariance): each row of an M-row product equals the same row alone.
TEST(MatmulCanonical, RowsAreTheirRowAloneAtAnyRowCount) {
    LevelGuard guard;
    const int64_t N = 70, K = 130;
    const std::vector<float> w = adversarial(N * K, 500);
    const std::vector<bf16> wb = to_bf16(w);
    for (WeightType t : {WeightType::f32, WeightType::bf16}) {
        const WeightView W{t, t == WeightType::bf16 ? static_cast<const void*>(wb.data()) : w.data(), N, K};
        const int64_t M = 77;
        const std::vector<float> x = adversarial(M * K, 501);
        std::vector<float> all(M * N), one(N);
        linear_forward(all.data(), x.data(), W, M);
        for (int64_t m = 0; m < M; ++m) {
            linear_forward(one.data(), x.data() + m * K, W, 1);
            ASSERT_EQ(std::memcmp(one.data(), all.data() + m * N, N * sizeof(float)), 0) << "row " << m;
        }
    }
}

// Under canonical numerics the automatic choice takes only canonical paths:
// the canonical kernels, and the VNNI pack for the frozen base (and, from 64
// rows where `vdpbf16ps` runs, for a changing BF16 weight packed per call).
TEST(MatmulCanonical, AutomaticPathsAreCanonical) {
    LevelGuard guard;
    const std::vector<bf16> w(64 * 64, 0x3f80);
    WeightView W{WeightType::bf16, w.data(), 64, 64};
    PrepackedWeight pack(W);
    const bool dpbf16 = simd::simd_level() == simd::SimdLevel::avx512 && small_m_vnni_uses_dpbf16();
    for (int64_t M : {1, 32, 33, 63, 64, 512}) {
        const std::string plain = matmul_path_name(M, W);
        if (dpbf16 && M >= 64) EXPECT_EQ(plain, "small_m_vnni_avx512") << M;
        else EXPECT_EQ(plain.rfind("canonical_", 0), 0u) << plain;
        WeightView F = W;
        F.prepacked = &pack;
        const std::string frozen = matmul_path_name(M, F);
        if (simd::simd_level() == simd::SimdLevel::avx512)
            EXPECT_EQ(frozen, bf16_products_native() ? "small_m_vnni_avx512" : "small_m_vnni_fma_avx512");
        else EXPECT_EQ(frozen.rfind("canonical_", 0), 0u) << frozen;
    }
}

// Under canonical numerics the conversion to BF16 is float_to_bf16 exactly
// (ties to even, NaN kept quiet), on every lane and tail length.
TEST(MatmulCanonical, ConversionToBf16IsTheScalarRounding) {
    LevelGuard guard;
    std::vector<float> x = adversarial(1000, 600);
    const uint32_t specials[] = {0x7f800000u, 0xff800000u, 0x7fc00001u, 0xffbfffffu, 0x7f7fffffu,
                                 0x00000001u, 0x80008000u, 0x3f808000u, 0x3f818000u, 0x7f7f8000u};
    for (size_t i = 0; i < std::size(specials); ++i) std::memcpy(&x[i * 37], &specials[i], 4);
    for (int64_t n : {int64_t(1), int64_t(15), int64_t(16), int64_t(17), int64_t(1000)}) {
        std::vector<bf16> got(static_cast<size_t>(n));
        convert_to_bf16(got.data(), x.data(), n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], float_to_bf16(x[i])) << "element " << i << " of " << n;
    }
}

// The denormal policy (numerics.h): FTZ and DAZ on the main thread, on every
// thread of OpenMP's pool at 1 to 3 threads, and on a new std::thread; so a
// product of normal numbers whose exact result is denormal gives ±0, and a
// denormal input counts as zero.
TEST(MatmulCanonical, DenormalsAreFlushedOnEveryThread) {
    LevelGuard guard;
    EXPECT_TRUE(numerics_denormals_flushed());
    for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        int flushed = 0, seen = 0;
#pragma omp parallel reduction(+ : flushed, seen)
        {
            flushed += numerics_denormals_flushed() ? 1 : 0;
            seen += 1;
        }
        EXPECT_EQ(flushed, seen) << threads << " threads";
    }
    bool other = false;
    std::thread([&] { other = numerics_denormals_flushed(); }).join();
    EXPECT_TRUE(other);
    volatile float tiny = 1e-20f, denormal = 1e-40f, one = 1.f;
    EXPECT_EQ(tiny * tiny, 0.f);
    EXPECT_EQ(denormal + 0.f, 0.f);
    EXPECT_EQ(denormal * one, 0.f);
}

}  // namespace
