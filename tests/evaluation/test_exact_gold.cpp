// The rubric measured exactly (evaluation/exact_gold.h):
//   * a policy that always answers with one sentence of the grammar has exact
//     success 0 or 1, and every field equals the recogniser's verdict on that
//     sentence (data/rubric.h), for each of the 192 sentences and each of the
//     6 expected actions; a mixture gives the mixture of the verdicts;
//   * the grammar tree spells every sentence and its leading-space twin in
//     the real Qwen2.5 tokenizer (decoded back to the text) followed by EOS;
//   * on a micro random model with that vocabulary, P(f) is the sum over
//     the two spellings of exp(Σ log-probs) scored one sequence at a time
//     (scoring.h), and the judge's expectation Σ P·score uses each
//     spelling's own score.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "../model/test_qwen2_common.h"
#include "evaluation/exact_gold.h"
#include "model/scoring.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

using namespace ppolab;

namespace {

constexpr int32_t kQwenEos = 151645;

TEST(ExactGold, OneSentencePolicyIsTheRecogniser) {
    const std::vector<ResponseForm> forms = rubric_enumerate();
    ASSERT_EQ(forms.size(), 192u);
    for (size_t f = 0; f < forms.size(); ++f) {
        std::vector<double> p(forms.size(), 0.0);
        p[f] = 1.0;
        const std::string text = response_form_text(forms[f]);
        for (int a = 0; a < kActionCount; ++a) {
            const RubricVerdict v = evaluate_response(text, FinishReason::eos, a);
            ASSERT_TRUE(v.recognized) << text;
            const ExactRubric e = exact_rubric(p, forms, a);
            EXPECT_EQ(e.success, v.rubric_success ? 1.0 : 0.0) << text << " expected " << a;
            EXPECT_EQ(e.in_grammar, 1.0);
            EXPECT_EQ(e.relevant, v.relevant ? 1.0 : 0.0) << text;
            EXPECT_EQ(e.certainty, v.unsupported_certainty ? 1.0 : 0.0) << text;
            EXPECT_EQ(e.refusal, v.refusal ? 1.0 : 0.0) << text;
            EXPECT_EQ(e.polite, v.polite ? 1.0 : 0.0) << text;
            for (int b = 0; b < kActionCount; ++b)
                EXPECT_EQ(e.action[static_cast<size_t>(b)], v.action == b ? 1.0 : 0.0) << text;
        }
    }
}

TEST(ExactGold, MixtureIsTheMixtureOfVerdicts) {
    const std::vector<ResponseForm> forms = rubric_enumerate();
    Philox rng(5, 0);
    std::vector<double> p(forms.size());
    double total = 0;
    for (double& x : p) total += (x = rng.uniform());
    for (double& x : p) x *= 0.9 / total;  // 10 % outside the grammar
    for (int a = 0; a < kActionCount; ++a) {
        double success = 0;
        for (size_t f = 0; f < forms.size(); ++f)
            success += evaluate_response(response_form_text(forms[f]), FinishReason::eos, a).rubric_success ? p[f] : 0;
        const ExactRubric e = exact_rubric(p, forms, a);
        EXPECT_NEAR(e.success, success, 1e-12);
        EXPECT_NEAR(e.in_grammar, 0.9, 1e-12);
        EXPECT_GT(e.success, 0.05);
    }
    EXPECT_THROW(exact_rubric(std::vector<double>(3, 0.0), forms, 0), Error);
    EXPECT_THROW(exact_rubric(p, forms, 6), Error);
}

TEST(ExactGold, TreeSpellsEverySentenceInTheQwenTokenizer) {
    const Tokenizer tok = Tokenizer::from_file(test::qwen_model_dir() / "tokenizer.json");
    const GrammarTree g = grammar_tree(tok, kQwenEos);
    ASSERT_EQ(g.tree.last_node.size(), kGrammarSpellings * g.forms.size());
    std::set<int32_t> leaves;
    int64_t tokens = 0;
    for (size_t i = 0; i < g.tree.last_node.size(); ++i) {
        std::vector<int32_t> ids;
        for (int32_t n = g.tree.last_node[i]; n >= 0; n = g.tree.parent[static_cast<size_t>(n)])
            ids.insert(ids.begin(), g.tree.token[static_cast<size_t>(n)]);
        ASSERT_EQ(ids.back(), kQwenEos);
        ids.pop_back();
        tokens += static_cast<int64_t>(ids.size()) + 1;
        const std::string text = response_form_text(g.forms[i / kGrammarSpellings]);
        EXPECT_EQ(tok.decode(ids), i % kGrammarSpellings ? " " + text : text);
        leaves.insert(g.tree.last_node[i]);
    }
    EXPECT_EQ(leaves.size(), g.tree.last_node.size());  // 384 different sequences
    EXPECT_LT(g.tree.nodes(), tokens / 2);              // the tree shares most tokens
}

TEST(ExactGold, FormProbabilityIsBothSpellingsScoredAlone) {
    const Tokenizer tok = Tokenizer::from_file(test::qwen_model_dir() / "tokenizer.json");
    const GrammarTree g = grammar_tree(tok, kQwenEos);
    Qwen2Config c = test::small_config();
    c.vocab_size = 151936;
    c.hidden_size = 32;
    c.intermediate_size = 48;
    c.num_hidden_layers = 1;
    c.num_attention_heads = 2;
    c.num_key_value_heads = 1;
    c.head_dim = 16;
    const Qwen2Weights w = test::small_weights(c, WeightType::bf16, 3, 0.3);
    LoraAdapters lora = test::random_lora(c, 4);
    Qwen2 model(w, &lora);
    const ScalarHead head = test::random_head(c.hidden_size, 2);
    const std::vector<int32_t> prompt = tok.encode("The printer shows a paused queue.");
    const std::vector<float> scores = grammar_judge_scores(model, head, prompt, g);
    const GrammarMass m = grammar_mass(model, prompt, g, &scores);

    std::vector<ScoringRow> rows;
    for (size_t i = 0; i < g.tree.last_node.size(); ++i) {
        std::vector<int32_t> ids;
        for (int32_t n = g.tree.last_node[i]; n >= 0; n = g.tree.parent[static_cast<size_t>(n)])
            ids.insert(ids.begin(), g.tree.token[static_cast<size_t>(n)]);
        rows.push_back({prompt, ids});
    }
    const ScoringBatch b = scoring_batch(rows, ScoringLimits{64, 64, 128}, 0);
    Scorer scorer(model);
    std::vector<float> logp(static_cast<size_t>(b.B * b.T)), alone(static_cast<size_t>(b.B));
    scorer.response_logprobs(b, logp.data());
    scorer.reward_scores(b, head, alone.data());
    double proxy = 0, space = 0;
    for (size_t f = 0; f < g.forms.size(); ++f) {
        double pf = 0;
        for (size_t s = 0; s < kGrammarSpellings; ++s) {
            const size_t i = f * kGrammarSpellings + s;
            double sum = 0;
            for (int64_t t = b.P; t < b.T; ++t)
                if (b.response_mask[i * static_cast<size_t>(b.T) + static_cast<size_t>(t)])
                    sum += logp[i * static_cast<size_t>(b.T) + static_cast<size_t>(t)];
            pf += std::exp(sum);
            if (s == 1) space += std::exp(sum);
            proxy += std::exp(sum) * alone[i];
            EXPECT_EQ(scores[i], alone[i]) << "spelling " << i;
        }
        EXPECT_EQ(m.form_p[f], pf) << "form " << f;
    }
    EXPECT_EQ(m.leading_space, space);
    ASSERT_TRUE(m.proxy.has_value());
    EXPECT_EQ(*m.proxy, proxy);
}

}  // namespace
