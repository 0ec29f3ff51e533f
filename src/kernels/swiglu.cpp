// swiglu.cpp — out = silu(gate) · up (see swiglu.h).
//   σ = 1/(1+e^(−g)),  silu(g) = g·σ,  silu'(g) = σ·(1 + g·(1 − σ))
//   dgate = dout · up · silu'(gate),  dup = dout · silu(gate)   (both overwritten)
// The float path runs on whole vectors with simd.h's exp (AVX-512 or AVX2,
// as the CPU has); the scalar float path (other CPUs, and the vector paths'
// tails) uses its twin canon_expf and the same operations in the same
// order, so every path gives the same bits. Only the double instantiation
// (gradient checks, never a saved result) uses std::exp.
#include "kernels/swiglu.h"

#include <cmath>
#include <type_traits>

#include "kernels/simd.h"
#include "util/canon_math.h"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace ppolab {

namespace {

using namespace simd;

constexpr int64_t kBlock = 8192;  // elements per OpenMP work item

// e^x: canon_expf for float (the vector lanes' twin), std::exp for double.
template <typename T>
PPOLAB_SIMD_INLINE T swiglu_exp(T x) {
    if constexpr (std::is_same_v<T, float>) return canon_expf(x);
    else return std::exp(x);
}

template <typename T>
PPOLAB_SIMD_INLINE void swiglu_forward_scalar(T* out, const T* gate, const T* up, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const T g = gate[i];
        out[i] = g / (T(1) + swiglu_exp<T>(-g)) * up[i];
    }
}

template <typename T>
PPOLAB_SIMD_INLINE void swiglu_backward_scalar(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const T g = gate[i];
        const T sig = T(1) / (T(1) + swiglu_exp<T>(-g));
        const T d = dout[i];
        dgate[i] = d * up[i] * sig * (T(1) + g * (T(1) - sig));
        dup[i] = d * g * sig;
    }
}

template <class V>
PPOLAB_SIMD_INLINE void swiglu_forward_block(float* out, const float* gate, const float* up, int64_t n) {
    constexpr int64_t L = sizeof(V) / 4;
    int64_t i = 0;
    for (; i + L <= n; i += L) {
        const V g = vload<V>(gate + i);
        vstore(out + i, g / (1.f + vexp<V>(-g)) * vload<V>(up + i));
    }
    swiglu_forward_scalar<float>(out + i, gate + i, up + i, n - i);
}

template <class V>
PPOLAB_SIMD_INLINE void swiglu_backward_block(float* dgate, float* dup, const float* dout, const float* gate,
                                              const float* up, int64_t n) {
    constexpr int64_t L = sizeof(V) / 4;
    int64_t i = 0;
    for (; i + L <= n; i += L) {
        const V g = vload<V>(gate + i), d = vload<V>(dout + i);
        const V sig = 1.f / (1.f + vexp<V>(-g));
        vstore(dgate + i, d * vload<V>(up + i) * sig * (1.f + g * (1.f - sig)));
        vstore(dup + i, d * g * sig);
    }
    swiglu_backward_scalar<float>(dgate + i, dup + i, dout + i, gate + i, up + i, n - i);
}

PPOLAB_SIMD_AVX2 void swiglu_forward_avx2(float* out, const float* gate, const float* up, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < n; b += kBlock)
        swiglu_forward_block<vf8>(out + b, gate + b, up + b, std::min(kBlock, n - b));
}

PPOLAB_SIMD_AVX512 void swiglu_forward_avx512(float* out, const float* gate, const float* up, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < n; b += kBlock)
        swiglu_forward_block<vf16>(out + b, gate + b, up + b, std::min(kBlock, n - b));
}

PPOLAB_SIMD_AVX2 void swiglu_backward_avx2(float* dgate, float* dup, const float* dout, const float* gate,
                                           const float* up, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < n; b += kBlock)
        swiglu_backward_block<vf8>(dgate + b, dup + b, dout + b, gate + b, up + b, std::min(kBlock, n - b));
}

PPOLAB_SIMD_AVX512 void swiglu_backward_avx512(float* dgate, float* dup, const float* dout, const float* gate,
                                               const float* up, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < n; b += kBlock)
        swiglu_backward_block<vf16>(dgate + b, dup + b, dout + b, gate + b, up + b, std::min(kBlock, n - b));
}

}  // namespace

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
    // out, gate, up (n)
    if constexpr (std::is_same_v<T, float>) {
        if (simd_has_avx512()) return swiglu_forward_avx512(out, gate, up, n);
        if (simd_has_avx2()) return swiglu_forward_avx2(out, gate, up, n);
    }
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < n; b += kBlock)
        swiglu_forward_scalar<T>(out + b, gate + b, up + b, std::min(kBlock, n - b));
}

template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
    // dgate, dup (n) overwritten; dout, gate, up (n)
    if constexpr (std::is_same_v<T, float>) {
        if (simd_has_avx512()) return swiglu_backward_avx512(dgate, dup, dout, gate, up, n);
        if (simd_has_avx2()) return swiglu_backward_avx2(dgate, dup, dout, gate, up, n);
    }
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < n; b += kBlock)
        swiglu_backward_scalar<T>(dgate + b, dup + b, dout + b, gate + b, up + b, std::min(kBlock, n - b));
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t);
template void swiglu_forward<double>(double*, const double*, const double*, int64_t);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t);
template void swiglu_backward<double>(double*, double*, const double*, const double*, const double*, int64_t);

}  // namespace ppolab
