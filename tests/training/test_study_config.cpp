#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <set>

#include "oracle_util.h"
#include "support/test_support.h"
#include "training/study_config.h"
#include "util/error.h"

using ppolab::test::error_of;
using namespace ppolab;

namespace {

void key_paths(const json& v, const std::string& prefix, std::set<std::string>& out) {
    if (!v.is_object()) return;
    for (auto& [k, x] : v.items()) {
        out.insert(prefix + k);
        key_paths(x, prefix + k + ".", out);
    }
}

}  // namespace

TEST(StudyConfig, PresetsExistAndShareOneStructure) {
    EXPECT_EQ(preset_names(), (std::vector<std::string>{"generic", "seed", "tiny"}));
    std::set<std::string> seed_keys;
    key_paths(preset_config("seed"), "", seed_keys);
    EXPECT_GT(seed_keys.size(), 60u);
    for (const std::string& name : preset_names()) {
        json c = preset_config(name);
        EXPECT_EQ(c["preset"], name);
        std::set<std::string> keys;
        key_paths(c, "", keys);
        EXPECT_EQ(keys, seed_keys) << name << " must have the seed preset's keys";
        EXPECT_EQ(config_identity(c)["corpus_revision"], "OfficeHelpPrefs-v1");
    }
    std::string m = error_of([] { preset_config("tiny2"); });
    EXPECT_NE(m.find("'tiny2'"), std::string::npos) << m;
    EXPECT_NE(m.find("generic, seed, tiny"), std::string::npos) << m;
}

TEST(StudyConfig, SeedPresetHoldsTheSpecNumbers) {
    const json c = preset_config("seed");
    // SPEC §1
    EXPECT_EQ(config_int(c, "corpus.seed"), 49);
    EXPECT_EQ(config_string(c, "corpus.revision"), "OfficeHelpPrefs-v1");
    EXPECT_EQ(config_string(c, "corpus.study_revision"), "r001");
    // SPEC §2
    EXPECT_EQ(config_string(c, "model.revision"), "7ae557604adf67be50417f59c2c2f167def9a775");
    EXPECT_TRUE(config_bool(c, "model.pin_architecture"));
    EXPECT_EQ(config_string(c, "model.eos_token"), "<|im_end|>");
    EXPECT_EQ(config_int(c, "model.eos_token_id"), 151645);
    EXPECT_EQ(config_string(c, "model.pad_token"), "<|endoftext|>");
    EXPECT_EQ(config_int(c, "model.pad_token_id"), 151643);
    EXPECT_EQ(config_string(c, "model.system_prompt"),
              "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    EXPECT_EQ(config_int(c, "lora.rank"), 8);
    EXPECT_EQ(config_number(c, "lora.alpha"), 16);
    EXPECT_EQ(config_number(c, "lora.dropout"), 0.0);
    EXPECT_EQ(config_at(c, "lora.targets"),
              json({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}));
    EXPECT_EQ(config_int(c, "lora.parameters_per_role"), 4399104);
    EXPECT_EQ(config_int(c, "heads.parameters"), 897);
    EXPECT_EQ(config_number(c, "heads.reward_weight_std"), 0.02);
    EXPECT_EQ(config_int(c, "reward.adapter_seed"), 50);
    // SPEC §3
    EXPECT_EQ(config_int(c, "sft.epochs"), 3);
    EXPECT_EQ(config_int(c, "sft.accumulation"), 8);
    EXPECT_EQ(config_number(c, "sft.lr"), 2e-5);
    EXPECT_EQ(config_int(c, "reward.epochs"), 2);
    EXPECT_EQ(config_int(c, "reward.pairs_per_update"), 8);
    EXPECT_EQ(config_number(c, "reward.lr"), 2e-5);
    for (const char* stage : {"sft", "reward", "ppo"}) {
        EXPECT_EQ(config_number(c, std::string(stage) + ".weight_decay"), 0.01) << stage;
        EXPECT_EQ(config_number(c, std::string(stage) + ".clip"), 1.0) << stage;
        EXPECT_EQ(config_number(c, std::string(stage) + ".warmup_ratio"), 0.1) << stage;
        EXPECT_EQ(config_number(c, std::string(stage) + ".min_lr_ratio"), 0.1) << stage;
    }
    EXPECT_EQ(config_number(c, "adamw.beta1"), 0.9);
    EXPECT_EQ(config_number(c, "adamw.beta2"), 0.999);
    EXPECT_EQ(config_number(c, "adamw.eps"), 1e-8);
    // SPEC §4–§6
    EXPECT_EQ(config_int(c, "limits.max_prompt"), 256);
    EXPECT_EQ(config_int(c, "limits.max_response"), 64);
    EXPECT_EQ(config_int(c, "limits.max_context"), 320);
    EXPECT_EQ(config_int(c, "ppo.iterations"), 100);
    EXPECT_EQ(config_int(c, "ppo.prompts_per_iteration"), 4);
    EXPECT_EQ(config_int(c, "ppo.updates_per_iteration"), 2);
    EXPECT_EQ(config_number(c, "ppo.actor_lr"), 5e-6);
    EXPECT_EQ(config_number(c, "ppo.critic_lr"), 1e-5);
    EXPECT_EQ(config_number(c, "ppo.beta"), 0.02);
    EXPECT_EQ(config_number(c, "ppo.gamma"), 1.0);
    EXPECT_EQ(config_number(c, "ppo.lambda"), 0.95);
    EXPECT_EQ(config_number(c, "ppo.clip_epsilon"), 0.2);
    EXPECT_EQ(config_number(c, "ppo.value_loss_coef"), 0.5);
    EXPECT_EQ(config_number(c, "ppo.temperature"), 1.0);
    EXPECT_EQ(config_string(c, "ppo.missing_eos"), "replace");
    EXPECT_EQ(config_number(c, "ppo.missing_eos_penalty"), -1.0);
    EXPECT_EQ(config_int(c, "ppo.interrupt_iteration"), 40);
    EXPECT_EQ(config_int(c, "sft.interrupt_epoch"), 1);
    EXPECT_EQ(config_int(c, "reward.interrupt_epoch"), 1);
    // SPEC §8
    EXPECT_EQ(config_int(c, "feedback.min_train_labels"), 30);
    EXPECT_EQ(config_int(c, "feedback.min_validation_labels"), 4);
    EXPECT_EQ(config_int(c, "feedback.min_test_labels"), 8);
    EXPECT_EQ(config_string(c, "feedback.kind"), "human");
    EXPECT_EQ(config_optional_int(c, "max_updates"), std::nullopt);
}

TEST(StudyConfig, TinyAndGenericDifferWhereTheSpecSays) {
    const json t = preset_config("tiny"), g = preset_config("generic"), s = preset_config("seed");
    EXPECT_EQ(config_int(t, "sft.epochs"), 8);  // SPEC §10: 8 epochs at 1e-3 reach 83 %
    // chosen on validation prompts by the exact measure (docs/tuning.md)
    EXPECT_EQ(config_number(t, "sft.lr"), 2e-3);
    EXPECT_EQ(config_int(t, "sft.accumulation"), 4);
    EXPECT_EQ(config_number(t, "reward.lr"), 1e-3);  // judge at 1e-3: 100 %
    EXPECT_EQ(config_string(t, "model.shape"), "tiny");
    EXPECT_TRUE(config_bool(t, "pretrain.enabled"));
    EXPECT_TRUE(config_bool(t, "evaluation.sampled"));
    EXPECT_FALSE(config_bool(g, "model.pin_architecture"));
    EXPECT_TRUE(config_at(g, "model.eos_token_id").is_null());  // read from the folder's tokenizer
    // generic keeps every learning number of the seed.
    for (const char* k : {"sft", "reward", "ppo", "limits", "adamw"}) EXPECT_EQ(g[k], s[k]) << k;
}

TEST(StudyConfig, FilesAndSetOverrideKnownKeysOnly) {
    fs::path dir = test::fresh_temp_dir("study_config");
    write_file_atomic(dir / "a.json", R"({"sft": {"epochs": 5, "lr": 1}, "ppo": {"missing_eos": "add"}})");
    write_file_atomic(dir / "b.json", R"({"sft": {"epochs": 6}})");
    json c =
        effective_config("seed", {dir / "a.json", dir / "b.json"},
                         {"sft.lr=3e-4", "ppo.missing_eos=replace", "max_updates=2", "model.system_prompt=Be brief."});
    EXPECT_EQ(config_int(c, "sft.epochs"), 6);    // later file wins
    EXPECT_EQ(config_number(c, "sft.lr"), 3e-4);  // --set after files
    EXPECT_TRUE(config_at(c, "sft.lr").is_number_float());
    EXPECT_EQ(config_string(c, "ppo.missing_eos"), "replace");
    EXPECT_EQ(config_optional_int(c, "max_updates"), 2);
    EXPECT_EQ(config_string(c, "model.system_prompt"), "Be brief.");  // not JSON: taken as a string
    EXPECT_EQ(config_int(c, "sft.accumulation"), 8);                  // untouched keys stay
    // An integer given as 1 for a float key is stored as a float: same hash as 1.0.
    json one = effective_config("seed", {}, {"sft.lr=1"}), onef = effective_config("seed", {}, {"sft.lr=1.0"});
    EXPECT_EQ(config_sha256(one), config_sha256(onef));
    EXPECT_NE(config_sha256(one), config_sha256(preset_config("seed")));
    EXPECT_EQ(config_sha256(preset_config("seed")), config_sha256(preset_config("seed")));
    // The printed effective config is itself a valid --config file.
    write_file_atomic(dir / "full.json", c.dump(2));
    EXPECT_EQ(effective_config("seed", {dir / "full.json"}, {}), c);

    std::string m = error_of([] { effective_config("seed", {}, {"sft.epoch=4"}); });
    EXPECT_NE(m.find("unknown config key 'sft.epoch'"), std::string::npos) << m;
    EXPECT_NE(m.find("epochs"), std::string::npos) << m;  // lists the keys that exist
    write_file_atomic(dir / "typo.json", R"({"ppo": {"clip_epsilom": 0.1}})");
    m = error_of([&] { effective_config("seed", {dir / "typo.json"}, {}); });
    EXPECT_NE(m.find("typo.json"), std::string::npos) << m;
    EXPECT_NE(m.find("'ppo.clip_epsilom'"), std::string::npos) << m;
    m = error_of([] { effective_config("seed", {}, {"sft.epochs=2.5"}); });
    EXPECT_NE(m.find("'sft.epochs' must be an integer"), std::string::npos) << m;
    m = error_of([] { effective_config("seed", {}, {"sft.lr=fast"}); });
    EXPECT_NE(m.find("'sft.lr' must be a number"), std::string::npos) << m;
    m = error_of([] { effective_config("seed", {}, {"lora.targets=q_proj"}); });
    EXPECT_NE(m.find("'lora.targets' must be a array"), std::string::npos) << m;
    m = error_of([] { effective_config("seed", {}, {"sft=3"}); });
    EXPECT_NE(m.find("'sft' must be an object"), std::string::npos) << m;
    m = error_of([] { effective_config("seed", {}, {"sft.lr"}); });
    EXPECT_NE(m.find("key=value"), std::string::npos) << m;
    m = error_of([] { effective_config("seed", {}, {"sft..lr=1"}); });
    EXPECT_NE(m.find("empty key"), std::string::npos) << m;
    write_file_atomic(dir / "preset.json", R"({"preset": "tiny"})");
    m = error_of([&] { effective_config("seed", {dir / "preset.json"}, {}); });
    EXPECT_NE(m.find("--preset"), std::string::npos) << m;
    write_file_atomic(dir / "bad.json", "{\"sft\": ");
    m = error_of([&] { effective_config("seed", {dir / "bad.json"}, {}); });
    EXPECT_NE(m.find("bad.json"), std::string::npos) << m;
    m = error_of([] { config_int(preset_config("seed"), "sft.lr"); });
    EXPECT_NE(m.find("'sft.lr' must be an integer"), std::string::npos) << m;
    m = error_of([] { config_at(preset_config("seed"), "ppo.kl.coef"); });
    EXPECT_NE(m.find("'ppo.kl'"), std::string::npos) << m;
    fs::remove_all(dir);
}

TEST(StudyConfig, ValuesAreValidated) {
    for (const std::string& name : preset_names()) validate_study_config(preset_config(name));
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"ppo.missing_eos=drop", "'ppo.missing_eos' must be one of replace, add; got 'drop'"},
        {"sft.lr=0", "'sft.lr' must be in (0"},
        {"ppo.critic_lr=-1e-5", "'ppo.critic_lr' must be in (0"},
        {"reward.warmup_ratio=1.5", "'reward.warmup_ratio' must be in [0, 1]"},
        {"ppo.lambda=1.2", "'ppo.lambda' must be in [0, 1]"},
        {"sft.epochs=0", "'sft.epochs' must be >= 1"},
        {"lora.rank=0", "'lora.rank' must be >= 1"},
        {"lora.dropout=0.1", "'lora.dropout' must be in [0, 0]"},
        {R"(lora.targets=["q_proj","qkv"])", "\"qkv\""},
        {"lora.targets=[]", "non-empty"},
        {"limits.max_context=64", "'limits.max_context' (64)"},
        {"feedback.kind=crowd", "'feedback.kind' must be one of human, ai"},
        {"max_updates=0", "'max_updates' must be null or >= 1"},
        // Integer keys: one bound however the number is written, named errors.
        {"ppo.iterations=1000000000000000000",
         "key 'ppo.iterations' must be an integer in [-9007199254740992, 9007199254740992] (2^53), got "
         "1000000000000000000"},
        {"ppo.iterations=1e18", "key 'ppo.iterations' must be an integer in [-9007199254740992, 9007199254740992]"},
        {"ppo.iterations=18446744073709551615",
         "must be an integer in [-9007199254740992, 9007199254740992] (2^53), "
         "got 18446744073709551615"},
        {"sft.adapter_seed=-100000000000000000000", "key 'sft.adapter_seed' must be an integer in ["},
        {"ppo.iterations=10000000000",
         "'ppo.iterations' must be <= 1000000000 (the bound of every count), got 10000000000"},
        {"ppo.iterations=1e10", "'ppo.iterations' must be <= 1000000000"},
        {"sft.accumulation=4000000000", "'sft.accumulation' must be <= 1000000000"},
        {"max_updates=2000000000", "'max_updates' must be null or <= 1000000000"},
        {"max_updates=10000000000000000000",
         "'max_updates' must be an integer in [-9007199254740992, "
         "9007199254740992] (2^53), got 10000000000000000000"},
        {"ppo.interrupt_iteration=-1", "'ppo.interrupt_iteration' must be >= 0"},
        // Counts that size memory: bounds of their own, checked before anything is sized.
        {"replicates.count=1001", "'replicates.count' must be <= 1000 (the bound of this count: it sizes memory)"},
        {"parallel.chunks=4097", "'parallel.chunks' must be <= 4096"},
        {"evaluation.best_of_n=5000", "'evaluation.best_of_n' must be <= 4096"},
        {"evaluation.snapshot_samples=5000", "'evaluation.snapshot_samples' must be <= 4096"},
        {"limits.max_response=2000000", "'limits.max_response' must be <= 1048576"},
        // Values that would be read as something else.
        {"sft.lr=1e-400", "1e-400 is too small for a double (it would be read as 0)"},
        {"model.system_prompt=\"a\\u0000b\"", "a string holds a NUL byte"},
        {"lora.rank=1000000000",
         "'lora.rank' must be <= 65536 (and at most the smallest dimension of the targeted "
         "projections), got 1000000000"},
    };
    for (auto& [set, fragment] : bad) {
        std::string m = error_of([&] { effective_config("seed", {}, {set}); });
        EXPECT_NE(m.find(fragment), std::string::npos) << set << ": " << m;
    }
    // The bounds themselves are legal; an integral float is an integer.
    EXPECT_EQ(config_int(effective_config("seed", {}, {"ppo.iterations=1000000000"}), "ppo.iterations"), 1000000000);
    EXPECT_EQ(config_int(effective_config("seed", {}, {"ppo.iterations=1e9"}), "ppo.iterations"), 1000000000);
    EXPECT_EQ(config_int(effective_config("seed", {}, {"lora.rank=65536"}), "lora.rank"), 65536);
    EXPECT_EQ(config_int(effective_config("seed", {}, {"sft.adapter_seed=9007199254740992"}), "sft.adapter_seed"),
              int64_t(1) << 53);
    // Smoke-run caps stay legal even below the interrupt point.
    EXPECT_EQ(config_int(effective_config("tiny", {}, {"ppo.iterations=2", "max_updates=2"}), "ppo.iterations"), 2);
}

TEST(StudyConfig, CommandPrintsTheEffectiveConfig) {
    const char* bin = std::getenv("PPOLAB_BINARY");
    ASSERT_TRUE(bin != nullptr) << "PPOLAB_BINARY is set by CTest";
    fs::path dir = test::fresh_temp_dir("config_cmd");
    std::string cmd = std::string("'") + bin + "' config --preset seed --set ppo.iterations=3 > '" +
                      (dir / "out.json").string() + "' 2> '" + (dir / "err.txt").string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(dir / "err.txt");
    json printed = read_json_file(dir / "out.json");
    EXPECT_EQ(printed, effective_config("seed", {}, {"ppo.iterations=3"}));
    cmd = std::string("'") + bin + "' config --identity > '" + (dir / "id.json").string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_EQ(read_json_file(dir / "id.json"), config_identity(preset_config(kDefaultPreset)));
    cmd =
        std::string("'") + bin + "' config --set ppo.iteration=3 > /dev/null 2> '" + (dir / "err2.txt").string() + "'";
    EXPECT_NE(std::system(cmd.c_str()), 0);
    EXPECT_NE(read_file(dir / "err2.txt").find("'ppo.iteration'"), std::string::npos) << read_file(dir / "err2.txt");
    fs::remove_all(dir);
}

// --config files are outside input: a folder, a device or an oversized file
// is refused naming it (before: "unexpected error: basic_filebuf::underflow"
// for a folder, a read without end for /dev/zero).
TEST(StudyConfig, ConfigFilesAreBoundedRegularFiles) {
    fs::path dir = test::fresh_temp_dir("config_bounded");
    std::string m = error_of([&] { effective_config("seed", {dir}, {}); });
    EXPECT_EQ(m, "configuration file '" + dir.string() + "' is a directory, expected a regular file");
    m = error_of([&] { effective_config("seed", {"/dev/zero"}, {}); });
    EXPECT_EQ(m, "configuration file '/dev/zero' is a character device, expected a regular file");
    write_file_atomic(dir / "big.json", "{\"sft\": {\"lr\": 0.001}}" + std::string(5u << 20, ' '));
    m = error_of([&] { effective_config("seed", {dir / "big.json"}, {}); });
    EXPECT_NE(m.find("over the 4 MiB limit for configuration files (raise it with PPOLAB_MAX_CONFIG_MIB=<MiB>)"),
              std::string::npos)
        << m;
    write_file_atomic(dir / "dup.json", R"({"sft": {"lr": 0.001, "lr": 0.5}})");
    m = error_of([&] { effective_config("seed", {dir / "dup.json"}, {}); });
    EXPECT_EQ(
        m, (dir / "dup.json").string() + ": key 'lr' appears twice in the object at 'sft' (each key may appear once)");
    // Through the command: the message, not an "unexpected error".
    const test::Output r = test::run_shell("'" + test::ppolab_binary() + "' config --config '" + dir.string() + "'");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("is a directory, expected a regular file"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("unexpected error"), std::string::npos) << r.out;
    fs::remove_all(dir);
}
