// config.h — the architecture of a Qwen2-family causal LM, read from a
// Hugging Face config.json.
#pragma once
#include <cstdint>
#include <string>

#include "util/json.h"

namespace ppolab {

struct Qwen2Config {
    int64_t vocab_size = 0;
    int64_t hidden_size = 0;          // H
    int64_t intermediate_size = 0;    // I (MLP width)
    int64_t num_hidden_layers = 0;    // L
    int64_t num_attention_heads = 0;  // query heads
    int64_t num_key_value_heads = 0;  // KV heads (grouped-query attention)
    int64_t head_dim = 0;             // H / heads unless config.json says otherwise
    int64_t max_position_embeddings = 0;
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000.0;
    bool tie_word_embeddings = false;
    int64_t bos_token_id = -1;  // -1: not given
    int64_t eos_token_id = -1;
    std::string torch_dtype = "bfloat16";

    int64_t q_dim() const { return num_attention_heads * head_dim; }
    int64_t kv_dim() const { return num_key_value_heads * head_dim; }

    // Validates every field (positive sizes, heads divide, known activation,
    // model_type qwen2); errors name `where` and the field.
    static Qwen2Config from_json(const json& j, const std::string& where);
    json to_json() const;  // a Hugging Face config.json
    bool operator==(const Qwen2Config&) const = default;
};

// Named model shapes for `init-random --preset`: "qwen2.5-0.5b" and "tiny".
Qwen2Config model_shape(const std::string& name);

}  // namespace ppolab
