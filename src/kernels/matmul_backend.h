// matmul_backend.h — the fast backend behind matmul.h, exposed for tests and
// benchmarks: which path a call takes, and each path callable on its own.
//
// Paths (chosen per call by linear_forward & co. when the path is automatic):
//   small_m  — M ≤ kSmallM rows (decode) but the frozen base's forward
//              (amx or small_m_vnni where they run): hand-written AVX-512 kernels that
//              stream the weights once for all rows (`vdpbf16ps` for BF16
//              weights, or FMA on the weights widened to FP32 where BF16
//              products are not native; FMA for FP32, on the transposed
//              weight for K ≤ 16), parallel over output rows (OpenMP).
//              The forward of an FP32 weight takes it at any size (LoRA
//              adapters in decode). Needs AVX-512 F/BW/VL/DQ at run time,
//              else the portable path runs.
//   small_m_vnni — the forward of a frozen BF16 weight (the base) at
//              M ≤ kSmallM where the tiles are not granted
//              (matmul_vnni_avx512.cpp): the AMX path's VNNI pack read with
//              `vdpbf16ps` where BF16 products are native and AVX-512 BF16
//              is there, else with FMA on the pack widened to FP32 in
//              registers (the reference loops' sums exactly); one weight
//              load for up to 8 rows, each output one lane's sum. Where
//              BF16 products run as FP32 it also takes the frozen base's
//              larger products, forward and backward to the input (the
//              latter on the pack of W), whose outputs and reduction are at
//              least 512 wide: each column panel widened to FP32 once for
//              all its rows, in chunks of 1024 reduction pairs; the same
//              sums bit for bit. Forced on
//              another BF16 weight: packed per call; on an FP32 weight:
//              small_m; without AVX-512: portable.
//   amx      — a BF16 weight, BF16 products native and AMX-BF16 tiles
//              granted (matmul_amx.cpp), at any M: the forward and the
//              backward to the input on tiles (`tdpbf16ps`), the weight read
//              as VNNI tiles packed once for a frozen weight (PrepackedWeight)
//              or per call otherwise. The automatic path takes it for frozen
//              weights only (the frozen base; a weight that changes every
//              step is packed by oneDNN's own kernels), decode included: a
//              row's sum does not depend on M, so row invariance holds. The
//              weight gradient stays on oneDNN.
//   dnnl     — oneDNN 2.6 matmul (BF16 src/weights + FP32 dst, or FP32),
//              primitives cached by shape. Without a BF16 dot-product
//              instruction a BF16 product runs as an FP32 product of the
//              BF16-rounded values (Bf16Products below).
//   portable — plain C++ loops with split accumulators (any x86-64 CPU).
//   canonical — the reference's arithmetic exactly (matmul_canonical.cpp):
//              k ascending, FP32 FMA from +0 (BF16 products pair by pair,
//              the odd term first), on AVX-512, AVX2 or one core without
//              vectors, whichever the CPU (capped by PPOLAB_ISA) has.
// Every path implements the contract of matmul.h exactly (same rounding of
// the input to BF16, FP32 accumulation); they differ only in summation order.
// Under engine.numerics = canonical (numerics.h) the automatic choice takes
// only the paths whose sums are the reference's bit for bit: canonical, and
// for the frozen base on AVX-512 small_m_vnni, with `vdpbf16ps` where BF16
// products are native and with FMA elsewhere (the same bits: denormals are
// flushed on every thread, and the reference sums each pair odd term first).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/matmul.h"

namespace ppolab {

enum class MatmulPath { automatic, small_m, small_m_vnni, amx, dnnl, portable, canonical };

// Rows up to which the automatic path uses the small-M kernels (or, for
// tiny BF16 weights, the portable loops), whatever K: row invariance (matmul.h).
inline constexpr int64_t kSmallM = kRowInvariantRows;
// Products of fewer multiply-adds than this run single-threaded in the
// portable loops (oneDNN's call overhead is a few µs).
inline constexpr int64_t kTinyWork = int64_t(1) << 15;

// Forces a path for every following call in the process (tests, benchmarks);
// automatic restores the per-call choice. Forcing small_m on a CPU without
// AVX-512 runs the portable path; forcing amx where the tiles are not
// granted, or for a product it does not compute (FP32 weight, weight
// gradient), runs oneDNN.
void matmul_set_path(MatmulPath path);
MatmulPath matmul_path();
// True when the CPU has AVX-512 F/BW/VL + BF16 (checked once, cpuid).
bool matmul_has_avx512bf16();
// True when the CPU has AMX-BF16 and AMX-TILE, Linux granted this process
// the tile state (unit_rates::request_amx_tiles), and AVX-512 BF16 is there.
bool matmul_has_amx();
// Whether the automatic path may use the AMX tiles: matmul_has_amx() and not
// switched off by PPOLAB_AMX=off in the environment (read once; `on` or unset:
// allowed; anything else: an Error naming the variable). A forced amx path
// (tests, benchmarks) ignores the variable. *why (optional) says why not.
bool amx_allowed(std::string* why = nullptr);
// Benchmarks: false keeps the automatic path off the tiles from the next
// product on (as PPOLAB_AMX=off does for a whole run), true allows them
// again, so the two sides can alternate within one process.
void matmul_set_amx_allowed(bool allowed);
// Short name of the path a forward of M rows through W takes now:
// "small_m_avx512", "small_m_vnni_avx512", "small_m_vnni_fma_avx512", "amx",
// "dnnl", "portable"
// (benchmarks and tests print it).
const char* matmul_path_name(int64_t M, const WeightView& W);
// The same for a BF16 weight [N, K] that is not frozen.
const char* matmul_path_name(int64_t M, int64_t N, int64_t K);

// How the oneDNN and small-M paths compute a product with BF16 inputs:
//   native — BF16 instructions: oneDNN's BF16 kernels (AVX-512 BF16
//            `vdpbf16ps`, AMX tiles), the small-M `vdpbf16ps` stream;
//   f32    — FP32 FMA on the BF16-rounded input and the weight widened to
//            FP32 (exact: two BF16 values multiply exactly in FP32; the sums
//            are FP32 either way, in another order): oneDNN's FP32 kernels,
//            the small-M FMA stream.
// Forcing native on a CPU without AVX-512 BF16 runs oneDNN's emulation of
// BF16 (slow, but the same contract) and the small-M FMA stream.
// automatic (the default), decided once per process:
//   * no AVX-512 BF16: f32 — oneDNN only emulates BF16 there, measured
//     2.9–3.8× slower than its FP32 kernels (BENCHMARKS.md);
//   * AMX-BF16 tiles granted by Linux: native (the AMX path for the frozen
//     base, oneDNN's AMX kernels for the other products of more than
//     kSmallM rows, the `vdpbf16ps` stream for decode: on the Emerald
//     Rapids of session 17, whose `vdpbf16ps` does half the FMA's FLOP rate,
//     that stream still decoded one row 1.05–1.17× faster than the FMA one,
//     and 8 rows 0.88–0.94× as fast; BENCHMARKS.md);
//   * else native only where `vdpbf16ps` retires at least 3/4 of the FP32
//     FMA's FLOP per second, measured (unit_rates.h, a few milliseconds on
//     one thread). Most CPUs with AVX-512 BF16 do twice the FMA's rate, but
//     an Emerald Rapids whose hypervisor hides AMX (cpuid family 6 model
//     207) measured 0.4×, and oneDNN's BF16 products ran 1.6–2× slower than
//     its FP32 ones there (BENCHMARKS.md, session 13). The two rates are
//     4× apart either way and each is the best of 7 trials, so the choice
//     does not flip between runs on one machine.
// The frozen base's products of more than kSmallM rows run on the AMX tiles
// (the amx path) wherever BF16 products are native and the tiles are
// granted (amx_frozen_products).
enum class Bf16Products { automatic, native, f32 };
void matmul_set_bf16_products(Bf16Products mode);
bool bf16_products_native();  // the mode in force, resolved
// Whether the automatic path sends frozen products of more than kSmallM rows
// to the AMX tiles now: BF16 products native and amx_allowed(); *why
// (optional) says why not.
bool amx_frozen_products(std::string* why = nullptr);
// What the automatic mode chose on this CPU and why (`ppolab version`).
struct Bf16Decision {
    bool native = false;
    std::string why;                            // with the measured figures (`ppolab version`)
    std::string basis;                          // the same without figures, stable between runs (results.json)
    double bf16_gflop_s = 0, fp32_gflop_s = 0;  // the probe's, where it ran
};
inline constexpr double kBf16NativeAtLeast = 0.75;
const Bf16Decision& bf16_products_automatic();

// X (M, K) FP32 → Xb (M, K) BF16, round to nearest even (vcvtne2ps2bf16 when
// available). Exposed because the engine may want pre-rounded activations.
void convert_to_bf16(bf16* out, const float* in, int64_t n);
// The same rounding, the result held in FP32 (out[i] = round_to_bf16(in[i])).
void round_to_bf16_values(float* out, const float* in, int64_t n);

// Frozen weights: a PrepackedWeight made for a BF16 weight (the shared
// frozen base model) holds that weight reordered, once per layout oneDNN
// asks for, into its blocked format, and once per direction into the AMX
// path's VNNI tiles (matmul_amx.h); a WeightView pointing to it makes the
// oneDNN and AMX paths (M > kSmallM: forward and backward to the input) read
// that copy instead of repacking the row-major weight on every call. The object
// belongs to whoever owns the weight (model/weights.h: Matrix::freeze) and
// dies with it, so no copy outlives or mistakes its weight; the weight's
// values must not change while it lives. Costs one more copy of the weight
// per layout in memory (bytes()). No effect on results: the same products in
// a different layout (equal up to summation order; the exact-data tests
// check equality).
class PrepackedWeight {
public:
    explicit PrepackedWeight(WeightView W);  // W: BF16, non-empty; Error otherwise
    ~PrepackedWeight();
    PrepackedWeight(const PrepackedWeight&) = delete;  // bound to one weight's address
    PrepackedWeight& operator=(const PrepackedWeight&) = delete;
    PrepackedWeight(PrepackedWeight&&) = delete;
    PrepackedWeight& operator=(PrepackedWeight&&) = delete;

    // True when made for exactly this weight (data, type, rows, cols).
    bool matches(const WeightView& W) const;
    int64_t bytes() const;  // memory of the packed copies made so far

    struct Layouts;  // the copies, per layout (matmul_dnnl.cpp)
    Layouts& layouts() const { return *layouts_; }
    struct AmxCopies;  // the AMX path's VNNI tiles, per direction (matmul_amx.h)
    AmxCopies& amx_copies() const { return *amx_; }

private:
    const void* data_;
    int64_t rows_, cols_;
    std::unique_ptr<Layouts> layouts_;
    std::unique_ptr<AmxCopies> amx_;
};

// Whether small_m_vnni multiplies with `vdpbf16ps` (else FMA), now.
bool small_m_vnni_uses_dpbf16();

// The paths, callable directly (same semantics as matmul.h).
namespace matmul_detail {
void small_m_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate);
// needs AVX-512 (simd_cpu_level); reads W's VNNI pack (matmul_amx.h)
void small_m_vnni_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate);
void small_m_vnni_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate);
void amx_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate);  // needs matmul_has_amx()
void amx_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate);
void dnnl_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate);
void dnnl_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate);
void dnnl_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                          WeightType inputs);
void portable_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate);
void portable_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate);
// inputs = bf16: dY and X rounded to BF16 (held exactly in FP32) first.
void portable_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                              WeightType inputs = WeightType::f32);
void canonical_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate);
void canonical_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate);
void canonical_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                               WeightType inputs = WeightType::f32);
}  // namespace matmul_detail

}  // namespace ppolab
