// The typed StudyConfig (config_types.h): round trip, documentation of every
// key, pinned preset hashes, the generic overlay, and `config --explain`.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "support/test_support.h"
#include "training/config_types.h"
#include "training/run_layout.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ppolab {
const std::map<std::string, std::string>& embedded_presets();  // presets_embedded.cpp (generated)
}

using ppolab::test::error_of;
using namespace ppolab;

namespace {

void leaf_paths(const json& v, const std::string& prefix, std::set<std::string>& out) {
    for (auto& [k, x] : v.items()) {
        if (x.is_object()) leaf_paths(x, prefix + k + ".", out);
        else out.insert(prefix + k);
    }
}

}  // namespace

// Parsing a preset and writing it back gives the same JSON, byte for byte
// (so the same config_sha256): no key is lost, renamed or retyped.
TEST(StudyConfigTypes, EveryPresetRoundTrips) {
    for (const std::string& name : preset_names()) {
        const json c = preset_config(name);
        const json back = StudyConfig::parse(c).to_json();
        EXPECT_EQ(back.dump(), c.dump()) << name;
        EXPECT_EQ(config_sha256(back), config_sha256(c)) << name;
    }
    // And with overrides of every kind, nullable keys included.
    const json c = effective_config("generic", {},
                                    {"max_updates=3", "model.shape=qwen2.5-0.5b", "model.eos_token_id=7", "sft.lr=1",
                                     R"(lora.targets=["q_proj"])"});
    EXPECT_EQ(StudyConfig::parse(c).to_json().dump(), c.dump());
}

TEST(StudyConfigTypes, TypedFieldsHoldThePresetValues) {
    const StudyConfig s = StudyConfig::parse(preset_config("seed"));
    EXPECT_EQ(s.preset, "seed");
    EXPECT_EQ(s.ppo.beta, 0.02);
    EXPECT_EQ(s.ppo.missing_eos, "replace");
    EXPECT_EQ(s.sft.accumulation, 8);
    EXPECT_EQ(s.reward.pairs_per_update, 8);
    EXPECT_EQ(s.lora.alpha, 16);
    EXPECT_EQ(s.lora.targets, lora_target_names());
    EXPECT_EQ(s.model.eos_token, "<|im_end|>");
    EXPECT_EQ(s.model.eos_token_id, 151645);
    EXPECT_EQ(s.max_updates, std::nullopt);
    EXPECT_EQ(s.pretrain.tokenizer_vocab_size, std::nullopt);
    EXPECT_EQ(s.checkpoint.every_rows, 50);
    const StudyConfig g = StudyConfig::parse(preset_config("generic"));
    EXPECT_EQ(g.model.shape, std::nullopt);
    EXPECT_EQ(g.model.eos_token_id, std::nullopt);
    EXPECT_EQ(g.heads.parameters, std::nullopt);
    const StudyConfig t = StudyConfig::parse(effective_config("tiny", {}, {"max_updates=2"}));
    EXPECT_EQ(t.max_updates, 2);
    EXPECT_EQ(t.pretrain.tokenizer_vocab_size, 1024);
    EXPECT_EQ(t.model.shape, "tiny");
}

// A key added to a preset without a documented field fails here (and in
// StudyConfig::parse: "unknown config key").
TEST(StudyConfigTypes, EveryKeyHasAMeaningAndAUnit) {
    std::set<std::string> documented;
    for (const ConfigFieldDoc& d : config_field_docs()) {
        EXPECT_TRUE(documented.insert(d.key).second) << d.key << " documented twice";
        EXPECT_FALSE(d.meaning.empty()) << d.key;
        EXPECT_FALSE(d.unit.empty()) << d.key;
        EXPECT_FALSE(d.type.empty()) << d.key;
    }
    for (const std::string& name : preset_names()) {
        std::set<std::string> keys;
        leaf_paths(preset_config(name), "", keys);
        EXPECT_EQ(keys, documented) << name;
    }
    std::set<std::string> sections;
    for (const ConfigSectionDoc& s : config_section_docs()) {
        EXPECT_FALSE(s.meaning.empty()) << s.name;
        sections.insert(s.name);
    }
    const json seed = preset_config("seed");
    for (auto& [k, v] : seed.items()) EXPECT_EQ(v.is_object(), sections.count(k) == 1) << k;
    EXPECT_EQ(field::describe(field::above(0, kConfigInf)), "in (0, inf]");
    EXPECT_EQ(field::describe(field::range(0, 1)), "in [0, 1]");
    EXPECT_EQ(field::describe(field::count(1)), "an integer >= 1 and <= 1000000000");
    EXPECT_EQ(field::describe(field::any()), "");
}

// The effective presets as the unchanged binary printed them (d08a750,
// `ppolab config --preset P` and `--identity`): the typed config and the
// generic overlay change no byte. Re-pinned when ppo.snapshot_every,
// evaluation.snapshot_samples, evaluation.best_of_n and the study and
// replicates sections were added (new keys; no stage number changed), and
// when the tiny preset's PPO learning rates were chosen on validation
// prompts (scripts/sweep_validation.sh: actor 1.25e-4, critic 2.5e-4) and
// the tiny preset's description said so, and when the dpo section was added
// (new keys; no other number changed) with the tiny preset's dpo.lr chosen
// on validation pairs (README, "When to use what"), and when PPO's design
// switches (ppo.whiten_advantages, value_clipping, cliprange_value,
// kl_penalty: all off, the seed's PPO) and the rl section were added (new
// keys; no other number changed), and when the parallel section was added
// (parallel.chunks 1: the single-process update, no number changed), and
// when evaluation.exact_prompts was added (null: every prompt measured
// exactly; no other number changed), and when the tiny preset's SFT
// learning rate and examples per update were chosen on validation prompts
// by the exact measure (lr 2e-3, 4 per update; docs/tuning.md).
TEST(StudyConfigTypes, PresetHashesArePinned) {
    const std::map<std::string, std::pair<std::string, std::string>> pinned = {
        {"tiny",
         {"56292e352d7ad59682562f27ecb46f813575bb39b8b78c114035c770e8b8eb3f",
          "0ac2059130109e184da2565e5bb2ac410bfd0c216f708853134c956b1457a43b"}},
        {"seed",
         {"898a2a4333bcadc9201cee161c3d475d80ce03e48c8db7ea4d6a879d88b1e833",
          "e61ab2019046760f08932bb5b72e520b882613a53bfb0b9115a0131551f79ab7"}},
        {"generic",
         {"557d8d0484d9df8589d787fd9877e78e65287c2b75e74732b09f2919932b559f",
          "c59a16c273fedb690fb8b62cd188f976e3ff1745b661171ac2a126ff71e06973"}},
    };
    for (const auto& [name, hashes] : pinned) {
        const json c = effective_config(name, {}, {});
        EXPECT_EQ(config_sha256(c), hashes.first) << name;
        EXPECT_EQ(sha256_hex(c.dump(2) + "\n"), hashes.second) << name << ": the printed config changed";
    }
}

// generic.json holds only what differs from seed.
TEST(StudyConfigTypes, GenericIsAnOverlayOnSeed) {
    const json raw = parse_json(embedded_presets().at("generic"), "generic.json");
    EXPECT_EQ(raw.at("overlay_on"), "seed");
    const json seed = preset_config("seed");
    std::set<std::string> keys;
    leaf_paths(raw, "", keys);
    for (const std::string& key : keys) {
        if (key == "overlay_on") continue;
        EXPECT_NE(config_at(raw, key), config_at(seed, key)) << key << " repeats the seed's value";
    }
    EXPECT_LT(keys.size(), 20u);
    EXPECT_FALSE(preset_config("generic").contains("overlay_on"));
}

TEST(StudyConfigTypes, ParseRefusesUnknownMissingAndMistypedKeys) {
    json c = preset_config("seed");
    c["ppo"]["kl_coef"] = 0.1;
    std::string m = error_of([&] { StudyConfig::parse(c); });
    EXPECT_NE(m.find("unknown config key 'ppo.kl_coef' (keys under 'ppo': iterations, "), std::string::npos) << m;
    c = preset_config("seed");
    c["sft"].erase("epochs");
    m = error_of([&] { StudyConfig::parse(c); });
    EXPECT_EQ(m, "config: missing key 'sft.epochs'");
    c = preset_config("seed");
    c["sft"]["epochs"] = "3";
    m = error_of([&] { StudyConfig::parse(c); });
    EXPECT_EQ(m, "config: 'sft.epochs' must be an integer, got string \"3\"");
    c = preset_config("seed");
    c["evaluation"]["populations"] = json::array({"test", 3});
    m = error_of([&] { StudyConfig::parse(c); });
    EXPECT_NE(m.find("'evaluation.populations' must be a list of strings"), std::string::npos) << m;
    // A key that is null in the preset takes a value of its field's kind only.
    m = error_of([] { effective_config("generic", {}, {"model.shape=5"}); });
    EXPECT_EQ(m, "config: 'model.shape' must be a string, got number 5");
    m = error_of([] { effective_config("generic", {}, {"model.eos_token_id=x"}); });
    EXPECT_EQ(m, "config: 'model.eos_token_id' must be an integer, got string \"x\"");
}

TEST(StudyConfigTypes, ExplainPrintsMeaningDefaultsAndUnit) {
    const std::string bin = "'" + test::ppolab_binary() + "' config --explain";
    test::Output r = test::run_shell(bin + " ppo.beta");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("ppo.beta: KL penalty per token against the SFT policy\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  type:    number, in [0, inf]\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  unit:    coefficient\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("    generic  0.02\n    seed     0.02\n    tiny     0.02\n"), std::string::npos) << r.out;
    r = test::run_shell(bin + " sft.lr");
    EXPECT_NE(r.out.find("    seed     2e-05\n    tiny     0.002\n"), std::string::npos) << r.out;
    r = test::run_shell(bin + " model.eos_token_id");
    EXPECT_NE(r.out.find("integer or null"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("    generic  null\n    seed     151645\n"), std::string::npos) << r.out;
    r = test::run_shell(bin + " ppo");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("ppo.clip_epsilon"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("sft.lr"), std::string::npos) << r.out;
    r = test::run_shell(bin);
    ASSERT_EQ(r.rc, 0) << r.out;
    for (const ConfigSectionDoc& s : config_section_docs())
        EXPECT_NE(r.out.find(s.name + " "), std::string::npos) << s.name;
    r = test::run_shell(bin + " ppo.bta");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("unknown config key 'ppo.bta' (close: ppo.beta"), std::string::npos) << r.out;
    r = test::run_shell(bin + " clip_epsilon");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("ppo.clip_epsilon"), std::string::npos) << r.out;
}

// study.seed: every stage seed is S + 1000 x study.seed (seed 0 = the
// preset's seeds); it names the numbers, so it is in the config hash, and
// replicates.count (how many chains) is not.
TEST(StudyConfigTypes, StudySeedRuleAndTheHash) {
    const json c0 = effective_config("tiny", {}, {});
    const StudyConfig s0 = StudyConfig::parse(c0);
    EXPECT_EQ(s0.study.seed, 0);
    EXPECT_EQ(s0.seed(s0.sft.adapter_seed), 49u);
    const json c3 = effective_config("tiny", {}, {"study.seed=3"});
    const StudyConfig s3 = StudyConfig::parse(c3);
    EXPECT_EQ(s3.seed(s3.sft.adapter_seed), 3049u);
    EXPECT_EQ(s3.seed(s3.ppo.generation_seed), 3249u);
    EXPECT_NE(config_sha256(c0), config_sha256(c3));
    EXPECT_EQ(config_sha256(c0), config_sha256(effective_config("tiny", {}, {"replicates.count=2"})));
    EXPECT_EQ(config_sha256(c0), config_sha256(effective_config("tiny", {}, {"replicates.repretrain_base=true"})));
    EXPECT_EQ(s0.replicates.count, 5);
    EXPECT_EQ(StudyConfig::parse(effective_config("seed", {}, {})).replicates.count, 1);
    EXPECT_NE(error_of([] { effective_config("tiny", {}, {"replicates.count=0"}); }).find("replicates.count"),
              std::string::npos);
    EXPECT_NE(error_of([] { effective_config("tiny", {}, {"study.seed=-1"}); }).find("study.seed"), std::string::npos);
}

// A replicate's folder: its own stages, eval and report; the study's corpus,
// lock and findings; the study's base unless it pretrains its own.
TEST(RunLayoutReplicates, ChainFoldersShareTheStudysCorpusAndBase) {
    const RunLayout study{fs::path("runs/s")};
    EXPECT_FALSE(study.is_replicate());
    EXPECT_EQ(study.corpus(), fs::path("runs/s/corpus"));
    EXPECT_EQ(study.findings(), fs::path("runs/s/findings.json"));
    const RunLayout r2 = RunLayout::replicate("runs/s", 2, false);
    EXPECT_TRUE(r2.is_replicate());
    EXPECT_EQ(r2.study(), fs::path("runs/s"));
    EXPECT_EQ(r2.stage("sft"), fs::path("runs/s/replicates/2/sft"));
    EXPECT_EQ(r2.eval(), fs::path("runs/s/replicates/2/eval"));
    EXPECT_EQ(r2.corpus(), fs::path("runs/s/corpus"));
    EXPECT_EQ(r2.base(), fs::path("runs/s/base"));
    EXPECT_EQ(r2.findings(), fs::path("runs/s/findings.json"));
    EXPECT_EQ(RunLayout::replicate("runs/s", 2, true).base(), fs::path("runs/s/replicates/2/base"));
}
