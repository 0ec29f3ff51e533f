// adamw.h — AdamW with PyTorch semantics, gradient checks and norm clipping.
//
// One update of `torch.optim.AdamW` (single-tensor path, amsgrad off), per
// parameter, with the step count t incremented first:
//   p ← p · (1 − lr·wd)                       (decoupled weight decay, first)
//   m ← β1·m + (1 − β1)·g
//   v ← β2·v + (1 − β2)·g²
//   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + ε)
// Moments are FP32; the scalars (bias corrections, step size) are computed
// in double and rounded to float where PyTorch rounds them, and the element
// operations follow PyTorch's CPU kernels (the m update is a fused
// multiply-add as in its vectorised `add`), so results agree with PyTorch to
// float precision (see tests/training/test_adamw_oracle.cpp).
//
// Everything runs sequentially in a fixed order: the same inputs give the
// same bits on every run (exact resume depends on it).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/param.h"
#include "training/tensors.h"
#include "util/json.h"

namespace ppolab {

struct AdamWConfig {
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.01;  // decoupled (SPEC §3)

    json to_json() const;
    static AdamWConfig from_json(const json& j, const std::string& where);  // validates ranges
    bool operator==(const AdamWConfig&) const = default;
};

// The serialisable state of one optimiser: step count and both moments.
struct AdamWState {
    int64_t step = 0;  // updates done so far
    AdamWConfig config;
    std::vector<NamedTensor> exp_avg;     // m, one per parameter, same names/shapes
    std::vector<NamedTensor> exp_avg_sq;  // v
};

class AdamW {
public:
    // The parameters' storage must outlive the optimiser; moments start at 0.
    AdamW(ParamList params, AdamWConfig config);

    // One update at learning rate `lr`. Every gradient is checked first
    // (check_gradients): on error nothing is changed.
    void step(double lr);

    int64_t steps() const { return step_; }
    const ParamList& params() const { return params_; }
    const AdamWConfig& config() const { return config_; }

    AdamWState state() const;
    // Validates names, shapes, config and step, then replaces the moments.
    void load_state(const AdamWState& state, std::string_view where);

private:
    ParamList params_;
    AdamWConfig config_;
    int64_t step_ = 0;
    std::vector<std::vector<float>> m_;  // per parameter, numel() each
    std::vector<std::vector<float>> v_;
};

// Error naming the parameter (and element) when a gradient is missing
// (nullptr) or not finite. `what` names the optimiser or role.
void check_gradients(const ParamList& params, std::string_view what);

// Total L2 norm of all gradients, accumulated in double: per tensor eight
// partial sums (element i into lane i % 8), combined pairwise, tensors in
// order — a fixed summation order, so the same bits on every run.
double grad_norm(const ParamList& params);

// torch.nn.utils.clip_grad_norm_: scale = max_norm / (norm + 1e-6), applied
// (as a float multiplier) only when scale < 1. Returns the unclipped norm.
// Checks the gradients first (check_gradients).
double clip_grad_norm(const ParamList& params, double max_norm, std::string_view what = "gradients");

// Sets every gradient to zero (gradients must be present).
void zero_grads(const ParamList& params);

}  // namespace ppolab
