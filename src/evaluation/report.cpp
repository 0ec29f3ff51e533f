// report.cpp — see report.h.
#include "evaluation/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "data/guarded_fs.h"
#include "data/rubric.h"
#include "evaluation/evaluate.h"
#include "evaluation/report_internal.h"
#include "training/metric_names.h"
#include "training/run_layout.h"
#include "training/run_records.h"
#include "util/error.h"
#include "util/fileio.h"

namespace ppolab {

// ---- helpers shared by the report's files (report_internal.h) ---------

namespace report_detail {

std::string num(double v, const char* format) {
    if (!std::isfinite(v)) return "—";
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

std::string json_cell(const json& v) {
    if (v.is_null()) return "—";
    if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (v.is_number()) return num(v.get<double>());
    if (v.is_string()) return html_escape(v.get<std::string>());
    return html_escape(v.dump());
}

std::string td(const json& v) {
    return v.is_number() ? "<td class=\"n\">" + json_cell(v) + "</td>" : td_text(json_cell(v));
}
std::string td_num(double v) { return "<td class=\"n\">" + num(v) + "</td>"; }
std::string td_text(std::string_view escaped_html) { return "<td>" + std::string(escaped_html) + "</td>"; }

std::string not_run(std::string_view what) { return "<p class=\"notrun\">not run: " + html_escape(what) + "</p>\n"; }

std::string section(std::string_view id, std::string_view title) {
    return "<h2 id=\"" + std::string(id) + "\">" + html_escape(title) + "</h2>\n";
}

bool exists_file(const fs::path& p) { return fs::is_regular_file(p); }

}  // namespace report_detail

namespace {

using namespace report_detail;

// A training history (SFT or judge): loss per update, validation per epoch
// plotted at the last update of its epoch.
struct Curve {
    PlotSeries train, validation;
};

Curve history_curve(const json& report, std::string_view where, const char* validation_key, bool negate) {
    Curve c;
    c.train.name = "training loss (per update)";
    c.validation.name = negate ? "validation −mean token log-prob" : "validation loss";
    std::map<int64_t, double> last_update_of_epoch;
    for (const json& h : json_field(report, "history", where)) {
        const double u = static_cast<double>(json_int(h, "update", where));
        c.train.x.push_back(u);
        c.train.y.push_back(json_number(h, "loss", where));
        last_update_of_epoch[json_int(h, "epoch", where)] = u;
    }
    if (report.contains("validation_history")) {
        for (const json& v : report["validation_history"]) {
            const int64_t epoch = json_int(v, "epoch", where);
            const auto it = last_update_of_epoch.find(epoch);
            if (it == last_update_of_epoch.end() || !v.contains(validation_key)) continue;
            const double value = json_number(v, validation_key, where);
            c.validation.x.push_back(it->second);
            c.validation.y.push_back(negate ? -value : value);
        }
    }
    return c;
}

std::string table_from_keys(const std::vector<std::pair<std::string, json>>& rows) {
    std::string s = "<table>\n";
    for (const auto& [k, v] : rows) s += "<tr><th>" + html_escape(k) + "</th><td>" + json_cell(v) + "</td></tr>\n";
    return s + "</table>\n";
}

}  // namespace

// ---- gold versus proxy -----------------------------------------------------

namespace {

struct RolloutPoint {
    double logratio = 0, score = 0;
    bool success = false;
};

std::vector<fs::path> iteration_files(const fs::path& dir) {
    std::vector<fs::path> files;
    if (!fs::is_directory(dir)) return files;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("iteration-", 0) == 0 && e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    return files;
}

std::vector<RolloutIterationSummary> score_rollouts(const fs::path& dir, const GoldLabels& gold,
                                                    std::vector<RolloutPoint>* points) {
    std::vector<RolloutIterationSummary> out;
    for (const fs::path& file : iteration_files(dir)) {
        const std::string where = file.string();
        const json doc = read_json_file(file);
        RolloutIterationSummary it;
        it.iteration = static_cast<int>(json_int(doc, "iteration", where));
        double score_sum = 0, ratio_sum = 0, entropy_sum = 0;
        for (const json& r : json_field(doc, "rollouts", where)) {
            if (r.contains("tokens"))
                for (const json& t : json_field(r, "tokens", where)) entropy_sum -= json_number(t, "old_logp", where);
            const std::string prompt_id = json_string(r, "prompt_id", where);
            const int expected = gold.at(prompt_id).expected_action;
            const RubricVerdict v = evaluate_response(
                json_string(r, "text", where), finish_reason_parse(json_string(r, "finish_reason", where)), expected);
            RolloutPoint p{json_number(r, "sampled_logratio_sum", where), json_number(r, "score", where),
                           v.rubric_success};
            ++it.rollouts;
            it.rubric_successes += v.rubric_success;
            score_sum += p.score;
            ratio_sum += p.logratio;
            if (points) points->push_back(p);
        }
        if (it.rollouts == 0) fail(where, ": field 'rollouts' is empty; expected at least one rollout");
        it.rubric_success_rate = static_cast<double>(it.rubric_successes) / it.rollouts;
        it.mean_score = score_sum / it.rollouts;
        it.mean_sampled_logratio = ratio_sum / it.rollouts;
        it.mean_sequence_entropy = entropy_sum / it.rollouts;
        out.push_back(it);
    }
    return out;
}

}  // namespace

std::vector<RolloutIterationSummary> gold_versus_proxy(const fs::path& rollouts_dir, const GoldLabels& gold) {
    return score_rollouts(rollouts_dir, gold, nullptr);
}

// In page order.
const std::vector<std::string> report_plot_ids = {
    "plot-overoptimisation", "plot-pretrain-loss",   "plot-sft-loss",          "plot-judge-loss",
    "plot-ppo-score",        "plot-ppo-rlhf-reward", "plot-ppo-kl-penalty",    "plot-ppo-kl",
    "plot-ppo-approxkl",     "plot-ppo-value-loss",  "plot-ppo-clipfrac",      "plot-ppo-explained-variance",
    "plot-ppo-length",       "plot-ppo-entropy",     "plot-gold-iterations",   "plot-proxy-iterations",
    "plot-gold-vs-kl",       "plot-proxy-vs-kl",     "plot-rollouts-score-kl", "plot-probe-deltas",
};

// ---- the report ---------------------------------------------------------

namespace {

const char* const kScope[] = {
    "Simulated preferences from a finite rubric; no human study.",
    "The learned score is a predicted simulated-preference score, not human utility.",
    "The 80 probe rows are 20 independent contexts (4 identical greedy generations each); rows and unique "
    "contexts are reported apart.",
};

// "Judge trained on …": which preferences the judge learned, with the vote
// files' sha256 and counts when they were votes.
std::string judge_source_line(const RunLayout& run) {
    const fs::path f = run.report("reward", kMode);
    if (!exists_file(f))
        return "<p id=\"judge-source\">Judge trained on: not run yet (RUN/reward/continuous.json).</p>\n";
    const json fb = judge_feedback(run.root);
    if (fb.is_null())
        return "<p id=\"judge-source\">Judge trained on the corpus's simulated preference pairs "
               "(learn/train_pairs.jsonl, generated by the rubric).</p>\n";
    const std::string where = f.string() + ": identity.data.feedback";
    const std::string kind = json_string(fb, "feedback_kind", where);
    const json& counts = json_field(fb, "counts", where);
    std::string s =
        "<p id=\"judge-source\">Judge trained on " + std::string(kind == "human" ? "human" : "AI") +
        " votes: " + std::to_string(json_int(counts, "train", where)) + " train, " +
        std::to_string(json_int(counts, "validation", where)) + " validation and " +
        std::to_string(json_int(counts, "test", where)) + " held-out test binary labels; " +
        std::to_string(json_int(fb, "ties", where)) + " ties and " + std::to_string(json_int(fb, "rejects", where)) +
        " rejects counted, not trained on. Candidate file sha256 <code>" +
        html_escape(json_string(json_field(fb, "candidate_file", where), "sha256", where)) +
        "</code> (SFT checkpoint sha256 <code>" +
        html_escape(json_string(json_field(fb, "candidate_file", where), "checkpoint_sha256", where)) +
        "</code>).</p>\n<table id=\"vote-files\">\n<tr><th>vote file</th><th>sha256</th><th>kind</th><th>who</th>"
        "<th>votes</th><th>binary</th><th>ties</th><th>rejects</th></tr>\n";
    for (const json& v : json_field(fb, "files", where)) {
        if (!v.is_object()) fail(where, ": field 'files' must hold objects, got ", v.type_name());
        s += "<tr><td>" + json_cell(v.value("path", json())) + "</td><td><code>" +
             json_cell(v.value("sha256", json())) + "</code></td><td>" + json_cell(v.value("kind", json())) +
             "</td><td>" + json_cell(v.contains("participant") ? v["participant"] : v.value("labeler", json())) +
             "</td><td>" + json_cell(v.value("votes", json())) + "</td><td>" + json_cell(v.value("binary", json())) +
             "</td><td>" + json_cell(v.value("ties", json())) + "</td><td>" + json_cell(v.value("rejects", json())) +
             "</td></tr>\n";
    }
    s += "</table>\n";
    if (!fb.contains("agreement")) return s;
    s += "<p>Agreement between voters on the pairs both voted (raw: the share of identical choices among "
         "a, b, tie and reject; Cohen's &kappa; corrects it for chance, from each voter's own shares):</p>\n"
         "<table id=\"vote-agreement\">\n<tr><th>voters</th><th>pairs both voted</th><th>raw agreement</th>"
         "<th>Cohen's &kappa;</th></tr>\n";
    for (const json& a : json_field(fb, "agreement", where)) {
        if (!a.is_object()) fail(where, ": field 'agreement' must hold objects, got ", a.type_name());
        const json& who = json_field(a, "between", where);
        if (!who.is_array() || who.size() != 2 || !who[0].is_string() || !who[1].is_string())
            fail(where, ": field 'agreement[].between' must be two names");
        const json& kappa = json_field(a, "cohen_kappa", where);
        s += "<tr><td>" + html_escape(who[0].get<std::string>()) + " and " + html_escape(who[1].get<std::string>()) +
             "</td><td>" + std::to_string(json_int(a, "pairs", where)) + "</td><td>" +
             num(json_number(a, "raw", where), "%.3f") + "</td><td>" +
             (kappa.is_null() ? std::string("undefined (one choice only)")
                              : num(json_number(a, "cohen_kappa", where), "%.3f")) +
             "</td></tr>\n";
    }
    return s + "</table>\n";
}

std::string render_training(const RunLayout& run) {
    std::string s = section("training", "Training curves");
    // pretraining
    {
        PlotSpec p{"plot-pretrain-loss", "Base model pretraining loss", "update", "loss", {}, false};
        const fs::path f = run.pretrain_report();
        if (exists_file(f)) {
            const json d = read_json_file(f);
            const std::string where = f.string();
            PlotSeries ser{"training loss", {}, {}};
            if (d.contains("training") && d["training"].contains("loss_curve")) {
                const json& curve = d["training"]["loss_curve"];
                for (size_t i = 0; i < curve.size(); ++i) {
                    if (!curve[i].is_number())
                        fail(where, ": field 'training.loss_curve[", i, "]' must be a number, got ",
                             curve[i].type_name());
                    ser.x.push_back(static_cast<double>(i + 1));
                    ser.y.push_back(curve[i].get<double>());
                }
            }
            p.series.push_back(ser);
        }
        s += svg_plot(p, "Next-token loss of the small Qwen2-architecture base per update (RUN/base/pretrain.json).");
    }
    // SFT
    {
        PlotSpec p{"plot-sft-loss", "SFT loss", "update", "loss (nats/token)", {}, false};
        const fs::path f = run.report("sft", kMode);
        if (exists_file(f)) {
            Curve c = history_curve(read_json_file(f), f.string(), "mean_token_logprob", true);
            p.series = {c.train, c.validation};
        }
        s += svg_plot(p,
                      "SFT: training loss per update and validation negative mean token log-prob per epoch "
                      "(RUN/sft/continuous.json).");
    }
    // judge
    json judge;
    {
        PlotSpec p{"plot-judge-loss", "Judge (Bradley–Terry) loss", "update", "loss", {}, false};
        const fs::path f = run.report("reward", kMode);
        if (exists_file(f)) {
            judge = read_json_file(f);
            Curve c = history_curve(judge, f.string(), "loss", false);
            p.series = {c.train, c.validation};
        }
        s += svg_plot(p,
                      "Judge: pairwise −log σ(s_chosen − s_rejected) per update and on validation pairs per epoch "
                      "(RUN/reward/continuous.json).");
    }
    s += "<h3>Judge validation and test</h3>\n";
    if (judge.is_object() && judge.contains("validation_history")) {
        s += "<table>\n<tr><th>epoch</th><th>pairs</th><th>correct</th><th>ties</th><th>accuracy</th><th>loss</"
             "th><th>used for selection</th></tr>\n";
        for (const json& v : judge["validation_history"]) {
            s += "<tr>";
            for (const char* k : {"epoch", "pairs", "correct", "ties", "accuracy", "loss", "used_for_selection"})
                s += td(v.value(k, json()));
            s += "</tr>\n";
        }
        s += "</table>\n";
    } else {
        s += not_run("judge training (RUN/reward/continuous.json)");
    }
    const fs::path rt = run.reward_test();
    if (exists_file(rt)) {
        const json d = read_json_file(rt);
        const std::string where = rt.string();
        s += "<p id=\"reward-test\">Judge on the held-out test pairs (never used for selection): " +
             std::to_string(json_int(d, "correct", where)) + " of " + std::to_string(json_int(d, "pairs", where)) +
             " correct, " + std::to_string(json_int(d, "ties", where)) + " ties, accuracy " +
             num(json_number(d, "accuracy", where)) + ".</p>\n";
    } else {
        s += not_run("reward-test (RUN/reward/reward-test.json)");
    }
    if (!judge_feedback(run.root).is_null()) {
        const fs::path vt = run.vote_test();
        if (exists_file(vt)) {
            const json d = read_json_file(vt);
            const std::string where = vt.string();
            s += "<p id=\"vote-test\">Judge on the held-out test votes (never used for selection): " +
                 std::to_string(json_int(d, "correct", where)) + " of " +
                 std::to_string(json_int(d, "examples", where)) + " preferred answers scored higher, " +
                 std::to_string(json_int(d, "ties", where)) + " score ties, pair loss " +
                 num(json_number(d, "pair_loss", where)) + ", accuracy " + num(json_number(d, "accuracy", where)) +
                 ".</p>\n";
        } else {
            s += not_run("the judge on the held-out test votes (ppolab reward-test; RUN/reward/vote-test.json)");
        }
    }
    return s;
}

// The SFT policy's held-out test metrics (RUN/eval/metrics.json), the dashed
// baselines of the per-iteration plots; NaN when the evaluation has not run.
struct SftBaselines {
    double score = NAN, tokens = NAN, success = NAN;
};

SftBaselines sft_baselines(const RunLayout& run) {
    SftBaselines b;
    const fs::path f = metrics_path(run, EvalSet::held_out);
    if (!exists_file(f)) return b;
    const json m = read_json_file(f);
    if (!m.contains("sft") || !m["sft"].contains("test")) return b;
    const json& t = m["sft"]["test"];
    const std::string where = f.string() + ": sft.test";
    auto get = [&](const char* key) { return t.contains(key) && !t[key].is_null() ? json_number(t, key, where) : NAN; };
    b.score = get("mean_learned_reward");
    b.tokens = get("mean_response_tokens_eos_included");
    b.success = get("rubric_success_rate_all_outputs");
    return b;
}

const char* const kPairColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};

// A per-iteration series as faint markers plus its moving average (same colour).
std::vector<PlotSeries> smoothed(PlotSeries raw, size_t colour) {
    raw.colour = kPairColours[colour % 4];
    // short legend names (the legend column is 230 units wide): the metric, then its average
    PlotSeries avg{"↳ moving average (" + std::to_string(kSmoothingWindow) + ")", raw.x,
                   moving_average(raw.y, kSmoothingWindow)};
    avg.colour = raw.colour;
    avg.style = PlotSeries::Style::line;
    raw.style = PlotSeries::Style::faint_markers;
    return {raw, avg};
}

// A dashed horizontal line over the x range of `like` (nothing when v is NaN).
std::vector<PlotSeries> baseline(const PlotSeries& like, double v, const std::string& name) {
    if (!std::isfinite(v) || like.x.empty()) return {};
    PlotSeries b{name, {like.x.front(), like.x.back()}, {v, v}};
    b.dashed = true;
    b.style = PlotSeries::Style::line;
    b.colour = "#555";
    return {b};
}

std::vector<PlotSeries> concat(std::vector<std::vector<PlotSeries>> parts) {
    std::vector<PlotSeries> out;
    for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

const std::string kSmoothNote = " Faint dots: each iteration; line: centred moving average over " +
                                std::to_string(kSmoothingWindow) + " iterations (truncated at the ends).";

std::string render_ppo(const RunLayout& run, const std::vector<RolloutIterationSummary>& rollouts) {
    std::string s = section("ppo", "PPO per iteration");
    const fs::path f = run.report("ppo", kMode);
    std::map<std::string, PlotSeries> m;
    json history = json::array();
    if (exists_file(f)) {
        const json r = read_json_file(f);
        history = json_field(r, "history", f.string());
        if (r.contains("identity") && r["identity"].contains("data") && r["identity"]["data"].contains("feedback")) {
            const json& d = r["identity"]["data"];
            s += "<p id=\"ppo-prompts\">PPO rolled out on the " +
                 json_cell(d.contains("rollout_prompts") && d["rollout_prompts"].is_object()
                               ? d["rollout_prompts"].value("count", json())
                               : json()) +
                 " prompts of the train-split vote labels (labels sha256 <code>" +
                 json_cell(d.value("labels_sha256", json())) +
                 "</code>), against the judge learned from those votes.</p>\n";
        }
    }
    using namespace metric;
    const char* keys[] = {
        kScores,       kRlhfReward,        kNonScoreReward,    kKl, kApproxKl, kValueLoss, kPolicyLoss,
        kClipFraction, kExplainedVariance, kMeanResponseLength};
    for (const char* k : keys) m[k].name = k;
    for (const json& h : history) {
        const double it = static_cast<double>(json_int(h, "iteration", f.string()));
        for (const char* k : keys) {
            m[k].x.push_back(it);
            m[k].y.push_back(json_number(h, k, f.string()));
        }
    }
    PlotSeries entropy{"objective/entropy", {}, {}};
    for (const RolloutIterationSummary& it : rollouts) {
        entropy.x.push_back(it.iteration);
        entropy.y.push_back(it.mean_sequence_entropy);
    }
    const SftBaselines sft = sft_baselines(run);
    const std::string sft_name = "SFT, held-out test (dashed)";
    s += "<p class=\"note\" id=\"scores-note\">objective/scores is the mean <em>terminal reward</em>: a response cut "
         "at the length limit (no EOS) counts as ppo.missing_eos_penalty instead of its judge score "
         "(ppo.missing_eos = replace; with add, score + penalty). The \"mean judge score\" of the gold-versus-proxy "
         "section is the judge's raw score of the same rollouts, so the two differ when rollouts miss EOS.</p>\n";
    s += svg_plot({"plot-ppo-score", "PPO judge score (objective/scores)", "iteration", "mean per rollout",
                   concat({smoothed(m[kScores], 0), baseline(m[kScores], sft.score, sft_name)}), false},
                  "objective/scores (TRL) per iteration against the SFT policy's mean judge score on the held-out "
                  "test prompts (dashed; rollouts use learn-side prompts)." +
                      kSmoothNote);
    s += svg_plot({"plot-ppo-rlhf-reward", "RLHF reward (score + KL penalty)", "iteration", "mean per rollout",
                   smoothed(m[kRlhfReward], 1), false},
                  "objective/rlhf_reward = objective/scores + objective/non_score_reward, drawn apart from the score "
                  "(the penalty is small: on one axis the two lines coincide)." +
                      kSmoothNote);
    s += svg_plot({"plot-ppo-kl-penalty", "KL penalty (objective/non_score_reward)", "iteration", "mean per rollout",
                   smoothed(m[kNonScoreReward], 2), false},
                  "−β · per-sequence sampled log-ratio sum, mean over rollouts." + kSmoothNote);
    s += svg_plot({"plot-ppo-kl", "KL to the reference (objective/kl)", "iteration", "nats",
                   concat({smoothed(m[kKl], 0), baseline(m[kKl], 0.0, "SFT (0 by definition, dashed)")}), false},
                  "objective/kl: per-sequence sum of sampled log-ratios to the SFT reference, mean over "
                  "sequences (a sampled estimate; the exact KL is in the findings)." +
                      kSmoothNote);
    s += svg_plot({"plot-ppo-approxkl", "Approx KL per update (policy/approxkl)", "iteration", "nats",
                   smoothed(m[kApproxKl], 3), false},
                  "policy/approxkl: between the rollout policy and the updated one, autoscaled." + kSmoothNote);
    s += svg_plot({"plot-ppo-value-loss", "Critic and actor losses", "iteration", "loss",
                   concat({smoothed(m[kValueLoss], 0), smoothed(m[kPolicyLoss], 1)}), false},
                  "Value (critic) loss and clipped policy loss per iteration." + kSmoothNote);
    s += svg_plot({"plot-ppo-clipfrac", "Clip fraction", "iteration", "fraction", smoothed(m[kClipFraction], 2), false},
                  "Fraction of response tokens whose probability ratio was clipped (autoscaled)." + kSmoothNote);
    s += svg_plot({"plot-ppo-explained-variance", "Explained variance of the returns", "iteration",
                   "explained variance", smoothed(m[kExplainedVariance], 3), false},
                  "val/explained_variance: 1 − Var(returns − values) / Var(returns)." + kSmoothNote);
    s += svg_plot(
        {"plot-ppo-length", "Response length", "iteration", "tokens per rollout",
         concat({smoothed(m[kMeanResponseLength], 0), baseline(m[kMeanResponseLength], sft.tokens, sft_name)}), false},
        "mean_response_length of the rollouts against the SFT policy's mean held-out response length "
        "(EOS included, dashed)." +
            kSmoothNote);
    s += svg_plot({"plot-ppo-entropy", "Sequence entropy (objective/entropy)", "iteration", "nats per sequence",
                   smoothed(entropy, 1), false},
                  "TRL's objective/entropy: per-sequence sum of −log p of the sampled tokens under the "
                  "rollout policy, "
                  "mean over the iteration's saved rollouts." +
                      kSmoothNote);
    if (history.empty()) return s + not_run("PPO (RUN/ppo/continuous.json)");
    s += "<details><summary>Per-iteration table (" + std::to_string(history.size()) +
         " rows)</summary>\n<table>\n<tr><th>iteration</th>";
    for (const char* k : keys) s += std::string("<th>") + k + "</th>";
    s += std::string("<th>") + kNumEosTokens + "</th></tr>\n";
    for (const json& h : history) {
        s += "<tr>" + td(h.value("iteration", json()));
        for (const char* k : keys) s += td(h.value(k, json()));
        s += td(h.value(kNumEosTokens, json())) + "</tr>\n";
    }
    return s + "</table>\n</details>\n";
}

// A verdict cell, coloured: success green, certified failure amber, uncertified red.
std::string verdict_cell(const json& v) {
    if (!v.is_object()) return td_text("—");
    const bool ok = v.value("rubric_success", false), recognised = v.value("recognized", true);
    const std::string cls = ok ? "v-ok" : recognised ? "v-fail" : "v-uncertified";
    return "<td class=\"" + cls + "\">" + std::string(ok ? "success" : "failure") + " (" +
           html_escape(v.value("reason", std::string())) + ")</td>";
}

std::string action_label(const json& a) {
    if (!a.is_number_integer()) return json_cell(a);
    const int64_t i = a.get<int64_t>();
    return i >= 0 && i < kActionCount ? std::string(action_name(static_cast<int>(i))) : std::to_string(i);
}

std::string render_token_tables(const fs::path& dir, const std::map<std::string, std::string>& prompts) {
    std::string s = "<h3 id=\"rollout-tokens\">Per-token tables of a few rollouts (values and advantages)</h3>\n";
    const std::vector<fs::path> files = iteration_files(dir);
    if (files.empty()) return s + not_run("no saved rollouts (RUN/ppo/rollouts/continuous)");
    std::vector<fs::path> chosen{files.front()};
    if (files.size() > 1) chosen.push_back(files.back());
    for (const fs::path& file : chosen) {
        const std::string where = file.string();
        const json doc = read_json_file(file);
        const json& rollouts = json_field(doc, "rollouts", where);
        for (size_t i = 0; i < std::min<size_t>(2, rollouts.size()); ++i) {
            const json& r = rollouts[i];
            const std::string prompt_id = json_string(r, "prompt_id", where);
            const auto p = prompts.find(prompt_id);
            const std::string prompt_text =
                p == prompts.end() ? std::string("— (not in the corpus's rollout prompts)") : html_escape(p->second);
            s += "<details open><summary>" + html_escape(json_string(r, "rollout_id", where)) + " — prompt " +
                 html_escape(prompt_id) + ", finish " + html_escape(json_string(r, "finish_reason", where)) +
                 ", score " + num(json_number(r, "score", where)) + ", sampled log-ratio sum " +
                 num(json_number(r, "sampled_logratio_sum", where)) +
                 "</summary>\n<p class=\"prompt\">Prompt: " + prompt_text + "</p>\n<p class=\"text\">" +
                 html_escape(json_string(r, "text", where)) + "</p>\n";
            s += "<table class=\"tokens\">\n<tr><th>#</th><th>token</th><th>text</th><th>old_logp</th><th>ref_logp</th>"
                 "<th>reward</th><th>value</th><th>advantage</th><th>return</th></tr>\n";
            const json& tokens = json_field(r, "tokens", where);
            for (size_t t = 0; t < tokens.size(); ++t) {
                const json& k = tokens[t];
                s += "<tr>" + td(static_cast<int64_t>(t)) + td(json_int(k, "token", where)) + "<td><code>" +
                     html_escape(json_string(k, "text", where)) + "</code></td>";
                for (const char* f : {"old_logp", "ref_logp", "reward", "value", "advantage", "return"})
                    s += td_num(json_number(k, f, where));
                s += "</tr>\n";
            }
            s += "</table>\n</details>\n";
        }
    }
    return s;
}

std::string render_gold_proxy(const RunLayout& run, const std::vector<RolloutIterationSummary>& iters,
                              const std::vector<RolloutPoint>& points, const std::string& missing,
                              const std::map<std::string, std::string>& prompts) {
    std::string s = section("gold-vs-proxy", "Gold versus proxy per iteration: rubric success and judge score");
    s += "<p>Every saved rollout is scored by the rubric here, after training (never during): its gold success "
         "(recognised, relevant, no unsupported certainty, ended with EOS) against the judge's learned score and the "
         "sampled log-ratio to the SFT reference, iteration by iteration.</p>\n";
    PlotSeries success{"rubric success (gold)", {}, {}}, score{"judge score (proxy)", {}, {}};
    PlotSeries success_kl{"iterations", {}, {}}, score_kl{"iterations", {}, {}};
    PlotSeries ok{"rollout: rubric success", {}, {}}, bad{"rollout: rubric failure", {}, {}};
    for (const auto& it : iters) {
        success.x.push_back(it.iteration);
        success.y.push_back(it.rubric_success_rate);
        score.x.push_back(it.iteration);
        score.y.push_back(it.mean_score);
        success_kl.x.push_back(it.mean_sampled_logratio);
        success_kl.y.push_back(it.rubric_success_rate);
        score_kl.x.push_back(it.mean_sampled_logratio);
        score_kl.y.push_back(it.mean_score);
    }
    for (const RolloutPoint& p : points) {
        PlotSeries& ser = p.success ? ok : bad;
        ser.x.push_back(p.logratio);
        ser.y.push_back(p.score);
    }
    const SftBaselines sft = sft_baselines(run);
    const std::string sft_name = "SFT, held-out test (dashed)";
    s += svg_plot({"plot-gold-iterations", "Gold: rubric success per iteration", "iteration", "rubric success rate",
                   concat({smoothed(success, 2), baseline(success, sft.success, sft_name)}), false, 0.0, 1.0},
                  "Rubric success rate of each iteration's rollouts (gold, scored after training), against the SFT "
                  "policy's held-out test success (dashed)." +
                      kSmoothNote);
    s += svg_plot({"plot-proxy-iterations", "Proxy: judge score per iteration", "iteration", "mean judge score",
                   concat({smoothed(score, 0), baseline(score, sft.score, sft_name)}), false},
                  "Mean raw judge score of the same rollouts (proxy: a predicted simulated-preference score; no "
                  "missing-EOS penalty, unlike objective/scores)." +
                      kSmoothNote);
    s += svg_plot({"plot-gold-vs-kl",
                   "Gold: rubric success vs sampled KL",
                   "mean sampled log-ratio sum (KL)",
                   "rubric success rate",
                   {success_kl},
                   true,
                   0.0,
                   1.0},
                  "One point per PPO iteration: rubric success of its rollouts against their mean sampled "
                  "log-ratio to the reference.");
    s += svg_plot({"plot-proxy-vs-kl",
                   "Proxy: judge score vs sampled KL",
                   "mean sampled log-ratio sum (KL)",
                   "mean judge score",
                   {score_kl},
                   true},
                  "One point per PPO iteration: mean learned score against the same KL; a proxy that rises while "
                  "gold falls is over-optimisation.");
    s += svg_plot({"plot-rollouts-score-kl",
                   "Every rollout: judge score vs log-ratio",
                   "sampled log-ratio sum",
                   "judge score",
                   {ok, bad},
                   true},
                  "Each saved rollout, coloured by its rubric verdict.");
    if (!missing.empty()) return s + not_run(missing);
    s += "<details><summary>Per-iteration table (" + std::to_string(iters.size()) +
         " rows)</summary>\n<table>\n<tr><th>iteration</th><th>rollouts</th><th>rubric successes</th><th>rubric "
         "success rate</th><th>mean judge score</th><th>mean sampled log-ratio sum</th><th>mean sequence "
         "entropy</th></tr>\n";
    for (const auto& it : iters)
        s += "<tr>" + td(it.iteration) + td(it.rollouts) + td(it.rubric_successes) + td_num(it.rubric_success_rate) +
             td_num(it.mean_score) + td_num(it.mean_sampled_logratio) + td_num(it.mean_sequence_entropy) + "</tr>\n";
    s += "</table>\n</details>\n";
    return s + render_token_tables(run.ppo_rollouts(kMode), prompts);
}

std::string render_evaluation(const RunLayout& run) {
    std::string s = section("evaluation", "Held-out evaluation (rubric, per population)");
    const fs::path f = metrics_path(run, EvalSet::held_out);
    if (!exists_file(f)) return s + not_run("evaluate (RUN/eval/metrics.json)");
    const json metrics = read_json_file(f);
    if (!metrics.is_object())
        fail(f.string(), ": expected an object {policy: {population: metrics}}, got ", metrics.type_name());
    const char* populations[] = {"test", "probe_rows", "probe_unique_contexts", "all_rows", "all_unique_contexts"};
    const char* columns[] = {"rows",
                             "distinct_prompts",
                             "rubric_success_rate_all_outputs",
                             "recognized_rate",
                             "relevant_rate_recognized_denominator",
                             "unsupported_certainty_rate_recognized_denominator",
                             "refusal_rate",
                             "without_eos_rate",
                             "mean_response_tokens_eos_included",
                             "mean_learned_reward",
                             "mean_sampled_actor_reference_logratio"};
    s += "<p>Rows and unique contexts are kept apart: 260 generations per policy are 200 distinct prompts. "
         "\"mean learned reward\" is the judge's raw score (no missing-EOS penalty).</p>\n";
    for (const char* pop : populations) {
        s += "<h3 id=\"eval-" + std::string(pop) + "\">" + pop + "</h3>\n<table>\n<tr><th>policy</th>";
        for (const char* c : columns) s += std::string("<th>") + c + "</th>";
        s += "</tr>\n";
        for (const auto& [policy, per_pop] : metrics.items()) {
            if (!per_pop.is_object() || !per_pop.contains(pop)) continue;
            s += "<tr><td>" + html_escape(policy) + "</td>";
            for (const char* c : columns) s += td(per_pop[pop].value(c, json()));
            s += "</tr>\n";
        }
        s += "</table>\n";
    }
    // side by side
    s += "<h3 id=\"side-by-side\">SFT and PPO answers side by side</h3>\n";
    const fs::path sft = scored_path(run, EvalSet::held_out, "sft"), ppo = scored_path(run, EvalSet::held_out, "ppo");
    if (!exists_file(sft) || !exists_file(ppo))
        return s + not_run("scored generations (RUN/eval/{sft,ppo}-scored.json)");
    const json a = read_json_file(sft), b = read_json_file(ppo);
    std::map<std::string, const json*> ppo_rows;
    for (const json& r : json_field(b, "rows_detail", ppo.string())) ppo_rows[json_string(r, "id", ppo.string())] = &r;
    auto verdict = [](const json& r) { return verdict_cell(r.value("rubric", json())); };
    auto score = [](const json& r) { return td(r.value("learned_score", json())); };
    s += "<table class=\"side\">\n<tr><th>id</th><th>prompt</th><th>expected action</th><th>SFT answer</th><th>SFT "
         "verdict</th><th>SFT score</th><th>PPO answer</th><th>PPO verdict</th><th>PPO score</th></tr>\n";
    std::set<std::string> seen_prompts;
    int shown_test = 0, shown_probe = 0;
    for (const json& r : json_field(a, "rows_detail", sft.string())) {
        const std::string id = json_string(r, "id", sft.string());
        const std::string prompt = json_string(r, "prompt", sft.string());
        const bool probe = r.value("population", std::string()) == "probe";
        // one row per family (its rows are variants of one request; a probe
        // context's 4 rows are one prompt), 8 test and 8 probe families
        const std::string key = r.contains("family") ? json_string(r, "family", sft.string()) : prompt;
        if ((probe ? shown_probe : shown_test) >= 8 || !seen_prompts.insert(key).second) continue;
        const auto it = ppo_rows.find(id);
        if (it == ppo_rows.end()) fail(ppo.string(), ": row '", id, "' of ", sft.string(), " is missing");
        const json& q = *it->second;
        ++(probe ? shown_probe : shown_test);
        s += "<tr><td>" + html_escape(id) + "</td><td>" + html_escape(prompt) + "</td><td>" +
             action_label(r.value("expected_action", json())) + "</td><td>" +
             html_escape(r.value("text", std::string())) + "</td>" + verdict(r) + score(r) + "<td>" +
             html_escape(q.value("text", std::string())) + "</td>" + verdict(q) + score(q) + "</tr>\n";
    }
    return s + "</table>\n";
}

std::string render_exercise(const RunLayout& run) {
    std::string s = section("exercise", "Probe factorial: politeness deltas of the frozen judge");
    const fs::path f = run.exercise();
    const std::string where = f.string();
    json e;
    PlotSeries correct{"Δ politeness, correct advice", {}, {}}, wrong{"Δ politeness, wrong advice", {}, {}};
    if (exists_file(f)) {
        e = read_json_file(f);
        double k = 0;
        for (const json& c : json_field(json_field(e, "summary", where), "per_context", where)) {
            ++k;
            correct.x.push_back(k);
            correct.y.push_back(json_number(c, "correct_politeness_delta", where));
            wrong.x.push_back(k);
            wrong.y.push_back(json_number(c, "incorrect_politeness_delta", where));
        }
    }
    s += svg_plot({"plot-probe-deltas",
                   "Probe factorial: politeness deltas per context",
                   "probe context",
                   "judge score delta (polite − plain)",
                   {correct, wrong},
                   true},
                  "Per probe context, what the frozen judge adds for politeness alone, for correct and for wrong "
                  "advice (20 contexts, 80 fixed candidates; nothing refitted).");
    if (e.is_null()) return s + not_run("exercise (RUN/exercise.json)");
    const json& summary = json_field(e, "summary", where);
    s += table_from_keys(
        {{"contexts", summary.value("contexts", json())},
         {"candidates", summary.value("candidates", json())},
         {"wrong-and-polite outranks correct-and-plain (contexts)",
          summary.value("wrong_polite_outranks_correct_plain_contexts", json())},
         {"correct politeness delta > 0 (contexts)",
          summary.value("correct_politeness_delta_positive_contexts", json())},
         {"wrong politeness delta > 0 (contexts)",
          summary.value("incorrect_politeness_delta_positive_contexts", json())},
         {"mean correct politeness delta", summary.value("mean_correct_politeness_delta", json())},
         {"mean wrong politeness delta", summary.value("mean_incorrect_politeness_delta", json())},
         {"judge unchanged (sha256 before = after)",
          e.contains("judge_learned_sha256") ? json(e["judge_learned_sha256"].value("before", std::string()) ==
                                                    e["judge_learned_sha256"].value("after", std::string("?")))
                                             : json()},
         {"artefacts unchanged", e.value("artefacts_unchanged", json())}});
    s += "<table>\n<tr><th>context</th><th>correct plain</th><th>correct polite</th><th>wrong plain</th><th>wrong "
         "polite</th><th>Δ politeness (correct)</th><th>Δ politeness (wrong)</th><th>wrong-polite &gt; "
         "correct-plain</th></tr>\n";
    for (const json& c : json_field(summary, "per_context", where)) {
        const json& sc = json_field(c, "scores", where);
        s += "<tr><td>" + html_escape(json_string(c, "context", where)) + "</td>";
        for (const char* k : {"correct_plain", "correct_polite", "wrong_plain", "wrong_polite"})
            s += td_num(json_number(sc, k, where));
        s += td_num(json_number(c, "correct_politeness_delta", where)) + "<td class=\"n\">" +
             num(json_number(c, "incorrect_politeness_delta", where)) + "</td><td>" +
             json_cell(c.value("wrong_polite_outranks_correct_plain", json())) + "</td></tr>\n";
    }
    return s +
           "</table>\n<p>A score gain is neither human satisfaction nor, alone, proof that PPO exploits the bias: "
           "read the actor's answers above too.</p>\n";
}

std::string render_run_facts(const RunLayout& run) {
    std::string s = section("run", "Reproducibility: resume checks and time per step");
    s += "<table>\n<tr><th>stage</th><th>resume check</th><th>first difference</th></tr>\n";
    for (const char* stage : {"sft", "reward", "ppo"}) {
        const fs::path f = run.resume_check(stage);
        if (!exists_file(f)) {
            s += std::string("<tr><td>") + stage + "</td><td>not run</td><td></td></tr>\n";
            continue;
        }
        const json d = read_json_file(f);
        s += std::string("<tr><td>") + stage + "</td><td>" + html_escape(json_string(d, "status", f.string())) +
             "</td><td>" + json_cell(d.value("first_difference", json())) + "</td></tr>\n";
    }
    s += "</table>\n";
    const fs::path st = run.run_state();
    if (!exists_file(st)) return s + not_run("ppolab run (RUN/run-state.json)");
    const json d = read_json_file(st);
    validate_run_state(d, st);
    s += "<table>\n<tr><th>step</th><th>seconds</th><th>command</th></tr>\n";
    for (const auto& [step, v] : d["steps"].items())
        s += "<tr><td>" + html_escape(step) + "</td>" + td(v["seconds"]) + "<td><code>" +
             html_escape(v["command"].get<std::string>()) + "</code></td></tr>\n";
    return s + "</table>\n";
}

}  // namespace

// The page's style: tables scroll inside their box, numbers right-aligned,
// plots scale with the page, verdicts and findings coloured.
const char* const kStyle =
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\n"
    "table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px;display:block;max-width:100%;"
    "overflow-x:auto}\n"
    "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}\n"
    "td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
    "figure{margin:1em 0}figcaption{font-size:13px;color:#555;max-width:900px}\n"
    "svg.plot{width:100%;height:auto;max-width:900px;display:block}\n"
    ".scope{border-left:4px solid #d62728;padding:0.5em 1em;background:#fff5f5}\n"
    ".notrun{color:#a00;font-style:italic}.text{font-family:monospace;white-space:pre-wrap}\n"
    ".note{font-size:13px;color:#444}.prompt{font-size:13px;color:#333}\n"
    "table.tokens td{font-family:monospace}\n"
    "td.v-ok{background:#e8f5e9}td.v-fail{background:#fff3e0}td.v-uncertified{background:#ffebee}\n"
    ".findings{border:2px solid #888;border-radius:6px;padding:0.5em 1em;margin:1em 0;background:#f7f7f7}\n"
    ".findings .verdict{font-size:1.15em;font-weight:bold;padding:0.3em 0.5em;border-radius:4px}\n"
    ".verdict-bad .verdict{background:#ffebee;color:#b71c1c}.verdict-bad{border-color:#d62728}\n"
    ".verdict-good .verdict{background:#e8f5e9;color:#1b5e20}.verdict-good{border-color:#2ca02c}\n"
    ".verdict-neutral .verdict{background:#eeeeee;color:#333}.verdict-neutral{border-color:#888}\n"
    ".verdict-mixed .verdict{background:#fff8e1;color:#8a5a00}.verdict-mixed{border-color:#ff9800}\n"
    "summary{cursor:pointer}\n";

std::string render_report(const fs::path& root) { return render_report(RunLayout{root}); }

std::string render_report(const RunLayout& run) {
    const fs::path& root = run.root;
    if (!fs::is_directory(root)) fail("report: run folder '", root.string(), "' does not exist");
    // A set of replicates: this chain's stages, the set's findings and results.
    std::string title =
        "ppolab report — " + run.study().filename().string() +
        (run.is_replicate() ? " (stages of " + root.lexically_relative(run.study()).string() + ")" : "");
    std::string study;
    // The study's identity: RUN/results.json (written by `ppolab run` after
    // this step), else the configuration identity of the SFT report.
    json identity;
    const fs::path results = run.study() / "results.json", sft = run.report("sft", kMode);
    if (exists_file(results)) {
        const json r = read_json_file(results);
        if (r.contains("study")) identity = r["study"];
    } else if (exists_file(sft)) {
        const json r = read_json_file(sft);
        if (r.contains("identity") && r["identity"].contains("config")) identity = r["identity"]["config"];
    }
    if (identity.is_object())
        for (const auto& [k, v] : identity.items())
            study += "<tr><th>" + html_escape(k) + "</th><td>" + json_cell(v) + "</td></tr>\n";
    std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
                    html_escape(title) + "</title>\n<style>\n" + kStyle + "</style>\n</head>\n<body>\n<h1>" +
                    html_escape(title) + "</h1>\n";
    s += render_findings_box(run.study());
    s += "<div class=\"scope\" id=\"scope\">\n";
    const json feedback = judge_feedback(root);
    for (const char* line : kScope) {
        std::string text = line;
        // The judge's preferences came from votes: say whose (SPEC §8).
        const std::string kind = feedback.is_object() ? feedback.value("feedback_kind", "") : "";
        if (line == kScope[1] && kind == "human")
            text = "The learned score predicts the voters' preferences; it is not human utility.";
        if (line == kScope[0] && !feedback.is_null())
            text = kind == "human"
                       ? "The judge learned from votes people gave (below); the demonstrations, the evaluation and the "
                         "gold criteria remain the simulated rubric's."
                       : "The judge learned from an AI labeller's votes (below), not from people: no human study; the "
                         "demonstrations and the evaluation remain the simulated rubric's.";
        s += "<p>" + html_escape(text) + "</p>\n";
    }
    s += judge_source_line(run);
    s += "</div>\n";
    if (!study.empty())
        s += "<details><summary>Study identity</summary>\n<table id=\"study\">\n" + study + "</table>\n</details>\n";
    s += "<nav><a href=\"#findings\">findings</a> · <a href=\"#overoptimisation\">over-optimisation</a> · <a "
         "href=\"#training\">training</a> · <a href=\"#ppo\">PPO</a> · "
         "<a href=\"#gold-vs-proxy\">gold vs proxy</a> · "
         "<a href=\"#evaluation\">evaluation</a> · <a href=\"#diagnostics\">shortcut diagnostics</a> · <a "
         "href=\"#exercise\">probe factorial</a> · <a href=\"#run\">run</a></nav>\n";
    // The saved rollouts, scored by the rubric once for the PPO and gold-versus-proxy sections.
    const fs::path dir = run.ppo_rollouts(kMode), corpus = run.corpus();
    std::vector<RolloutIterationSummary> iters;
    std::vector<RolloutPoint> points;
    std::map<std::string, std::string> prompts;  // rollout prompt id -> text
    std::string missing;
    if (iteration_files(dir).empty()) missing = "no saved rollouts (RUN/ppo/rollouts/continuous)";
    else if (!exists_file(corpus / "manifest.json")) missing = "no corpus with gold labels (RUN/corpus)";
    if (missing.empty()) {
        const GuardedReader reader("report", {run.root, run.study()});
        iters = score_rollouts(dir, load_gold(reader, corpus), &points);
        for (const PromptRow& p : load_rollout_prompts(reader, corpus)) prompts[p.id] = p.prompt;
    }
    s += render_overoptimisation(run.study());
    s += render_training(run);
    s += render_ppo(run, iters);
    s += render_gold_proxy(run, iters, points, missing, prompts);
    s += render_evaluation(run);
    s += render_diagnostics(run);
    s += render_exercise(run);
    s += render_run_facts(run);
    return s + "</body>\n</html>\n";
}

void write_report(const RunLayout& run, const fs::path& out) {
    if (fs::exists(out)) fail("report: '", out.string(), "' exists; refusing to overwrite it");
    write_file_atomic(out,
                      reading_json("report: a record under " + run.root.string(), [&] { return render_report(run); }));
}

// report.h
json judge_feedback(const fs::path& root) {
    const fs::path f = RunLayout{root}.report("reward", kMode);
    if (!exists_file(f)) return json();
    const json r = read_json_file(f);
    if (r.contains("identity") && r["identity"].contains("data") && r["identity"]["data"].contains("feedback")) {
        const json& fb = r["identity"]["data"]["feedback"];
        if (!fb.is_object())
            fail(f.string(), ": field 'identity.data.feedback' must be an object, got ", fb.type_name());
        return fb;
    }
    return json();
}

}  // namespace ppolab
