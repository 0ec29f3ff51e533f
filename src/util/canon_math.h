// canon_math.h — ppolab's own transcendental functions: the same bits on every
// x86-64 CPU, whatever libm (glibc picks exp/log/sin/cos/pow variants by CPU)
// and whatever instruction set the caller is compiled for.
//
// Each is built only from correctly rounded IEEE operations (+ − × ÷, and
// integer bit manipulation of the representation), in a fixed order: the
// build passes -ffp-contract=off (CMakeLists.txt: g++ would otherwise fuse
// a·b + c into an FMA wherever the target has one) and never -ffast-math, so
// the same source gives the same bits on every path. No libm call, no FMA,
// no long double.
//
//   canon_exp    e^x, float64: n = round(x·log2 e), r = x − n·ln 2 (two-part
//                ln 2), e^r by its Taylor series to r^13/13! (Horner), times
//                2^n as 2^⌊n/2⌋·2^(n−⌊n/2⌋) (so denormal results round once and
//                2^1024 is reachable). Within 1.5 ulp of e^x (tested against
//                long double; measured 1.07). x > ln(DBL_MAX) gives +∞, x below
//                −745.1332 (e^x under half the least denormal) gives +0, NaN
//                gives NaN. simd::vexp_f64 is the same body on vectors.
//   canon_expf   e^x, float: the Cephes expf polynomial; the scalar twin of
//                simd::vexp (same body, same constants, same order), so
//                scalar tails and vector lanes agree bit for bit. Within 2 ulp
//                of e^x on [−87.33, 88.37]; below −87.33654 it gives exactly
//                +0 (results under FLT_MIN are not produced), above 88.37626
//                it saturates at e^88.37626 ≈ 2.4e38 (never +∞).
//   canon_log    log x, float64 (fdlibm's e_log.c): x = 2^k·m, m in [√½, √2),
//                log m = f − f²/2 + s·(f²/2 + R(s²)), s = f/(2+f). Within 1 ulp.
//   canon_log1p  log(1 + x), float64 (fdlibm's s_log1p.c), accurate for tiny x.
//   canon_sin, canon_cos
//                float64 (fdlibm's k_sin.c, k_cos.c): x = n·π/2 + r with π/2 in
//                three 33-bit parts (Cody–Waite, the "medium" reduction of
//                fdlibm's e_rem_pio2.c, exact to 118+ bits for |x| < 2^20·π/2
//                ≈ 1.6e6 — RoPE angles stay under 32768), then the kernel
//                polynomials on |r| ≤ π/4. Within 1 ulp there; beyond 1.6e6 the
//                reduction loses accuracy (still the same bits everywhere).
//   canon_pow    x^y for x ≥ 0: e^(y·log x) with log x carried in double-double
//                (atanh series, leading terms exact) and y·log x as a
//                double-double product, so the exponent's error stays far
//                below an ulp of the result. Within 2 ulp of x^y (tested).
//                Negative x gives NaN (no integer-power special cases).
#pragma once
#include <cstdint>

// Bodies taking a scalar or a GCC vector are always inlined into their caller
// (a kernel's AVX2/AVX-512 function): no ABI is involved.
#define PPOLAB_CANON_INLINE inline __attribute__((always_inline))

namespace ppolab {

double canon_exp(double x);
double canon_log(double x);
double canon_log1p(double x);
double canon_sin(double x);
double canon_cos(double x);
double canon_pow(double x, double y);

namespace canon_detail {

// e^x in float (see canon_expf) for V = float (I = int32_t) or a vector of
// floats (I = its int32 lanes, decltype(x < x)): 2^n · e^r with n =
// round(x·log2 e) (the 1.5·2^23 rounding trick), r = x − n·ln 2 (two-part
// ln 2) and the Cephes expf polynomial on |r| ≤ ln2/2 (relative error
// < 2e-7). x below −87.33654 (e^x under FLT_MIN, and −∞) gives exactly +0.
template <class V, class I>
PPOLAB_CANON_INLINE V exp_f32(V x) {
    const auto tiny = x < -87.33654f;
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
    const I e = (__builtin_bit_cast(I, t) - 0x4B400000 + 127) << 23;  // 2^n, n in [−126, 127]
    const V p = y * __builtin_bit_cast(V, e);
    return tiny ? V{} : p;  // exactly 0
}

// e^x in float64 (see canon_exp) for V = double (I = int64_t) or a vector of
// doubles (I = its int64 lanes).
template <class V, class I>
PPOLAB_CANON_INLINE V exp_f64(V x) {
    constexpr double kRound = 6755399441055744.0;  // 1.5·2^52: adding it rounds to an integer
    constexpr double kMin = -745.1332191019412;    // log(2^-1075): below, e^x rounds to 0
    constexpr double kMax = 709.782712893384;      // log(DBL_MAX): above, e^x overflows
    const auto tiny = x < kMin;
    const auto huge = x > kMax;
    x = tiny ? V{} + kMin : x;  // (constants) keeps ±∞ out of the arithmetic below; NaN stays
    x = huge ? V{} + kMax : x;
    const V t = x * 1.4426950408889634 + kRound;
    const V n = t - kRound;              // n in [−1075, 1024]
    V r = x - n * 0.6931471803691238;    // ln 2 high part (21 trailing zero bits: n·hi is exact)
    r = r - n * 1.9082149292705877e-10;  // ln 2 − high part
    V y = V{} + 1.0 / 6227020800.0;      // 1/13!  (truncation < 5e-18 relative on |r| ≤ ln2/2)
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
    // 2^n = 2^n1 · 2^n2 with n1 = ⌊n/2⌋: both normal, so y·2^n1 is exact and
    // the second product rounds once (denormal results included).
    const I ni = __builtin_bit_cast(I, t) - __builtin_bit_cast(I, V{} + kRound);
    const I n1 = ni >> 1, n2 = ni - n1;
    const V p = y * __builtin_bit_cast(V, (n1 + 1023) << 52) * __builtin_bit_cast(V, (n2 + 1023) << 52);
    return tiny ? V{} : huge ? V{} + __builtin_inf() : p;
}

}  // namespace canon_detail

// The scalar twin of simd::vexp: bit-identical to each of its lanes.
inline float canon_expf(float x) { return canon_detail::exp_f32<float, int32_t>(x); }

}  // namespace ppolab
