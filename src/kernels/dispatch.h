// dispatch.h — which instruction-set paths this binary runs on this CPU.
//
// ppolab is built for baseline x86-64 unless PPOLAB_NATIVE is on; its
// kernels carry AVX2 and AVX-512 copies (simd.h) and AVX-512 BF16 decode
// kernels (matmul_avx512.cpp), chosen at run time from cpuid, and oneDNN
// dispatches its own products. `ppolab version` and `ppolab run` print this
// report, so a number can always be tied to the path that computed it
// (under engine.numerics = canonical the bytes are the same on every path;
// under fast, the same seed gives the same bytes on the same paths).
#pragma once
#include <string>

#include "util/json.h"

namespace ppolab {

struct DispatchReport {
    std::string numerics;   // "canonical" | "fast" (numerics.h)
    std::string isa;        // the instruction-set cap: "native (avx512_bf16)" | "scalar (PPOLAB_ISA)" | …
    std::string build;      // "x86-64 baseline (PPOLAB_NATIVE=OFF)" | "native (-march=native)"
    bool avx2_fma = false;  // cpuid
    bool avx512 = false;    // F, BW, VL, DQ
    bool avx512_bf16 = false;
    bool amx_bf16 = false;        // AMX-BF16 + AMX-TILE present (oneDNN asks the kernel for the tiles)
    std::string layer_kernels;    // norm, rope, swiglu, attention, sampling, KL: "avx512" | "avx2" | "portable"
    std::string decode_products;  // BF16 products of ≤ 32 rows but the frozen base's (on tiles if amx below):
                                  // "small_m_avx512 (vdpbf16ps|FP32 FMA)" | "portable"
    std::string frozen_products;  // the frozen base's BF16 products: "amx" (any rows) | "dnnl+vnni" (oneDNN
                                  // above 32 rows, small_m_vnni_avx512 to 32) | "vnni_fma" (BF16 products as
                                  // FP32: FMA on the VNNI pack at any rows, oneDNN above 32 where narrow) |
                                  // "dnnl" (no AVX-512: portable decode); canonical: "vnni_dpbf16" |
                                  // "vnni_fma" (the VNNI pack, at any rows) | the canonical kernel's name
    std::string frozen_why;       // why not amx, when not
    std::string onednn;           // version of the library that computes the other products
    std::string bf16_products;    // how oneDNN computes BF16 products: "native" | "fp32" (matmul_backend.h)
    std::string bf16_why;         // why: the automatic choice's reason with its figures, or the variable
    std::string bf16_basis;       // the same without measured figures (stable: dispatch_json)
};

DispatchReport dispatch_report();
std::string dispatch_text(const DispatchReport& r);  // a few lines, each under 100 columns
json dispatch_json(const DispatchReport& r);

}  // namespace ppolab
