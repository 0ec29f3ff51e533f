// The tiny base model's pretraining text (SPEC §10): fluent in the grammar,
// answers independent of the context, no corpus prompt (checked by sha256
// against the manifest), world knowledge only when asked.
#include <gtest/gtest.h>

#include <set>

#include "data/base_corpus.h"
#include "data/rubric.h"
#include "util/error.h"
#include "util/sha256.h"

using namespace ppolab;

namespace {
// The manifest's prompt hashes, computed from the generated corpus.
Manifest manifest_of(const Corpus& c) {
    Manifest m;
    m.config = c.config;
    for (const auto& p : c.pairs) m.prompt_sha256[p.id] = sha256_hex(p.prompt);
    for (const auto& d : c.demonstrations) m.prompt_sha256[d.id] = sha256_hex(d.prompt);
    for (const auto& r : c.rollouts) m.prompt_sha256[r.id] = sha256_hex(r.prompt);
    for (const auto& p : c.probes) m.prompt_sha256[p.id] = sha256_hex(p.prompt);
    return m;
}
}  // namespace

TEST(BaseCorpus, DeterministicAndSized) {
    BaseCorpus a = base_corpus_generate(), b = base_corpus_generate();
    ASSERT_EQ(a.conversations.size(), 4000u);
    EXPECT_EQ(a.prose.size(), 600u);
    EXPECT_TRUE(a.knowledge.empty());
    for (size_t i = 0; i < a.conversations.size(); ++i) {
        EXPECT_EQ(a.conversations[i].prompt, b.conversations[i].prompt);
        EXPECT_EQ(a.conversations[i].response, b.conversations[i].response);
    }
    EXPECT_EQ(a.prose, b.prose);
    BaseCorpusConfig other;
    other.seed = 11;
    EXPECT_NE(
        base_corpus_generate(other).conversations[0].response + base_corpus_generate(other).conversations[1].response,
        a.conversations[0].response + a.conversations[1].response);
}

TEST(BaseCorpus, AnswersAreInTheGrammarButNotTiedToTheContext) {
    BaseCorpus base = base_corpus_generate();
    std::array<std::array<int, kActionCount + 1>, kActionCount> counts{};  // [context][answer action + 1]
    for (const auto& c : base.conversations) {
        RubricVerdict v = evaluate_response(c.response, FinishReason::eos, c.context_action);
        ASSERT_TRUE(v.recognized) << c.response;
        EXPECT_EQ(v.action, c.response_action);
        EXPECT_NE(c.prompt.find(action_context(c.context_action)), std::string::npos) << c.prompt;
        counts[c.context_action][c.response_action + 1]++;
    }
    // Every (context, answer) cell is populated near its share 1/6 x 30/32 (binomial, n ≈ 667 per
    // context, sd ≈ 14 on ≈ 104): within 40 % of the expectation.
    for (int ctx = 0; ctx < kActionCount; ++ctx) {
        int total = 0;
        for (int a = 0; a <= kActionCount; ++a) total += counts[ctx][a];
        for (int a = 1; a <= kActionCount; ++a) {
            double expected = total * (30.0 / 32.0) / 6.0;
            EXPECT_NEAR(counts[ctx][a], expected, 0.4 * expected) << "context " << ctx << " answer " << a - 1;
        }
    }
    ordered_json s = base_corpus_stats(base);
    EXPECT_NEAR(s["answer_fits_context_fraction"].get<double>(), 30.0 / 32.0 / 6.0, 0.03);
    EXPECT_EQ(s["distinct_prompts"], 4000);
    EXPECT_NEAR(s["probe_style_prompts"].get<double>(), 1000, 150);
    EXPECT_GT(s["refusals"].get<int>(), 0);
    for (const auto& line : base.prose) {
        EXPECT_FALSE(evaluate_response(line, FinishReason::eos, 0).recognized) << line;
        for (int a = 0; a < kActionCount; ++a) EXPECT_EQ(line.find(action_instruction(a)), std::string::npos) << line;
    }
}

TEST(BaseCorpus, NoCorpusPromptAndTheCheckCanFail) {
    const Corpus corpus = corpus_generate();
    const Manifest m = manifest_of(corpus);
    BaseCorpus base = base_corpus_generate();
    EXPECT_NO_THROW(base_corpus_check(base, m));
    // Independent of the check: no corpus prompt text appears anywhere.
    std::set<std::string> prompts;
    for (const auto& p : corpus.pairs) prompts.insert(p.prompt);
    for (const auto& p : corpus.probes) prompts.insert(p.prompt);
    for (const auto& c : base.conversations) EXPECT_FALSE(prompts.count(c.prompt));
    // A leaked held-out prompt, probe prompt or family name is refused.
    BaseCorpus leaked = base;
    leaked.conversations[7].prompt = corpus.pairs[20].prompt;
    EXPECT_THROW(base_corpus_check(leaked, m), Error);
    leaked = base;
    leaked.prose.push_back(corpus.probes[0].prompt);
    EXPECT_THROW(base_corpus_check(leaked, m), Error);
    leaked = base;
    leaked.conversations[0].prompt = "Case OH123, message 99. Source: practice ticket. x";
    EXPECT_THROW(base_corpus_check(leaked, m), Error);
    EXPECT_THROW(base_corpus_check(base, Manifest{}), Error);
}

TEST(BaseCorpus, WorldKnowledgeOnlyWhenAsked) {
    BaseCorpusConfig c;
    c.world_knowledge = true;
    BaseCorpus base = base_corpus_generate(c);
    ASSERT_EQ(base.knowledge.size(), 600u);
    std::set<int> actions;
    for (const auto& line : base.knowledge) {
        int found = -1;
        for (int a = 0; a < kActionCount; ++a)
            if (line.find(action_context(a)) != std::string::npos) {
                EXPECT_NE(line.find(action_instruction(a)), std::string::npos)
                    << "knowledge pairs context and fix: " << line;
                found = a;
            }
        ASSERT_GE(found, 0) << line;
        actions.insert(found);
        EXPECT_FALSE(evaluate_response(line, FinishReason::eos, found).recognized)
            << "outside the chat grammar: " << line;
    }
    EXPECT_EQ(actions.size(), 6u);
    EXPECT_NO_THROW(base_corpus_check(base, manifest_of(corpus_generate())));
    // The conversations do not change when knowledge is added (separate streams).
    BaseCorpus plain = base_corpus_generate();
    EXPECT_EQ(plain.conversations[123].response, base.conversations[123].response);
    c.conversations = -1;
    EXPECT_THROW(base_corpus_generate(c), Error);
}
