// lora.h — LoRA adapters and the one LoRA-aware projection every linear
// layer of the model goes through (SPEC §2).
//
//   y = W x + bias + (alpha/r) · B (A x)
//
// A (r, in) is Kaiming-uniform with a = √5 (bound 1/√in) from a Philox
// generator seeded by the role's seed, B (out, r) is zero, no dropout. The
// branch is FP32; see qwen2.h for what is rounded to BF16 where.
//
// Parameters are listed in a fixed order: layer by layer, targets in the
// order of kProjections (tensor_table.h: q, k, v, o, gate, up, down), A
// before B, named as PEFT names them without the "base_model.model." prefix:
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.lora_A   (r, in)
//   model.layers.{i}.mlp.{gate,up,down}_proj.lora_B     (out, r)
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/param.h"
#include "model/tensor_table.h"
#include "model/weights.h"

namespace ppolab {

struct LoraConfig {
    int64_t rank = 8;                                       // r
    double alpha = 16.0;                                    // scale = alpha / r
    std::vector<std::string> targets = projection_names();  // every projection (tensor_table.h)
    bool operator==(const LoraConfig&) const = default;
};

struct LoraAdapter {
    int64_t rank = 0, in = 0, out = 0;
    float scale = 0;        // alpha / r
    std::vector<float> A;   // (r, in)
    std::vector<float> B;   // (out, r)
    std::vector<float> dA;  // (r, in) gradient, accumulated
    std::vector<float> dB;  // (out, r) gradient, accumulated
};

class LoraAdapters {
public:
    LoraAdapters() = default;
    // Adapters for every layer and target; A from Philox(seed), B zero.
    LoraAdapters(const Qwen2Config& model, const LoraConfig& lora, uint64_t seed);

    // nullptr where (layer, proj) is not a target.
    const LoraAdapter* get(int64_t layer, Proj p) const {
        return slots_[static_cast<size_t>(layer)][static_cast<int>(p)];
    }
    LoraAdapter* get(int64_t layer, Proj p) { return slots_[static_cast<size_t>(layer)][static_cast<int>(p)]; }

    ParamList parameters();  // fixed order, see the file comment; grads attached
    int64_t num_adapted() const { return static_cast<int64_t>(adapters_.size()); }
    int64_t num_parameters() const;
    void zero_grad();
    const LoraConfig& config() const { return config_; }

    // Parameter count without allocating anything (4 399 104 on the 0.5B shape).
    static int64_t count_parameters(const Qwen2Config& model, const LoraConfig& lora);

    // Not copyable by accident (slots_ point into adapters_); use clone().
    LoraAdapters(const LoraAdapters&) = delete;
    LoraAdapters& operator=(const LoraAdapters&) = delete;
    LoraAdapters(LoraAdapters&&) = default;
    LoraAdapters& operator=(LoraAdapters&&) = default;
    LoraAdapters clone() const;  // independent storage (roles never share)

private:
    void rebuild_slots(const Qwen2Config& model);
    LoraConfig config_;
    std::vector<std::pair<int64_t, Proj>> keys_;             // (layer, proj) of adapters_[i]
    std::vector<LoraAdapter> adapters_;                      // in parameter order
    std::vector<std::array<LoraAdapter*, kNumProj>> slots_;  // (L, 7)
};

// The projection, forward: y (M, out) = W x + bias + scale·B(A x).
// mid (M, r) receives scale · A x (saved for the backward); ignored without
// adapter. The branch is two FP32 products: (scale · x Aᵀ) Bᵀ, added to W x.
// For a BF16 W the input of the base product is rounded to BF16 (matmul.h)
// and y is rounded to BF16 after the sum; with an FP32 W nothing is rounded.
// bias and adapter may be nullptr.
void projection_forward(float* y, float* mid, const float* x, const Matrix& W, const float* bias,
                        const LoraAdapter* adapter, int64_t M);

// Where the gradients of a projection go; nullptr: frozen.
struct ProjectionGrads {
    float* dW = nullptr;             // (out, in), FP32 weights only (full-parameter mode)
    float* dbias = nullptr;          // (out)
    LoraAdapter* adapter = nullptr;  // accumulates adapter->dA, dB
};

// The projection, backward (the output's BF16 rounding is treated as the
// identity): dx (M, in) is overwritten (or accumulated when `accumulate`),
// weight gradients accumulate. scratch holds M·r floats.
void projection_backward(float* dx, ProjectionGrads g, const float* dy, const float* x, const float* mid,
                         const Matrix& W, const LoraAdapter* adapter, int64_t M, float* scratch,
                         bool accumulate = false);

// The adapters folded into a copy of the base (what a merged checkpoint
// holds, `ppolab export merged`): W' = W + scale·B·A for every adapted
// projection, each element summed in double from the stored W, rounded to
// FP32 and then to W's type (BF16: to nearest even); norms, biases,
// embeddings and the output matrix are copied as they are. Its products then
// equal the adapted model's up to that rounding per weight (and, for a BF16
// base, the branch's input no longer being FP32). Error if an adapter's shape
// does not match its projection.
Qwen2Weights merge_lora(const Qwen2Weights& base, const LoraAdapters& lora);

}  // namespace ppolab
