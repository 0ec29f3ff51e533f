// report_findings.cpp — the report's sections that say what was found: the
// Findings box of RUN/findings.json (first screen), the over-optimisation
// chart (gold and proxy against √KL, Gao et al. 2022 fits) and the shortcut
// diagnostics of RUN/eval/diagnostics.json. See report.h.
#include <cmath>
#include <cstdio>

#include "evaluation/diagnostics.h"
#include "evaluation/evaluate.h"
#include "evaluation/report.h"
#include "evaluation/report_internal.h"
#include "training/run_layout.h"
#include "util/canon_math.h"
#include "util/error.h"

namespace ppolab::report_detail {

namespace {

fs::path findings_path(const fs::path& run) { return run / "findings.json"; }

// An interval I = {mean, low, high, replicates, contexts} of findings.json
// (null bounds are NaN); a plain number is an interval of width 0.
struct Interval {
    double mean = NAN, low = NAN, high = NAN;
    int64_t replicates = 0, contexts = 0;
};

double number_or_nan(const json& obj, const char* key, const std::string& where) {
    if (!obj.contains(key) || obj[key].is_null()) return NAN;
    return json_number(obj, key, where);
}

Interval interval(const json& obj, const std::string& key, const std::string& where) {
    const json& v = json_field(obj, key, where);
    const std::string w = where + "." + key;
    Interval i;
    if (v.is_number()) {
        i.mean = i.low = i.high = v.get<double>();
        return i;
    }
    if (v.is_null()) return i;
    if (!v.is_object()) fail(w, ": expected an interval {mean, low, high, replicates, contexts}, got ", v.type_name());
    i.mean = number_or_nan(v, "mean", w);
    i.low = number_or_nan(v, "low", w);
    i.high = number_or_nan(v, "high", w);
    if (v.contains("replicates")) i.replicates = json_int(v, "replicates", w);
    if (v.contains("contexts")) i.contexts = json_int(v, "contexts", w);
    return i;
}

// "−14.0 [−22.0, −6.0]" (scale 100 for rates in points), 3–4 significant figures.
std::string interval_text(const Interval& i, double scale = 1, const char* format = "%.3g") {
    if (!std::isfinite(i.mean)) return "—";
    std::string s = num(i.mean * scale, format);
    if (std::isfinite(i.low) && std::isfinite(i.high))
        s += " [" + num(i.low * scale, format) + ", " + num(i.high * scale, format) + "]";
    return s;
}

json read_findings(const fs::path& run) {
    const fs::path f = findings_path(run);
    if (!exists_file(f)) return json();
    json d = read_json_file(f);
    const std::string where = f.string();
    if (!d.is_object()) fail(where, ": expected a JSON object, got ", d.type_name());
    const std::string format = json_string(d, "format", where);
    if (format != "ppolab-findings") fail(where, ": field 'format' must be 'ppolab-findings', got '", format, "'");
    return d;
}

// The colour class of a verdict code: gold fell / exploited red, improved
// green, no change grey, anything else amber.
std::string verdict_class(std::string code) {
    for (char& c : code)
        if (c == '_' || c == ' ') c = '-';
    if (code == "exploited" || code == "gold-fell" || code == "regressed") return "verdict-bad";
    if (code == "improved") return "verdict-good";
    if (code == "no-change" || code == "unchanged" || code == "inconclusive") return "verdict-neutral";
    return "verdict-mixed";
}

// `run --compare`: every method's gains over SFT on the test prompts (findings.json "comparison").
std::string render_comparison(const json& d, const std::string& where) {
    if (!d.contains("comparison") || !d["comparison"].contains("table")) return "";
    const std::string w = where + ".comparison";
    std::string s =
        "<h3>Methods compared on the same SFT, judge and test prompts</h3>\n<table id=\"comparison\">\n"
        "<tr><th>method</th><th>gold − SFT (rubric, points)</th><th>proxy − SFT (judge score)</th>"
        "<th>exact KL to SFT (nats)</th><th>gold − PPO (points)</th></tr>\n";
    for (const json& row : json_field(d["comparison"], "table", w)) {
        const std::string name = json_string(row, "policy", w + ".table");
        const std::string label = name == "bon" ? "best-of-" + std::to_string(json_int(row, "n", w)) : name;
        const std::string kl = row.contains("kl_bound") ? "≤ " + num(json_number(row, "kl_bound", w), "%.3g")
                                                        : interval_text(interval(row, "kl_exact_to_sft", w));
        s += "<tr data-method=\"" + html_escape(name) + "\"><th>" + html_escape(label) + "</th><td class=\"n\">" +
             interval_text(interval(row, "gold_minus_sft", w), 100) + "</td><td class=\"n\">" +
             interval_text(interval(row, "proxy_minus_sft", w)) + "</td><td class=\"n\">" + kl +
             "</td><td class=\"n\">" + interval_text(interval(row, "gold_minus_ppo", w), 100) + "</td></tr>\n";
    }
    s += "</table>\n";
    // The same table on gold and proxy against √KL: one point (with its interval bar) per trained policy.
    const std::string x_label = "d = √KL(π ‖ π_SFT), exact";
    PlotSpec gold{"", "Gold: rubric success − SFT", x_label, "gold − SFT (fraction)", {}, true};
    PlotSpec proxy{"", "Proxy: judge score − SFT", x_label, "proxy − SFT (judge score)", {}, true};
    gold.x_from_zero = proxy.x_from_zero = true;
    const char* const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};
    size_t k = 0;
    for (const json& row : json_field(d["comparison"], "table", w)) {
        if (!row.contains("kl_exact_to_sft")) continue;  // best-of-n: another baseline (SFT's samples)
        const char* colour = colours[k++ % std::size(colours)];
        for (PlotSpec* p : {&gold, &proxy}) {
            const Interval kl = interval(row, "kl_exact_to_sft", w),
                           y = interval(row, p == &gold ? "gold_minus_sft" : "proxy_minus_sft", w);
            PlotSeries m{json_string(row, "policy", w), {std::sqrt(std::max(0.0, kl.mean))}, {y.mean}};
            m.y_low = {y.low};
            m.y_high = {y.high};
            m.style = PlotSeries::Style::markers;
            m.colour = colour;
            p->series.push_back(m);
        }
    }
    for (PlotSpec* p : {&gold, &proxy}) {
        PlotSeries origin{"SFT (origin)", {0.0}, {0.0}};
        origin.style = PlotSeries::Style::markers;
        origin.colour = "#000";
        p->series.push_back(origin);
    }
    s += svg_panels("plot-comparison", "The methods against √KL", {gold, proxy},
                    "Each trained policy's greedy evaluation on the test prompts, placed by the exact KL to SFT "
                    "(mean over replicates), with the 95 % interval of its gain over SFT as a bar.");
    const json& c = d["comparison"];
    if (c.contains("best_gold"))
        s += "<p id=\"comparison-answer\" class=\"answer\">" +
             html_escape(json_string(c["best_gold"], "sentence", w + ".best_gold")) + "</p>\n";
    return s +
           "<p class=\"note\">Greedy generations on the test prompts for every trained policy; best-of-n is the "
           "over-optimisation step's temperature-1 SFT samples relative to n = 1, its KL the upper bound "
           "log n − (n−1)/n.</p>\n";
}

}  // namespace

std::string render_findings_box(const fs::path& run) {
    const json d = read_findings(run);
    if (d.is_null())
        return "<div id=\"findings\" class=\"findings findings-absent\">\n<h2>Findings</h2>\n<p class=\"notrun\" "
               "id=\"findings-absent\">No findings: RUN/findings.json is absent (a run from before <code>ppolab "
               "findings</code>, or that step has not run). Every number below is one run's measurement, without "
               "replicates or intervals.</p>\n</div>\n";
    const std::string where = findings_path(run).string();
    const json& verdict = json_field(d, "verdict", where);
    const std::string code = json_string(verdict, "code", where + ".verdict");
    std::string s = "<div id=\"findings\" class=\"findings " + verdict_class(code) + "\" data-verdict=\"" +
                    html_escape(code) + "\">\n<h2>Findings</h2>\n<p class=\"verdict\" id=\"verdict\">" +
                    html_escape(json_string(verdict, "text", where + ".verdict")) + "</p>\n";
    const json& diff = json_field(d, "ppo_minus_sft", where);
    const json& ppo = json_field(json_field(d, "policies", where), "ppo", where + ".policies");
    struct Row {
        const char* label;
        const json* group;
        const char* metric;
        double scale;
    };
    const Row rows[] = {{"PPO − SFT rubric success (points)", &diff, "rubric_success", 100},
                        {"PPO − SFT relevant (points)", &diff, "relevant", 100},
                        {"PPO − SFT judge score", &diff, "learned_score", 1},
                        {"PPO − SFT response tokens", &diff, "response_tokens", 1},
                        {"PPO exact KL to SFT (nats per sequence)", &ppo, "kl_exact_to_sft", 1}};
    const double level = json_number(json_field(d, "confidence", where), "level", where + ".confidence");
    s += "<table id=\"findings-intervals\">\n<tr><th>mean [" + num(level * 100) +
         " % interval]</th><th>test</th><th>probe contexts</th></tr>\n";
    int64_t contexts_test = 0, contexts_probe = 0;
    for (const Row& r : rows) {
        s += "<tr><th>" + html_escape(r.label) + "</th>";
        for (const char* pop : {"test", "probe"}) {
            const std::string w = where + (r.group == &diff ? ".ppo_minus_sft." : ".policies.ppo.") + pop;
            if (!r.group->contains(pop) || !(*r.group)[pop].contains(r.metric)) {
                s += "<td class=\"n\">—</td>";
                continue;
            }
            const Interval i = interval((*r.group)[pop], r.metric, w);
            (std::string(pop) == "test" ? contexts_test : contexts_probe) = i.contexts;
            s += "<td class=\"n\">" + interval_text(i, r.scale) + "</td>";
        }
        s += "</tr>\n";
    }
    s += "</table>\n";
    const json& conf = json_field(d, "confidence", where);
    s += "<p id=\"findings-units\">" + std::to_string(json_int(d, "replicates", where)) + " replicates; " +
         std::to_string(contexts_test) + " test and " + std::to_string(contexts_probe) +
         " probe contexts (independent units). Intervals: " +
         html_escape(json_string(conf, "method", where + ".confidence")) + ", " +
         std::to_string(json_int(conf, "resamples", where + ".confidence")) + " resamples, seed " +
         std::to_string(json_int(conf, "seed", where + ".confidence")) + ".</p>\n";
    s += render_comparison(d, where);
    s += "<p class=\"note\" id=\"findings-scope\">" + html_escape(json_string(d, "scope", where)) + "</p>\n";
    return s + "</div>\n";
}

// ---- over-optimisation -----------------------------------------------------

namespace {

struct Fit {
    double alpha = NAN, beta = NAN;
    Interval d_star;
    bool has_peak = false;
};

Fit read_fit(const json& fits, const char* kind, const char* metric, const std::string& where) {
    const std::string w = where + ".fits." + kind + "." + metric;
    const json& f = json_field(json_field(fits, kind, where + ".fits"), metric, where + ".fits." + kind);
    Fit r;
    r.alpha = interval(f, "alpha", w).mean;
    r.beta = interval(f, "beta", w).mean;
    if (f.contains("d_star")) r.d_star = interval(f, "d_star", w);
    r.has_peak = f.contains("has_peak") && json_bool(f, "has_peak", w);
    return r;
}

// R_RL(d) = d(α − β log d) or R_bon(d) = d(α − β d) on (0, d_max].
PlotSeries fit_curve(const Fit& f, bool rl, double d_max, const std::string& name, const char* colour) {
    PlotSeries s{name, {0.0}, {0.0}};
    s.style = PlotSeries::Style::line;
    s.colour = colour;
    constexpr int kPoints = 80;
    for (int k = 1; k <= kPoints; ++k) {
        const double d = d_max * k / kPoints;
        s.x.push_back(d);
        s.y.push_back(d * (f.alpha - f.beta * (rl ? canon_log(d) : d)));
    }
    return s;
}

std::string peak_text(const Fit& f) {
    if (!f.has_peak || !std::isfinite(f.d_star.mean)) return "no peak in the fitted range";
    return "peak at d* = " + interval_text(f.d_star);
}

}  // namespace

std::string render_overoptimisation(const fs::path& run) {
    std::string s = section("overoptimisation", "Over-optimisation: gold and proxy against √KL");
    const json d = read_findings(run);
    const std::string where = findings_path(run).string() + ".overoptimisation";
    const std::string x_label = "d = √KL(π ‖ π_SFT)";
    PlotSpec gold{"", "Gold: rubric success relative to SFT", x_label, "gold − SFT (fraction)", {}, false};
    PlotSpec proxy{"", "Proxy: judge score relative to SFT", x_label, "proxy − SFT (judge score)", {}, false};
    gold.x_from_zero = proxy.x_from_zero = true;
    std::string text;
    if (!d.is_null() && d.contains("overoptimisation") && d["overoptimisation"].contains("missing")) {
        text =
            "<p class=\"notrun\">Not measured: " + html_escape(json_string(d["overoptimisation"], "missing", where)) +
            "</p>\n";
    } else if (!d.is_null() && d.contains("overoptimisation")) {
        const json& o = d["overoptimisation"];
        double d_max = 0;
        for (PlotSpec* p : {&gold, &proxy}) {
            const char* metric = p == &gold ? "gold" : "proxy";
            PlotSeries snaps{"PPO snapshots (interval bars)", {}, {}}, bon{"best-of-n from SFT", {}, {}};
            snaps.style = PlotSeries::Style::markers;
            bon.style = PlotSeries::Style::line;
            for (auto [ser, key] : {std::pair{&snaps, "snapshots"}, std::pair{&bon, "best_of_n"}}) {
                const std::string w = where + "." + key;
                for (const json& pt : json_field(o, key, where)) {
                    const Interval x = interval(pt, "sqrt_kl", w), y = interval(pt, metric, w);
                    ser->x.push_back(x.mean);
                    ser->y.push_back(y.mean);
                    ser->y_low.push_back(y.low);
                    ser->y_high.push_back(y.high);
                    if (std::isfinite(x.mean)) d_max = std::max(d_max, x.mean);
                }
            }
            snaps.colour = "#1f77b4";
            bon.colour = "#ff7f0e";
            PlotSeries origin{"SFT (origin)", {0.0}, {0.0}};
            origin.style = PlotSeries::Style::markers;
            origin.colour = "#000";
            const json& fits = json_field(o, "fits", where);
            const Fit rl = read_fit(fits, "rl", metric, where), bf = read_fit(fits, "best_of_n", metric, where);
            p->series = {snaps, bon, fit_curve(rl, true, d_max, "RL fit d(α − β log d)", "#2ca02c"),
                         fit_curve(bf, false, d_max, "best-of-n fit d(α − βd)", "#9467bd"), origin};
            if (d_max <= 0) p->series.clear();
            text += "<li>" + std::string(metric) + ": RL fit " + peak_text(rl) + "; best-of-n fit " + peak_text(bf) +
                    "</li>\n";
        }
        const json& answer = json_field(o, "answer", where);
        text = "<p id=\"overoptimisation-answer\" class=\"answer\">" +
               html_escape(json_string(answer, "text", where + ".answer")) + "</p>\n<ul>\n" + text + "</ul>\n";
    }
    // without findings, one empty panel says so (not two)
    std::vector<PlotSpec> panels = {gold, proxy};
    const std::string title = "Gold and proxy against √KL";
    if (gold.series.empty() && proxy.series.empty()) panels = {PlotSpec{"", title, "", "", {}}};
    s += svg_panels("plot-overoptimisation", title, panels,
                    "Policy snapshots of PPO (bars: the findings' interval over replicates and contexts) and "
                    "best-of-n from SFT, placed by d = √KL to SFT (exact sequence KL for policies, "
                    "log n − (n−1)/n "
                    "for best-of-n), with the fits R_RL(d) = d(α − β log d) and R_bon(d) = d(α − βd) of Gao, "
                    "Schulman and Hilton (2022); gold and proxy relative to SFT, so SFT sits at the origin.");
    if (text.empty()) return s + not_run("ppolab findings (RUN/findings.json with 'overoptimisation')");
    return s + text;
}

// ---- shortcut diagnostics ----------------------------------------------------

namespace {

std::string correlation_cell(const json& c) {
    if (!c.is_object()) return "<td>—</td>";
    if (c.contains("r") && c["r"].is_number()) return td(c["r"]);
    return "<td>— (" + html_escape(c.value("reason", std::string("undefined"))) + ")</td>";
}

std::string share_cell(const json& s) {
    if (!s.is_object() || !s.contains("share") || !s["share"].is_number()) return "<td class=\"n\">—</td>";
    return "<td class=\"n\">" + num(s["share"].get<double>() * 100, "%.1f") + " % (" +
           json_cell(s.value("count", json())) + ")</td>";
}

const char* const kDiagnosticGroups[] = {"sft", "ppo", "rollouts"};
const char* const kGroupTitles[] = {"SFT (held-out contexts)", "PPO (held-out contexts)", "PPO rollouts (training)"};

}  // namespace

std::string render_diagnostics(const RunLayout& run) {
    std::string s = section("diagnostics", "Shortcut diagnostics: what the judge's score goes with");
    const fs::path f = diagnostics_path(run);
    json d;
    if (exists_file(f)) {
        d = read_json_file(f);
    } else if (exists_file(scored_path(run, EvalSet::held_out, "sft")) ||
               exists_file(run.ppo_rollouts(kMode) / "iteration-001.json")) {
        // an older run: the same diagnostics, computed here from the same files
        d = json::parse(shortcut_diagnostics(GuardedReader("report", {run.root, run.study()}), run).dump());
        s += "<p class=\"note\">RUN/eval/diagnostics.json is absent (a run from before it was written): computed "
             "here from the scored rows and the saved rollouts.</p>\n";
    } else {
        return s + not_run("evaluate (RUN/eval/diagnostics.json)");
    }
    const std::string where = f.string();
    if (json_string(d, "format", where) != "ppolab-diagnostics")
        fail(where, ": field 'format' must be 'ppolab-diagnostics', got '", d["format"].dump(), "'");
    const json& groups = json_field(d, "groups", where);
    s += "<p class=\"note\">" + html_escape(json_string(d, "note", where)) + "</p>\n";
    s += "<table id=\"diagnostics-summary\">\n<tr><th></th>";
    for (const char* t : kGroupTitles) s += std::string("<th>") + html_escape(t) + "</th>";
    s += "</tr>\n";
    auto row = [&](const std::string& label, auto cell) {
        s += "<tr><th>" + html_escape(label) + "</th>";
        for (const char* g : kDiagnosticGroups) {
            const json& grp = groups.contains(g) ? groups[g] : json();
            s += grp.is_object() && !grp.contains("absent") ? cell(grp) : "<td>absent</td>";
        }
        s += "</tr>\n";
    };
    row("outputs", [](const json& g) { return td(g.value("outputs", json())); });
    row("distinct responses", [](const json& g) { return td(g.value("distinct_responses", json())); });
    row("r(judge score, response tokens)", [](const json& g) {
        return correlation_cell(g.value("learned_score_correlation", json()).value("response_tokens", json()));
    });
    row("r(judge score, polite)", [](const json& g) {
        return correlation_cell(g.value("learned_score_correlation", json()).value("polite", json()));
    });
    row("polite", [](const json& g) { return share_cell(g.value("polite", json())); });
    std::vector<std::string> actions;  // the rubric's order (the file's object is read back sorted)
    for (int a = 0; a < kActionCount; ++a) actions.push_back(action_name(a));
    actions.push_back("refusal");
    actions.push_back("uncertified (no action)");
    for (const std::string& a : actions)
        row("action: " + a, [&](const json& g) { return share_cell(g.value("actions", json()).value(a, json())); });
    row("uncertified", [](const json& g) { return td(g.value("uncertified", json())); });
    s += "</table>\n";
    for (size_t k = 0; k < 3; ++k) {
        const char* g = kDiagnosticGroups[k];
        if (!groups.contains(g) || !groups[g].contains("uncertified_edit_groups")) continue;
        const json& eg = groups[g]["uncertified_edit_groups"];
        s += "<h3 id=\"diagnostics-" + std::string(g) + "\">Uncertified outputs: " + html_escape(kGroupTitles[k]) +
             "</h3>\n";
        if (eg.empty()) {
            s += "<p>None: every output is a sentence of the grammar.</p>\n";
            continue;
        }
        s += "<ul class=\"edit-groups\">\n";
        const std::string w = where + ": groups." + g + ".uncertified_edit_groups";
        for (const json& e : eg) {
            const json& ex = json_field(e, "example", w);
            s += "<li><b>" + html_escape(json_string(e, "group", w)) +
                 "</b>: " + std::to_string(json_int(e, "count", w)) + " of " + std::to_string(json_int(e, "of", w)) +
                 " — e.g. " + html_escape(json_string(ex, "id", w)) + " <code>" +
                 html_escape(json_string(ex, "text", w)) + "</code>, nearest sentence <code>" +
                 html_escape(json_string(ex, "nearest_sentence", w)) + "</code> (edit distance " +
                 std::to_string(json_int(ex, "edit_distance", w)) + ")</li>\n";
        }
        s += "</ul>\n";
    }
    return s;
}

}  // namespace ppolab::report_detail
