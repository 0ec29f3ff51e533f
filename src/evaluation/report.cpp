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
#include "training/metric_names.h"
#include "training/run_layout.h"
#include "util/error.h"
#include "util/fileio.h"

namespace ppolab {

namespace {

// Deterministic short number text ("%.4g"; "—" for non-finite).
std::string num(double v, const char* format = "%.4g") {
    if (!std::isfinite(v)) return "—";
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

// The mode whose stage reports and rollouts the report draws: the
// uninterrupted run (the interrupted and resumed ones match it bit for bit).
constexpr const char* kMode = "continuous";

std::string json_cell(const json& v) {
    if (v.is_null()) return "—";
    if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (v.is_number()) return num(v.get<double>());
    if (v.is_string()) return html_escape(v.get<std::string>());
    return html_escape(v.dump());
}

const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string not_run(std::string_view what) { return "<p class=\"notrun\">not run: " + html_escape(what) + "</p>\n"; }

std::string section(std::string_view id, std::string_view title) {
    return "<h2 id=\"" + std::string(id) + "\">" + html_escape(title) + "</h2>\n";
}

bool exists_file(const fs::path& p) { return fs::is_regular_file(p); }

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

std::string html_escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default:
                // control characters (rollouts of an untrained policy hold them) are
                // not valid in HTML text: shown as U+FFFD
                if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') out += "\xEF\xBF\xBD";
                else out += c;
        }
    }
    return out;
}

std::vector<double> plot_ticks(double lo, double hi, int target_count, bool integers) {
    PPOLAB_ASSERT(target_count >= 2);
    if (!(hi > lo)) return {lo};
    // the smallest 1-2-5 step giving at most target_count intervals
    const double raw = (hi - lo) / target_count;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
        step = m * mag;
        if (step >= raw) break;
    }
    if (integers) step = std::max(step, 1.0);
    std::vector<double> ticks;
    const double first = std::ceil(lo / step - 1e-9) * step;
    for (double t = first; t <= hi + step * 1e-9; t += step) ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
    return ticks;
}

std::string svg_plot(const PlotSpec& spec, std::string_view caption) {
    const double W = 720, H = 320, left = 70, right = 230, top = 30, bottom = 50;
    const double pw = W - left - right, ph = H - top - bottom;
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    size_t points = 0;
    bool integer_x = true;  // every x a whole number: no fractional ticks
    for (const PlotSeries& s : spec.series) {
        PPOLAB_ASSERT(s.x.size() == s.y.size());
        for (size_t i = 0; i < s.x.size(); ++i) {
            if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
            integer_x = integer_x && s.x[i] == std::round(s.x[i]);
            xmin = std::min(xmin, s.x[i]);
            xmax = std::max(xmax, s.x[i]);
            ymin = std::min(ymin, s.y[i]);
            ymax = std::max(ymax, s.y[i]);
            ++points;
        }
    }
    std::string s = "<figure>\n<svg id=\"" + spec.id +
                    "\" class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" +
                    num(H) + "\" viewBox=\"0 0 " + num(W) + " " + num(H) + "\" role=\"img\">\n";
    s += "<title>" + html_escape(spec.title) + "</title>\n";
    s += "<text x=\"" + num(left + pw / 2) + "\" y=\"18\" text-anchor=\"middle\" font-weight=\"bold\">" +
         html_escape(spec.title) + "</text>\n";
    if (points == 0) {
        s +=
            "<text x=\"" + num(W / 2) + "\" y=\"" + num(H / 2) + "\" text-anchor=\"middle\">no data (not run)</text>\n";
        return s + "</svg>\n<figcaption>" + html_escape(caption) + "</figcaption>\n</figure>\n";
    }
    if (xmax == xmin) {
        xmin -= 1;
        xmax += 1;
    }
    if (std::isfinite(spec.y_min) && std::isfinite(spec.y_max) && spec.y_max > spec.y_min) {
        const double pad = (spec.y_max - spec.y_min) * 0.05;
        ymin = std::min(ymin, spec.y_min) - pad;
        ymax = std::max(ymax, spec.y_max) + pad;
    } else if (ymax == ymin) {
        const double pad = std::max(std::fabs(ymin) * 0.1, 1e-3);
        ymin -= pad;
        ymax += pad;
    } else {
        const double pad = (ymax - ymin) * 0.05;
        ymin -= pad;
        ymax += pad;
    }
    auto px = [&](double x) { return left + (x - xmin) / (xmax - xmin) * pw; };
    auto py = [&](double y) { return top + ph - (y - ymin) / (ymax - ymin) * ph; };
    // axes, ticks, grid
    s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
         "\" fill=\"none\" stroke=\"#444\"/>\n";
    for (double t : plot_ticks(xmin, xmax, 5, integer_x)) {
        const std::string X = num(px(t), "%.2f");
        s += "<line class=\"tick\" x1=\"" + X + "\" x2=\"" + X + "\" y1=\"" + num(top + ph) + "\" y2=\"" +
             num(top + ph + 5) + "\" stroke=\"#444\"/><text x=\"" + X + "\" y=\"" + num(top + ph + 18) +
             "\" text-anchor=\"middle\" font-size=\"11\">" + num(t) + "</text>\n";
    }
    for (double t : plot_ticks(ymin, ymax)) {
        const std::string Y = num(py(t), "%.2f");
        s += "<line class=\"tick\" x1=\"" + num(left - 5) + "\" x2=\"" + num(left + pw) + "\" y1=\"" + Y + "\" y2=\"" +
             Y + "\" stroke=\"#ddd\"/><text x=\"" + num(left - 8) + "\" y=\"" + Y +
             "\" text-anchor=\"end\" dominant-baseline=\"middle\" font-size=\"11\">" + num(t) + "</text>\n";
    }
    s += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(H - 8) + "\" text-anchor=\"middle\" font-size=\"12\">" +
         html_escape(spec.x_label) + "</text>\n";
    s += "<text transform=\"translate(16 " + num(top + ph / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" + html_escape(spec.y_label) + "</text>\n";
    // series
    for (size_t k = 0; k < spec.series.size(); ++k) {
        const PlotSeries& ser = spec.series[k];
        const std::string colour = kColours[k % (sizeof kColours / sizeof kColours[0])];
        std::string path, marks;
        size_t shown = 0;
        for (size_t i = 0; i < ser.x.size(); ++i) {
            if (!std::isfinite(ser.x[i]) || !std::isfinite(ser.y[i])) continue;
            const std::string X = num(px(ser.x[i]), "%.2f"), Y = num(py(ser.y[i]), "%.2f");
            path += (shown == 0 ? "" : " ") + X + "," + Y;
            if (spec.scatter || ser.x.size() <= 60)
                marks += "<circle cx=\"" + X + "\" cy=\"" + Y + "\" r=\"" + (spec.scatter ? "3" : "2.5") +
                         "\" fill=\"" + colour + "\" fill-opacity=\"0.7\"/>";
            ++shown;
        }
        s += "<g class=\"series\" data-name=\"" + html_escape(ser.name) + "\">";
        if (!spec.scatter && shown > 1)
            s += "<polyline fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.5\" points=\"" + path + "\"/>";
        s += marks + "</g>\n";
        // legend
        const double ly = top + 10 + 18 * static_cast<double>(k);
        s += "<g class=\"legend\"><rect x=\"" + num(left + pw + 12) + "\" y=\"" + num(ly - 5) +
             "\" width=\"12\" height=\"10\" fill=\"" + colour + "\"/><text x=\"" + num(left + pw + 30) + "\" y=\"" +
             num(ly) + "\" dominant-baseline=\"middle\" font-size=\"11\">" + html_escape(ser.name) + "</text></g>\n";
    }
    return s + "</svg>\n<figcaption>" + html_escape(caption) + "</figcaption>\n</figure>\n";
}

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
        double score_sum = 0, ratio_sum = 0;
        for (const json& r : json_field(doc, "rollouts", where)) {
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
        out.push_back(it);
    }
    return out;
}

}  // namespace

std::vector<RolloutIterationSummary> gold_versus_proxy(const fs::path& rollouts_dir, const GoldLabels& gold) {
    return score_rollouts(rollouts_dir, gold, nullptr);
}

const std::vector<std::string> report_plot_ids = {
    "plot-pretrain-loss",  "plot-sft-loss",          "plot-judge-loss",      "plot-ppo-score",        "plot-ppo-kl",
    "plot-ppo-value-loss", "plot-ppo-clipfrac",      "plot-gold-iterations", "plot-proxy-iterations", "plot-gold-vs-kl",
    "plot-proxy-vs-kl",    "plot-rollouts-score-kl", "plot-probe-deltas",
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
        for (const json& v : judge["validation_history"])
            s += "<tr><td>" + json_cell(v.value("epoch", json())) + "</td><td>" + json_cell(v.value("pairs", json())) +
                 "</td><td>" + json_cell(v.value("correct", json())) + "</td><td>" +
                 json_cell(v.value("ties", json())) + "</td><td>" + json_cell(v.value("accuracy", json())) +
                 "</td><td>" + json_cell(v.value("loss", json())) + "</td><td>" +
                 json_cell(v.value("used_for_selection", json())) + "</td></tr>\n";
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

std::string render_ppo(const RunLayout& run) {
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
    const char* keys[] = {kScores,     kRlhfReward,   kNonScoreReward,   kKl, kApproxKl, kValueLoss,
                          kPolicyLoss, kClipFraction, kExplainedVariance};
    for (const char* k : keys) m[k].name = k;
    for (const json& h : history) {
        const double it = static_cast<double>(json_int(h, "iteration", f.string()));
        for (const char* k : keys) {
            m[k].x.push_back(it);
            m[k].y.push_back(json_number(h, k, f.string()));
        }
    }
    s += svg_plot({"plot-ppo-score",
                   "PPO score",
                   "iteration",
                   "mean per rollout",
                   {m[kScores], m[kRlhfReward], m[kNonScoreReward]},
                   false},
                  "Judge score of the rollouts (objective/scores), with the KL penalty (non_score_reward) and their "
                  "sum (rlhf_reward); TRL definitions.");
    s += svg_plot({"plot-ppo-kl", "KL to the reference", "iteration", "nats", {m[kKl], m[kApproxKl]}, false},
                  "objective/kl: per-sequence sum of sampled log-ratios to the SFT reference, mean over sequences; "
                  "policy/approxkl: between the rollout policy and the updated one.");
    s += svg_plot(
        {"plot-ppo-value-loss", "Critic and actor losses", "iteration", "loss", {m[kValueLoss], m[kPolicyLoss]}, false},
        "Value (critic) loss and clipped policy loss per iteration.");
    s += svg_plot({"plot-ppo-clipfrac", "Clip fraction", "iteration", "fraction", {m[kClipFraction]}, false, 0.0, 1.0},
                  "Fraction of response tokens whose probability ratio was clipped.");
    if (history.empty()) {
        s += not_run("PPO (RUN/ppo/continuous.json)");
        return s;
    }
    s += "<table>\n<tr><th>iteration</th>";
    for (const char* k : keys) s += std::string("<th>") + k + "</th>";
    s += std::string("<th>") + kNumEosTokens + "</th><th>" + kMeanResponseLength + "</th></tr>\n";
    for (const json& h : history) {
        s += "<tr><td>" + json_cell(h.value("iteration", json())) + "</td>";
        for (const char* k : keys) s += "<td>" + json_cell(h.value(k, json())) + "</td>";
        s += "<td>" + json_cell(h.value(kNumEosTokens, json())) + "</td><td>" +
             json_cell(h.value(kMeanResponseLength, json())) + "</td></tr>\n";
    }
    return s + "</table>\n";
}

std::string render_token_tables(const fs::path& dir) {
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
            s += "<details open><summary>" + html_escape(json_string(r, "rollout_id", where)) + " — prompt " +
                 html_escape(json_string(r, "prompt_id", where)) + ", finish " +
                 html_escape(json_string(r, "finish_reason", where)) + ", score " +
                 num(json_number(r, "score", where)) + ", sampled log-ratio sum " +
                 num(json_number(r, "sampled_logratio_sum", where)) + "</summary>\n<p class=\"text\">" +
                 html_escape(json_string(r, "text", where)) + "</p>\n";
            s += "<table class=\"tokens\">\n<tr><th>#</th><th>token</th><th>text</th><th>old_logp</th><th>ref_logp</th>"
                 "<th>reward</th><th>value</th><th>advantage</th><th>return</th></tr>\n";
            const json& tokens = json_field(r, "tokens", where);
            for (size_t t = 0; t < tokens.size(); ++t) {
                const json& k = tokens[t];
                s += "<tr><td>" + std::to_string(t) + "</td><td>" + std::to_string(json_int(k, "token", where)) +
                     "</td><td><code>" + html_escape(json_string(k, "text", where)) + "</code></td>";
                for (const char* f : {"old_logp", "ref_logp", "reward", "value", "advantage", "return"})
                    s += "<td>" + num(json_number(k, f, where)) + "</td>";
                s += "</tr>\n";
            }
            s += "</table>\n</details>\n";
        }
    }
    return s;
}

std::string render_gold_proxy(const RunLayout& run) {
    std::string s = section("gold-vs-proxy", "Gold versus proxy: rubric success and learned score against KL");
    s += "<p>Every saved rollout is scored by the rubric here, after training (never during): its gold success "
         "(recognised, relevant, no unsupported certainty, ended with EOS) against the judge's learned score and the "
         "sampled log-ratio to the SFT reference, iteration by iteration.</p>\n";
    const fs::path dir = run.ppo_rollouts(kMode);
    const fs::path corpus = run.corpus();
    std::vector<RolloutIterationSummary> iters;
    std::vector<RolloutPoint> points;
    std::string missing;
    if (iteration_files(dir).empty()) missing = "no saved rollouts (RUN/ppo/rollouts/continuous)";
    else if (!exists_file(corpus / "manifest.json")) missing = "no corpus with gold labels (RUN/corpus)";
    if (missing.empty()) {
        const GuardedReader reader("report", {run.root});
        const GoldLabels gold = load_gold(reader, corpus);
        iters = score_rollouts(dir, gold, &points);
    }
    PlotSeries success{"rubric success rate (gold)", {}, {}}, score{"mean judge score (proxy)", {}, {}};
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
    s += svg_plot({"plot-gold-iterations",
                   "Gold: rubric success per iteration",
                   "iteration",
                   "rubric success rate",
                   {success},
                   false,
                   0.0,
                   1.0},
                  "Rubric success rate of each iteration's rollouts (gold, scored after training).");
    s += svg_plot(
        {"plot-proxy-iterations", "Proxy: judge score per iteration", "iteration", "mean judge score", {score}, false},
        "Mean learned score of the same rollouts (proxy: a predicted simulated-preference score).");
    s += svg_plot({"plot-gold-vs-kl",
                   "Gold: rubric success vs KL",
                   "mean sampled log-ratio sum (KL)",
                   "rubric success rate",
                   {success_kl},
                   true,
                   0.0,
                   1.0},
                  "One point per PPO iteration: rubric success of its rollouts against their mean sampled "
                  "log-ratio to the reference.");
    s += svg_plot({"plot-proxy-vs-kl",
                   "Proxy: judge score vs KL",
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
    s += "<table>\n<tr><th>iteration</th><th>rollouts</th><th>rubric successes</th><th>rubric success rate</th>"
         "<th>mean judge score</th><th>mean sampled log-ratio sum</th></tr>\n";
    for (const auto& it : iters)
        s += "<tr><td>" + std::to_string(it.iteration) + "</td><td>" + std::to_string(it.rollouts) + "</td><td>" +
             std::to_string(it.rubric_successes) + "</td><td>" + num(it.rubric_success_rate) + "</td><td>" +
             num(it.mean_score) + "</td><td>" + num(it.mean_sampled_logratio) + "</td></tr>\n";
    s += "</table>\n";
    return s + render_token_tables(dir);
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
    s += "<p>Rows and unique contexts are kept apart: 260 generations per policy are 200 distinct prompts.</p>\n";
    for (const char* pop : populations) {
        s += "<h3 id=\"eval-" + std::string(pop) + "\">" + pop + "</h3>\n<table>\n<tr><th>policy</th>";
        for (const char* c : columns) s += std::string("<th>") + c + "</th>";
        s += "</tr>\n";
        for (const auto& [policy, per_pop] : metrics.items()) {
            if (!per_pop.is_object() || !per_pop.contains(pop)) continue;
            s += "<tr><td>" + html_escape(policy) + "</td>";
            for (const char* c : columns) s += "<td>" + json_cell(per_pop[pop].value(c, json())) + "</td>";
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
    auto verdict = [](const json& r) {
        if (!r.contains("rubric")) return std::string("—");
        const json& v = r["rubric"];
        return std::string(v.value("rubric_success", false) ? "success" : "failure") + " (" +
               html_escape(v.value("reason", std::string())) + ")";
    };
    auto score = [](const json& r) { return json_cell(r.value("learned_score", json())); };
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
             json_cell(r.value("expected_action", json())) + "</td><td>" + html_escape(r.value("text", std::string())) +
             "</td><td>" + verdict(r) + "</td><td>" + score(r) + "</td><td>" +
             html_escape(q.value("text", std::string())) + "</td><td>" + verdict(q) + "</td><td>" + score(q) +
             "</td></tr>\n";
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
            s += "<td>" + num(json_number(sc, k, where)) + "</td>";
        s += "<td>" + num(json_number(c, "correct_politeness_delta", where)) + "</td><td>" +
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
    s += "<table>\n<tr><th>step</th><th>seconds</th><th>command</th></tr>\n";
    if (d.contains("steps") && d["steps"].is_object())
        for (const auto& [step, v] : d["steps"].items())
            s += "<tr><td>" + html_escape(step) + "</td><td>" + json_cell(v.value("seconds", json())) +
                 "</td><td><code>" + html_escape(v.value("command", std::string())) + "</code></td></tr>\n";
    return s + "</table>\n";
}

}  // namespace

std::string render_report(const fs::path& root) {
    if (!fs::is_directory(root)) fail("report: run folder '", root.string(), "' does not exist");
    const RunLayout run{root};
    std::string title = "ppolab report — " + root.filename().string();
    std::string study;
    // The study's identity: RUN/results.json (written by `ppolab run` after
    // this step), else the configuration identity of the SFT report.
    json identity;
    const fs::path results = run.results(), sft = run.report("sft", kMode);
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
    std::string s =
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + html_escape(title) +
        "</title>\n<style>\nbody{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\n"
        "table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}\n"
        "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}\n"
        "figure{margin:1em 0}figcaption{font-size:13px;color:#555;max-width:720px}\n"
        ".scope{border-left:4px solid #d62728;padding:0.5em 1em;background:#fff5f5}\n"
        ".notrun{color:#a00;font-style:italic}.text{font-family:monospace;white-space:pre-wrap}\n"
        "table.tokens td{font-family:monospace}\n</style>\n</head>\n<body>\n<h1>" +
        html_escape(title) + "</h1>\n<div class=\"scope\" id=\"scope\">\n";
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
    if (!study.empty()) s += "<table id=\"study\">\n" + study + "</table>\n";
    s += "<nav><a href=\"#training\">training</a> · <a href=\"#ppo\">PPO</a> · <a href=\"#gold-vs-proxy\">gold vs "
         "proxy</a> · <a href=\"#evaluation\">evaluation</a> · <a href=\"#exercise\">probe factorial</a> · <a "
         "href=\"#run\">run</a></nav>\n";
    s += render_training(run);
    s += render_ppo(run);
    s += render_gold_proxy(run);
    s += render_evaluation(run);
    s += render_exercise(run);
    s += render_run_facts(run);
    return s + "</body>\n</html>\n";
}

void write_report(const fs::path& run, const fs::path& out) {
    if (fs::exists(out)) fail("report: '", out.string(), "' exists; refusing to overwrite it");
    write_file_atomic(out, render_report(run));
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
