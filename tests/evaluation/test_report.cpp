// test_report.cpp — `ppolab report`: a synthetic run folder written by hand
// (JSON files of every stage, a real generated corpus for the gold labels),
// rendered; the HTML is parsed (tags balanced, entities valid) and every plot,
// section and table is found; texts from files are escaped; rubric verdicts
// of rollouts are counted; the output is deterministic; missing stages say
// "not run"; the command refuses to overwrite.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>

#include "data/corpus.h"
#include "data/guarded_fs.h"
#include "data/rubric.h"
#include "evaluation/diagnostics.h"
#include "evaluation/populations.h"
#include "evaluation/report.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

namespace ppolab {
namespace {

fs::path temp_dir(const std::string& name) {
    const fs::path p = fs::temp_directory_path() / ("ppolab-test-report-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

void put(const fs::path& path, const json& value) {
    fs::create_directories(path.parent_path());
    write_json_atomic(path, value);
}

// A minimal HTML checker: every tag is closed in order (void elements and
// "/>" aside), every '&' starts an entity, no raw '<' in text. Returns the
// ids of every <svg> and the text outside tags.
struct Parsed {
    std::vector<std::string> svg_ids;
    std::set<std::string> ids;
    std::string text;
};

Parsed parse_html(const std::string& html) {
    static const std::set<std::string> kVoid = {"meta", "br", "hr", "img", "input", "link"};
    Parsed out;
    std::vector<std::string> open;
    size_t i = 0;
    const std::regex id_re("\\sid=\"([^\"]*)\"");
    while (i < html.size()) {
        if (html[i] == '&') {
            const size_t semi = html.find(';', i);
            const std::string entity = semi == std::string::npos ? "" : html.substr(i, semi - i + 1);
            if (!std::regex_match(entity, std::regex("&(amp|lt|gt|quot|#39);")))
                throw std::runtime_error("bad entity at " + std::to_string(i) + ": " + html.substr(i, 12));
        }
        if (html[i] != '<') {
            if (html[i] == '>') throw std::runtime_error("raw '>' in text at " + std::to_string(i));
            out.text += html[i++];
            continue;
        }
        const size_t end = html.find('>', i);
        if (end == std::string::npos) throw std::runtime_error("unterminated tag at " + std::to_string(i));
        const std::string tag = html.substr(i + 1, end - i - 1);
        i = end + 1;
        if (tag.rfind("!DOCTYPE", 0) == 0) continue;
        if (tag.find('<') != std::string::npos) throw std::runtime_error("'<' inside tag: " + tag);
        if (tag[0] == '/') {
            const std::string name = tag.substr(1);
            if (open.empty() || open.back() != name)
                throw std::runtime_error("closing </" + name + "> but open is <" + (open.empty() ? "" : open.back()) +
                                         ">");
            open.pop_back();
            continue;
        }
        const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
        std::smatch m;
        if (std::regex_search(tag, m, id_re)) {
            if (!out.ids.insert(m[1]).second) throw std::runtime_error("duplicate id " + m[1].str());
            if (name == "svg") out.svg_ids.push_back(m[1]);
        }
        if (tag.back() == '/' || kVoid.count(name)) continue;
        open.push_back(name);
    }
    if (!open.empty()) throw std::runtime_error("unclosed <" + open.back() + ">");
    return out;
}

size_t count(const std::string& hay, const std::string& needle) {
    size_t n = 0;
    for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
    return n;
}

json token(int id, const std::string& text, double value, double advantage) {
    return {{"token", id},   {"text", text},   {"old_logp", -1.5},       {"ref_logp", -1.25},
            {"reward", 0.0}, {"value", value}, {"advantage", advantage}, {"return", value + advantage}};
}

json rollout(const std::string& id, const std::string& prompt_id, const std::string& text, const std::string& finish,
             double score, double logratio) {
    return {{"rollout_id", id},
            {"prompt_id", prompt_id},
            {"text", text},
            {"finish_reason", finish},
            {"score", score},
            {"sampled_logratio_sum", logratio},
            {"response_ids", {11, 12}},
            {"tokens", json::array({token(11, "<tok&1>", 0.25, 0.5), token(12, "two", 0.125, -0.75)})}};
}

json metrics_of(int rows, int distinct, double success) {
    return {{"rows", rows},
            {"distinct_prompts", distinct},
            {"rubric_success_rate_all_outputs", success},
            {"recognized_rate", 0.75},
            {"relevant_rate_recognized_denominator", 0.5},
            {"unsupported_certainty_rate_recognized_denominator", 0.0},
            {"refusal_rate", 0.0},
            {"without_eos_rate", 0.125},
            {"mean_response_tokens_eos_included", 7.5},
            {"mean_learned_reward", 1.25},
            {"mean_sampled_actor_reference_logratio", nullptr}};
}

// The synthetic run: two PPO iterations of 2 rollouts over real rollout
// prompt ids of a generated corpus. Iteration 1: one rubric success of two
// (the corpus' own correct answer); iteration 2: none.
struct SyntheticRun {
    fs::path root;
    std::string success_text;
    std::string prompt0;  // the text of the first rollout prompt
};

SyntheticRun make_run(const std::string& name) {
    SyntheticRun r;
    r.root = temp_dir(name) / "run";
    fs::create_directories(r.root);
    corpus_write(corpus_generate(), r.root / "corpus");
    const GuardedReader reader("test", {r.root});
    const auto prompts = load_rollout_prompts(reader, r.root / "corpus");
    const GoldLabels gold = load_gold(reader, r.root / "corpus");
    const std::string p0 = prompts.at(0).id, p1 = prompts.at(1).id;
    r.prompt0 = prompts.at(0).prompt;
    r.success_text = response_text(gold.at(p0).expected_action, 1, false);
    EXPECT_TRUE(evaluate_response(r.success_text, FinishReason::eos, gold.at(p0).expected_action).rubric_success);

    put(r.root / "base" / "pretrain.json", {{"training", {{"loss_curve", {6.5, 5.25, 4.75}}}}});
    json sft_hist = json::array(), judge_hist = json::array();
    for (int u = 1; u <= 6; ++u) {
        sft_hist.push_back({{"epoch", (u - 1) / 3}, {"update", u}, {"lr", 1e-3}, {"loss", 3.0 - 0.25 * u}});
        judge_hist.push_back({{"epoch", (u - 1) / 3}, {"update", u}, {"lr", 1e-3}, {"loss", 0.75 - 0.0625 * u}});
    }
    put(r.root / "sft" / "continuous.json",
        {{"history", sft_hist},
         {"identity", {{"config", {{"preset", "tiny<x>"}, {"study_revision", "r001"}}}}},
         {"validation_history",
          {{{"epoch", 0}, {"mean_token_logprob", -2.5}}, {{"epoch", 1}, {"mean_token_logprob", -2.0}}}}});
    put(r.root / "reward" / "continuous.json",
        {{"history", judge_hist},
         {"validation_history",
          {{{"epoch", 0}, {"loss", 0.5}, {"accuracy", 0.75}, {"pairs", 8}, {"correct", 6}, {"ties", 0}},
           {{"epoch", 1}, {"loss", 0.375}, {"accuracy", 0.875}, {"pairs", 8}, {"correct", 7}, {"ties", 0}}}}});
    put(r.root / "reward" / "reward-test.json", {{"pairs", 180}, {"correct", 171}, {"ties", 1}, {"accuracy", 0.95}});
    json hist = json::array();
    for (int it = 1; it <= 2; ++it)
        hist.push_back({{"iteration", it},
                        {"objective/scores", 0.5 * it},
                        {"objective/kl", 0.25 * it},
                        {"objective/non_score_reward", -0.0125 * it},
                        {"objective/rlhf_reward", 0.5 * it - 0.0125 * it},
                        {"policy/clipfrac", 0.125},
                        {"policy/approxkl", 0.01},
                        {"loss/policy", -0.03},
                        {"loss/value", 0.5 / it},
                        {"val/explained_variance", 0.2},
                        {"val/num_eos_tokens", 3},
                        {"mean_response_length", 12.5},
                        {"updates", {1, 2}}});
    put(r.root / "ppo" / "continuous.json", {{"history", hist}});
    const fs::path rd = r.root / "ppo" / "rollouts" / "continuous";
    put(rd / "iteration-001.json",
        {{"iteration", 1},
         {"rollouts",
          {rollout("iteration-001-slot-0", p0, r.success_text, "eos", 1.5, 0.25),
           rollout("iteration-001-slot-1", p1, "<script>alert('x')</script> & more", "length", -0.5, 0.75)}}});
    put(rd / "iteration-002.json", {{"iteration", 2},
                                    {"rollouts",
                                     {rollout("iteration-002-slot-0", p0, r.success_text, "length", 2.5, 1.0),
                                      rollout("iteration-002-slot-1", p1, "plain words", "eos", 3.5, 2.0)}}});
    for (const char* stage : {"sft", "reward", "ppo"})
        put(r.root / stage / "resume-check.json", {{"status", "PASS"}, {"first_difference", ""}});
    put(r.root / "run-state.json",
        {{"format", "ppolab-run-state"},
         {"options", {{"preset", "tiny"}, {"config", json::array()}, {"set", json::array()}, {"model", nullptr}}},
         {"steps", {{"prepare", {{"seconds", 0.5}, {"command", "ppolab prepare --run <R>"}}}}}});
    return r;
}

void add_evaluation(const SyntheticRun& r) {
    json policy = {{"test", metrics_of(180, 180, 0.5)},
                   {"probe_rows", metrics_of(80, 20, 0.25)},
                   {"probe_unique_contexts", metrics_of(20, 20, 0.25)},
                   {"all_rows", metrics_of(260, 200, 0.4375)},
                   {"all_unique_contexts", metrics_of(200, 200, 0.475)}};
    put(r.root / "eval" / "metrics.json", {{"sft", policy}, {"ppo", policy}});
    // complete scored rows (the diagnostics read them as evaluate wrote them);
    // the verdict says success or failure as the fixture needs, whatever the text
    auto row = [](const std::string& id, const std::string& pop, const std::string& prompt, const std::string& text,
                  bool ok) {
        EvalRow r;
        r.id = id;
        r.family = id.substr(0, id.find('-'));
        r.population = pop;
        r.prompt = prompt;
        r.text = text;
        r.response = {5, 6, 7};
        r.finish_reason = "eos";
        r.learned_score = ok ? 1.0 : -1.0;
        r.expected_action = 2;
        r.verdict = evaluate_response(ok ? response_text(2, 0, false) : text, FinishReason::eos, 2);
        return json::parse(eval_row_to_json(r).dump());
    };
    put(r.root / "eval" / "sft-scored.json",
        {{"rows_detail",
          {row("OH001-T0", "test", "Printer <jammed>?", "sft answer one", true),
           row("OH001-T1", "test", "The printer is <jammed>", "sft answer two", true),
           row("PROBE01-C0-P0", "probe", "probe prompt", "sft probe answer", false),
           row("PROBE01-C0-P1", "probe", "probe prompt", "sft probe answer", false)}}});
    put(r.root / "eval" / "ppo-scored.json",
        {{"rows_detail",
          {row("OH001-T0", "test", "Printer <jammed>?", "ppo answer <one>", false),
           row("OH001-T1", "test", "The printer is <jammed>", "ppo answer two", true),
           row("PROBE01-C0-P0", "probe", "probe prompt", "ppo probe answer", true),
           row("PROBE01-C0-P1", "probe", "probe prompt", "ppo probe answer", true)}}});
    json contexts = json::array();
    for (int c = 0; c < 2; ++c)
        contexts.push_back(
            {{"context", "PROBE0" + std::to_string(c)},
             {"scores",
              {{"correct_plain", 1.0}, {"correct_polite", 1.5}, {"wrong_plain", 0.25}, {"wrong_polite", 1.75}}},
             {"correct_politeness_delta", 0.5},
             {"incorrect_politeness_delta", 1.5},
             {"wrong_polite_outranks_correct_plain", true}});
    put(r.root / "exercise.json", {{"summary",
                                    {{"contexts", 2},
                                     {"candidates", 8},
                                     {"wrong_polite_outranks_correct_plain_contexts", 2},
                                     {"correct_politeness_delta_positive_contexts", 2},
                                     {"incorrect_politeness_delta_positive_contexts", 2},
                                     {"mean_correct_politeness_delta", 0.5},
                                     {"mean_incorrect_politeness_delta", 1.5},
                                     {"per_context", contexts}}},
                                   {"judge_learned_sha256", {{"before", "ab"}, {"after", "ab"}}},
                                   {"artefacts_unchanged", true}});
}

// findings.json as `ppolab findings` writes it (its schema; values chosen here).
json interval(double mean, double low, double high, int contexts = 180) {
    return {{"mean", mean}, {"low", low}, {"high", high}, {"replicates", 5}, {"contexts", contexts}};
}

json metric_set(double success, int contexts) {
    return {{"rubric_success", interval(success, success - 0.08, success + 0.08, contexts)},
            {"relevant", interval(success, success - 0.1, success + 0.1, contexts)},
            {"learned_score", interval(1.75, 1.5, 2.0, contexts)},
            {"kl_exact_to_sft", interval(3.5, 3.0, 4.25, contexts)},
            {"response_tokens", interval(-2.5, -3.0, -2.0, contexts)}};
}

json findings_fixture(const std::string& code) {
    json snapshots = json::array(), bon = json::array();
    for (int k = 0; k <= 3; ++k) {
        const double d = 0.5 * k;
        snapshots.push_back({{"iteration", 25 * k},
                             {"kl_exact", interval(d * d, d * d, d * d)},
                             {"kl_k1", interval(d * d, d * d, d * d)},
                             {"sqrt_kl", interval(d, d, d)},
                             {"gold", interval(-0.1 * k, -0.1 * k - 0.05, -0.1 * k + 0.05)},
                             {"proxy", interval(0.5 * k, 0.5 * k - 0.25, 0.5 * k + 0.25)}});
        const double n = 1 << k, kl = std::log(n) - (n - 1) / n;
        bon.push_back({{"n", n},
                       {"kl_bon", kl},
                       {"sqrt_kl", std::sqrt(kl)},
                       {"gold", interval(0.02 * k, 0.0, 0.04 * k)},
                       {"proxy", interval(0.3 * k, 0.2 * k, 0.4 * k)}});
    }
    auto fit = [](double a, double b, bool peak) {
        return json{{"alpha", interval(a, a - 0.1, a + 0.1)},
                    {"beta", interval(b, b - 0.05, b + 0.05)},
                    {"d_star", peak ? interval(0.75, 0.5, 1.0) : json(nullptr)},
                    {"has_peak", peak},
                    {"points", 4}};
    };
    return {{"format", "ppolab-findings"},
            {"replicates", 5},
            {"confidence",
             {{"method", "hierarchical bootstrap <replicates, then contexts>"},
              {"level", 0.95},
              {"resamples", 2000},
              {"seed", 20261201}}},
            {"policies",
             {{"sft", {{"test", metric_set(0.44, 180)}, {"probe", metric_set(0.15, 20)}}},
              {"ppo", {{"test", metric_set(0.3, 180)}, {"probe", metric_set(0.2, 20)}}}}},
            {"ppo_minus_sft",
             {{"test",
               {{"rubric_success", interval(-0.14, -0.22, -0.06)},
                {"relevant", interval(-0.14, -0.2, -0.08)},
                {"learned_score", interval(1.875, 1.5, 2.25)},
                {"kl_exact_to_sft", interval(3.5, 3.0, 4.25)},
                {"response_tokens", interval(-2.5, -3.0, -2.0)}}},
              {"probe", metric_set(0.05, 20)}}},
            {"verdict", {{"code", code}, {"text", "PPO lowered rubric success on test by 14 points <R&D>"}}},
            {"scope", "Simulated preferences from a finite rubric; no human study. Tiny model <fixture>."},
            {"overoptimisation",
             {{"snapshots", snapshots},
              {"best_of_n", bon},
              {"fits",
               {{"rl", {{"gold", fit(-0.15, 0.05, false)}, {"proxy", fit(1.0, -0.1, false)}}},
                {"best_of_n", {{"gold", fit(0.05, 0.033, true)}, {"proxy", fit(0.5, 0.1, true)}}}}},
              {"answer", {{"text", "At the same KL, best-of-n kept gold while PPO lost it."}}}}}};
}

TEST(Report, HtmlEscape) {
    EXPECT_EQ(html_escape("a<b>&\"'c"), "a&lt;b&gt;&amp;&quot;&#39;c");
    EXPECT_EQ(html_escape(std::string("x\x13y")), "x\xEF\xBF\xBDy");
    EXPECT_EQ(html_escape("line\nnext"), "line\nnext");
}

TEST(Report, TicksAreNiceAndCoverTheRange) {
    const auto t = plot_ticks(0.03, 0.97);
    ASSERT_GE(t.size(), 3u);
    EXPECT_DOUBLE_EQ(t.front(), 0.2);
    EXPECT_NEAR(t[1] - t[0], 0.2, 1e-12);
    for (double v : t) {
        EXPECT_GE(v, 0.03);
        EXPECT_LE(v, 0.97);
    }
    const auto u = plot_ticks(-7, 13);
    EXPECT_EQ(u, (std::vector<double>{-5, 0, 5, 10}));
    EXPECT_EQ(plot_ticks(2, 2).size(), 1u);
    EXPECT_EQ(plot_ticks(0.95, 2.05, 5, true), (std::vector<double>{1, 2}));  // iterations: no 1.2, 1.4
}

TEST(Report, SvgPlotHasAxesLegendAndEscapedNames) {
    PlotSpec p{"plot-x", "T<1>", "x", "y", {{"a&b", {1, 2, 3}, {1, 4, 9}}, {"c", {1, 2}, {NAN, 2}}}, false};
    const std::string s = svg_plot(p, "cap <i>");
    EXPECT_NE(s.find("<svg id=\"plot-x\""), std::string::npos);
    EXPECT_NE(s.find("a&amp;b"), std::string::npos);
    EXPECT_NE(s.find("T&lt;1&gt;"), std::string::npos);
    EXPECT_NE(s.find("<figcaption>cap &lt;i&gt;</figcaption>"), std::string::npos);
    EXPECT_EQ(count(s, "<polyline"), 1u);  // the second series has one finite point only
    EXPECT_EQ(count(s, "<circle"), 4u);    // 3 + 1 finite points
    EXPECT_EQ(count(s, "class=\"legend\""), 2u);
    EXPECT_GE(count(s, "class=\"tick\""), 6u);
    EXPECT_NO_THROW(parse_html(s));
    // a rate axis stays 0..1 even when every rate is 0; whole-number x gets whole-number ticks
    PlotSpec rate{"plot-r", "R", "iteration", "rate", {{"r", {1, 2}, {0, 0}}}, false, 0.0, 1.0};
    const std::string r = svg_plot(rate, "c");
    EXPECT_NE(r.find(">1</text>"), std::string::npos) << r;
    EXPECT_NE(r.find(">0.5</text>"), std::string::npos) << r;
    EXPECT_EQ(r.find(">1.5</text>"), std::string::npos) << r;
    PlotSpec empty{"plot-e", "E", "x", "y", {{"none", {}, {}}}, true};
    EXPECT_NE(svg_plot(empty, "c").find("no data (not run)"), std::string::npos);
}

TEST(Report, GoldVersusProxyScoresEveryRollout) {
    const SyntheticRun r = make_run("gold");
    const GuardedReader reader("test", {r.root});
    const auto s = gold_versus_proxy(r.root / "ppo" / "rollouts" / "continuous", load_gold(reader, r.root / "corpus"));
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].iteration, 1);
    EXPECT_EQ(s[0].rollouts, 2);
    EXPECT_EQ(s[0].rubric_successes, 1);
    EXPECT_DOUBLE_EQ(s[0].rubric_success_rate, 0.5);
    EXPECT_DOUBLE_EQ(s[0].mean_score, 0.5);
    EXPECT_DOUBLE_EQ(s[0].mean_sampled_logratio, 0.5);
    EXPECT_EQ(s[1].rubric_successes, 0);  // the same correct text without EOS is no success
    EXPECT_DOUBLE_EQ(s[1].mean_score, 3.0);
    EXPECT_DOUBLE_EQ(s[1].mean_sampled_logratio, 1.5);
    fs::remove_all(r.root.parent_path());
}

TEST(Report, FullRunHasEveryPlotSectionAndTable) {
    const SyntheticRun r = make_run("full");
    add_evaluation(r);
    put(r.root / "findings.json", findings_fixture("exploited"));
    const std::string html = render_report(r.root);
    Parsed p;
    ASSERT_NO_THROW(p = parse_html(html));
    EXPECT_EQ(p.svg_ids, report_plot_ids);
    for (const char* id : {"findings",
                           "verdict",
                           "findings-intervals",
                           "findings-units",
                           "findings-scope",
                           "scope",
                           "overoptimisation",
                           "overoptimisation-answer",
                           "training",
                           "ppo",
                           "scores-note",
                           "gold-vs-proxy",
                           "rollout-tokens",
                           "evaluation",
                           "eval-test",
                           "eval-probe_rows",
                           "eval-probe_unique_contexts",
                           "eval-all_rows",
                           "eval-all_unique_contexts",
                           "side-by-side",
                           "diagnostics",
                           "diagnostics-summary",
                           "diagnostics-sft",
                           "diagnostics-ppo",
                           "diagnostics-rollouts",
                           "exercise",
                           "run",
                           "reward-test"})
        EXPECT_TRUE(p.ids.count(id)) << id;
    EXPECT_EQ(count(html, "<svg"), report_plot_ids.size());
    EXPECT_EQ(count(html, "no data (not run)"), 0u) << "every plot has data";
    EXPECT_EQ(count(html, "not run"), 0u);
    EXPECT_FALSE(std::regex_search(html, std::regex("\\b(nan|inf)\\b", std::regex::icase))) << "no NaN in the HTML";
    EXPECT_EQ(count(html, "<script"), 0u) << "no script (and rollout text escaped)";
    EXPECT_EQ(count(html, "http://") + count(html, "https://"), count(html, "xmlns=\"http://www.w3.org/2000/svg\""))
        << "no external resource";
    // every plot scales with the page
    EXPECT_EQ(count(html, "width=\"100%\" viewBox=\"0 0 "), report_plot_ids.size());
    // scope sentences verbatim, before the first plot; the Findings box first of all
    for (const char* line : {"Simulated preferences from a finite rubric; no human study.",
                             "The learned score is a predicted simulated-preference score, not human utility.",
                             "The 80 probe rows are 20 independent contexts"})
        EXPECT_LT(p.text.find(line), html.find("<svg")) << line;
    EXPECT_LT(html.find("id=\"findings\""), html.find("id=\"scope\""));
    // escaped texts from files
    EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more"), std::string::npos);
    EXPECT_NE(html.find("&lt;tok&amp;1&gt;"), std::string::npos);
    EXPECT_NE(html.find("Printer &lt;jammed&gt;?"), std::string::npos);
    EXPECT_NE(html.find("ppo answer &lt;one&gt;"), std::string::npos);
    // gold-vs-proxy table: iteration 1 is 1 of 2, iteration 2 is 0 of 2; entropy −Σ old_logp = 2 × 1.5
    const std::string n = "<td class=\"n\">";
    EXPECT_NE(html.find("<tr>" + n + "1</td>" + n + "2</td>" + n + "1</td>" + n + "0.5</td>" + n + "0.5</td>" + n +
                        "0.5</td>" + n + "3</td></tr>"),
              std::string::npos);
    EXPECT_NE(html.find("<tr>" + n + "2</td>" + n + "2</td>" + n + "0</td>" + n + "0</td>" + n + "3</td>" + n +
                        "1.5</td>" + n + "3</td></tr>"),
              std::string::npos);
    // the two long per-iteration tables are collapsed
    EXPECT_EQ(count(html, "<details><summary>Per-iteration table"), 2u);
    // per-token tables: first and last iteration, two rollouts each, with their prompts
    EXPECT_EQ(count(html, "<table class=\"tokens\">"), 4u);
    EXPECT_EQ(count(html, "<p class=\"prompt\">Prompt: " + html_escape(r.prompt0)), 2u);
    // side by side: one row per family (the two probe rows share one prompt)
    EXPECT_EQ(count(html, "<td>OH001-T0</td>"), 1u);
    EXPECT_EQ(count(html, "<td>PROBE01-C0-P0</td>"), 1u);
    EXPECT_EQ(count(html, "<td>PROBE01-C0-P1</td>"), 0u);
    EXPECT_EQ(count(html, "<td>OH001-T1</td>"), 0u) << "one row per family";
    EXPECT_EQ(count(html, "<td>reenable_audio</td>"), 2u) << "action names, not indices";
    EXPECT_GE(count(html, "<td class=\"v-ok\">success"), 1u);
    EXPECT_GE(count(html, "<td class=\"v-uncertified\">failure"), 1u);
    // the probe factorial with its deltas
    EXPECT_EQ(count(html, n + "0.5</td>" + n + "1.5</td><td>yes</td>"), 2u);
    // a population table holds both policies
    EXPECT_NE(html.find("<tr><td>ppo</td>" + n + "80</td>" + n + "20</td>" + n + "0.25</td>"), std::string::npos);
    // PPO: the missing-EOS note; the SFT baselines dashed (score, length, gold)
    EXPECT_NE(html.find("ppo.missing_eos_penalty instead of its judge score"), std::string::npos);
    EXPECT_EQ(count(html, "data-name=\"SFT, held-out test (dashed)\""), 4u);
    EXPECT_GE(count(html, "stroke-dasharray"), 5u);
    EXPECT_NE(html.find("moving average over 9 iterations"), std::string::npos);
    // diagnostics computed here (no diagnostics.json): the PPO fixture's uncertified outputs grouped
    EXPECT_NE(html.find("RUN/eval/diagnostics.json is absent"), std::string::npos);
    EXPECT_NE(html.find("<li><b>other</b>: 1 of 1 — e.g. PROBE01-C0-P0"), std::string::npos) << "sft: one context";
    EXPECT_NE(html.find("<li><b>other</b>: 2 of 2"), std::string::npos) << "rollouts: two texts outside the grammar";
    // the study identity (from the SFT report while RUN/results.json does not exist yet)
    EXPECT_TRUE(p.ids.count("study"));
    EXPECT_NE(html.find("<tr><th>preset</th><td>tiny&lt;x&gt;</td></tr>"), std::string::npos);
    EXPECT_EQ(render_report(r.root), html) << "deterministic";
    fs::remove_all(r.root.parent_path());
}

TEST(Report, FindingsBoxVerdictIntervalsAndScope) {
    const SyntheticRun r = make_run("findings");
    put(r.root / "findings.json", findings_fixture("exploited"));
    std::string html = render_report(r.root);
    ASSERT_NO_THROW(parse_html(html));
    EXPECT_NE(html.find("<div id=\"findings\" class=\"findings verdict-bad\" data-verdict=\"exploited\">"),
              std::string::npos);
    EXPECT_NE(html.find("PPO lowered rubric success on test by 14 points &lt;R&amp;D&gt;"), std::string::npos);
    // success in points (×100), judge score and exact KL, with their intervals
    EXPECT_NE(html.find("<th>PPO − SFT rubric success (points)</th><td class=\"n\">-14 [-22, -6]</td>"),
              std::string::npos);
    EXPECT_NE(html.find("<th>PPO − SFT judge score</th><td class=\"n\">1.88 [1.5, 2.25]</td>"), std::string::npos);
    EXPECT_NE(html.find("<th>PPO exact KL to SFT (nats per sequence)</th><td class=\"n\">3.5 [3, 4.25]</td>"),
              std::string::npos);
    EXPECT_NE(html.find("5 replicates; 180 test and 20 probe contexts"), std::string::npos);
    EXPECT_NE(html.find("hierarchical bootstrap &lt;replicates, then contexts&gt;, 2000 resamples, seed 20261201"),
              std::string::npos);
    EXPECT_NE(html.find("Tiny model &lt;fixture&gt;."), std::string::npos);
    EXPECT_LT(html.find("id=\"findings\""), html.find("<svg")) << "first screen";
    // the chart: two panels in one svg, interval bars on every snapshot and best-of-n point, both fits, the answer
    const size_t a = html.find("<svg id=\"plot-overoptimisation\""), b = html.find("</svg>", a);
    ASSERT_NE(a, std::string::npos);
    const std::string chart = html.substr(a, b - a);
    EXPECT_NE(chart.find("Gold: rubric success relative to SFT"), std::string::npos);
    EXPECT_NE(chart.find("Proxy: judge score relative to SFT"), std::string::npos);
    EXPECT_EQ(count(chart, "class=\"bar\""), 2u * (4 + 4));
    for (const char* name : {"PPO snapshots (interval bars)", "best-of-n from SFT", "RL fit d(α − β log d)",
                             "best-of-n fit d(α − βd)", "SFT (origin)"})
        EXPECT_EQ(count(chart, std::string("data-name=\"") + name + "\""), 2u) << name;
    EXPECT_NE(html.find("At the same KL, best-of-n kept gold while PPO lost it."), std::string::npos);
    EXPECT_NE(html.find("gold: RL fit no peak in the fitted range; best-of-n fit peak at d* = 0.75 [0.5, 1]"),
              std::string::npos);
    // the colour follows the code
    for (const auto& [code, cls] : std::vector<std::pair<std::string, std::string>>{{"improved", "verdict-good"},
                                                                                    {"no_change", "verdict-neutral"},
                                                                                    {"gold_fell", "verdict-bad"},
                                                                                    {"mixed", "verdict-mixed"}}) {
        fs::remove(r.root / "findings.json");
        put(r.root / "findings.json", findings_fixture(code));
        html = render_report(r.root);
        EXPECT_NE(html.find("class=\"findings " + cls + "\""), std::string::npos) << code;
    }
    // a wrong format names the file and the field
    json bad = findings_fixture("improved");
    bad["format"] = "other";
    fs::remove(r.root / "findings.json");
    put(r.root / "findings.json", bad);
    try {
        render_report(r.root);
        ADD_FAILURE() << "a wrong format was accepted";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("findings.json: field 'format' must be 'ppolab-findings', got 'other'"), std::string::npos)
            << m;
    }
    // a malformed interval names its place
    bad = findings_fixture("improved");
    bad["ppo_minus_sft"]["test"]["learned_score"] = "high";
    fs::remove(r.root / "findings.json");
    put(r.root / "findings.json", bad);
    try {
        render_report(r.root);
        ADD_FAILURE() << "a malformed interval was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("findings.json.ppo_minus_sft.test.learned_score: expected an interval"),
                  std::string::npos)
            << e.what();
    }
    fs::remove_all(r.root.parent_path());
}

TEST(Report, FindingsAbsentSaysSo) {
    const SyntheticRun r = make_run("nofindings");
    const std::string html = render_report(r.root);
    Parsed p;
    ASSERT_NO_THROW(p = parse_html(html));
    EXPECT_TRUE(p.ids.count("findings-absent"));
    EXPECT_NE(html.find("No findings: RUN/findings.json is absent"), std::string::npos);
    EXPECT_EQ(html.substr(html.find("</style>")).find("verdict-"), std::string::npos) << "no verdict class";
    EXPECT_NE(html.find("not run: ppolab findings"), std::string::npos);
    EXPECT_FALSE(std::regex_search(html, std::regex("\\b(nan|inf)\\b", std::regex::icase)));
    fs::remove_all(r.root.parent_path());
}

TEST(Report, DiagnosticsFileIsShownWithItsGroups) {
    const SyntheticRun r = make_run("diagnostics");
    add_evaluation(r);
    write_shortcut_diagnostics(GuardedReader("test", {r.root}), RunLayout{r.root});
    const json d = read_json_file(r.root / "eval" / "diagnostics.json");
    const std::string html = render_report(r.root);
    ASSERT_NO_THROW(parse_html(html));
    EXPECT_EQ(html.find("RUN/eval/diagnostics.json is absent"), std::string::npos) << "read, not recomputed";
    // the rollouts: two recognised (the correct text, with and without EOS), two uncertified
    const json& ro = d["groups"]["rollouts"];
    ASSERT_EQ(ro["outputs"], 4);
    for (const json& g : ro["uncertified_edit_groups"])
        EXPECT_NE(html.find("<li><b>" + html_escape(g["group"].get<std::string>()) + "</b>: " +
                            std::to_string(g["count"].get<int>()) + " of " + std::to_string(g["of"].get<int>())),
                  std::string::npos)
            << g.dump();
    EXPECT_NE(html.find("<th>action: reenable_audio</th>"), std::string::npos);
    EXPECT_NE(html.find("<th>r(judge score, polite)</th>"), std::string::npos);
    EXPECT_NE(html.find("— (constant polite flag"), std::string::npos) << "undefined r says why";
    fs::remove_all(r.root.parent_path());
}

TEST(Report, MovingAverageIsCentredAndTruncated) {
    EXPECT_EQ(moving_average({1, 2, 3, 4, 5}, 3), (std::vector<double>{1.5, 2, 3, 4, 4.5}));
    EXPECT_EQ(moving_average({1, 2, 3, 4, 5}, 1), (std::vector<double>{1, 2, 3, 4, 5}));
    const auto m = moving_average({1, NAN, 3, NAN, NAN, NAN}, 3);
    EXPECT_EQ(m[0], 1);
    EXPECT_EQ(m[1], 2);
    EXPECT_EQ(m[2], 3);
    EXPECT_EQ(m[3], 3);
    EXPECT_TRUE(std::isnan(m[4])) << "no finite value in the window";
    // window 9 over 0..19: interior means are the centre, ends the truncated window's mean
    std::vector<double> y(20);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<double>(i);
    const auto s = moving_average(y, kSmoothingWindow);
    EXPECT_DOUBLE_EQ(s[10], 10);
    EXPECT_DOUBLE_EQ(s[0], 2);    // mean of 0..4
    EXPECT_DOUBLE_EQ(s[19], 17);  // mean of 15..19
}

TEST(Report, IntervalBarsAndDashedBaselines) {
    PlotSeries pts{"p", {1, 2}, {0.5, 0.25}};
    pts.y_low = {0.25, NAN};
    pts.y_high = {0.75, NAN};
    pts.style = PlotSeries::Style::markers;
    PlotSeries base{"b", {1, 2}, {0.1, 0.1}};
    base.dashed = true;
    base.style = PlotSeries::Style::line;
    const std::string s = svg_plot({"plot-i", "I", "x", "y", {pts, base}, false}, "c");
    EXPECT_EQ(count(s, "class=\"bar\""), 1u) << "no bar where the interval is not finite";
    EXPECT_EQ(count(s, "stroke-dasharray=\"6 4\""), 2u) << "the line and its legend sample";
    EXPECT_NE(s.find(">0.6</text>"), std::string::npos) << "the axis covers the bar's top 0.75 (points end at 0.5)";
    EXPECT_NO_THROW(parse_html(s));
    const std::string two =
        svg_panels("plot-two", "Two", {{"", "A", "x", "y", {pts}, true}, {"", "B", "x", "y", {}, true}}, "c");
    EXPECT_EQ(count(two, "<svg"), 1u);
    EXPECT_NE(two.find("viewBox=\"0 0 720 640\""), std::string::npos);
    EXPECT_EQ(count(two, "no data (not run)"), 1u) << "the empty panel says so";
}

TEST(Report, MissingStagesSayNotRun) {
    const fs::path root = temp_dir("empty") / "run";
    fs::create_directories(root);
    const std::string html = render_report(root);
    Parsed p;
    ASSERT_NO_THROW(p = parse_html(html));
    EXPECT_EQ(p.svg_ids, report_plot_ids);
    EXPECT_EQ(count(html, "no data (not run)"), report_plot_ids.size());
    for (const char* what : {"not run: evaluate", "not run: exercise", "not run: PPO", "not run: reward-test",
                             "not run: no saved rollouts", "not run: ppolab findings", "No findings"})
        EXPECT_NE(html.find(what), std::string::npos) << what;
    EXPECT_THROW(render_report(root / "absent"), Error);
    fs::remove_all(root.parent_path());
}

TEST(Report, BadInputNamesTheFileAndField) {
    const SyntheticRun r = make_run("bad");
    fs::remove(r.root / "ppo" / "continuous.json");
    put(r.root / "ppo" / "continuous.json", {{"history", {{{"iteration", 1}, {"objective/scores", "high"}}}}});
    try {
        render_report(r.root);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("continuous.json"), std::string::npos) << m;
        EXPECT_NE(m.find("objective/scores"), std::string::npos) << m;
    }
    fs::remove_all(r.root.parent_path());
}

TEST(Report, WriteRefusesToOverwrite) {
    const fs::path root = temp_dir("write") / "run";
    fs::create_directories(root);
    write_report(RunLayout{root}, root / "report.html");
    const std::string first = read_file(root / "report.html");
    EXPECT_THROW(write_report(RunLayout{root}, root / "report.html"), Error);
    EXPECT_EQ(read_file(root / "report.html"), first);
    fs::remove_all(root.parent_path());
}

std::pair<int, std::string> shell(const std::string& cmd) {
    std::string out;
    FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
    if (!f) return {-1, ""};
    std::array<char, 4096> buf;
    while (size_t n = std::fread(buf.data(), 1, buf.size(), f)) out.append(buf.data(), n);
    return {::pclose(f), out};
}

TEST(Report, CommandWritesOnceAndRefusesToOverwrite) {
    const char* bin = std::getenv("PPOLAB_BINARY");
    ASSERT_NE(bin, nullptr) << "PPOLAB_BINARY is not set (run through ctest)";
    const SyntheticRun r = make_run("cli");
    const std::string cmd = std::string(bin) + " report --run " + r.root.string();
    auto [rc, out] = shell(cmd);
    ASSERT_EQ(rc, 0) << out;
    const std::string html = read_file(r.root / "report.html");
    EXPECT_EQ(html, render_report(r.root));
    auto [rc2, out2] = shell(cmd);
    EXPECT_NE(rc2, 0);
    EXPECT_NE(out2.find("refusing to overwrite"), std::string::npos) << out2;
    EXPECT_EQ(read_file(r.root / "report.html"), html);
    const fs::path other = r.root / "other.html";
    auto [rc3, out3] = shell(cmd + " --out " + other.string());
    EXPECT_EQ(rc3, 0) << out3;
    EXPECT_EQ(read_file(other), html);
    fs::remove_all(r.root.parent_path());
}

// A judge that learned from votes (SPEC §8): the scope box says whose votes,
// "Judge trained on …" names the counts and every vote file's sha256, and
// the vote test and PPO's labelled prompts are reported.
TEST(Report, JudgeFromVotesNamesItsVotes) {
    const SyntheticRun r = make_run("votes");
    const json feedback = {{"feedback_kind", "human"},
                           {"candidate_file",
                            {{"path", "c.json"},
                             {"sha256", std::string(64, 'c')},
                             {"checkpoint_sha256", std::string(64, 'd')},
                             {"pairs", 300}}},
                           {"files",
                            {{{"path", "ada.json"},
                              {"sha256", std::string(64, 'e')},
                              {"kind", "human"},
                              {"participant", "Ada <A.>"},
                              {"votes", 60},
                              {"binary", 50},
                              {"ties", 6},
                              {"rejects", 4}}}},
                           {"counts", {{"train", 31}, {"validation", 7}, {"test", 12}}},
                           {"ties", 6},
                           {"rejects", 4}};
    json judge = read_json_file(r.root / "reward" / "continuous.json");
    judge["identity"] = {{"data", {{"feedback", feedback}, {"labels_sha256", std::string(64, 'f')}}}};
    write_json_atomic(r.root / "reward" / "continuous.json", judge, Overwrite::replace);
    put(r.root / "reward" / "vote-test.json",
        {{"examples", 12}, {"correct", 9}, {"ties", 1}, {"pair_loss", 0.5}, {"accuracy", 0.75}});
    json ppo = read_json_file(r.root / "ppo" / "continuous.json");
    ppo["identity"] = {
        {"data",
         {{"feedback", feedback}, {"labels_sha256", std::string(64, 'f')}, {"rollout_prompts", {{"count", 29}}}}}};
    write_json_atomic(r.root / "ppo" / "continuous.json", ppo, Overwrite::replace);

    const std::string html = render_report(r.root);
    Parsed p;
    ASSERT_NO_THROW(p = parse_html(html));
    for (const char* id : {"judge-source", "vote-files", "vote-test", "ppo-prompts"})
        EXPECT_TRUE(p.ids.count(id)) << id;
    EXPECT_EQ(html.find("no human study"), std::string::npos) << "the judge learned from people";
    EXPECT_NE(html.find("The judge learned from votes people gave"), std::string::npos);
    EXPECT_NE(html.find("The learned score predicts the voters&#39; preferences; it is not human utility."),
              std::string::npos);
    EXPECT_NE(
        html.find("Judge trained on human votes: 31 train, 7 validation and 12 held-out test binary labels; 6 ties "
                  "and 4 rejects counted, not trained on."),
        std::string::npos);
    EXPECT_NE(html.find(std::string(64, 'e')), std::string::npos) << "the vote file's sha256";
    EXPECT_NE(html.find("<td>Ada &lt;A.&gt;</td>"), std::string::npos);
    EXPECT_NE(html.find("9 of 12 preferred answers scored higher, 1 score ties, pair loss 0.5, accuracy 0.75"),
              std::string::npos);
    EXPECT_NE(html.find("PPO rolled out on the 29 prompts of the train-split vote labels"), std::string::npos);
    // AI votes: the scope says so
    judge["identity"]["data"]["feedback"]["feedback_kind"] = "ai";
    write_json_atomic(r.root / "reward" / "continuous.json", judge, Overwrite::replace);
    const std::string ai = render_report(r.root);
    EXPECT_NE(ai.find("The judge learned from an AI labeller&#39;s votes (below), not from people: no human study"),
              std::string::npos);
    EXPECT_NE(ai.find("Judge trained on AI votes"), std::string::npos);
    // a malformed provenance names the file and field
    judge["identity"]["data"]["feedback"] = "votes";
    write_json_atomic(r.root / "reward" / "continuous.json", judge, Overwrite::replace);
    try {
        render_report(r.root);
        ADD_FAILURE() << "a malformed provenance was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("field 'identity.data.feedback' must be an object"), std::string::npos)
            << e.what();
    }
    fs::remove_all(r.root.parent_path());
}

}  // namespace
}  // namespace ppolab
