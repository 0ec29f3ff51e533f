#include "evaluation/summary.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "training/run_layout.h"

namespace ppolab {

namespace {

constexpr const char* kNone = "\u2014";  // —

// printf into a std::string.
template <class... A>
std::string format(const char* fmt, A... a) {
    char buf[256];
    std::snprintf(buf, sizeof buf, fmt, a...);
    return buf;
}

// Right-aligns `s` in `width` columns (an em dash counts as one).
std::string right(const std::string& s, size_t width) {
    size_t cols = 0;
    for (unsigned char c : s) cols += (c & 0xC0) != 0x80;
    return cols >= width ? s : std::string(width - cols, ' ') + s;
}

const json& at(const json& j, std::initializer_list<const char*> path) {
    static const json null_value;
    const json* cur = &j;
    for (const char* k : path) {
        if (!cur->is_object() || !cur->contains(k)) return null_value;
        cur = &(*cur)[k];
    }
    return *cur;
}

std::string percent(const json& rate) { return rate.is_number() ? sig3(rate.get<double>() * 100) + " %" : kNone; }

std::string signed3(const json& x) {
    if (!x.is_number()) return kNone;
    const std::string s = sig3(x);
    return x.get<double>() > 0 ? "+" + s : s;
}

}  // namespace

std::string sig3(const json& x) {
    if (!x.is_number()) return kNone;
    const double v = x.get<double>();
    if (!std::isfinite(v)) return v != v ? "nan" : v > 0 ? "inf" : "-inf";
    if (v == 0) return "0";
    std::string s = format("%#.3g", v);  // keeps trailing zeros: 0.0100
    if (s.back() == '.') s.pop_back();   // "100." → "100"
    return s;
}

std::string study_summary(const json& r, const std::filesystem::path& run_root) {
    std::string out;
    auto line = [&](const std::string& s) { out += s + "\n"; };

    line("== ppolab study: " + run_root.string() + " (preset " +
         (at(r, {"study", "preset"}).is_string() ? at(r, {"study", "preset"}).get<std::string>() : std::string(kNone)) +
         ") ==");
    line("");
    // The answer first: the findings' verdict and intervals (results.json).
    // `text` wrapped at word boundaries, every line indented by `indent`.
    auto wrap = [&](const std::string& text, const std::string& indent) {
        std::string cur = indent;
        size_t pos = 0;
        while (pos < text.size()) {
            size_t next = text.find(' ', pos);
            if (next == std::string::npos) next = text.size();
            const std::string w = text.substr(pos, next - pos);
            if (cur.size() > indent.size() && cur.size() + 1 + w.size() >= static_cast<size_t>(kSummaryColumns)) {
                line(cur);
                cur = indent;
            }
            if (!w.empty()) cur += (cur.size() > indent.size() ? " " : "") + w;
            pos = next + 1;
        }
        if (cur.size() > indent.size()) line(cur);
    };
    const json& verdict = at(r, {"verdict", "text"});
    if (verdict.is_string()) {
        const json& units = at(r, {"confidence", "units"});
        line(format("answer         %lld replicate(s) x %lld test prompts, 95 %% intervals (hierarchical bootstrap)",
                    static_cast<long long>(at(units, {"replicates"}).get<int64_t>()),
                    static_cast<long long>(at(units, {"contexts", "test"}).get<int64_t>())));
        wrap(verdict.get<std::string>(), "  ");
        auto interval = [&](const json& i, double scale) {
            if (!i.is_object() || !i["mean"].is_number()) return std::string(kNone);
            return signed3(scale * i["mean"].get<double>()) + " [" + signed3(scale * i["low"].get<double>()) + ", " +
                   signed3(scale * i["high"].get<double>()) + "]";
        };
        const json& d = at(r, {"ppo_minus_sft", "test"});
        const json& exact = at(d, {"exact_success"});
        if (exact.is_object()) {
            const json& parts = at(r, {"ppo_minus_sft_parts", "test", "exact_success"});
            auto width = [&](const json& i) {
                if (!i.is_object() || !i["low"].is_number()) return std::string(kNone);
                return format("%.1f", 100 * (i["high"].get<double>() - i["low"].get<double>()));
            };
            const json& total = at(r, {"confidence", "units", "contexts", "test"});
            const int64_t all = total.is_number() ? total.get<int64_t>() : 0;
            const int64_t measured = at(exact, {"contexts"}).is_number() ? at(exact, {"contexts"}).get<int64_t>() : all;
            // The widths of its two parts where the results carry them (findings.json always does).
            const std::string widths =
                parts.is_object() ? " (interval width from the prompts alone " + width(at(parts, {"prompts_only"})) +
                                        ", from the replicates alone " + width(at(parts, {"replicates_only"})) + ")"
                                  : std::string();
            wrap("PPO - SFT, test: expected rubric success (exact" +
                     (measured < all ? format(", the first %lld of %lld prompts", static_cast<long long>(measured),
                                              static_cast<long long>(all))
                                     : std::string()) +
                     ") " + interval(exact, 100) + " points" + widths,
                 "  ");
            wrap("PPO - SFT, test: rubric success " + interval(at(d, {"rubric_success"}), 100) +
                     " points, judge score " + interval(at(d, {"learned_score"}), 1) + " (greedy answers)",
                 "  ");
        } else {
            line("  PPO - SFT, test: rubric success " + interval(at(d, {"rubric_success"}), 100) +
                 " points, judge score " + interval(at(d, {"learned_score"}), 1));
        }
        line("  PPO exact KL to SFT, test: " + interval(at(r, {"policies", "ppo", "test", "kl_exact_to_sft"}), 1) +
             " nats per response");
        const json& answer = at(r, {"overoptimisation", "answer", "text"});
        if (answer.is_string()) wrap(answer.get<std::string>(), "  ");
        line("");
        // run --compare: every method against SFT (and PPO) on the same test prompts.
        const json& table = at(r, {"comparison", "table"});
        if (table.is_array()) {
            line("comparison     test prompts, gains over SFT with 95 % intervals (best-of-n: temperature-1 samples)");
            line(format("  %-10s %-22s %-24s %-20s %-21s %s", "method", "gold (rubric, points)", "proxy (judge score)",
                        "exact KL to SFT", "gold - PPO (points)", "train s"));
            for (const json& row : table) {
                const std::string name = at(row, {"policy"}).get<std::string>();
                const json& kl = at(row, {"kl_exact_to_sft"});
                auto unsigned_interval = [&](const json& i) {  // a KL: never negative, no sign
                    if (!at(i, {"mean"}).is_number()) return std::string(kNone);
                    return sig3(at(i, {"mean"})) + " [" + sig3(at(i, {"low"})) + ", " + sig3(at(i, {"high"})) + "]";
                };
                const std::string kl_text =
                    kl.is_object() ? unsigned_interval(kl)
                                   : (at(row, {"kl_bound"}).is_number() ? "<= " + sig3(at(row, {"kl_bound"})) : kNone);
                // Mean training seconds over the replicates (results.json comparison_seconds).
                std::string secs = kNone;
                const json& per = at(r, {"comparison_seconds", "per_replicate", name.c_str()});
                if (per.is_array() && !per.empty()) {
                    double sum = 0;
                    size_t n = 0;
                    for (const json& v : per)
                        if (v.is_number()) sum += v.get<double>(), ++n;
                    if (n == per.size()) secs = format("%.0f", sum / static_cast<double>(n));
                }
                line(format("  %-10s %-22s %-24s %-20s %-21s %s",
                            (name == "bon" ? "bon-" + at(row, {"n"}).dump() : name).c_str(),
                            interval(at(row, {"gold_minus_sft"}), 100).c_str(),
                            interval(at(row, {"proxy_minus_sft"}), 1).c_str(), kl_text.c_str(),
                            interval(at(row, {"gold_minus_ppo"}), 100).c_str(), secs.c_str()));
            }
            const json& best = at(r, {"comparison", "best_gold", "sentence"});
            if (best.is_string()) wrap(best.get<std::string>(), "  ");
            line("");
        }
    }
    const int64_t replicates = at(r, {"replicates"}).is_number() ? at(r, {"replicates"}).get<int64_t>() : 1;
    line(replicates > 1
             ? format("held-out greedy generations (replicate 0 of %lld)", static_cast<long long>(replicates))
             : std::string("held-out greedy generations"));
    line(format("%-6s %-15s %4s %9s %9s %8s %11s %9s %8s", "policy", "population", "rows", "success", "relevant*",
                "judge", "log-ratio**", "exact***", "grammar"));
    const std::vector<std::pair<const char*, const char*>> populations = {
        {"test", "test"}, {"probe_unique_contexts", "probe contexts"}, {"all_unique_contexts", "all contexts"}};
    for (const char* policy : {"sft", "ppo"}) {
        for (const auto& [key, label] : populations) {
            const json& m = at(r, {"actor", policy, key});
            const std::string rows = m.contains("rows") ? std::to_string(m["rows"].get<int64_t>()) : kNone;
            line(format("%-6s %-15s ", policy == std::string("sft") ? "SFT" : "PPO", label) + right(rows, 4) + " " +
                 right(percent(at(m, {"rubric_success_rate_all_outputs"})), 9) + " " +
                 right(percent(at(m, {"relevant_rate_recognized_denominator"})), 9) + " " +
                 right(signed3(at(m, {"mean_learned_reward"})), 8) + " " +
                 right(signed3(at(m, {"mean_sampled_actor_reference_logratio"})), 11) + " " +
                 right(percent(at(m, {"exact", "success"})), 9) + " " +
                 right(percent(at(m, {"exact", "in_grammar"})), 8));
        }
    }
    line("success, relevant, judge (its learned score): of the greedy answers");
    line("*   relevant: of the outputs the rubric recognised, the share whose action fits the context");
    line("**  mean over response tokens of log pi_actor - log pi_SFT (the reference); 0 for SFT itself");
    line("*** expected rubric success under the policy's own distribution, exact over the rubric's 192");
    line("    sentences; grammar: the probability of answering with any of them");
    line("");

    const json& rt = at(r, {"reward_test"});
    if (rt.is_object())
        line(format("judge          %lld of %lld held-out test pairs ranked correctly (accuracy %s)",
                    static_cast<long long>(rt["correct"].get<int64_t>()),
                    static_cast<long long>(rt["pairs"].get<int64_t>()), sig3(rt["accuracy"]).c_str()));
    else line(std::string("judge          ") + kNone + " (no reward-test result)");
    std::string checks = "resume checks ";
    for (const char* s : {"sft", "reward", "ppo"}) {
        const json& c = at(r, {"resume_checks", s});
        checks += std::string(" ") + s + " " + (c.is_string() ? c.get<std::string>() : std::string(kNone));
        if (std::string(s) != "ppo") checks += ",";
    }
    line(checks + "  (resumed vs continuous state, bit for bit)");

    // Minutes per step, in the study's order (results.json "steps").
    double total = 0;
    std::vector<std::string> cells;
    const json& steps = at(r, {"steps"});
    // The steps of a replicate ("replicate-2/ppo-continuous") count as one cell: "replicate 2".
    std::vector<std::pair<std::string, double>> groups;  // NaN: some step finished before an interruption
    if (steps.is_array())
        for (const json& s : steps) {
            const json& v = at(s, {"seconds"});
            if (v.is_number()) total += v.get<double>();
            std::string name = at(s, {"step"}).get<std::string>();
            if (const size_t slash = name.find('/'); slash != std::string::npos) {
                name = name.substr(0, slash);
                name[name.find('-')] = ' ';
            }
            const double secs = v.is_number() ? v.get<double>() : std::nan("");
            if (!groups.empty() && groups.back().first == name) groups.back().second += secs;
            else groups.emplace_back(name, secs);
        }
    for (const auto& [name, secs] : groups)
        cells.push_back(format("%-22s", name.c_str()) +
                        right(std::isfinite(secs) ? format("%.2f", secs / 60) : kNone, 6));
    line(format("minutes        %.2f in all; per step (", total / 60) + kNone + ": finished before an interruption):");
    for (size_t i = 0; i < cells.size(); i += 3) {
        std::string row = "  ";
        for (size_t j = i; j < std::min(i + 3, cells.size()); ++j) row += cells[j] + "   ";
        while (!row.empty() && row.back() == ' ') row.pop_back();
        line(row);
    }
    line("");
    line("results        " + RunLayout{run_root}.results().string());
    line("report         " + RunLayout{run_root}.report_html().string() +
         (at(r, {"seconds"}).contains("report") ? "" : " (not written: this build has no `ppolab report`)"));
    if (at(r, {"scope"}).is_string()) {
        // The scope sentence, wrapped at word boundaries.
        std::string words = at(r, {"scope"}).get<std::string>(), cur;
        size_t pos = 0;
        while (pos < words.size()) {
            size_t next = words.find(' ', pos);
            if (next == std::string::npos) next = words.size();
            const std::string w = words.substr(pos, next - pos);
            if (!cur.empty() && cur.size() + 1 + w.size() >= static_cast<size_t>(kSummaryColumns)) {
                line(cur);
                cur.clear();
            }
            cur += (cur.empty() ? "" : " ") + w;
            pos = next + 1;
        }
        if (!cur.empty()) line(cur);
    }
    return out;
}

}  // namespace ppolab
