// simd.h — the few vector operations the layer kernels are written in
// (GCC vector extensions). A kernel body is an always_inline template over the
// vector type, instantiated once in a PPOLAB_SIMD_AVX2 function (vf8) and once
// in a PPOLAB_SIMD_AVX512 function (vf16), chosen at run time with
// simd_has_avx512() / simd_has_avx2(); each copy is compiled for its own
// instruction set, whatever -march the build uses. Every kernel keeps a
// portable scalar path for other CPUs.
// Keep OpenMP regions in those non-template functions: the outlined body of a
// region inherits the target of the function it is written in.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/numerics.h"
#include "util/canon_math.h"

// Every helper taking or returning a vector is always inlined: no ABI is involved.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

#define PPOLAB_SIMD_INLINE inline __attribute__((always_inline))
#define PPOLAB_SIMD_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512dq")))
#define PPOLAB_SIMD_AVX2 __attribute__((target("avx2,fma")))

namespace ppolab::simd {

typedef float vf8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));
typedef float vf16 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));
typedef float vf4 __attribute__((vector_size(16)));   // the floats widened into a vd4
typedef double vd4 __attribute__((vector_size(32)));  // AVX2
typedef double vd8 __attribute__((vector_size(64)));  // AVX-512

template <class V>
PPOLAB_SIMD_INLINE V vload(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
template <class V>
PPOLAB_SIMD_INLINE void vstore(float* p, V v) {
    std::memcpy(p, &v, sizeof v);
}
// Broadcasts. GCC 12 builds {x, x, …} AVX-512 vectors one masked lane at a
// time inside loops, so for GCC the instruction is spelt out (asm, no memory
// clobber). Clang (fuzz builds) makes one broadcast of the plain loop; its
// OpenMP regions do not inherit a function's target, so no asm there.
template <class V>
PPOLAB_SIMD_INLINE V vset(float x) {
    V v;
#if defined(__clang__)
    for (size_t i = 0; i < sizeof(V) / 4; ++i) v[i] = x;
#else
    asm("vbroadcastss %1, %0" : "=v"(v) : "v"(x));
#endif
    return v;
}
template <class V>
PPOLAB_SIMD_INLINE V vbcast(const float* p) {
#if defined(__clang__)
    return vset<V>(*p);
#else
    V v;
    asm("vbroadcastss %1, %0" : "=v"(v) : "m"(*p));
    return v;
#endif
}
template <class V>
PPOLAB_SIMD_INLINE float vhsum(V v) {
    float s = 0;
    for (size_t i = 0; i < sizeof(V) / 4; ++i) s += v[i];
    return s;
}
template <class V>
PPOLAB_SIMD_INLINE float vhmax(V v) {
    float m = v[0];
    for (size_t i = 1; i < sizeof(V) / 4; ++i) m = std::max(m, v[i]);
    return m;
}

// e^x on float lanes: canon_math.h's body (the Cephes expf polynomial, see
// canon_detail::exp_f32), so every lane equals canon_expf of it bit for bit —
// scalar paths and tails use canon_expf. x below −87.34 (e^x under FLT_MIN,
// and −∞) gives exactly 0.
template <class V>
PPOLAB_SIMD_INLINE V vexp(V x) {
    return canon_detail::exp_f32<V, decltype(x < x)>(x);
}

// e^x on float64 lanes: canon_math.h's body (see canon_detail::exp_f64), so
// every lane equals canon_exp of it bit for bit: within 1.5 ulp of e^x, +0 below
// −745.13, +∞ above log(DBL_MAX), denormal results rounded once.
template <class VD>
PPOLAB_SIMD_INLINE VD vexp_f64(VD x) {
    return canon_detail::exp_f64<VD, decltype(x < x)>(x);
}

// ---------------------------------------------------------------------------
// The one association of every float/double reduction that reaches a result:
// 16 interleaved partial sums — element i (in increasing i) goes to lane
// i mod 16, each lane starting from +0 — closed by a fixed tree:
// a[l] += a[l + 8] for l < 8, then + 4, + 2, + 1. The AVX-512 paths keep the
// 16 lanes in one vf16 (or two vd8), AVX2 in two vf8 (or four vd4), scalar
// code in a T[16]; tails go to their lanes one element at a time. Adding +0
// to a lane never changes it (a lane that starts at +0 is never −0), so
// entries a path adds as exact zeros (masked scores, padding) change nothing.
template <class T>
PPOLAB_SIMD_INLINE T lanes16_close(T* a) {
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l) a[l] += a[l + w];
    return a[0];
}

// 16 partial sums of T (float or double) in vectors VT of L lanes: add(i, x)
// adds the L elements i, …, i + L − 1 (i a multiple of L) to their lanes.
template <class VT, class T>
struct Lanes16 {
    static constexpr int L = sizeof(VT) / sizeof(T), N = 16 / L;
    VT acc[N] = {};
    PPOLAB_SIMD_INLINE void add(int64_t i, VT x) { acc[(i / L) % N] += x; }
    // The lanes in order, for scalar tails and the close.
    PPOLAB_SIMD_INLINE void store(T* a) const { std::memcpy(a, acc, sizeof acc); }
};

// The instruction sets the kernels have paths for, in order.
enum class SimdLevel { portable, avx2, avx512 };

// What this CPU runs (checked once, cpuid): AVX-512 means F/BW/VL/DQ, AVX2 means AVX2 + FMA.
// PPOLAB_ISA (numerics.h) lowers it: scalar → portable, avx2 → avx2.
inline SimdLevel simd_cpu_level() {
    static const SimdLevel level = [] {
        const IsaCap cap = isa_cap();
        if (cap == IsaCap::scalar) return SimdLevel::portable;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && cap != IsaCap::avx2)
            return SimdLevel::avx512;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdLevel::avx2;
        return SimdLevel::portable;
    }();
    return level;
}
// The level the kernels use: the CPU's, unless lowered. Tests lower it to run
// every path on one machine (never while kernels run on other threads).
inline SimdLevel& simd_level() {
    static SimdLevel level = simd_cpu_level();
    return level;
}
inline bool simd_has_avx512() { return simd_level() >= SimdLevel::avx512; }
inline bool simd_has_avx2() { return simd_level() >= SimdLevel::avx2; }

}  // namespace ppolab::simd

#pragma GCC diagnostic pop
