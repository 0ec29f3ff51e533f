// The scoring API and the learned state of the roles: reward pooling at the
// last active response token, critic values before each token, per-token
// log-probs aligned by position, refusal of over-long rows, LoRA layout and
// counts (4 399 104 on the 0.5B shape), heads of H + 1 parameters.
#include <array>
#include <cmath>
#include <cstring>

#include "model/config.h"
#include "support/test_support.h"
#include "test_qwen2_common.h"

using namespace ppolab;
using namespace ppolab::test;

namespace {

struct Fixture {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::bf16);
    LoraAdapters lora = random_lora(c, 41);
    ScalarHead head = random_head(c.hidden_size, 42);
    Qwen2 model{w, &lora};
    Scorer sc{model};
};

std::vector<ScoringRow> uneven_rows(int64_t V) {
    Philox rng(43, 0);
    auto toks = [&](int64_t n) {
        std::vector<int32_t> t(static_cast<size_t>(n));
        for (auto& x : t) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
        return t;
    };
    // different prompt and response lengths: for rows 1 and 2 the last batch
    // column is padding
    return {{toks(3), toks(6)}, {toks(7), toks(2)}, {toks(1), toks(4)}};
}

// d/dscores of −mean log σ(s_c − s_r) over n pairs (scores: chosen, then rejected).
void bradley_terry_test_grad(const std::vector<float>& scores, int64_t n, std::vector<float>& d) {
    for (int64_t i = 0; i < n; ++i) {
        const double z = static_cast<double>(scores[i]) - scores[n + i];
        const double g = -1.0 / (1.0 + std::exp(z)) / static_cast<double>(n);  // d/dz of −log σ(z), averaged
        d[i] = static_cast<float>(g);
        d[n + i] = static_cast<float>(-g);
    }
}

}  // namespace

// Each row scored in a batch equals the row scored alone (no padding at all).
// A pooling that read the last index of the padded batch would read PAD for
// rows 1 and 2 and fail.
TEST(Qwen2Scoring, RewardReadsLastActiveResponseToken) {
    Fixture S;
    auto rows = uneven_rows(S.c.vocab_size);
    ScoringBatch batch = scoring_batch(rows, ScoringLimits{}, 0);
    ASSERT_EQ(batch.T, 7 + 6);
    std::vector<float> scores(rows.size());
    S.sc.reward_scores(batch, S.head, scores.data());
    auto last = last_response_positions(batch);
    EXPECT_EQ(last[1], 1 * batch.T + 7 + 1);  // row 1: response columns 7, 8
    for (size_t b = 0; b < rows.size(); ++b) {
        ScoringBatch alone = scoring_batch(std::vector<ScoringRow>{rows[b]}, ScoringLimits{}, 0);
        float s_alone = 0;
        S.sc.reward_scores(alone, S.head, &s_alone);
        EXPECT_NEAR(scores[b], s_alone, 1e-3 + 1e-3 * std::abs(s_alone)) << "row " << b;
    }
    // and reading the last column instead would give a different number
    S.sc.reward_scores(batch, S.head, scores.data());
    const float* h = S.model.hidden();
    float wrong = 0;
    S.head.forward(&wrong, h + (1 * batch.T + batch.T - 1) * S.c.hidden_size, 1);
    EXPECT_GT(std::abs(wrong - scores[1]), 1e-3);
}

TEST(Qwen2Scoring, CriticValuesAndLogprobsAlignedByPosition) {
    Fixture S;
    auto rows = uneven_rows(S.c.vocab_size);
    ScoringBatch batch = scoring_batch(rows, ScoringLimits{}, 0);
    const int64_t N = batch.B * batch.T;
    std::vector<float> values(static_cast<size_t>(N)), logp(static_cast<size_t>(N));
    S.sc.critic_values(batch, S.head, values.data());
    S.sc.response_logprobs(batch, logp.data());
    for (size_t b = 0; b < rows.size(); ++b) {
        ScoringBatch alone = scoring_batch(std::vector<ScoringRow>{rows[b]}, ScoringLimits{}, 0);
        std::vector<float> v1(static_cast<size_t>(alone.T)), l1(static_cast<size_t>(alone.T));
        S.sc.critic_values(alone, S.head, v1.data());
        // V before the first response token is read at the last prompt token: a value head on that
        // state by hand must give the same number.
        float by_hand = 0;
        S.head.forward(&by_hand, S.model.hidden() + (alone.P - 1) * S.c.hidden_size, 1);
        EXPECT_NEAR(v1[static_cast<size_t>(alone.P)], by_hand, 1e-6);
        S.sc.response_logprobs(alone, l1.data());
        const int64_t r = static_cast<int64_t>(rows[b].response.size());
        for (int64_t j = 0; j < r; ++j) {
            const size_t in_batch = static_cast<size_t>(static_cast<int64_t>(b) * batch.T + batch.P + j);
            const size_t in_alone = static_cast<size_t>(alone.P + j);
            EXPECT_NEAR(values[in_batch], v1[in_alone], 1e-3 + 1e-3 * std::abs(v1[in_alone])) << b << "," << j;
            EXPECT_NEAR(logp[in_batch], l1[in_alone], 1e-3 + 1e-3 * std::abs(l1[in_alone])) << b << "," << j;
            EXPECT_LT(l1[in_alone], 0.f);
        }
        for (int64_t t = 0; t < alone.P; ++t) EXPECT_EQ(l1[static_cast<size_t>(t)], 0.f);  // prompt: no entry
    }
    // the log-probs equal log_softmax of the full logits at the previous position
    ScoringBatch one = scoring_batch(std::vector<ScoringRow>{rows[0]}, ScoringLimits{}, 0);
    std::vector<float> lp(static_cast<size_t>(one.T));
    S.sc.response_logprobs(one, lp.data());
    std::vector<float> logits(static_cast<size_t>(one.T * S.c.vocab_size));
    S.model.logits(logits.data());
    for (int64_t t = one.P; t < one.T; ++t) {
        const float* row = logits.data() + (t - 1) * S.c.vocab_size;
        double mx = -1e30, z = 0;
        for (int64_t v = 0; v < S.c.vocab_size; ++v) mx = std::max(mx, static_cast<double>(row[v]));
        for (int64_t v = 0; v < S.c.vocab_size; ++v) z += std::exp(row[v] - mx);
        const double want = row[one.tokens[static_cast<size_t>(t)]] - mx - std::log(z);
        EXPECT_NEAR(lp[static_cast<size_t>(t)], want, 1e-4);
    }
}

// PPO's first critic update runs its backward on the activations that the
// rollout's values forward kept (ppo.cpp, fresh_values_), while the other
// roles' models ran in between: values and gradients must be bitwise those
// of a forward made just before the backward.
TEST(Qwen2Scoring, CriticBackwardOnAKeptForwardIsAFreshForwards) {
    Fixture S;
    auto rows = uneven_rows(S.c.vocab_size);
    ScoringBatch batch = scoring_batch(rows, ScoringLimits{}, 0);
    const size_t N = static_cast<size_t>(batch.B * batch.T);
    std::vector<float> dv(N, 0.f);
    for (int64_t p : response_positions(batch)) dv[static_cast<size_t>(p)] = 0.1f * static_cast<float>(p % 7) - 0.3f;
    LoraAdapters other_lora = random_lora(S.c, 44);
    Qwen2 other{S.w, &other_lora};  // another role on the same base
    Scorer other_scorer{other};
    auto grads = [&](bool kept_forward) {
        S.lora.zero_grad();
        S.head.zero_grad();
        std::vector<float> values(N), ignored(N);
        if (kept_forward) {
            S.sc.critic_values(batch, S.head, values.data(), true);
            other_scorer.response_logprobs(batch, ignored.data(), false);
            other_scorer.critic_values(scoring_batch({rows[0]}, ScoringLimits{}, 0), S.head, ignored.data(), true);
        } else {
            S.sc.critic_values(batch, S.head, ignored.data(), false);
            S.sc.critic_values(batch, S.head, values.data(), true);
        }
        S.sc.critic_values_backward(batch, S.head, dv.data());
        std::vector<float> all = values;
        for (const ParamRef& p : S.lora.parameters()) all.insert(all.end(), p.grad, p.grad + p.numel());
        all.insert(all.end(), S.head.dweight.begin(), S.head.dweight.end());
        all.insert(all.end(), S.head.dbias.begin(), S.head.dbias.end());
        return all;
    };
    const std::vector<float> kept = grads(true), fresh = grads(false);
    ASSERT_EQ(kept.size(), fresh.size());
    double norm = 0;
    for (size_t i = N; i < fresh.size(); ++i) norm += std::abs(fresh[i]);
    EXPECT_GT(norm, 0.0) << "the backward reached no parameter";
    EXPECT_EQ(std::memcmp(kept.data(), fresh.data(), kept.size() * sizeof(float)), 0)
        << "values or gradients differ between a kept and a fresh forward";
}

TEST(Qwen2Scoring, RowsOverTheLimitsAreRefused) {
    ScoringLimits lim;  // 256 / 64 / 320
    std::vector<int32_t> p256(256, 5), p257(257, 5), r64(64, 6), r65(65, 6);
    EXPECT_NO_THROW(scoring_batch({{p256, r64}}, lim, 0));
    auto message = [&](const std::vector<ScoringRow>& rows, const ScoringLimits& l) {
        try {
            scoring_batch(rows, l, 0);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    std::string m = message({{{1}, {2}}, {p257, {6}}}, lim);
    EXPECT_NE(m.find("row 1"), std::string::npos) << m;
    EXPECT_NE(m.find("max_prompt = 256"), std::string::npos) << m;
    m = message({{{1}, r65}}, lim);
    EXPECT_NE(m.find("max_response = 64"), std::string::npos) << m;
    ScoringLimits small{10, 5, 12};
    m = message({{std::vector<int32_t>(8, 1), std::vector<int32_t>(5, 2)}}, small);
    EXPECT_NE(m.find("max_context = 12"), std::string::npos) << m;
    EXPECT_NE(message({{{}, {2}}}, lim).find("empty prompt"), std::string::npos);
    EXPECT_NE(message({{{1}, {}}}, lim).find("empty response"), std::string::npos);
}

// The judge's packed pairs (packed_pair_batch): each pair one row
// [prompt | chosen | rejected] with the prompt computed once. Scores and the
// Bradley–Terry gradients of every LoRA tensor and the head equal those of
// the pairs as separate rows, for prompts and answers of different lengths
// (left padding), with an FP32 base (summation order only: 1e-5) and a BF16
// base (a projection output near a BF16 rounding boundary may round the
// other way when the FP32 attention sums in another order: 2^-8 relative
// on that element; 2e-2 on the gradients, a wrong mask is off by O(1)).
// Measured: FP32 scores 6e-7, gradients 2.4e-6; BF16 scores equal,
// gradients 2.3e-3 (a branch's positions off by one: 7e-2 and 1.0).
TEST(Qwen2Scoring, PackedPairsEqualSeparateRows) {
    const Qwen2Config c = small_config();
    Philox rng(77, 0);
    auto ids = [&](int64_t n) {
        std::vector<int32_t> v(static_cast<size_t>(n));
        for (auto& x : v) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.vocab_size)));
        return v;
    };
    const std::vector<std::array<int64_t, 3>> shapes = {{7, 3, 5}, {4, 6, 1}, {9, 2, 2}};  // prompt, chosen, rejected
    std::vector<ScoringRow> rows(2 * shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) {
        const auto prompt = ids(shapes[i][0]);
        rows[i] = {prompt, ids(shapes[i][1])};
        rows[shapes.size() + i] = {prompt, ids(shapes[i][2])};
    }
    const ScoringLimits lim;
    const ScoringBatch packed = packed_pair_batch(rows, lim, 0), apart = scoring_batch(rows, lim, 0);
    EXPECT_EQ(packed.B, 3);
    EXPECT_EQ(packed.T, 15);  // 7 + 3 + 5
    EXPECT_EQ(packed.reads.size(), 6u);
    const int64_t n = static_cast<int64_t>(shapes.size());
    for (WeightType type : {WeightType::f32, WeightType::bf16}) {
        const double tol = type == WeightType::f32 ? 1e-5 : 2e-2;
        const Qwen2Weights w = small_weights(c, type);
        LoraAdapters lora = random_lora(c, 78);
        ScalarHead head = random_head(c.hidden_size, 79);
        Qwen2 model(w, &lora);
        Scorer sc(model);
        auto run = [&](const ScoringBatch& b) {
            lora.zero_grad();
            head.zero_grad();
            std::vector<float> scores(static_cast<size_t>(2 * n)), dscores(scores.size());
            sc.reward_scores(b, head, scores.data(), true);
            bradley_terry_test_grad(scores, n, dscores);
            sc.reward_scores_backward(b, head, dscores.data());
            std::vector<std::vector<float>> grads = {scores};
            for (const auto& p : lora.parameters()) grads.emplace_back(p.grad, p.grad + p.numel());
            for (const auto& p : head.parameters()) grads.emplace_back(p.grad, p.grad + p.numel());
            grads.push_back(dscores);  // last: the upstream gradient, for the bias check below
            return grads;
        };
        const auto a = run(apart), p = run(packed);
        const char* what = type == WeightType::f32 ? "FP32 base" : "BF16 base";
        const double score_err = rel_max_error(p[0], std::vector<double>(a[0].begin(), a[0].end()), 1e-6);
        EXPECT_LT(score_err, type == WeightType::f32 ? 1e-5 : 1e-2) << what << " scores";
        double worst = 0;
        // The tensor before the last (dscores) is head.bias: its gradient is
        // the sum of the score gradients, +g and −g per pair, so 0 but for
        // rounding (the bias cancels in s_c − s_r). Both residues must be
        // rounding-sized, under 1e-5 of the upstream gradient's scale; they
        // are not compared with each other (a relative error of two
        // residues measures only their different summation orders).
        const size_t bias = a.size() - 2;
        ASSERT_EQ(a[bias].size(), 1u);
        double upstream = 0;
        for (float d : a.back()) upstream = std::max(upstream, static_cast<double>(std::fabs(d)));
        for (const auto* g : {&a, &p}) EXPECT_LT(std::fabs((*g)[bias][0]), 1e-5 * upstream) << what << " head.bias";
        for (size_t i = 1; i < bias; ++i) {
            const double e = rel_max_error(p[i], std::vector<double>(a[i].begin(), a[i].end()), 1e-6);
            EXPECT_LT(e, tol) << what << " gradient tensor " << i;
            worst = std::max(worst, e);
        }
        std::printf("[packed pairs, %s] scores %.2e, worst gradient tensor %.2e (relative to its largest element)\n",
                    what, score_err, worst);
    }
    // Critic values take no packed batch; a pair must share its prompt.
    {
        const Qwen2Weights w = small_weights(c, WeightType::f32);
        Qwen2 model(w);
        Scorer sc(model);
        ScalarHead head = random_head(c.hidden_size, 80);
        std::vector<float> values(static_cast<size_t>(packed.B * packed.T));
        EXPECT_NE(message_of([&] {
                      sc.critic_values(packed, head, values.data());
                  }).find("a packed pair batch gives reward scores and response log-probs only"),
                  std::string::npos);
    }
    std::vector<ScoringRow> bad = rows;
    bad[n].prompt.push_back(1);
    EXPECT_NE(message_of([&] { packed_pair_batch(bad, lim, 0); }).find("rows 0 and 3 have different prompts"),
              std::string::npos);
}

// Response log-probs of a packed pair batch (DPO's rows): each answer's
// tokens — the rejected answer's first one too, which the prompt's last
// position produces — and the LoRA gradients equal those of separate rows up
// to float summation order.
TEST(Qwen2Scoring, PackedPairLogprobsEqualSeparateRows) {
    const Qwen2Config c = small_config();
    Philox rng(81, 0);
    auto ids = [&](int64_t n) {
        std::vector<int32_t> v(static_cast<size_t>(n));
        for (auto& x : v) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.vocab_size)));
        return v;
    };
    const std::vector<std::array<int64_t, 3>> shapes = {{7, 3, 5}, {4, 6, 1}, {9, 2, 2}};  // prompt, chosen, rejected
    const size_t n = shapes.size();
    std::vector<ScoringRow> rows(2 * n);
    for (size_t i = 0; i < n; ++i) {
        const auto prompt = ids(shapes[i][0]);
        rows[i] = {prompt, ids(shapes[i][1])};
        rows[n + i] = {prompt, ids(shapes[i][2])};
    }
    const ScoringLimits lim;
    const ScoringBatch packed = packed_pair_batch(rows, lim, 0), apart = scoring_batch(rows, lim, 0);
    // Answer k's per-token values (k < n: chosen of pair k; else rejected of pair k − n), in order.
    auto answers = [&](const ScoringBatch& b, const std::vector<float>& per_pos) {
        std::vector<std::vector<double>> out(2 * n);
        for (int64_t r = 0; r < b.B; ++r)
            for (int64_t t = 0; t < b.T; ++t) {
                const size_t at = static_cast<size_t>(r * b.T + t);
                if (!b.response_mask[at]) continue;
                const size_t k =
                    b.reads.empty() ? static_cast<size_t>(r) : (b.mask[at] == 3 ? n : 0) + static_cast<size_t>(r);
                out[k].push_back(per_pos[at]);
            }
        return out;
    };
    for (WeightType type : {WeightType::f32, WeightType::bf16}) {
        const double tol = type == WeightType::f32 ? 1e-5 : 2e-2;
        const Qwen2Weights w = small_weights(c, type);
        LoraAdapters lora = random_lora(c, 82);
        Qwen2 model(w, &lora);
        Scorer sc(model);
        auto run = [&](const ScoringBatch& b) {
            lora.zero_grad();
            std::vector<float> logp(static_cast<size_t>(b.B * b.T)), dlogp(logp.size(), 0.f);
            sc.response_logprobs(b, logp.data(), true);
            // A different weight per answer and token: 1/(k + 1) + 0.1 t.
            std::vector<int64_t> seen(2 * n, 0);
            for (int64_t r = 0; r < b.B; ++r)
                for (int64_t t = 0; t < b.T; ++t) {
                    const size_t at = static_cast<size_t>(r * b.T + t);
                    if (!b.response_mask[at]) continue;
                    const size_t k =
                        b.reads.empty() ? static_cast<size_t>(r) : (b.mask[at] == 3 ? n : 0) + static_cast<size_t>(r);
                    dlogp[at] =
                        static_cast<float>(1.0 / static_cast<double>(k + 1) + 0.1 * static_cast<double>(seen[k]++));
                }
            sc.response_logprobs_backward(b, dlogp.data());
            std::vector<std::vector<float>> grads;
            for (const auto& p : lora.parameters()) grads.emplace_back(p.grad, p.grad + p.numel());
            return std::pair{answers(b, logp), grads};
        };
        const auto [la, ga] = run(apart);
        const auto [lp, gp] = run(packed);
        const char* what = type == WeightType::f32 ? "FP32 base" : "BF16 base";
        for (size_t k = 0; k < 2 * n; ++k) {
            ASSERT_EQ(lp[k].size(), la[k].size()) << what << " answer " << k;
            ASSERT_EQ(lp[k].size(), static_cast<size_t>(shapes[k % n][k < n ? 1 : 2])) << k;
            for (size_t t = 0; t < la[k].size(); ++t)
                EXPECT_NEAR(lp[k][t], la[k][t], (type == WeightType::f32 ? 1e-5 : 2e-2) * (1 + std::fabs(la[k][t])))
                    << what << " answer " << k << " token " << t;
        }
        double worst = 0;
        for (size_t i = 0; i < ga.size(); ++i) {
            const double e = rel_max_error(gp[i], std::vector<double>(ga[i].begin(), ga[i].end()), 1e-6);
            EXPECT_LT(e, tol) << what << " gradient tensor " << i;
            worst = std::max(worst, e);
        }
        std::printf("[packed pair log-probs, %s] worst gradient tensor %.2e (relative to its largest element)\n", what,
                    worst);
    }
}

TEST(Qwen2Lora, SeedShapeCountsWithoutAllocating) {
    Qwen2Config c = model_shape("qwen2.5-0.5b");
    LoraConfig lc;
    EXPECT_EQ(lc.rank, 8);
    EXPECT_EQ(lc.alpha, 16.0);
    EXPECT_EQ(LoraAdapters::count_parameters(c, lc), 4399104);
    EXPECT_EQ(c.num_hidden_layers * static_cast<int64_t>(lc.targets.size()), 168);
    LoraConfig qv;
    qv.targets = {"q_proj", "v_proj"};
    EXPECT_EQ(LoraAdapters::count_parameters(c, qv), 24 * 8 * ((896 + 896) + (896 + 128)));
    LoraConfig bad;
    bad.targets = {"q_proj", "lm_head"};
    EXPECT_THROW(LoraAdapters::count_parameters(c, bad), Error);
}

TEST(Qwen2Lora, LayoutInitAndDeterminism) {
    Qwen2Config c = small_config();
    LoraAdapters a(c, LoraConfig{}, 50), b(c, LoraConfig{}, 50), d(c, LoraConfig{}, 51);
    EXPECT_EQ(a.num_adapted(), c.num_hidden_layers * 7);
    EXPECT_EQ(a.num_parameters(), LoraAdapters::count_parameters(c, LoraConfig{}));
    ParamList pa = a.parameters(), pb = b.parameters(), pd = d.parameters();
    ASSERT_EQ(pa.size(), static_cast<size_t>(2 * 7 * c.num_hidden_layers));
    EXPECT_EQ(pa[0].name, "model.layers.0.self_attn.q_proj.lora_A");
    EXPECT_EQ(pa[0].shape, (std::vector<int64_t>{8, 64}));
    EXPECT_EQ(pa[3].name, "model.layers.0.self_attn.k_proj.lora_B");
    EXPECT_EQ(pa[3].shape, (std::vector<int64_t>{32, 8}));
    EXPECT_EQ(pa[13].name, "model.layers.0.mlp.down_proj.lora_B");
    EXPECT_EQ(pa[12].shape, (std::vector<int64_t>{8, 96}));
    EXPECT_EQ(pa[14].name, "model.layers.1.self_attn.q_proj.lora_A");
    bool differs = false;
    for (size_t i = 0; i < pa.size(); ++i) {
        const bool is_a = pa[i].name.ends_with("lora_A");
        const double bound = is_a ? 1.0 / std::sqrt(static_cast<double>(pa[i].shape[1])) : 0.0;
        double maxabs = 0, sum = 0;
        for (int64_t j = 0; j < pa[i].numel(); ++j) {
            EXPECT_EQ(pa[i].data[j], pb[i].data[j]);
            differs |= pa[i].data[j] != pd[i].data[j];
            maxabs = std::max(maxabs, static_cast<double>(std::abs(pa[i].data[j])));
            sum += pa[i].data[j];
        }
        if (is_a) {
            EXPECT_LE(maxabs, bound) << pa[i].name;        // Kaiming-uniform a = √5: U(−1/√in, 1/√in)
            EXPECT_GT(maxabs, 0.9 * bound) << pa[i].name;  // and not narrower
            EXPECT_LT(std::abs(sum / pa[i].numel()), 0.2 * bound) << pa[i].name;  // centred
        } else {
            EXPECT_EQ(maxabs, 0.0) << pa[i].name;  // B starts at zero
        }
    }
    EXPECT_TRUE(differs);
    // clone: equal values, independent storage
    LoraAdapters e = a.clone();
    ParamList pe = e.parameters();
    EXPECT_NE(pe[0].data, pa[0].data);
    EXPECT_EQ(pe[0].data[0], pa[0].data[0]);
}

TEST(Qwen2Heads, ParameterCountsAndInit) {
    ScalarHead r = ScalarHead::reward_init(896, 50), r2 = ScalarHead::reward_init(896, 50);
    ScalarHead v = ScalarHead::zeros(896);
    EXPECT_EQ(r.num_parameters(), 897);
    ParamList p = r.parameters();
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[0].name, "head.weight");
    EXPECT_EQ(p[0].shape, (std::vector<int64_t>{1, 896}));
    EXPECT_EQ(p[1].name, "head.bias");
    EXPECT_EQ(p[0].numel() + p[1].numel(), 897);
    double s2 = 0;
    for (float x : r.weight) s2 += x * x;
    EXPECT_NEAR(std::sqrt(s2 / 896), 0.02, 0.003);  // N(0, 0.02)
    EXPECT_EQ(r.bias[0], 0.f);
    EXPECT_EQ(r.weight, r2.weight);
    for (float x : v.weight) EXPECT_EQ(x, 0.f);
    EXPECT_EQ(v.bias[0], 0.f);
}

TEST(Qwen2Full, ParameterNamesFollowTheCheckpoint) {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::f32);
    ParamList p = qwen2_parameters(w, nullptr);
    EXPECT_EQ(p.front().name, "model.embed_tokens.weight");
    EXPECT_EQ(p[1].name, "model.layers.0.input_layernorm.weight");
    EXPECT_EQ(p[3].name, "model.layers.0.self_attn.q_proj.bias");
    EXPECT_EQ(p.back().name, "model.norm.weight");
    int64_t n = 0;
    for (auto& x : p) n += x.numel();
    const int64_t per_layer = 2 * 64 + 64 * 64 + 64 + 2 * (32 * 64 + 32) + 64 * 64 + 3 * 64 * 96;
    EXPECT_EQ(n, 300 * 64 + 2 * per_layer + 64);
    Qwen2Weights wb = small_weights(c, WeightType::bf16);
    EXPECT_THROW(qwen2_parameters(wb, nullptr), Error);
}

// The one LoRA-aware projection: y = round_bf16(W·bf16(x) + bias + (alpha/r)·B(A x)) for a BF16
// base (the branch from the unrounded FP32 x), and no rounding at all for an FP32 base.
TEST(Qwen2Lora, ProjectionRoundsTheSumToTheBaseDtype) {
    const int64_t M = 3, in = 16, out = 12;
    Philox rng(60, 0);
    Qwen2Config c = small_config();
    c.hidden_size = in;
    c.intermediate_size = out;  // gate_proj: (out, in)
    c.num_hidden_layers = 1;
    LoraAdapters lora(c, LoraConfig{}, 61);
    LoraAdapter* ad = lora.get(0, Proj::gate);
    ASSERT_NE(ad, nullptr);
    for (auto& b : ad->B) b = static_cast<float>(rng.normal() * 0.5);
    std::vector<float> x(static_cast<size_t>(M * in)), bias(static_cast<size_t>(out));
    for (auto& v : x) v = static_cast<float>(rng.normal());
    for (auto& v : bias) v = static_cast<float>(rng.normal() * 0.1);
    for (WeightType type : {WeightType::bf16, WeightType::f32}) {
        Matrix W;
        W.type = type;
        W.rows = out;
        W.cols = in;
        for (int64_t i = 0; i < out * in; ++i) {
            const float v = round_to_bf16(static_cast<float>(rng.normal() * 0.3));
            if (type == WeightType::bf16) W.b.push_back(float_to_bf16(v));
            else W.f.push_back(v + 1e-4f);  // not BF16-representable
        }
        std::vector<float> y(static_cast<size_t>(M * out)), mid(static_cast<size_t>(M * 8));
        projection_forward(y.data(), mid.data(), x.data(), W, bias.data(), ad, M);
        int representable = 0;
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < out; ++n) {
                double base = 0, branch = 0;
                for (int64_t k = 0; k < in; ++k) {
                    const float xk = x[static_cast<size_t>(m * in + k)];
                    base += static_cast<double>(type == WeightType::bf16 ? round_to_bf16(xk) : xk) * W.at(n, k);
                }
                for (int64_t j = 0; j < 8; ++j) {
                    double ax = 0;
                    for (int64_t k = 0; k < in; ++k)
                        ax += static_cast<double>(ad->A[static_cast<size_t>(j * in + k)]) *
                              x[static_cast<size_t>(m * in + k)];
                    branch += static_cast<double>(ad->B[static_cast<size_t>(n * 8 + j)]) * ax;
                }
                const double sum = base + bias[static_cast<size_t>(n)] + 2.0 * branch;  // alpha/r = 16/8
                const float got = y[static_cast<size_t>(m * out + n)];
                representable += round_to_bf16(got) == got;
                if (type == WeightType::bf16) {
                    const float want = round_to_bf16(static_cast<float>(sum));
                    EXPECT_LE(std::abs(got - want), std::abs(want) * 0x1.0p-7) << m << "," << n;  // ≤ 1 BF16 ulp
                } else {
                    EXPECT_NEAR(got, sum, 1e-5 * (1 + std::abs(sum))) << m << "," << n;
                }
            }
        if (type == WeightType::bf16) EXPECT_EQ(representable, M * out);  // every output is a BF16 value
        else EXPECT_LT(representable, M * out / 2);                       // FP32: nothing rounded
    }
}
