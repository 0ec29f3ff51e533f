#include "training/adamw.h"

#include <cmath>
#include <cstring>

#include "util/canon_math.h"
#include "util/error.h"

namespace ppolab {

json AdamWConfig::to_json() const {
    return json{{"beta1", beta1}, {"beta2", beta2}, {"eps", eps}, {"weight_decay", weight_decay}};
}

AdamWConfig AdamWConfig::from_json(const json& j, const std::string& where) {
    AdamWConfig c;
    c.beta1 = json_number(j, "beta1", where);
    c.beta2 = json_number(j, "beta2", where);
    c.eps = json_number(j, "eps", where);
    c.weight_decay = json_number(j, "weight_decay", where);
    if (!(c.beta1 >= 0.0 && c.beta1 < 1.0)) fail(where, ": field 'beta1' must be in [0, 1), got ", c.beta1);
    if (!(c.beta2 >= 0.0 && c.beta2 < 1.0)) fail(where, ": field 'beta2' must be in [0, 1), got ", c.beta2);
    if (!(c.eps > 0.0 && std::isfinite(c.eps))) fail(where, ": field 'eps' must be > 0, got ", c.eps);
    if (!(c.weight_decay >= 0.0 && std::isfinite(c.weight_decay)))
        fail(where, ": field 'weight_decay' must be >= 0, got ", c.weight_decay);
    return c;
}

// Index of the first non-finite value, or -1. The scan is an OR over the
// exponent bits (vectorisable); the slow path only runs on failure.
static int64_t first_non_finite(const float* __restrict x, int64_t n) {
    uint32_t any = 0;
    for (int64_t i = 0; i < n; ++i) {
        uint32_t bits;
        std::memcpy(&bits, &x[i], 4);
        any |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (any == 0) return -1;
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i])) return i;
    return -1;
}

void check_gradients(const ParamList& params, std::string_view what) {
    for (const ParamRef& p : params) {
        if (p.grad == nullptr) fail(what, ": parameter '", p.name, "' has no gradient");
        const int64_t i = first_non_finite(p.grad, p.numel());
        if (i >= 0)
            fail(what, ": parameter '", p.name, "' has a non-finite gradient (", p.grad[i], " at element ", i,
                 " of shape ", shape_string(p.shape), ")");
    }
}

double grad_norm(const ParamList& params) {
    // Eight partial sums in double, element i going to lane i % 8 of its
    // tensor, lanes and tensors combined in a fixed order: the same bits on
    // every run, and vectorisable.
    double total = 0.0;
    for (const ParamRef& p : params) {
        PPOLAB_ASSERT(p.grad != nullptr);
        const float* __restrict g = p.grad;
        const int64_t n = p.numel();
        double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; ++k) {
                const double x = g[i + k];
                lane[k] += x * x;
            }
        for (int k = 0; i < n; ++i, ++k) {
            const double x = g[i];
            lane[k] += x * x;
        }
        total += ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    }
    return std::sqrt(total);
}

double clip_grad_norm(const ParamList& params, double max_norm, std::string_view what) {
    if (!(max_norm > 0.0)) fail(what, ": gradient clip must be > 0, got ", max_norm);
    check_gradients(params, what);
    const double norm = grad_norm(params);
    const double scale = max_norm / (norm + 1e-6);
    if (scale < 1.0) {
        const float s = static_cast<float>(scale);
        for (const ParamRef& p : params) {
            float* __restrict g = p.grad;
            const int64_t n = p.numel();
            for (int64_t i = 0; i < n; ++i) g[i] *= s;
        }
    }
    return norm;
}

void zero_grads(const ParamList& params) {
    for (const ParamRef& p : params) {
        PPOLAB_ASSERT(p.grad != nullptr);
        std::memset(p.grad, 0, static_cast<size_t>(p.numel()) * sizeof(float));
    }
}

AdamW::AdamW(ParamList params, AdamWConfig config) : params_(std::move(params)), config_(config) {
    (void)AdamWConfig::from_json(config_.to_json(), "AdamW config");  // range checks
    for (size_t i = 0; i < params_.size(); ++i) {
        if (params_[i].data == nullptr && params_[i].numel() > 0)
            fail("AdamW: parameter '", params_[i].name, "' has no data");
        for (size_t k = 0; k < i; ++k)
            if (params_[k].name == params_[i].name) fail("AdamW: parameter name '", params_[i].name, "' appears twice");
        m_.emplace_back(static_cast<size_t>(params_[i].numel()), 0.0f);
        v_.emplace_back(static_cast<size_t>(params_[i].numel()), 0.0f);
    }
}

void AdamW::step(double lr) {
    if (!(lr >= 0.0 && std::isfinite(lr))) fail("AdamW: learning rate must be finite and >= 0, got ", lr);
    check_gradients(params_, "AdamW");
    ++step_;
    const double t = static_cast<double>(step_);
    // Scalars as torch computes them (Python floats), rounded to float where
    // they meet a float tensor.
    const float decay = static_cast<float>(1.0 - lr * config_.weight_decay);
    const float beta1 = static_cast<float>(config_.beta1);
    const float one_minus_beta1 = static_cast<float>(1.0 - config_.beta1);
    const float beta2 = static_cast<float>(config_.beta2);
    const float one_minus_beta2 = static_cast<float>(1.0 - config_.beta2);
    // β^t with ppolab's own pow (util/canon_math.h): the same bits on every CPU.
    const double bias_correction1 = 1.0 - canon_pow(config_.beta1, t);
    const double bias_correction2 = 1.0 - canon_pow(config_.beta2, t);
    const float neg_step_size = static_cast<float>(-(lr / bias_correction1));
    const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    const float eps = static_cast<float>(config_.eps);
    for (size_t k = 0; k < params_.size(); ++k) {
        float* __restrict p = params_[k].data;        // (numel)
        const float* __restrict g = params_[k].grad;  // (numel)
        float* __restrict m = m_[k].data();           // (numel)
        float* __restrict v = v_[k].data();           // (numel)
        const int64_t n = params_[k].numel();
        for (int64_t i = 0; i < n; ++i) {
            p[i] = p[i] * decay;
            m[i] = std::fma(g[i], one_minus_beta1, m[i] * beta1);
            v[i] = v[i] * beta2 + one_minus_beta2 * g[i] * g[i];
            const float denom = std::sqrt(v[i]) / bias_correction2_sqrt + eps;
            p[i] = p[i] + neg_step_size * m[i] / denom;
        }
    }
}

AdamWState AdamW::state() const {
    AdamWState s;
    s.step = step_;
    s.config = config_;
    for (size_t k = 0; k < params_.size(); ++k) {
        s.exp_avg.push_back(NamedTensor{params_[k].name, params_[k].shape, m_[k]});
        s.exp_avg_sq.push_back(NamedTensor{params_[k].name, params_[k].shape, v_[k]});
    }
    return s;
}

void AdamW::load_state(const AdamWState& s, std::string_view where) {
    const std::string w(where);
    if (!(s.config == config_))
        fail(where, ": optimiser settings differ: state has ", s.config.to_json().dump(), ", expected ",
             config_.to_json().dump());
    if (s.step < 0) fail(where, ": optimiser step must be >= 0, got ", s.step);
    check_same_layout(s.exp_avg, params_, w + " (exp_avg)");
    check_same_layout(s.exp_avg_sq, params_, w + " (exp_avg_sq)");
    step_ = s.step;
    for (size_t k = 0; k < params_.size(); ++k) {
        m_[k] = s.exp_avg[k].values;
        v_[k] = s.exp_avg_sq[k].values;
    }
}

}  // namespace ppolab
