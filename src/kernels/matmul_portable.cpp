// matmul_portable.cpp — the fallback path for CPUs without AVX-512 BF16 (and
// for BF16 shapes oneDNN cannot run): plain C++ with 16 split accumulators
// so that the compiler vectorises the dot products (AVX2 under
// -march=x86-64-v3), OpenMP over output rows.
#include <algorithm>
#include <vector>

#include "kernels/matmul_backend.h"

namespace ppolab {

// Below this many multiply-adds a product runs on the calling thread (an
// OpenMP region costs more than the work, and far more on a busy machine).
constexpr int64_t kParallelWork = int64_t(1) << 16;
namespace {

constexpr int kLanes = 16;

inline float dot_f32(const float* a, const float* b, int64_t K) {
    float acc[kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= K; k += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] += a[k + l] * b[k + l];
    for (int l = 0; k < K; ++k, ++l) acc[l] += a[k] * b[k];
    float s = 0.f;
    for (int l = 0; l < kLanes; ++l) s += acc[l];
    return s;
}

// W row → FP32 (exact for BF16), then the same dot product.
inline void widen_row(float* out, const WeightView& W, int64_t n) {
    const int64_t K = W.cols;
    if (W.type == WeightType::bf16) {
        const bf16* w = static_cast<const bf16*>(W.data) + n * K;
        for (int64_t k = 0; k < K; ++k) out[k] = bf16_to_float(w[k]);
    } else {
        std::copy_n(static_cast<const float*>(W.data) + n * K, K, out);
    }
}

}  // namespace

namespace matmul_detail {

void portable_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    std::vector<float> xr;  // (M, K) X rounded to BF16 for a BF16 weight
    const float* x = X;
    if (W.type == WeightType::bf16) {
        xr.resize(M * K);
        for (int64_t i = 0; i < M * K; ++i) xr[i] = round_to_bf16(X[i]);
        x = xr.data();
    }
#pragma omp parallel if (M * N * K >= kParallelWork)
    {
        std::vector<float> w(K);  // (K) one weight row in FP32
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; ++n) {
            widen_row(w.data(), W, n);
            for (int64_t m = 0; m < M; ++m) {
                float s = dot_f32(x + m * K, w.data(), K);
                Y[m * N + n] = accumulate ? Y[m * N + n] + s : s;
            }
        }
    }
}

void portable_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    const bool round = W.type == WeightType::bf16;
#pragma omp parallel if (M * N * K >= kParallelWork)
    {
        std::vector<float> w(K);    // (K) one weight row in FP32
        std::vector<float> acc(K);  // (K) one row of dX
#pragma omp for schedule(static)
        for (int64_t m = 0; m < M; ++m) {
            std::fill(acc.begin(), acc.end(), 0.f);
            for (int64_t n = 0; n < N; ++n) {
                const float g = round ? round_to_bf16(dY[m * N + n]) : dY[m * N + n];
                widen_row(w.data(), W, n);
                for (int64_t k = 0; k < K; ++k) acc[k] += g * w[k];
            }
            float* dx = dX + m * K;
            for (int64_t k = 0; k < K; ++k) dx[k] = accumulate ? dx[k] + acc[k] : acc[k];
        }
    }
}

void portable_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                              WeightType inputs) {
    if (inputs == WeightType::bf16) {  // the rounded inputs, held exactly in FP32
        std::vector<float> dYr(dY, dY + M * N), Xr(X, X + M * K);
        for (float& v : dYr) v = round_to_bf16(v);
        for (float& v : Xr) v = round_to_bf16(v);
        return portable_backward_weight(dW, dYr.data(), Xr.data(), M, N, K, WeightType::f32);
    }
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelWork)
    for (int64_t n = 0; n < N; ++n) {
        float* dw = dW + n * K;
        for (int64_t m = 0; m < M; ++m) {
            const float g = dY[m * N + n];
            const float* x = X + m * K;
            for (int64_t k = 0; k < K; ++k) dw[k] += g * x[k];
        }
    }
}

}  // namespace matmul_detail
}  // namespace ppolab
