// rmsnorm.cpp — RMSNorm forward and backward (see rmsnorm.h).
//   out[n,c] = x[n,c] · r[n] · w[c],   r[n] = (mean_c x[n,c]² + eps)^(-1/2)
// Backward, with g[c] = dout[n,c] · w[c]:
//   dx[n,c] = r · g[c] − r³ · x[n,c] · (Σ_c' g[c'] x[n,c']) / C
//   dw[c]  += Σ_n dout[n,c] · x[n,c] · r[n]
// Sums over c are accumulated in double whatever T is (C ≤ a few thousand:
// cheap, and it keeps the float path within a few ulp of the double one).
//
// One order of operations, whatever the CPU or thread count:
//   * Σ_c runs in 16 interleaved double partial sums (c in lane c mod 16, c
//     ascending) closed by a fixed tree (simd.h lanes16_close); the
//     elementwise products are written left to right (no FMA: -ffp-contract=off).
//   * threads split rows, never a sum: Σ_n for dw runs over fixed blocks of
//     kRowBlock rows (rows ascending within a block, from 0), and the blocks'
//     partials are added to dweight in block order — the same whatever the
//     number of OpenMP threads.
#include "kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/simd.h"

namespace ppolab {

namespace {

constexpr int64_t kRowBlock = 64;  // rows per dweight partial

// Σ_c a[c]·b[c] (·w[c] when w is given) in double, in the 16-lane association.
template <typename T>
double rms_dot(const T* a, const T* b, const T* w, int64_t C) {
    double lanes[16] = {};
    int64_t c = 0;
    for (; c + 16 <= C; c += 16)
        for (int l = 0; l < 16; ++l) {
            const double p = static_cast<double>(a[c + l]) * (w ? static_cast<double>(w[c + l]) : 1.0);
            lanes[l] += p * static_cast<double>(b[c + l]);
        }
    for (; c < C; ++c)
        lanes[c % 16] += static_cast<double>(a[c]) * (w ? static_cast<double>(w[c]) : 1.0) * static_cast<double>(b[c]);
    return simd::lanes16_close(lanes);
}

}  // namespace

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* weight, int64_t N, int64_t C, double eps) {
    // out (N, C); rstd (N); x (N, C); weight (C)
#pragma omp parallel for schedule(static) if (N * C > 16384)
    for (int64_t n = 0; n < N; ++n) {
        const T* xn = x + n * C;  // (C)
        T* on = out + n * C;      // (C)
        const double ss = rms_dot<T>(xn, xn, nullptr, C);
        const T r = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(C) + eps));
        rstd[n] = r;
        for (int64_t c = 0; c < C; ++c) on[c] = xn[c] * r * weight[c];
    }
}

template <typename T>
void rmsnorm_backward(T* dx, T* dweight, const T* dout, const T* x, const T* weight, const T* rstd, int64_t N,
                      int64_t C) {
    // dx (N, C) overwritten; dweight (C) accumulated or nullptr; dout, x (N, C); weight (C); rstd (N)
    const int64_t blocks = (N + kRowBlock - 1) / kRowBlock;
    // Each block's Σ over its rows of dout·x·r, added to dweight in block order below.
    std::vector<T> partial(dweight ? static_cast<size_t>(blocks * C) : 0, T(0));  // (blocks, C)
#pragma omp parallel for schedule(static) if (N * C > 16384)
    for (int64_t blk = 0; blk < blocks; ++blk) {
        T* dw = dweight ? partial.data() + blk * C : nullptr;  // (C)
        for (int64_t n = blk * kRowBlock; n < std::min(N, (blk + 1) * kRowBlock); ++n) {
            const T* xn = x + n * C;     // (C)
            const T* gn = dout + n * C;  // (C)
            T* dxn = dx + n * C;         // (C)
            const T r = rstd[n];
            const double dot = rms_dot<T>(gn, xn, weight, C);  // Σ_c dout·w·x
            const T k = static_cast<T>(static_cast<double>(r) * r * r * dot / static_cast<double>(C));
            for (int64_t c = 0; c < C; ++c) dxn[c] = r * gn[c] * weight[c] - k * xn[c];
            if (dw)
                for (int64_t c = 0; c < C; ++c) dw[c] += gn[c] * xn[c] * r;
        }
    }
    if (dweight)
        for (int64_t blk = 0; blk < blocks; ++blk) {
            const T* p = partial.data() + blk * C;  // (C)
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
