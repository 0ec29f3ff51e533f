// swiglu.h — the gated MLP activation: out = silu(gate) · up, silu(g) = g·σ(g).
#pragma once
#include <cstdint>

namespace ppolab {

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n);
// dgate, dup (n) are overwritten.
template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n);

}  // namespace ppolab
