#include "model/init.h"

#include "util/error.h"
#include "util/rng.h"

namespace ppolab {

static Matrix random_matrix(int64_t rows, int64_t cols, WeightType type, double stddev, Philox& rng) {
    Matrix m;
    m.type = type;
    m.rows = rows;
    m.cols = cols;
    if (type == WeightType::bf16)
        m.b.resize(static_cast<size_t>(rows * cols));
    else
        m.f.resize(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows * cols; ++i) {
        float v = static_cast<float>(rng.normal() * stddev);
        if (type == WeightType::bf16)
            m.b[static_cast<size_t>(i)] = float_to_bf16(v);
        else
            m.f[static_cast<size_t>(i)] = v;
    }
    return m;
}

static std::vector<float> filled(int64_t n, float base, bool randomize, Philox& rng) {
    std::vector<float> v(static_cast<size_t>(n), base);
    if (randomize)
        for (auto& x : v) x = round_to_bf16(base + static_cast<float>(0.1 * rng.normal()));
    return v;
}

Qwen2Weights random_weights(const Qwen2Config& c, const InitOptions& o) {
    PPOLAB_ASSERT(c.hidden_size > 0 && c.num_hidden_layers > 0 && c.head_dim > 0);
    Philox rng(o.seed, /*stream=*/0x1417);
    Qwen2Weights w;
    w.config = c;
    const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.q_dim(), KV = c.kv_dim();
    w.embed_tokens = random_matrix(c.vocab_size, H, o.matrices, o.stddev, rng);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        LayerWeights L;
        bool r = o.randomize_norms_and_biases;
        L.input_layernorm = filled(H, 1.f, r, rng);
        L.q_proj = random_matrix(Q, H, o.matrices, o.stddev, rng);
        L.q_bias = filled(Q, 0.f, r, rng);
        L.k_proj = random_matrix(KV, H, o.matrices, o.stddev, rng);
        L.k_bias = filled(KV, 0.f, r, rng);
        L.v_proj = random_matrix(KV, H, o.matrices, o.stddev, rng);
        L.v_bias = filled(KV, 0.f, r, rng);
        L.o_proj = random_matrix(H, Q, o.matrices, o.stddev, rng);
        L.post_attention_layernorm = filled(H, 1.f, r, rng);
        L.gate_proj = random_matrix(I, H, o.matrices, o.stddev, rng);
        L.up_proj = random_matrix(I, H, o.matrices, o.stddev, rng);
        L.down_proj = random_matrix(H, I, o.matrices, o.stddev, rng);
        w.layers.push_back(std::move(L));
    }
    w.norm = filled(H, 1.f, o.randomize_norms_and_biases, rng);
    if (!c.tie_word_embeddings) w.lm_head = random_matrix(c.vocab_size, H, o.matrices, o.stddev, rng);
    return w;
}

}  // namespace ppolab
