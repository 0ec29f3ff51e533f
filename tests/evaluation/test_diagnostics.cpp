// test_diagnostics.cpp — the shortcut diagnostics (evaluation/diagnostics.h):
// Pearson's r against closed forms and numpy (np.corrcoef in float64), the
// undefined cases; the edit distance against a brute-force recursion; every
// edit group on a constructed output; shares, distinct responses and the
// grouped uncertified outputs on a fixture; the whole file on a synthetic
// run folder (deterministic bytes, missing inputs named).
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "data/corpus.h"
#include "evaluation/diagnostics.h"
#include "evaluation/populations.h"
#include "training/oracle_util.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/rng.h"

namespace ppolab {
namespace {

TEST(Diagnostics, PearsonClosedForms) {
    // x = 1..5, y = (2, 4, 5, 4, 5): Sxy = 6, Sxx = 10, Syy = 6, r = 6 / sqrt(60) = sqrt(0.6)
    const Correlation c = pearson({1, 2, 3, 4, 5}, {2, 4, 5, 4, 5}, "x", "y");
    ASSERT_TRUE(c.r.has_value());
    EXPECT_NEAR(*c.r, std::sqrt(0.6), 1e-15);
    EXPECT_EQ(c.n, 5);
    EXPECT_NEAR(*pearson({1, 2, 3}, {5, 7, 9}, "x", "y").r, 1.0, 1e-15);  // y = 2x + 3
    EXPECT_NEAR(*pearson({1, 2, 3}, {3, 2, 1}, "x", "y").r, -1.0, 1e-15);
    // a 0/1 flag: the point-biserial r = (m1 − m0) / s · sqrt(p q), s the population sd
    const std::vector<double> score = {1, 2, 3, 6}, flag = {0, 0, 1, 1};
    const double m = 3, s = std::sqrt((4 + 1 + 0 + 9) / 4.0), m1 = 4.5, m0 = 1.5;
    EXPECT_NEAR(*pearson(score, flag, "score", "flag").r, (m1 - m0) / s * std::sqrt(0.25), 1e-14);
    (void)m;
}

TEST(Diagnostics, PearsonUndefinedSaysWhy) {
    const Correlation c = pearson({1, 2, 3}, {0, 0, 0}, "learned score", "polite flag");
    EXPECT_FALSE(c.r.has_value());
    EXPECT_EQ(c.reason, "constant polite flag (all 3 values are 0)");
    EXPECT_EQ(pearson({4, 4}, {1, 2}, "learned score", "y").reason, "constant learned score (all 2 values are 4)");
    EXPECT_EQ(pearson({1}, {2}, "a", "b").reason, "fewer than 2 outputs (1)");
    const ordered_json j = correlation_to_json(c);
    EXPECT_TRUE(j["r"].is_null());
    EXPECT_EQ(j["reason"], c.reason);
    EXPECT_FALSE(correlation_to_json(pearson({1, 2}, {1, 3}, "a", "b")).contains("reason"));
}

TEST(Diagnostics, PearsonMatchesNumpy) {
    const fs::path dir = test::fresh_temp_dir("diagnostics_pearson");
    Philox rng(20261201, 7);
    json cases = json::array();
    std::vector<std::pair<std::vector<double>, std::vector<double>>> data;
    for (int k = 0; k < 6; ++k) {
        const size_t n = 3 + static_cast<size_t>(k) * 37;
        std::vector<double> x(n), y(n);
        for (size_t i = 0; i < n; ++i) {
            x[i] = k % 2 ? std::floor(rng.uniform() * 40) : rng.normal() * 3 + 100;  // lengths or scores
            y[i] = k == 4 ? (rng.uniform() < 0.3 ? 1.0 : 0.0) : 0.5 * x[i] + rng.normal() * (1 + k);
        }
        cases.push_back({{"x", x}, {"y", y}});
        data.emplace_back(x, y);
    }
    write_json_atomic(dir / "in.json", cases);
    const fs::path script = dir / "pearson.py";
    write_file_atomic(script,
                      "import json, sys\nimport numpy as np\ncases = json.load(open(sys.argv[1]))\n"
                      "out = [float(np.corrcoef(np.array(c['x'], dtype=np.float64), np.array(c['y'], "
                      "dtype=np.float64))[0, 1]) for c in cases]\njson.dump(out, open(sys.argv[2], 'w'))\n");
    test::run_python(script, "'" + (dir / "in.json").string() + "' '" + (dir / "out.json").string() + "'");
    const json want = read_json_file(dir / "out.json");
    ASSERT_EQ(want.size(), data.size());
    for (size_t k = 0; k < data.size(); ++k) {
        const Correlation c = pearson(data[k].first, data[k].second, "x", "y");
        ASSERT_TRUE(c.r.has_value()) << k;
        // both are two-pass float64 sums over ≤ 188 terms: agreement to ~1e-13
        EXPECT_NEAR(*c.r, want[k].get<double>(), 1e-12) << "case " << k;
    }
    fs::remove_all(dir);
}

// Brute force: the recursive definition of the insert/delete distance.
int64_t indel_recursive(const std::string& a, const std::string& b) {
    std::function<int64_t(size_t, size_t)> d = [&](size_t i, size_t j) -> int64_t {
        if (i == 0) return static_cast<int64_t>(j);
        if (j == 0) return static_cast<int64_t>(i);
        if (a[i - 1] == b[j - 1]) return d(i - 1, j - 1);
        return std::min(d(i - 1, j), d(i, j - 1)) + 1;
    };
    return d(a.size(), b.size());
}

TEST(Diagnostics, EditDistanceMatchesTheRecursion) {
    EXPECT_EQ(edit_distance("kitten", "sitting"), 5);  // k→s, e→i as delete + insert, + g
    EXPECT_EQ(edit_distance("", "abc"), 3);
    EXPECT_EQ(edit_distance("abc", "abc"), 0);
    Philox rng(5, 1);
    for (int k = 0; k < 200; ++k) {
        std::string a, b;
        for (int i = int(rng.uniform() * 7); i > 0; --i) a += char('a' + int(rng.uniform() * 3));
        for (int i = int(rng.uniform() * 7); i > 0; --i) b += char('a' + int(rng.uniform() * 3));
        ASSERT_EQ(edit_distance(a, b), indel_recursive(a, b)) << a << " / " << b;
    }
}

TEST(Diagnostics, NearestSentenceIsTheClosestOfAll192) {
    const std::string g = "Thank you for your patience. Resume the print queue. This may help.";
    GrammarMatch m = nearest_grammar_sentence("Thank you for your patience.  Resume the print queue. This may help");
    EXPECT_EQ(m.sentence, g);
    EXPECT_EQ(m.distance, 1);
    // brute force over the grammar: no sentence is closer
    const std::string t = ". This may help";
    m = nearest_grammar_sentence(t);
    for (const ResponseForm& f : rubric_enumerate()) EXPECT_GE(edit_distance(t, response_form_text(f)), m.distance);
    EXPECT_EQ(m.sentence, "Save the document now. This may help.");  // the shortest instruction + the hedge
    EXPECT_EQ(m.distance, 22);                                       // insert "Save the document now" and "."
}

TEST(Diagnostics, EveryEditGroupOnAConstructedOutput) {
    const std::string g = "Thank you for your patience. Resume the print queue. This may help.";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"undecodable bytes", g},  // (decodable false below)
        {"empty output", "  "},
        {"exact sentence", g},
        {"final period dropped", "Thank you for your patience. Resume the print queue. This may help"},
        {"leading punctuation", ". , " + g},
        {"trailing punctuation", g + "!!"},
        {"truncated", "Thank you for your patience. Resume the print"},
        {"start missing", "the print queue. This may help."},
        {"fragment (cut at both ends)", ". Resume the print queue. This may"},
        {"extra words", "Thank you for your patience. Please Resume the print queue. This may really help."},
        {"missing words", "Thank you for patience. Resume the queue. This may help."},
        {"extra characters", "Thank you for your patience. ReResume the print queue. This may help."},
        {"missing characters", "Thank you for your patience. Resume the prnt queue. This may help."},
        {"other", "Thank you for your patience. Resume the print queue. This will help."},
    };
    std::set<std::string> covered;
    for (const auto& [group, text] : cases) {
        EXPECT_EQ(classify_edit(text, g, group != "undecodable bytes"), group) << text;
        covered.insert(group);
    }
    EXPECT_EQ(covered, std::set<std::string>(kEditGroups.begin(), kEditGroups.end())) << "every group has a case";
    // whitespace is normalised as the rubric does before comparing
    EXPECT_EQ(classify_edit("  Thank you for your patience.\n Resume the print queue. This may help ", g),
              "final period dropped");
}

DiagnosticOutput output(const std::string& id, const std::string& text, double score, int64_t tokens,
                        int expected = 0) {
    return DiagnosticOutput{id, text, score, tokens, evaluate_response(text, FinishReason::eos, expected)};
}

TEST(Diagnostics, SharesAndGroupsOnAFixture) {
    const std::vector<DiagnosticOutput> outs = {
        output("a", "Thank you for your patience. Resume the print queue.", 2.0, 12),
        output("b", "Thank you for your patience. Resume the print queue.", 2.0, 12),
        output("c", "Save the document now. This may help.", 0.5, 9),
        output("d", "I cannot help with that request. Have a nice day.", 1.0, 11),
        output("e", "Save the document now. This may help", 1.5, 8),
        output("f", "Renew the login session. This may help", -1.0, 8),
        output("g", "zzz", 0.0, 2),
    };
    const ordered_json j = diagnose_outputs(outs);
    EXPECT_EQ(j["outputs"], 7);
    EXPECT_EQ(j["distinct_responses"], 6);
    EXPECT_EQ(j["polite"]["count"], 3);  // a, b (opening) and d (closing)
    EXPECT_DOUBLE_EQ(j["polite"]["share"].get<double>(), 3.0 / 7);
    EXPECT_EQ(j["actions"]["resume_print_queue"]["count"], 2);
    EXPECT_EQ(j["actions"]["save_document"]["count"], 1);
    EXPECT_EQ(j["actions"]["renew_session"]["count"], 0);
    EXPECT_EQ(j["actions"]["refusal"]["count"], 1);
    EXPECT_EQ(j["actions"]["uncertified (no action)"]["count"], 3);
    EXPECT_EQ(j["uncertified"], 3);
    const ordered_json& groups = j["uncertified_edit_groups"];
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0]["group"], "final period dropped");
    EXPECT_EQ(groups[0]["count"], 2);
    EXPECT_EQ(groups[0]["of"], 3);
    EXPECT_EQ(groups[0]["example"]["id"], "e");  // the first in order
    EXPECT_EQ(groups[0]["example"]["nearest_sentence"], "Save the document now. This may help.");
    EXPECT_EQ(groups[0]["example"]["edit_distance"], 1);
    EXPECT_EQ(groups[1]["group"], "other");
    // correlations: with the polite flag and the lengths, against the same formula in the test
    const std::vector<double> s = {2, 2, 0.5, 1, 1.5, -1, 0}, p = {1, 1, 0, 1, 0, 0, 0}, n = {12, 12, 9, 11, 8, 8, 2};
    EXPECT_DOUBLE_EQ(j["learned_score_correlation"]["polite"]["r"].get<double>(), *pearson(s, p, "", "").r);
    EXPECT_DOUBLE_EQ(j["learned_score_correlation"]["response_tokens"]["r"].get<double>(), *pearson(s, n, "", "").r);
    // a collapsed policy: one answer, every correlation undefined, one group
    const std::vector<DiagnosticOutput> same(5, output("x", ". This may help", 3.0, 5));
    const ordered_json c = diagnose_outputs(same);
    EXPECT_EQ(c["distinct_responses"], 1);
    EXPECT_TRUE(c["learned_score_correlation"]["polite"]["r"].is_null());
    EXPECT_EQ(c["learned_score_correlation"]["response_tokens"]["reason"],
              "constant learned score (all 5 values are 3)");
    ASSERT_EQ(c["uncertified_edit_groups"].size(), 1u);
    EXPECT_EQ(c["uncertified_edit_groups"][0]["group"], "fragment (cut at both ends)");
    EXPECT_EQ(c["uncertified_edit_groups"][0]["count"], 5);
}

// A run folder with a corpus (gold labels), both scored files and two rollout files.
TEST(Diagnostics, WholeFileOnASyntheticRun) {
    const fs::path root = test::fresh_temp_dir("diagnostics_run") / "run";
    fs::create_directories(root);
    corpus_write(corpus_generate(), root / "corpus");
    const RunLayout run{root};
    const GuardedReader reader("test", {root});
    // the files are absent: each group says what is missing
    ordered_json none = shortcut_diagnostics(reader, run);
    EXPECT_EQ(none["groups"]["sft"]["absent"], "no scored held-out rows (eval/sft-scored.json)");
    EXPECT_EQ(none["groups"]["rollouts"]["absent"], "no saved PPO rollouts (ppo/rollouts/continuous)");

    const GoldLabels gold = load_gold(reader, root / "corpus");
    const auto prompts = load_rollout_prompts(reader, root / "corpus");
    const std::string p0 = prompts.at(0).id;
    const int a0 = gold.at(p0).expected_action;
    auto row = [](const std::string& id, const std::string& population, const std::string& prompt,
                  const std::string& text, double score) {
        EvalRow r;
        r.id = id;
        r.family = id.substr(0, id.find('-'));
        r.population = population;
        r.prompt = prompt;
        r.text = text;
        r.response = std::vector<int32_t>(text.size() / 4 + 1, 7);
        r.finish_reason = "eos";
        r.learned_score = score;
        r.expected_action = 0;
        r.verdict = evaluate_response(text, FinishReason::eos, 0);
        return json::parse(eval_row_to_json(r).dump());
    };
    const std::string ok = response_text(0, 1, true);
    for (const char* policy : {"sft", "ppo"}) {
        const bool ppo = std::string(policy) == "ppo";
        json rows = json::array(
            {row("OH001-T0", "test", "p1", ppo ? ". This may help" : ok, ppo ? 3 : 1),
             row("OH002-T0", "test", "p2", ppo ? ". This may help" : response_text(1, 0, false), ppo ? 3 : -1),
             // the 4 rows of a probe context are one case
             row("PROBE01-C0-P0", "probe", "p3", ppo ? ". This may help" : ok, ppo ? 3 : 1),
             row("PROBE01-C0-P1", "probe", "p3", ppo ? ". This may help" : ok, ppo ? 3 : 1)});
        fs::create_directories(root / "eval");
        write_json_atomic(root / "eval" / (std::string(policy) + "-scored.json"), json{{"rows_detail", rows}});
    }
    const fs::path rd = root / "ppo" / "rollouts" / "continuous";
    fs::create_directories(rd);
    auto rollout = [&](const std::string& id, const std::string& text, double score, int tokens) {
        return json{{"rollout_id", id},       {"prompt_id", p0}, {"text", text},
                    {"finish_reason", "eos"}, {"score", score},  {"response_ids", std::vector<int>(size_t(tokens), 3)}};
    };
    write_json_atomic(rd / "iteration-002.json",
                      json{{"iteration", 2}, {"rollouts", {rollout("it2-0", response_text(a0, 1, true) + "!", 2, 9)}}});
    write_json_atomic(rd / "iteration-001.json", json{{"iteration", 1},
                                                      {"rollouts",
                                                       {rollout("it1-0", response_text(a0, 0, false), 0, 5),
                                                        rollout("it1-1", response_text(a0, 0, true), 1, 7)}}});
    write_shortcut_diagnostics(reader, run);
    const std::string bytes = read_file(diagnostics_path(run));
    const json d = read_json_file(diagnostics_path(run));
    EXPECT_EQ(d["format"], "ppolab-diagnostics");
    EXPECT_EQ(d["groups"]["sft"]["outputs"], 3) << "one row per distinct prompt";
    EXPECT_EQ(d["groups"]["sft"]["uncertified"], 0);
    EXPECT_EQ(d["groups"]["sft"]["actions"]["resume_print_queue"]["count"], 2);
    EXPECT_EQ(d["groups"]["sft"]["actions"]["check_unplugged_cable"]["count"], 1);
    EXPECT_NEAR(d["groups"]["sft"]["learned_score_correlation"]["polite"]["r"].get<double>(), 1.0, 1e-15);
    EXPECT_EQ(d["groups"]["ppo"]["distinct_responses"], 1);
    EXPECT_EQ(d["groups"]["ppo"]["uncertified_edit_groups"][0]["count"], 3);
    // rollouts: sorted by file name, scored with gold labels here
    const json& ro = d["groups"]["rollouts"];
    EXPECT_EQ(ro["outputs"], 3);
    EXPECT_EQ(ro["uncertified"], 1);
    EXPECT_EQ(ro["uncertified_edit_groups"][0]["group"], "trailing punctuation");
    EXPECT_EQ(ro["uncertified_edit_groups"][0]["example"]["id"], "it2-0");
    EXPECT_EQ(ro["actions"][action_name(a0)]["count"], 2);
    EXPECT_EQ(ro["polite"]["count"], 1);
    // rerun: the same bytes (replaced, no durations)
    write_shortcut_diagnostics(reader, run);
    EXPECT_EQ(read_file(diagnostics_path(run)), bytes);
    // bad input names the file and the field
    write_json_atomic(rd / "iteration-003.json", json{{"iteration", 3}, {"rollouts", {{{"rollout_id", "x"}}}}});
    try {
        shortcut_diagnostics(reader, run);
        ADD_FAILURE() << "a rollout without text was accepted";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("iteration-003.json"), std::string::npos) << m;
        EXPECT_NE(m.find("text"), std::string::npos) << m;
    }
    fs::remove_all(root.parent_path());
}

TEST(Diagnostics, RolloutsWithoutACorpusAreAbsentNotAnError) {
    const fs::path root = test::fresh_temp_dir("diagnostics_nocorpus") / "run";
    fs::create_directories(root / "ppo" / "rollouts" / "continuous");
    const ordered_json d = shortcut_diagnostics(GuardedReader("test", {root}), RunLayout{root});
    EXPECT_EQ(d["groups"]["rollouts"]["absent"], "no corpus with gold labels (corpus/) to score the rollouts");
    EXPECT_EQ(d["groups"]["ppo"]["absent"], "no scored held-out rows (eval/ppo-scored.json)");
    fs::remove_all(root.parent_path());
}

}  // namespace
}  // namespace ppolab
