// The findings of a study (evaluation/findings.h) on constructed chains:
// the per-context values, the intervals' means against direct
// computations, the paired difference, the verdict, the over-optimisation
// points (relative to SFT, best-of-n by its closed form at n = 1 and n = N),
// and the errors on chains that do not match.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "data/rubric.h"
#include "evaluation/findings.h"
#include "evaluation/overoptimisation_math.h"
#include "util/error.h"
#include "util/json.h"

using namespace ppolab;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("ppolab-test-findings-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

json row(const std::string& population, const std::string& prompt, bool success, bool relevant, double score,
         int tokens, double kl) {
    return {{"population", population},
            {"prompt", prompt},
            {"rubric", {{"rubric_success", success}, {"relevant", relevant}}},
            {"learned_score", score},
            {"response_tokens", tokens},
            {"kl_exact_to_sft", kl}};
}

// Chain k: 4 test prompts; 2 probe contexts of 4 rows. SFT succeeds on
// every test prompt, PPO on none (every context's difference is -1, so
// every resample's is too); PPO's judge score is SFT's + 1 + k.
json scored(const std::string& policy, int k) {
    json rows = json::array();
    const bool ppo = policy == "ppo";
    for (int p = 0; p < 4; ++p)
        rows.push_back(row("test", "t" + std::to_string(p), !ppo, p < 3, p + (ppo ? 1.0 + k : 0.0), 3 + p,
                           ppo ? 0.5 * (p + 1) : 0.0));
    for (int c = 0; c < 2; ++c)
        for (int r = 0; r < 4; ++r)
            rows.push_back(row("probe", "c" + std::to_string(c), c == 0, true, ppo ? 2.0 : 1.0, 4, ppo ? 1.0 : 0.0));
    return {{"rows_detail", rows}};
}

std::vector<RunLayout> write_chains(const fs::path& root, int K) {
    std::vector<RunLayout> chains;
    for (int k = 0; k < K; ++k) {
        RunLayout chain = RunLayout::replicate(root, k, false);
        fs::create_directories(chain.eval());
        for (const std::string policy : {"sft", "ppo"})
            write_json_atomic(chain.eval() / (policy + "-scored.json"), scored(policy, k));
        chains.push_back(chain);
    }
    return chains;
}

// Two snapshots (iteration 0 = SFT, iteration 10) of 2 samples per prompt on
// 2 prompts, and best-of-4 samples per prompt.
json overoptimisation(int k) {
    json snaps = json::array();
    for (int it : {0, 10}) {
        json seqs = json::array();
        for (int p = 0; p < 2; ++p)
            for (int s = 0; s < 2; ++s)
                seqs.push_back({{"prompt", p},
                                {"sample", s},
                                {"kl_exact", it == 0 ? 0.0 : 1.0 + p + 0.1 * k},
                                {"kl_k1", it == 0 ? 0.0 : 0.9 + p},
                                {"proxy", it == 0 ? 0.0 + s : 2.0 + s},
                                {"gold", it == 0 ? s == 0 : false}});
        snaps.push_back({{"iteration", it}, {"sequences", seqs}});
    }
    json bon = json::array();
    for (int p = 0; p < 2; ++p)
        bon.push_back(
            {{"prompt", p}, {"proxy", {0.0, 1.0, 2.0 + 0.5 * k, 3.0 + p}}, {"gold", {true, false, false, p == 0}}});
    return {{"format", "ppolab-overoptimisation"},
            {"prompts", {"t0", "t1"}},
            {"samples_per_prompt", 2},
            {"best_of_n", 4},
            {"snapshots", snaps},
            {"best_of_n_samples", bon}};
}

}  // namespace

TEST(Findings, ChainValuesAverageProbeRowsIntoContexts) {
    const ChainValues v = chain_values(scored("ppo", 1), "fixture");
    ASSERT_EQ(v.prompts[0].size(), 4u);
    ASSERT_EQ(v.prompts[1].size(), 2u);                            // 8 probe rows are 2 contexts
    EXPECT_EQ(v.values[0][0], (std::vector<double>{0, 0, 0, 0}));  // rubric_success per test prompt
    EXPECT_EQ(v.values[0][1], (std::vector<double>{1, 1, 1, 0}));  // relevant
    EXPECT_EQ(v.values[0][2], (std::vector<double>{2, 3, 4, 5}));  // learned_score: p + 2
    EXPECT_EQ(v.values[1][4], (std::vector<double>{4, 4}));        // response_tokens
}

TEST(Findings, MeansDifferencesAndVerdictOnConstructedChains) {
    const fs::path root = temp_dir("held-out");
    const json f = compute_findings(write_chains(root, 3));
    EXPECT_EQ(f["replicates"], 3);
    EXPECT_EQ(f["confidence"]["units"]["contexts"]["test"], 4);
    EXPECT_EQ(f["confidence"]["units"]["contexts"]["probe"], 2);
    // SFT 4/4 on test, PPO 0/4: −100 points in every context (a zero-width interval).
    const json& d = f["ppo_minus_sft"]["test"]["rubric_success"];
    EXPECT_DOUBLE_EQ(d["mean"].get<double>(), -1.0);
    EXPECT_DOUBLE_EQ(d["low"].get<double>(), -1.0);
    EXPECT_DOUBLE_EQ(d["high"].get<double>(), -1.0);
    EXPECT_DOUBLE_EQ(f["policies"]["sft"]["test"]["rubric_success"]["mean"].get<double>(), 1.0);
    // The judge's score rises by 1 + k: mean 2 over k = 0, 1, 2.
    EXPECT_DOUBLE_EQ(f["ppo_minus_sft"]["test"]["learned_score"]["mean"].get<double>(), 2.0);
    EXPECT_GT(f["ppo_minus_sft"]["test"]["learned_score"]["low"].get<double>(), 0.0);
    EXPECT_EQ(f["verdict"]["code"], "exploited");
    EXPECT_NE(f["verdict"]["text"].get<std::string>().find("3 replicates"), std::string::npos) << f["verdict"];
    // Exact KL: mean of 0.5, 1, 1.5, 2 per replicate.
    EXPECT_DOUBLE_EQ(f["policies"]["ppo"]["test"]["kl_exact_to_sft"]["mean"].get<double>(), 1.25);
    EXPECT_EQ(f["overoptimisation"]["missing"].is_string(), true);
    fs::remove_all(root);
}

// Exact measures (exact_gold.h): each test and probe row carries the
// grammar's probabilities; SFT puts 0.9 on the expected action's plain
// sentence, PPO 0.5 − 0.1·k in chain k. `measured` test prompts carry them.
json with_grammar(json scored, const std::string& policy, int k, int measured) {
    const std::vector<ResponseForm> forms = rubric_enumerate();
    int t = 0;
    for (json& r : scored["rows_detail"]) {
        const int expected = 2;
        r["expected_action"] = expected;
        if (r["population"] == "test" && t++ >= measured) continue;
        std::vector<double> p(forms.size(), 0.0);
        for (size_t f = 0; f < forms.size(); ++f)
            if (!forms[f].refusal && forms[f].action == expected && forms[f].caution == 0 && forms[f].opening < 0 &&
                forms[f].closing < 0)
                p[f] = policy == "ppo" ? 0.5 - 0.1 * k : 0.9;
        r["grammar"] = {{"form_p", p}, {"leading_space", 0.0}, {"proxy_in_grammar", policy == "ppo" ? 1.5 : 1.0}};
    }
    return scored;
}

std::vector<RunLayout> write_exact_chains(const fs::path& root, int K, int measured) {
    std::vector<RunLayout> chains;
    for (int k = 0; k < K; ++k) {
        RunLayout chain = RunLayout::replicate(root, k, false);
        fs::create_directories(chain.eval());
        for (const std::string policy : {"sft", "ppo"})
            write_json_atomic(chain.eval() / (policy + "-scored.json"),
                              with_grammar(scored(policy, k), policy, k, measured));
        chains.push_back(chain);
    }
    return chains;
}

TEST(Findings, ExactMeasuresGiveTheVerdictAndTheIntervalParts) {
    const fs::path root = temp_dir("exact");
    const json f = compute_findings(write_exact_chains(root, 3, 4));
    EXPECT_DOUBLE_EQ(f["policies"]["sft"]["test"]["exact_success"]["mean"].get<double>(), 0.9);
    EXPECT_DOUBLE_EQ(f["policies"]["ppo"]["test"]["exact_in_grammar"]["mean"].get<double>(), 0.4);  // 0.5, 0.4, 0.3
    const json& d = f["ppo_minus_sft"]["test"]["exact_success"];
    EXPECT_NEAR(d["mean"].get<double>(), -0.5, 1e-12);
    EXPECT_NEAR(f["ppo_minus_sft"]["test"]["exact_proxy_in_grammar"]["mean"].get<double>(), 0.5, 1e-12);
    // The parts: every context of a chain has the same difference, so resampling
    // the prompts alone gives a zero-width interval; the replicates alone, the spread −0.4 … −0.6.
    const json& parts = f["ppo_minus_sft_parts"]["test"]["exact_success"];
    EXPECT_NEAR(parts["prompts_only"]["low"].get<double>(), -0.5, 1e-12);
    EXPECT_NEAR(parts["prompts_only"]["high"].get<double>(), -0.5, 1e-12);
    EXPECT_NEAR(parts["replicates_only"]["low"].get<double>(), -0.6, 1e-12);
    EXPECT_NEAR(parts["replicates_only"]["high"].get<double>(), -0.4, 1e-12);
    EXPECT_EQ(parts["replicates_only"]["contexts"], 1);
    EXPECT_EQ(f["verdict"]["code"], "exploited");
    EXPECT_NE(f["verdict"]["text"].get<std::string>().find("lowered expected rubric success on test by 50 points"),
              std::string::npos)
        << f["verdict"];
    EXPECT_NE(f["verdict"]["measures"]["gold"].get<std::string>().find("exact_success"), std::string::npos);
    fs::remove_all(root);
}

TEST(Findings, ExactMeasuresOverTheMeasuredPromptsOnly) {
    const fs::path root = temp_dir("exact-subset");
    const json f = compute_findings(write_exact_chains(root, 2, 2));  // 2 of the 4 test prompts
    EXPECT_EQ(f["policies"]["sft"]["test"]["exact_success"]["contexts"], 2);
    EXPECT_DOUBLE_EQ(f["policies"]["sft"]["test"]["exact_success"]["mean"].get<double>(), 0.9);
    EXPECT_EQ(f["policies"]["sft"]["probe"]["exact_success"]["contexts"], 2);
    // Not every test prompt measured exactly: the verdict reads the greedy answers.
    EXPECT_NE(f["verdict"]["text"].get<std::string>().find("PPO lowered rubric success"), std::string::npos)
        << f["verdict"];
    EXPECT_NE(f["verdict"]["measures"]["gold"].get<std::string>().find("greedy"), std::string::npos);
    fs::remove_all(root);
}

TEST(Findings, OveroptimisationPointsRelativeToSft) {
    const fs::path root = temp_dir("overopt");
    // Two chains on two prompts (their scored files need the same two test prompts only for the held-out part).
    std::vector<RunLayout> chains = write_chains(root, 2);
    for (int k = 0; k < 2; ++k) write_json_atomic(chains[k].eval() / "overoptimisation.json", overoptimisation(k));
    const json f = compute_findings(chains);
    const json& o = f["overoptimisation"];
    ASSERT_TRUE(o.contains("snapshots")) << o.dump(1);
    ASSERT_EQ(o["snapshots"].size(), 2u);
    const json& s0 = o["snapshots"][0];
    EXPECT_EQ(s0["kl_exact"]["mean"], 0.0);
    EXPECT_EQ(s0["gold"]["mean"], 0.0);  // relative to itself
    const json& s1 = o["snapshots"][1];
    // KL: per replicate mean over prompts of 1 + p + 0.1k = 1.5 + 0.1k; over k = 0, 1: 1.55.
    EXPECT_NEAR(s1["kl_exact"]["mean"].get<double>(), 1.55, 1e-12);
    EXPECT_NEAR(s1["sqrt_kl"]["mean"].get<double>(), std::sqrt(1.55), 1e-12);
    // Gold: SFT succeeds on 1 of 2 samples, the snapshot on none: −0.5. Proxy: +2.
    EXPECT_NEAR(s1["gold"]["mean"].get<double>(), -0.5, 1e-12);
    EXPECT_NEAR(s1["proxy"]["mean"].get<double>(), 2.0, 1e-12);
    EXPECT_NEAR(s1["gold_absolute"]["mean"].get<double>(), 0.0, 1e-12);
    // Best-of-n: n = 1, 2, 4. At n = 1 the gain is 0; at n = N = 4 the chosen sample is the max proxy's
    // (index 3: gold only for prompt 0) minus the mean gold (1/4 or 1/2).
    const json& bon = o["best_of_n"];
    ASSERT_EQ(bon.size(), 3u);
    EXPECT_EQ(bon[0]["n"], 1);
    EXPECT_EQ(bon[0]["gold"]["mean"], 0.0);
    EXPECT_EQ(bon[2]["n"], 4);
    EXPECT_NEAR(bon[2]["kl_bon"].get<double>(), kl_best_of_n(4), 1e-15);
    // prompt 0: max proxy 3 (gold true), mean gold 2/4 → +0.5; prompt 1: max proxy is 4 (k = 0: 2, 4 → index 3)
    // or (k = 1: 3 vs 4 → index 3), gold false, mean gold 1/4 → −0.25. Mean: +0.125.
    EXPECT_NEAR(bon[2]["gold"]["mean"].get<double>(), 0.125, 1e-12);
    EXPECT_TRUE(o["fits"]["best_of_n"]["gold"].contains("alpha"));
    EXPECT_TRUE(o["answer"]["text"].is_string());
    fs::remove_all(root);
}

// A scored file edited so that a value has another kind than the stage
// writes is refused naming the file, never as an unexplained JSON error.
TEST(Findings, ValuesOfAnotherKindAreRefusedNamingTheFile) {
    const fs::path root = temp_dir("kinds");
    std::vector<RunLayout> chains = write_chains(root, 2);
    for (const char* edit : {"row", "population"}) {
        json bad = scored("ppo", 1);
        if (std::string(edit) == "row") bad["rows_detail"][0] = 5;
        else bad["rows_detail"][0]["population"] = 3;
        write_json_atomic(chains[1].eval() / "ppo-scored.json", bad, Overwrite::replace);
        try {
            compute_findings(chains);
            FAIL() << edit << ": accepted";
        } catch (const Error& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find((chains[1].eval() / "ppo-scored.json").string() +
                             ": a value of another kind than ppolab writes there"),
                      std::string::npos)
                << m;
        }
    }
    fs::remove_all(root);
}

TEST(Findings, ChainsOnDifferentPromptsAreRefused) {
    const fs::path root = temp_dir("mismatch");
    std::vector<RunLayout> chains = write_chains(root, 2);
    json other = scored("ppo", 1);
    other["rows_detail"][0]["prompt"] = "another prompt";
    write_json_atomic(chains[1].eval() / "ppo-scored.json", other, Overwrite::replace);
    try {
        compute_findings(chains);
        FAIL() << "different prompts were accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("ppo-scored.json: its prompts differ"), std::string::npos) << e.what();
    }
    fs::remove(chains[0].eval() / "sft-scored.json");
    try {
        compute_findings(chains);
        FAIL() << "a missing evaluation was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("sft-scored.json: missing"), std::string::npos) << e.what();
    }
    fs::remove_all(root);
}
