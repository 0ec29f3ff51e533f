// matmul_reference.cpp — reference implementation of matmul.h (plain
// loops, FP32 accumulation in index order): the oracle of the fast backend.
#include "kernels/matmul_reference.h"

#include <vector>

namespace ppolab {

// Below this many multiply-adds a product runs on the calling thread (an
// OpenMP region costs more than the work, and far more on a busy machine).
constexpr int64_t kParallelWork = int64_t(1) << 16;

static float weight_at(const WeightView& W, int64_t n, int64_t k) {
    return W.type == WeightType::bf16 ? bf16_to_float(static_cast<const bf16*>(W.data)[n * W.cols + k])
                                      : static_cast<const float*>(W.data)[n * W.cols + k];
}

void linear_forward_reference(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    std::vector<float> x(K);
#pragma omp parallel for firstprivate(x) schedule(static) if (M * N * K >= kParallelWork)
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t k = 0; k < K; ++k) x[k] = W.type == WeightType::bf16 ? round_to_bf16(X[m * K + k]) : X[m * K + k];
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.f;
            for (int64_t k = 0; k < K; ++k) acc += x[k] * weight_at(W, n, k);
            Y[m * N + n] = accumulate ? Y[m * N + n] + acc : acc;
        }
    }
}

void linear_backward_input_reference(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelWork)
    for (int64_t m = 0; m < M; ++m) {
        std::vector<float> acc(K, 0.f);
        for (int64_t n = 0; n < N; ++n) {
            float g = W.type == WeightType::bf16 ? round_to_bf16(dY[m * N + n]) : dY[m * N + n];
            for (int64_t k = 0; k < K; ++k) acc[k] += g * weight_at(W, n, k);
        }
        for (int64_t k = 0; k < K; ++k) dX[m * K + k] = accumulate ? dX[m * K + k] + acc[k] : acc[k];
    }
}

void linear_backward_weight_reference(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K) {
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelWork)
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m) {
            float g = dY[m * N + n];
            for (int64_t k = 0; k < K; ++k) dW[n * K + k] += g * X[m * K + k];
        }
}

}  // namespace ppolab
