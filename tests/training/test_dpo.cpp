// `ppolab dpo` on a micro run (base pretrained for two updates, SFT for one,
// made by the ppolab binary): the three modes and `resume-check dpo` prove
// exact resume bit for bit; the first update starts from π = ρ (the policy is
// the SFT adapters, the reference the frozen SFT), so every margin is 0 and
// the loss log 2; the policy learns (its adapters change, the reference's
// and the base's do not), the report carries the implicit rewards and the
// validation (never used for selection), final/ holds the policy in both
// layouts, and a finished mode is never overwritten.
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

// Two epochs of 4 updates (840 pairs, 256 a group), interrupted after the first.
const std::string kDpoSets = " --set dpo.pairs_per_update=256";

struct MicroRun {
    fs::path run;
    std::string bin, at;
};

const MicroRun& micro_run() {
    static const MicroRun m = [] {
        const fs::path root = fs::temp_directory_path() / ("ppolab_test_dpo_" + std::to_string(::getpid()));
        fs::remove_all(root);
        fs::create_directories(root);
        MicroRun r{root / "run", "'" + ppolab::test::ppolab_binary() + "' ",
                   " --run '" + (root / "run").string() + "'"};
        const auto& steps = ppolab::test::micro_judge_run_steps();
        for (size_t i = 0; i < 3; ++i) {  // prepare, pretrain, sft
            const std::string& step = steps[i];
            const std::string verb = step.substr(0, step.find(' '));
            Output o = run_shell(r.bin + verb + r.at + step.substr(verb.size()));
            if (o.rc != 0) ADD_FAILURE() << step << "\n" << o.out;
        }
        return r;
    }();
    return m;
}

}  // namespace

TEST(Dpo, ThreeModesResumeBitwiseAndLearnFromTheReference) {
    ::setenv("PPOLAB_QUIET", "1", 1);
    const MicroRun& m = micro_run();
    for (const char* mode : {"interrupt", "continuous", "resume"}) {
        Output o = run_shell(m.bin + "dpo" + m.at + " --mode " + mode + kDpoSets);
        ASSERT_EQ(o.rc, 0) << mode << "\n" << o.out;
    }
    Output check = run_shell(m.bin + "resume-check dpo" + m.at);
    EXPECT_EQ(check.rc, 0) << check.out;
    EXPECT_EQ(read_json_file(m.run / "dpo" / "resume-check.json")["status"], "PASS");

    const json interrupt = read_json_file(m.run / "dpo" / "interrupt.json");
    const json r = read_json_file(m.run / "dpo" / "continuous.json");
    EXPECT_EQ(interrupt["updates"], 4);
    EXPECT_EQ(r["updates"], 8);
    EXPECT_EQ(r["epochs_completed"], 2);
    EXPECT_EQ(r["history"][0]["denominator_kind"], "pairs");
    // Update 1: the policy is still the reference, so π = ρ on every pair.
    const json& first = r["history"][0];
    EXPECT_NEAR(first["loss"].get<double>(), std::log(2.0), 1e-6);
    ASSERT_EQ(first["rows"].size(), 256u);
    for (const json& row : first["rows"]) {
        EXPECT_NEAR(row["margin"].get<double>(), 0.0, 1e-6) << row.dump();
        EXPECT_NEAR(row["chosen_reward"].get<double>(), 0.0, 1e-6) << row.dump();
    }
    // Later updates: the implicit rewards move, and the loss with them.
    const json& last = r["history"].back();
    double spread = 0;
    for (const json& row : last["rows"]) spread = std::max(spread, std::fabs(row["margin"].get<double>()));
    EXPECT_GT(spread, 1e-4) << "the policy never left the reference";
    EXPECT_NE(last["loss"].get<double>(), first["loss"].get<double>());
    for (const json& v : r["validation_history"]) {
        EXPECT_EQ(v["pairs"], 180);
        EXPECT_EQ(v["used_for_selection"], false);
        for (const char* k : {"loss", "reward_accuracy", "mean_margin", "mean_chosen_reward", "mean_rejected_reward"})
            EXPECT_TRUE(v[k].is_number()) << k;
    }

    // Roles: the policy starts as SFT and changes; the reference is the frozen SFT.
    const Study s = Study::open(effective_config("tiny", {}, {"dpo.pairs_per_update=256"}), RunLayout{m.run},
                                std::nullopt, "test", StageScope::learn);  // the learning stages read dpo/
    Role sft = load_role(m.run / "sft" / "final", "sft", RoleKind::policy, s);
    EXPECT_EQ(r["initial_learned_identity"], sft.learned_identity());
    EXPECT_EQ(r["identity"]["data"]["reference_learned_identity"], sft.learned_identity());
    EXPECT_NE(r["final_learned_identity"], sft.learned_identity());
    EXPECT_EQ(r["frozen_base_unchanged"], true);
    Role dpo = load_role(m.run / "dpo" / "final", "dpo", RoleKind::policy, s);
    EXPECT_EQ(dpo.learned_identity(), r["final_learned_identity"]);
    EXPECT_TRUE(fs::exists(m.run / "dpo" / "final" / "peft" / "adapter_config.json"));
    EXPECT_TRUE(fs::exists(m.run / "tensorboard" / "dpo" / "continuous"));

    // A finished mode is never overwritten.
    Output again = run_shell(m.bin + "dpo" + m.at + " --mode continuous" + kDpoSets);
    EXPECT_NE(again.rc, 0);
    EXPECT_NE(again.out.find("refusing to overwrite"), std::string::npos) << again.out;
    EXPECT_EQ(read_json_file(m.run / "dpo" / "continuous.json"), r);
}

// DPO needs the SFT policy it starts from (and compares with).
TEST(Dpo, RefusesARunWithoutSft) {
    ::setenv("PPOLAB_QUIET", "1", 1);
    const MicroRun& m = micro_run();
    const fs::path other = m.run.parent_path() / "no-sft";
    fs::remove_all(other);
    fs::create_directories(other);
    fs::copy(m.run / "corpus", other / "corpus", fs::copy_options::recursive);
    fs::copy(m.run / "base", other / "base", fs::copy_options::recursive);
    Output o = run_shell(m.bin + "dpo --run '" + other.string() + "' --mode continuous" + kDpoSets);
    EXPECT_NE(o.rc, 0);
    EXPECT_NE(o.out.find("dpo: no SFT policy at " + (other / "sft" / "final").string()), std::string::npos) << o.out;
    EXPECT_FALSE(fs::exists(other / "dpo" / "continuous.json"));
}
