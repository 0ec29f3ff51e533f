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

// e^x: 2^n · e^r with n = round(x·log2 e), r = x − n·ln 2 (two-part ln 2) and
// the Cephes expf polynomial on |r| ≤ ln2/2 (relative error < 2e-7). x below
// −87.34 (e^x under FLT_MIN, and −∞) gives exactly 0.
template <class V>
PPOLAB_SIMD_INLINE V vexp(V x) {
    using VI = decltype(x < x);
    const VI tiny = x < -87.33654f;
    x = tiny ? V{} - 87.33654f : x;  // (constants) keeps −∞ out of the arithmetic below
    x = x > 88.37626f ? V{} + 88.37626f : x;
    const V t = x * 1.44269504088896341f + 12582912.f;  // round to nearest via 1.5·2^23
    const V n = t - 12582912.f;
    V r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    V y = r * 1.9875691500e-4f + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.f;
    const VI e = ((VI)t - 0x4B400000 + 127) << 23;
    const V p = y * (V)e;
    return tiny ? V{} : p;  // exactly 0
}

// e^x in float64: 2^n · e^r with n = round(x·log2 e), r = x − n·ln 2 (two-part
// ln 2, the high part's n·ln2_hi exact), and e^r by its Taylor series to
// r^13/13! (truncation under 5e-18 relative on |r| ≤ ln2/2), in Horner form:
// within a few ulp of std::exp (tested). x below −708.39 (e^x under DBL_MIN,
// and −∞) gives exactly 0; x above 709 gives e^709.
template <class VD>
PPOLAB_SIMD_INLINE VD vexp_f64(VD x) {
    using VI = decltype(x < x);                    // int64 lanes
    constexpr double kRound = 6755399441055744.0;  // 1.5·2^52: adding it rounds to an integer
    const VI tiny = x < -708.39;
    x = tiny ? VD{} - 708.39 : x;  // (constants) keeps −∞ out of the arithmetic below
    x = x > 709.0 ? VD{} + 709.0 : x;
    const VD t = x * 1.4426950408889634 + kRound;
    const VD n = t - kRound;
    VD r = x - n * 0.6931471803691238;   // ln 2 high part (21 trailing zero bits)
    r = r - n * 1.9082149292705877e-10;  // ln 2 − high part
    VD y = VD{} + 1.0 / 6227020800.0;    // 1/13!
    y = y * r + 1.0 / 479001600.0;
    y = y * r + 1.0 / 39916800.0;
    y = y * r + 1.0 / 3628800.0;
    y = y * r + 1.0 / 362880.0;
    y = y * r + 1.0 / 40320.0;
    y = y * r + 1.0 / 5040.0;
    y = y * r + 1.0 / 720.0;
    y = y * r + 1.0 / 120.0;
    y = y * r + 1.0 / 24.0;
    y = y * r + 1.0 / 6.0;
    y = y * r + 0.5;
    y = y * r + 1.0;
    y = y * r + 1.0;
    const VI e = ((VI)t - (VI)(VD{} + kRound) + 1023) << 52;  // 2^n, n in [−1022, 1023]
    const VD p = y * (VD)e;
    return tiny ? VD{} : p;  // exactly 0
}

// The instruction sets the kernels have paths for, in order.
enum class SimdLevel { portable, avx2, avx512 };

// What this CPU runs (checked once, cpuid): AVX-512 means F/BW/VL/DQ, AVX2 means AVX2 + FMA.
inline SimdLevel simd_cpu_level() {
    static const SimdLevel level = [] {
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
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
