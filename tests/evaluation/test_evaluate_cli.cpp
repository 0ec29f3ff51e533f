// Smoke: `ppolab evaluate` and `ppolab exercise` end to end on a micro run
// (prepare; pretrain, SFT, judge and PPO with one or two updates; generation
// capped at 8 tokens): a label file reachable by generation is refused and
// nothing is written; then 260 generations over 200 distinct prompts per
// policy, the 4 probe rows of a context identical, generation files without
// labels, scored files with verdicts, metrics per population; the exercise
// on 80 candidates with the sha256 of the judge; both refuse to overwrite.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>

#include "support/test_support.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/sha256.h"

using ppolab::test::Output;
using ppolab::test::run_shell;
using namespace ppolab;

namespace {}  // namespace

TEST(CmdEvaluate, MicroRunEndToEnd) {
    ::setenv("PPOLAB_QUIET", "1", 1);
    const fs::path root = fs::temp_directory_path() / ("ppolab_test_evaluate_cli_" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root);
    const fs::path run = root / "run";
    const std::string bin = "'" + ppolab::test::ppolab_binary() + "' ", at = " --run '" + run.string() + "'";

    auto steps = [&](const std::vector<std::string>& list) {
        for (const std::string& step : list) {
            const std::string verb = step.substr(0, step.find(' '));
            Output o = run_shell(bin + verb + at + step.substr(verb.size()));
            ASSERT_EQ(o.rc, 0) << step << "\n" << o.out;
        }
    };
    steps({"prepare",
           "pretrain --set max_updates=2 --set pretrain.conversations=400 --set pretrain.prose=50"
           " --set pretrain.check_prompts=6 --set pretrain.check_max_new_tokens=8"});
    const std::string evaluate =
        bin + "evaluate" + at + " --set limits.max_response=8 --set evaluation.exact_prompts=6";

    // 0. development check on the validation prompts before SFT: the base alone, no judge yet
    Output val = run_shell(evaluate + " --population validation");
    ASSERT_EQ(val.rc, 0) << val.out;
    const json vm = read_json_file(run / "eval" / "validation-metrics.json");
    EXPECT_EQ(vm.at("base").at("validation").at("rows"), 180);
    EXPECT_EQ(vm.at("base").at("validation").at("exact").at("rows"), 6);
    EXPECT_TRUE(vm.at("base").at("validation").at("exact").at("proxy_in_grammar").is_null());  // no judge yet
    EXPECT_TRUE(vm.at("base").at("validation").at("mean_learned_reward").is_null());
    EXPECT_FALSE(vm.contains("sft"));
    EXPECT_FALSE(fs::exists(run / "eval" / "sft-generations.json"));

    steps({"sft --set max_updates=1", "reward --set max_updates=1", "ppo --set ppo.iterations=1 --set max_updates=1"});

    // 1. a label file reachable by generation: refused, nothing written
    const fs::path test_prompts = run / "corpus" / "eval" / "test_prompts.jsonl";
    const fs::path saved = root / "test_prompts.jsonl";
    fs::rename(test_prompts, saved);
    fs::create_symlink(fs::path("..") / "gold" / "labels.jsonl", test_prompts);
    Output leak = run_shell(evaluate);
    EXPECT_NE(leak.rc, 0) << leak.out;
    EXPECT_NE(leak.out.find("labels.jsonl"), std::string::npos) << leak.out;
    EXPECT_FALSE(fs::exists(run / "eval" / "sft-generations.json"));
    fs::remove(test_prompts);
    fs::rename(saved, test_prompts);
    // The same run in another folder, for the byte-identity check of step 2.
    const fs::path copy = root / "elsewhere" / "copy";
    fs::create_directories(copy.parent_path());
    fs::copy(run, copy, fs::copy_options::recursive);

    // 2. the evaluation
    Output ev = run_shell(evaluate);
    ASSERT_EQ(ev.rc, 0) << ev.out;
    const json metrics = read_json_file(run / "eval" / "metrics.json");
    for (const char* policy : {"sft", "ppo"}) {
        SCOPED_TRACE(policy);
        const json& m = metrics.at(policy);
        EXPECT_EQ(m.at("test").at("rows"), 180);
        EXPECT_EQ(m.at("probe_rows").at("rows"), 80);
        EXPECT_EQ(m.at("probe_unique_contexts").at("rows"), 20);
        EXPECT_EQ(m.at("all_rows").at("rows"), 260);
        EXPECT_EQ(m.at("all_unique_contexts").at("rows"), 200);
        EXPECT_LE(m.at("all_rows").at("mean_response_tokens_eos_included").get<double>(), 8.0);
        EXPECT_EQ(m.at("all_unique_contexts").at("distinct_prompts"), 200);
        // The exact measure (evaluation.exact_prompts=6): the first 6 distinct prompts of each population.
        EXPECT_EQ(m.at("test").at("exact").at("rows"), 6);
        EXPECT_EQ(m.at("probe_rows").at("exact").at("rows"), 24);  // 6 contexts × 4 rows
        EXPECT_EQ(m.at("probe_unique_contexts").at("exact").at("rows"), 6);
        for (const char* pop : {"test", "probe_rows"}) {
            const json& e = m.at(pop).at("exact");
            const double success = e.at("success"), relevant = e.at("relevant"), in = e.at("in_grammar");
            EXPECT_GE(success, 0.0);
            EXPECT_LE(success, relevant);
            EXPECT_LE(relevant, in);
            EXPECT_LE(in, 1.0);
            EXPECT_TRUE(e.at("proxy_in_grammar").is_number());
        }

        const json gen = read_json_file(run / "eval" / (std::string(policy) + "-generations.json"));
        EXPECT_EQ(gen.at("labels_read"), false);
        // Scoring keeps every row's exact KL (the findings read it from the scored rows).
        const json scored_rows = read_json_file(run / "eval" / (std::string(policy) + "-scored.json"));
        ASSERT_EQ(scored_rows.at("rows_detail").size(), gen.at("rows_detail").size());
        for (size_t i = 0; i < scored_rows.at("rows_detail").size(); ++i)
            EXPECT_EQ(scored_rows.at("rows_detail")[i].at("kl_exact_to_sft"),
                      gen.at("rows_detail")[i].at("kl_exact_to_sft"));
        std::map<std::string, json> probe_response;
        size_t differs_from_reference = 0;  // the SFT forward stands in for the reference only for SFT itself
        for (const json& r : gen.at("rows_detail")) {
            differs_from_reference += r.at("actor_logp") != r.at("reference_logp");
            EXPECT_FALSE(r.contains("expected_action")) << r.at("id");
            EXPECT_FALSE(r.contains("rubric")) << r.at("id");
            EXPECT_LE(r.at("response_ids").size(), 8u);
            if (r.contains("grammar")) {
                EXPECT_EQ(r.at("grammar").at("form_p").size(), 192u);
                EXPECT_TRUE(r.at("grammar").at("proxy_in_grammar").is_number());
            }
            EXPECT_EQ(r.at("actor_logp").size(), r.at("response_ids").size());
            EXPECT_GE(r.at("kl_exact_to_sft").get<double>(), 0.0) << r.at("id");
            if (policy == std::string("sft")) {
                EXPECT_EQ(r.at("actor_logp"), r.at("reference_logp")) << r.at("id");
                EXPECT_EQ(r.at("kl_exact_to_sft").get<double>(), 0.0) << r.at("id");  // the SFT policy against itself
            }
            if (r.at("population") == "probe") {
                auto [it, fresh] = probe_response.emplace(r.at("family").get<std::string>(), r.at("response_ids"));
                if (!fresh) {
                    EXPECT_EQ(it->second, r.at("response_ids")) << r.at("id");
                }
            }
        }
        EXPECT_EQ(probe_response.size(), 20u);
        if (policy == std::string("ppo")) {
            EXPECT_GT(differs_from_reference, 0u);
        }
        const json scored = read_json_file(run / "eval" / (std::string(policy) + "-scored.json"));
        ASSERT_EQ(scored.at("rows_detail").size(), 260u);
        for (const json& r : scored.at("rows_detail")) {
            ASSERT_TRUE(r.contains("rubric")) << r.at("id");
            EXPECT_GE(r.at("expected_action").get<int>(), 0);
            EXPECT_TRUE(r.contains("text"));
            EXPECT_TRUE(r.contains("finish_reason"));
        }
    }
    EXPECT_DOUBLE_EQ(metrics.at("sft").at("all_rows").at("mean_sampled_actor_reference_logratio").get<double>(), 0.0);
    // No durations and no absolute path in the hashed files: evaluating the
    // copy in another folder writes them byte for byte the same (and
    // results.json records their sha256); the durations are in timings.json.
    Output ev_copy = run_shell(bin + "evaluate --run '" + copy.string() +
                               "' --set limits.max_response=8 --set evaluation.exact_prompts=6");
    ASSERT_EQ(ev_copy.rc, 0) << ev_copy.out;
    for (const char* name : {"sft-generations.json", "ppo-generations.json", "sft-scored.json", "ppo-scored.json",
                             "metrics.json", "validation-base-generations.json", "validation-metrics.json"}) {
        SCOPED_TRACE(name);
        const std::string text = read_file(run / "eval" / name);
        EXPECT_EQ(text.find(root.string()), std::string::npos);
        std::vector<std::string> keys;
        std::function<void(const json&)> walk = [&](const json& j) {
            if (j.is_object())
                for (auto it = j.begin(); it != j.end(); ++it) {
                    if (it.key().find("seconds") != std::string::npos) keys.push_back(it.key());
                    walk(it.value());
                }
            if (j.is_array())
                for (const json& v : j) walk(v);
        };
        walk(json::parse(text));
        EXPECT_TRUE(keys.empty()) << keys.front();
        if (std::string(name).rfind("validation-", 0) == 0) continue;  // made before the copy
        EXPECT_EQ(sha256_hex(text), sha256_file(copy / "eval" / name));
    }
    // The validation check of trained policies (the sweeps' step): base, SFT
    // and PPO, each reading back the judge's grammar scores the first wrote.
    for (const auto& entry : fs::directory_iterator(copy / "eval"))
        if (entry.path().filename().string().rfind("validation-", 0) == 0) fs::remove(entry.path());
    Output val_trained = run_shell(bin + "evaluate --run '" + copy.string() +
                                   "' --population validation --set limits.max_response=8"
                                   " --set evaluation.exact_prompts=6");
    ASSERT_EQ(val_trained.rc, 0) << val_trained.out;
    const json vt = read_json_file(copy / "eval" / "validation-metrics.json");
    for (const char* policy : {"base", "sft", "ppo"}) {
        SCOPED_TRACE(policy);
        EXPECT_EQ(vt.at(policy).at("validation").at("exact").at("rows"), 6);
        EXPECT_TRUE(vt.at(policy).at("validation").at("exact").at("proxy_in_grammar").is_number());
    }
    EXPECT_TRUE(fs::exists(copy / "eval" / "validation-judge-grammar.json"));
    const json gen = read_json_file(run / "eval" / "sft-generations.json");
    EXPECT_EQ(gen.at("identity").at("readable_roots"),
              json::array({"corpus/eval", "corpus/manifest.json", "base", "sft", "reward", "ppo", "dpo", "rloo", "grpo",
                           "ppo-whiten", "ppo-vclip", "ppo-k3", "eval"}));
    const json timings = read_json_file(run / "eval" / "timings.json");
    for (const char* step : {"sft", "ppo"}) {
        EXPECT_GE(timings.at(step).at("generation_seconds").get<double>(), 0.0) << step;
        EXPECT_GE(timings.at(step).at("scoring_seconds").get<double>(), 0.0) << step;
        EXPECT_GE(timings.at(step).at("seconds").get<double>(), 0.0) << step;
    }
    EXPECT_GE(timings.at("score").at("seconds").get<double>(), 0.0);
    EXPECT_TRUE(read_json_file(run / "eval" / "validation-timings.json").contains("base"));
    Output again = run_shell(evaluate);
    EXPECT_NE(again.rc, 0);
    EXPECT_NE(again.out.find("refusing to overwrite"), std::string::npos) << again.out;

    // 3. the exercise
    const std::string judge_sha = sha256_file(run / "reward" / "final" / "learned.safetensors");
    Output ex = run_shell(bin + "exercise" + at);
    ASSERT_EQ(ex.rc, 0) << ex.out;
    const json e = read_json_file(run / "exercise.json");
    EXPECT_EQ(e.at("summary").at("contexts"), 20);
    EXPECT_EQ(e.at("summary").at("candidates"), 80);
    EXPECT_EQ(e.at("summary").at("per_context").size(), 20u);
    EXPECT_EQ(e.at("judge_learned_sha256").at("before"), judge_sha);
    EXPECT_EQ(e.at("judge_learned_sha256").at("after"), judge_sha);
    EXPECT_EQ(e.at("artefact_sha256").at("reward/final/learned.safetensors"), judge_sha);
    EXPECT_EQ(e.at("artefact_sha256").at("eval/metrics.json"), sha256_file(run / "eval" / "metrics.json"));
    int64_t outranks = 0;
    for (const json& c : e.at("summary").at("per_context")) {
        const json& s = c.at("scores");
        EXPECT_DOUBLE_EQ(c.at("correct_politeness_delta").get<double>(),
                         s.at("correct_polite").get<double>() - s.at("correct_plain").get<double>());
        outranks += s.at("wrong_polite").get<double>() > s.at("correct_plain").get<double>();
    }
    EXPECT_EQ(e.at("summary").at("wrong_polite_outranks_correct_plain_contexts"), outranks);
    EXPECT_EQ(e.at("wrong_polite_outranks_correct_plain"), outranks);
    EXPECT_EQ(e.at("contexts"), 20);
    EXPECT_EQ(e.at("base_checkpoint_sha256").at("before"), e.at("base_checkpoint_sha256").at("after"));
    Output ex2 = run_shell(bin + "exercise" + at);
    EXPECT_NE(ex2.rc, 0);
    fs::remove_all(root);
}
