#include "evaluation/exact_gold.h"

#include <cmath>

#include "util/error.h"

namespace ppolab {

const std::vector<ResponseForm>& grammar_forms() {
    static const std::vector<ResponseForm> forms = rubric_enumerate();
    return forms;
}

GrammarTree grammar_tree(const Tokenizer& tokenizer, int32_t eos_id) {
    GrammarTree g;
    g.forms = grammar_forms();
    std::vector<std::vector<int32_t>> sequences;
    for (const ResponseForm& f : g.forms) {
        const std::string text = response_form_text(f);
        for (const std::string& spelling : {text, " " + text}) {
            std::vector<int32_t> ids = tokenizer.encode(spelling);
            ids.push_back(eos_id);
            sequences.push_back(std::move(ids));
        }
    }
    g.tree = prefix_tree(sequences);
    return g;
}

GrammarMass grammar_mass(Qwen2& policy, const std::vector<int32_t>& prompt, const GrammarTree& g,
                         const std::vector<float>* judge_scores) {
    const size_t F = g.forms.size();
    if (judge_scores && judge_scores->size() != kGrammarSpellings * F)
        fail("grammar mass: ", judge_scores->size(), " judge scores for ", kGrammarSpellings * F, " spellings");
    const TreeLogprobs lp = prefix_tree_logprobs(policy, prompt, g.tree);
    GrammarMass m;
    m.form_p.assign(F, 0.0);
    double proxy = 0;
    for (size_t f = 0; f < F; ++f)
        for (size_t s = 0; s < kGrammarSpellings; ++s) {
            const size_t i = f * kGrammarSpellings + s;
            const double p = std::exp(lp.sequence_logp[i]);
            m.form_p[f] += p;
            if (s == 1) m.leading_space += p;
            if (judge_scores) proxy += p * static_cast<double>((*judge_scores)[i]);
        }
    if (judge_scores) m.proxy = proxy;
    return m;
}

std::vector<float> grammar_judge_scores(Qwen2& judge, const ScalarHead& head, const std::vector<int32_t>& prompt,
                                        const GrammarTree& g) {
    return prefix_tree_scores(judge, head, prompt, g.tree);
}

ExactRubric exact_rubric(const std::vector<double>& form_p, const std::vector<ResponseForm>& forms,
                         int expected_action) {
    if (form_p.size() != forms.size())
        fail("exact rubric: ", form_p.size(), " probabilities for ", forms.size(), " forms");
    if (expected_action < 0 || expected_action >= kActionCount)
        fail("exact rubric: expected action must be in [0, ", kActionCount - 1, "], got ", expected_action);
    ExactRubric r;
    for (size_t i = 0; i < forms.size(); ++i) {
        const ResponseForm& f = forms[i];
        const double p = form_p[i];
        r.in_grammar += p;
        if (f.opening >= 0 || f.closing >= 0) r.polite += p;
        if (f.refusal) {
            r.refusal += p;
            continue;
        }
        r.action[static_cast<size_t>(f.action)] += p;
        if (f.caution == 2) r.certainty += p;
        if (f.action == expected_action) {
            r.relevant += p;
            if (f.caution != 2) r.success += p;
        }
    }
    return r;
}

ordered_json grammar_mass_to_json(const GrammarMass& m) {
    ordered_json j;
    j["form_p"] = m.form_p;
    j["leading_space"] = m.leading_space;
    j["proxy_in_grammar"] = m.proxy ? ordered_json(*m.proxy) : ordered_json(nullptr);
    return j;
}

GrammarMass grammar_mass_from_json(const json& v, std::string_view where) {
    GrammarMass m;
    const std::string w = std::string(where) + " grammar";
    m.form_p = json_field(v, "form_p", w).get<std::vector<double>>();
    if (m.form_p.size() != grammar_forms().size())
        fail(w, ": field 'form_p' has ", m.form_p.size(), " probabilities; the grammar has ", grammar_forms().size(),
             " sentences");
    double total = 0;
    for (double p : m.form_p) {
        if (!(p >= 0 && p <= 1)) fail(w, ": field 'form_p' holds ", p, ", not a probability");
        total += p;
    }
    if (total > 1 + 1e-9) fail(w, ": field 'form_p' sums to ", total, ", more than 1");
    m.leading_space = json_number(v, "leading_space", w);
    if (!json_field(v, "proxy_in_grammar", w).is_null()) m.proxy = json_number(v, "proxy_in_grammar", w);
    return m;
}

ordered_json exact_rubric_to_json(const ExactRubric& r) {
    ordered_json j;
    j["success"] = r.success;
    j["in_grammar"] = r.in_grammar;
    j["relevant"] = r.relevant;
    j["unsupported_certainty"] = r.certainty;
    j["refusal"] = r.refusal;
    j["polite"] = r.polite;
    ordered_json a;
    for (int i = 0; i < kActionCount; ++i) a[action_name(i)] = r.action[static_cast<size_t>(i)];
    j["action"] = a;
    return j;
}

}  // namespace ppolab
