// Checkpoint folders: config validation, the name table, save/load round
// trips (BF16, F16, F32, sharded), every loading error with its message,
// failed loads and saves changing nothing on disk, the seed pin, identities
// and the init-random command.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <set>

#include "model/hf_folder.h"
#include "model/init.h"
#include "model/safetensors.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

using ppolab::test::error_of;
using ppolab::test::qwen_model_dir;
using ppolab::test::run_cli;
using namespace ppolab;

namespace {

fs::path temp_dir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("ppolab_test_checkpoint_" + name + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

// A small Qwen2 shape: every kind of tensor, a few KiB of weights.
Qwen2Config small_config(bool tied = true) {
    Qwen2Config c = model_shape("tiny");
    c.vocab_size = 96;
    c.hidden_size = 32;
    c.intermediate_size = 48;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 8;
    c.tie_word_embeddings = tied;
    return c;
}

Qwen2Weights small_weights(bool tied = true, WeightType type = WeightType::bf16, uint64_t seed = 1) {
    InitOptions o;
    o.seed = seed;
    o.matrices = type;
    o.randomize_norms_and_biases = true;  // a dropped norm or bias cannot go unseen
    return random_weights(small_config(tied), o);
}

// A tokenizer folder with a handful of tokens (ids up to 70) and ChatML specials.
fs::path make_tokenizer(const fs::path& dir) {
    json vocab = json::object();
    for (int i = 0; i < 68; ++i) vocab["t" + std::to_string(i)] = i;
    json tok = {{"version", "1.0"},
                {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
                {"added_tokens",
                 {{{"id", 68}, {"content", "<|endoftext|>"}, {"special", true}},
                  {{"id", 69}, {"content", "<|im_start|>"}, {"special", true}},
                  {{"id", 70}, {"content", "<|im_end|>"}, {"special", true}}}}};
    write_json_atomic(dir / "tokenizer.json", tok);
    write_json_atomic(dir / "tokenizer_config.json", json{{"eos_token", "<|im_end|>"}});
    return dir;
}

void expect_same_matrix(const Matrix& a, const Matrix& b, const std::string& what) {
    EXPECT_EQ(a.type, b.type) << what;
    EXPECT_EQ(a.rows, b.rows) << what;
    EXPECT_EQ(a.cols, b.cols) << what;
    EXPECT_TRUE(a.b == b.b) << what;
    EXPECT_TRUE(a.f == b.f) << what;
}

void expect_same_weights(const Qwen2Weights& a, const Qwen2Weights& b) {
    EXPECT_EQ(a.config, b.config);
    for (const TensorSpec& s : qwen2_tensor_table(a.config)) {
        if (s.is_matrix()) expect_same_matrix(*s.matrix(a), *s.matrix(b), s.hf_name);
        else EXPECT_TRUE(*s.vector(a) == *s.vector(b)) << s.hf_name;
    }
    EXPECT_TRUE(b.lm_head.b.empty() == a.lm_head.b.empty());
}

// Writes a checkpoint folder by hand: config + the table's tensors in `dtype`
// (values from `w`), plus `extra` tensors, minus the names in `drop`.
struct HandWritten {
    std::vector<std::string> names;
    std::list<std::string> bytes;  // owned tensor bytes
    std::vector<TensorToWrite> tensors;
};

HandWritten hand_tensors(const Qwen2Weights& w, const std::string& dtype) {
    HandWritten h;
    for (const TensorSpec& s : qwen2_tensor_table(w.config)) {
        std::vector<float> v;
        if (s.is_matrix())
            for (int64_t i = 0; i < s.matrix(w)->numel(); ++i)
                v.push_back(s.matrix(w)->at(i / s.shape[1], i % s.shape[1]));
        else v = *s.vector(w);
        std::string b;
        for (float x : v) {
            if (dtype == "F32") {
                b.append(reinterpret_cast<const char*>(&x), 4);
            } else if (dtype == "BF16") {
                bf16 y = float_to_bf16(x);
                b.append(reinterpret_cast<const char*>(&y), 2);
            } else {  // F16: values are small (|x| < 1), in F16's normal range or zero
                _Float16 y = static_cast<_Float16>(x);
                b.append(reinterpret_cast<const char*>(&y), 2);
            }
        }
        h.bytes.push_back(std::move(b));
        h.tensors.push_back({s.hf_name, dtype, s.shape, h.bytes.back()});
    }
    return h;
}

fs::path write_folder(const fs::path& dir, const Qwen2Config& c, const std::vector<TensorToWrite>& tensors) {
    fs::create_directories(dir);
    write_json_atomic(dir / "config.json", c.to_json());
    write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
    return dir;
}

// Every file under `dir` with its bytes: a snapshot to compare before/after.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
    std::map<std::string, std::string> out;
    for (auto& e : fs::recursive_directory_iterator(dir))
        out[e.path().string()] = e.is_regular_file() ? read_file(e.path()) : "<dir>";
    return out;
}

fs::path qwen_model() { return qwen_model_dir(); }

}  // namespace

// ---------------------------------------------------------------- config

TEST(Config, SeedShapeIsSpecSection2) {
    Qwen2Config c = model_shape("qwen2.5-0.5b");
    EXPECT_EQ(c.vocab_size, 151936);
    EXPECT_EQ(c.hidden_size, 896);
    EXPECT_EQ(c.intermediate_size, 4864);
    EXPECT_EQ(c.num_hidden_layers, 24);
    EXPECT_EQ(c.num_attention_heads, 14);
    EXPECT_EQ(c.num_key_value_heads, 2);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.max_position_embeddings, 32768);
    EXPECT_EQ(c.rms_norm_eps, 1e-6);
    EXPECT_EQ(c.rope_theta, 1e6);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.eos_token_id, 151645);
    EXPECT_EQ(c.bos_token_id, 151643);
    // The real Qwen2.5-0.5B-Instruct config.json reads as exactly this shape.
    fs::path real = qwen_model() / "config.json";
    ASSERT_TRUE(fs::exists(real)) << real;
    EXPECT_EQ(Qwen2Config::from_json(read_json_file(real), real.string()), c);
    EXPECT_NO_THROW(check_seed_architecture(Qwen2Config::from_json(read_json_file(real), "x"), "x"));
}

TEST(Config, TinyShapeIsSpecSection10) {
    Qwen2Config c = model_shape("tiny");
    EXPECT_EQ(c.hidden_size, 256);
    EXPECT_EQ(c.num_hidden_layers, 4);
    EXPECT_EQ(c.num_attention_heads, 4);
    EXPECT_EQ(c.num_key_value_heads, 2);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.intermediate_size, 688);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.max_position_embeddings, 512);
    EXPECT_EQ(c.rope_theta, 1e4);
    EXPECT_NE(error_of([] { model_shape("llama-7b"); }).find("unknown model shape 'llama-7b'"), std::string::npos);
    // SPEC §10: 2.95 M parameters with a ~180-token vocabulary.
    c.vocab_size = 180;
    int64_t n = 0;
    for (const TensorSpec& s : qwen2_tensor_table(c)) n += s.numel();
    EXPECT_EQ(n, 2950400);
}

TEST(Config, RoundTripsThroughJson) {
    for (bool tied : {true, false}) {
        Qwen2Config c = small_config(tied);
        c.bos_token_id = 68;
        c.eos_token_id = 70;
        c.rms_norm_eps = 1.25e-5;
        EXPECT_EQ(Qwen2Config::from_json(c.to_json(), "c"), c);
        EXPECT_EQ(Qwen2Config::from_json(parse_json(c.to_json().dump(), "c"), "c"), c);
    }
    Qwen2Config odd = small_config();
    odd.head_dim = 16;  // q_dim 64 ≠ hidden 32: head_dim must be written
    EXPECT_EQ(odd.to_json()["head_dim"], 16);
    EXPECT_EQ(Qwen2Config::from_json(odd.to_json(), "c"), odd);
    EXPECT_FALSE(small_config().to_json().contains("head_dim"));
    EXPECT_EQ(small_config().to_json()["model_type"], "qwen2");
}

TEST(Config, ValidationNamesFileAndField) {
    const json good = small_config().to_json();
    auto err = [&](const std::function<void(json&)>& edit, const std::string& want) {
        json j = good;
        edit(j);
        std::string msg = error_of([&] { Qwen2Config::from_json(j, "dir/config.json"); });
        EXPECT_NE(msg.find("dir/config.json"), std::string::npos) << msg;
        EXPECT_NE(msg.find(want), std::string::npos) << "want '" << want << "' in: " << msg;
    };
    err([](json& j) { j["model_type"] = "llama"; }, "'model_type' must be \"qwen2\", got \"llama\"");
    err(
        [](json& j) {
            j.erase("model_type");
            j["architectures"] = {"LlamaForCausalLM"};
        },
        "'architectures' must include");
    err(
        [](json& j) {
            j.erase("model_type");
            j.erase("architectures");
        },
        "neither 'model_type'");
    err([](json& j) { j["hidden_act"] = "gelu"; }, "'hidden_act' must be \"silu\", got \"gelu\"");
    err([](json& j) { j["use_sliding_window"] = true; }, "'use_sliding_window' is true");
    err([](json& j) { j["rope_scaling"] = {{"type", "yarn"}}; }, "'rope_scaling'");
    err([](json& j) { j["hidden_size"] = -32; }, "'hidden_size' must be in [1, ");
    err([](json& j) { j["hidden_size"] = "32"; }, "'hidden_size' must be an integer, got string");
    err([](json& j) { j.erase("vocab_size"); }, "missing field 'vocab_size'");
    err([](json& j) { j["num_attention_heads"] = 3; },
        "'num_key_value_heads' (2) must divide 'num_attention_heads' (3)");
    err(
        [](json& j) {
            j["num_attention_heads"] = 6;
            j["num_key_value_heads"] = 3;
        },
        "'num_attention_heads' (6) must divide 'hidden_size' (32)");
    err([](json& j) { j["rms_norm_eps"] = 0; }, "'rms_norm_eps' must be in (0, 1), got 0");
    err([](json& j) { j["rope_theta"] = -1.0; }, "'rope_theta' must be a positive number");
    err([](json& j) { j["tie_word_embeddings"] = 1; }, "'tie_word_embeddings' must be true or false");
    err([](json& j) { j["eos_token_id"] = "x"; }, "'eos_token_id' must be a non-negative token id");
    err([](json& j) { j["torch_dtype"] = "int8"; }, "'torch_dtype' must be bfloat16, float16 or float32");
    err([](json& j) { j["num_hidden_layers"] = 100000; }, "'num_hidden_layers' must be in [1, 1024], got 100000");
    EXPECT_NE(error_of([] { Qwen2Config::from_json(json::array(), "c.json"); }).find("c.json: expected a JSON object"),
              std::string::npos);
    // Fuzz finding: a number too large for a double is an Error naming the file.
    EXPECT_NE(error_of([] {
                  parse_json(R"({"rms_norm_eps": 5e1111111111111111})", "c.json");
              }).find("c.json: not valid JSON"),
              std::string::npos);
    // Defaults as Hugging Face's Qwen2Config: KV heads = heads, untied; eos may be a list.
    json minimal = {{"model_type", "qwen2"},   {"vocab_size", 10},       {"hidden_size", 8},
                    {"intermediate_size", 16}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                    {"eos_token_id", {7, 3}}};
    Qwen2Config m = Qwen2Config::from_json(minimal, "m");
    EXPECT_EQ(m.num_key_value_heads, 2);
    EXPECT_EQ(m.head_dim, 4);
    EXPECT_FALSE(m.tie_word_embeddings);
    EXPECT_EQ(m.eos_token_id, 7);
    EXPECT_EQ(m.bos_token_id, -1);
}

TEST(Config, SeedArchitectureRefusesOthers) {
    Qwen2Config tiny = model_shape("tiny");
    std::string msg = error_of([&] { check_seed_architecture(tiny, "runs/x/base/config.json"); });
    EXPECT_NE(msg.find("runs/x/base/config.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("hidden_size: expected 896, got 256"), std::string::npos) << msg;
    EXPECT_NE(msg.find("num_hidden_layers: expected 24, got 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rope_theta: expected 1e+06, got 10000"), std::string::npos) << msg;
    Qwen2Config almost = model_shape("qwen2.5-0.5b");
    almost.tie_word_embeddings = false;
    msg = error_of([&] { check_seed_architecture(almost, "c"); });
    EXPECT_NE(msg.find("tie_word_embeddings: expected true, got false"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("hidden_size"), std::string::npos) << msg;  // only differing fields are listed
    EXPECT_NO_THROW(check_seed_architecture(model_shape("qwen2.5-0.5b"), "c"));
}

// ---------------------------------------------------------------- the name table

TEST(TensorTable, NamesAndShapesOfTheSeedModel) {
    Qwen2Config c = model_shape("qwen2.5-0.5b");
    std::vector<TensorSpec> t = qwen2_tensor_table(c);
    EXPECT_EQ(t.size(), 1u + 12u * 24u + 1u);  // tied: no lm_head.weight
    std::map<std::string, std::vector<int64_t>> shapes;
    int64_t params = 0;
    for (const TensorSpec& s : t) {
        EXPECT_TRUE(shapes.emplace(s.hf_name, s.shape).second) << "duplicate " << s.hf_name;
        params += s.numel();
    }
    EXPECT_EQ(params, 494032768);  // Qwen2.5-0.5B's published parameter count
    EXPECT_EQ(shapes["model.embed_tokens.weight"], (std::vector<int64_t>{151936, 896}));
    EXPECT_EQ(shapes["model.layers.3.self_attn.q_proj.weight"], (std::vector<int64_t>{896, 896}));
    EXPECT_EQ(shapes["model.layers.3.self_attn.k_proj.weight"], (std::vector<int64_t>{128, 896}));
    EXPECT_EQ(shapes["model.layers.3.self_attn.k_proj.bias"], (std::vector<int64_t>{128}));
    EXPECT_EQ(shapes["model.layers.23.mlp.down_proj.weight"], (std::vector<int64_t>{896, 4864}));
    EXPECT_EQ(shapes["model.norm.weight"], (std::vector<int64_t>{896}));
    EXPECT_EQ(shapes.count("lm_head.weight"), 0u);
    c.tie_word_embeddings = false;
    EXPECT_EQ(qwen2_tensor_table(c).back().hf_name, "lm_head.weight");
    // Every entry reaches a distinct field of the weights.
    Qwen2Weights w = small_weights(false);
    std::set<const void*> fields;
    for (const TensorSpec& s : qwen2_tensor_table(w.config)) {
        const void* f = s.is_matrix() ? static_cast<const void*>(s.matrix(w)) : static_cast<const void*>(s.vector(w));
        EXPECT_TRUE(fields.insert(f).second) << s.hf_name;
        if (s.is_matrix()) EXPECT_EQ(s.matrix(w)->numel(), s.numel()) << s.hf_name;
        else EXPECT_EQ(static_cast<int64_t>(s.vector(w)->size()), s.numel()) << s.hf_name;
    }
}

// ---------------------------------------------------------------- round trips

TEST(Checkpoint, SaveLoadRoundTripBf16) {
    fs::path root = temp_dir("roundtrip");
    fs::path tok = make_tokenizer(root / "tok");
    for (bool tied : {true, false}) {
        Qwen2Weights w = small_weights(tied);
        fs::path dir = root / (tied ? "tied" : "untied");
        save_checkpoint(dir, w, tok, json{{"eos_token_id", 70}});
        for (const char* f :
             {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
            EXPECT_TRUE(fs::is_regular_file(dir / f)) << f;
        EXPECT_EQ(read_json_file(dir / "generation_config.json")["eos_token_id"], 70);
        EXPECT_EQ(read_file(dir / "tokenizer.json"), read_file(tok / "tokenizer.json"));
        SafetensorsFile st = SafetensorsFile::open(dir / "model.safetensors");
        EXPECT_EQ(st.metadata().at("format"), "pt");
        EXPECT_EQ(st.find("lm_head.weight") != nullptr, !tied);
        for (const auto& t : st.tensors()) EXPECT_EQ(t.dtype, "BF16") << t.name;
        Qwen2Weights back = load_checkpoint(dir);
        expect_same_weights(w, back);
        // FP32 matrices on request: the BF16 values widened exactly.
        Qwen2Weights f = load_checkpoint(dir, WeightType::f32);
        EXPECT_EQ(f.layers[1].gate_proj.type, WeightType::f32);
        EXPECT_TRUE(f.layers[1].gate_proj.b.empty());
        for (int64_t i = 0; i < w.layers[1].gate_proj.numel(); ++i)
            ASSERT_EQ(f.layers[1].gate_proj.f[i], bf16_to_float(w.layers[1].gate_proj.b[i]));
    }
    fs::remove_all(root);
}

TEST(Checkpoint, Fp32MasterWeightsAreRoundedOnSave) {
    fs::path root = temp_dir("fp32");
    Qwen2Weights w = small_weights(true, WeightType::f32, 5);
    w.norm[0] = 1.0f + 0x1p-8f + 0x1p-20f;  // an FP32 norm value BF16 cannot hold
    save_checkpoint(root / "ck", w, {}, json(nullptr));
    EXPECT_FALSE(fs::exists(root / "ck" / "generation_config.json"));
    EXPECT_FALSE(fs::exists(root / "ck" / "tokenizer.json"));
    Qwen2Weights back = load_checkpoint(root / "ck");
    for (int64_t i = 0; i < w.embed_tokens.numel(); ++i)
        ASSERT_EQ(back.embed_tokens.b[i], float_to_bf16(w.embed_tokens.f[i])) << i;
    EXPECT_EQ(back.norm[0], 1.0f + 0x1p-7f);
    fs::remove_all(root);
}

TEST(Checkpoint, LoadsF32AndF16Files) {
    fs::path root = temp_dir("dtypes");
    Qwen2Weights w = small_weights(true, WeightType::f32, 9);
    // F32 file: BF16 load rounds to nearest even, FP32 load is exact.
    HandWritten f32 = hand_tensors(w, "F32");
    write_folder(root / "f32", w.config, f32.tensors);
    Qwen2Weights as_bf16 = load_checkpoint(root / "f32");
    Qwen2Weights as_f32 = load_checkpoint(root / "f32", WeightType::f32);
    for (int64_t i = 0; i < w.layers[0].q_proj.numel(); ++i) {
        ASSERT_EQ(as_bf16.layers[0].q_proj.b[i], float_to_bf16(w.layers[0].q_proj.f[i]));
        ASSERT_EQ(as_f32.layers[0].q_proj.f[i], w.layers[0].q_proj.f[i]);
    }
    EXPECT_EQ(as_f32.layers[1].k_bias, w.layers[1].k_bias);
    // F16 file: each value decoded, then rounded like the F32 file.
    HandWritten f16 = hand_tensors(w, "F16");
    write_folder(root / "f16", w.config, f16.tensors);
    Qwen2Weights h = load_checkpoint(root / "f16", WeightType::f32);
    for (int64_t i = 0; i < w.layers[0].down_proj.numel(); ++i)
        ASSERT_EQ(h.layers[0].down_proj.f[i], static_cast<float>(static_cast<_Float16>(w.layers[0].down_proj.f[i])));
    fs::remove_all(root);
}

TEST(Checkpoint, ShardedIndexLoadsLikeOneFile) {
    fs::path root = temp_dir("sharded");
    Qwen2Weights w = small_weights(false);
    HandWritten h = hand_tensors(w, "BF16");
    fs::path dir = root / "ck";
    fs::create_directories(dir);
    write_json_atomic(dir / "config.json", w.config.to_json());
    std::vector<TensorToWrite> a, b;
    json map = json::object();
    for (size_t i = 0; i < h.tensors.size(); ++i) {
        bool first = i % 3 != 0;
        (first ? a : b).push_back(h.tensors[i]);
        map[h.tensors[i].name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    write_safetensors(dir / "model-00001-of-00002.safetensors", a, {{"format", "pt"}});
    write_safetensors(dir / "model-00002-of-00002.safetensors", b, {{"format", "pt"}});
    write_json_atomic(dir / "model.safetensors.index.json",
                      json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}});
    expect_same_weights(w, load_checkpoint(dir));
    std::string sha = checkpoint_sha256(dir);

    // The index and the shards must agree.
    auto with_index = [&](const json& m) {
        write_json_atomic(dir / "model.safetensors.index.json",
                          json{{"metadata", {{"total_size", 0}}}, {"weight_map", m}}, Overwrite::replace);
        return error_of([&] { load_checkpoint(dir); });
    };
    json moved = map;
    moved["model.norm.weight"] = moved["model.norm.weight"] == "model-00001-of-00002.safetensors"
                                     ? "model-00002-of-00002.safetensors"
                                     : "model-00001-of-00002.safetensors";
    EXPECT_NE(with_index(moved).find("tensor 'model.norm.weight' is listed in"), std::string::npos);
    json unlisted = map;
    unlisted.erase("model.layers.1.mlp.up_proj.weight");
    EXPECT_NE(with_index(unlisted).find("tensor 'model.layers.1.mlp.up_proj.weight' is not listed in"),
              std::string::npos);
    json phantom = map;
    phantom["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors";
    EXPECT_NE(with_index(phantom).find("lists tensor 'model.layers.9.mlp.up_proj.weight'"), std::string::npos);
    json escape = map;
    escape["model.norm.weight"] = "../elsewhere.safetensors";
    EXPECT_NE(with_index(escape).find("must be a plain file name"), std::string::npos);
    json missing = map;
    missing["model.norm.weight"] = "model-00003-of-00002.safetensors";
    EXPECT_NE(with_index(missing).find("model-00003-of-00002.safetensors"), std::string::npos);
    with_index(map);
    EXPECT_EQ(checkpoint_sha256(dir), sha);
    fs::remove_all(root);
}

// ---------------------------------------------------------------- loading errors

TEST(CheckpointErrors, ShapeMismatchNamesTensorExpectedAndActual) {
    fs::path root = temp_dir("shape");
    Qwen2Weights w = small_weights();
    HandWritten h = hand_tensors(w, "BF16");
    for (auto& t : h.tensors)
        if (t.name == "model.layers.1.self_attn.q_proj.weight") t.shape = {8, 128};  // same bytes, wrong shape
    write_folder(root / "ck", w.config, h.tensors);
    std::string msg = error_of([&] { load_checkpoint(root / "ck"); });
    EXPECT_NE(msg.find("model.safetensors: tensor 'model.layers.1.self_attn.q_proj.weight' has shape [8, 128]; "
                       "expected [32, 32]"),
              std::string::npos)
        << msg;
    fs::remove_all(root);
}

TEST(CheckpointErrors, MissingExtraAndWrongDtype) {
    fs::path root = temp_dir("missing");
    Qwen2Weights w = small_weights();
    {
        HandWritten h = hand_tensors(w, "BF16");
        std::erase_if(h.tensors,
                      [](const TensorToWrite& t) { return t.name == "model.layers.0.self_attn.v_proj.bias"; });
        write_folder(root / "missing", w.config, h.tensors);
        std::string msg = error_of([&] { load_checkpoint(root / "missing"); });
        EXPECT_NE(msg.find("tensor 'model.layers.0.self_attn.v_proj.bias' is missing (expected shape [16])"),
                  std::string::npos)
            << msg;
    }
    {
        HandWritten h = hand_tensors(w, "BF16");
        std::vector<float> extra(4, 0.f);
        h.tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq",
                             "F32",
                             {4},
                             {reinterpret_cast<const char*>(extra.data()), 16}});
        write_folder(root / "extra", w.config, h.tensors);
        std::string msg = error_of([&] { load_checkpoint(root / "extra"); });
        EXPECT_NE(msg.find("unexpected tensor 'model.layers.0.self_attn.rotary_emb.inv_freq' (shape [4])"),
                  std::string::npos)
            << msg;
    }
    {
        HandWritten h = hand_tensors(w, "BF16");
        for (auto& t : h.tensors)
            if (t.name == "model.norm.weight") t.dtype = "I16";
        write_folder(root / "dtype", w.config, h.tensors);
        std::string msg = error_of([&] { load_checkpoint(root / "dtype"); });
        EXPECT_NE(msg.find("tensor 'model.norm.weight' has dtype I16; expected BF16, F16 or F32"), std::string::npos)
            << msg;
    }
    {  // untied config: lm_head.weight is required
        Qwen2Weights u = small_weights(false);
        HandWritten h = hand_tensors(u, "BF16");
        h.tensors.pop_back();
        write_folder(root / "nohead", u.config, h.tensors);
        EXPECT_NE(error_of([&] { load_checkpoint(root / "nohead"); }).find("tensor 'lm_head.weight' is missing"),
                  std::string::npos);
    }
    EXPECT_NE(error_of([&] { load_checkpoint(root / "nowhere"); }).find("does not exist"), std::string::npos);
    fs::create_directories(root / "empty");
    write_json_atomic(root / "empty" / "config.json", w.config.to_json());
    EXPECT_NE(error_of([&] { load_checkpoint(root / "empty"); }).find("neither model.safetensors nor"),
              std::string::npos);
    fs::remove_all(root);
}

TEST(CheckpointErrors, TiedLmHeadMustEqualTheEmbedding) {
    // Decision: a stored lm_head.weight under tied embeddings is accepted and
    // dropped when it equals the embedding; a different one is an error.
    fs::path root = temp_dir("tied");
    Qwen2Weights w = small_weights(true);
    HandWritten h = hand_tensors(w, "BF16");
    std::string_view embed = h.tensors.front().bytes;
    ASSERT_EQ(h.tensors.front().name, "model.embed_tokens.weight");
    h.tensors.push_back({"lm_head.weight", "BF16", {96, 32}, embed});
    write_folder(root / "same", w.config, h.tensors);
    Qwen2Weights back = load_checkpoint(root / "same");
    expect_same_weights(w, back);
    EXPECT_TRUE(back.lm_head.b.empty());

    std::string changed(embed);
    changed[2 * (50 * 32 + 7)] ^= 1;  // row 50
    h.tensors.back().bytes = changed;
    write_folder(root / "differs", w.config, h.tensors);
    std::string msg = error_of([&] { load_checkpoint(root / "differs"); });
    EXPECT_NE(msg.find("'lm_head.weight' differs from 'model.embed_tokens.weight'"), std::string::npos) << msg;
    fs::remove_all(root);
}

TEST(CheckpointErrors, FailedLoadChangesNothing) {
    fs::path root = temp_dir("failedload");
    Qwen2Weights w = small_weights();
    save_checkpoint(root / "ck", w, {}, json(nullptr));
    // Truncate the weights: the load fails naming the file, nothing on disk changes.
    std::string bytes = read_file(root / "ck" / "model.safetensors");
    write_file_atomic(root / "ck" / "model.safetensors", bytes.substr(0, bytes.size() - 10), Overwrite::replace);
    auto before = snapshot(root);
    std::string msg = error_of([&] { load_checkpoint(root / "ck"); });
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_EQ(snapshot(root), before);
    // A corrupt config.json: named, nothing changes.
    write_file_atomic(root / "ck" / "config.json", "{\"model_type\": \"qwen2\",", Overwrite::replace);
    before = snapshot(root);
    EXPECT_NE(error_of([&] { load_checkpoint(root / "ck"); }).find("config.json"), std::string::npos);
    EXPECT_EQ(snapshot(root), before);
    fs::remove_all(root);
}

// ---------------------------------------------------------------- saving errors

TEST(CheckpointErrors, FailedSaveChangesNothing) {
    fs::path root = temp_dir("failedsave");
    fs::path tok = make_tokenizer(root / "tok");
    Qwen2Weights w = small_weights();
    save_checkpoint(root / "ck", w, tok, json::object());
    auto before = snapshot(root);
    // Existing folder (even an empty one) is refused and left as it was.
    Qwen2Weights other = small_weights(true, WeightType::bf16, 2);
    EXPECT_NE(error_of([&] { save_checkpoint(root / "ck", other, tok, json::object()); }).find("refusing to overwrite"),
              std::string::npos);
    EXPECT_EQ(snapshot(root), before);
    fs::create_directories(root / "empty");
    before = snapshot(root);
    EXPECT_THROW(save_checkpoint(root / "empty", other, tok, json::object()), Error);
    EXPECT_EQ(snapshot(root), before);
    // Inconsistent weights, a missing tokenizer, a bad generation config:
    // an error, and no folder (not even a hidden partial one) appears.
    Qwen2Weights bad = small_weights();
    bad.layers[1].v_bias.pop_back();
    std::string msg = error_of([&] { save_checkpoint(root / "new", bad, tok, json::object()); });
    EXPECT_NE(msg.find("tensor 'model.layers.1.self_attn.v_proj.bias' has 15 values; expected [16]"), std::string::npos)
        << msg;
    EXPECT_NE(
        error_of([&] { save_checkpoint(root / "new", w, root / "no-tokenizer", json::object()); }).find("no-tokenizer"),
        std::string::npos);
    EXPECT_THROW(save_checkpoint(root / "new", w, tok, json::array()), Error);
    EXPECT_EQ(snapshot(root), before);
    // A failure in the middle of writing (the tokenizer folder becomes
    // unreadable after validation) removes the partial folder.
    fs::create_directories(root / "tok2");
    fs::create_directories(root / "tok2" / "tokenizer.json");  // a folder where a file should be
    before = snapshot(root);
    EXPECT_THROW(save_checkpoint(root / "new", w, root / "tok2", json::object()), Error);
    EXPECT_EQ(snapshot(root), before);
    fs::remove_all(root);
}

// ---------------------------------------------------------------- identity

TEST(Checkpoint, Sha256IsStableAndCoversWeights) {
    fs::path root = temp_dir("sha");
    fs::path tok = make_tokenizer(root / "tok");
    Qwen2Weights w = small_weights();
    save_checkpoint(root / "a", w, tok, json::object());
    save_checkpoint(root / "b", w, {}, json(nullptr));  // no tokenizer: same identity
    std::string a = checkpoint_sha256(root / "a");
    EXPECT_EQ(a.size(), 64u);
    EXPECT_EQ(a, checkpoint_sha256(root / "a"));
    EXPECT_EQ(a, checkpoint_sha256(root / "b"));
    Qwen2Weights v = w;
    v.layers[0].o_proj.b[5] ^= 1;
    save_checkpoint(root / "c", v, tok, json::object());
    EXPECT_NE(checkpoint_sha256(root / "c"), a);
    Qwen2Weights u = w;
    u.config.rope_theta = 5e5;
    save_checkpoint(root / "d", u, tok, json::object());
    EXPECT_NE(checkpoint_sha256(root / "d"), a);
    fs::remove_all(root);
}

TEST(Checkpoint, TokenizerVocabSize) {
    fs::path real = qwen_model() / "tokenizer.json";
    ASSERT_TRUE(fs::exists(real)) << real;
    EXPECT_EQ(tokenizer_vocab_size(real), 151665);  // 151643 BPE tokens + 22 added (up to id 151664)
    fs::path root = temp_dir("vocab");
    EXPECT_EQ(tokenizer_vocab_size(make_tokenizer(root) / "tokenizer.json"), 71);
    write_json_atomic(root / "empty.json", json::object());
    EXPECT_NE(error_of([&] { tokenizer_vocab_size(root / "empty.json"); }).find("empty.json: no tokens found"),
              std::string::npos);
    fs::remove_all(root);
}

// ---------------------------------------------------------------- init-random CLI

TEST(InitRandomCli, TinyRoundTrip) {
    fs::path root = temp_dir("cli");
    fs::path tok = make_tokenizer(root / "tok");
    std::string out;
    ASSERT_EQ(
        run_cli("init-random --preset tiny --out " + (root / "ck").string() + " --seed 11 --tokenizer " + tok.string(),
                out),
        0)
        << out;
    EXPECT_NE(out.find("model.safetensors"), std::string::npos) << out;
    Qwen2Weights back = load_checkpoint(root / "ck");
    // tiny shape with the tokenizer's 71 tokens rounded up to 128; ChatML ids from the tokenizer.
    Qwen2Config want = model_shape("tiny");
    want.vocab_size = 128;
    want.bos_token_id = 68;
    want.eos_token_id = 70;
    EXPECT_EQ(back.config, want);
    InitOptions o;
    o.seed = 11;
    expect_same_weights(random_weights(want, o), back);
    EXPECT_EQ(read_file(root / "ck" / "tokenizer.json"), read_file(tok / "tokenizer.json"));
    EXPECT_EQ(read_json_file(root / "ck" / "generation_config.json")["eos_token_id"], 70);
    EXPECT_NE(out.find(checkpoint_sha256(root / "ck")), std::string::npos) << out;

    // Refuses an existing folder, changing nothing.
    auto before = snapshot(root);
    EXPECT_NE(
        run_cli("init-random --preset tiny --out " + (root / "ck").string() + " --tokenizer " + tok.string(), out), 0);
    EXPECT_NE(out.find("refusing"), std::string::npos) << out;
    EXPECT_EQ(snapshot(root), before);
    // Unknown preset, missing tokenizer: errors, nothing written.
    EXPECT_NE(run_cli("init-random --preset huge --out " + (root / "x").string() + " --tokenizer " + tok.string(), out),
              0);
    EXPECT_NE(out.find("huge"), std::string::npos) << out;
    EXPECT_NE(run_cli("init-random --preset tiny --out " + (root / "x").string(), out), 0);
    EXPECT_NE(out.find("--tokenizer"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(root / "x"));
    fs::remove_all(root);
}

TEST(InitRandomCli, TinyWithTheQwenTokenizer) {
    // The committed Qwen2.5 tokenizer folder: vocab 151665 → 151680 (multiple of 64),
    // its own generation_config.json and tokenizer files copied.
    fs::path root = temp_dir("cliqwen");
    std::string out;
    ASSERT_EQ(
        run_cli("init-random --preset tiny --out " + (root / "ck").string() + " --tokenizer " + qwen_model().string(),
                out),
        0)
        << out;
    Qwen2Weights back = load_checkpoint(root / "ck");
    EXPECT_EQ(back.config.vocab_size, 151680);
    EXPECT_EQ(back.config.eos_token_id, 151645);
    EXPECT_EQ(back.config.bos_token_id, 151643);
    EXPECT_EQ(back.config.hidden_size, 256);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"})
        EXPECT_EQ(read_file(root / "ck" / f), read_file(qwen_model() / f)) << f;
    EXPECT_EQ(read_json_file(root / "ck" / "generation_config.json"),
              read_json_file(qwen_model() / "generation_config.json"));
    fs::remove_all(root);
}
