// weights.h — the parameters of a Qwen2 model, one field per checkpoint tensor
// (model/tensor_table.h lists them with their names and shapes).
//
// Matrices are BF16 (a frozen base) or FP32 (full-parameter training); norm
// weights and biases are always FP32 (a BF16 value converts exactly).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_backend.h"
#include "model/config.h"
#include "util/bf16.h"

namespace ppolab {

// The prepacked layouts of a frozen matrix (kernels/matmul_backend.h). They
// move with the matrix (its buffer moves too); a copy of the matrix is a new
// buffer and starts unfrozen, and so does a matrix assigned new values.
class FrozenLayouts {
public:
    FrozenLayouts() = default;
    FrozenLayouts(const FrozenLayouts&) {}
    FrozenLayouts& operator=(const FrozenLayouts&) {
        p_.reset();
        return *this;
    }
    FrozenLayouts(FrozenLayouts&&) noexcept = default;
    FrozenLayouts& operator=(FrozenLayouts&&) noexcept = default;

    void make(WeightView W) { p_ = std::make_unique<PrepackedWeight>(W); }
    void reset() { p_.reset(); }
    const PrepackedWeight* get() const { return p_.get(); }

private:
    std::unique_ptr<PrepackedWeight> p_;
};

struct Matrix {
    WeightType type = WeightType::bf16;
    int64_t rows = 0, cols = 0;    // [out_features, in_features]
    std::vector<bf16> b;           // filled when type == bf16
    std::vector<float> f;          // filled when type == f32
    FrozenLayouts frozen_layouts;  // set by freeze()

    int64_t numel() const { return rows * cols; }
    WeightView view() const {
        return {type, type == WeightType::bf16 ? static_cast<const void*>(b.data()) : f.data(), rows, cols,
                frozen_layouts.get()};
    }
    float at(int64_t r, int64_t c) const {
        return type == WeightType::bf16 ? bf16_to_float(b[r * cols + c]) : f[r * cols + c];
    }
    // A frozen BF16 matrix is read by oneDNN from copies prepacked once per
    // layout (the frozen base: 10–45 % per large product, BENCHMARKS.md). Its
    // values must not change until unfreeze(); a buffer that moves (resize)
    // is simply read unpacked. No-op for an FP32 or empty matrix.
    void freeze() {
        if (type == WeightType::bf16 && numel() > 0 && !frozen()) frozen_layouts.make(view());
    }
    void unfreeze() { frozen_layouts.reset(); }
    bool frozen() const { return frozen_layouts.get() != nullptr; }
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
    Matrix embed_tokens;               // (V, H)
    std::vector<LayerWeights> layers;  // L
    std::vector<float> norm;           // (H) final RMSNorm
    Matrix lm_head;                    // (V, H); empty when tie_word_embeddings

    const Matrix& output_matrix() const { return config.tie_word_embeddings ? embed_tokens : lm_head; }
};

}  // namespace ppolab
