// `ppolab rloo` and `ppolab grpo` on a micro run (base pretrained for two
// updates, SFT and judge for one each, made by the ppolab binary): the three
// modes and `resume-check rloo` prove exact resume bit for bit; every
// response's reward and advantage is recomputed here from the rollout files
// (the judge's score and the per-token log-probs they hold) by the closed
// forms of ppo_math.h 10–11, each group is k answers to one prompt; the
// policy learns, the reference (the frozen SFT) and the judge do not; a
// finished mode is never overwritten; a group of one and a run without a
// judge are refused with the key or the missing folder named.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <string>

#include "support/test_support.h"
#include "training/roles.h"
#include "training/study_config.h"
#include "util/fileio.h"
#include "util/json.h"

using ppolab::test::Output;
using ppolab::test::run_shell;
using namespace ppolab;

namespace {

// 3 iterations of 2 prompts × 4 answers of at most 24 tokens, 2 updates
// each; the interrupt after the first; a checkpoint after every iteration.
const std::string kRlSets =
    " --set rl.iterations=3 --set rl.interrupt_iteration=1 --set rl.prompts_per_iteration=2"
    " --set limits.max_response=24 --set checkpoint.every_iterations=1";

struct MicroRun {
    fs::path run;
    std::string bin, at;
    ~MicroRun() {  // at exit: the folder goes with the test process
        std::error_code ec;
        if (!run.empty()) fs::remove_all(run.parent_path(), ec);
    }
};

const MicroRun& micro_run() {
    static const MicroRun m = [] {
        const fs::path root = fs::temp_directory_path() / ("ppolab_test_rl_" + std::to_string(::getpid()));
        fs::remove_all(root);
        fs::create_directories(root);
        MicroRun r{root / "run", "'" + ppolab::test::ppolab_binary() + "' ",
                   " --run '" + (root / "run").string() + "'"};
        for (const std::string& step : ppolab::test::micro_judge_run_steps()) {  // prepare … reward
            const std::string verb = step.substr(0, step.find(' '));
            Output o = run_shell(r.bin + verb + r.at + step.substr(verb.size()));
            if (o.rc != 0) ADD_FAILURE() << step << "\n" << o.out;
        }
        return r;
    }();
    return m;
}

double terminal_reward(const json& rollout) {  // the tiny preset: replace, −1
    return rollout["finish_reason"] == "eos" ? rollout["score"].get<double>() : -1.0;
}

// Every rollout file of `dir`: R_i and A_i recomputed from what the file
// holds, groups of k answers to one prompt.
void check_rollout_files(const fs::path& dir, int64_t iterations, const std::string& advantage) {
    const double beta = 0.02;
    for (int64_t it = 1; it <= iterations; ++it) {
        char name[32];
        std::snprintf(name, sizeof name, "iteration-%03lld.json", static_cast<long long>(it));
        const json f = read_json_file(dir / name);
        const json& rs = f["rollouts"];
        ASSERT_EQ(rs.size(), 8u) << name;
        for (size_t g = 0; g < 2; ++g) {
            std::vector<double> R;
            for (size_t j = 0; j < 4; ++j) {
                const json& r = rs[g * 4 + j];
                EXPECT_EQ(r["group"], g);
                EXPECT_EQ(r["prompt_id"], rs[g * 4]["prompt_id"]) << "a group answers one prompt";
                EXPECT_EQ(r["rollout_id"],
                          "iteration-" + std::string(name).substr(10, 3) + "-slot-" + std::to_string(g * 4 + j));
                double logratio = 0;
                for (const json& t : r["tokens"])
                    logratio += static_cast<double>(t["old_logp"].get<float>() - t["ref_logp"].get<float>());
                EXPECT_NEAR(r["sampled_logratio_sum"].get<double>(), logratio, 1e-9);
                const double want = terminal_reward(r) - beta * logratio;
                EXPECT_NEAR(r["sequence_reward"].get<double>(), want, 1e-9) << name << " slot " << g * 4 + j;
                R.push_back(r["sequence_reward"].get<double>());
            }
            const double sum = R[0] + R[1] + R[2] + R[3], mean = sum / 4;
            double sq = 0;
            for (double x : R) sq += (x - mean) * (x - mean);
            const double sd = std::sqrt(sq / 3);
            for (size_t j = 0; j < 4; ++j) {
                const double want = advantage == "rloo" ? R[j] - (sum - R[j]) / 3 : (R[j] - mean) / (sd + 1e-4);
                EXPECT_NEAR(rs[g * 4 + j]["advantage"].get<double>(), want, 1e-12) << name << " slot " << g * 4 + j;
            }
        }
    }
}

}  // namespace

TEST(Rloo, ThreeModesResumeBitwiseAndEveryAdvantageByHand) {
    ::setenv("PPOLAB_QUIET", "1", 1);
    const MicroRun& m = micro_run();
    for (const char* mode : {"interrupt", "continuous", "resume"}) {
        Output o = run_shell(m.bin + "rloo" + m.at + " --mode " + mode + kRlSets);
        ASSERT_EQ(o.rc, 0) << mode << "\n" << o.out;
    }
    Output check = run_shell(m.bin + "resume-check rloo" + m.at);
    EXPECT_EQ(check.rc, 0) << check.out;
    EXPECT_EQ(read_json_file(m.run / "rloo" / "resume-check.json")["status"], "PASS");

    const json r = read_json_file(m.run / "rloo" / "continuous.json");
    EXPECT_EQ(r["iterations"], 3);
    EXPECT_EQ(r["updates"], 6);
    EXPECT_EQ(r["responses"], 24);
    EXPECT_EQ(r["identity"]["advantage"], "rloo");
    EXPECT_EQ(read_json_file(m.run / "rloo" / "interrupt.json")["iterations"], 1);
    EXPECT_EQ(read_json_file(m.run / "rloo" / "resume.json")["iterations_this_run"], 2);
    check_rollout_files(m.run / "rloo" / "rollouts" / "continuous", 3, "rloo");
    // The metrics are the rollouts' means; leave-one-out advantages sum to 0 in a group.
    const json first = read_json_file(m.run / "rloo" / "rollouts" / "continuous" / "iteration-001.json");
    double score = 0, reward = 0, adv = 0;
    for (const json& ro : first["rollouts"]) {
        score += terminal_reward(ro) / 8;
        reward += ro["sequence_reward"].get<double>() / 8;
        adv += ro["advantage"].get<double>();
    }
    EXPECT_NEAR(adv, 0.0, 1e-9);
    const json& h = r["history"][0];
    EXPECT_NEAR(h["objective/scores"].get<double>(), score, 1e-12);
    EXPECT_NEAR(h["objective/rlhf_reward"].get<double>(), reward, 1e-12);
    // Update 1 runs on the sampling policy: ratio ≈ 1, so the surrogate ≈ −mean A = 0.
    double max_abs_adv = 0;
    for (const json& ro : first["rollouts"])
        max_abs_adv = std::max(max_abs_adv, std::fabs(ro["advantage"].get<double>()));
    EXPECT_LT(std::fabs(h["updates"][0]["loss_policy"].get<double>()), 0.05 * max_abs_adv + 1e-9);
    const std::string metrics = read_file(m.run / "rloo" / "continuous.metrics.jsonl");
    EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 3);

    // Roles: the policy starts as SFT and changes; the reference is the frozen SFT, the judge frozen.
    const Study s = Study::open(effective_config("tiny", {}, {}), RunLayout{m.run}, std::nullopt, "test",
                                StageScope::learn);  // the learning stages read rloo/
    Role sft = load_role(m.run / "sft" / "final", "sft", RoleKind::policy, s);
    Role judge = load_role(m.run / "reward" / "final", "reward", RoleKind::reward, s);
    EXPECT_EQ(r["identity"]["sft_learned_identity"], sft.learned_identity());
    EXPECT_EQ(r["final_learned"]["reference"], sft.learned_identity());
    EXPECT_EQ(r["final_learned"]["reward"], judge.learned_identity());
    EXPECT_NE(r["final_learned"]["policy"], sft.learned_identity());
    Role learned = load_role(m.run / "rloo" / "final" / "actor", "rloo", RoleKind::policy, s);
    EXPECT_EQ(learned.learned_identity(), r["final_learned"]["policy"]);
    EXPECT_TRUE(fs::exists(m.run / "rloo" / "final" / "actor" / "peft" / "adapter_config.json"));

    // A finished mode is never overwritten.
    Output again = run_shell(m.bin + "rloo" + m.at + " --mode continuous" + kRlSets);
    EXPECT_NE(again.rc, 0);
    EXPECT_NE(again.out.find("refusing to overwrite"), std::string::npos) << again.out;
    EXPECT_EQ(read_json_file(m.run / "rloo" / "continuous.json"), r);
}

TEST(Grpo, GroupNormalisedAdvantagesInItsOwnFolder) {
    ::setenv("PPOLAB_QUIET", "1", 1);
    const MicroRun& m = micro_run();
    Output o = run_shell(m.bin + "grpo" + m.at + " --mode continuous" + kRlSets + " --set rl.iterations=2");
    ASSERT_EQ(o.rc, 0) << o.out;
    const json r = read_json_file(m.run / "grpo" / "continuous.json");
    EXPECT_EQ(r["stage"], "grpo");
    EXPECT_EQ(r["identity"]["advantage"], "grpo");
    check_rollout_files(m.run / "grpo" / "rollouts" / "continuous", 2, "grpo");
    EXPECT_TRUE(fs::exists(m.run / "grpo" / "final" / "actor" / "learned.safetensors"));
}

TEST(Rloo, AGroupOfOneAndARunWithoutAJudgeAreRefused) {
    ::setenv("PPOLAB_QUIET", "1", 1);
    const MicroRun& m = micro_run();
    Output one = run_shell(m.bin + "rloo" + m.at + " --mode continuous --set rl.samples_per_prompt=1");
    EXPECT_NE(one.rc, 0);
    EXPECT_NE(one.out.find("rl.samples_per_prompt"), std::string::npos) << one.out;
    EXPECT_NE(one.out.find(">= 2"), std::string::npos) << one.out;

    const fs::path other = m.run.parent_path() / "no-judge";
    fs::remove_all(other);
    fs::create_directories(other);
    for (const char* d : {"corpus", "base", "sft"}) fs::copy(m.run / d, other / d, fs::copy_options::recursive);
    Output o = run_shell(m.bin + "rloo --run '" + other.string() + "' --mode continuous" + kRlSets);
    EXPECT_NE(o.rc, 0);
    EXPECT_NE(o.out.find("rloo: no judge at " + (other / "reward" / "final").string()), std::string::npos) << o.out;
    EXPECT_FALSE(fs::exists(other / "rloo" / "continuous.json"));
}
