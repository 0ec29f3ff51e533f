// exact_gold.h — the rubric measured exactly under a policy's own
// distribution, not through one greedy or sampled answer per prompt.
//
// The rubric's grammar (data/rubric.h) has 192 sentences. Under a policy π
// and a prompt x, the probability that π answers with sentence f is
//
//   P(f | x) = π(tok(f) EOS | x) + π(tok(" " + f) EOS | x)
//
// the canonical tokenisation of the sentence and of the sentence after one
// leading space (the recogniser trims blanks; SFT's answers have none),
// each followed by EOS. All 384 spellings are teacher-forced in one pass
// over their prefix tree (model/prefix_tree.h), so each token's log-prob is
// bit for bit what the sampler records when it draws that token. Other
// tokenisations of the same text and other blanks inside it are not
// counted: P(f | x) is a lower bound of the text's probability, tight for
// policies that learned from canonically tokenised answers. From the 192
// probabilities and a prompt's expected action (gold/, read only by
// scoring) come the exact expected rubric success and the mass on the
// grammar, on each action, on unsupported certainty, on refusals and on
// politeness; with the frozen judge's score of every spelling, the judge's
// expectation inside the grammar Σ P(spelling)·score(spelling).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "data/rubric.h"
#include "model/prefix_tree.h"
#include "tokenizer/tokenizer.h"
#include "util/json.h"

namespace ppolab {

inline constexpr int64_t kGrammarSpellings = 2;  // plain, one leading space

struct GrammarTree {
    std::vector<ResponseForm> forms;  // rubric_enumerate() order (192)
    PrefixTree tree;                  // sequence 2f: form f's tokens + EOS; 2f + 1: " " + form f
};
GrammarTree grammar_tree(const Tokenizer& tokenizer, int32_t eos_id);
// rubric_enumerate(), made once (rows of every population read it).
const std::vector<ResponseForm>& grammar_forms();

// One prompt under one policy.
struct GrammarMass {
    std::vector<double> form_p;   // (forms) P(f | x), both spellings
    double leading_space = 0;     // Σ over the leading-space spellings
    std::optional<double> proxy;  // Σ_spelling P · judge score (the judge's expectation inside the grammar)
};
// judge_scores: grammar_judge_scores of the same prompt, or nullptr.
GrammarMass grammar_mass(Qwen2& policy, const std::vector<int32_t>& prompt, const GrammarTree& grammar,
                         const std::vector<float>* judge_scores);
// The frozen judge's score of every spelling (2 × forms), policy-free.
std::vector<float> grammar_judge_scores(Qwen2& judge, const ScalarHead& head, const std::vector<int32_t>& prompt,
                                        const GrammarTree& grammar);

// What the rubric makes of the 192 probabilities for one expected action:
// each field is the probability of the event under the policy.
struct ExactRubric {
    double success = 0;                         // recognised, relevant, no unsupported certainty, EOS (data/rubric.h)
    double in_grammar = 0;                      // any sentence of the grammar, then EOS
    double relevant = 0;                        // the expected action, any caution
    double certainty = 0;                       // unsupported certainty, any action
    double refusal = 0;                         // a refusal
    double polite = 0;                          // an opening or a closing formula
    std::array<double, kActionCount> action{};  // each action's instruction, any caution
};
ExactRubric exact_rubric(const std::vector<double>& form_p, const std::vector<ResponseForm>& forms,
                         int expected_action);

ordered_json grammar_mass_to_json(const GrammarMass& mass);
GrammarMass grammar_mass_from_json(const json& value, std::string_view where);
ordered_json exact_rubric_to_json(const ExactRubric& r);

}  // namespace ppolab
