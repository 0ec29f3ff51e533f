#include "model/lora.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul_backend.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/rng.h"

namespace ppolab {

// The targets as a set of Proj, validated (unknown or repeated names fail).
static std::array<bool, kNumProj> target_set(const LoraConfig& lora) {
    if (lora.rank <= 0) fail("lora.rank: expected a positive integer, got ", lora.rank);
    if (!(lora.alpha > 0)) fail("lora.alpha: expected a positive number, got ", lora.alpha);
    std::array<bool, kNumProj> on{};
    for (const auto& t : lora.targets) {
        Proj p = proj_from_name(t);
        if (on[static_cast<int>(p)]) fail("lora.targets: '", t, "' is listed twice");
        on[static_cast<int>(p)] = true;
    }
    return on;
}

int64_t LoraAdapters::count_parameters(const Qwen2Config& model, const LoraConfig& lora) {
    auto on = target_set(lora);
    int64_t per_layer = 0;
    for (int i = 0; i < kNumProj; ++i)
        if (on[i]) {
            Proj p = static_cast<Proj>(i);
            per_layer += lora.rank * (proj_in_features(model, p) + proj_out_features(model, p));
        }
    return per_layer * model.num_hidden_layers;
}

LoraAdapters::LoraAdapters(const Qwen2Config& model, const LoraConfig& lora, uint64_t seed) : config_(lora) {
    auto on = target_set(lora);
    Philox rng(seed, /*stream=*/0x4c6f5241);  // "LoRA"
    for (int64_t l = 0; l < model.num_hidden_layers; ++l)
        for (int i = 0; i < kNumProj; ++i) {
            if (!on[i]) continue;
            Proj p = static_cast<Proj>(i);
            LoraAdapter a;
            a.rank = lora.rank;
            a.in = proj_in_features(model, p);
            a.out = proj_out_features(model, p);
            a.scale = static_cast<float>(lora.alpha / static_cast<double>(lora.rank));
            a.A.resize(static_cast<size_t>(a.rank * a.in));
            a.B.assign(static_cast<size_t>(a.out * a.rank), 0.f);
            a.dA.assign(a.A.size(), 0.f);
            a.dB.assign(a.B.size(), 0.f);
            // Kaiming-uniform, a = √5: gain √(2/(1+5)), bound = gain·√(3/in) = 1/√in.
            const double bound = 1.0 / std::sqrt(static_cast<double>(a.in));
            for (auto& v : a.A) v = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
            adapters_.push_back(std::move(a));
            keys_.emplace_back(l, p);
        }
    rebuild_slots(model);
}

void LoraAdapters::rebuild_slots(const Qwen2Config& model) {
    slots_.assign(static_cast<size_t>(model.num_hidden_layers), {});
    for (auto& s : slots_) s.fill(nullptr);
    for (size_t i = 0; i < adapters_.size(); ++i)
        slots_[static_cast<size_t>(keys_[i].first)][static_cast<int>(keys_[i].second)] = &adapters_[i];
}

LoraAdapters LoraAdapters::clone() const {
    LoraAdapters c;
    c.config_ = config_;
    c.keys_ = keys_;
    c.adapters_ = adapters_;
    c.slots_.assign(slots_.size(), {});
    for (auto& s : c.slots_) s.fill(nullptr);
    for (size_t i = 0; i < c.adapters_.size(); ++i)
        c.slots_[static_cast<size_t>(c.keys_[i].first)][static_cast<int>(c.keys_[i].second)] = &c.adapters_[i];
    return c;
}

ParamList LoraAdapters::parameters() {
    ParamList list;
    for (size_t i = 0; i < adapters_.size(); ++i) {
        auto [l, p] = keys_[i];
        LoraAdapter& a = adapters_[i];
        std::string base = "model.layers." + std::to_string(l) + "." + proj_module(p) + "." + proj_name(p);
        list.push_back({base + ".lora_A", {a.rank, a.in}, a.A.data(), a.dA.data()});
        list.push_back({base + ".lora_B", {a.out, a.rank}, a.B.data(), a.dB.data()});
    }
    return list;
}

int64_t LoraAdapters::num_parameters() const {
    int64_t n = 0;
    for (const auto& a : adapters_) n += a.rank * (a.in + a.out);
    return n;
}

void LoraAdapters::zero_grad() {
    for (auto& a : adapters_) {
        std::fill(a.dA.begin(), a.dA.end(), 0.f);
        std::fill(a.dB.begin(), a.dB.end(), 0.f);
    }
}

static WeightView f32_view(const std::vector<float>& m, int64_t rows, int64_t cols) {
    return {WeightType::f32, m.data(), rows, cols};
}

void projection_forward(float* y, float* mid, const float* x, const Matrix& W, const float* bias,
                        const LoraAdapter* adapter, int64_t M) {
    // y (M, out); mid (M, r); x (M, in)
    const int64_t N = W.rows;
    linear_forward(y, x, W.view(), M);
    if (adapter) {
        PPOLAB_ASSERT(adapter->in == W.cols && adapter->out == W.rows);
        const int64_t r = adapter->rank;
        linear_forward(mid, x, f32_view(adapter->A, r, adapter->in), M);             // (M, r) = x Aᵀ
        for (int64_t i = 0; i < M * r; ++i) mid[i] *= adapter->scale;                // scale on the small side
        linear_forward(y, mid, f32_view(adapter->B, N, r), M, /*accumulate=*/true);  // y += mid Bᵀ (FP32)
    }
    // + bias, then the sum returns to the base dtype (round_to_bf16_values:
    // 16 lanes at a time where AVX-512 is present, the same bits).
    if (bias) {
#pragma omp parallel for schedule(static) if (M * N > 32768)
        for (int64_t m = 0; m < M; ++m) {
            float* ym = y + m * N;  // (out)
            for (int64_t n = 0; n < N; ++n) ym[n] += bias[n];
        }
    }
    if (W.type == WeightType::bf16) round_to_bf16_values(y, y, M * N);
}

void projection_backward(float* dx, ProjectionGrads g, const float* dy, const float* x, const float* mid,
                         const Matrix& W, const LoraAdapter* adapter, int64_t M, float* scratch, bool accumulate) {
    // dx (M, in); dy (M, out); x (M, in); mid (M, r) = scale · A x; scratch (M, r)
    const int64_t N = W.rows, K = W.cols;
    linear_backward_input(dx, dy, W.view(), M, accumulate);
    // FP32 masters: their own product; a BF16 copy of them (mixed precision):
    // the BF16 product, as the forward's.
    if (g.dW) linear_backward_weight(g.dW, dy, x, M, N, K, W.type);
    if (g.dbias)
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) g.dbias[n] += dy[m * N + n];
    if (adapter) {
        const int64_t r = adapter->rank;
        float* dmid = scratch;  // (M, r) = scale · dy B: the gradient of A x
        linear_backward_input(dmid, dy, f32_view(adapter->B, N, r), M);
        for (int64_t i = 0; i < M * r; ++i) dmid[i] *= adapter->scale;
        if (g.adapter) {
            PPOLAB_ASSERT(g.adapter == adapter);
            linear_backward_weight(g.adapter->dB.data(), dy, mid, M, N, r);  // dB += dyᵀ (scale · A x)
            linear_backward_weight(g.adapter->dA.data(), dmid, x, M, r, K);  // dA += dmidᵀ x
        }
        linear_backward_input(dx, dmid, f32_view(adapter->A, r, K), M, /*accumulate=*/true);
    }
}

Qwen2Weights merge_lora(const Qwen2Weights& base, const LoraAdapters& lora) {
    Qwen2Weights merged = base;  // copies start unfrozen (weights.h)
    for (int64_t l = 0; l < static_cast<int64_t>(merged.layers.size()); ++l)
        for (const ProjectionInfo& p : kProjections) {
            const LoraAdapter* a = lora.get(l, p.proj);
            if (!a) continue;
            Matrix& W = merged.layers[static_cast<size_t>(l)].*p.weight;
            if (a->out != W.rows || a->in != W.cols || a->rank <= 0)
                fail("merge_lora: layer ", l, " ", p.name, ": adapter (", a->out, " x ", a->rank, ") (", a->rank, " x ",
                     a->in, ") does not fit the weight [", W.rows, ", ", W.cols, "]");
            const int64_t r = a->rank;
            for (int64_t o = 0; o < W.rows; ++o)
                for (int64_t i = 0; i < W.cols; ++i) {
                    double delta = 0;
                    for (int64_t k = 0; k < r; ++k)
                        delta += static_cast<double>(a->B[o * r + k]) * static_cast<double>(a->A[k * W.cols + i]);
                    const double v = static_cast<double>(W.at(o, i)) + static_cast<double>(a->scale) * delta;
                    if (W.type == WeightType::bf16) W.b[o * W.cols + i] = float_to_bf16(static_cast<float>(v));
                    else W.f[o * W.cols + i] = static_cast<float>(v);
                }
        }
    return merged;
}

}  // namespace ppolab
