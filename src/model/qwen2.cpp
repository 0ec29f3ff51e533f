#include "model/qwen2.h"

#include <algorithm>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "model/tensor_table.h"
#include "util/error.h"

namespace ppolab {

// ---------------------------------------------------------------- full-parameter gradients

static Matrix zero_matrix_like(const Matrix& m) {
    Matrix g;
    g.type = WeightType::f32;
    g.rows = m.rows;
    g.cols = m.cols;
    g.f.assign(static_cast<size_t>(m.rows * m.cols), 0.f);
    return g;
}

static std::vector<float> zeros_like(const std::vector<float>& v) { return std::vector<float>(v.size(), 0.f); }

Qwen2Weights qwen2_grads_like(const Qwen2Weights& w) {
    check_layer_count(w, "qwen2_grads_like");
    Qwen2Weights g;
    g.config = w.config;
    g.layers.resize(w.layers.size());
    for (const TensorSpec& spec : qwen2_tensor_table(w.config)) {
        if (const Matrix* m = spec.matrix(w)) *spec.matrix(g) = zero_matrix_like(*m);
        else *spec.vector(g) = zeros_like(*spec.vector(w));
    }
    return g;
}

// One matrix of the BF16 copy: every value rounded to nearest even.
static void bf16_copy_matrix(const Matrix& m, Matrix& out) {
    if (m.type != WeightType::f32) fail("qwen2_bf16_copy: the master weights must be FP32");
    PPOLAB_ASSERT(!out.frozen());  // rewritten in place after every update: never prepacked
    out.type = WeightType::bf16;
    out.rows = m.rows;
    out.cols = m.cols;
    out.f.clear();
    out.b.resize(m.f.size());
    const float* src = m.f.data();
    bf16* dst = out.b.data();
    const int64_t n = static_cast<int64_t>(m.f.size());
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

void qwen2_bf16_copy(const Qwen2Weights& w, Qwen2Weights& c) {
    check_layer_count(w, "qwen2_bf16_copy");
    c.config = w.config;
    c.layers.resize(w.layers.size());
    for (const TensorSpec& spec : qwen2_tensor_table(w.config)) {
        if (const Matrix* m = spec.matrix(w)) bf16_copy_matrix(*m, *spec.matrix(c));
        else *spec.vector(c) = *spec.vector(w);
    }
}

void qwen2_grads_zero(Qwen2Weights& g) {
    for (auto& p : qwen2_parameters(g, nullptr)) std::fill(p.data, p.data + p.numel(), 0.f);
}

ParamList qwen2_parameters(Qwen2Weights& w, Qwen2Weights* g) {
    check_layer_count(w, "qwen2_parameters");
    if (g) check_layer_count(*g, "qwen2_parameters (gradients)");
    ParamList list;
    for (const TensorSpec& spec : qwen2_tensor_table(w.config)) {
        if (Matrix* m = spec.matrix(w)) {
            if (m->type != WeightType::f32)
                fail("parameter '", spec.hf_name, "': full-parameter mode needs FP32 weights, got BF16");
            list.push_back({spec.hf_name, {m->rows, m->cols}, m->f.data(), g ? spec.matrix(*g)->f.data() : nullptr});
        } else {
            std::vector<float>& v = *spec.vector(w);
            list.push_back(
                {spec.hf_name, {static_cast<int64_t>(v.size())}, v.data(), g ? spec.vector(*g)->data() : nullptr});
        }
    }
    return list;
}

// ---------------------------------------------------------------- buffers

template <typename V>
static void grow(V& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

static void activations_ensure(Qwen2Activations& A, const Qwen2Config& c, int64_t r, int64_t B, int64_t T, bool save,
                               bool with_backward) {
    const int64_t N = B * T, H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), I = c.intermediate_size;
    const int64_t probs = B * c.num_attention_heads * T * T;
    A.B = B;
    A.T = T;
    A.saved = save;
    grow(A.tokens, N);
    grow(A.mask, N);
    grow(A.positions, N);
    const size_t nl = save ? static_cast<size_t>(c.num_hidden_layers) : 1;
    if (A.layers.size() < nl) A.layers.resize(nl);
    const size_t used = save ? nl : 1;
    for (size_t l = 0; l < used; ++l) {
        Qwen2LayerActs& a = A.layers[l];
        grow(a.x, N * H);
        grow(a.ln1, N * H);
        grow(a.rstd1, N);
        grow(a.q, N * Q);
        grow(a.k, N * KV);
        grow(a.v, N * KV);
        grow(a.probs, probs);
        grow(a.att, N * Q);
        grow(a.x2, N * H);
        grow(a.ln2, N * H);
        grow(a.rstd2, N);
        grow(a.gate, N * I);
        grow(a.up, N * I);
        grow(a.mid, kNumProj * N * r);
    }
    grow(A.xf, N * H);
    grow(A.hidden, N * H);
    grow(A.rstdf, N);
    grow(A.tmp, N * H);
    grow(A.act, N * I);
    if (with_backward) {
        for (auto* v : {&A.dres, &A.dres2, &A.dln, &A.dtmp}) grow(*v, N * H);
        for (auto* v : {&A.dq, &A.datt}) grow(*v, N * Q);
        for (auto* v : {&A.dk, &A.dv}) grow(*v, N * KV);
        for (auto* v : {&A.dgate, &A.dup, &A.dact}) grow(*v, N * I);
        grow(A.scratch, N * r);
    }
}

static void embed_rows(float* x, const Matrix& E, const int32_t* tokens, int64_t N) {
    // x (N, H); E (V, H)
    const int64_t H = E.cols;
#pragma omp parallel for schedule(static) if (N * H > 32768)
    for (int64_t n = 0; n < N; ++n) {
        float* xn = x + n * H;
        const int64_t t = tokens[n];
        if (E.type == WeightType::bf16)
            for (int64_t c = 0; c < H; ++c) xn[c] = bf16_to_float(E.b[static_cast<size_t>(t * H + c)]);
        else std::memcpy(xn, E.f.data() + t * H, static_cast<size_t>(H) * sizeof(float));
    }
}

static void add_into(float* out, const float* a, const float* b, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// ---------------------------------------------------------------- model

Qwen2::Qwen2(const Qwen2Weights& weights, LoraAdapters* lora) : w_(weights), lora_(lora) {
    const auto& c = w_.config;
    if (static_cast<int64_t>(w_.layers.size()) != c.num_hidden_layers)
        fail("Qwen2 weights: ", w_.layers.size(), " layers, config says ", c.num_hidden_layers);
    if (c.head_dim % 2 != 0) fail("Qwen2 config head_dim: expected an even number (RoPE pairs), got ", c.head_dim);
    if (lora_) {
        r_ = lora_->config().rank;
        for (int64_t l = 0; l < c.num_hidden_layers; ++l)
            for (int p = 0; p < kNumProj; ++p) {
                const LoraAdapter* a = lora_->get(l, static_cast<Proj>(p));
                if (a && (a->in != proj_in_features(c, static_cast<Proj>(p)) ||
                          a->out != proj_out_features(c, static_cast<Proj>(p))))
                    fail("LoRA adapter of layer ", l, " ", proj_name(static_cast<Proj>(p)), ": shape (", a->out, ", ",
                         a->in, ") does not fit the model");
            }
    }
}

void Qwen2::set_full_grads(Qwen2Weights* grads) {
    if (grads) {
        PPOLAB_ASSERT(grads->embed_tokens.type == WeightType::f32);
        PPOLAB_ASSERT(grads->layers.size() == w_.layers.size() && grads->embed_tokens.rows == w_.embed_tokens.rows);
    }
    grads_ = grads;
}

float* Qwen2::output_grad() const {
    if (!grads_) return nullptr;
    return w_.config.tie_word_embeddings ? grads_->embed_tokens.f.data() : grads_->lm_head.f.data();
}

const float* Qwen2::forward(const int32_t* tokens, const uint8_t* mask, int64_t B, int64_t T, bool save,
                            KvCache* cache) {
    const auto& c = w_.config;
    if (B <= 0 || T <= 0) fail("Qwen2 forward: empty batch (B=", B, ", T=", T, ")");
    const int64_t N = B * T, H = c.hidden_size, V = c.vocab_size;
    for (int64_t n = 0; n < N; ++n)
        if (tokens[n] < 0 || tokens[n] >= V)
            fail("Qwen2 forward: token id ", tokens[n], " at row ", n / T, ", position ", n % T,
                 " is outside the vocabulary [0, ", V, ")");
    activations_ensure(acts_, c, r_, B, T, save, save);
    std::copy(tokens, tokens + N, acts_.tokens.begin());
    std::copy(mask, mask + N, acts_.mask.begin());
    // position = the tokens before t in the row that t can see: the real
    // tokens, or with branches (attention.h) the shared ones and its own branch's.
    bool branches = false;
    for (int64_t b = 0; b < B; ++b) {
        int32_t shared = 0;
        int32_t in_branch[256] = {};
        for (int64_t t = 0; t < T; ++t) {
            const uint8_t g = mask[b * T + t];
            int32_t& pos = acts_.positions[static_cast<size_t>(b * T + t)];
            if (g == 0) {
                pos = 0;
            } else if (g == 1) {
                pos = shared++;
            } else {
                branches = true;
                pos = shared + in_branch[g]++;
            }
        }
    }
    if (cache && branches) fail("Qwen2 forward: a batch with branches (packed pairs) cannot fill a KV cache");
    if (cache) {
        if (cache->B != B || cache->S_max < T || cache->L != c.num_hidden_layers)
            fail("KV cache of (B=", cache->B, ", S_max=", cache->S_max, ") cannot hold a batch of (", B, ", ", T, ")");
        cache->clear();
        for (int64_t b = 0; b < B; ++b) {
            int32_t seen = 0;
            for (int64_t t = 0; t < T; ++t) {
                cache->mask[static_cast<size_t>(b * cache->S_max + t)] = mask[b * T + t];
                seen += mask[b * T + t] ? 1 : 0;
            }
            cache->next_position[static_cast<size_t>(b)] = seen;
        }
    }
    embed_rows(acts_.layers[0].x.data(), w_.embed_tokens, tokens, N);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        Qwen2LayerActs& a = acts_.layers[save ? static_cast<size_t>(l) : 0];
        float* x_out = l + 1 < c.num_hidden_layers ? acts_.layers[save ? static_cast<size_t>(l + 1) : 0].x.data()
                                                   : acts_.xf.data();
        layer_forward(l, acts_, a, AttnMode::full, cache, x_out);
    }
    rmsnorm_forward(acts_.hidden.data(), acts_.rstdf.data(), acts_.xf.data(), w_.norm.data(), N, H, c.rms_norm_eps);
    if (cache) cache->S = T;
    return acts_.hidden.data();
}

const float* Qwen2::forward_tree(const int32_t* tokens, const int32_t* parent, int64_t T) {
    const auto& c = w_.config;
    if (T <= 0) fail("Qwen2 forward_tree: empty tree");
    const int64_t H = c.hidden_size, V = c.vocab_size;
    tree_parent_.assign(parent, parent + T);
    // The tree's tokens are the rows of a (T, 1) batch: every row-wise step
    // (norms, projections, RoPE) reads them so, and attention_tree joins
    // each to its ancestors (no (T × T) weights exist).
    activations_ensure(acts_, c, r_, T, 1, /*save=*/false, /*with_backward=*/false);
    for (int64_t t = 0; t < T; ++t) {
        if (tokens[t] < 0 || tokens[t] >= V)
            fail("Qwen2 forward_tree: token id ", tokens[t], " at ", t, " is outside the vocabulary [0, ", V, ")");
        if (parent[t] < -1 || parent[t] >= t)
            fail("Qwen2 forward_tree: parent of token ", t, " is ", parent[t], "; expected -1 or a token before it");
        acts_.tokens[static_cast<size_t>(t)] = tokens[t];
        acts_.mask[static_cast<size_t>(t)] = 1;
        acts_.positions[static_cast<size_t>(t)] =
            parent[t] < 0 ? 0 : acts_.positions[static_cast<size_t>(parent[t])] + 1;
    }
    Qwen2LayerActs& a = acts_.layers[0];
    embed_rows(a.x.data(), w_.embed_tokens, tokens, T);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        layer_forward(l, acts_, a, AttnMode::tree, nullptr, l + 1 < c.num_hidden_layers ? a.x.data() : acts_.xf.data());
    rmsnorm_forward(acts_.hidden.data(), acts_.rstdf.data(), acts_.xf.data(), w_.norm.data(), T, H, c.rms_norm_eps);
    return acts_.hidden.data();
}

void Qwen2::layer_forward(int64_t l, Qwen2Activations& A, Qwen2LayerActs& a, AttnMode mode, KvCache* cache,
                          float* x_out) {
    const auto& c = w_.config;
    const LayerWeights& L = w_.layers[static_cast<size_t>(l)];
    const int64_t B = A.B, T = A.T, N = B * T, H = c.hidden_size, I = c.intermediate_size;
    const int64_t nH = c.num_attention_heads, nKV = c.num_key_value_heads, hd = c.head_dim, KV = c.kv_dim();
    auto ad = [&](Proj p) -> const LoraAdapter* { return lora_ ? lora_->get(l, p) : nullptr; };
    auto mid = [&](Proj p) { return r_ ? a.mid.data() + static_cast<int64_t>(p) * N * r_ : nullptr; };
    const double eps = c.rms_norm_eps;

    // attention block
    rmsnorm_forward(a.ln1.data(), a.rstd1.data(), a.x.data(), L.input_layernorm.data(), N, H, eps);
    projection_forward(a.q.data(), mid(Proj::q), a.ln1.data(), L.q_proj, L.q_bias.data(), ad(Proj::q), N);
    projection_forward(a.k.data(), mid(Proj::k), a.ln1.data(), L.k_proj, L.k_bias.data(), ad(Proj::k), N);
    projection_forward(a.v.data(), mid(Proj::v), a.ln1.data(), L.v_proj, L.v_bias.data(), ad(Proj::v), N);
    rope_forward(a.q.data(), A.positions.data(), N, nH, hd, c.rope_theta);
    rope_forward(a.k.data(), A.positions.data(), N, nKV, hd, c.rope_theta);
    if (mode == AttnMode::full) {
        attention_forward(a.att.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), A.mask.data(),
                          AttentionShape{B, T, nH, nKV, hd});
        if (cache)  // columns [0, T) of every row
            for (int64_t b = 0; b < B; ++b) {
                const size_t off = static_cast<size_t>(b * cache->S_max * KV), n = static_cast<size_t>(T * KV);
                std::memcpy(cache->k_layer(l) + off, a.k.data() + b * T * KV, n * sizeof(float));
                std::memcpy(cache->v_layer(l) + off, a.v.data() + b * T * KV, n * sizeof(float));
            }
    } else if (mode == AttnMode::tree) {  // B = the tree's tokens, T = 1
        attention_tree(a.att.data(), a.q.data(), a.k.data(), a.v.data(), tree_parent_.data(), B, nH, nKV, hd);
    } else {  // T = 1: append at column S, attend to the S + 1 filled columns
        const int64_t S = cache->S;
        for (int64_t b = 0; b < B; ++b) {
            const size_t off = static_cast<size_t>((b * cache->S_max + S) * KV);
            std::memcpy(cache->k_layer(l) + off, a.k.data() + b * KV, static_cast<size_t>(KV) * sizeof(float));
            std::memcpy(cache->v_layer(l) + off, a.v.data() + b * KV, static_cast<size_t>(KV) * sizeof(float));
        }
        attention_decode(a.att.data(), a.q.data(), cache->k_layer(l), cache->v_layer(l), cache->mask.data(), B, S + 1,
                         cache->S_max, nH, nKV, hd);
    }
    projection_forward(A.tmp.data(), mid(Proj::o), a.att.data(), L.o_proj, nullptr, ad(Proj::o), N);
    add_into(a.x2.data(), a.x.data(), A.tmp.data(), N * H);

    // MLP block
    rmsnorm_forward(a.ln2.data(), a.rstd2.data(), a.x2.data(), L.post_attention_layernorm.data(), N, H, eps);
    projection_forward(a.gate.data(), mid(Proj::gate), a.ln2.data(), L.gate_proj, nullptr, ad(Proj::gate), N);
    projection_forward(a.up.data(), mid(Proj::up), a.ln2.data(), L.up_proj, nullptr, ad(Proj::up), N);
    swiglu_forward(A.act.data(), a.gate.data(), a.up.data(), N * I);
    projection_forward(A.tmp.data(), mid(Proj::down), A.act.data(), L.down_proj, nullptr, ad(Proj::down), N);
    add_into(x_out, a.x2.data(), A.tmp.data(), N * H);  // x_out may alias a.x (not saved)
}

void Qwen2::backward(const float* dhidden) {
    if (!acts_.saved) fail("Qwen2 backward: the last forward did not save activations");
    const auto& c = w_.config;
    const int64_t N = acts_.B * acts_.T, H = c.hidden_size;
    rmsnorm_backward(acts_.dres.data(), grads_ ? grads_->norm.data() : nullptr, dhidden, acts_.xf.data(),
                     w_.norm.data(), acts_.rstdf.data(), N, H);
    for (int64_t l = c.num_hidden_layers - 1; l >= 0; --l) layer_backward(l, acts_.layers[static_cast<size_t>(l)]);
    if (grads_) {  // embedding: scatter-add the rows (serial: tokens repeat)
        float* dE = grads_->embed_tokens.f.data();
        for (int64_t n = 0; n < N; ++n) {
            float* row = dE + static_cast<int64_t>(acts_.tokens[static_cast<size_t>(n)]) * H;
            const float* g = acts_.dres.data() + n * H;
            for (int64_t i = 0; i < H; ++i) row[i] += g[i];
        }
    }
}

// The forward's call list, read in reverse. On entry dres is the gradient of
// the layer's output; on exit that of its input.
void Qwen2::layer_backward(int64_t l, Qwen2LayerActs& a) {
    const auto& c = w_.config;
    Qwen2Activations& A = acts_;
    const LayerWeights& L = w_.layers[static_cast<size_t>(l)];
    LayerWeights* G = grads_ ? &grads_->layers[static_cast<size_t>(l)] : nullptr;
    const int64_t B = A.B, T = A.T, N = B * T, H = c.hidden_size, I = c.intermediate_size;
    const int64_t nH = c.num_attention_heads, nKV = c.num_key_value_heads, hd = c.head_dim;
    auto ad = [&](Proj p) -> LoraAdapter* { return lora_ ? lora_->get(l, p) : nullptr; };
    auto mid = [&](Proj p) { return r_ ? a.mid.data() + static_cast<int64_t>(p) * N * r_ : nullptr; };
    auto pg = [&](Proj p, Matrix LayerWeights::*m, std::vector<float> LayerWeights::*bias) {
        ProjectionGrads g;
        if (G) {
            g.dW = (G->*m).f.data();
            if (bias) g.dbias = (G->*bias).data();
        }
        g.adapter = ad(p);
        return g;
    };
    float* scratch = A.scratch.data();

    // MLP block (the input of down_proj is recomputed, not saved)
    swiglu_forward(A.act.data(), a.gate.data(), a.up.data(), N * I);
    projection_backward(A.dact.data(), pg(Proj::down, &LayerWeights::down_proj, nullptr), A.dres.data(), A.act.data(),
                        mid(Proj::down), L.down_proj, ad(Proj::down), N, scratch);
    swiglu_backward(A.dgate.data(), A.dup.data(), A.dact.data(), a.gate.data(), a.up.data(), N * I);
    projection_backward(A.dln.data(), pg(Proj::gate, &LayerWeights::gate_proj, nullptr), A.dgate.data(), a.ln2.data(),
                        mid(Proj::gate), L.gate_proj, ad(Proj::gate), N, scratch);
    projection_backward(A.dln.data(), pg(Proj::up, &LayerWeights::up_proj, nullptr), A.dup.data(), a.ln2.data(),
                        mid(Proj::up), L.up_proj, ad(Proj::up), N, scratch, /*accumulate=*/true);
    rmsnorm_backward(A.dtmp.data(), G ? G->post_attention_layernorm.data() : nullptr, A.dln.data(), a.x2.data(),
                     L.post_attention_layernorm.data(), a.rstd2.data(), N, H);
    add_into(A.dres2.data(), A.dres.data(), A.dtmp.data(), N * H);

    // attention block
    projection_backward(A.datt.data(), pg(Proj::o, &LayerWeights::o_proj, nullptr), A.dres2.data(), a.att.data(),
                        mid(Proj::o), L.o_proj, ad(Proj::o), N, scratch);
    attention_backward(A.dq.data(), A.dk.data(), A.dv.data(), A.datt.data(), a.probs.data(), a.q.data(), a.k.data(),
                       a.v.data(), A.mask.data(), AttentionShape{B, T, nH, nKV, hd});
    rope_backward(A.dq.data(), A.positions.data(), N, nH, hd, c.rope_theta);
    rope_backward(A.dk.data(), A.positions.data(), N, nKV, hd, c.rope_theta);
    projection_backward(A.dln.data(), pg(Proj::q, &LayerWeights::q_proj, &LayerWeights::q_bias), A.dq.data(),
                        a.ln1.data(), mid(Proj::q), L.q_proj, ad(Proj::q), N, scratch);
    projection_backward(A.dln.data(), pg(Proj::k, &LayerWeights::k_proj, &LayerWeights::k_bias), A.dk.data(),
                        a.ln1.data(), mid(Proj::k), L.k_proj, ad(Proj::k), N, scratch, /*accumulate=*/true);
    projection_backward(A.dln.data(), pg(Proj::v, &LayerWeights::v_proj, &LayerWeights::v_bias), A.dv.data(),
                        a.ln1.data(), mid(Proj::v), L.v_proj, ad(Proj::v), N, scratch, /*accumulate=*/true);
    rmsnorm_backward(A.dtmp.data(), G ? G->input_layernorm.data() : nullptr, A.dln.data(), a.x.data(),
                     L.input_layernorm.data(), a.rstd1.data(), N, H);
    add_into(A.dres.data(), A.dres2.data(), A.dtmp.data(), N * H);
}

void Qwen2::logits(float* out) const {
    // out (B, T, V)
    linear_forward(out, acts_.hidden.data(), w_.output_matrix().view(), acts_.B * acts_.T);
}

void Qwen2::decode_step(KvCache& cache, const int32_t* tokens, float* logits, float* hidden) {
    const auto& c = w_.config;
    const int64_t B = cache.B, H = c.hidden_size, V = c.vocab_size;
    if (cache.L != c.num_hidden_layers || cache.nKV != c.num_key_value_heads || cache.hd != c.head_dim)
        fail("KV cache: made for another model shape");
    if (cache.S >= cache.S_max) fail("KV cache: full at ", cache.S_max, " columns (the context limit)");
    for (int64_t b = 0; b < B; ++b)
        if (tokens[b] < 0 || tokens[b] >= V)
            fail("decode: token id ", tokens[b], " of row ", b, " is outside the vocabulary [0, ", V, ")");
    activations_ensure(dec_, c, r_, B, 1, /*save=*/false, /*with_backward=*/false);
    for (int64_t b = 0; b < B; ++b) {
        dec_.tokens[static_cast<size_t>(b)] = tokens[b];
        dec_.mask[static_cast<size_t>(b)] = 1;
        dec_.positions[static_cast<size_t>(b)] = cache.next_position[static_cast<size_t>(b)]++;
        cache.mask[static_cast<size_t>(b * cache.S_max + cache.S)] = 1;
    }
    Qwen2LayerActs& a = dec_.layers[0];
    embed_rows(a.x.data(), w_.embed_tokens, tokens, B);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        layer_forward(l, dec_, a, AttnMode::decode, &cache, l + 1 < c.num_hidden_layers ? a.x.data() : dec_.xf.data());
    cache.S += 1;
    rmsnorm_forward(dec_.hidden.data(), dec_.rstdf.data(), dec_.xf.data(), w_.norm.data(), B, H, c.rms_norm_eps);
    if (hidden) std::copy(dec_.hidden.begin(), dec_.hidden.begin() + B * H, hidden);
    linear_forward(logits, dec_.hidden.data(), w_.output_matrix().view(), B);
}

}  // namespace ppolab
