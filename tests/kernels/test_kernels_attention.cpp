// Attention: finite-difference gradients (double), float against double,
// padding semantics, and the KV-cache decode against the full forward.
// The softmax(q kᵀ/√d + mask) v definition itself is checked against
// PyTorch in test_kernels_oracle.
#include "kernels/attention.h"

#include <cstring>
#include <string>
#include <type_traits>
#include "test_kernels_common.h"
#include "util/error.h"

using namespace ppolab;

namespace {

// q (B, T, nH, hd); k, v (B, T, nKV, hd); mask (B, T) with `pad[b]` leading zeros.
struct Problem {
    AttentionShape s;
    std::vector<double> q, k, v;
    std::vector<uint8_t> mask;
    Problem(AttentionShape shape, std::vector<int64_t> pad, uint64_t seed) : s(shape) {
        q = kt::random_vec(s.B * s.T * s.nH * s.hd, seed, -1.5, 1.5);
        k = kt::random_vec(s.B * s.T * s.nKV * s.hd, seed + 1, -1.5, 1.5);
        v = kt::random_vec(s.B * s.T * s.nKV * s.hd, seed + 2);
        mask.assign(s.B * s.T, 1);
        for (int64_t b = 0; b < s.B; ++b)
            for (int64_t t = 0; t < pad[b]; ++t) mask[b * s.T + t] = 0;
    }
    size_t out_size() const { return s.B * s.T * s.nH * s.hd; }
    size_t probs_size() const { return s.B * s.nH * s.T * s.T; }
    template <typename T>
    std::vector<T> forward(std::vector<T>* probs = nullptr) const {
        std::vector<T> out(out_size(), T(7)), p(probs_size(), T(7));  // 7: must be overwritten
        auto qc = kt::cast<T>(q), kc = kt::cast<T>(k), vc = kt::cast<T>(v);
        attention_forward<T>(out.data(), p.data(), qc.data(), kc.data(), vc.data(), mask.data(), s);
        if (probs) *probs = p;
        return out;
    }
};

}  // namespace

TEST(Attention, GradientsMatchFiniteDifferences) {
    // Two rows, the second left-padded by 2; 4 query heads over 2 KV heads (GQA).
    Problem pr({2, 5, 4, 2, 4}, {0, 2}, 10);
    auto probe = kt::random_vec(pr.out_size(), 20);
    // The probe also weighs padded rows: their output is 0, so the FD gradient ignores it and
    // the analytic one must too.
    auto loss = [&] { return kt::dot(pr.forward<double>(), probe); };
    std::vector<double> probs;
    pr.forward<double>(&probs);
    std::vector<double> dq(pr.q.size(), 9), dk(pr.k.size(), 9), dv(pr.v.size(), 9);  // overwritten
    attention_backward<double>(dq.data(), dk.data(), dv.data(), probe.data(), probs.data(), pr.q.data(), pr.k.data(),
                               pr.v.data(), pr.mask.data(), pr.s);
    // h = 1e-6: truncation h²/6·|L'''| ~ 1e-12, rounding ε·|L|/h ~ 1e-9 (|L| ≲ 10);
    // gradients are O(1): 1e-7 absolute + 1e-6 relative.
    kt::expect_close(dq, kt::numeric_grad(pr.q, loss), 1e-7, 1e-6, "dq");
    kt::expect_close(dk, kt::numeric_grad(pr.k, loss), 1e-7, 1e-6, "dk");
    kt::expect_close(dv, kt::numeric_grad(pr.v, loss), 1e-7, 1e-6, "dv");
    // Padded positions receive exactly zero gradient.
    for (int64_t t = 0; t < 2; ++t) {
        for (int64_t i = 0; i < 4 * 4; ++i) EXPECT_EQ(dq[((1 * 5 + t) * 4) * 4 + i], 0.0) << "dq pad t=" << t;
        for (int64_t i = 0; i < 2 * 4; ++i) {
            EXPECT_EQ(dk[((1 * 5 + t) * 2) * 4 + i], 0.0) << "dk pad t=" << t;
            EXPECT_EQ(dv[((1 * 5 + t) * 2) * 4 + i], 0.0) << "dv pad t=" << t;
        }
    }
}

TEST(Attention, ProbabilitiesAreCausalMaskedAndNormalised) {
    kt::for_each_simd_path([&] {
        Problem pr({2, 6, 2, 1, 8}, {0, 3}, 30);
        std::vector<double> probs;
        std::vector<float> pf;
        auto out = pr.forward<double>(&probs);
        auto outf = pr.forward<float>(&pf);  // the vectorised float path: exact zeros too
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t h = 0; h < 2; ++h)
                for (int64_t t = 0; t < 6; ++t) {
                    const double* p = &probs[((b * 2 + h) * 6 + t) * 6];
                    double sum = 0;
                    for (int64_t j = 0; j < 6; ++j) {
                        if (j > t || !pr.mask[b * 6 + j] || !pr.mask[b * 6 + t]) {
                            EXPECT_EQ(p[j], 0.0) << b << h << t << j;
                            EXPECT_EQ(pf[((b * 2 + h) * 6 + t) * 6 + j], 0.f) << "float " << b << h << t << j;
                        }
                        sum += p[j];
                    }
                    EXPECT_NEAR(sum, pr.mask[b * 6 + t] ? 1.0 : 0.0, 1e-14);
                    if (!pr.mask[b * 6 + t]) {
                        for (int64_t d = 0; d < 8; ++d) {
                            EXPECT_EQ(out[((b * 6 + t) * 2 + h) * 8 + d], 0.0);
                            EXPECT_EQ(outf[((b * 6 + t) * 2 + h) * 8 + d], 0.f);
                        }
                    }
                }
    });
}

TEST(Attention, PaddedRowsEqualUnpaddedRows) {
    kt::for_each_simd_path([&] {
        // Row b of a batch holds the first T − pad[b] tokens of one sequence behind
        // pad[b] garbage positions; each row must give what an unpadded run of
        // those tokens gives — outputs and gradients — in the engine's float path.
        const int64_t Tn = 9, nH = 6, nKV = 2, hd = 8, B = 3;
        const std::vector<int64_t> pad = {4, 1, 0};
        Problem batch({B, Tn, nH, nKV, hd}, pad, 50);  // garbage everywhere to start with
        Problem base({1, Tn, nH, nKV, hd}, {0}, 60);
        auto dout_base = kt::random_vec(base.out_size(), 70);
        auto dout = kt::random_vec(batch.out_size(), 71, -50, 50);  // garbage at padded rows
        const int64_t qrow = nH * hd, kvrow = nKV * hd;
        for (int64_t b = 0; b < B; ++b)
            for (int64_t t = pad[b]; t < Tn; ++t) {
                const int64_t src = t - pad[b];
                std::copy_n(&base.q[src * qrow], qrow, &batch.q[(b * Tn + t) * qrow]);
                std::copy_n(&base.k[src * kvrow], kvrow, &batch.k[(b * Tn + t) * kvrow]);
                std::copy_n(&base.v[src * kvrow], kvrow, &batch.v[(b * Tn + t) * kvrow]);
                std::copy_n(&dout_base[src * qrow], qrow, &dout[(b * Tn + t) * qrow]);
            }
        std::vector<float> probs;
        auto out = batch.forward<float>(&probs);
        std::vector<float> dq(batch.q.size()), dk(batch.k.size()), dv(batch.v.size());
        {
            auto q = kt::cast<float>(batch.q), k = kt::cast<float>(batch.k), v = kt::cast<float>(batch.v);
            auto g = kt::cast<float>(dout);
            attention_backward<float>(dq.data(), dk.data(), dv.data(), g.data(), probs.data(), q.data(), k.data(),
                                      v.data(), batch.mask.data(), batch.s);
        }
        for (int64_t b = 0; b < B; ++b) {
            const int64_t L = Tn - pad[b];
            Problem one({1, L, nH, nKV, hd}, {0}, 80);
            one.q.assign(base.q.begin(), base.q.begin() + L * qrow);
            one.k.assign(base.k.begin(), base.k.begin() + L * kvrow);
            one.v.assign(base.v.begin(), base.v.begin() + L * kvrow);
            std::vector<float> p1;
            auto out1 = one.forward<float>(&p1);
            std::vector<float> dq1(L * qrow), dk1(L * kvrow), dv1(L * kvrow);
            auto q = kt::cast<float>(one.q), k = kt::cast<float>(one.k), v = kt::cast<float>(one.v);
            std::vector<float> g(dout_base.begin(), dout_base.begin() + L * qrow);
            attention_backward<float>(dq1.data(), dk1.data(), dv1.data(), g.data(), p1.data(), q.data(), k.data(),
                                      v.data(), one.mask.data(), one.s);
            auto slice = [&](const std::vector<float>& x, int64_t row, int64_t from, int64_t n) {
                return std::vector<float>(x.begin() + (b * Tn + from) * row, x.begin() + (b * Tn + from + n) * row);
            };
            // Same real tokens, same operations; only the vector lanes a row lands in may
            // change the order of float sums: 1e-6.
            const std::string tag = " (row " + std::to_string(b) + ", pad " + std::to_string(pad[b]) + ")";
            kt::expect_close(slice(out, qrow, pad[b], L), out1, 1e-6, 1e-5, "out" + tag);
            kt::expect_close(slice(dq, qrow, pad[b], L), dq1, 1e-6, 1e-5, "dq" + tag);
            kt::expect_close(slice(dk, kvrow, pad[b], L), dk1, 1e-6, 1e-5, "dk" + tag);
            kt::expect_close(slice(dv, kvrow, pad[b], L), dv1, 1e-6, 1e-5, "dv" + tag);
            const std::vector<float> zq(pad[b] * qrow, 0.f), zkv(pad[b] * kvrow, 0.f);
            kt::expect_close(slice(out, qrow, 0, pad[b]), zq, 0, 0, "out at padding" + tag);
            kt::expect_close(slice(dq, qrow, 0, pad[b]), zq, 0, 0, "dq at padding" + tag);
            kt::expect_close(slice(dk, kvrow, 0, pad[b]), zkv, 0, 0, "dk at padding" + tag);
            kt::expect_close(slice(dv, kvrow, 0, pad[b]), zkv, 0, 0, "dv at padding" + tag);
        }
    });
}

// Branches (packed pairs, attention.h): one row [pad 2 | prefix 5 | A 4 (mask
// 2) | B 3 (mask 3)] gives, token for token, what the rows [prefix | A] and
// [prefix | B] give apart: outputs, probabilities (zero towards the other
// branch), and gradients — the prefix's dk/dv the sum of both rows', with
// the prefix's upstream gradient given once (row A). hd 64: the AVX-512
// path; hd 24: AVX2; hd 6: the generic loops; float and double.
template <typename T>
void check_branches(int64_t hd, uint64_t seed) {
    const int64_t pad = 2, P = 5, A = 4, Bn = 3, Tn = pad + P + A + Bn, nH = 4, nKV = 2;
    const AttentionShape packed{1, Tn, nH, nKV, hd};
    auto q = kt::cast<T>(kt::random_vec(Tn * nH * hd, seed, -1.5, 1.5));
    auto k = kt::cast<T>(kt::random_vec(Tn * nKV * hd, seed + 1, -1.5, 1.5));
    auto v = kt::cast<T>(kt::random_vec(Tn * nKV * hd, seed + 2));
    auto g = kt::cast<T>(kt::random_vec(Tn * nH * hd, seed + 3));
    std::vector<uint8_t> mask(Tn, 0);
    for (int64_t t = pad; t < Tn; ++t) mask[t] = t < pad + P ? 1 : t < pad + P + A ? 2 : 3;
    std::vector<T> out(Tn * nH * hd), probs(Tn * Tn * nH), dq(q.size()), dk(k.size()), dv(v.size());
    attention_forward<T>(out.data(), probs.data(), q.data(), k.data(), v.data(), mask.data(), packed);
    attention_backward<T>(dq.data(), dk.data(), dv.data(), g.data(), probs.data(), q.data(), k.data(), v.data(),
                          mask.data(), packed);
    // A separate row: the packed tokens `idx` (prefix, then one branch).
    auto row = [&](const std::vector<int64_t>& idx, bool prefix_grad) {
        const int64_t n = static_cast<int64_t>(idx.size());
        const AttentionShape s{1, n, nH, nKV, hd};
        std::vector<T> rq, rk, rv, rg;
        for (int64_t t : idx) {
            rq.insert(rq.end(), q.begin() + t * nH * hd, q.begin() + (t + 1) * nH * hd);
            rk.insert(rk.end(), k.begin() + t * nKV * hd, k.begin() + (t + 1) * nKV * hd);
            rv.insert(rv.end(), v.begin() + t * nKV * hd, v.begin() + (t + 1) * nKV * hd);
            const bool in_prefix = t < pad + P;
            for (int64_t i = 0; i < nH * hd; ++i) rg.push_back(in_prefix && !prefix_grad ? T(0) : g[t * nH * hd + i]);
        }
        std::vector<uint8_t> m(n, 1);
        std::vector<T> o(n * nH * hd), p(n * n * nH), gq(rq.size()), gk(rk.size()), gv(rv.size());
        attention_forward<T>(o.data(), p.data(), rq.data(), rk.data(), rv.data(), m.data(), s);
        attention_backward<T>(gq.data(), gk.data(), gv.data(), rg.data(), p.data(), rq.data(), rk.data(), rv.data(),
                              m.data(), s);
        return std::vector<std::vector<T>>{o, gq, gk, gv, p};
    };
    std::vector<int64_t> ia, ib;
    for (int64_t t = pad; t < pad + P + A; ++t) ia.push_back(t);
    for (int64_t t = pad; t < pad + P; ++t) ib.push_back(t);
    for (int64_t t = pad + P + A; t < Tn; ++t) ib.push_back(t);
    const auto ra = row(ia, true), rb = row(ib, false);
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
    auto pick = [&](const std::vector<T>& x, int64_t t, int64_t w) {
        return std::vector<T>(x.begin() + t * w, x.begin() + (t + 1) * w);
    };
    for (size_t i = 0; i < ia.size(); ++i) {  // prefix and branch A
        const int64_t t = ia[i];
        const std::string at = " hd " + std::to_string(hd) + " token " + std::to_string(t);
        kt::expect_close(pick(out, t, nH * hd), pick(ra[0], i, nH * hd), tol, tol, "out" + at);
        kt::expect_close(pick(dq, t, nH * hd), pick(ra[1], i, nH * hd), tol, tol, "dq" + at);
        std::vector<T> wk = pick(ra[2], i, nKV * hd), wv = pick(ra[3], i, nKV * hd);
        if (t < pad + P)  // the prefix also serves branch B
            for (int64_t d = 0; d < nKV * hd; ++d) wk[d] += rb[2][i * nKV * hd + d], wv[d] += rb[3][i * nKV * hd + d];
        kt::expect_close(pick(dk, t, nKV * hd), wk, tol, tol, "dk" + at);
        kt::expect_close(pick(dv, t, nKV * hd), wv, tol, tol, "dv" + at);
    }
    for (size_t i = P; i < ib.size(); ++i) {  // branch B
        const int64_t t = ib[i];
        const std::string at = " hd " + std::to_string(hd) + " token " + std::to_string(t);
        kt::expect_close(pick(out, t, nH * hd), pick(rb[0], i, nH * hd), tol, tol, "out" + at);
        kt::expect_close(pick(dq, t, nH * hd), pick(rb[1], i, nH * hd), tol, tol, "dq" + at);
        kt::expect_close(pick(dk, t, nKV * hd), pick(rb[2], i, nKV * hd), tol, tol, "dk" + at);
        kt::expect_close(pick(dv, t, nKV * hd), pick(rb[3], i, nKV * hd), tol, tol, "dv" + at);
        for (int64_t h = 0; h < nH; ++h)
            for (int64_t j = pad + P; j < pad + P + A; ++j)
                EXPECT_EQ(probs[(h * Tn + t) * Tn + j], T(0)) << "branch B sees branch A" << at;
    }
}

TEST(Attention, BranchesEqualSeparateRows) {
    kt::for_each_simd_path([&] {
        for (int64_t hd : {64, 24, 6}) {
            check_branches<float>(hd, 300 + hd);
            check_branches<double>(hd, 400 + hd);
        }
    });
}

class AttentionFloat : public ::testing::TestWithParam<AttentionShape> {};

// hd = 64 takes the AVX-512 path where the CPU has it, hd = 24 the AVX2 path,
// hd = 6 the generic loops; T is not a multiple of any block size.
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionFloat,
                         ::testing::Values(AttentionShape{4, 40, 14, 2, 64}, AttentionShape{4, 37, 4, 2, 24},
                                           AttentionShape{4, 11, 4, 4, 6}));

TEST_P(AttentionFloat, MatchesDouble) {
    kt::for_each_simd_path([&] {
        // Threaded path, GQA, several padding lengths: row 2 is padding but for its last
        // token, row 3 is nothing but padding.
        const AttentionShape shape = GetParam();
        Problem pr(shape, {0, 7, shape.T - 1, shape.T}, 90);
        auto g = kt::random_vec(pr.out_size(), 91);
        std::vector<double> pd;
        std::vector<float> pf;
        auto od = pr.forward<double>(&pd);
        auto of = pr.forward<float>(&pf);
        // Dot products of 64 float terms and softmax over ≤ 40 scores: ~1e-6 relative.
        kt::expect_close(of, od, 2e-6, 1e-5, "out (float)");
        kt::expect_close(pf, pd, 1e-6, 1e-5, "probs (float)");
        std::vector<double> dq(pr.q.size()), dk(pr.k.size()), dv(pr.v.size());
        attention_backward<double>(dq.data(), dk.data(), dv.data(), g.data(), pd.data(), pr.q.data(), pr.k.data(),
                                   pr.v.data(), pr.mask.data(), pr.s);
        std::vector<float> dqf(pr.q.size()), dkf(pr.k.size()), dvf(pr.v.size());
        auto q = kt::cast<float>(pr.q), k = kt::cast<float>(pr.k), v = kt::cast<float>(pr.v), gf = kt::cast<float>(g);
        attention_backward<float>(dqf.data(), dkf.data(), dvf.data(), gf.data(), pf.data(), q.data(), k.data(),
                                  v.data(), pr.mask.data(), pr.s);
        // dk/dv sum over up to 7 heads × 40 rows: a few 1e-6 on values of size ~1.
        kt::expect_close(dqf, dq, 5e-6, 1e-5, "dq (float)");
        kt::expect_close(dkf, dk, 5e-6, 1e-5, "dk (float)");
        kt::expect_close(dvf, dv, 5e-6, 1e-5, "dv (float)");
    });
}

struct DecodeCase {
    int64_t S, S_max, nH, nKV, hd;
};

class AttentionDecode : public ::testing::TestWithParam<DecodeCase> {};

// 7 query heads per KV head (Qwen2.5) on AVX-512/AVX2, hd = 24 (AVX2 only), a
// cache shorter than one block of 4 positions, and 9 heads per KV head (more
// than the 8 lanes of the fast path: generic loops).
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionDecode,
                         ::testing::Values(DecodeCase{11, 16, 14, 2, 64}, DecodeCase{10, 13, 4, 2, 24},
                                           DecodeCase{3, 3, 2, 1, 16}, DecodeCase{7, 9, 18, 2, 16}));

TEST_P(AttentionDecode, EqualsLastRowOfForward) {
    kt::for_each_simd_path([&] {
        // The cache is wider than the filled part (S_max > S); the cache beyond S is garbage.
        const auto [S, S_max, nH, nKV, hd] = GetParam();
        const int64_t B = 3;
        Problem pr({B, S, nH, nKV, hd}, {0, S / 2, S - 1}, 100);  // row 2: only the new token is real
        std::vector<float> probs;
        auto full = pr.forward<float>(&probs);
        auto kc = kt::cast<float>(kt::random_vec(B * S_max * nKV * hd, 101, -9, 9));
        auto vc = kt::cast<float>(kt::random_vec(B * S_max * nKV * hd, 102, -9, 9));
        std::vector<uint8_t> cmask(B * S_max, 1);  // 1 beyond S: must not be read
        std::vector<float> q(B * nH * hd);
        for (int64_t b = 0; b < B; ++b) {
            for (int64_t t = 0; t < S; ++t) {
                for (int64_t i = 0; i < nKV * hd; ++i) {
                    kc[(b * S_max + t) * nKV * hd + i] = static_cast<float>(pr.k[(b * S + t) * nKV * hd + i]);
                    vc[(b * S_max + t) * nKV * hd + i] = static_cast<float>(pr.v[(b * S + t) * nKV * hd + i]);
                }
                cmask[b * S_max + t] = pr.mask[b * S + t];
            }
            for (int64_t i = 0; i < nH * hd; ++i)
                q[b * nH * hd + i] = static_cast<float>(pr.q[(b * S + S - 1) * nH * hd + i]);
        }
        std::vector<float> out(B * nH * hd, 5.f);
        attention_decode(out.data(), q.data(), kc.data(), vc.data(), cmask.data(), B, S, S_max, nH, nKV, hd);
        std::vector<float> last;
        for (int64_t b = 0; b < B; ++b)
            last.insert(last.end(), full.begin() + (b * S + S - 1) * nH * hd, full.begin() + (b * S + S) * nH * hd);
        // Decode = prefill: the same scores, lanes and P·V order (attention.cpp), so the same bytes.
        ASSERT_EQ(out.size(), last.size());
        EXPECT_EQ(std::memcmp(out.data(), last.data(), out.size() * sizeof(float)), 0) << "decode vs last forward row";

        // A padded new token (cache_mask at S−1 is 0) outputs zeros, like a padded forward row.
        cmask[0 * S_max + S - 1] = 0;
        attention_decode(out.data(), q.data(), kc.data(), vc.data(), cmask.data(), B, S, S_max, nH, nKV, hd);
        for (int64_t i = 0; i < nH * hd; ++i) ASSERT_EQ(out[i], 0.f);
        EXPECT_THROW(attention_decode(out.data(), q.data(), kc.data(), vc.data(), cmask.data(), B, S_max + 1, S_max, nH,
                                      nKV, hd),
                     Error);
    });
}

TEST(Attention, RejectsBadShapes) {
    std::vector<float> x(64);
    std::vector<uint8_t> m(1, 1);
    EXPECT_THROW(attention_forward<float>(x.data(), x.data(), x.data(), x.data(), x.data(), m.data(), {1, 1, 3, 2, 4}),
                 Error);
}
