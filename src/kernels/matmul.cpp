// matmul.cpp — the public entry points of matmul.h: argument checks and the
// choice of path (see matmul_backend.h). Products of a frozen BF16 weight go
// to the AMX tiles where granted, at any M (elsewhere their decode-sized
// forwards to the same VNNI pack, read with `vdpbf16ps` or, where BF16
// products run as FP32, with FMA, as are their larger products where BF16
// products run as FP32); other decode-sized
// products (M ≤ kSmallM) to the streaming AVX-512 kernels whatever their K
// (so that a row's result does not depend on how many rows come with it),
// everything else to oneDNN; a CPU without AVX-512 gets the streaming
// kernels' portable twin.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>

#include "kernels/matmul_backend.h"
#include "kernels/numerics.h"
#include "kernels/simd.h"
#include "util/error.h"

namespace ppolab {
namespace {

std::atomic<MatmulPath> forced_path{MatmulPath::automatic};

enum class Product { forward, backward_input, backward_weight };

// The narrowest output width and reduction that the VNNI pack's FMA kernel
// takes above kSmallM rows (choose()).
constexpr int64_t kVnniMinWidth = 512;

// Rows from which canonical mode packs a changing BF16 weight per call for
// `vdpbf16ps` (the packing reads and writes the weight once; the product
// reads it once per 8 rows).
constexpr int64_t kPackPerCallRows = 64;

// Tiny products (a tiny model's, tests') run on the calling thread in the
// portable loops: a oneDNN call or an OpenMP region costs more than the
// work; but decode's FP32 ones (LoRA adapters) on the small-M kernels.
// Decode-sized products (M ≤ kRowInvariantRows) never go to
// oneDNN, and their path depends on the weight only, never on M, so each
// row's result is bitwise what it is alone (matmul.h): kTinyWork is compared
// with one row's multiply-adds there, and the portable loops, the small-M
// kernels and the AMX tiles sum every row in the same order at any M.
// Products of a frozen BF16 weight go to the AMX tiles where they compute
// BF16 natively (decode too: reading the weight bounds it, and the tiles
// read it faster than the small-M stream for up to 8 rows, BENCHMARKS.md
// session 18), larger products of other weights to oneDNN.
MatmulPath choose(int64_t M, int64_t N, int64_t K, Product product, WeightType type, bool frozen) {
    MatmulPath p = forced_path.load(std::memory_order_relaxed);
    if (p == MatmulPath::automatic && numerics_canonical()) {
        // The reference's sums only (numerics.h): the frozen base's forward
        // and backward to the input on its VNNI pack where AVX-512 is there
        // (`vdpbf16ps` or FMA, the same sums: matmul_vnni_avx512.cpp), every
        // other product on the canonical kernels.
        // A BF16 weight that changes every step (pretraining's BF16 copy)
        // too, packed per call, where `vdpbf16ps` reads the pack and the
        // rows pay for the packing: twice the FP32 FMA's rate.
        const bool packed_per_call = small_m_vnni_uses_dpbf16() && M >= kPackPerCallRows;
        const bool vnni = (frozen || packed_per_call) && type == WeightType::bf16 &&
                          product != Product::backward_weight && simd::simd_level() == simd::SimdLevel::avx512;
        return vnni ? MatmulPath::small_m_vnni : MatmulPath::canonical;
    }
    if (p == MatmulPath::automatic) {
        const bool tiles = frozen && type == WeightType::bf16 && amx_frozen_products();
        // FP32 weights (LoRA adapters: K or N = the rank) take the small-M
        // kernels' forward at any size: no thread, no conversion, no call
        // overhead to avoid, and 16 lanes instead of the portable loops.
        const bool tiny = N * K < kTinyWork && !(type == WeightType::f32 && product == Product::forward);
        // Without the tiles, the frozen base's decode reads its VNNI pack
        // (`vdpbf16ps` or FMA: matmul_vnni_avx512.cpp).
        const bool vnni = frozen && product == Product::forward;
        // Where BF16 products run as FP32, its larger products (forward and
        // backward to the input) read that pack with FMA too, widened once
        // per panel: level with oneDNN's FP32 kernels on the Qwen2.5-0.5B's
        // MLP and LM head, and oneDNN's FP32 copies of the weights (2× the
        // BF16 base per direction) are never made. Not where the outputs or
        // the reduction are under kVnniMinWidth (k and v, the tiny model):
        // 0.43–0.95× of oneDNN's speed there (BENCHMARKS.md session 24).
        const bool vnni_fma = frozen && type == WeightType::bf16 && product != Product::backward_weight && !tiles &&
                              !bf16_products_native() && N >= kVnniMinWidth && K >= kVnniMinWidth &&
                              simd::simd_cpu_level() == simd::SimdLevel::avx512;
        if (M <= kSmallM)
            p = tiny    ? MatmulPath::portable
                : tiles ? MatmulPath::amx
                : vnni  ? MatmulPath::small_m_vnni
                        : MatmulPath::small_m;
        else if (M * N * K < kTinyWork) p = MatmulPath::portable;
        else p = tiles ? MatmulPath::amx : vnni_fma ? MatmulPath::small_m_vnni : MatmulPath::dnnl;
    }
    if (p == MatmulPath::small_m_vnni && type != WeightType::bf16) p = MatmulPath::small_m;
    if (p == MatmulPath::small_m_vnni && simd::simd_cpu_level() != simd::SimdLevel::avx512) p = MatmulPath::portable;
    if (p == MatmulPath::small_m && simd::simd_cpu_level() != simd::SimdLevel::avx512) p = MatmulPath::portable;
    if (p == MatmulPath::amx && (type != WeightType::bf16 || product == Product::backward_weight || !matmul_has_amx()))
        p = MatmulPath::dnnl;
    return p;
}

bool is_frozen(const WeightView& W) { return W.prepacked != nullptr && W.prepacked->matches(W); }

const char* path_name(MatmulPath p) {
    switch (p) {
        case MatmulPath::small_m: return "small_m_avx512";
        case MatmulPath::small_m_vnni:
            return small_m_vnni_uses_dpbf16() ? "small_m_vnni_avx512" : "small_m_vnni_fma_avx512";
        case MatmulPath::amx: return "amx";
        case MatmulPath::dnnl: return "dnnl";
        case MatmulPath::canonical:
            return simd::simd_level() == simd::SimdLevel::avx512 ? "canonical_avx512"
                   : simd::simd_level() == simd::SimdLevel::avx2 ? "canonical_avx2"
                                                                 : "canonical_scalar";
        default: return "portable";
    }
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

const char* matmul_path_name(int64_t M, const WeightView& W) {
    return path_name(choose(M, W.rows, W.cols, Product::forward, W.type, is_frozen(W)));
}

const char* matmul_path_name(int64_t M, int64_t N, int64_t K) {
    return path_name(choose(M, N, K, Product::forward, WeightType::bf16, false));
}

void linear_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    check_view(W, "linear_forward");
    PPOLAB_ASSERT(M >= 0);
    if (M == 0 || W.rows == 0) return;
    if (W.cols == 0) return zero_product(Y, M * W.rows, accumulate);
    switch (choose(M, W.rows, W.cols, Product::forward, W.type, is_frozen(W))) {
        case MatmulPath::small_m: return matmul_detail::small_m_forward(Y, X, W, M, accumulate);
        case MatmulPath::small_m_vnni: return matmul_detail::small_m_vnni_forward(Y, X, W, M, accumulate);
        case MatmulPath::amx: return matmul_detail::amx_forward(Y, X, W, M, accumulate);
        case MatmulPath::dnnl: return matmul_detail::dnnl_forward(Y, X, W, M, accumulate);
        case MatmulPath::canonical: return matmul_detail::canonical_forward(Y, X, W, M, accumulate);
        default: return matmul_detail::portable_forward(Y, X, W, M, accumulate);
    }
}

void linear_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    check_view(W, "linear_backward_input");
    PPOLAB_ASSERT(M >= 0);
    if (M == 0 || W.cols == 0) return;
    if (W.rows == 0) return zero_product(dX, M * W.cols, accumulate);
    // No small-M kernel here (training runs whole sequences, M ≥ 64) but
    // the VNNI pack's, for the frozen base where BF16 products run as FP32.
    switch (choose(M, W.rows, W.cols, Product::backward_input, W.type, is_frozen(W))) {
        case MatmulPath::portable: return matmul_detail::portable_backward_input(dX, dY, W, M, accumulate);
        case MatmulPath::amx: return matmul_detail::amx_backward_input(dX, dY, W, M, accumulate);
        case MatmulPath::small_m_vnni: return matmul_detail::small_m_vnni_backward_input(dX, dY, W, M, accumulate);
        case MatmulPath::canonical: return matmul_detail::canonical_backward_input(dX, dY, W, M, accumulate);
        default: return matmul_detail::dnnl_backward_input(dX, dY, W, M, accumulate);
    }
}

void linear_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                            WeightType inputs) {
    PPOLAB_ASSERT(M >= 0 && N >= 0 && K >= 0);
    if (M == 0 || N == 0 || K == 0) return;
    const MatmulPath p = choose(M, N, K, Product::backward_weight, inputs, false);
    if (p == MatmulPath::canonical) return matmul_detail::canonical_backward_weight(dW, dY, X, M, N, K, inputs);
    if (p == MatmulPath::portable) return matmul_detail::portable_backward_weight(dW, dY, X, M, N, K, inputs);
    matmul_detail::dnnl_backward_weight(dW, dY, X, M, N, K, inputs);
}

}  // namespace ppolab
