// matmul_reference.h — the plain-loop implementation of the matmul.h
// contract, kept as the oracle of the fast backend (tests, benchmarks).
// Same signatures and semantics as linear_forward / linear_backward_input /
// linear_backward_weight; slow on purpose (one output at a time, one FP32
// FMA per term in index order from +0, BF16 products pair by pair with the
// odd term first): the canonical arithmetic's definition (numerics.h).
#pragma once
#include <cstdint>

#include "kernels/matmul.h"

namespace ppolab {

void linear_forward_reference(float* Y, const float* X, WeightView W, int64_t M, bool accumulate = false);
void linear_backward_input_reference(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate = false);
void linear_backward_weight_reference(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                                      WeightType inputs = WeightType::f32);

}  // namespace ppolab
