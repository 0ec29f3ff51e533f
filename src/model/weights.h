// weights.h — the parameters of a Qwen2 model, one field per checkpoint tensor.
//
// Matrices are BF16 (a frozen base) or FP32 (full-parameter training); norm
// weights and biases are always FP32 (a BF16 value converts exactly).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "model/config.h"
#include "util/bf16.h"

namespace ppolab {

struct Matrix {
    WeightType type = WeightType::bf16;
    int64_t rows = 0, cols = 0;  // [out_features, in_features]
    std::vector<bf16> b;         // filled when type == bf16
    std::vector<float> f;        // filled when type == f32

    int64_t numel() const { return rows * cols; }
    WeightView view() const {
        return {type, type == WeightType::bf16 ? static_cast<const void*>(b.data()) : f.data(), rows, cols};
    }
    float at(int64_t r, int64_t c) const {
        return type == WeightType::bf16 ? bf16_to_float(b[r * cols + c]) : f[r * cols + c];
    }
};

struct LayerWeights {
    std::vector<float> input_layernorm;           // (H)
    Matrix q_proj;                                // (q_dim, H)
    std::vector<float> q_bias;                    // (q_dim)
    Matrix k_proj;                                // (kv_dim, H)
    std::vector<float> k_bias;                    // (kv_dim)
    Matrix v_proj;                                // (kv_dim, H)
    std::vector<float> v_bias;                    // (kv_dim)
    Matrix o_proj;                                // (H, q_dim)
    std::vector<float> post_attention_layernorm;  // (H)
    Matrix gate_proj;                             // (I, H)
    Matrix up_proj;                               // (I, H)
    Matrix down_proj;                             // (H, I)
};

struct Qwen2Weights {
    Qwen2Config config;
    Matrix embed_tokens;              // (V, H)
    std::vector<LayerWeights> layers; // L
    std::vector<float> norm;          // (H) final RMSNorm
    Matrix lm_head;                   // (V, H); empty when tie_word_embeddings

    const Matrix& output_matrix() const { return config.tie_word_embeddings ? embed_tokens : lm_head; }
};

}  // namespace ppolab
