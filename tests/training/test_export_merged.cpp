// `ppolab export merged` on a micro run (base pretrained for two updates,
// SFT for one, made by the ppolab binary): the folder holds exactly
// merge_lora(base, the SFT policy) (model/lora.h, whose numbers
// tests/model/test_lora_peft.cpp checks against transformers), the base's
// tokenizer and generation files and a card naming the policy and its
// learned identity; an existing --out, an unknown policy and a policy the
// run has not trained are refused with errors that say so, and nothing is
// left behind.
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "model/hf_folder.h"
#include "model/lora.h"
#include "support/test_support.h"
#include "training/roles.h"
#include "training/study_config.h"
#include "util/fileio.h"
#include "util/json.h"

using ppolab::test::Output;
using ppolab::test::run_shell;
using namespace ppolab;

namespace {

const fs::path& micro_run() {
    static const fs::path run = [] {
        const fs::path root = fs::temp_directory_path() / ("ppolab_test_export_merged_" + std::to_string(::getpid()));
        fs::remove_all(root);
        fs::create_directories(root);
        const std::string bin = "'" + ppolab::test::ppolab_binary() + "' ";
        const std::string at = " --run '" + (root / "run").string() + "'";
        const auto& steps = ppolab::test::micro_judge_run_steps();
        for (size_t i = 0; i < 3; ++i) {  // prepare, pretrain, sft
            const std::string& step = steps[i];
            const std::string verb = step.substr(0, step.find(' '));
            Output o = run_shell(bin + verb + at + step.substr(verb.size()));
            if (o.rc != 0) ADD_FAILURE() << step << "\n" << o.out;
        }
        return root / "run";
    }();
    return run;
}

Output export_cmd(const std::string& args) {
    return run_shell("'" + ppolab::test::ppolab_binary() + "' export " + args);
}

}  // namespace

TEST(ExportMerged, WritesTheMergedPolicyAndRefusesWhatItShould) {
    ::setenv("PPOLAB_QUIET", "1", 1);
    const fs::path run = micro_run();
    ASSERT_TRUE(fs::exists(run / "sft" / "final"));
    // The stage also left its TensorBoard events (training/tensorboard.h; their format: test_tensorboard).
    EXPECT_TRUE(fs::exists(run / "tensorboard" / "sft" / "continuous" / "events.out.tfevents.0.ppolab"));
    EXPECT_TRUE(fs::exists(run / "tensorboard" / "pretrain" / "run" / "events.out.tfevents.0.ppolab"));
    const fs::path out = run.parent_path() / "merged-sft";
    fs::remove_all(out);
    Output o = export_cmd("merged --run '" + run.string() + "' --policy sft --out '" + out.string() + "'");
    ASSERT_EQ(o.rc, 0) << o.out;
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json", "README.md"})
        EXPECT_TRUE(fs::exists(out / f)) << f;

    // Exactly the base with the SFT policy merged in.
    const Study s =
        Study::open(effective_config("tiny", {}, {}), RunLayout{run}, std::nullopt, "test", StageScope::eval);
    Role sft = load_role(run / "sft" / "final", "sft", RoleKind::policy, s);
    const Qwen2Weights want = merge_lora(s.base, sft.lora);
    const Qwen2Weights got = load_checkpoint(out, WeightType::bf16);
    EXPECT_EQ(base_frozen_identity(got), base_frozen_identity(want));
    EXPECT_NE(base_frozen_identity(got), base_frozen_identity(s.base)) << "the merge changed nothing";
    const std::string card = read_file(out / "README.md");
    EXPECT_NE(card.find(sft.learned_identity()), std::string::npos) << card;
    EXPECT_NE(card.find("## Scope"), std::string::npos) << card;
    EXPECT_NE(card.find("no human study"), std::string::npos) << card;

    // Refusals: the folder stays as it was, nothing half-written beside it.
    const std::string before = read_file(out / "model.safetensors");
    o = export_cmd("merged --run '" + run.string() + "' --policy sft --out '" + out.string() + "'");
    EXPECT_NE(o.rc, 0);
    EXPECT_NE(o.out.find("refusing to overwrite " + out.string()), std::string::npos) << o.out;
    EXPECT_EQ(read_file(out / "model.safetensors"), before);
    o = export_cmd("merged --run '" + run.string() + "' --policy dpo --out '" + out.string() + "2'");
    EXPECT_NE(o.rc, 0);
    EXPECT_NE(o.out.find("--policy: expected sft or ppo, found 'dpo'"), std::string::npos) << o.out;
    o = export_cmd("merged --run '" + run.string() + "' --policy ppo --out '" + out.string() + "2'");
    EXPECT_NE(o.rc, 0);
    EXPECT_NE(o.out.find("the run has no trained ppo policy"), std::string::npos) << o.out;
    o = export_cmd("unmerged --run '" + run.string() + "'");
    EXPECT_NE(o.rc, 0);
    EXPECT_NE(o.out.find("export: expected `ppolab export merged"), std::string::npos) << o.out;
    EXPECT_FALSE(fs::exists(out.string() + "2"));
    for (const auto& e : fs::directory_iterator(run.parent_path()))
        EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
    fs::remove_all(run.parent_path());
}
