// Sampling and generation: temperature-1 frequencies match the softmax
// (chi-square, fixed seed), greedy picks the argmax (ties to the lowest id),
// returned log-probs equal log_softmax, the same generator state gives the
// same tokens, every instruction-set path (AVX-512, AVX2, portable) picks
// the tokens of a float64 brute force with its log-probs, and the
// generation loop stops rows at EOS or at the length limit with log-probs
// that agree with a teacher-forced re-score.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/lm_head.h"
#include "kernels/matmul_backend.h"
#include "kernels/simd.h"
#include "model/generate.h"
#include "model/sampling.h"
#include "test_qwen2_common.h"

using namespace ppolab;
using namespace ppolab::test;

TEST(Sampling, Temperature1FrequenciesMatchSoftmax) {
    const std::vector<float> logits = {1.0f, 0.0f, -1.0f, 2.0f, 0.5f, -3.0f};
    const int64_t V = static_cast<int64_t>(logits.size());
    std::vector<double> p(logits.size());
    double z = 0;
    for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(static_cast<double>(logits[i]));
    for (auto& x : p) x /= z;
    Philox rng(2024, 7);
    const int n = 40000;
    std::vector<int> count(logits.size(), 0);
    for (int i = 0; i < n; ++i) {
        SampledToken s = sample_temperature1(logits.data(), V, rng);
        ASSERT_GE(s.token, 0);
        ASSERT_LT(s.token, V);
        ++count[static_cast<size_t>(s.token)];
        ASSERT_NEAR(s.logp, std::log(p[static_cast<size_t>(s.token)]), 1e-6);
    }
    EXPECT_EQ(rng.counter(), static_cast<uint64_t>(n));  // one uniform per token
    double chi2 = 0;
    for (size_t i = 0; i < p.size(); ++i) {
        const double e = n * p[i];
        chi2 += (count[i] - e) * (count[i] - e) / e;
    }
    // 5 degrees of freedom: P(χ² > 20.5) = 0.001. A sampler off by one token
    // or using float32 cumulative sums of the wrong order gives χ² in the thousands.
    EXPECT_LT(chi2, 20.5) << "chi-square " << chi2;
    std::printf("chi-square %.2f (5 dof) over %d draws\n", chi2, n);
}

TEST(Sampling, SameStateSameTokens) {
    std::vector<float> logits(300);
    Philox init(3, 0);
    for (auto& x : logits) x = static_cast<float>(init.normal());
    Philox a(77, 1), b(77, 1);
    std::vector<int32_t> ta, tb;
    for (int i = 0; i < 50; ++i) ta.push_back(sample_temperature1(logits.data(), 300, a).token);
    b.set_counter(20);
    Philox c(77, 1);
    for (int i = 0; i < 20; ++i) sample_temperature1(logits.data(), 300, c);
    EXPECT_EQ(b, c);  // the state is (seed, stream, counter): resuming at 20 is exact
    for (int i = 20; i < 50; ++i) tb.push_back(sample_temperature1(logits.data(), 300, b).token);
    EXPECT_EQ(std::vector<int32_t>(ta.begin() + 20, ta.end()), tb);
    Philox d(78, 1);
    std::vector<int32_t> td;
    for (int i = 0; i < 50; ++i) td.push_back(sample_temperature1(logits.data(), 300, d).token);
    EXPECT_NE(ta, td);
}

TEST(Sampling, GreedyArgmaxTiesToLowestAndLogSoftmax) {
    std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
    SampledToken s = sample_greedy(logits.data(), 5);
    EXPECT_EQ(s.token, 1);
    double z = 0;
    for (float x : logits) z += std::exp(static_cast<double>(x));
    // The sampler's log-prob is the trainer's arithmetic (lm_head.h), bit for bit.
    EXPECT_EQ(s.logp, logits[1] - row_logsumexp(logits.data(), 5));
    EXPECT_NEAR(s.logp, 3.0 - std::log(z), 1e-6);
    EXPECT_NEAR(log_softmax_at(logits.data(), 5, 2), -1.0 - std::log(z), 1e-9);
    // Large logits: computed stably. In FP32, z − lse carries lse's rounding,
    // half an ulp at |lse| ≈ 1000.3 (2^-15 ≈ 3.1e-5), plus canon_log's error
    // on log Σ (under 1e-7 here).
    std::vector<float> big = {1000.f, 999.f};
    EXPECT_NEAR(sample_greedy(big.data(), 2).logp, -std::log1p(std::exp(-1.0)), 3.1e-5 + 1e-7);
}

// A vocabulary-sized row (with a tail past whole vectors, a tie at the
// maximum, very negative logits whose terms underflow) on every path: the
// greedy token is the lowest-id argmax, log_softmax_at is the float64
// log-softmax to 1e-12, and for 600 uniforms the temperature-1 token is the
// first whose float64 cumulative sum passes u·Σ (the brute force here).
TEST(Sampling, EveryPathPicksTheFloat64Tokens) {
    const int64_t V = 151939;
    std::vector<float> z(static_cast<size_t>(V));
    Philox init(5, 2);
    for (auto& x : z) x = static_cast<float>(3.0 * init.normal());
    z[4321] = z[99999] = 25.f;  // the tie at the maximum
    for (int64_t i = 500; i < 600; ++i) z[static_cast<size_t>(i)] = -2000.f;
    double mx = -INFINITY, sum = 0;
    for (float x : z) mx = std::max(mx, static_cast<double>(x));
    std::vector<double> cum;
    for (float x : z) cum.push_back(sum += std::exp(static_cast<double>(x) - mx));
    Philox draws(9, 9);
    std::vector<double> us;
    std::vector<int32_t> want;
    for (int k = 0; k < 600; ++k) {
        const double u = draws.uniform();
        us.push_back(u);
        want.push_back(static_cast<int32_t>(std::upper_bound(cum.begin(), cum.end(), u * sum) - cum.begin()));
    }
    simd::SimdLevel& level = simd::simd_level();
    const simd::SimdLevel saved = level;
    for (const simd::SimdLevel path : {simd::SimdLevel::avx512, simd::SimdLevel::avx2, simd::SimdLevel::portable}) {
        if (path > simd::simd_cpu_level()) continue;
        level = path;
        SCOPED_TRACE("path " + std::to_string(static_cast<int>(path)));
        const SampledToken g = sample_greedy(z.data(), V);
        EXPECT_EQ(g.token, 4321);
        EXPECT_NEAR(g.logp, 25.0 - mx - std::log(sum), 1e-6);
        for (const int64_t t : {int64_t(0), int64_t(550), int64_t(4321), V - 1})
            EXPECT_NEAR(log_softmax_at(z.data(), V, t), z[static_cast<size_t>(t)] - mx - std::log(sum), 1e-12) << t;
        int wrong = 0;
        for (size_t k = 0; k < us.size(); ++k) {
            const SampledToken s = sample_temperature1_at(z.data(), V, us[k]);
            wrong += s.token != want[k];
            EXPECT_NEAR(s.logp, z[static_cast<size_t>(s.token)] - mx - std::log(sum), 1e-5);
        }
        EXPECT_EQ(wrong, 0);
    }
    level = saved;
}

// One arithmetic on every CPU: the sampled token, its log-prob, the greedy
// token and log_softmax_at are the same bytes on every path (portable, AVX2,
// AVX-512), on vocabularies not a multiple of 4, 8 or 16 and logits with
// huge and tiny exponents, ±0 and denormals (canon_exp, one 16-lane
// association of Σ, the scan in token order; sampling.cpp).
TEST(Sampling, EveryPathGivesTheSameBits) {
    simd::SimdLevel& level = simd::simd_level();
    const simd::SimdLevel saved = level;
    for (const int64_t V :
         {int64_t(1), int64_t(7), int64_t(15), int64_t(17), int64_t(33), int64_t(100), int64_t(896), int64_t(151939)}) {
        std::vector<float> z(static_cast<size_t>(V));
        Philox init(11, static_cast<uint64_t>(V));
        for (size_t i = 0; i < z.size(); ++i) {
            const double u = 2 * init.uniform() - 1;
            switch (init.below(6)) {
                case 0: z[i] = static_cast<float>(std::ldexp(u, static_cast<int>(init.below(40)) - 30)); break;
                case 1: z[i] = init.below(2) ? 0.f : -0.f; break;
                case 2: z[i] = static_cast<float>(u * 1e-39); break;
                case 3: z[i] = static_cast<float>(-700.0 + 40.0 * u); break;  // terms near e^-700
                default: z[i] = static_cast<float>(6.0 * u);
            }
        }
        auto run = [&] {
            std::vector<double> out;
            const SampledToken g = sample_greedy(z.data(), V);
            out.push_back(g.token), out.push_back(g.logp);
            for (const int64_t t : {int64_t(0), V / 2, V - 1}) out.push_back(log_softmax_at(z.data(), V, t));
            Philox draws(3, 4);
            for (int k = 0; k < 50; ++k) {
                const SampledToken s = sample_temperature1_at(z.data(), V, draws.uniform());
                out.push_back(s.token), out.push_back(s.logp);
            }
            return out;
        };
        level = simd::SimdLevel::portable;
        const std::vector<double> want = run();
        for (const simd::SimdLevel path : {simd::SimdLevel::avx2, simd::SimdLevel::avx512}) {
            if (path > simd::simd_cpu_level()) continue;
            level = path;
            const std::vector<double> got = run();
            ASSERT_EQ(got.size(), want.size());
            EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(double)), 0)
                << "V " << V << ", path " << static_cast<int>(path);
        }
    }
    level = saved;
}

namespace {

// Teacher-forced log-probs of a generation (row alone) by the scoring API.
std::vector<float> rescore(Qwen2& m, const std::vector<int32_t>& prompt, const Generation& g) {
    Scorer sc(m);
    ScoringBatch s = scoring_batch({ScoringRow{prompt, g.tokens}}, ScoringLimits{1000, 1000, 2000}, 0);
    std::vector<float> lp(static_cast<size_t>(s.T));
    sc.response_logprobs(s, lp.data());
    return std::vector<float>(lp.begin() + s.P, lp.end());
}

}  // namespace

TEST(Generation, GreedyAndSampledRowsAgreeWithTeacherForcing) {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::f32, 7, 0.3);
    LoraAdapters lora = random_lora(c, 3);
    Qwen2 model(w, &lora);
    std::vector<std::vector<int32_t>> prompts = {{5, 6, 7, 8, 9}, {10, 11}, {12, 13, 14}};
    for (bool greedy : {true, false}) {
        GenerationOptions opt;
        opt.max_new_tokens = 8;
        opt.greedy = greedy;
        Philox rng(11, 2);
        auto gens = generate(model, prompts, opt, rng);
        ASSERT_EQ(gens.size(), 3u);
        for (size_t b = 0; b < gens.size(); ++b) {
            EXPECT_EQ(gens[b].finish_reason, "length");
            ASSERT_EQ(gens[b].tokens.size(), 8u);
            auto lp = rescore(model, prompts[b], gens[b]);
            for (size_t j = 0; j < lp.size(); ++j)
                EXPECT_NEAR(gens[b].logprobs[j], lp[j], 1e-4) << (greedy ? "greedy" : "sampled") << " row " << b;
        }
        // the same generator state gives the same generations; a row's tokens do not depend on its batch
        Philox again(11, 2);
        auto gens2 = generate(model, prompts, opt, again);
        for (size_t b = 0; b < gens.size(); ++b) EXPECT_EQ(gens[b].tokens, gens2[b].tokens);
        if (greedy) {
            Philox alone(11, 2);
            auto one = generate(model, {prompts[1]}, opt, alone);
            EXPECT_EQ(one[0].tokens, gens[1].tokens);
        } else {
            EXPECT_EQ(rng.counter(), 3u * 8u);  // one uniform per sampled token
        }
    }
}

TEST(Generation, OnlyEosEndsARow) {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::bf16, 7, 0.3);
    Qwen2 model(w);
    std::vector<std::vector<int32_t>> prompts = {{5, 6, 7}, {8}};
    GenerationOptions opt;
    opt.max_new_tokens = 6;
    opt.greedy = true;
    Philox rng(1, 1);
    auto ref = generate(model, prompts, opt, rng);
    // make row 0's third greedy token the EOS id: row 0 ends there, row 1 runs on
    opt.eos_id = ref[0].tokens[2];
    auto gens = generate(model, prompts, opt, rng);
    size_t first = 0;
    while (ref[0].tokens[first] != opt.eos_id) ++first;
    EXPECT_EQ(gens[0].finish_reason, "eos");
    EXPECT_EQ(gens[0].tokens.size(), first + 1);
    EXPECT_EQ(gens[0].tokens.back(), opt.eos_id);
    EXPECT_EQ(gens[0].logprobs.size(), gens[0].tokens.size());
    bool row1_has_eos = false;
    for (auto t : ref[1].tokens) row1_has_eos |= t == opt.eos_id;
    if (!row1_has_eos) {
        EXPECT_EQ(gens[1].finish_reason, "length");
        EXPECT_EQ(gens[1].tokens, ref[1].tokens);
    }
    // a cache too small is refused
    KvCache small(c, 2, 4);
    EXPECT_THROW(generate(model, small, prompts, opt, rng), Error);
}

// independent_rows (generate.h): up to kRowInvariantRows prompts of different
// lengths decoded together give every row bitwise the tokens and log-probs it
// gets generated alone, greedy or sampled, FP32 or BF16 weights, with LoRA,
// on the automatic path and with the small-M kernels forced.
TEST(Generation, IndependentRowsAreBitwiseTheirRowAlone) {
    Qwen2Config c = small_config();
    c.hidden_size = 128;  // 384 × 128 weights: the automatic path takes the small-M kernels
    c.intermediate_size = 384;
    c.num_attention_heads = 8;
    c.num_key_value_heads = 2;
    std::vector<std::vector<int32_t>> prompts;  // kRowInvariantRows prompts of 1 to 9 tokens
    for (int64_t r = 0; r < kRowInvariantRows; ++r) {
        prompts.emplace_back();
        for (int64_t i = 0; i < 1 + (r * 5) % 9; ++i) prompts.back().push_back(static_cast<int32_t>(5 + r + 3 * i));
    }
    ASSERT_EQ(static_cast<int64_t>(prompts.size()), kRowInvariantRows);
    struct Restore {
        ~Restore() {
            matmul_set_path(MatmulPath::automatic);
            matmul_set_bf16_products(Bf16Products::automatic);
        }
    } restore;
    for (WeightType type : {WeightType::f32, WeightType::bf16}) {
        Qwen2Weights w = small_weights(c, type, 7, 0.3);
        LoraAdapters lora = random_lora(c, 3);
        Qwen2 model(w, &lora);
        for (MatmulPath path : {MatmulPath::automatic, MatmulPath::small_m, MatmulPath::portable})
            for (Bf16Products products : {Bf16Products::native, Bf16Products::f32}) {
                if (type == WeightType::f32 && products == Bf16Products::f32) continue;
                matmul_set_path(path);
                matmul_set_bf16_products(products);
                for (bool greedy : {true, false}) {
                    const std::string what = std::string(type == WeightType::f32 ? "f32" : "bf16") + " path " +
                                             std::to_string(static_cast<int>(path)) + " products " +
                                             std::to_string(static_cast<int>(products)) +
                                             (greedy ? " greedy" : " sampled");
                    GenerationOptions opt;
                    opt.max_new_tokens = 7;
                    opt.greedy = greedy;
                    auto rngs = [&] {
                        std::vector<Philox> r;
                        for (size_t b = 0; b < prompts.size(); ++b) r.emplace_back(17, b);
                        return r;
                    };
                    // an EOS that ends row 0 early, so finished rows sit in the batch while others run
                    {
                        std::vector<Philox> r0 = {Philox(17, 0)};
                        opt.eos_id = generate(model, {prompts[0]}, opt, r0)[0].tokens[2];
                    }
                    std::vector<Generation> alone;
                    for (size_t b = 0; b < prompts.size(); ++b) {
                        std::vector<Philox> r = {Philox(17, b)};
                        alone.push_back(generate(model, {prompts[b]}, opt, r)[0]);
                    }
                    opt.independent_rows = true;
                    for (size_t n : {size_t(2), prompts.size()}) {  // a batch of 2, and of them all
                        std::vector<std::vector<int32_t>> some(prompts.begin(), prompts.begin() + n);
                        std::vector<Philox> r = rngs();
                        r.resize(n, Philox(0, 0));
                        std::vector<Generation> together = generate(model, some, opt, r);
                        for (size_t b = 0; b < n; ++b) {
                            EXPECT_EQ(together[b].tokens, alone[b].tokens) << what << " row " << b << " of " << n;
                            EXPECT_EQ(together[b].finish_reason, alone[b].finish_reason) << what << " row " << b;
                            ASSERT_EQ(together[b].logprobs.size(), alone[b].logprobs.size()) << what << " row " << b;
                            EXPECT_EQ(std::memcmp(together[b].logprobs.data(), alone[b].logprobs.data(),
                                                  alone[b].logprobs.size() * sizeof(float)),
                                      0)
                                << what << " row " << b << " of " << n << ": log-probs differ in their bits";
                        }
                    }
                    EXPECT_EQ(alone[0].finish_reason, "eos") << what;
                }
            }
    }
    // more rows than the row-invariance bound are refused
    matmul_set_path(MatmulPath::automatic);
    Qwen2Weights w = small_weights(c, WeightType::bf16, 7, 0.3);
    Qwen2 model(w);
    GenerationOptions opt;
    opt.independent_rows = true;
    opt.max_new_tokens = 2;
    std::vector<std::vector<int32_t>> too_many(static_cast<size_t>(kRowInvariantRows + 1), {5, 6});
    Philox rng(1, 1);
    EXPECT_THROW(generate(model, too_many, opt, rng), Error);
}

// Rows pick their tokens in parallel (generate.cpp): logits that are not
// finite in one row of a batch give an Error naming them, greedy or sampled,
// rather than ending the process from inside the parallel loop.
TEST(Generation, NonFiniteLogitsInABatchAreAnError) {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::f32, 7, 0.3);
    w.norm[0] = std::numeric_limits<float>::quiet_NaN();  // every row's logits become NaN
    Qwen2 model(w);
    for (bool greedy : {true, false}) {
        GenerationOptions opt;
        opt.greedy = greedy;
        opt.max_new_tokens = 3;
        Philox rng(1, 1);
        try {
            generate(model, {{5, 6}, {7}, {8, 9, 10}}, opt, rng);
            ADD_FAILURE() << "no Error for NaN logits, greedy " << greedy;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("logits are not finite"), std::string::npos) << e.what();
        }
    }
}
