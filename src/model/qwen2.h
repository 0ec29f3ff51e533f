// qwen2.h — the Qwen2 causal LM: forward, backward, incremental decoding.
//
// Per layer (Hugging Face modeling_qwen2):
//   h = x + o_proj(attn(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))),  n1 = rmsnorm(x)
//   x' = h + down_proj(silu(gate_proj(n2)) · up_proj(n2)),                  n2 = rmsnorm(h)
// then the final RMSNorm and the (tied) LM head. Every projection goes
// through projection_forward/backward (lora.h): the model code never
// branches on adapters.
//
// Batches are left-padded: tokens (B, T), mask (B, T) with 1 for a real
// token. The position of a real token is the number of real tokens before it
// in its row (cumsum(mask) − 1), so a row's numbers do not depend on its
// padding; padded positions attend to nothing and are attended by nothing.
// Padding may also follow the real tokens of a row (responses of different
// lengths): the causal mask keeps it invisible to them.
// Branches (kernels/attention.h): a mask value g ≥ 2 marks branch g of a
// packed row [shared prefix | branch 2 | branch 3 | …]; a branch token sees
// the shared tokens and its own branch, and its position counts only those,
// so each branch computes as if it followed the prefix alone. The reward
// model's pairs use this to compute their common prompt once.
//
// Numerics — what is rounded to BF16 where. Activations are FP32 throughout.
// With a BF16 base:
//   * the input of every product with a base matrix (the seven projections
//     and the LM head) is rounded to BF16, products accumulate in FP32
//     (kernels/matmul.h);
//   * every projection output — base product + bias + LoRA branch, summed in
//     FP32 — is rounded to BF16 ("the sum returns to the base dtype");
//   * the LoRA branch scale·B(A x) reads the unrounded FP32 input and is
//     computed in FP32; embeddings are BF16 values held exactly in FP32;
//   * nothing else is rounded: RMSNorm, RoPE, attention (scores, softmax,
//     weighted sum), SiLU·up, residual additions, the final norm and the
//     logits (LM head output) are FP32;
//   * in the backward the roundings count as the identity (as autograd
//     treats dtype casts); the gradient entering a BF16 base product's
//     input-backward is rounded to BF16 (matmul.h).
// With FP32 weights (full-parameter training) nothing is rounded; with a
// BF16 copy of FP32 masters (mixed precision, qwen2_bf16_copy) the rules
// above apply and the weight gradients dW += dYᵀX round dY and X to BF16
// and accumulate in FP32 (matmul.h).
#pragma once
#include <cstdint>
#include <vector>

#include "model/kv_cache.h"
#include "model/lora.h"
#include "model/weights.h"

namespace ppolab {

// Gradient storage of full-parameter mode: the shapes of `w`, FP32, zero.
Qwen2Weights qwen2_grads_like(const Qwen2Weights& w);
void qwen2_grads_zero(Qwen2Weights& grads);
// Mixed precision for full-parameter training: `compute` becomes a copy of
// the FP32 master weights `w` with every matrix rounded to BF16 (round to
// nearest even) and every vector (norms, biases) copied as is. A model built
// on `compute` runs its products at the BF16 rate (as torch.autocast does)
// while set_full_grads still accumulates FP32 gradients for the masters;
// call again after each optimiser step. Allocates on the first call only.
void qwen2_bf16_copy(const Qwen2Weights& w, Qwen2Weights& compute);
// Every weight as a ParamRef with Hugging Face names (model.embed_tokens.weight,
// model.layers.{i}.self_attn.q_proj.weight/.bias, …, model.norm.weight,
// lm_head.weight when untied), in checkpoint order. Matrices must be FP32.
// grads may be nullptr (a frozen list).
ParamList qwen2_parameters(Qwen2Weights& w, Qwen2Weights* grads);

// What one layer's forward keeps for the backward.
struct Qwen2LayerActs {
    std::vector<float> x;      // (N, H) layer input (residual stream)
    std::vector<float> ln1;    // (N, H) input_layernorm output
    std::vector<float> rstd1;  // (N)
    std::vector<float> q;      // (N, Q) after bias and RoPE
    std::vector<float> k;      // (N, KV) after bias and RoPE
    std::vector<float> v;      // (N, KV)
    std::vector<float> probs;  // (B, nH, T, T) attention weights
    std::vector<float> att;    // (N, Q) attention output
    std::vector<float> x2;     // (N, H) residual after attention
    std::vector<float> ln2;    // (N, H) post_attention_layernorm output
    std::vector<float> rstd2;  // (N)
    std::vector<float> gate;   // (N, I)
    std::vector<float> up;     // (N, I)
    std::vector<float> mid;    // (7, N, r) scale · A x of each adapted projection
};

// All buffers of a (B, T) shape, allocated once and reused while the shape
// fits (first-touch page faults are expensive: never reallocate per call).
struct Qwen2Activations {
    int64_t B = 0, T = 0, cap_tokens = 0, cap_probs = 0;
    bool saved = false;                  // per-layer buffers (backward possible)
    std::vector<int32_t> tokens;         // (B, T)
    std::vector<uint8_t> mask;           // (B, T)
    std::vector<int32_t> positions;      // (B, T)
    std::vector<Qwen2LayerActs> layers;  // L when saved, else 1 reused by every layer
    std::vector<float> xf;               // (N, H) residual stream after the last layer
    std::vector<float> hidden;           // (N, H) final norm output
    std::vector<float> rstdf;            // (N)
    std::vector<float> tmp;              // (N, H) projection output before the residual add
    std::vector<float> act;              // (N, I) silu(gate) · up of the current layer: not saved
                                         // per layer, recomputed by the backward (saves L·N·I floats)
    // backward
    std::vector<float> dres, dres2, dln, dtmp;  // (N, H)
    std::vector<float> dq, datt;                // (N, Q)
    std::vector<float> dk, dv;                  // (N, KV)
    std::vector<float> dgate, dup, dact;        // (N, I)
    std::vector<float> scratch;                 // (N, r)
};

class Qwen2 {
public:
    // The weights and adapters are borrowed and must outlive the model.
    // lora may be nullptr; its gradients accumulate in backward().
    explicit Qwen2(const Qwen2Weights& weights, LoraAdapters* lora = nullptr);
    // A temporary would be gone before the first forward.
    Qwen2(Qwen2Weights&&, LoraAdapters* = nullptr) = delete;
    // Neither copied nor moved: a Scorer (scoring.h) holds a reference to
    // its model, and the model to weights and adapters it does not own.
    Qwen2(const Qwen2&) = delete;
    Qwen2& operator=(const Qwen2&) = delete;
    // Full-parameter mode: backward() also accumulates the gradient of every
    // weight into *grads (from qwen2_grads_like of the FP32 masters). The
    // model's own weights are those masters, or their qwen2_bf16_copy
    // (mixed precision: BF16 products, the gradient of the rounded copy
    // taken as the masters' — the rounding counts as the identity).
    void set_full_grads(Qwen2Weights* grads);

    const Qwen2Config& config() const { return w_.config; }
    const Qwen2Weights& weights() const { return w_; }
    LoraAdapters* lora() const { return lora_; }

    // Forward over a left-padded batch; returns the final normed hidden
    // states (B, T, H), valid until the next call. With save_for_backward
    // the per-layer activations are kept; with a cache (B rows, ≥ T columns,
    // empty) the keys/values are written for decoding to continue.
    const float* forward(const int32_t* tokens, const uint8_t* mask, int64_t B, int64_t T,
                         bool save_for_backward = true, KvCache* cache = nullptr);
    // Forward over one packed prefix tree (model/prefix_tree.h): tokens (T)
    // and parent (T) as kernels/attention.h attention_tree describes; a
    // token's position is its depth. Returns the final normed hidden states
    // (T, H), each bit for bit that of its token in its own sequence run
    // alone (forward, or KV-cached decode). Nothing is saved for a backward;
    // afterwards batch() is T and length() 1.
    const float* forward_tree(const int32_t* tokens, const int32_t* parent, int64_t T);
    // Backward from d(final hidden) (B, T, H) of the last saved forward.
    void backward(const float* dhidden);

    // Where the output layer's weight gradient goes in full-parameter mode
    // (the embedding's when tied); nullptr otherwise. For lm_logprobs_backward.
    float* output_grad() const;
    Qwen2Weights* full_grads() const { return grads_; }

    // Logits (B, T, V) of the last forward at every position (tests, `score`).
    void logits(float* out) const;
    const float* hidden() const { return acts_.hidden.data(); }          // (B, T, H)
    const int32_t* positions() const { return acts_.positions.data(); }  // (B, T)
    int64_t batch() const { return acts_.B; }
    int64_t length() const { return acts_.T; }

    // One decoding step: tokens (B), one per row, appended at column cache.S
    // as real tokens; logits (B, V); hidden (B, H) the final normed hidden
    // state (nullptr: not wanted). The cache must come from forward().
    void decode_step(KvCache& cache, const int32_t* tokens, float* logits, float* hidden = nullptr);

private:
    enum class AttnMode { full, decode, tree };
    void ensure(int64_t B, int64_t T, bool save);
    void layer_forward(int64_t l, Qwen2Activations& A, Qwen2LayerActs& a, AttnMode mode, KvCache* cache, float* x_out);
    void layer_backward(int64_t l, Qwen2LayerActs& a);

    const Qwen2Weights& w_;
    LoraAdapters* lora_ = nullptr;
    Qwen2Weights* grads_ = nullptr;
    int64_t r_ = 0;                     // LoRA rank (0: none), the width of `mid`
    Qwen2Activations acts_;             // forward/backward over (B, T)
    Qwen2Activations dec_;              // one decoding step over (B, 1)
    std::vector<int32_t> tree_parent_;  // forward_tree's parents (T)
};

}  // namespace ppolab
