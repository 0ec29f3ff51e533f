// matmul_reference.cpp — reference implementation of matmul.h, and the
// definition of the canonical arithmetic (numerics.h): each output is one
// FP32 accumulator that starts at +0 and takes one fma per term, over the
// reduction index (k for the forward, n for the backward to the input, m for
// the weight gradient) ascending — where the inputs are BF16 (a BF16 weight,
// or BF16 inputs of the weight gradient) pair by pair, (1, 0), (3, 2), …,
// the odd term of each pair first, which is how `vdpbf16ps` sums; with
// accumulate the finished sum is then added to the destination. Denormals
// are flushed (numerics.h: MXCSR's FTZ and DAZ, under which `vdpbf16ps`
// and these FMAs give the same bits). The canonical paths
// (matmul_canonical.cpp, and the VNNI pack's kernels) must equal it bit for
// bit; the fast paths equal it up to summation order. Slow on purpose: one
// output at a time.
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

// One output: Σ_t a(t)·b(t), t < T, as FMAs from +0, t ascending; pair by
// pair with the odd term first where `pairs`. An odd T's last pair has
// +0·+0 for its odd term (what `vdpbf16ps` reads from the zero padding):
// it turns an accumulator of −0 (a flushed negative result) into +0.
template <class A, class B>
static float chain(int64_t T, bool pairs, A a, B b) {
    float acc = 0.f;
    if (!pairs) {
        for (int64_t t = 0; t < T; ++t) acc = std::fma(a(t), b(t), acc);
        return acc;
    }
    for (int64_t t = 0; t < T; t += 2) {
        acc = t + 1 < T ? std::fma(a(t + 1), b(t + 1), acc) : std::fma(0.f, 0.f, acc);
        acc = std::fma(a(t), b(t), acc);
    }
    return acc;
}

void linear_forward_reference(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    const bool round = W.type == WeightType::bf16;
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelWork)
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            const float acc = chain(
                K, round, [&](int64_t k) { return input_at(X, m * K + k, round); },
                [&](int64_t k) { return weight_at(W, n, k); });
            Y[m * N + n] = accumulate ? Y[m * N + n] + acc : acc;
        }
}

void linear_backward_input_reference(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    const bool round = W.type == WeightType::bf16;
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelWork)
    for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) {
            const float acc = chain(
                N, round, [&](int64_t n) { return input_at(dY, m * N + n, round); },
                [&](int64_t n) { return weight_at(W, n, k); });
            dX[m * K + k] = accumulate ? dX[m * K + k] + acc : acc;
        }
}

void linear_backward_weight_reference(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                                      WeightType inputs) {
    const bool round = inputs == WeightType::bf16;
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelWork)
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) {
            const float acc = chain(
                M, round, [&](int64_t m) { return input_at(dY, m * N + n, round); },
                [&](int64_t m) { return input_at(X, m * K + k, round); });
            dW[n * K + k] += acc;
        }
}

}  // namespace ppolab
