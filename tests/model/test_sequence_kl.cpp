// Exact sequence KL (model/sequence_kl.h) on a micro random Qwen2 against a
// brute-force float64 reference computed here: both models' full logits
// (Qwen2::logits, every position at once), a float64 log-softmax of each
// row, Σ_v p (log p − log q) and the sampled token's log-ratio, summed over
// each row's response positions. More than kSequenceKlChunk response
// positions so that the chunking is crossed. One position's terms on every
// instruction-set path (AVX-512, AVX2, portable) against the same float64
// log-softmax formula, tails and odd vocabularies included. Also: two models with the same
// adapters give exactly 0; the KL is ≥ 0 on random pairs; and the per-row
// sampling streams of generate() give a row the same tokens alone or in a batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/simd.h"
#include "model/generate.h"
#include "model/sequence_kl.h"
#include "test_qwen2_common.h"

using namespace ppolab;
using namespace ppolab::test;

namespace {

// Rows of different prompt and response lengths (left/right padding), B·R > 64 positions.
ScoringBatch random_batch(const Qwen2Config& c, uint64_t seed, int64_t rows) {
    Philox rng(seed, 5);
    std::vector<ScoringRow> out;
    for (int64_t b = 0; b < rows; ++b) {
        ScoringRow r;
        const int64_t p = 3 + static_cast<int64_t>(rng.below(6)), n = 8 + static_cast<int64_t>(rng.below(14));
        for (int64_t i = 0; i < p; ++i) r.prompt.push_back(static_cast<int32_t>(rng.below(c.vocab_size)));
        for (int64_t i = 0; i < n; ++i) r.response.push_back(static_cast<int32_t>(rng.below(c.vocab_size)));
        out.push_back(r);
    }
    return scoring_batch(out, ScoringLimits{64, 64, 128}, 0);
}

// float64 log-softmax of every position's logits (B, T, V) of one model over the batch.
std::vector<double> log_softmax_all(Qwen2& m, const ScoringBatch& b) {
    const int64_t V = m.config().vocab_size;
    m.forward(b.tokens.data(), b.mask.data(), b.B, b.T, false);
    std::vector<float> z(static_cast<size_t>(b.B * b.T * V));
    m.logits(z.data());
    std::vector<double> out(z.size());
    for (int64_t n = 0; n < b.B * b.T; ++n) {
        double mx = -INFINITY, sum = 0;
        for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(z[n * V + v]));
        for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(z[n * V + v]) - mx);
        for (int64_t v = 0; v < V; ++v) out[n * V + v] = static_cast<double>(z[n * V + v]) - mx - std::log(sum);
    }
    return out;
}

std::vector<SequenceKl> brute_force(Qwen2& p, Qwen2& q, const ScoringBatch& b) {
    const int64_t V = p.config().vocab_size;
    const std::vector<double> lp = log_softmax_all(p, b), lq = log_softmax_all(q, b);
    std::vector<SequenceKl> out(static_cast<size_t>(b.B));
    for (int64_t row = 0; row < b.B; ++row)
        for (int64_t t = 1; t < b.T; ++t) {
            if (!b.response_mask[static_cast<size_t>(row * b.T + t)]) continue;
            const int64_t prev = (row * b.T + t - 1) * V;  // the logits that predict token t
            for (int64_t v = 0; v < V; ++v) out[row].kl_exact += std::exp(lp[prev + v]) * (lp[prev + v] - lq[prev + v]);
            const int32_t y = b.tokens[static_cast<size_t>(row * b.T + t)];
            out[row].kl_k1 += lp[prev + y] - lq[prev + y];
        }
    return out;
}

// Two policies on one micro base with different adapters, and a batch of
// more response positions than one chunk of logits.
struct TwoPolicies {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::bf16);
    LoraAdapters la = random_lora(c, 11, 0.3), lb = random_lora(c, 12, 0.3);
    Qwen2 p{w, &la}, q{w, &lb};
    ScoringBatch b = random_batch(c, 3, 6);
};

}  // namespace

TEST(SequenceKl, MatchesBruteForceFloat64) {
    TwoPolicies f;
    auto &p = f.p, &q = f.q;
    const ScoringBatch& b = f.b;
    ASSERT_GT(static_cast<int64_t>(response_positions(b).size()), kSequenceKlChunk);
    const std::vector<SequenceKl> got = sequence_kl(p, q, b), want = brute_force(p, q, b);
    ASSERT_EQ(got.size(), want.size());
    for (size_t r = 0; r < got.size(); ++r) {
        SCOPED_TRACE(r);
        // Both read FP32 logits of the same products; all that may differ is
        // the float rounding of the LM-head product over 1 vs all rows
        // (~1e-7 relative per logit), which moves a KL of order 0.1–10 by
        // far less than 1e-5 relative.
        EXPECT_GT(want[r].kl_exact, 0.01);
        EXPECT_NEAR(got[r].kl_exact, want[r].kl_exact, 1e-5 * want[r].kl_exact);
        EXPECT_NEAR(got[r].kl_k1, want[r].kl_k1, 1e-5 * (1 + std::fabs(want[r].kl_k1)));
    }
}

// From the hidden states the scorers' own forwards gathered (what evaluate
// does): bit for bit the two-model result, and a mismatched size refused.
TEST(SequenceKl, FromScorerHiddenStatesIsBitIdentical) {
    TwoPolicies f;
    auto &p = f.p, &q = f.q;
    const ScoringBatch& b = f.b;
    Scorer sp(p), sq(q);
    std::vector<float> logp(static_cast<size_t>(b.B * b.T));
    sp.response_logprobs(b, logp.data());
    sq.response_logprobs(b, logp.data());
    const WeightView Wp = p.weights().output_matrix().view(), Wq = q.weights().output_matrix().view();
    const std::vector<SequenceKl> got = sequence_kl(sp.selected_hidden(), sq.selected_hidden(), Wp, Wq, b);
    const std::vector<SequenceKl> want = sequence_kl(p, q, b);
    ASSERT_EQ(got.size(), want.size());
    for (size_t r = 0; r < got.size(); ++r) {
        EXPECT_EQ(got[r].kl_exact, want[r].kl_exact) << r;
        EXPECT_EQ(got[r].kl_k1, want[r].kl_k1) << r;
    }
    std::vector<float> short_rows(sp.selected_hidden().begin(), sp.selected_hidden().end() - 1);
    EXPECT_THROW(sequence_kl(short_rows, sq.selected_hidden(), Wp, Wq, b), Error);
}

TEST(SequenceKl, SameAdaptersGiveExactlyZero) {
    const Qwen2Config c = small_config();
    const Qwen2Weights w = small_weights(c, WeightType::bf16);
    LoraAdapters la = random_lora(c, 21, 0.3), lb = random_lora(c, 21, 0.3);  // equal values, own storage
    Qwen2 p(w, &la), q(w, &lb);
    const ScoringBatch b = random_batch(c, 4, 5);
    for (const SequenceKl& kl : sequence_kl(p, q, b)) {
        EXPECT_EQ(kl.kl_exact, 0.0);
        EXPECT_EQ(kl.kl_k1, 0.0);
    }
    for (const SequenceKl& kl : sequence_kl(p, p, b)) EXPECT_EQ(kl.kl_exact, 0.0);
}

TEST(SequenceKl, NonNegativeOnRandomPairs) {
    const Qwen2Config c = small_config();
    const Qwen2Weights w = small_weights(c, WeightType::bf16);
    for (uint64_t seed = 0; seed < 6; ++seed) {
        LoraAdapters la = random_lora(c, 100 + seed, 0.02 * static_cast<double>(seed + 1));
        LoraAdapters lb = random_lora(c, 200 + seed, 0.02);
        Qwen2 p(w, &la), q(w, &lb);
        const ScoringBatch b = random_batch(c, seed, 3);
        for (const SequenceKl& kl : sequence_kl(p, q, b)) EXPECT_GE(kl.kl_exact, 0.0) << seed;
    }
    // One position by hand: p = softmax(0, ln 3) = (1/4, 3/4), q uniform: KL = ¼ln½ + ¾ln(3/2).
    const float zp[2] = {0.f, static_cast<float>(std::log(3.0))}, zq[2] = {0.f, 0.f};
    const SequenceKl one = position_kl(zp, zq, 2, 1);
    EXPECT_NEAR(one.kl_exact, 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-7);  // ln 3 rounded to float
    EXPECT_NEAR(one.kl_k1, std::log(1.5), 1e-7);
}

// One position, on every path this CPU has: against Σ_v p_v (log p_v − log q_v)
// with std::exp and a float64 log-softmax of each row (the brute force
// above), to 1e-12 (1 + |value|); the same row twice gives exactly 0. Vocabularies
// below, at and past a whole number of vectors, logits over a wide range.
TEST(SequenceKl, PositionTermsOnEveryPathMatchFloat64) {
    using simd::SimdLevel;
    SimdLevel& level = simd::simd_level();
    const SimdLevel saved = level;
    Philox rng(9, 1);
    for (const int64_t V : {int64_t(3), int64_t(8), int64_t(16), int64_t(1003), int64_t(40000)}) {
        std::vector<float> zp(static_cast<size_t>(V)), zq(zp.size());
        for (int64_t v = 0; v < V; ++v) {
            zp[static_cast<size_t>(v)] = static_cast<float>(8.0 * rng.normal());
            zq[static_cast<size_t>(v)] = zp[static_cast<size_t>(v)] + static_cast<float>(2.0 * rng.normal() + 3.0);
        }
        const int32_t target = static_cast<int32_t>(V / 2);
        auto lsm = [&](const std::vector<float>& z) {
            double mx = -INFINITY, sum = 0;
            for (float x : z) mx = std::max(mx, static_cast<double>(x));
            for (float x : z) sum += std::exp(static_cast<double>(x) - mx);
            std::vector<double> out;
            for (float x : z) out.push_back(static_cast<double>(x) - mx - std::log(sum));
            return out;
        };
        const std::vector<double> lp = lsm(zp), lq = lsm(zq);
        double want = 0;
        for (size_t v = 0; v < lp.size(); ++v) want += std::exp(lp[v]) * (lp[v] - lq[v]);
        const double want_k1 = lp[static_cast<size_t>(target)] - lq[static_cast<size_t>(target)];
        for (const SimdLevel path : {SimdLevel::avx512, SimdLevel::avx2, SimdLevel::portable}) {
            if (path > simd::simd_cpu_level()) continue;
            level = path;
            SCOPED_TRACE("V " + std::to_string(V) + ", path " + std::to_string(static_cast<int>(path)));
            const SequenceKl got = position_kl(zp.data(), zq.data(), V, target);
            EXPECT_GT(want, 1e-4);
            // Both differences of terms of order 1–30: rounding ~1e-15 absolute.
            EXPECT_NEAR(got.kl_exact, want, 1e-12 * (1 + want));
            EXPECT_NEAR(got.kl_k1, want_k1, 1e-12 * (1 + std::fabs(want_k1)));
            const SequenceKl same = position_kl(zp.data(), zp.data(), V, target);
            EXPECT_EQ(same.kl_exact, 0.0);
            EXPECT_EQ(same.kl_k1, 0.0);
        }
        level = saved;
    }
}

// One arithmetic on every CPU: a position's KL and k1 are the same bytes on
// every path (portable, AVX2, AVX-512), on vocabularies not a multiple of 4,
// 8 or 16 and logits with huge and tiny exponents, ±0 and denormals
// (canon_exp, one 16-lane association of each sum; sequence_kl.cpp).
TEST(SequenceKl, EveryPathGivesTheSameBits) {
    using simd::SimdLevel;
    SimdLevel& level = simd::simd_level();
    const SimdLevel saved = level;
    Philox rng(12, 3);
    for (const int64_t V :
         {int64_t(1), int64_t(7), int64_t(15), int64_t(17), int64_t(33), int64_t(100), int64_t(896), int64_t(151939)}) {
        std::vector<float> zp(static_cast<size_t>(V)), zq(zp.size());
        for (size_t i = 0; i < zp.size(); ++i) {
            const double u = 2 * rng.uniform() - 1;
            switch (rng.below(6)) {
                case 0: zp[i] = static_cast<float>(std::ldexp(u, static_cast<int>(rng.below(40)) - 30)); break;
                case 1: zp[i] = rng.below(2) ? 0.f : -0.f; break;
                case 2: zp[i] = static_cast<float>(u * 1e-39); break;
                case 3: zp[i] = static_cast<float>(-700.0 + 40.0 * u); break;
                default: zp[i] = static_cast<float>(6.0 * u);
            }
            zq[i] = rng.below(3) ? zp[i] + static_cast<float>(rng.normal()) : zp[i];
        }
        const auto target = static_cast<int32_t>(V / 3);
        level = SimdLevel::portable;
        const SequenceKl want = position_kl(zp.data(), zq.data(), V, target);
        for (const SimdLevel path : {SimdLevel::avx2, SimdLevel::avx512}) {
            if (path > simd::simd_cpu_level()) continue;
            level = path;
            const SequenceKl got = position_kl(zp.data(), zq.data(), V, target);
            EXPECT_EQ(std::memcmp(&got.kl_exact, &want.kl_exact, sizeof(double)), 0)
                << "V " << V << " path " << int(path);
            EXPECT_EQ(std::memcmp(&got.kl_k1, &want.kl_k1, sizeof(double)), 0) << "V " << V << " path " << int(path);
        }
    }
    level = saved;
}

TEST(SequenceKl, PackedPairBatchIsRefused) {
    const Qwen2Config c = small_config();
    const Qwen2Weights w = small_weights(c, WeightType::bf16);
    Qwen2 p(w);
    ScoringBatch b = random_batch(c, 1, 2);
    b.reads = {1};
    EXPECT_THROW(sequence_kl(p, p, b), Error);
}

TEST(GenerateRowStreams, RowTokensDoNotDependOnTheBatch) {
    const Qwen2Config c = small_config();
    const Qwen2Weights w = small_weights(c, WeightType::bf16);
    LoraAdapters la = random_lora(c, 31, 0.3);
    Qwen2 m(w, &la);
    const std::vector<std::vector<int32_t>> prompts = {{5, 6, 7}, {9, 10}, {11, 12, 13, 14, 15}, {3}};
    GenerationOptions opt;
    opt.max_new_tokens = 12;
    opt.eos_id = 2;
    std::vector<Philox> rngs;
    for (size_t i = 0; i < prompts.size(); ++i) rngs.emplace_back(77, 1000 + i);
    KvCache cache(c, 4, 5 + 11);
    const std::vector<Generation> together = generate(m, cache, prompts, opt, rngs);
    bool some_differ = false;
    for (size_t i = 0; i < prompts.size(); ++i) {
        std::vector<Philox> one{Philox(77, 1000 + i)};
        KvCache c1(c, 1, static_cast<int64_t>(prompts[i].size()) + 11);
        const Generation alone = generate(m, c1, {prompts[i]}, opt, one)[0];
        EXPECT_EQ(alone.tokens, together[i].tokens) << i;
        some_differ |= i > 0 && together[i].tokens != together[0].tokens;
    }
    EXPECT_TRUE(some_differ);  // the streams are not one stream
    std::vector<Philox> wrong(3);
    EXPECT_THROW(generate(m, cache, prompts, opt, wrong), Error);
}
