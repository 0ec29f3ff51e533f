// test_kernels_bitwise.cpp — one arithmetic on every CPU: each layer kernel
// gives the same bytes on every code path this CPU has (portable, AVX2,
// AVX-512: simd_level() lowered in turn) and at every OpenMP thread count
// (1, 2, 3), on adversarial data — lengths that are not multiples of 8, 16
// or 32, values with huge and tiny exponents, ±0 and denormals. The oracle
// is the portable path on one thread; the comparison is memcmp of every
// output. Also: simd::vexp / vexp_f64 equal their scalar twins
// canon_expf / canon_exp bit for bit, and attention_decode equals
// attention_forward's row of the same position bit for bit (decode = prefill),
// whatever the batch around it.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/lm_head.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/simd.h"
#include "kernels/swiglu.h"
#include "util/canon_math.h"
#include "util/error.h"
#include "util/rng.h"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

using namespace ppolab;
using simd::SimdLevel;

// The paths this CPU has, portable first.
std::vector<std::pair<SimdLevel, const char*>> cpu_paths() {
    std::vector<std::pair<SimdLevel, const char*>> p = {{SimdLevel::portable, "portable"}};
    if (simd::simd_cpu_level() >= SimdLevel::avx2) p.emplace_back(SimdLevel::avx2, "avx2");
    if (simd::simd_cpu_level() >= SimdLevel::avx512) p.emplace_back(SimdLevel::avx512, "avx512");
    return p;
}

// Runs `check` on every path this CPU has at 1 and 3 threads (its own
// expectations inside); the level is restored afterwards.
void on_every_path(const std::function<void()>& check) {
    SimdLevel& level = simd::simd_level();
    const SimdLevel saved = level;
    for (const auto& [path, name] : cpu_paths())
        for (int threads : {1, 3}) {
            SCOPED_TRACE(std::string(name) + ", threads " + std::to_string(threads));
            level = path;
            omp_set_num_threads(threads);
            check();
        }
    level = saved;
}

// The index of the first byte-different float of a and b, or −1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
    return -1;
}

// Runs `run` (all of a kernel's outputs, concatenated) on every path at 1, 2
// and 3 threads; every result must be the bytes of the portable path on one
// thread. The level and thread count are restored afterwards.
void expect_same_bits_everywhere(const std::function<std::vector<float>()>& run, const std::string& what) {
    SimdLevel& level = simd::simd_level();
    const SimdLevel saved_level = level;
    const int saved_threads = omp_get_max_threads();
    level = SimdLevel::portable;
    omp_set_num_threads(1);
    const std::vector<float> want = run();
    for (const auto& [path, name] : cpu_paths())
        for (int threads : {1, 2, 3}) {
            level = path;
            omp_set_num_threads(threads);
            const std::vector<float> got = run();
            const int64_t i = first_difference(got, want);
            EXPECT_EQ(i, -1) << what << " on " << name << " with " << threads << " threads: first difference at [" << i
                             << "]: " << (i >= 0 && i < static_cast<int64_t>(got.size()) ? got[i] : 0.f) << " vs "
                             << (i >= 0 && i < static_cast<int64_t>(want.size()) ? want[i] : 0.f);
        }
    level = saved_level;
    omp_set_num_threads(saved_threads);
}

// n adversarial floats: mostly uniform in [−scale, scale), with values of
// exponents from 2^-40 to 2^12 relative to scale, exact ±0, denormals, and
// repeats of one value (ties for maxima).
std::vector<float> adversarial(size_t n, uint64_t seed, float scale = 1.f) {
    Philox rng(seed, 11);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        const double u = 2 * rng.uniform() - 1;
        switch (rng.below(10)) {
            case 0: v[i] = static_cast<float>(std::ldexp(u, static_cast<int>(rng.below(53)) - 40)) * scale; break;
            case 1: v[i] = rng.below(2) ? 0.f : -0.f; break;
            case 2: v[i] = static_cast<float>(u * 1e-39); break;  // denormal
            case 3: v[i] = 0.75f * scale; break;
            default: v[i] = static_cast<float>(u) * scale;
        }
    }
    return v;
}

std::vector<float> concat(std::initializer_list<const std::vector<float>*> parts) {
    std::vector<float> out;
    for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
    return out;
}

const int64_t kLengths[] = {1, 7, 15, 17, 33, 100, 896};

// ---------------------------------------------------------------- exp twins

template <class V>
PPOLAB_SIMD_INLINE void vexp_lanes(const float* x, float* y, size_t n) {
    for (size_t i = 0; i + sizeof(V) / 4 <= n; i += sizeof(V) / 4)
        simd::vstore(y + i, simd::vexp(simd::vload<V>(x + i)));
}
PPOLAB_SIMD_AVX512 void vexp_avx512(const float* x, float* y, size_t n) { vexp_lanes<simd::vf16>(x, y, n); }
PPOLAB_SIMD_AVX2 void vexp_avx2(const float* x, float* y, size_t n) { vexp_lanes<simd::vf8>(x, y, n); }

template <class VD>
PPOLAB_SIMD_INLINE void vexp_f64_lanes(const double* x, double* y, size_t n) {
    for (size_t i = 0; i + sizeof(VD) / 8 <= n; i += sizeof(VD) / 8) {
        VD v;
        std::memcpy(&v, x + i, sizeof v);
        v = simd::vexp_f64(v);
        std::memcpy(y + i, &v, sizeof v);
    }
}
PPOLAB_SIMD_AVX512 void vexp_f64_avx512(const double* x, double* y, size_t n) { vexp_f64_lanes<simd::vd8>(x, y, n); }
PPOLAB_SIMD_AVX2 void vexp_f64_avx2(const double* x, double* y, size_t n) { vexp_f64_lanes<simd::vd4>(x, y, n); }

// Every 97th float bit pattern (44 million: all exponents, both signs, NaNs
// and infinities included) through vexp on each vector width equals
// canon_expf of it, byte for byte.
TEST(SimdExpTwins, FloatLanesEqualCanonExpf) {
    std::vector<float> x;
    for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 97) {
        const auto bits = static_cast<uint32_t>(b);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        x.push_back(f);
    }
    for (float f : {0.f, -0.f, -87.33654f, -87.3365479f, 88.37626f, 88.3762589f,
                    -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(), 1e-45f, -1e-45f})
        x.push_back(f);
    while (x.size() % 16) x.push_back(1.f);
    std::vector<float> want(x.size()), got(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = canon_expf(x[i]);
    auto check = [&](const char* path) {
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < x.size(); ++i) {
            const bool nan_both = std::isnan(got[i]) && std::isnan(want[i]);
            if (!nan_both && std::memcmp(&got[i], &want[i], 4) != 0) first = bad++ ? first : i;
        }
        EXPECT_EQ(bad, 0u) << path << ": first at x = " << x[first] << ": " << got[first] << " vs " << want[first];
    };
    if (simd::simd_cpu_level() >= SimdLevel::avx512) {
        vexp_avx512(x.data(), got.data(), x.size());
        check("avx512");
    }
    if (simd::simd_cpu_level() >= SimdLevel::avx2) {
        vexp_avx2(x.data(), got.data(), x.size());
        check("avx2");
    }
}

// Doubles over the whole range (random, every binade, the thresholds, ±0,
// denormals, ±∞) through vexp_f64 equal canon_exp of them, byte for byte.
TEST(SimdExpTwins, DoubleLanesEqualCanonExp) {
    std::vector<double> x = {0.0,
                             -0.0,
                             1.0,
                             -745.1332191019412,
                             -745.13321910194122,
                             -745.0,
                             -744.44,
                             -708.39,
                             -708.4,
                             709.0,
                             709.782712893384,
                             709.7827128933841,
                             710.0,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             4.9406564584124654e-324,
                             -4.9406564584124654e-324};
    Philox rng(21, 2);
    for (int i = 0; i < 200000; ++i) x.push_back(-760.0 + 1480.0 * rng.uniform());
    for (int e = -1074; e < 10; ++e) x.push_back(std::ldexp(1.0 + rng.uniform(), e)), x.push_back(-x.back());
    while (x.size() % 8) x.push_back(1.0);
    std::vector<double> want(x.size()), got(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = canon_exp(x[i]);
    auto check = [&](const char* path) {
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < x.size(); ++i)
            if (std::memcmp(&got[i], &want[i], 8) != 0) first = bad++ ? first : i;
        EXPECT_EQ(bad, 0u) << path << ": first at x = " << x[first] << ": " << got[first] << " vs " << want[first];
    };
    if (simd::simd_cpu_level() >= SimdLevel::avx512) {
        vexp_f64_avx512(x.data(), got.data(), x.size());
        check("avx512");
    }
    if (simd::simd_cpu_level() >= SimdLevel::avx2) {
        vexp_f64_avx2(x.data(), got.data(), x.size());
        check("avx2");
    }
}

// The 16-lane association itself: a sum that depends on the order (values
// 1, then many 2^-24's that round away one at a time) gives the tree's
// result, not the sequential one.
TEST(Lanes16, ClosesInTheFixedTree) {
    float a[16];
    for (int l = 0; l < 16; ++l) a[l] = static_cast<float>(l + 1);
    a[15] = 1e8f;
    // ((1+9)+(5+13)) + ((3+11)+(7+1e8)) ... as the tree: l += l+8, +4, +2, +1.
    float t[16];
    std::memcpy(t, a, sizeof a);
    for (int l = 0; l < 8; ++l) t[l] += t[l + 8];
    for (int l = 0; l < 4; ++l) t[l] += t[l + 4];
    for (int l = 0; l < 2; ++l) t[l] += t[l + 2];
    t[0] += t[1];
    EXPECT_EQ(simd::lanes16_close(a), t[0]);
}

// ---------------------------------------------------------------- kernels

TEST(KernelsBitwise, RmsNormForwardAndBackward) {
    for (int64_t C : kLengths)
        for (int64_t N : {1, 5, 64, 65, 200}) {
            const auto x = adversarial(N * C, 1 + C, 3.f), w = adversarial(C, 2 + C), g = adversarial(N * C, 3 + C);
            expect_same_bits_everywhere(
                [&] {
                    std::vector<float> out(N * C), rstd(N), dx(N * C), dw(C, 0.25f);
                    rmsnorm_forward<float>(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6);
                    rmsnorm_backward<float>(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), N, C);
                    return concat({&out, &rstd, &dx, &dw});
                },
                "rmsnorm N=" + std::to_string(N) + " C=" + std::to_string(C));
        }
}

TEST(KernelsBitwise, SwiGluForwardAndBackward) {
    std::vector<int64_t> lengths(std::begin(kLengths), std::end(kLengths));
    lengths.push_back(70001);  // several OpenMP blocks of 8192, a ragged last one
    for (int64_t n : lengths) {
        // Gates up to ±2^12·8 (e^-g saturates or vanishes), tiny, ±0 and denormal.
        const auto gate = adversarial(n, 4 + n, 8.f), up = adversarial(n, 5 + n, 2.f), g = adversarial(n, 6 + n);
        expect_same_bits_everywhere(
            [&] {
                std::vector<float> out(n), dgate(n), dup(n);
                swiglu_forward<float>(out.data(), gate.data(), up.data(), n);
                swiglu_backward<float>(dgate.data(), dup.data(), g.data(), gate.data(), up.data(), n);
                return concat({&out, &dgate, &dup});
            },
            "swiglu n=" + std::to_string(n));
    }
}

TEST(KernelsBitwise, RopeForwardAndBackward) {
    for (int64_t hd : {64, 128}) {
        const int64_t N = 37, heads = 3;
        std::vector<int32_t> pos(N);
        Philox rng(7, 1);
        for (auto& p : pos) p = static_cast<int32_t>(rng.below(32769));
        pos[0] = 0, pos[1] = 32768;
        const auto x = adversarial(N * heads * hd, 8 + hd, 4.f);
        expect_same_bits_everywhere(
            [&] {
                std::vector<float> f = x, b = x;
                rope_forward<float>(f.data(), pos.data(), N, heads, hd, 1000000.0);
                rope_backward<float>(b.data(), pos.data(), N, heads, hd, 1000000.0);
                return concat({&f, &b});
            },
            "rope hd=" + std::to_string(hd));
    }
}

TEST(KernelsBitwise, LmHeadRowPasses) {
    std::vector<int64_t> lengths(std::begin(kLengths), std::end(kLengths));
    lengths.push_back(151936);  // Qwen2.5's vocabulary
    for (int64_t n : lengths) {
        auto z = adversarial(n, 9 + n, 20.f);
        if (n > 3) z[n / 2] = -1e30f, z[n - 1] = 1e-42f;  // an entry whose exp is 0, a denormal
        expect_same_bits_everywhere(
            [&] {
                std::vector<float> lse = {row_logsumexp(z.data(), n)}, y = z;
                row_scaled_softmax(y.data(), n, lse[0], 0.375f);
                return concat({&lse, &y});
            },
            "lm_head row n=" + std::to_string(n));
    }
}

// ---------------------------------------------------------------- attention

struct AttnCase {
    int64_t B, T, nH, nKV, hd;
};

// Masks: row 0 all real, row 1 left-padded (a third), later rows more padding;
// one row with two branches after a shared prompt when T ≥ 6.
std::vector<uint8_t> attn_mask(const AttnCase& c) {
    std::vector<uint8_t> m(c.B * c.T, 1);
    for (int64_t b = 1; b < c.B; ++b)
        for (int64_t t = 0; t < std::min(c.T - 1, b * c.T / 3); ++t) m[b * c.T + t] = 0;
    if (c.B > 2 && c.T >= 6)
        for (int64_t t = c.T / 2; t < c.T; ++t) m[2 * c.T + t] = t < 3 * c.T / 4 ? 2 : 3;
    return m;
}

TEST(KernelsBitwise, AttentionForwardAndBackward) {
    const AttnCase cases[] = {{2, 1, 4, 2, 64},   {3, 7, 4, 2, 64},   {3, 17, 4, 2, 64}, {3, 33, 14, 2, 64},
                              {2, 15, 4, 1, 128}, {3, 33, 4, 2, 128}, {2, 9, 2, 1, 24}};
    for (const AttnCase& c : cases) {
        const AttentionShape s{c.B, c.T, c.nH, c.nKV, c.hd};
        const auto mask = attn_mask(c);
        const auto q = adversarial(c.B * c.T * c.nH * c.hd, 10 + c.T, 0.5f);
        const auto k = adversarial(c.B * c.T * c.nKV * c.hd, 11 + c.T, 0.5f);
        const auto v = adversarial(c.B * c.T * c.nKV * c.hd, 12 + c.T, 2.f);
        const auto g = adversarial(c.B * c.T * c.nH * c.hd, 13 + c.T);
        expect_same_bits_everywhere(
            [&] {
                std::vector<float> out(q.size()), probs(c.B * c.nH * c.T * c.T), dq(q.size()), dk(k.size()),
                    dv(v.size());
                attention_forward<float>(out.data(), probs.data(), q.data(), k.data(), v.data(), mask.data(), s);
                attention_backward<float>(dq.data(), dk.data(), dv.data(), g.data(), probs.data(), q.data(), k.data(),
                                          v.data(), mask.data(), s);
                return concat({&out, &probs, &dq, &dk, &dv});
            },
            "attention B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " nH=" + std::to_string(c.nH) +
                " hd=" + std::to_string(c.hd));
    }
}

// A row's bytes do not depend on its layout: the same tokens left-padded by
// any amount, or packed as a branch after a shared prompt beside another
// branch, give the same attention outputs as the plain row (a rollout
// re-scored in another batch gives the sampler's bits), on every path.
TEST(KernelsBitwise, AttentionIgnoresPaddingAndBranches) {
    const int64_t nH = 4, nKV = 2, hd = 64, P = 13, A = 21, Bn = 9;  // prompt, branch A, branch B lengths
    const int64_t qw = nH * hd, kw = nKV * hd;
    const auto q = adversarial((P + A + Bn) * qw, 40, 0.5f);
    const auto k = adversarial((P + A + Bn) * kw, 41, 0.5f);
    const auto v = adversarial((P + A + Bn) * kw, 42, 2.f);
    // Runs rows [0, P) + rows `tail` (offsets into q/k/v) after `pad` padding positions; returns the outputs of
    // the P + tail positions, and uses mask value `branch` for the tail.
    auto layout = [&](int64_t pad, const std::vector<std::pair<int64_t, int64_t>>& tails, int64_t want) {
        int64_t T = pad + P;
        for (auto [from, n] : tails) T += n;
        std::vector<float> qq(T * qw, 0.f), kk(T * kw, 0.f), vv(T * kw, 0.f);
        std::vector<uint8_t> m(T, 0);
        int64_t at = pad;
        auto put = [&](int64_t from, int64_t n, uint8_t mv) {
            std::copy_n(q.data() + from * qw, n * qw, qq.data() + at * qw);
            std::copy_n(k.data() + from * kw, n * kw, kk.data() + at * kw);
            std::copy_n(v.data() + from * kw, n * kw, vv.data() + at * kw);
            std::fill_n(m.data() + at, n, mv);
            at += n;
        };
        put(0, P, 1);
        int64_t start_want = 0;
        for (size_t i = 0; i < tails.size(); ++i) {
            if (static_cast<int64_t>(i) == want) start_want = at;
            put(tails[i].first, tails[i].second, tails.size() > 1 ? static_cast<uint8_t>(2 + i) : 1);
        }
        std::vector<float> out(T * qw), probs(nH * T * T);
        attention_forward<float>(out.data(), probs.data(), qq.data(), kk.data(), vv.data(), m.data(),
                                 {1, T, nH, nKV, hd});
        std::vector<float> mine(out.begin() + pad * qw, out.begin() + (pad + P) * qw);  // the prompt's rows
        const int64_t n = tails[static_cast<size_t>(want)].second;
        mine.insert(mine.end(), out.begin() + start_want * qw, out.begin() + (start_want + n) * qw);
        return mine;
    };
    SimdLevel& level = simd::simd_level();
    const SimdLevel saved = level;
    for (const auto& [path, name] : cpu_paths()) {
        SCOPED_TRACE(name);
        level = path;
        const auto plain_b = layout(0, {{P + A, Bn}}, 0);
        for (int64_t pad : {1, 5, 16, 17})
            EXPECT_EQ(first_difference(layout(pad, {{P + A, Bn}}, 0), plain_b), -1) << "left padding " << pad;
        EXPECT_EQ(first_difference(layout(3, {{P, A}, {P + A, Bn}}, 1), plain_b), -1) << "branch B after branch A";
        const auto plain_a = layout(0, {{P, A}}, 0);
        EXPECT_EQ(first_difference(layout(7, {{P, A}, {P + A, Bn}}, 0), plain_a), -1) << "branch A before branch B";
    }
    level = saved;
}

// Decode = prefill: for every position t of every row, attention_decode with
// the cache filled to S = t + 1 gives the bytes of attention_forward's row t,
// on every path (decode and forward each on the path in force) and thread
// count; the forward of one batch row alone gives the bytes of that row in
// the batch. G = nH/nKV of 7 (vector decode) and 9 (generic decode).
TEST(KernelsBitwise, AttentionDecodeEqualsForward) {
    const AttnCase cases[] = {{3, 19, 14, 2, 64}, {2, 17, 4, 2, 128}, {2, 11, 18, 2, 64}, {2, 5, 2, 1, 24}};
    for (const AttnCase& c : cases) {
        const AttentionShape s{c.B, c.T, c.nH, c.nKV, c.hd};
        auto mask = attn_mask(c);
        for (auto& m : mask) m = m ? 1 : 0;  // decode has no branches
        const int64_t S_max = c.T + 3, kv = c.nKV * c.hd, qw = c.nH * c.hd;
        const auto q = adversarial(c.B * c.T * qw, 20 + c.T, 0.5f);
        const auto k = adversarial(c.B * c.T * kv, 21 + c.T, 0.5f);
        const auto v = adversarial(c.B * c.T * kv, 22 + c.T, 2.f);
        auto check = [&] {
            std::vector<float> out(q.size()), probs(c.B * c.nH * c.T * c.T);
            attention_forward<float>(out.data(), probs.data(), q.data(), k.data(), v.data(), mask.data(), s);
            // One batch row alone.
            for (int64_t b = 0; b < c.B; ++b) {
                std::vector<float> ob(c.T * qw), pb(c.nH * c.T * c.T);
                attention_forward<float>(ob.data(), pb.data(), q.data() + b * c.T * qw, k.data() + b * c.T * kv,
                                         v.data() + b * c.T * kv, mask.data() + b * c.T, {1, c.T, c.nH, c.nKV, c.hd});
                EXPECT_EQ(std::memcmp(ob.data(), out.data() + b * c.T * qw, ob.size() * 4), 0) << "row " << b;
            }
            std::vector<float> kc(c.B * S_max * kv, 7.f), vc(c.B * S_max * kv, -7.f);
            std::vector<uint8_t> cm(c.B * S_max, 1);
            for (int64_t b = 0; b < c.B; ++b) {
                std::copy_n(k.data() + b * c.T * kv, c.T * kv, kc.data() + b * S_max * kv);
                std::copy_n(v.data() + b * c.T * kv, c.T * kv, vc.data() + b * S_max * kv);
                std::copy_n(mask.data() + b * c.T, c.T, cm.data() + b * S_max);
            }
            for (int64_t t = 0; t < c.T; ++t) {
                std::vector<float> qt(c.B * qw), ot(c.B * qw, 5.f);
                for (int64_t b = 0; b < c.B; ++b) std::copy_n(q.data() + (b * c.T + t) * qw, qw, qt.data() + b * qw);
                attention_decode(ot.data(), qt.data(), kc.data(), vc.data(), cm.data(), c.B, t + 1, S_max, c.nH, c.nKV,
                                 c.hd);
                for (int64_t b = 0; b < c.B; ++b)
                    EXPECT_EQ(std::memcmp(ot.data() + b * qw, out.data() + (b * c.T + t) * qw, qw * 4), 0)
                        << "decode vs forward, row " << b << " position " << t << ", G = " << c.nH / c.nKV
                        << ", hd = " << c.hd;
            }
        };
        on_every_path(check);
    }
}

// A prefix tree in one packed row (attention_tree): each token's output is
// the bytes of the last row of attention_forward over its path alone (the
// ancestors, then itself), on every path and thread count. G = nH/nKV of 2
// and 7 (vector tree kernel) and 9 (gathered into attention_decode).
TEST(KernelsBitwise, AttentionTreeEqualsEachPathAlone) {
    struct TreeCase {
        int64_t T, nH, nKV, hd;
    };
    for (const TreeCase& c : {TreeCase{37, 4, 2, 64}, TreeCase{29, 14, 2, 24}, TreeCase{23, 18, 2, 16}}) {
        std::vector<int32_t> parent(c.T);
        Philox rng(static_cast<uint64_t>(c.T), 3);
        for (int64_t t = 0; t < c.T; ++t)  // a chain of 6 (the prompt), then random branching
            parent[t] = t == 0 ? -1 : t < 6 ? static_cast<int32_t>(t - 1) : static_cast<int32_t>(5 + rng.below(t - 5));
        const int64_t kv = c.nKV * c.hd, qw = c.nH * c.hd;
        const auto q = adversarial(c.T * qw, 30 + c.T, 0.5f);
        const auto k = adversarial(c.T * kv, 31 + c.T, 0.5f);
        const auto v = adversarial(c.T * kv, 32 + c.T, 2.f);
        auto check = [&] {
            std::vector<float> out(q.size(), 9.f);
            attention_tree(out.data(), q.data(), k.data(), v.data(), parent.data(), c.T, c.nH, c.nKV, c.hd);
            for (int64_t t = 0; t < c.T; ++t) {
                std::vector<int64_t> path;
                for (int64_t a = t; a >= 0; a = parent[a]) path.insert(path.begin(), a);
                const int64_t n = static_cast<int64_t>(path.size());
                std::vector<float> qa(n * qw), ka(n * kv), va(n * kv), oa(n * qw), pa(c.nH * n * n);
                for (int64_t i = 0; i < n; ++i) {
                    std::copy_n(q.data() + path[i] * qw, qw, qa.data() + i * qw);
                    std::copy_n(k.data() + path[i] * kv, kv, ka.data() + i * kv);
                    std::copy_n(v.data() + path[i] * kv, kv, va.data() + i * kv);
                }
                const std::vector<uint8_t> mask(n, 1);
                attention_forward<float>(oa.data(), pa.data(), qa.data(), ka.data(), va.data(), mask.data(),
                                         {1, n, c.nH, c.nKV, c.hd});
                EXPECT_EQ(std::memcmp(out.data() + t * qw, oa.data() + (n - 1) * qw, qw * 4), 0)
                    << "token " << t << " (depth " << n - 1 << "), G = " << c.nH / c.nKV << ", hd = " << c.hd;
            }
        };
        on_every_path(check);
    }
    std::vector<float> x(4 * 64);
    const int32_t bad[] = {-1, 0, 2, 1};  // token 2's parent is itself
    EXPECT_THROW(attention_tree(x.data(), x.data(), x.data(), x.data(), bad, 4, 1, 1, 64), Error);
}

}  // namespace
