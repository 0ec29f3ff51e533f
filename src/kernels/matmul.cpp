// matmul.cpp — the public entry points of matmul.h: argument checks and the
// choice of path (see matmul_backend.h). Decode-sized products (M ≤ kSmallM)
// go to the streaming AVX-512 kernels whatever their K (so that a row's
// result does not depend on how many rows come with it), everything else to
// oneDNN; a CPU without AVX-512 gets the streaming kernels' portable twin.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>

#include "kernels/matmul_backend.h"
#include "kernels/simd.h"
#include "util/error.h"

namespace ppolab {
namespace {

std::atomic<MatmulPath> forced_path{MatmulPath::automatic};

// Tiny products (adapters of a tiny model, tests) run on the calling thread
// in the portable loops: a oneDNN call or an OpenMP region costs more than
// the work. Decode-sized products (M ≤ kRowInvariantRows) never go to
// oneDNN, and their path depends on the weight's shape only, never on M, so
// each row's result is bitwise what it is alone (matmul.h): kTinyWork is
// compared with one row's multiply-adds there, and both the portable loops
// and the small-M kernels sum every row in the same order at any M.
MatmulPath choose(int64_t M, int64_t N, int64_t K) {
    MatmulPath p = forced_path.load(std::memory_order_relaxed);
    if (p == MatmulPath::automatic) {
        if (M <= kSmallM) p = N * K < kTinyWork ? MatmulPath::portable : MatmulPath::small_m;
        else p = M * N * K < kTinyWork ? MatmulPath::portable : MatmulPath::dnnl;
    }
    if (p == MatmulPath::small_m && simd::simd_cpu_level() != simd::SimdLevel::avx512) p = MatmulPath::portable;
    return p;
}

void check_view(const WeightView& W, const char* where) {
    if (W.rows < 0 || W.cols < 0 || (W.rows * W.cols > 0 && W.data == nullptr))
        fail(where, ": weight view [", W.rows, ", ", W.cols, "] is invalid (negative size or null data)");
}

// K == 0 (empty sum): the product is zero.
void zero_product(float* Y, int64_t n, bool accumulate) {
    if (!accumulate) std::fill_n(Y, n, 0.f);
}

}  // namespace

void matmul_set_path(MatmulPath path) { forced_path.store(path); }
MatmulPath matmul_path() { return forced_path.load(); }

const char* matmul_path_name(int64_t M, int64_t N, int64_t K) {
    switch (choose(M, N, K)) {
        case MatmulPath::small_m: return "small_m_avx512";
        case MatmulPath::dnnl: return "dnnl";
        default: return "portable";
    }
}

void linear_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    check_view(W, "linear_forward");
    PPOLAB_ASSERT(M >= 0);
    if (M == 0 || W.rows == 0) return;
    if (W.cols == 0) return zero_product(Y, M * W.rows, accumulate);
    switch (choose(M, W.rows, W.cols)) {
        case MatmulPath::small_m: return matmul_detail::small_m_forward(Y, X, W, M, accumulate);
        case MatmulPath::dnnl: return matmul_detail::dnnl_forward(Y, X, W, M, accumulate);
        default: return matmul_detail::portable_forward(Y, X, W, M, accumulate);
    }
}

void linear_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    check_view(W, "linear_backward_input");
    PPOLAB_ASSERT(M >= 0);
    if (M == 0 || W.cols == 0) return;
    if (W.rows == 0) return zero_product(dX, M * W.cols, accumulate);
    // No small-M kernel here: training runs whole sequences (M ≥ 64).
    if (choose(M, W.rows, W.cols) == MatmulPath::portable)
        return matmul_detail::portable_backward_input(dX, dY, W, M, accumulate);
    matmul_detail::dnnl_backward_input(dX, dY, W, M, accumulate);
}

void linear_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                            WeightType inputs) {
    PPOLAB_ASSERT(M >= 0 && N >= 0 && K >= 0);
    if (M == 0 || N == 0 || K == 0) return;
    if (choose(M, N, K) == MatmulPath::portable)
        return matmul_detail::portable_backward_weight(dW, dY, X, M, N, K, inputs);
    matmul_detail::dnnl_backward_weight(dW, dY, X, M, N, K, inputs);
}

}  // namespace ppolab
