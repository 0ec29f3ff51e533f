// rope.cpp — rotary position embedding, Hugging Face Qwen2 convention (see rope.h).
// Pair i of a head is (x[i], x[i + d/2]), rotated by angle p · θ^(-2i/d).
// Angles and their cos/sin are computed in double and rounded once to T;
// a per-thread table (positions × d/2) is built once and reused. θ^(2i/d),
// cos and sin are ppolab's own (util/canon_math.h), so the table — and the
// rotation, a fixed sequence of products and sums — has the same bits on
// every CPU.
#include "kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/canon_math.h"
#include "util/error.h"

namespace ppolab {

namespace {

template <typename T>
struct RopeTable {
    double theta = 0;
    int64_t head_dim = 0;
    int64_t positions = 0;  // rows in the table
    std::vector<T> cos;     // (positions, head_dim/2)
    std::vector<T> sin;     // (positions, head_dim/2)
};

// The calling thread's table, large enough for every position in `positions`.
template <typename T>
const RopeTable<T>& rope_table(const int32_t* positions, int64_t N, int64_t head_dim, double theta) {
    if (head_dim <= 0 || head_dim % 2 != 0) fail("rope: head_dim must be even and positive, got ", head_dim);
    if (!(theta > 0)) fail("rope: theta must be positive, got ", theta);
    int64_t max_pos = 0;
    for (int64_t n = 0; n < N; ++n) {
        if (positions[n] < 0) fail("rope: position ", n, " is negative (", positions[n], ")");
        if (positions[n] > max_pos) max_pos = positions[n];
    }
    thread_local RopeTable<T> table;
    if (table.theta != theta || table.head_dim != head_dim || table.positions <= max_pos) {
        const int64_t half = head_dim / 2;
        const int64_t rows = std::max<int64_t>(max_pos + 1, std::max<int64_t>(2 * table.positions, 1024));
        table.theta = theta;
        table.head_dim = head_dim;
        table.positions = rows;
        table.cos.resize(static_cast<size_t>(rows * half));
        table.sin.resize(static_cast<size_t>(rows * half));
        std::vector<double> inv_freq(half);  // (head_dim/2)
        for (int64_t i = 0; i < half; ++i)
            inv_freq[i] = 1.0 / canon_pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
        for (int64_t p = 0; p < rows; ++p)
            for (int64_t i = 0; i < half; ++i) {
                const double a = static_cast<double>(p) * inv_freq[i];
                table.cos[p * half + i] = static_cast<T>(canon_cos(a));
                table.sin[p * half + i] = static_cast<T>(canon_sin(a));
            }
    }
    return table;
}

// sign = +1: forward rotation; sign = −1: its inverse (the backward).
template <typename T>
void rope_apply(T* x, const int32_t* positions, int64_t N, int64_t heads, int64_t head_dim, double theta, T sign) {
    const RopeTable<T>& table = rope_table<T>(positions, N, head_dim, theta);
    const int64_t half = head_dim / 2;
    const T* cos_all = table.cos.data();  // (positions, half)
    const T* sin_all = table.sin.data();  // (positions, half)
#pragma omp parallel for schedule(static) if (N * heads * head_dim > 32768)
    for (int64_t n = 0; n < N; ++n) {
        const T* c = cos_all + static_cast<int64_t>(positions[n]) * half;  // (half)
        const T* s = sin_all + static_cast<int64_t>(positions[n]) * half;  // (half)
        for (int64_t h = 0; h < heads; ++h) {
            T* x1 = x + (n * heads + h) * head_dim;  // (half)
            T* x2 = x1 + half;                       // (half)
#pragma omp simd
            for (int64_t i = 0; i < half; ++i) {
                const T a = x1[i], b = x2[i], si = sign * s[i];
                x1[i] = a * c[i] - b * si;
                x2[i] = b * c[i] + a * si;
            }
        }
    }
}

}  // namespace

template <typename T>
void rope_forward(T* x, const int32_t* positions, int64_t N, int64_t heads, int64_t head_dim, double theta) {
    rope_apply<T>(x, positions, N, heads, head_dim, theta, T(1));
}

template <typename T>
void rope_backward(T* dx, const int32_t* positions, int64_t N, int64_t heads, int64_t head_dim, double theta) {
    rope_apply<T>(dx, positions, N, heads, head_dim, theta, T(-1));
}

template void rope_forward<float>(float*, const int32_t*, int64_t, int64_t, int64_t, double);
template void rope_forward<double>(double*, const int32_t*, int64_t, int64_t, int64_t, double);
template void rope_backward<float>(float*, const int32_t*, int64_t, int64_t, int64_t, double);
template void rope_backward<double>(double*, const int32_t*, int64_t, int64_t, int64_t, double);

}  // namespace ppolab
