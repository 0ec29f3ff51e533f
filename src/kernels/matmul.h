// matmul.h — every matrix product of the engine goes through these three
// functions (the linear layer's forward and its two backwards).
//
// Layout: row-major. A weight W is [N, K] (out_features × in_features), as
// in a Hugging Face checkpoint and torch.nn.Linear.
//
// Contract for a BF16 weight: the FP32 input is rounded to BF16 (round to
// nearest even) before the product and the products are accumulated in FP32
// — exactly what a BF16 GEMM with an FP32 destination computes. For an FP32
// weight everything stays FP32.
#pragma once
#include <cstdint>

#include "util/bf16.h"

namespace ppolab {

enum class WeightType { f32, bf16 };

class PrepackedWeight;  // matmul_backend.h

struct WeightView {
    WeightType type;
    const void* data;  // float* or bf16*, [rows, cols]
    int64_t rows;      // N: output features
    int64_t cols;      // K: input features
    // Copies of this very weight in oneDNN's preferred layouts (a frozen
    // BF16 weight, matmul_backend.h); nullptr: the row-major data is read.
    // Ignored unless it was made for this data, rows and cols.
    const PrepackedWeight* prepacked = nullptr;
};

// Row invariance: a forward of M ≤ kRowInvariantRows rows (decode) gives
// each row bitwise the result it has alone (M = 1), whatever the other rows
// hold — one path per weight shape and the same summation order at every M.
// Generation relies on it to decode independent rows together (generate.h).
// 32 rows: a decode step reads every weight once whatever its row count, and
// on the AMX tiles a 32-row step costs little more than an 8-row one
// (BENCHMARKS.md session 19); the small-M kernels take rows in blocks of 8.
inline constexpr int64_t kRowInvariantRows = 32;

// Y[M,N] = X[M,K] · W[N,K]ᵀ  (+ Y when accumulate)
void linear_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate = false);
// dX[M,K] = dY[M,N] · W[N,K]  (+ dX when accumulate). For a BF16 W, dY is rounded to BF16.
void linear_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate = false);
// dW[N,K] += dY[M,N]ᵀ · X[M,K], FP32 (full-parameter training and adapters).
// With inputs = bf16 (mixed precision: the gradient of a BF16 copy of FP32
// master weights) dY and X are rounded to BF16 first and the products
// accumulate in FP32, as for a BF16 weight above.
void linear_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                            WeightType inputs = WeightType::f32);

}  // namespace ppolab
