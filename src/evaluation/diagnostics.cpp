// diagnostics.cpp — see diagnostics.h.
#include "evaluation/diagnostics.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "data/corpus.h"
#include "evaluation/evaluate.h"
#include "evaluation/populations.h"
#include "util/error.h"

namespace ppolab {

// ---- correlation ------------------------------------------------------------

namespace {

// "constant <name> (all N values are V)" when every value is equal, else "".
std::string constant_reason(const std::vector<double>& v, std::string_view name) {
    for (double x : v)
        if (x != v.front()) return "";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v.front());
    return "constant " + std::string(name) + " (all " + std::to_string(v.size()) + " values are " + buf + ")";
}

}  // namespace

Correlation pearson(const std::vector<double>& x, const std::vector<double>& y, std::string_view x_name,
                    std::string_view y_name) {
    PPOLAB_ASSERT(x.size() == y.size());
    Correlation c;
    c.n = static_cast<int64_t>(x.size());
    if (x.size() < 2) {
        c.reason = "fewer than 2 outputs (" + std::to_string(x.size()) + ")";
        return c;
    }
    for (const auto& [v, name] : {std::pair{&x, x_name}, std::pair{&y, y_name}}) {
        c.reason = constant_reason(*v, name);
        if (!c.reason.empty()) return c;
    }
    const double n = static_cast<double>(x.size());
    double mx = 0, my = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        mx += x[i];
        my += y[i];
    }
    mx /= n;
    my /= n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double dx = x[i] - mx, dy = y[i] - my;
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    // not constant, so both sums are > 0; |r| <= 1 up to rounding, clamped
    c.r = std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
    return c;
}

ordered_json correlation_to_json(const Correlation& c) {
    ordered_json j;
    j["r"] = c.r ? ordered_json(*c.r) : ordered_json(nullptr);
    j["n"] = c.n;
    if (!c.r) j["reason"] = c.reason;
    return j;
}

// ---- edits against the grammar ---------------------------------------------

int64_t edit_distance(std::string_view a, std::string_view b) {
    // |a| + |b| − 2 · LCS(a, b); the LCS by the usual DP, one row at a time
    std::vector<int64_t> prev(b.size() + 1, 0), cur(b.size() + 1, 0);  // (|b| + 1) LCS lengths
    for (size_t i = 1; i <= a.size(); ++i) {
        for (size_t j = 1; j <= b.size(); ++j)
            cur[j] = a[i - 1] == b[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
        std::swap(prev, cur);
    }
    return static_cast<int64_t>(a.size() + b.size()) - 2 * prev[b.size()];
}

namespace {

const std::vector<std::string>& grammar_sentences() {
    static const std::vector<std::string> all = [] {
        std::vector<std::string> out;
        for (const ResponseForm& f : rubric_enumerate()) out.push_back(response_form_text(f));
        return out;
    }();
    return all;
}

}  // namespace

GrammarMatch nearest_grammar_sentence(std::string_view text) {
    const std::string t = rubric_normalize(text);
    GrammarMatch best;
    best.distance = -1;
    for (const std::string& g : grammar_sentences()) {
        const int64_t d = edit_distance(t, g);
        if (best.distance < 0 || d < best.distance) best = GrammarMatch{g, d};
    }
    return best;
}

const std::vector<std::string> kEditGroups = {
    "undecodable bytes",            // a token did not decode to UTF-8
    "empty output",                 // nothing but EOS
    "exact sentence",               // the text is the sentence (uncertified for another reason)
    "final period dropped",         // text + "." is the sentence
    "leading punctuation",          // punctuation (or blanks) before the sentence
    "trailing punctuation",         // punctuation after the sentence
    "truncated",                    // a proper prefix of the sentence: cut short
    "start missing",                // a proper suffix of the sentence: its beginning missing
    "fragment (cut at both ends)",  // an inner piece of the sentence
    "extra words",                  // the sentence's words with whole words added
    "missing words",                // some of the sentence's words, in order, nothing else
    "extra characters",             // the sentence with characters added inside words
    "missing characters",           // the sentence with characters removed inside words
    "other",                        // anything else (substitutions, mixed edits)
};

namespace {

bool is_punctuation_or_blank(char c) { return c == ' ' || (std::ispunct(static_cast<unsigned char>(c)) != 0); }

bool all_punctuation(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_punctuation_or_blank);
}

std::vector<std::string_view> words(std::string_view s) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < s.size()) {
        const size_t j = std::min(s.find(' ', i), s.size());
        if (j > i) out.push_back(s.substr(i, j - i));
        i = j + 1;
    }
    return out;
}

// Whether `small` is a subsequence of `big` (elements in order, gaps allowed).
template <typename Seq>
bool subsequence(const Seq& small, const Seq& big) {
    size_t k = 0;
    for (size_t i = 0; i < big.size() && k < small.size(); ++i)
        if (big[i] == small[k]) ++k;
    return k == small.size();
}

}  // namespace

std::string classify_edit(std::string_view raw, std::string_view g, bool decodable) {
    const std::string t = rubric_normalize(raw);
    if (!decodable) return "undecodable bytes";
    if (t.empty()) return "empty output";
    if (t == g) return "exact sentence";
    if (t + "." == g) return "final period dropped";
    if (t.size() > g.size()) {
        const std::string_view tv(t);
        if (tv.substr(t.size() - g.size()) == g && all_punctuation(tv.substr(0, t.size() - g.size())))
            return "leading punctuation";
        if (tv.substr(0, g.size()) == g && all_punctuation(tv.substr(g.size()))) return "trailing punctuation";
    }
    if (t.size() < g.size()) {
        const size_t at = g.find(t);
        if (at == 0) return "truncated";
        if (at == g.size() - t.size()) return "start missing";
        if (at != std::string_view::npos) return "fragment (cut at both ends)";
    }
    const auto tw = words(t), gw = words(g);
    if (tw.size() > gw.size() && subsequence(gw, tw)) return "extra words";
    if (tw.size() < gw.size() && subsequence(tw, gw)) return "missing words";
    if (t.size() > g.size() && subsequence(std::string_view(g), std::string_view(t))) return "extra characters";
    if (t.size() < g.size() && subsequence(std::string_view(t), g)) return "missing characters";
    return "other";
}

// ---- the diagnostics -------------------------------------------------------

namespace {

ordered_json share(int64_t count, int64_t n) {
    ordered_json j;
    j["count"] = count;
    j["share"] = n > 0 ? ordered_json(static_cast<double>(count) / static_cast<double>(n)) : ordered_json(nullptr);
    return j;
}

// The uncertified outputs grouped by edit: [{group, count, of, example}] in
// kEditGroups order, groups without outputs left out.
ordered_json uncertified_groups(const std::vector<DiagnosticOutput>& outputs, int64_t* uncertified) {
    struct Group {
        int64_t count = 0;
        ordered_json example;
    };
    std::map<std::string, Group> groups;
    std::map<std::string, GrammarMatch> nearest;  // by normalised text: a collapsed policy repeats one answer
    *uncertified = 0;
    for (const DiagnosticOutput& o : outputs) {
        if (o.verdict.recognized) continue;
        ++*uncertified;
        const std::string t = rubric_normalize(o.text);
        auto it = nearest.find(t);
        if (it == nearest.end()) it = nearest.emplace(t, nearest_grammar_sentence(t)).first;
        Group& g = groups[classify_edit(o.text, it->second.sentence, o.verdict.decodable)];
        if (g.count++ == 0) {
            g.example["id"] = o.id;
            g.example["text"] = o.text;
            g.example["nearest_sentence"] = it->second.sentence;
            g.example["edit_distance"] = it->second.distance;
            g.example["rubric_reason"] = o.verdict.reason;
        }
    }
    ordered_json out = ordered_json::array();
    for (const std::string& name : kEditGroups) {
        const auto it = groups.find(name);
        if (it == groups.end()) continue;
        ordered_json j;
        j["group"] = name;
        j["count"] = it->second.count;
        j["of"] = *uncertified;
        j["example"] = it->second.example;
        out.push_back(j);
    }
    return out;
}

}  // namespace

ordered_json diagnose_outputs(const std::vector<DiagnosticOutput>& outputs) {
    const int64_t n = static_cast<int64_t>(outputs.size());
    std::vector<double> score, length, polite;
    int64_t polite_count = 0, refusals = 0, unrecognised = 0;
    std::vector<int64_t> per_action(kActionCount, 0);
    std::set<std::string> distinct;
    for (const DiagnosticOutput& o : outputs) {
        score.push_back(o.learned_score);
        length.push_back(static_cast<double>(o.tokens));
        polite.push_back(o.verdict.polite ? 1.0 : 0.0);
        polite_count += o.verdict.polite;
        distinct.insert(o.text);
        if (!o.verdict.recognized) ++unrecognised;
        else if (o.verdict.refusal) ++refusals;
        else if (o.verdict.action >= 0 && o.verdict.action < kActionCount) ++per_action[o.verdict.action];
        else PPOLAB_ASSERT(false && "a recognised answer has an action or is a refusal");
    }
    ordered_json j;
    j["outputs"] = n;
    j["distinct_responses"] = distinct.size();
    ordered_json corr;
    corr["response_tokens"] = correlation_to_json(pearson(score, length, "learned score", "response length"));
    corr["polite"] = correlation_to_json(pearson(score, polite, "learned score", "polite flag"));
    j["learned_score_correlation"] = corr;
    j["polite"] = share(polite_count, n);
    ordered_json actions;
    for (int a = 0; a < kActionCount; ++a) actions[action_name(a)] = share(per_action[a], n);
    actions["refusal"] = share(refusals, n);
    actions["uncertified (no action)"] = share(unrecognised, n);
    j["actions"] = actions;
    int64_t uncertified = 0;
    ordered_json groups = uncertified_groups(outputs, &uncertified);
    j["uncertified"] = uncertified;
    j["uncertified_edit_groups"] = groups;
    return j;
}

fs::path diagnostics_path(const RunLayout& run) { return run.eval() / "diagnostics.json"; }

namespace {

// One row per distinct prompt of a policy's scored held-out file.
std::vector<DiagnosticOutput> scored_outputs(const GuardedReader& reader, const fs::path& file) {
    const std::string where = file.string();
    const json doc = parse_json(reader.read(file), where);
    std::vector<EvalRow> rows;
    for (const json& j : json_field(doc, "rows_detail", where)) rows.push_back(eval_row_from_json(j, where));
    std::vector<const EvalRow*> all;
    for (const EvalRow& r : rows) all.push_back(&r);
    std::vector<DiagnosticOutput> out;
    for (const EvalRow* r : unique_contexts(all)) {
        if (!r->verdict) fail(where, ": row ", r->id, " has no field 'rubric' (the scoring step writes it)");
        if (!r->learned_score)
            fail(where, ": row ", r->id, ": field 'learned_score' is null; expected the judge's score");
        out.push_back(
            DiagnosticOutput{r->id, r->text, *r->learned_score, static_cast<int64_t>(r->response.size()), *r->verdict});
    }
    return out;
}

// Every saved rollout of a mode, scored by the rubric (expected action from gold/).
std::vector<DiagnosticOutput> rollout_outputs(const GuardedReader& reader, const fs::path& dir,
                                              const GoldLabels& gold) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(reader.resolve(dir))) {
        const std::string name = e.path().filename().string();
        if (name.rfind("iteration-", 0) == 0 && e.path().extension() == ".json") files.push_back(dir / name);
    }
    std::sort(files.begin(), files.end());
    std::vector<DiagnosticOutput> out;
    for (const fs::path& file : files) {
        const std::string where = file.string();
        const json doc = parse_json(reader.read(file), where);
        for (const json& r : json_field(doc, "rollouts", where)) {
            DiagnosticOutput o;
            o.id = json_string(r, "rollout_id", where);
            o.text = json_string(r, "text", where);
            o.learned_score = json_number(r, "score", where);
            o.tokens = static_cast<int64_t>(json_field(r, "response_ids", where).size());
            o.verdict = evaluate_response(o.text, finish_reason_parse(json_string(r, "finish_reason", where)),
                                          gold.at(json_string(r, "prompt_id", where)).expected_action);
            out.push_back(std::move(o));
        }
    }
    return out;
}

ordered_json absent(const std::string& what) {
    ordered_json j;
    j["absent"] = what;
    return j;
}

}  // namespace

ordered_json shortcut_diagnostics(const GuardedReader& reader, const RunLayout& run) {
    ordered_json j;
    j["format"] = "ppolab-diagnostics";
    j["note"] =
        "Diagnostics only: the rubric's verdicts are unchanged. Held-out policies: one row per distinct prompt "
        "(test and probe contexts). Rollouts: every saved PPO rollout of the continuous mode (learn-side prompts), "
        "scored by the rubric after training. Nearest sentence: byte-level insert/delete edit distance over the "
        "grammar's "
        "192 sentences (ties to the first in enumeration order).";
    ordered_json sources, groups;
    for (const char* policy : {"sft", "ppo"}) {
        const fs::path f = scored_path(run, EvalSet::held_out, policy);
        sources[policy] = "eval/" + f.filename().string();
        groups[policy] = reader.exists(f)
                             ? diagnose_outputs(scored_outputs(reader, f))
                             : absent("no scored held-out rows (" + sources[policy].get<std::string>() + ")");
    }
    const fs::path dir = run.ppo_rollouts("continuous");
    sources["rollouts"] = "ppo/rollouts/continuous";
    if (!reader.exists(run.corpus() / "manifest.json"))
        groups["rollouts"] = absent("no corpus with gold labels (corpus/) to score the rollouts");
    else if (reader.exists(dir) && fs::is_directory(reader.resolve(dir)))
        groups["rollouts"] = diagnose_outputs(rollout_outputs(reader, dir, load_gold(reader, run.corpus())));
    else groups["rollouts"] = absent("no saved PPO rollouts (ppo/rollouts/continuous)");
    j["sources"] = sources;
    j["groups"] = groups;
    return j;
}

void write_shortcut_diagnostics(const GuardedReader& reader, const RunLayout& run) {
    const fs::path out = diagnostics_path(run);
    fs::create_directories(out.parent_path());
    write_json_atomic(out, shortcut_diagnostics(reader, run), Overwrite::replace);
}

}  // namespace ppolab
