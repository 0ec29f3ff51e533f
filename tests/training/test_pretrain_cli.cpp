// Smoke: `ppolab pretrain` end to end on the tiny shape with two updates —
// --run (reads RUN/corpus/manifest.json), the folder loads, pretrain.json
// has its fields, and the refusals write nothing.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/hf_folder.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/json.h"

using ppolab::test::Output;
using ppolab::test::run_shell;
using namespace ppolab;

namespace {

// Small enough for seconds: 2 updates, a 400-conversation corpus, 6 check prompts.
const char* kSmall =
    " --set max_updates=2 --set pretrain.conversations=400 --set pretrain.prose=50"
    " --set pretrain.check_prompts=6 --set pretrain.check_max_new_tokens=8";

}  // namespace

TEST(CmdPretrain, RunFolderThenRefusals) {
    ::setenv("PPOLAB_QUIET", "1", 1);
    const fs::path root = fs::temp_directory_path() / ("ppolab_test_pretrain_cli_" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root);
    const fs::path run = root / "run";
    const std::string bin = "'" + ppolab::test::ppolab_binary() + "'";

    Output prep = run_shell(bin + " prepare --run '" + run.string() + "'");
    ASSERT_EQ(prep.rc, 0) << prep.out;
    Output r = run_shell(bin + " pretrain --run '" + run.string() + "'" + kSmall);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("greedy"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("sampled_temperature_1"), std::string::npos) << r.out;

    const fs::path base = run / "base";
    const Qwen2Weights w = load_checkpoint(base);
    const Tokenizer tok = Tokenizer::from_file(base);
    EXPECT_EQ(w.config.hidden_size, 256);
    EXPECT_EQ(w.config.num_hidden_layers, 4);
    EXPECT_EQ(w.config.eos_token_id, tok.token_to_id("<|im_end|>"));
    const json j = read_json_file(base / "pretrain.json");
    EXPECT_EQ(j.at("training").at("updates"), 2);
    EXPECT_EQ(j.at("training").at("loss_curve").size(), 2u);
    EXPECT_EQ(j.at("check").at("greedy").at("n"), 6);
    EXPECT_EQ(j.at("provenance").at("corpus"), (run / "corpus" / "manifest.json").string());
    EXPECT_EQ(j.at("config").at("conversations"), 400);
    EXPECT_EQ(j.at("config").at("system_prompt"), "You are an office help-desk assistant.");  // the tiny preset's line
    EXPECT_EQ(j.at("model").at("checkpoint_sha256"), checkpoint_sha256(base));

    // Refusals: an existing folder (unchanged), both --out and --run, an unknown key.
    const std::string before = checkpoint_sha256(base);
    Output again = run_shell(bin + " pretrain --run '" + run.string() + "'" + kSmall);
    EXPECT_NE(again.rc, 0);
    EXPECT_NE(again.out.find("refusing to overwrite existing folder"), std::string::npos) << again.out;
    EXPECT_EQ(checkpoint_sha256(base), before);
    Output both = run_shell(bin + " pretrain --run '" + run.string() + "' --out '" + (root / "x").string() + "'");
    EXPECT_NE(both.rc, 0);
    EXPECT_NE(both.out.find("not both"), std::string::npos) << both.out;
    Output typo = run_shell(bin + " pretrain --out '" + (root / "y").string() + "' --set pretrain.colour=1");
    EXPECT_NE(typo.rc, 0);
    EXPECT_NE(typo.out.find("colour"), std::string::npos) << typo.out;
    EXPECT_FALSE(fs::exists(root / "x"));
    EXPECT_FALSE(fs::exists(root / "y"));
    int entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(root)) ++entries;
    EXPECT_EQ(entries, 1);  // only run/
    fs::remove_all(root);
}
