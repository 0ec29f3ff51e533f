// The tensor table (model/tensor_table.h) as the one truth about a Qwen2
// model's tensors: names and shapes of a Qwen2.5-0.5B checkpoint, every
// walker of the weights (loading, gradients, the BF16 copy, parameter lists,
// random init) following it, and random init producing the bytes pinned
// before the table existed (so the random streams did not move).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/matmul_backend.h"
#include "kernels/matmul_reference.h"
#include "model/hf_folder.h"
#include "model/init.h"
#include "model/lora.h"
#include "model/qwen2.h"
#include "model/tensor_table.h"
#include "support/test_support.h"
#include "util/fileio.h"
#include "util/rng.h"
#include "util/sha256.h"

using namespace ppolab;

namespace {

Qwen2Config small_config(bool tied) {
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

// sha256 over every field of the weights, spelled out here in checkpoint
// order (independent of the table under test).
std::string weights_sha256(const Qwen2Weights& w) {
    Sha256 h;
    auto mat = [&](const Matrix& m) {
        if (m.type == WeightType::bf16) h.update(m.b.data(), m.b.size() * sizeof(bf16));
        else h.update(m.f.data(), m.f.size() * sizeof(float));
    };
    auto vec = [&](const std::vector<float>& v) { h.update(v.data(), v.size() * sizeof(float)); };
    mat(w.embed_tokens);
    for (const LayerWeights& L : w.layers) {
        vec(L.input_layernorm);
        mat(L.q_proj);
        vec(L.q_bias);
        mat(L.k_proj);
        vec(L.k_bias);
        mat(L.v_proj);
        vec(L.v_bias);
        mat(L.o_proj);
        vec(L.post_attention_layernorm);
        mat(L.gate_proj);
        mat(L.up_proj);
        mat(L.down_proj);
    }
    vec(w.norm);
    mat(w.lm_head);
    return h.hex();
}

}  // namespace

// Pinned with the code before the table existed (d08a750: random_weights
// spelled out the fields), seed 5, the small shape above.
TEST(TensorTable, RandomInitGivesThePinnedBytes) {
    struct Pin {
        bool tied;
        WeightType type;
        bool randomize;
        const char* sha256;
    };
    const Pin pins[] = {
        {true, WeightType::bf16, false, "b060665803fcbc39eabe41688d3f3e7af10c530c1f8d0987b559edd5604ea96a"},
        {true, WeightType::bf16, true, "61e6a03064cd4f4e8a6603170a58453851fa42ee2c455f9299b844d083b69e20"},
        {true, WeightType::f32, false, "b1f916ceac5d6bca0d56b71d783602195d57118ffa7053d9b309a976b6c4d38e"},
        {true, WeightType::f32, true, "5a17293ae9b1b9c4e3f17946460ab033cec96cb5ad5b247f13638f5eb5520aa6"},
        {false, WeightType::bf16, false, "5ae01e9729b88fe589008ef4ecb3162e58b2d9a9e427a28d3741bfe31b3a633e"},
        {false, WeightType::bf16, true, "7e5c65a46b066608bacfa3caf31ee144e88e88ec5ae45f0934a67694f2991c26"},
        {false, WeightType::f32, false, "8e2ad6feb011f02ab841e08cefe762e98de618007551518efbc35e45b9fcc0a2"},
        {false, WeightType::f32, true, "086b478eb7fe71965dd00d78b8292de719e03ca1a9a29c74389f284dd83e6009"},
    };
    for (const Pin& pin : pins) {
        InitOptions o;
        o.seed = 5;
        o.matrices = pin.type;
        o.randomize_norms_and_biases = pin.randomize;
        EXPECT_EQ(weights_sha256(random_weights(small_config(pin.tied), o)), pin.sha256)
            << "tied " << pin.tied << ", FP32 " << (pin.type == WeightType::f32) << ", randomized " << pin.randomize;
    }
}

// `ppolab init-random` writes the same checkpoint bytes as the binary before
// the table (d08a750: checkpoint sha256 printed by that binary).
TEST(TensorTable, InitRandomCheckpointIsThePinnedOne) {
    const fs::path out = fs::temp_directory_path() / ("ppolab_test_tensor_table_" + std::to_string(::getpid()));
    fs::remove_all(out);
    const auto r = test::run_shell(test::ppolab_binary() + " init-random --preset tiny --seed 7 --out " + out.string() +
                                   " --tokenizer " + test::qwen_model_dir().string());
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(checkpoint_sha256(out), "4300b7dd05ccd5359ef6f78935af833b2af490283ae7f3931abfa00729964f1c");
    fs::remove_all(out);
}

// The Qwen2.5-0.5B-Instruct checkpoint as Hugging Face writes it: each
// tensor once, named and shaped as below (spelled out here, from
// modeling_qwen2's state dict), in checkpoint order.
TEST(TensorTable, EveryTensorOfTheSeedCheckpointOnceWithItsNameAndShape) {
    const fs::path config_path = test::qwen_model_dir() / "config.json";
    const Qwen2Config c = Qwen2Config::from_json(read_json_file(config_path), config_path.string());
    ASSERT_EQ(c.hidden_size, 896);
    const int64_t H = 896, Q = 14 * 64, KV = 2 * 64, I = 4864, V = 151936;
    struct Want {
        std::string name;
        std::vector<int64_t> shape;
        TensorKind kind;
        const char* proj;  // nullptr: not a projection
    };
    std::vector<Want> want = {{"model.embed_tokens.weight", {V, H}, TensorKind::matrix, nullptr}};
    for (int l = 0; l < 24; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        std::vector<Want> layer = {
            {p + "input_layernorm.weight", {H}, TensorKind::norm, nullptr},
            {p + "self_attn.q_proj.weight", {Q, H}, TensorKind::matrix, "q_proj"},
            {p + "self_attn.q_proj.bias", {Q}, TensorKind::bias, nullptr},
            {p + "self_attn.k_proj.weight", {KV, H}, TensorKind::matrix, "k_proj"},
            {p + "self_attn.k_proj.bias", {KV}, TensorKind::bias, nullptr},
            {p + "self_attn.v_proj.weight", {KV, H}, TensorKind::matrix, "v_proj"},
            {p + "self_attn.v_proj.bias", {KV}, TensorKind::bias, nullptr},
            {p + "self_attn.o_proj.weight", {H, Q}, TensorKind::matrix, "o_proj"},
            {p + "post_attention_layernorm.weight", {H}, TensorKind::norm, nullptr},
            {p + "mlp.gate_proj.weight", {I, H}, TensorKind::matrix, "gate_proj"},
            {p + "mlp.up_proj.weight", {I, H}, TensorKind::matrix, "up_proj"},
            {p + "mlp.down_proj.weight", {H, I}, TensorKind::matrix, "down_proj"},
        };
        want.insert(want.end(), layer.begin(), layer.end());
    }
    want.push_back({"model.norm.weight", {H}, TensorKind::norm, nullptr});  // tied: no lm_head.weight
    const std::vector<TensorSpec> table = qwen2_tensor_table(c);
    ASSERT_EQ(table.size(), want.size());
    std::set<std::string> names;
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(table[i].hf_name, want[i].name) << i;
        EXPECT_EQ(table[i].shape, want[i].shape) << want[i].name;
        EXPECT_EQ(table[i].kind, want[i].kind) << want[i].name;
        EXPECT_EQ(table[i].proj.has_value(), want[i].proj != nullptr) << want[i].name;
        if (table[i].proj && want[i].proj) {
            EXPECT_STREQ(proj_name(*table[i].proj), want[i].proj) << want[i].name;
        }
        EXPECT_TRUE(names.insert(table[i].hf_name).second) << "twice: " << table[i].hf_name;
    }
}

// Gradients-like buffers, the BF16 copy and the parameter list reach the
// table's tensors, in its order, with its shapes.
TEST(TensorTable, EveryWalkerOfTheWeightsFollowsTheTable) {
    for (bool tied : {true, false}) {
        InitOptions o;
        o.seed = 3;
        o.matrices = WeightType::f32;
        o.randomize_norms_and_biases = true;
        Qwen2Weights w = random_weights(small_config(tied), o);
        Qwen2Weights g = qwen2_grads_like(w);
        Qwen2Weights c;
        qwen2_bf16_copy(w, c);
        const std::vector<TensorSpec> table = qwen2_tensor_table(w.config);
        const ParamList params = qwen2_parameters(w, &g);
        ASSERT_EQ(params.size(), table.size());
        std::set<const float*> seen;
        for (size_t i = 0; i < table.size(); ++i) {
            const TensorSpec& s = table[i];
            EXPECT_EQ(params[i].name, s.hf_name);
            EXPECT_EQ(params[i].shape, s.shape) << s.hf_name;
            EXPECT_TRUE(seen.insert(params[i].data).second) << s.hf_name;
            if (const Matrix* m = s.matrix(w)) {
                EXPECT_EQ(params[i].data, m->f.data()) << s.hf_name;
                EXPECT_EQ(params[i].grad, s.matrix(g)->f.data()) << s.hf_name;
                EXPECT_EQ(s.matrix(g)->f, std::vector<float>(m->f.size(), 0.f)) << s.hf_name;
                const Matrix& b = *s.matrix(c);
                ASSERT_EQ(b.type, WeightType::bf16) << s.hf_name;
                ASSERT_EQ(b.b.size(), m->f.size()) << s.hf_name;
                for (size_t k = 0; k < b.b.size(); ++k)
                    ASSERT_EQ(b.b[k], float_to_bf16(m->f[k])) << s.hf_name << " " << k;
            } else {
                const std::vector<float>& v = *s.vector(w);
                EXPECT_EQ(params[i].data, v.data()) << s.hf_name;
                EXPECT_EQ(params[i].grad, s.vector(g)->data()) << s.hf_name;
                EXPECT_EQ(*s.vector(g), std::vector<float>(v.size(), 0.f)) << s.hf_name;
                EXPECT_EQ(*s.vector(c), v) << s.hf_name;
            }
        }
        EXPECT_EQ(w.lm_head.numel(), tied ? 0 : w.embed_tokens.numel());
    }
    Qwen2Weights short_of_layers = random_weights(small_config(true), InitOptions{});
    short_of_layers.layers.pop_back();
    const std::string msg = test::error_of([&] { qwen2_parameters(short_of_layers, nullptr); });
    EXPECT_NE(msg.find("weights have 1 layers; config says 2"), std::string::npos) << msg;
}

// One LoRA target list: the defaults, the names accepted and the adapters'
// parameter order all come from kProjections.
TEST(TensorTable, LoraTargetsAreTheTablesProjections) {
    const std::vector<std::string> all = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    EXPECT_EQ(projection_names(), all);
    EXPECT_EQ(LoraConfig{}.targets, all);
    EXPECT_EQ(projection_names_joined(), "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
    for (size_t i = 0; i < all.size(); ++i) {
        EXPECT_EQ(find_projection(all[i]), static_cast<Proj>(i));
        EXPECT_EQ(proj_from_name(all[i].substr(0, all[i].size() - 5)), static_cast<Proj>(i));
        EXPECT_STREQ(proj_module(static_cast<Proj>(i)), i < 4 ? "self_attn" : "mlp");
    }
    EXPECT_FALSE(find_projection("q"));
    EXPECT_FALSE(find_projection("lm_head"));
    EXPECT_NE(test::error_of([] { proj_from_name("qkv"); }).find("expected one of q_proj, k_proj"), std::string::npos);
    // Each projection is the layer matrix of the same name, with its features.
    const Qwen2Config c = small_config(true);
    LoraAdapters lora(c, LoraConfig{}, 1);
    const ParamList params = lora.parameters();
    ASSERT_EQ(params.size(), 2u * kNumProj * 2u);
    size_t i = 0;
    for (const TensorSpec& s : qwen2_tensor_table(c)) {
        if (!s.proj) continue;
        ASSERT_EQ(s.hf_name.substr(s.hf_name.size() - 7), ".weight");
        const std::string base = s.hf_name.substr(0, s.hf_name.size() - 7);
        EXPECT_NE(base.find(std::string(".") + proj_module(*s.proj) + "." + proj_name(*s.proj)), std::string::npos);
        EXPECT_EQ(s.shape, (std::vector<int64_t>{proj_out_features(c, *s.proj), proj_in_features(c, *s.proj)}));
        EXPECT_EQ(params[i].name, base + ".lora_A");
        EXPECT_EQ(params[i + 1].name, base + ".lora_B");
        i += 2;
    }
    EXPECT_EQ(i, params.size());
}

// ---------------------------------------------------------------- frozen matrices

namespace {

// A BF16 matrix of small integers and inputs of small integers: every
// product is exact, whatever the summation order of the path.
Matrix integer_matrix(int64_t rows, int64_t cols, uint64_t seed) {
    Philox rng(seed, 0);
    Matrix m;
    m.rows = rows;
    m.cols = cols;
    for (int64_t i = 0; i < rows * cols; ++i)
        m.b.push_back(float_to_bf16(static_cast<float>(static_cast<int64_t>(rng.below(5)) - 2)));
    return m;
}

std::vector<float> integer_inputs(int64_t n, uint64_t seed) {
    Philox rng(seed, 1);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = static_cast<float>(static_cast<int64_t>(rng.below(7)) - 3);
    return x;
}

// Y = X Wᵀ through the oneDNN path, the one that reads prepacked copies.
std::vector<float> product(const Matrix& W, const std::vector<float>& X, int64_t M) {
    std::vector<float> y(static_cast<size_t>(M * W.rows));
    matmul_detail::dnnl_forward(y.data(), X.data(), W.view(), M, false);
    return y;
}

std::vector<float> reference(const Matrix& W, const std::vector<float>& X, int64_t M) {
    std::vector<float> y(static_cast<size_t>(M * W.rows));
    Matrix plain;  // a copy: never frozen
    plain = W;
    linear_forward_reference(y.data(), X.data(), plain.view(), M);
    return y;
}

}  // namespace

// The case an address-keyed registry of frozen weights got wrong: a frozen
// matrix given new values in the same buffer (or freed, and its memory
// reused) must not be read through the old prepacked copy.
TEST(FrozenMatrix, NewValuesInTheSameBufferAreNeverReadStale) {
    const int64_t N = 96, K = 160, M = 64;
    const std::vector<float> X = integer_inputs(M * K, 1);
    Matrix m = integer_matrix(N, K, 1);
    m.freeze();
    ASSERT_TRUE(m.frozen());
    EXPECT_EQ(product(m, X, M), reference(m, X, M));
    ASSERT_GT(m.frozen_layouts.get()->bytes(), 0) << "the frozen path did not run";
    const bf16* buffer = m.b.data();
    const Matrix other = integer_matrix(N, K, 2);
    m = other;  // copy-assigned: same size, so the same buffer holds the new values
    ASSERT_EQ(m.b.data(), buffer);
    EXPECT_FALSE(m.frozen());
    EXPECT_EQ(product(m, X, M), reference(other, X, M));
    // Freed and re-created: whatever address the new one gets, it is not frozen.
    {
        Matrix gone = integer_matrix(N, K, 3);
        gone.freeze();
        EXPECT_EQ(product(gone, X, M), reference(gone, X, M));
    }
    Matrix fresh = integer_matrix(N, K, 4);
    EXPECT_FALSE(fresh.frozen());
    EXPECT_EQ(product(fresh, X, M), reference(fresh, X, M));
}

TEST(FrozenMatrix, MovesKeepTheCopiesCopiesStartUnfrozen) {
    const int64_t N = 96, K = 160, M = 64;
    const std::vector<float> X = integer_inputs(M * K, 5);
    Matrix m = integer_matrix(N, K, 5);
    m.freeze();
    const std::vector<float> want = reference(m, X, M);
    EXPECT_EQ(product(m, X, M), want);
    const PrepackedWeight* packed = m.frozen_layouts.get();
    Matrix moved = std::move(m);
    EXPECT_EQ(moved.frozen_layouts.get(), packed);
    EXPECT_TRUE(packed->matches(moved.view()));
    EXPECT_EQ(product(moved, X, M), want);
    Matrix copy = moved;
    EXPECT_FALSE(copy.frozen());
    EXPECT_EQ(product(copy, X, M), want);
    // A buffer that moves (growing past its capacity) no longer matches: read unpacked.
    moved.b.resize(moved.b.capacity() * 4);
    moved.b.resize(static_cast<size_t>(N * K));
    EXPECT_FALSE(packed->matches(moved.view()));
    EXPECT_EQ(product(moved, X, M), want);
    moved.unfreeze();
    EXPECT_FALSE(moved.frozen());
    // FP32 and empty matrices are never frozen.
    Matrix f32;
    f32.type = WeightType::f32;
    f32.rows = 2;
    f32.cols = 2;
    f32.f.assign(4, 1.f);
    f32.freeze();
    EXPECT_FALSE(f32.frozen());
    Matrix empty;
    empty.freeze();
    EXPECT_FALSE(empty.frozen());
}

// freeze_base_matrices freezes exactly what a frozen base multiplies with.
TEST(FrozenMatrix, FreezeBaseMatricesFreezesTheProjectionsAndTheOutputMatrix) {
    for (bool tied : {true, false}) {
        Qwen2Weights w = random_weights(small_config(tied), InitOptions{});
        freeze_base_matrices(w);
        for (const TensorSpec& s : qwen2_tensor_table(w.config)) {
            const Matrix* m = s.matrix(w);
            if (!m) continue;
            const bool want = s.proj.has_value() || m == &w.output_matrix();
            EXPECT_EQ(m->frozen(), want) << s.hf_name << (tied ? " (tied)" : "");
        }
    }
}
