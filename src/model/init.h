// init.h — random weights for a Qwen2 config (init-random, tests, pretraining).
#pragma once
#include <cstdint>

#include "model/weights.h"

namespace ppolab {

struct InitOptions {
    uint64_t seed = 0;
    WeightType matrices = WeightType::bf16;  // BF16 base, or FP32 master weights
    double stddev = 0.02;                    // N(0, stddev) for every matrix, as HF initializer_range
    // Hugging Face initialises norms to 1 and biases to 0; tests set this to
    // draw them at random too, so a dropped norm or bias cannot go unseen.
    bool randomize_norms_and_biases = false;
};

Qwen2Weights random_weights(const Qwen2Config& config, const InitOptions& options);

}  // namespace ppolab
