// Learned-state safetensors and the PEFT layout: round trips, an independent
// Python reader of the PEFT folder, and refusals that leave the disk as it was.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <functional>
#include <map>

#include "model/safetensors.h"
#include "oracle_util.h"
#include "support/test_support.h"
#include "training/identity.h"
#include "training/learned_io.h"
#include "training/peft.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/sha256.h"

using ppolab::test::error_of;
using namespace ppolab;

namespace {

std::map<std::string, std::string> snapshot(const fs::path& dir) {
    std::map<std::string, std::string> out;
    for (auto& e : fs::recursive_directory_iterator(dir))
        out[fs::relative(e.path(), dir).string()] = e.is_regular_file() ? sha256_file(e.path()) : "dir";
    return out;
}

// A fake 2-layer adapter set: q_proj (in 6 → out 6) and down_proj (in 10 → out 6), rank 2, plus a head.
struct Adapters {
    std::vector<std::pair<std::string, std::vector<int64_t>>> layout = {
        {"model.layers.0.self_attn.q_proj.lora_A", {2, 6}}, {"model.layers.0.self_attn.q_proj.lora_B", {6, 2}},
        {"model.layers.0.mlp.down_proj.lora_A", {2, 10}},   {"model.layers.0.mlp.down_proj.lora_B", {6, 2}},
        {"model.layers.1.self_attn.q_proj.lora_A", {2, 6}}, {"model.layers.1.self_attn.q_proj.lora_B", {6, 2}},
        {"model.layers.1.mlp.down_proj.lora_A", {2, 10}},   {"model.layers.1.mlp.down_proj.lora_B", {6, 2}}};
    std::vector<std::vector<float>> data;
    std::vector<float> head_w = std::vector<float>(6), head_b = std::vector<float>(1);
    explicit Adapters(uint64_t seed) {
        Philox rng(seed, 0);
        for (auto& [name, shape] : layout) {
            data.emplace_back(static_cast<size_t>(shape[0] * shape[1]));
            for (float& x : data.back()) x = static_cast<float>(rng.normal());
        }
        for (float& x : head_w) x = static_cast<float>(rng.normal() * 0.02);
    }
    ParamList lora() {
        ParamList out;
        for (size_t i = 0; i < layout.size(); ++i)
            out.push_back({layout[i].first, layout[i].second, data[i].data(), nullptr});
        return out;
    }
    ParamList all() {
        ParamList out = lora();
        out.push_back({"head.weight", {1, 6}, head_w.data(), nullptr});
        out.push_back({"head.bias", {1}, head_b.data(), nullptr});
        return out;
    }
};

PeftInfo info() {
    PeftInfo i;
    i.rank = 2;
    i.alpha = 16;
    i.targets = {"q_proj", "down_proj"};
    i.base_model = "Qwen/Qwen2.5-0.5B-Instruct";
    i.revision = "7ae557604adf67be50417f59c2c2f167def9a775";
    return i;
}

}  // namespace

TEST(LearnedIo, SaveAndReloadBitwiseWithIdentity) {
    fs::path dir = test::fresh_temp_dir("learned_io");
    Adapters a(1), b(2);
    const json meta = {{"role", "reward"}, {"stage", "reward"}};
    const std::string id = save_learned(dir / "reward.safetensors", a.all(), meta);
    EXPECT_EQ(id, learned_identity(a.all()));
    EXPECT_NE(learned_identity(b.all()), id);
    LearnedFile f = load_learned(dir / "reward.safetensors", b.all(), &id);
    EXPECT_EQ(learned_identity(b.all()), id);  // b now holds a's values, bit for bit
    EXPECT_EQ(f.info, meta);
    EXPECT_EQ(f.tensors.size(), 10u);
    EXPECT_EQ(f.tensors[8].name, "head.weight");
    // Refuses to overwrite; replace is explicit.
    EXPECT_NE(error_of([&] { save_learned(dir / "reward.safetensors", b.all()); }).find("refusing to overwrite"),
              std::string::npos);
    fs::remove_all(dir);
}

TEST(LearnedIo, DamagedOrMismatchedFilesAreRefusedAndNothingChanges) {
    fs::path dir = test::fresh_temp_dir("learned_io_bad");
    Adapters a(1);
    save_learned(dir / "good.safetensors", a.all(), json{{"role", "critic"}});
    const std::string good = read_file(dir / "good.safetensors");
    write_file_atomic(dir / "truncated.safetensors", good.substr(0, good.size() - 7));
    {
        std::string bad = good;
        bad[bad.size() - 3] = static_cast<char>(bad[bad.size() - 3] ^ 0x20);  // inside head.bias/last tensor data
        write_file_atomic(dir / "flipped.safetensors", bad);
    }
    {
        SafetensorsFile f = SafetensorsFile::from_bytes(good, "good");
        std::vector<TensorToWrite> ts;
        for (auto& t : f.tensors())
            ts.push_back({t.name, t.dtype, t.shape, {reinterpret_cast<const char*>(t.data), t.size}});
        write_safetensors(dir / "nometa.safetensors", ts, {});
        std::vector<TensorToWrite> fewer(ts.begin() + 1, ts.end());
        write_safetensors(dir / "missing.safetensors", fewer, f.metadata());
        static const uint16_t half[6] = {0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00};
        std::vector<TensorToWrite> f16 = ts;
        for (auto& t : f16)
            if (t.name == "head.weight") {
                t.dtype = "BF16";
                t.bytes = std::string_view(reinterpret_cast<const char*>(half), sizeof half);
            }
        write_safetensors(dir / "dtype.safetensors", f16, f.metadata());
    }
    const auto before = snapshot(dir);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"truncated.safetensors", "truncated.safetensors"},
        {"flipped.safetensors", "altered"},
        {"nometa.safetensors", "not a ppolab learned-state file"},
        {"missing.safetensors", "missing"},
        {"dtype.safetensors", "dtype BF16"}};
    Adapters target(3);
    const std::string target_id = learned_identity(target.all());
    for (auto& [name, fragment] : cases) {
        std::string m = error_of([&] { load_learned(dir / name, target.all()); });
        EXPECT_NE(m.find(name), std::string::npos) << m;
        EXPECT_NE(m.find(fragment), std::string::npos) << name << ": " << m;
    }
    EXPECT_EQ(learned_identity(target.all()), target_id);  // nothing was copied in
    // Right file, wrong role layout.
    ParamList other = target.all();
    other.pop_back();
    std::string m = error_of([&] { load_learned(dir / "good.safetensors", other); });
    EXPECT_NE(m.find("unexpected 'head.bias'"), std::string::npos) << m;
    ParamList renamed = target.all();
    renamed[0].name = "model.layers.0.self_attn.k_proj.lora_A";
    m = error_of([&] { load_learned(dir / "good.safetensors", renamed); });
    EXPECT_NE(m.find("expected 'model.layers.0.self_attn.k_proj.lora_A'"), std::string::npos) << m;
    const std::string wrong_id = sha256_hex("x");
    m = error_of([&] { load_learned(dir / "good.safetensors", target.all(), &wrong_id); });
    EXPECT_NE(m.find("expected " + wrong_id), std::string::npos) << m;
    EXPECT_EQ(learned_identity(target.all()), target_id);
    EXPECT_EQ(snapshot(dir), before);
    fs::remove_all(dir);
}

TEST(Peft, NamesMapBothWays) {
    EXPECT_EQ(peft_tensor_name("model.layers.3.self_attn.q_proj.lora_A"),
              "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight");
    EXPECT_EQ(ppolab_tensor_name("base_model.model.model.layers.23.mlp.down_proj.lora_B.weight"),
              "model.layers.23.mlp.down_proj.lora_B");
    EXPECT_THROW(peft_tensor_name("head.weight"), Error);
    EXPECT_THROW(peft_tensor_name("model.layers.0.mlp.q_proj.lora_A"), Error);  // q_proj lives in self_attn
    EXPECT_THROW(ppolab_tensor_name("model.layers.0.self_attn.q_proj.lora_A"), Error);
    EXPECT_THROW(ppolab_tensor_name("base_model.model.lm_head.weight"), Error);
}

TEST(Peft, ExportReadsBackHereAndWithAnIndependentPythonReader) {
    fs::path dir = test::fresh_temp_dir("peft");
    Adapters a(5);
    export_peft(dir / "adapter", a.lora(), info());
    PeftAdapter back = read_peft(dir / "adapter");
    EXPECT_EQ(back.info.rank, 2);
    EXPECT_EQ(back.info.alpha, 16.0);
    EXPECT_EQ(back.info.targets, (std::vector<std::string>{"q_proj", "down_proj"}));
    EXPECT_EQ(back.info.base_model, "Qwen/Qwen2.5-0.5B-Instruct");
    ASSERT_EQ(back.tensors.size(), a.layout.size());
    std::vector<NamedTensor> expect = capture_params(a.lora());
    // File order is the writer's (sorted names); compare by name.
    std::map<std::string, const NamedTensor*> by_name;
    for (const NamedTensor& t : back.tensors) by_name[t.name] = &t;
    for (const NamedTensor& t : expect) {
        ASSERT_TRUE(by_name.count(t.name)) << t.name;
        EXPECT_EQ(first_tensor_difference({t}, {*by_name[t.name]}), "");
    }

    test::run_python(test::source_dir() / "tests/training/peft_read.py",
                     "'" + (dir / "adapter").string() + "' '" + (dir / "py.json").string() + "'");
    json py = read_json_file(dir / "py.json");
    const json& c = py["config"];
    EXPECT_EQ(c["peft_type"], "LORA");
    EXPECT_EQ(c["task_type"], "CAUSAL_LM");
    EXPECT_EQ(c["r"], 2);
    EXPECT_EQ(c["lora_alpha"], 16);
    EXPECT_EQ(c["lora_dropout"], 0.0);
    EXPECT_EQ(c["bias"], "none");
    EXPECT_EQ(c["fan_in_fan_out"], false);
    EXPECT_EQ(c["target_modules"], json({"q_proj", "down_proj"}));
    EXPECT_EQ(c["base_model_name_or_path"], "Qwen/Qwen2.5-0.5B-Instruct");
    EXPECT_EQ(py["metadata"]["format"], "pt");
    ASSERT_EQ(py["tensors"].size(), a.layout.size());
    for (size_t i = 0; i < a.layout.size(); ++i) {
        const std::string peft = "base_model.model." + a.layout[i].first + ".weight";
        ASSERT_TRUE(py["tensors"].contains(peft)) << peft;
        EXPECT_EQ(py["tensors"][peft]["shape"], json(a.layout[i].second));
        EXPECT_EQ(py["tensors"][peft]["first"].get<double>(), static_cast<double>(a.data[i][0]));
        double sum = 0;
        for (float x : a.data[i]) sum += x;
        EXPECT_NEAR(py["tensors"][peft]["sum"].get<double>(), sum, 1e-9);
    }
    fs::remove_all(dir);
}

TEST(Peft, RefusalsLeaveNothingBehind) {
    fs::path dir = test::fresh_temp_dir("peft_bad");
    Adapters a(5);
    export_peft(dir / "done", a.lora(), info());
    const auto before = snapshot(dir);
    std::string m = error_of([&] { export_peft(dir / "done", a.lora(), info()); });
    EXPECT_NE(m.find("refusing to overwrite"), std::string::npos) << m;
    m = error_of([&] { export_peft(dir / "heads", a.all(), info()); });
    EXPECT_NE(m.find("'head.weight' is not a LoRA tensor"), std::string::npos) << m;
    PeftInfo r4 = info();
    r4.rank = 4;
    m = error_of([&] { export_peft(dir / "rank", a.lora(), r4); });
    EXPECT_NE(m.find("r = 4"), std::string::npos) << m;
    PeftInfo only_q = info();
    only_q.targets = {"q_proj"};
    m = error_of([&] { export_peft(dir / "targets", a.lora(), only_q); });
    EXPECT_NE(m.find("not in target_modules"), std::string::npos) << m;
    ParamList unpaired = a.lora();
    unpaired.pop_back();
    m = error_of([&] { export_peft(dir / "unpaired", unpaired, info()); });
    EXPECT_NE(m.find("without lora_B"), std::string::npos) << m;
    EXPECT_EQ(snapshot(dir), before);  // no folder, no temporary left

    // Reading refuses variants with other arithmetic, and foreign tensors.
    fs::copy(dir / "done", dir / "dora");
    json c = read_json_file(dir / "dora" / "adapter_config.json");
    c["use_dora"] = true;
    write_json_atomic(dir / "dora" / "adapter_config.json", c, Overwrite::replace);
    m = error_of([&] { read_peft(dir / "dora"); });
    EXPECT_NE(m.find("use_dora"), std::string::npos) << m;
    fs::copy(dir / "done", dir / "extra");
    {
        SafetensorsFile f = SafetensorsFile::open(dir / "done" / "adapter_model.safetensors");
        std::vector<TensorToWrite> ts;
        for (auto& t : f.tensors())
            ts.push_back({t.name, t.dtype, t.shape, {reinterpret_cast<const char*>(t.data), t.size}});
        static const float one = 1.0f;
        ts.push_back({"base_model.model.score.weight", "F32", {1}, {reinterpret_cast<const char*>(&one), 4}});
        write_safetensors(dir / "extra" / "adapter_model.safetensors", ts, {}, Overwrite::replace);
    }
    m = error_of([&] { read_peft(dir / "extra"); });
    EXPECT_NE(m.find("score.weight"), std::string::npos) << m;
    fs::remove_all(dir);
}

// Oracle: the real `peft` library loads the export onto a small random Qwen2
// and holds exactly our tensors (PEFT only warns about names it does not
// recognise, so every parameter it created is compared). Not skippable: the
// test venv installs peft/transformers (scripts/test-venv.sh).
TEST(PeftOracle, RealPeftLoadsTheExportOntoAQwen2) {
    const int64_t hidden = 16, inter = 24, layers = 2, heads = 2, kv_heads = 1, rank = 2;
    const int64_t kv_dim = hidden / heads * kv_heads;
    std::vector<std::pair<std::string, std::vector<int64_t>>> layout;
    for (int64_t l = 0; l < layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        layout.push_back({p + "self_attn.q_proj.lora_A", {rank, hidden}});
        layout.push_back({p + "self_attn.q_proj.lora_B", {hidden, rank}});
        layout.push_back({p + "self_attn.k_proj.lora_A", {rank, hidden}});
        layout.push_back({p + "self_attn.k_proj.lora_B", {kv_dim, rank}});
        layout.push_back({p + "mlp.down_proj.lora_A", {rank, inter}});
        layout.push_back({p + "mlp.down_proj.lora_B", {hidden, rank}});
    }
    Philox rng(11, 0);
    std::vector<std::vector<float>> data;
    ParamList params;
    for (auto& [name, shape] : layout) {
        data.emplace_back(static_cast<size_t>(shape[0] * shape[1]));
        for (float& x : data.back()) x = static_cast<float>(rng.normal());
    }
    for (size_t i = 0; i < layout.size(); ++i)
        params.push_back({layout[i].first, layout[i].second, data[i].data(), nullptr});
    PeftInfo pi;
    pi.rank = rank;
    pi.alpha = 16;
    pi.targets = {"q_proj", "k_proj", "down_proj"};
    pi.base_model = "random-qwen2";
    fs::path dir = test::fresh_temp_dir("peft_oracle");
    export_peft(dir / "adapter", params, pi);
    const std::string cmd =
        "'" + test::python() + "' '" + (test::source_dir() / "tests/training/peft_load.py").string() + "' '" +
        (dir / "adapter").string() + "' '" + (dir / "out.json").string() + "' " + std::to_string(hidden) + " " +
        std::to_string(inter) + " " + std::to_string(layers) + " " + std::to_string(heads) + " " +
        std::to_string(kv_heads) + " > '" + (dir / "log.txt").string() + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) != 3)
        << "peft/transformers are not importable by $PPOLAB_PYTHON (" << test::python()
        << "): scripts/test-venv.sh installs them. " << read_file(dir / "log.txt");
    ASSERT_EQ(rc, 0) << read_file(dir / "log.txt");
    json r = read_json_file(dir / "out.json");
    EXPECT_EQ(r["peft_params"].size(), layout.size()) << r.dump();
    for (auto& [name, diff] : r["peft_params"].items()) {
        ASSERT_FALSE(diff.is_null()) << name << " was created by PEFT but is not in the export";
        EXPECT_EQ(diff.get<double>(), 0.0) << name;
    }
    EXPECT_TRUE(r["unused_file_tensors"].empty()) << r["unused_file_tensors"].dump();
    EXPECT_EQ(r["scaling"].size(), static_cast<size_t>(layers * 3));
    for (auto& [name, s] : r["scaling"].items()) EXPECT_EQ(s.get<double>(), 16.0 / rank) << name;
    fs::remove_all(dir);
}
