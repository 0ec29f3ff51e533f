// rmsnorm.cpp — RMSNorm forward and backward (see rmsnorm.h).
//   out[n,c] = x[n,c] · r[n] · w[c],   r[n] = (mean_c x[n,c]² + eps)^(-1/2)
// Backward, with g[c] = dout[n,c] · w[c]:
//   dx[n,c] = r · g[c] − r³ · x[n,c] · (Σ_c' g[c'] x[n,c']) / C
//   dw[c]  += Σ_n dout[n,c] · x[n,c] · r[n]
// Sums are accumulated in double whatever T is (C ≤ a few thousand: cheap,
// and it keeps the float path within a few ulp of the double one).
#include "kernels/rmsnorm.h"

#include <omp.h>

#include <cmath>
#include <vector>

namespace ppolab {

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* weight, int64_t N, int64_t C, double eps) {
    // out (N, C); rstd (N); x (N, C); weight (C)
#pragma omp parallel for schedule(static) if (N * C > 16384)
    for (int64_t n = 0; n < N; ++n) {
        const T* xn = x + n * C;  // (C)
        T* on = out + n * C;      // (C)
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(xn[c]) * xn[c];
        const T r = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(C) + eps));
        rstd[n] = r;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) on[c] = xn[c] * r * weight[c];
    }
}

template <typename T>
void rmsnorm_backward(T* dx, T* dweight, const T* dout, const T* x, const T* weight, const T* rstd, int64_t N,
                      int64_t C) {
    // dx (N, C) overwritten; dweight (C) accumulated or nullptr; dout, x (N, C); weight (C); rstd (N)
    const bool parallel = N * C > 16384;
    const int threads = parallel ? omp_get_max_threads() : 1;
    // Per-thread partial sums of dweight, added in thread order (deterministic).
    std::vector<T> partial(dweight ? static_cast<size_t>(threads) * C : 0, T(0));  // (threads, C)
#pragma omp parallel num_threads(threads)
    {
        const int tid = omp_get_thread_num();
        T* dw = dweight ? partial.data() + static_cast<size_t>(tid) * C : nullptr;  // (C)
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; ++n) {
            const T* xn = x + n * C;     // (C)
            const T* gn = dout + n * C;  // (C)
            T* dxn = dx + n * C;         // (C)
            const T r = rstd[n];
            double dot = 0.0;  // Σ_c dout·w·x
#pragma omp simd reduction(+ : dot)
            for (int64_t c = 0; c < C; ++c) dot += static_cast<double>(gn[c]) * weight[c] * xn[c];
            const T k = static_cast<T>(static_cast<double>(r) * r * r * dot / static_cast<double>(C));
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) dxn[c] = r * gn[c] * weight[c] - k * xn[c];
            if (dw) {
#pragma omp simd
                for (int64_t c = 0; c < C; ++c) dw[c] += gn[c] * xn[c] * r;
            }
        }
    }
    if (dweight)
        for (int t = 0; t < threads; ++t) {
            const T* p = partial.data() + static_cast<size_t>(t) * C;  // (C)
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) dweight[c] += p[c];
        }
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, int64_t, int64_t, double);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, int64_t, int64_t, double);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*, const float*, int64_t,
                                      int64_t);
template void rmsnorm_backward<double>(double*, double*, const double*, const double*, const double*, const double*,
                                       int64_t, int64_t);

}  // namespace ppolab
