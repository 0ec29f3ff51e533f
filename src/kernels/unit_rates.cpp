#include "kernels/unit_rates.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "util/bf16.h"
#include "util/rng.h"

namespace ppolab::unit_rates {

bool cpu_has_avx2_fma() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

bool cpu_has_avx512() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

bool cpu_has_avx512_bf16() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
}

bool cpu_has_amx_bf16() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (d >> 22 & 1u) && (d >> 24 & 1u);
}

bool request_amx_tiles(std::string* why) {
    constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    static std::once_flag once;
    static bool granted = false;
    static std::string reason;
    std::call_once(once, [] {
        if (!cpu_has_amx_bf16()) {
            reason = "no AMX-BF16/AMX-TILE in cpuid";
        } else if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
            reason = std::string("arch_prctl(ARCH_REQ_XCOMP_PERM) refused: ") + std::strerror(errno);
        } else {
            granted = true;
        }
    });
    if (!granted && why) *why = reason;
    return granted;
}

// The two vector loops' shared prologue (zmm0–13 zeroed: 12 accumulators
// and the two operands) and clobber list.
#define PPOLAB_ZERO_ZMM0_13                                                            \
    "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"                                                \
    "vmovaps %%zmm0, %%zmm1\n\t vmovaps %%zmm0, %%zmm2\n\t vmovaps %%zmm0, %%zmm3\n\t" \
    "vmovaps %%zmm0, %%zmm4\n\t vmovaps %%zmm0, %%zmm5\n\t vmovaps %%zmm0, %%zmm6\n\t" \
    "vmovaps %%zmm0, %%zmm7\n\t vmovaps %%zmm0, %%zmm8\n\t vmovaps %%zmm0, %%zmm9\n\t" \
    "vmovaps %%zmm0, %%zmm10\n\t vmovaps %%zmm0, %%zmm11\n\t"                          \
    "vmovaps %%zmm0, %%zmm12\n\t vmovaps %%zmm0, %%zmm13\n\t"
#define PPOLAB_CLOBBER_ZMM0_13                                                                                 \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
        "xmm13", "cc"

__attribute__((target("avx512f,avx512bf16"))) void bf16_dot_loop(long iterations) {
    if (iterations <= 0) return;
    __asm__ volatile(PPOLAB_ZERO_ZMM0_13
                     "1:\n\t"
                     "vdpbf16ps %%zmm13, %%zmm12, %%zmm0\n\t vdpbf16ps %%zmm13, %%zmm12, %%zmm1\n\t"
                     "vdpbf16ps %%zmm13, %%zmm12, %%zmm2\n\t vdpbf16ps %%zmm13, %%zmm12, %%zmm3\n\t"
                     "vdpbf16ps %%zmm13, %%zmm12, %%zmm4\n\t vdpbf16ps %%zmm13, %%zmm12, %%zmm5\n\t"
                     "vdpbf16ps %%zmm13, %%zmm12, %%zmm6\n\t vdpbf16ps %%zmm13, %%zmm12, %%zmm7\n\t"
                     "vdpbf16ps %%zmm13, %%zmm12, %%zmm8\n\t vdpbf16ps %%zmm13, %%zmm12, %%zmm9\n\t"
                     "vdpbf16ps %%zmm13, %%zmm12, %%zmm10\n\t vdpbf16ps %%zmm13, %%zmm12, %%zmm11\n\t"
                     "dec %0\n\t jnz 1b\n\t"
                     "vzeroupper"
                     : "+r"(iterations)
                     :
                     : PPOLAB_CLOBBER_ZMM0_13);
}

__attribute__((target("avx512f"))) void fp32_fma_loop(long iterations) {
    if (iterations <= 0) return;
    __asm__ volatile(PPOLAB_ZERO_ZMM0_13
                     "1:\n\t"
                     "vfmadd231ps %%zmm13, %%zmm12, %%zmm0\n\t vfmadd231ps %%zmm13, %%zmm12, %%zmm1\n\t"
                     "vfmadd231ps %%zmm13, %%zmm12, %%zmm2\n\t vfmadd231ps %%zmm13, %%zmm12, %%zmm3\n\t"
                     "vfmadd231ps %%zmm13, %%zmm12, %%zmm4\n\t vfmadd231ps %%zmm13, %%zmm12, %%zmm5\n\t"
                     "vfmadd231ps %%zmm13, %%zmm12, %%zmm6\n\t vfmadd231ps %%zmm13, %%zmm12, %%zmm7\n\t"
                     "vfmadd231ps %%zmm13, %%zmm12, %%zmm8\n\t vfmadd231ps %%zmm13, %%zmm12, %%zmm9\n\t"
                     "vfmadd231ps %%zmm13, %%zmm12, %%zmm10\n\t vfmadd231ps %%zmm13, %%zmm12, %%zmm11\n\t"
                     "dec %0\n\t jnz 1b\n\t"
                     "vzeroupper"
                     : "+r"(iterations)
                     :
                     : PPOLAB_CLOBBER_ZMM0_13);
}

__attribute__((target("avx2,fma"))) void fp32_fma_avx2_loop(long iterations) {
    if (iterations <= 0) return;
    __asm__ volatile(
        "vpxor %%ymm0, %%ymm0, %%ymm0\n\t"
        "vmovaps %%ymm0, %%ymm1\n\t vmovaps %%ymm0, %%ymm2\n\t vmovaps %%ymm0, %%ymm3\n\t"
        "vmovaps %%ymm0, %%ymm4\n\t vmovaps %%ymm0, %%ymm5\n\t vmovaps %%ymm0, %%ymm6\n\t"
        "vmovaps %%ymm0, %%ymm7\n\t vmovaps %%ymm0, %%ymm8\n\t vmovaps %%ymm0, %%ymm9\n\t"
        "vmovaps %%ymm0, %%ymm10\n\t vmovaps %%ymm0, %%ymm11\n\t"
        "vmovaps %%ymm0, %%ymm12\n\t vmovaps %%ymm0, %%ymm13\n\t"
        "1:\n\t"
        "vfmadd231ps %%ymm13, %%ymm12, %%ymm0\n\t vfmadd231ps %%ymm13, %%ymm12, %%ymm1\n\t"
        "vfmadd231ps %%ymm13, %%ymm12, %%ymm2\n\t vfmadd231ps %%ymm13, %%ymm12, %%ymm3\n\t"
        "vfmadd231ps %%ymm13, %%ymm12, %%ymm4\n\t vfmadd231ps %%ymm13, %%ymm12, %%ymm5\n\t"
        "vfmadd231ps %%ymm13, %%ymm12, %%ymm6\n\t vfmadd231ps %%ymm13, %%ymm12, %%ymm7\n\t"
        "vfmadd231ps %%ymm13, %%ymm12, %%ymm8\n\t vfmadd231ps %%ymm13, %%ymm12, %%ymm9\n\t"
        "vfmadd231ps %%ymm13, %%ymm12, %%ymm10\n\t vfmadd231ps %%ymm13, %%ymm12, %%ymm11\n\t"
        "dec %0\n\t jnz 1b\n\t"
        "vzeroupper"
        : "+r"(iterations)
        :
        : PPOLAB_CLOBBER_ZMM0_13);
}

// tmm0–3 accumulate C (16 × 16 FP32) += A (16 × 32 BF16, tmm4–5) ·
// B (32 × 16 BF16 in VNNI pairs, tmm6–7), operands resident in the tiles
// (amx_tile_loop: Gaussian, see unit_rates.h).
__attribute__((target("amx-tile,amx-bf16"))) void amx_tile_loop_on(long iterations, const uint16_t* a,
                                                                   const uint16_t* b) {
    if (iterations <= 0) return;
    static const AmxTileConfig cfg;
    const long stride = 64;
    __asm__ volatile(
        "ldtilecfg (%1)\n\t"
        "tilezero %%tmm0\n\t tilezero %%tmm1\n\t tilezero %%tmm2\n\t tilezero %%tmm3\n\t"
        "tileloadd (%2,%4,1), %%tmm4\n\t tileloadd 1024(%2,%4,1), %%tmm5\n\t"
        "tileloadd (%3,%4,1), %%tmm6\n\t tileloadd 1024(%3,%4,1), %%tmm7\n\t"
        "1:\n\t"
        "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t tdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
        "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\t tdpbf16ps %%tmm7, %%tmm5, %%tmm3\n\t"
        "dec %0\n\t jnz 1b\n\t"
        "tilerelease"
        : "+r"(iterations)
        : "r"(&cfg), "r"(a), "r"(b), "r"(stride)
        : "cc", "memory");
}

void amx_tile_loop(long iterations) {
    struct Operands {
        alignas(64) uint16_t a[2 * 16 * 32], b[2 * 16 * 32];  // two tiles each
    };
    static const Operands operands = [] {
        Operands o;
        Philox rng(19, 0);
        for (uint16_t& v : o.a) v = float_to_bf16(static_cast<float>(rng.normal()));
        for (uint16_t& v : o.b) v = float_to_bf16(static_cast<float>(0.02 * rng.normal()));
        return o;
    }();
    amx_tile_loop_on(iterations, operands.a, operands.b);
}

__attribute__((target("avx512f"))) void stream_read(const float* p, size_t n) {
    if (n < 64) return;
    const float* end = p + n / 64 * 64;
    __asm__ volatile(
        "vpxord %%zmm0, %%zmm0, %%zmm0\n\t vmovaps %%zmm0, %%zmm1\n\t"
        "vmovaps %%zmm0, %%zmm2\n\t vmovaps %%zmm0, %%zmm3\n\t"
        "1:\n\t"
        "vaddps (%0), %%zmm0, %%zmm0\n\t vaddps 64(%0), %%zmm1, %%zmm1\n\t"
        "vaddps 128(%0), %%zmm2, %%zmm2\n\t vaddps 192(%0), %%zmm3, %%zmm3\n\t"
        "add $256, %0\n\t cmp %1, %0\n\t jb 1b\n\t"
        "vzeroupper"
        : "+r"(p)
        : "r"(end)
        : "xmm0", "xmm1", "xmm2", "xmm3", "cc", "memory");
}

__attribute__((target("avx2"))) void stream_read_avx2(const float* p, size_t n) {
    if (n < 64) return;
    const float* end = p + n / 64 * 64;
    __asm__ volatile(
        "vpxor %%ymm0, %%ymm0, %%ymm0\n\t vmovaps %%ymm0, %%ymm1\n\t"
        "vmovaps %%ymm0, %%ymm2\n\t vmovaps %%ymm0, %%ymm3\n\t"
        "1:\n\t"
        "vaddps (%0), %%ymm0, %%ymm0\n\t vaddps 32(%0), %%ymm1, %%ymm1\n\t"
        "vaddps 64(%0), %%ymm2, %%ymm2\n\t vaddps 96(%0), %%ymm3, %%ymm3\n\t"
        "vaddps 128(%0), %%ymm0, %%ymm0\n\t vaddps 160(%0), %%ymm1, %%ymm1\n\t"
        "vaddps 192(%0), %%ymm2, %%ymm2\n\t vaddps 224(%0), %%ymm3, %%ymm3\n\t"
        "add $256, %0\n\t cmp %1, %0\n\t jb 1b\n\t"
        "vzeroupper"
        : "+r"(p)
        : "r"(end)
        : "xmm0", "xmm1", "xmm2", "xmm3", "cc", "memory");
}

Bf16Probe probe_bf16_against_fp32() {
    auto seconds = [](void (*loop)(long), long n) {
        const auto t0 = std::chrono::steady_clock::now();
        loop(n);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    // ~0.1–0.5 ms per trial at 2–4 GHz; the first trial of each also warms up.
    const long n = 40'000;
    double bf16 = 1e300, fp32 = 1e300;
    for (int k = 0; k < 7; ++k) {
        bf16 = std::min(bf16, seconds(bf16_dot_loop, n));
        fp32 = std::min(fp32, seconds(fp32_fma_loop, n));
    }
    return {n * kBf16DotFlop / bf16 / 1e9, n * kFp32FmaFlop / fp32 / 1e9};
}

}  // namespace ppolab::unit_rates
