// Exact probabilities over a prefix tree (model/prefix_tree.h) on a micro
// random Qwen2 with random LoRA adapters:
//   * every node's log-prob and every sequence's reward-head score are bit
//     for bit those of scoring each sequence alone (scoring.h), BF16 and
//     FP32 bases, on every path this CPU runs (PPOLAB_ISA in the suite);
//   * a sampled response's tree log-prob is bit for bit the float64 sum of
//     the sampler's own log-probs (generate.h);
//   * Monte-Carlo frequencies of 40 000 temperature-1 samples agree with the
//     exact probabilities of every sequence of a small vocabulary (within
//     5 binomial standard deviations), and the probabilities of all
//     sequences ending within the length limit sum to 1 − P(no EOS).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "model/generate.h"
#include "model/prefix_tree.h"
#include "model/scoring.h"
#include "test_qwen2_common.h"

using namespace ppolab;
using namespace ppolab::test;

namespace {

constexpr int32_t kEos = 3;

// Sequences that share prefixes: a few stems, each continued several ways,
// every one ending with kEos (lengths 1 to ~14).
std::vector<std::vector<int32_t>> branching_sequences(int64_t V, uint64_t seed) {
    Philox rng(seed, 11);
    auto tok = [&] {
        int32_t t;
        do t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
        while (t == kEos);
        return t;
    };
    std::vector<std::vector<int32_t>> out = {{kEos}};
    for (int stem = 0; stem < 5; ++stem) {
        std::vector<int32_t> s;
        for (int64_t i = 0, n = 1 + static_cast<int64_t>(rng.below(5)); i < n; ++i) s.push_back(tok());
        for (int branch = 0; branch < 6; ++branch) {
            std::vector<int32_t> y = s;
            for (int64_t i = 0, n = static_cast<int64_t>(rng.below(8)); i < n; ++i) y.push_back(tok());
            y.push_back(kEos);
            out.push_back(y);
            if (branch == 2) out.push_back(y);  // a duplicate shares its nodes
        }
    }
    return out;
}

void expect_tree_equals_alone(WeightType type) {
    const Qwen2Config c = small_config();
    const Qwen2Weights w = small_weights(c, type);
    LoraAdapters lora = random_lora(c, 5);
    Qwen2 model(w, &lora);
    const ScalarHead head = random_head(c.hidden_size, 9);
    const std::vector<int32_t> prompt = {17, 250, 4, 99, 31, 7, 188};
    const auto seqs = branching_sequences(c.vocab_size, 21);
    const PrefixTree tree = prefix_tree(seqs);
    size_t tokens = 0;
    for (const auto& s : seqs) tokens += s.size();
    EXPECT_LT(tree.nodes(), static_cast<int64_t>(tokens));  // prefixes are shared
    const TreeLogprobs lp = prefix_tree_logprobs(model, prompt, tree);
    const std::vector<float> scores = prefix_tree_scores(model, head, prompt, tree);

    std::vector<ScoringRow> rows;
    for (const auto& s : seqs) rows.push_back({prompt, s});
    const ScoringBatch batch = scoring_batch(rows, ScoringLimits{64, 64, 128}, 0);
    Scorer scorer(model);
    std::vector<float> logp(static_cast<size_t>(batch.B * batch.T)), alone_scores(static_cast<size_t>(batch.B));
    scorer.response_logprobs(batch, logp.data());
    scorer.reward_scores(batch, head, alone_scores.data());
    for (size_t i = 0; i < seqs.size(); ++i) {
        // the path of sequence i, root first
        std::vector<int32_t> path;
        for (int32_t n = tree.last_node[i]; n >= 0; n = tree.parent[static_cast<size_t>(n)])
            path.insert(path.begin(), n);
        ASSERT_EQ(path.size(), seqs[i].size());
        double sum = 0;
        for (size_t j = 0; j < path.size(); ++j) {
            const float alone = logp[i * static_cast<size_t>(batch.T) + static_cast<size_t>(batch.P) + j];
            EXPECT_EQ(lp.node_logp[static_cast<size_t>(path[j])], alone) << "sequence " << i << " token " << j;
            sum += alone;
        }
        EXPECT_EQ(lp.sequence_logp[i], sum) << "sequence " << i;
        EXPECT_EQ(scores[i], alone_scores[i]) << "sequence " << i;
    }
}

TEST(PrefixTree, SharesPrefixesAndRefusesEmpty) {
    const PrefixTree t = prefix_tree({{1, 2, 3}, {1, 2, 4}, {1, 5}, {1, 2, 3}});
    EXPECT_EQ(t.nodes(), 5);
    EXPECT_EQ(t.last_node[0], t.last_node[3]);
    EXPECT_EQ(t.parent[static_cast<size_t>(t.last_node[2])], 0);
    EXPECT_EQ(std::vector<uint8_t>(t.internal.begin(), t.internal.end()), (std::vector<uint8_t>{1, 1, 0, 0, 0}));
    EXPECT_THROW(prefix_tree({{1}, {}}), Error);
}

TEST(PrefixTree, EachNodeIsItsSequenceAloneBf16) { expect_tree_equals_alone(WeightType::bf16); }
TEST(PrefixTree, EachNodeIsItsSequenceAloneFp32) { expect_tree_equals_alone(WeightType::f32); }

// A micro vocabulary where every short sequence has a visible probability.
struct Micro {
    Qwen2Config c;
    Qwen2Weights w;
    LoraAdapters lora;
    Micro() : c(micro_config()), w(small_weights(c, WeightType::bf16, 3, 0.5)), lora(random_lora(c, 4, 0.3)) {}
    static Qwen2Config micro_config() {
        Qwen2Config c = small_config();
        c.vocab_size = 6;
        return c;
    }
};

TEST(PrefixTree, SampledResponsesHaveTheSamplersLogprob) {
    Micro m;
    Qwen2 model(m.w, &m.lora);
    const std::vector<int32_t> prompt = {1, 5, 2, 0};
    GenerationOptions o;
    o.max_new_tokens = 12;
    o.eos_id = kEos;
    Philox rng(77, 1);
    const auto gens = generate(model, std::vector<std::vector<int32_t>>(64, prompt), o, rng);
    std::vector<std::vector<int32_t>> seqs;
    std::vector<double> recorded;
    for (const auto& g : gens) {
        seqs.push_back(g.tokens);
        double sum = 0;
        for (float x : g.logprobs) sum += x;
        recorded.push_back(sum);
    }
    const TreeLogprobs lp = prefix_tree_logprobs(model, prompt, prefix_tree(seqs));
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(lp.sequence_logp[i], recorded[i]) << "sample " << i;
}

TEST(PrefixTree, MonteCarloAgreesWithExact) {
    Micro m;
    Qwen2 model(m.w, &m.lora);
    const std::vector<int32_t> prompt = {2, 4, 1};
    // Every sequence of up to 3 tokens that ends with EOS (1 + 5 + 25).
    std::vector<std::vector<int32_t>> seqs = {{kEos}};
    std::map<std::vector<int32_t>, size_t> index = {{{kEos}, 0}};
    for (int32_t a = 0; a < 6; ++a) {
        if (a == kEos) continue;
        seqs.push_back({a, kEos});
        for (int32_t b = 0; b < 6; ++b)
            if (b != kEos) seqs.push_back({a, b, kEos});
    }
    for (size_t i = 0; i < seqs.size(); ++i) index[seqs[i]] = i;
    const TreeLogprobs lp = prefix_tree_logprobs(model, prompt, prefix_tree(seqs));
    GenerationOptions o;
    o.max_new_tokens = 3;
    o.eos_id = kEos;
    Philox rng(2024, 3);
    constexpr int64_t kBatches = 40, kRows = 1000, kN = kBatches * kRows;
    std::vector<int64_t> count(seqs.size(), 0);
    int64_t no_eos = 0;
    for (int64_t b = 0; b < kBatches; ++b)
        for (const auto& g : generate(model, std::vector<std::vector<int32_t>>(kRows, prompt), o, rng)) {
            auto it = index.find(g.tokens);
            if (it == index.end()) {
                EXPECT_EQ(g.finish_reason, "length");
                ++no_eos;
            } else {
                ++count[it->second];
            }
        }
    double total = 0, max_p = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
        const double p = std::exp(lp.sequence_logp[i]), f = static_cast<double>(count[i]) / kN;
        total += p;
        max_p = std::max(max_p, p);
        EXPECT_LE(std::abs(f - p), 5 * std::sqrt(p * (1 - p) / kN) + 1e-12) << "sequence " << i << ": exact " << p;
    }
    EXPECT_GT(max_p, 0.05);  // the test sees real mass, not only tiny tails
    const double f_no_eos = static_cast<double>(no_eos) / kN, p_no_eos = 1 - total;
    EXPECT_LE(std::abs(f_no_eos - p_no_eos), 5 * std::sqrt(p_no_eos * (1 - p_no_eos) / kN) + 1e-12);
}

}  // namespace
