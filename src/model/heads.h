// heads.h — the scalar head of the reward model and of the critic (SPEC §2):
//   score = weight · h + bias,  weight (1, H), bias (1): H + 1 parameters
// (897 on the 0.5B shape), FP32, read from the final normed hidden state
// (FP32, after model.norm; not rounded to BF16 — see qwen2.h).
// The reward head starts at weight ~ N(0, 0.02) from a seeded Philox, bias 0;
// the critic's value head starts all zero.
#pragma once
#include <cstdint>
#include <vector>

#include "model/param.h"

namespace ppolab {

struct ScalarHead {
    int64_t hidden = 0;          // H
    std::vector<float> weight;   // (1, H)
    std::vector<float> bias;     // (1)
    std::vector<float> dweight;  // (1, H) gradient, accumulated
    std::vector<float> dbias;    // (1)

    static ScalarHead reward_init(int64_t hidden, uint64_t seed, double stddev = 0.02);
    static ScalarHead zeros(int64_t hidden);

    // out (N) = h (N, H) · weightᵀ + bias
    void forward(float* out, const float* h, int64_t N) const;
    // dh (N, H) overwritten with dout[n] · weight; dweight, dbias accumulate.
    void backward(float* dh, const float* dout, const float* h, int64_t N);

    ParamList parameters();  // "head.weight" (1, H), "head.bias" (1)
    int64_t num_parameters() const { return hidden + 1; }
    void zero_grad();
};

}  // namespace ppolab
