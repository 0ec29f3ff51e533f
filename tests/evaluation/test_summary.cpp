// The end-of-run summary (evaluation/summary.h): a fixed-width table with
// the rows SPEC's question needs, under 100 columns, no JSON, "—" for what a
// run did not produce.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "evaluation/summary.h"

using namespace ppolab;

namespace {

ordered_json population(int rows, double success, double relevant, double score, double ratio) {
    return {{"rows", rows},
            {"rubric_success_rate_all_outputs", success},
            {"relevant_rate_recognized_denominator", relevant},
            {"mean_learned_reward", score},
            {"mean_sampled_actor_reference_logratio", ratio}};
}

json results() {
    json r;
    r["study"] = {{"preset", "tiny"}, {"config_sha256", std::string(64, 'a')}};
    r["scope"] =
        "Simulated preferences from a finite rubric; no human study. The learned score is a predicted "
        "simulated-preference score, not human utility.";
    r["resume_checks"] = {{"sft", "PASS"}, {"reward", "PASS"}, {"ppo", "FAIL"}};
    r["reward_test"] = {{"pairs", 180}, {"correct", 179}, {"ties", 0}, {"accuracy", 179.0 / 180}};
    r["actor"]["sft"] = {{"test", population(180, 0.43888, 0.43888, 0.0123456, 0)},
                         {"probe_unique_contexts", population(20, 0.15, 0.15, -0.97, 0)},
                         {"all_unique_contexts", population(200, 0.41, 0.41, -0.0859, 0)}};
    r["actor"]["ppo"] = {{"test", population(180, 0.16667, 0.16667, 1.8812, 0.1734)},
                         {"probe_unique_contexts", population(20, 0.2, 0.2, 0.97, 0.29)},
                         {"all_unique_contexts", population(200, 0.17, 0.17, 1.79, 0.185)}};
    json steps = json::array();
    json seconds = json::object();
    for (const char* s : {"prepare", "pretrain", "sft-interrupt", "sft-continuous", "sft-resume", "resume-check-sft",
                          "reward-interrupt", "evaluate", "exercise", "report"}) {
        steps.push_back({{"step", s}, {"seconds", 6.0}});
        seconds[s] = 6.0;
    }
    steps[1]["seconds"] = nullptr;  // finished before an interruption
    r["steps"] = steps;
    r["seconds"] = seconds;
    return r;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

size_t columns(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // code points
    return n;
}

bool has_line(const std::vector<std::string>& lines, const std::string& prefix, const std::vector<std::string>& cells) {
    for (const std::string& l : lines) {
        if (l.rfind(prefix, 0) != 0) continue;
        bool all = true;
        for (const std::string& c : cells) all = all && l.find(c) != std::string::npos;
        if (all) return true;
    }
    return false;
}

}  // namespace

TEST(StudySummary, IsAFixedWidthTableWithTheRowsNamed) {
    const std::string text = study_summary(results(), "runs/x");
    const auto lines = lines_of(text);
    for (const std::string& l : lines) {
        EXPECT_LT(columns(l), static_cast<size_t>(kSummaryColumns)) << l;
        EXPECT_EQ(l.find('{'), std::string::npos) << "JSON on the terminal: " << l;
        EXPECT_EQ(l.find('"'), std::string::npos) << l;
    }
    EXPECT_TRUE(has_line(lines, "== ppolab study: runs/x (preset tiny)", {})) << text;
    // policy × population rows, three significant figures.
    EXPECT_TRUE(has_line(lines, "SFT    test ", {"180", "43.9 %", "+0.0123", " 0"})) << text;
    EXPECT_TRUE(has_line(lines, "SFT    probe contexts ", {"20", "15.0 %", "-0.970"})) << text;
    EXPECT_TRUE(has_line(lines, "SFT    all contexts ", {"200", "41.0 %", "-0.0859"})) << text;
    EXPECT_TRUE(has_line(lines, "PPO    test ", {"180", "16.7 %", "+1.88", "+0.173"})) << text;
    EXPECT_TRUE(has_line(lines, "PPO    probe contexts ", {"20.0 %", "+0.970", "+0.290"})) << text;
    EXPECT_TRUE(has_line(lines, "PPO    all contexts ", {"200", "17.0 %", "+1.79", "+0.185"})) << text;
    EXPECT_TRUE(has_line(lines, "judge ", {"179 of 180", "accuracy 0.994"})) << text;
    EXPECT_TRUE(has_line(lines, "resume checks ", {"sft PASS", "reward PASS", "ppo FAIL"})) << text;
    EXPECT_TRUE(has_line(lines, "minutes ", {"0.90 in all"})) << text;  // 9 × 6 s; the null step adds nothing
    EXPECT_TRUE(has_line(lines, "  prepare ", {"0.10", "sft-interrupt"})) << text;
    EXPECT_TRUE(has_line(lines, "  prepare ", {"pretrain", "\u2014"})) << text;
    EXPECT_TRUE(has_line(lines, "results ", {"runs/x/results.json"})) << text;
    EXPECT_TRUE(has_line(lines, "report ", {"runs/x/report.html"})) << text;
    EXPECT_FALSE(has_line(lines, "report ", {"not written"})) << text;
    EXPECT_NE(text.find("no human study"), std::string::npos);
    // Steps in the study's order, three to a line.
    EXPECT_LT(text.find("prepare"), text.find("sft-continuous"));
    EXPECT_LT(text.find("sft-continuous"), text.find("evaluate"));
}

TEST(StudySummary, WhatARunDidNotProducePrintsAsADash) {
    json r = results();
    r["actor"].erase("ppo");
    r.erase("reward_test");
    r["seconds"].erase("report");
    const std::string text = study_summary(r, "runs/y");
    const auto lines = lines_of(text);
    EXPECT_TRUE(has_line(lines, "PPO    test ", {"\u2014"})) << text;
    EXPECT_FALSE(has_line(lines, "PPO    test ", {"0 %"})) << text;
    EXPECT_TRUE(has_line(lines, "judge ", {"\u2014"})) << text;
    EXPECT_TRUE(has_line(lines, "report ", {"not written"})) << text;
}

TEST(StudySummary, ThreeSignificantFigures) {
    EXPECT_EQ(sig3(43.888), "43.9");
    EXPECT_EQ(sig3(0.01), "0.0100");
    EXPECT_EQ(sig3(-0.97), "-0.970");
    EXPECT_EQ(sig3(100.0), "100");
    EXPECT_EQ(sig3(0.0), "0");
    EXPECT_EQ(sig3(json()), "\u2014");
}

// A set of replicates: the answer (verdict, PPO − SFT intervals, exact KL,
// the over-optimisation answer) comes first, the held-out table says whose
// chain it shows, and a replicate's steps count as one cell of minutes.
TEST(StudySummary, ReplicatesPrintTheAnswerFirstAndOneCellPerChain) {
    json r = results();
    r["replicates"] = 3;
    r["confidence"]["units"] = {{"replicates", 3}, {"contexts", {{"test", 180}, {"probe", 20}}}};
    r["verdict"] = {{"code", "exploited"},
                    {"text",
                     "PPO lowered rubric success on test by 14 points [\u221222, \u22126] while the judge's score rose "
                     "by 1.8 [1.2, 2.4] (3 replicates \u00d7 180 prompts, 95% intervals): the policy exploited the "
                     "judge"}};
    auto interval = [](double m, double lo, double hi) { return json{{"mean", m}, {"low", lo}, {"high", hi}}; };
    r["ppo_minus_sft"]["test"] = {{"rubric_success", interval(-0.14, -0.22, -0.06)},
                                  {"learned_score", interval(1.8, 1.2, 2.4)}};
    r["policies"]["ppo"]["test"]["kl_exact_to_sft"] = interval(12.5, 10.0, 15.0);
    json steps = json::array();
    for (const char* s : {"prepare", "replicate-0/sft-interrupt", "replicate-0/sft-continuous",
                          "replicate-1/sft-continuous", "findings"})
        steps.push_back({{"step", s}, {"seconds", 60.0}});
    r["steps"] = steps;
    const std::string text = study_summary(r, "runs/x");
    const auto lines = lines_of(text);
    for (const std::string& l : lines) EXPECT_LT(columns(l), static_cast<size_t>(kSummaryColumns)) << l;
    EXPECT_TRUE(has_line(lines, "answer ", {"3 replicate(s) x 180 test prompts"})) << text;
    EXPECT_TRUE(has_line(lines, "  PPO lowered rubric success", {})) << text;
    EXPECT_TRUE(has_line(lines, "  PPO - SFT, test: rubric success ", {"-14.0 [-22.0, -6.00] points", "+1.80"}))
        << text;
    EXPECT_TRUE(has_line(lines, "  PPO exact KL to SFT", {"+12.5 [+10.0, +15.0]"})) << text;
    EXPECT_TRUE(has_line(lines, "held-out greedy generations (replicate 0 of 3)", {})) << text;
    EXPECT_TRUE(has_line(lines, "  prepare ", {"1.00", "replicate 0", "2.00", "replicate 1"})) << text;
    EXPECT_LT(text.find("answer "), text.find("held-out greedy"));

    // With the exact measure: its PPO − SFT and the widths of its two parts
    // first, then the greedy answers', each wrapped under 100 columns; the
    // table's exact and grammar columns.
    r["ppo_minus_sft"]["test"]["exact_success"] = interval(-0.086, -0.150, -0.036);
    r["ppo_minus_sft_parts"]["test"]["exact_success"] = {{"prompts_only", interval(-0.086, -0.100, -0.072)},
                                                         {"replicates_only", interval(-0.086, -0.149, -0.038)}};
    r["actor"]["sft"]["test"]["exact"] = {{"success", 0.327}, {"in_grammar", 0.831}};
    const std::string exact = study_summary(r, "runs/x");
    const auto exact_lines = lines_of(exact);
    for (const std::string& l : exact_lines) EXPECT_LT(columns(l), static_cast<size_t>(kSummaryColumns)) << l;
    EXPECT_TRUE(has_line(exact_lines, "  PPO - SFT, test: expected rubric success (exact) -8.60 [-15.0, -3.60]", {}))
        << exact;
    EXPECT_NE(exact.find("prompts alone 2.8, from the replicates alone 11.1"), std::string::npos) << exact;
    EXPECT_TRUE(has_line(exact_lines, "  PPO - SFT, test: rubric success -14.0", {})) << exact;
    EXPECT_NE(exact.find("(greedy answers)"), std::string::npos) << exact;
    // Measured on the first 6 prompts only (evaluation.exact_prompts): the line says so.
    r["ppo_minus_sft"]["test"]["exact_success"]["contexts"] = 6;
    const std::string subset = study_summary(r, "runs/x");
    EXPECT_NE(subset.find("expected rubric success (exact, the first 6 of 180 prompts)"), std::string::npos) << subset;
    for (const std::string& l : lines_of(subset)) EXPECT_LT(columns(l), static_cast<size_t>(kSummaryColumns)) << l;
    EXPECT_TRUE(has_line(exact_lines, "SFT    test ", {"32.7 %", "83.1 %"})) << exact;
}
