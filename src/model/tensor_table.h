// tensor_table.h — the one list of a Qwen2 model's tensors and of the
// projections LoRA may adapt.
//
// kLayerTensors names the twelve tensors of a layer once, in checkpoint
// order, with the LayerWeights member each fills, its shape in terms of the
// config, its kind and, for the seven projections, the Proj it is.
// qwen2_tensor_table adds the model-level tensors around the layers. Every
// walker of the weights follows this order: checkpoint loading and saving,
// gradients-like buffers, the BF16 copy, parameter lists, random init (so
// the random streams follow it too), frozen layouts and identities.
//
// kProjections is the one LoRA target list: the projections of a layer in
// the order q, k, v, o, gate, up, down, named as Hugging Face and PEFT name
// them.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace ppolab {

// ---------------------------------------------------------------- projections (LoRA targets)

// The seven projections of a Qwen2 layer, in checkpoint order.
enum class Proj { q, k, v, o, gate, up, down };
inline constexpr int kNumProj = 7;

struct ProjectionInfo {
    Proj proj;
    const char* name;    // "q_proj": the module name (HF, PEFT target_modules)
    const char* module;  // "self_attn" or "mlp": the block holding it
    Matrix LayerWeights::*weight;
};
inline constexpr std::array<ProjectionInfo, kNumProj> kProjections = {{
    {Proj::q, "q_proj", "self_attn", &LayerWeights::q_proj},
    {Proj::k, "k_proj", "self_attn", &LayerWeights::k_proj},
    {Proj::v, "v_proj", "self_attn", &LayerWeights::v_proj},
    {Proj::o, "o_proj", "self_attn", &LayerWeights::o_proj},
    {Proj::gate, "gate_proj", "mlp", &LayerWeights::gate_proj},
    {Proj::up, "up_proj", "mlp", &LayerWeights::up_proj},
    {Proj::down, "down_proj", "mlp", &LayerWeights::down_proj},
}};

inline const ProjectionInfo& projection(Proj p) { return kProjections[static_cast<size_t>(p)]; }
inline const char* proj_name(Proj p) { return projection(p).name; }      // "q_proj", …, "down_proj"
inline const char* proj_module(Proj p) { return projection(p).module; }  // "self_attn" or "mlp"
// The projection of this exact module name ("q_proj"); nullopt otherwise.
std::optional<Proj> find_projection(const std::string& name);
Proj proj_from_name(const std::string& name);  // "q_proj" or "q"; Error otherwise
// Every projection's module name, in order: the default LoRA targets.
std::vector<std::string> projection_names();
std::string projection_names_joined();  // "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"
int64_t proj_in_features(const Qwen2Config& c, Proj p);
int64_t proj_out_features(const Qwen2Config& c, Proj p);

// ---------------------------------------------------------------- the tensors of a layer

enum class TensorKind {
    matrix,  // a projection weight: BF16 or FP32 (weights.h), random N(0, stddev) at init
    bias,    // FP32, zero at init
    norm,    // an RMSNorm weight, FP32, one at init
};

// A dimension of the config, so that the table is constant.
enum class Dim { hidden, q, kv, intermediate, vocab };
int64_t dim_size(const Qwen2Config& c, Dim d);

struct LayerTensor {
    const char* suffix;  // after "model.layers.{i}.": "self_attn.q_proj.weight"
    TensorKind kind;
    Matrix LayerWeights::*matrix;              // set for kind == matrix
    std::vector<float> LayerWeights::*vector;  // set otherwise
    Dim rows;                                  // shape [rows, cols] for a matrix, [rows] otherwise
    Dim cols;
    std::optional<Proj> proj;  // the projection a matrix is (every matrix of a layer is a LoRA target)
};
inline constexpr std::array<LayerTensor, 12> kLayerTensors = {{
    {"input_layernorm.weight", TensorKind::norm, nullptr, &LayerWeights::input_layernorm, Dim::hidden, Dim::hidden, {}},
    {"self_attn.q_proj.weight", TensorKind::matrix, &LayerWeights::q_proj, nullptr, Dim::q, Dim::hidden, Proj::q},
    {"self_attn.q_proj.bias", TensorKind::bias, nullptr, &LayerWeights::q_bias, Dim::q, Dim::q, {}},
    {"self_attn.k_proj.weight", TensorKind::matrix, &LayerWeights::k_proj, nullptr, Dim::kv, Dim::hidden, Proj::k},
    {"self_attn.k_proj.bias", TensorKind::bias, nullptr, &LayerWeights::k_bias, Dim::kv, Dim::kv, {}},
    {"self_attn.v_proj.weight", TensorKind::matrix, &LayerWeights::v_proj, nullptr, Dim::kv, Dim::hidden, Proj::v},
    {"self_attn.v_proj.bias", TensorKind::bias, nullptr, &LayerWeights::v_bias, Dim::kv, Dim::kv, {}},
    {"self_attn.o_proj.weight", TensorKind::matrix, &LayerWeights::o_proj, nullptr, Dim::hidden, Dim::q, Proj::o},
    {"post_attention_layernorm.weight",
     TensorKind::norm,
     nullptr,
     &LayerWeights::post_attention_layernorm,
     Dim::hidden,
     Dim::hidden,
     {}},
    {"mlp.gate_proj.weight", TensorKind::matrix, &LayerWeights::gate_proj, nullptr, Dim::intermediate, Dim::hidden,
     Proj::gate},
    {"mlp.up_proj.weight", TensorKind::matrix, &LayerWeights::up_proj, nullptr, Dim::intermediate, Dim::hidden,
     Proj::up},
    {"mlp.down_proj.weight", TensorKind::matrix, &LayerWeights::down_proj, nullptr, Dim::hidden, Dim::intermediate,
     Proj::down},
}};

// ---------------------------------------------------------------- the tensors of a model

struct TensorSpec {
    std::string hf_name;         // "model.layers.3.self_attn.q_proj.weight"
    std::vector<int64_t> shape;  // [rows, cols] for a matrix, [n] for a norm or bias
    TensorKind kind = TensorKind::matrix;
    int64_t layer = -1;  // index into Qwen2Weights::layers; -1 for model-level tensors
    // Exactly one of these four is set: the field the tensor fills.
    Matrix LayerWeights::*layer_matrix = nullptr;
    std::vector<float> LayerWeights::*layer_vector = nullptr;
    Matrix Qwen2Weights::*model_matrix = nullptr;
    std::vector<float> Qwen2Weights::*model_vector = nullptr;
    std::optional<Proj> proj = std::nullopt;  // the projection (LoRA target) a layer matrix is

    bool is_matrix() const { return layer_matrix || model_matrix; }
    Matrix* matrix(Qwen2Weights& w) const;  // nullptr for a vector
    const Matrix* matrix(const Qwen2Weights& w) const;
    std::vector<float>* vector(Qwen2Weights& w) const;  // nullptr for a matrix
    const std::vector<float>* vector(const Qwen2Weights& w) const;
    int64_t numel() const;
};

// Every tensor of a checkpoint of this config, in checkpoint order:
// model.embed_tokens.weight, the layers' kLayerTensors, model.norm.weight,
// then lm_head.weight unless the embeddings are tied.
std::vector<TensorSpec> qwen2_tensor_table(const Qwen2Config& config);

// Freezes (Matrix::freeze) the matrices a frozen base multiplies with: every
// projection of every layer and the output matrix (the embedding when tied).
void freeze_base_matrices(Qwen2Weights& w);

// Error naming `where` unless w holds config.num_hidden_layers layers (the
// table's specs index into them).
void check_layer_count(const Qwen2Weights& w, const std::string& where);

}  // namespace ppolab
