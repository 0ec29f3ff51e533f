#include "model/tensor_table.h"

#include "util/error.h"

namespace ppolab {

// ---------------------------------------------------------------- projections

std::optional<Proj> find_projection(const std::string& name) {
    for (const ProjectionInfo& p : kProjections)
        if (name == p.name) return p.proj;
    return std::nullopt;
}

Proj proj_from_name(const std::string& name) {
    if (auto p = find_projection(name)) return *p;
    if (auto p = find_projection(name + "_proj")) return *p;
    fail("LoRA target '", name, "': expected one of ", projection_names_joined());
}

std::vector<std::string> projection_names() {
    std::vector<std::string> names;
    for (const ProjectionInfo& p : kProjections) names.emplace_back(p.name);
    return names;
}

std::string projection_names_joined() {
    std::string out;
    for (const ProjectionInfo& p : kProjections) {
        if (!out.empty()) out += ", ";
        out += p.name;
    }
    return out;
}

int64_t proj_in_features(const Qwen2Config& c, Proj p) {
    switch (p) {
        case Proj::o: return c.q_dim();
        case Proj::down: return c.intermediate_size;
        default: return c.hidden_size;
    }
}

int64_t proj_out_features(const Qwen2Config& c, Proj p) {
    switch (p) {
        case Proj::q: return c.q_dim();
        case Proj::k:
        case Proj::v: return c.kv_dim();
        case Proj::o:
        case Proj::down: return c.hidden_size;
        default: return c.intermediate_size;
    }
}

// ---------------------------------------------------------------- the table

int64_t dim_size(const Qwen2Config& c, Dim d) {
    switch (d) {
        case Dim::hidden: return c.hidden_size;
        case Dim::q: return c.q_dim();
        case Dim::kv: return c.kv_dim();
        case Dim::intermediate: return c.intermediate_size;
        case Dim::vocab: return c.vocab_size;
    }
    PPOLAB_ASSERT(false);
    return 0;
}

Matrix* TensorSpec::matrix(Qwen2Weights& w) const {
    if (layer_matrix) return &(w.layers[static_cast<size_t>(layer)].*layer_matrix);
    if (model_matrix) return &(w.*model_matrix);
    return nullptr;
}
const Matrix* TensorSpec::matrix(const Qwen2Weights& w) const { return matrix(const_cast<Qwen2Weights&>(w)); }
std::vector<float>* TensorSpec::vector(Qwen2Weights& w) const {
    if (layer_vector) return &(w.layers[static_cast<size_t>(layer)].*layer_vector);
    if (model_vector) return &(w.*model_vector);
    return nullptr;
}
const std::vector<float>* TensorSpec::vector(const Qwen2Weights& w) const {
    return vector(const_cast<Qwen2Weights&>(w));
}
int64_t TensorSpec::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::vector<TensorSpec> qwen2_tensor_table(const Qwen2Config& c) {
    const int64_t V = c.vocab_size, H = c.hidden_size;
    std::vector<TensorSpec> t;
    t.reserve(static_cast<size_t>(3 + kLayerTensors.size() * static_cast<size_t>(c.num_hidden_layers)));
    TensorSpec embed{"model.embed_tokens.weight", {V, H}};
    embed.model_matrix = &Qwen2Weights::embed_tokens;
    t.push_back(std::move(embed));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const std::string prefix = "model.layers." + std::to_string(l) + ".";
        for (const LayerTensor& lt : kLayerTensors) {
            TensorSpec s{prefix + lt.suffix, {dim_size(c, lt.rows)}, lt.kind, l};
            if (lt.kind == TensorKind::matrix) {
                s.shape.push_back(dim_size(c, lt.cols));
                s.layer_matrix = lt.matrix;
            } else {
                s.layer_vector = lt.vector;
            }
            s.proj = lt.proj;
            t.push_back(std::move(s));
        }
    }
    TensorSpec norm{"model.norm.weight", {H}, TensorKind::norm};
    norm.model_vector = &Qwen2Weights::norm;
    t.push_back(std::move(norm));
    if (!c.tie_word_embeddings) {
        TensorSpec head{"lm_head.weight", {V, H}};
        head.model_matrix = &Qwen2Weights::lm_head;
        t.push_back(std::move(head));
    }
    return t;
}

void freeze_base_matrices(Qwen2Weights& w) {
    for (LayerWeights& layer : w.layers)
        for (const ProjectionInfo& p : kProjections) (layer.*p.weight).freeze();
    (w.config.tie_word_embeddings ? w.embed_tokens : w.lm_head).freeze();
}

void check_layer_count(const Qwen2Weights& w, const std::string& where) {
    if (static_cast<int64_t>(w.layers.size()) != w.config.num_hidden_layers)
        fail(where, ": weights have ", w.layers.size(), " layers; config says ", w.config.num_hidden_layers);
}

}  // namespace ppolab
