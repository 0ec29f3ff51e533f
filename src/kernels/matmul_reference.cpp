// matmul_reference.cpp — reference implementation of matmul.h, and the
// definition of the canonical arithmetic (numerics.h): each output is one
// FP32 accumulator that starts at +0 and takes one fma per term, in index
// order (k for the forward, n for the backward to the input, m for the
// weight gradient); with accumulate the finished sum is then added to the
// destination. The canonical paths (matmul_canonical.cpp, and the VNNI
// pack's FMA kernel) must equal it bit for bit; the fast paths equal it up
// to summation order. Slow on purpose: one output at a time.
#include "kernels/matmul_reference.h"

#include <cmath>
#include <vector>

namespace ppolab {

// Below this many multiply-adds a product runs on the calling thread (an
// OpenMP region costs more than the work, and far more on a busy machine).
constexpr int64_t kParallelWork = int64_t(1) << 16;

static float weight_at(const WeightView& W, int64_t n, int64_t k) {
    return W.type == WeightType::bf16 ? bf16_to_float(static_cast<const bf16*>(W.data)[n * W.cols + k])
                                      : static_cast<const float*>(W.data)[n * W.cols + k];
}

static float input_at(const float* x, int64_t i, bool round) { return round ? round_to_bf16(x[i]) : x[i]; }

void linear_forward_reference(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    const bool round = W.type == WeightType::bf16;
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelWork)
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.f;
            for (int64_t k = 0; k < K; ++k) acc = std::fma(input_at(X, m * K + k, round), weight_at(W, n, k), acc);
            Y[m * N + n] = accumulate ? Y[m * N + n] + acc : acc;
        }
}

void linear_backward_input_reference(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    const bool round = W.type == WeightType::bf16;
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelWork)
    for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) {
            float acc = 0.f;
            for (int64_t n = 0; n < N; ++n) acc = std::fma(input_at(dY, m * N + n, round), weight_at(W, n, k), acc);
            dX[m * K + k] = accumulate ? dX[m * K + k] + acc : acc;
        }
}

void linear_backward_weight_reference(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                                      WeightType inputs) {
    const bool round = inputs == WeightType::bf16;
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelWork)
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) {
            float acc = 0.f;
            for (int64_t m = 0; m < M; ++m)
                acc = std::fma(input_at(dY, m * N + n, round), input_at(X, m * K + k, round), acc);
            dW[n * K + k] += acc;
        }
}

}  // namespace ppolab
