// unit_rates.h — how fast this CPU's arithmetic units retire work, measured:
// the loops behind bench_peak (the machine's limits, printed beside every
// benchmark) and behind the automatic choice of how BF16 products run
// (matmul_backend.h: a CPU whose `vdpbf16ps` is slower than its FP32 FMA
// computes BF16 products faster as FP32 products of the same values).
//
// Each compute loop is assembly, so its instruction stream does not depend
// on the compiler's flags: 12 independent vector accumulators (4 tile
// accumulators for AMX), more than latency × issue width, so a loop is bound
// by how many of those instructions a core retires per second.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ppolab::unit_rates {

bool cpu_has_avx2_fma();     // AVX2 + FMA
bool cpu_has_avx512();       // F
bool cpu_has_avx512_bf16();  // F + BF16
bool cpu_has_amx_bf16();     // cpuid leaf 7 EDX: AMX-BF16 (bit 22) and AMX-TILE (bit 24)
// Linux hands a process the 8 KiB tile state only after
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); without it the first
// tile instruction faults. True when granted (also on later calls); else
// false with the reason in *why.
bool request_amx_tiles(std::string* why);
// The ldtilecfg operand that every tile loop here uses: palette 1, tmm0–7
// each 16 rows × 64 bytes (Intel SDM vol. 2, LDTILECFG). Keep it a constant
// in read-only memory: GCC 12's _tile_loadconfig tells the compiler it reads
// 8 bytes only, so a local's other stores could be dropped.
struct alignas(64) AmxTileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(AmxTileConfig) == 64);

// FLOP per iteration of each loop.
inline constexpr double kBf16DotFlop = 12 * 16 * 2 * 2;         // 12 × vdpbf16ps zmm
inline constexpr double kFp32FmaFlop = 12 * 16 * 2;             // 12 × vfmadd231ps zmm
inline constexpr double kFp32FmaAvx2Flop = 12 * 8 * 2;          // 12 × vfmadd231ps ymm
inline constexpr double kAmxTileFlop = 4 * 16 * 16 * 32 * 2.0;  // 4 × tdpbf16ps, 16 × 16 × 32

void bf16_dot_loop(long iterations);       // needs AVX-512 BF16
void fp32_fma_loop(long iterations);       // needs AVX-512 F
void fp32_fma_avx2_loop(long iterations);  // needs AVX2 + FMA (the canonical sums' unit there)
// The AMX loop's operands are Gaussian like a forward's (activations N(0, 1),
// weights N(0, 0.02)): the tile unit's rate depends on the values, and zero
// operands ran 1.2–1.25× faster on the Emerald Rapids measured (BENCHMARKS.md
// session 19), a rate no real product reaches. amx_tile_loop_on takes the
// operands (2 tiles of 16 × 32 BF16 each, 64-byte aligned).
void amx_tile_loop(long iterations);  // needs request_amx_tiles() granted
void amx_tile_loop_on(long iterations, const uint16_t* a, const uint16_t* b);
// Reads n floats (a multiple of 64, 64-byte aligned) once, 4 accumulators:
// with 512-bit loads (needs AVX-512 F) or 256-bit ones (needs AVX2).
void stream_read(const float* p, size_t n);
void stream_read_avx2(const float* p, size_t n);

// One thread, a few milliseconds: the best of 7 interleaved trials of each
// loop (a descheduled moment only lowers a trial). Needs AVX-512 BF16.
struct Bf16Probe {
    double bf16_gflop_s = 0, fp32_gflop_s = 0;
};
Bf16Probe probe_bf16_against_fp32();

}  // namespace ppolab::unit_rates
