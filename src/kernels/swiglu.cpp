// swiglu.cpp — out = silu(gate) · up (see swiglu.h).
//   σ = 1/(1+e^(−g)),  silu(g) = g·σ,  silu'(g) = σ·(1 + g·(1 − σ))
//   dgate = dout · up · silu'(gate),  dup = dout · silu(gate)   (both overwritten)
#include "kernels/swiglu.h"

#include <cmath>

namespace ppolab {

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
    // out, gate, up (n)
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
        const T g = gate[i];
        out[i] = g / (T(1) + std::exp(-g)) * up[i];
    }
}

template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
    // dgate, dup (n) overwritten; dout, gate, up (n)
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
        const T g = gate[i];
        const T sig = T(1) / (T(1) + std::exp(-g));
        const T d = dout[i];
        dgate[i] = d * up[i] * sig * (T(1) + g * (T(1) - sig));
        dup[i] = d * g * sig;
    }
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t);
template void swiglu_forward<double>(double*, const double*, const double*, int64_t);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t);
template void swiglu_backward<double>(double*, double*, const double*, const double*, const double*, int64_t);

}  // namespace ppolab
