// populations.cpp — rows, unique contexts, the repeated-generation check and
// the metrics of SPEC §7.
#include "evaluation/populations.h"

#include <set>

#include "util/error.h"

namespace ppolab {

std::optional<double> EvalRow::mean_logratio() const {
    if (actor_logp.empty() || actor_logp.size() != reference_logp.size()) return std::nullopt;
    double sum = 0;
    for (size_t i = 0; i < actor_logp.size(); ++i)
        sum += static_cast<double>(actor_logp[i]) - static_cast<double>(reference_logp[i]);
    return sum / static_cast<double>(actor_logp.size());
}

ordered_json eval_row_to_json(const EvalRow& row) {
    ordered_json j;
    j["id"] = row.id;
    j["family"] = row.family;
    j["population"] = row.population;
    j["prompt"] = row.prompt;
    j["response_ids"] = row.response;
    j["text"] = row.text;
    j["finish_reason"] = row.finish_reason;
    j["decodable"] = row.decodable;
    j["response_tokens"] = row.response.size();
    j["learned_score"] = row.learned_score ? ordered_json(*row.learned_score) : ordered_json(nullptr);
    const std::optional<double> lr = row.mean_logratio();
    j["mean_actor_reference_logratio"] = lr ? ordered_json(*lr) : ordered_json(nullptr);
    j["actor_logp"] = row.actor_logp;
    j["reference_logp"] = row.reference_logp;
    j["sampling_logp"] = row.sampling_logp;
    if (row.kl_exact_to_sft) j["kl_exact_to_sft"] = *row.kl_exact_to_sft;
    if (row.grammar) j["grammar"] = grammar_mass_to_json(*row.grammar);
    if (row.expected_action >= 0) j["expected_action"] = row.expected_action;
    if (row.verdict) j["rubric"] = rubric_verdict_to_json(*row.verdict);
    return j;
}

EvalRow eval_row_from_json(const json& v, std::string_view where) {
    EvalRow r;
    r.id = json_string(v, "id", where);
    const std::string w = std::string(where) + " row " + r.id;
    r.family = json_string(v, "family", w);
    r.population = json_string(v, "population", w);
    if (r.population != "test" && r.population != "probe" && r.population != "validation")
        fail(w, ": field 'population' must be test, probe or validation; got '", r.population, "'");
    r.prompt = json_string(v, "prompt", w);
    r.response = json_field(v, "response_ids", w).get<std::vector<int32_t>>();
    r.text = json_string(v, "text", w);
    r.finish_reason = json_string(v, "finish_reason", w);
    finish_reason_parse(r.finish_reason);
    r.decodable = json_bool(v, "decodable", w);
    const json& score = json_field(v, "learned_score", w);
    if (!score.is_null()) r.learned_score = json_number(v, "learned_score", w);
    r.actor_logp = json_field(v, "actor_logp", w).get<std::vector<float>>();
    r.reference_logp = json_field(v, "reference_logp", w).get<std::vector<float>>();
    r.sampling_logp = json_field(v, "sampling_logp", w).get<std::vector<float>>();
    for (const auto* per_token : {&r.actor_logp, &r.reference_logp, &r.sampling_logp})
        if (!per_token->empty() && per_token->size() != r.response.size())
            fail(w, ": ", per_token->size(), " per-token log-probs for ", r.response.size(), " response tokens");
    if (v.contains("kl_exact_to_sft") && !v["kl_exact_to_sft"].is_null())
        r.kl_exact_to_sft = json_number(v, "kl_exact_to_sft", w);
    if (v.contains("grammar")) r.grammar = grammar_mass_from_json(v["grammar"], w);
    if (v.contains("expected_action")) r.expected_action = static_cast<int>(json_int(v, "expected_action", w));
    if (v.contains("rubric")) r.verdict = rubric_verdict_from_json(v["rubric"], w + " rubric");
    return r;
}

std::vector<const EvalRow*> unique_contexts(const std::vector<const EvalRow*>& rows) {
    std::set<std::string> seen;
    std::vector<const EvalRow*> out;
    for (const EvalRow* r : rows)
        if (seen.insert(r->prompt).second) out.push_back(r);
    return out;
}

std::vector<const EvalRow*> rows_of(const std::vector<EvalRow>& rows, std::string_view population) {
    std::vector<const EvalRow*> out;
    for (const EvalRow& r : rows)
        if (r.population == population) out.push_back(&r);
    return out;
}

void check_repeated_generations(const std::vector<EvalRow>& rows) {
    std::map<std::string, const EvalRow*> first;
    for (const EvalRow& r : rows) {
        auto [it, fresh] = first.emplace(r.prompt, &r);
        if (fresh) continue;
        const EvalRow& a = *it->second;
        if (a.response == r.response && a.finish_reason == r.finish_reason) continue;
        size_t k = 0;
        while (k < a.response.size() && k < r.response.size() && a.response[k] == r.response[k]) ++k;
        fail("greedy generations of one context differ: rows ", a.id, " and ", r.id, " share a prompt but differ at ",
             "response token ", k, " (", a.response.size(), " vs ", r.response.size(), " tokens, finish ",
             a.finish_reason, " vs ", r.finish_reason, ")");
    }
}

namespace {

ordered_json rate(int64_t count, int64_t denominator) {
    return denominator > 0 ? ordered_json(static_cast<double>(count) / static_cast<double>(denominator))
                           : ordered_json(nullptr);
}

ordered_json mean(double sum, int64_t n) {
    return n > 0 ? ordered_json(sum / static_cast<double>(n)) : ordered_json(nullptr);
}

}  // namespace

ordered_json population_metrics(const std::vector<const EvalRow*>& rows) {
    int64_t n = 0, success = 0, recognized = 0, relevant = 0, certain = 0, refusals = 0, no_eos = 0, undecodable = 0;
    int64_t tokens = 0, scored = 0, with_ratio = 0, with_grammar = 0, with_proxy = 0;
    double score_sum = 0, ratio_sum = 0, leading_space = 0, proxy = 0;
    ExactRubric exact;  // Σ over rows
    for (const EvalRow* r : rows) {
        if (!r->verdict) fail("row ", r->id, ": no rubric verdict (score the generations first)");
        const RubricVerdict& v = *r->verdict;
        ++n;
        success += v.rubric_success;
        recognized += v.recognized;
        relevant += v.recognized && v.relevant;
        certain += v.recognized && v.unsupported_certainty;
        refusals += v.refusal;
        no_eos += r->finish_reason != "eos";
        undecodable += !r->decodable;
        tokens += static_cast<int64_t>(r->response.size());
        if (r->learned_score) {
            score_sum += *r->learned_score;
            ++scored;
        }
        if (auto lr = r->mean_logratio()) {
            ratio_sum += *lr;
            ++with_ratio;
        }
        if (r->grammar) {
            const ExactRubric e = exact_rubric(r->grammar->form_p, grammar_forms(), r->expected_action);
            exact.success += e.success;
            exact.in_grammar += e.in_grammar;
            exact.relevant += e.relevant;
            exact.certainty += e.certainty;
            exact.refusal += e.refusal;
            exact.polite += e.polite;
            for (size_t a = 0; a < e.action.size(); ++a) exact.action[a] += e.action[a];
            leading_space += r->grammar->leading_space;
            ++with_grammar;
            if (r->grammar->proxy) {
                proxy += *r->grammar->proxy;
                ++with_proxy;
            }
        }
    }
    ordered_json m;
    m["rows"] = n;
    m["distinct_prompts"] = unique_contexts(rows).size();
    m["rubric_success"] = success;
    m["rubric_success_rate_all_outputs"] = rate(success, n);
    m["recognized"] = recognized;
    m["recognized_rate"] = rate(recognized, n);
    m["relevant_recognized"] = relevant;
    m["relevant_rate_recognized_denominator"] = rate(relevant, recognized);
    m["unsupported_certainty_recognized"] = certain;
    m["unsupported_certainty_rate_recognized_denominator"] = rate(certain, recognized);
    m["refusals"] = refusals;
    m["refusal_rate"] = rate(refusals, n);
    m["without_eos"] = no_eos;
    m["without_eos_rate"] = rate(no_eos, n);
    m["undecodable"] = undecodable;
    m["undecodable_rate"] = rate(undecodable, n);
    m["mean_response_tokens_eos_included"] = mean(static_cast<double>(tokens), n);
    m["learned_reward_rows"] = scored;
    m["mean_learned_reward"] = mean(score_sum, scored);
    m["logratio_rows"] = with_ratio;
    m["mean_sampled_actor_reference_logratio"] = mean(ratio_sum, with_ratio);
    if (with_grammar > 0) {  // exact expectations under the policy (exact_gold.h), mean over the rows measured
        const double k = static_cast<double>(with_grammar);
        ExactRubric mean_exact = exact;
        for (double* x : {&mean_exact.success, &mean_exact.in_grammar, &mean_exact.relevant, &mean_exact.certainty,
                          &mean_exact.refusal, &mean_exact.polite})
            *x /= k;
        for (double& x : mean_exact.action) x /= k;
        ordered_json e = exact_rubric_to_json(mean_exact);
        e["leading_space"] = leading_space / k;
        e["proxy_in_grammar"] = mean(proxy, with_proxy);
        e["rows"] = with_grammar;
        m["exact"] = e;
    }
    m["denominators"] = {{"rubric_success_rate_all_outputs", n},
                         {"recognized_rate", n},
                         {"relevant_rate_recognized_denominator", recognized},
                         {"unsupported_certainty_rate_recognized_denominator", recognized},
                         {"refusal_rate", n},
                         {"without_eos_rate", n},
                         {"undecodable_rate", n}};
    return m;
}

ordered_json policy_metrics(const std::vector<EvalRow>& rows, bool validation) {
    ordered_json out;
    if (validation) {
        const std::vector<const EvalRow*> v = rows_of(rows, "validation");
        if (v.size() != rows.size())
            fail("validation metrics: ", rows.size() - v.size(), " rows are not validation rows");
        out["validation"] = population_metrics(v);
        out["validation_unique_contexts"] = population_metrics(unique_contexts(v));
        return out;
    }
    const std::vector<const EvalRow*> test = rows_of(rows, "test"), probe = rows_of(rows, "probe");
    if (test.size() + probe.size() != rows.size())
        fail("evaluation metrics: ", rows.size() - test.size() - probe.size(), " rows are neither test nor probe rows");
    std::vector<const EvalRow*> all;
    for (const EvalRow& r : rows) all.push_back(&r);
    out["test"] = population_metrics(test);
    out["probe_rows"] = population_metrics(probe);
    out["probe_unique_contexts"] = population_metrics(unique_contexts(probe));
    out["all_rows"] = population_metrics(all);
    out["all_unique_contexts"] = population_metrics(unique_contexts(all));
    return out;
}

}  // namespace ppolab
