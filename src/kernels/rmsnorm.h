// rmsnorm.h — RMSNorm, forward and backward.
//   out[n,c] = x[n,c] · rstd[n] · weight[c],  rstd[n] = 1/sqrt(mean_c x[n,c]² + eps)
// Templates are instantiated for float (the engine) and double (gradient checks).
#pragma once
#include <cstdint>

namespace ppolab {

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* weight, int64_t N, int64_t C, double eps);
// dx = (overwrites) ; dweight (C) accumulates, may be nullptr (frozen norm).
template <typename T>
void rmsnorm_backward(T* dx, T* dweight, const T* dout, const T* x, const T* weight, const T* rstd, int64_t N,
                      int64_t C);

}  // namespace ppolab
