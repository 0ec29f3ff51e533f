// param.h — a learned tensor as the optimiser and the state files see it.
//
// Whatever learns (LoRA adapters, scalar heads, every weight of a model in
// full-parameter mode) exposes a list of ParamRef in a fixed order; AdamW,
// gradient clipping, identities (sha256) and resume states work on that list
// alone and never look inside the model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ppolab {

struct ParamRef {
    std::string name;            // e.g. "model.layers.0.self_attn.q_proj.lora_A"
    std::vector<int64_t> shape;  // e.g. {8, 896}
    float* data = nullptr;       // FP32 values, numel() of them
    float* grad = nullptr;       // FP32 gradient of the same size (nullptr: frozen)

    int64_t numel() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
    }
};

using ParamList = std::vector<ParamRef>;

}  // namespace ppolab
