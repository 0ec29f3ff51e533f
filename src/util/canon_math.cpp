// canon_math.cpp — ppolab's own transcendental functions (see canon_math.h).
// log, log1p, sin and cos follow Sun's fdlibm (as musl carries it: the same
// constants, the same order of operations); every constant below was checked
// against a 300-bit evaluation. pow carries log x in double-double.
#include "util/canon_math.h"

#include <cstdint>
#include <cstring>
#include <limits>

namespace ppolab {

namespace {

uint64_t bits_of(double x) {
    uint64_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}
double from_bits(uint64_t u) {
    double x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ln 2 = ln2_hi + ln2_lo; ln2_hi has 32 significant bits, so k·ln2_hi is exact for |k| < 2^21.
constexpr double ln2_hi = 6.93147180369123816490e-01; /* 3fe62e42 fee00000 */
constexpr double ln2_lo = 1.90821492927058770002e-10; /* 3dea39ef 35793c76 */
// log(1+f) = f − f²/2 + s·(f²/2 + R(s²)), s = f/(2+f): R's minimax coefficients.
constexpr double Lg1 = 6.666666666666735130e-01; /* 3FE55555 55555593 */
constexpr double Lg2 = 3.999999999940941908e-01; /* 3FD99999 9997FA04 */
constexpr double Lg3 = 2.857142874366239149e-01; /* 3FD24924 94229359 */
constexpr double Lg4 = 2.222219843214978396e-01; /* 3FCC71C5 1D8E78AF */
constexpr double Lg5 = 1.818357216161805012e-01; /* 3FC74664 96CB03DE */
constexpr double Lg6 = 1.531383769920937332e-01; /* 3FC39A09 D078C69F */
constexpr double Lg7 = 1.479819860511658591e-01; /* 3FC2F112 DF3E5244 */

// s·(hfsq + R(s²)), the common tail of log and log1p.
double log_tail(double f, double hfsq) {
    const double s = f / (2.0 + f);
    const double z = s * s;
    const double w = z * z;
    const double t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
    const double t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
    return s * (hfsq + (t2 + t1));
}

// ---------------------------------------------------------------- sin, cos

// sin on [−π/4, π/4] of x + y (y the tail of x; iy = 0: y is 0).
double kernel_sin(double x, double y, int iy) {
    constexpr double S1 = -1.66666666666666324348e-01; /* 0xBFC55555, 0x55555549 */
    constexpr double S2 = 8.33333333332248946124e-03;  /* 0x3F811111, 0x1110F8A6 */
    constexpr double S3 = -1.98412698298579493134e-04; /* 0xBF2A01A0, 0x19C161D5 */
    constexpr double S4 = 2.75573137070700676789e-06;  /* 0x3EC71DE3, 0x57B1FE7D */
    constexpr double S5 = -2.50507602534068634195e-08; /* 0xBE5AE5E6, 0x8A2B9CEB */
    constexpr double S6 = 1.58969099521155010221e-10;  /* 0x3DE5D93A, 0x5ACFD57C */
    const double z = x * x;
    const double w = z * z;
    const double r = S2 + z * (S3 + z * S4) + z * w * (S5 + z * S6);
    const double v = z * x;
    if (iy == 0) return x + v * (S1 + z * r);
    return x - ((z * (0.5 * y - v * r) - y) - v * S1);
}

// cos on [−π/4, π/4] of x + y.
double kernel_cos(double x, double y) {
    constexpr double C1 = 4.16666666666666019037e-02;  /* 0x3FA55555, 0x5555554C */
    constexpr double C2 = -1.38888888888741095749e-03; /* 0xBF56C16C, 0x16C15177 */
    constexpr double C3 = 2.48015872894767294178e-05;  /* 0x3EFA01A0, 0x19CB1590 */
    constexpr double C4 = -2.75573143513906633035e-07; /* 0xBE927E4F, 0x809C52AD */
    constexpr double C5 = 2.08757232129817482790e-09;  /* 0x3E21EE9E, 0xBDB4B1C4 */
    constexpr double C6 = -1.13596475577881948265e-11; /* 0xBDA8FAE9, 0xBE8838D4 */
    const double z = x * x;
    double w = z * z;
    const double r = z * (C1 + z * (C2 + z * C3)) + w * w * (C4 + z * (C5 + z * C6));
    const double hz = 0.5 * z;
    w = 1.0 - hz;
    return w + (((1.0 - w) - hz) + (z * r - x * y));
}

// x = n·π/2 + (y0 + y1), |y0 + y1| ≲ π/4, for finite x with |x| > π/4; returns n.
// π/2 in three 33-bit parts, each with its tail, applied while cancellation
// shows the previous one is not enough (fdlibm's medium case): exact to 118+
// bits while n·pio2_1 is exact, |n| < 2^20.
int64_t rem_pio2(double x, double& y0, double& y1) {
    constexpr double toint = 6755399441055744.0;           // 1.5·2^52
    constexpr double invpio2 = 6.36619772367581382433e-01; /* 0x3FE45F30, 0x6DC9C883 */
    constexpr double pio2_1 = 1.57079632673412561417e+00;  /* first 33 bits of pi/2 */
    constexpr double pio2_1t = 6.07710050650619224932e-11; /* pi/2 - pio2_1 */
    constexpr double pio2_2 = 6.07710050630396597660e-11;  /* second 33 bits of pi/2 */
    constexpr double pio2_2t = 2.02226624879595063154e-21; /* pi/2 - (pio2_1+pio2_2) */
    constexpr double pio2_3 = 2.02226624871116645580e-21;  /* third 33 bits of pi/2 */
    constexpr double pio2_3t = 8.47842766036889956997e-32; /* pi/2 - (pio2_1+pio2_2+pio2_3) */
    const double fn = x * invpio2 + toint - toint;
    const auto n = static_cast<int64_t>(fn);
    double r = x - fn * pio2_1;
    double w = fn * pio2_1t;  // first round, good to 85 bits
    y0 = r - w;
    const int ex = static_cast<int>(bits_of(x) >> 52 & 0x7ff);
    if (ex - static_cast<int>(bits_of(y0) >> 52 & 0x7ff) > 16) {  // second round, good to 118 bits
        double t = r;
        w = fn * pio2_2;
        r = t - w;
        w = fn * pio2_2t - ((t - r) - w);
        y0 = r - w;
        if (ex - static_cast<int>(bits_of(y0) >> 52 & 0x7ff) > 49) {  // third round, 151 bits
            t = r;
            w = fn * pio2_3;
            r = t - w;
            w = fn * pio2_3t - ((t - r) - w);
            y0 = r - w;
        }
    }
    y1 = (r - y0) - w;
    return n;
}

// ---------------------------------------------------------------- double-double (pow)

struct Dd {
    double hi, lo;
};
// a + b = s.hi + s.lo exactly (Knuth).
Dd two_sum(double a, double b) {
    const double s = a + b, bb = s - a;
    return {s, (a - (s - bb)) + (b - bb)};
}
// The same for |a| ≥ |b| (Dekker).
Dd fast_two_sum(double a, double b) {
    const double s = a + b;
    return {s, b - (s - a)};
}
// a · b = p.hi + p.lo exactly (Dekker, Veltkamp's split into 26-bit halves;
// |a|, |b| < 2^995 and the product far from underflow).
Dd two_prod(double a, double b) {
    const double p = a * b;
    const double ca = 134217729.0 * a, ah = ca - (ca - a), al = a - ah;
    const double cb = 134217729.0 * b, bh = cb - (cb - b), bl = b - bh;
    return {p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}
Dd dd_add(Dd a, Dd b) {
    const Dd s = two_sum(a.hi, b.hi);
    return fast_two_sum(s.hi, (s.lo + a.lo) + b.lo);
}

// log x for finite x > 0 in double-double: x = 2^k·m, m in [√½, √2),
// s = (m − 1)/(m + 1) (|s| ≤ 0.1716), log m = 2·atanh s = 2s + (2/3)s³ +
// 2s⁵·Σ_j s^(2j)/(2j + 5). k·ln 2, 2s and (2/3)s³ are carried in double-double;
// the rest (< 6e-5) in double, its rounding under 2^-67 absolute.
Dd log_dd(double x) {
    int k = 0;
    if (x < 2.2250738585072014e-308) {  // denormal: scale into the normal range
        x *= 18014398509481984.0;       // 2^54
        k = -54;
    }
    uint64_t u = bits_of(x);
    uint32_t hx = static_cast<uint32_t>(u >> 32) + (0x3ff00000 - 0x3fe6a09e);
    k += static_cast<int>(hx >> 20) - 0x3ff;
    hx = (hx & 0x000fffff) + 0x3fe6a09e;
    u = static_cast<uint64_t>(hx) << 32 | (u & 0xffffffff);
    const double m = from_bits(u);
    const double f = m - 1.0;  // exact (Sterbenz)
    // s = f / (2 + f) in double-double: 2 + f = d.hi + d.lo, then one correction step.
    const Dd d = two_sum(2.0, f);
    const double s_hi = f / d.hi;
    const Dd sd = two_prod(s_hi, d.hi);
    const double s_lo = (((f - sd.hi) - sd.lo) - s_hi * d.lo) / d.hi;
    // (2/3)s³: s_hi³ exactly to first order, plus 3·s_hi²·s_lo.
    const Dd sq = two_prod(s_hi, s_hi);
    Dd cube = two_prod(sq.hi, s_hi);
    cube.lo = cube.lo + (sq.lo * s_hi + 3.0 * sq.hi * s_lo);
    const Dd two_thirds{0.66666666666666663, 3.7007434154171882e-17};  // 2/3 = hi + lo
    Dd c3 = two_prod(cube.hi, two_thirds.hi);
    c3.lo = c3.lo + (cube.hi * two_thirds.lo + cube.lo * two_thirds.hi);
    // 2s⁵ (1/5 + s²/7 + … + s^20/25): the terms past s^25 are under 2^-67 of log m.
    const double z = s_hi * s_hi;
    double series = 2.0 / 25.0;
    for (int j = 23; j >= 5; j -= 2) series = series * z + 2.0 / j;
    const double tail = s_hi * z * z * series;
    const double dk = k;
    const Dd kl = two_prod(dk, ln2_lo);
    Dd acc = two_sum(dk * ln2_hi, 2.0 * s_hi);
    acc = dd_add(acc, c3);
    acc = dd_add(acc, Dd{kl.hi, ((2.0 * s_lo + tail) + kl.lo)});
    return acc;
}

}  // namespace

double canon_exp(double x) { return canon_detail::exp_f64<double, int64_t>(x); }

double canon_log(double x) {
    uint64_t u = bits_of(x);
    uint32_t hx = static_cast<uint32_t>(u >> 32);
    int k = 0;
    if (hx < 0x00100000 || hx >> 31) {
        if (u << 1 == 0) return -kInf;  // log(±0) = −∞
        if (hx >> 31) return kNaN;      // log(negative) = NaN
        k -= 54;                        // denormal: scale x up
        x *= 18014398509481984.0;       // 2^54
        u = bits_of(x);
        hx = static_cast<uint32_t>(u >> 32);
    } else if (hx >= 0x7ff00000) {
        return x + x;  // +∞, NaN
    } else if (hx == 0x3ff00000 && u << 32 == 0) {
        return 0;  // log 1 = +0
    }
    // reduce x into [√2/2, √2]
    hx += 0x3ff00000 - 0x3fe6a09e;
    k += static_cast<int>(hx >> 20) - 0x3ff;
    hx = (hx & 0x000fffff) + 0x3fe6a09e;
    u = static_cast<uint64_t>(hx) << 32 | (u & 0xffffffff);
    const double f = from_bits(u) - 1.0;
    const double hfsq = 0.5 * f * f;
    const double dk = k;
    return log_tail(f, hfsq) + dk * ln2_lo - hfsq + f + dk * ln2_hi;
}

double canon_log1p(double x) {
    uint64_t u = bits_of(x);
    const uint32_t hx = static_cast<uint32_t>(u >> 32);
    int k = 1;
    double c = 0, f = 0;
    if (hx < 0x3fda827a || hx >> 31) {  // 1 + x < √2+
        if (hx >= 0xbff00000) {         // x ≤ −1 (or −NaN)
            if (x == -1) return -kInf;
            return x != x ? x + x : kNaN;
        }
        if (hx << 1 < 0x3ca00000u << 1) return x;  // |x| < 2^-53: log1p(x) rounds to x
        if (hx <= 0xbfd2bec4) {                    // √2/2− ≤ 1 + x < √2+
            k = 0;
            c = 0;
            f = x;
        }
    } else if (hx >= 0x7ff00000) {
        return x + x;  // +∞, NaN
    }
    if (k) {
        const double uf = 1 + x;
        u = bits_of(uf);
        uint32_t hu = static_cast<uint32_t>(u >> 32);
        hu += 0x3ff00000 - 0x3fe6a09e;
        k = static_cast<int>(hu >> 20) - 0x3ff;
        // correction term ≈ log(1+x) − log(uf), avoiding underflow in c/uf
        if (k < 54) {
            c = k >= 2 ? 1 - (uf - x) : x - (uf - 1);
            c /= uf;
        } else {
            c = 0;
        }
        // reduce uf into [√2/2, √2]
        hu = (hu & 0x000fffff) + 0x3fe6a09e;
        u = static_cast<uint64_t>(hu) << 32 | (u & 0xffffffff);
        f = from_bits(u) - 1;
    }
    const double hfsq = 0.5 * f * f;
    const double dk = k;
    return log_tail(f, hfsq) + (dk * ln2_lo + c) - hfsq + f + dk * ln2_hi;
}

double canon_sin(double x) {
    const uint32_t ix = static_cast<uint32_t>(bits_of(x) >> 32) & 0x7fffffff;
    if (ix <= 0x3fe921fb) {             // |x| ≲ π/4
        if (ix < 0x3e500000) return x;  // |x| < 2^-26: sin x rounds to x
        return kernel_sin(x, 0.0, 0);
    }
    if (ix >= 0x7ff00000) return x - x;  // sin(±∞ or NaN) is NaN
    double y0, y1;
    switch (rem_pio2(x, y0, y1) & 3) {
        case 0: return kernel_sin(y0, y1, 1);
        case 1: return kernel_cos(y0, y1);
        case 2: return -kernel_sin(y0, y1, 1);
        default: return -kernel_cos(y0, y1);
    }
}

double canon_cos(double x) {
    const uint32_t ix = static_cast<uint32_t>(bits_of(x) >> 32) & 0x7fffffff;
    if (ix <= 0x3fe921fb) {               // |x| ≲ π/4
        if (ix < 0x3e46a09e) return 1.0;  // |x| < 2^-27·√2: cos x rounds to 1
        return kernel_cos(x, 0.0);
    }
    if (ix >= 0x7ff00000) return x - x;  // cos(±∞ or NaN) is NaN
    double y0, y1;
    switch (rem_pio2(x, y0, y1) & 3) {
        case 0: return kernel_cos(y0, y1);
        case 1: return -kernel_sin(y0, y1, 1);
        case 2: return -kernel_cos(y0, y1);
        default: return kernel_sin(y0, y1, 1);
    }
}

double canon_pow(double x, double y) {
    if (y == 0 || x == 1) return 1.0;
    if (x != x || y != y) return x + y;  // NaN
    if (x < 0) return kNaN;
    if (x == 0) return y > 0 ? 0.0 : kInf;
    if (x == kInf) return y > 0 ? kInf : 0.0;
    const Dd L = log_dd(x);
    const double z0 = y * L.hi;
    // Far outside [−746, 710] (or y infinite) the result is 0 or ∞ whatever the tail.
    if (!(z0 > -800.0 && z0 < 800.0)) return canon_exp(z0);
    // y·log x = z.hi + z.lo; e^(z.hi + z.lo) = e^z.hi · (1 + z.lo), |z.lo| ≤ 2^-43.
    const Dd p = two_prod(y, L.hi);
    const Dd zz = fast_two_sum(p.hi, p.lo + y * L.lo);
    const double e = canon_exp(zz.hi);
    if (e == 0 || e == kInf) return e;
    return e + e * zz.lo;
}

}  // namespace ppolab
