#include "kernels/dispatch.h"

#include <dnnl.hpp>

#include <cstdio>
#include <cstdlib>

#include "kernels/matmul_backend.h"
#include "kernels/numerics.h"
#include "kernels/simd.h"
#include "kernels/unit_rates.h"

#ifndef PPOLAB_NATIVE_BUILD
#define PPOLAB_NATIVE_BUILD 0
#endif

namespace ppolab {

namespace {

const char* level_name(simd::SimdLevel l) {
    switch (l) {
        case simd::SimdLevel::avx512: return "avx512";
        case simd::SimdLevel::avx2: return "avx2";
        default: return "portable";
    }
}

}  // namespace

DispatchReport dispatch_report() {
    DispatchReport r;
    r.numerics = numerics_name(numerics_mode());
    const IsaCap cap = isa_cap();
    r.isa = cap == IsaCap::native ? std::string("native (") + isa_cap_name(isa_cpu_best()) + ")"
                                  : std::string(isa_cap_name(cap)) + " (PPOLAB_ISA)";
    r.build = PPOLAB_NATIVE_BUILD ? "native (PPOLAB_NATIVE=ON, -march=native)" : "x86-64 baseline (PPOLAB_NATIVE=OFF)";
    __builtin_cpu_init();
    r.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    r.avx512 = simd::simd_cpu_level() == simd::SimdLevel::avx512;
    r.avx512_bf16 = matmul_has_avx512bf16();
    r.amx_bf16 = unit_rates::cpu_has_amx_bf16();
    r.layer_kernels = level_name(simd::simd_level());
    const bool vdpbf16 = bf16_products_native() && matmul_has_avx512bf16();
    r.decode_products = simd::simd_cpu_level() != simd::SimdLevel::avx512 ? "portable"
                        : vdpbf16                                         ? "small_m_avx512 (vdpbf16ps)"
                                                                          : "small_m_avx512 (FP32 FMA)";
    std::string no_amx;
    const bool amx = amx_frozen_products(&no_amx);
    r.frozen_products = amx ? "amx" : !r.avx512 ? "dnnl" : vdpbf16 ? "dnnl+vnni" : "vnni_fma";
    if (numerics_canonical()) {
        const char* level = level_name(simd::simd_cpu_level());
        r.decode_products = std::string("canonical_") + (std::string(level) == "portable" ? "scalar" : level);
        r.frozen_products = !r.avx512 ? r.decode_products : vdpbf16 ? "vnni_dpbf16" : "vnni_fma";
    }
    r.frozen_why = amx ? "" : no_amx;
    const dnnl_version_t* v = dnnl_version();
    char buf[64];
    std::snprintf(buf, sizeof buf, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
    r.onednn = buf;
    r.bf16_products = bf16_products_native() ? "native" : "fp32";
    const char* forced = std::getenv("PPOLAB_BF16_PRODUCTS");
    const bool by_env = forced && *forced;
    r.bf16_why = by_env ? std::string("PPOLAB_BF16_PRODUCTS=") + forced : bf16_products_automatic().why;
    r.bf16_basis = by_env ? r.bf16_why : bf16_products_automatic().basis;
    return r;
}

std::string dispatch_text(const DispatchReport& r) {
    auto yn = [](bool b) { return b ? "yes" : "no"; };
    char buf[1024];
    if (r.numerics == "canonical") {
        std::snprintf(buf, sizeof buf,
                      "numerics         canonical (the reference arithmetic: the same bytes on every path)\n"
                      "instruction sets %s\n"
                      "build            %s\n"
                      "cpu              avx2+fma %s, avx512 %s, avx512_bf16 %s, amx_bf16 %s\n"
                      "layer kernels    %s (rmsnorm, rope, swiglu, attention, sampling, exact KL)\n"
                      "products         %s; the frozen base's %s\n",
                      r.isa.c_str(), r.build.c_str(), yn(r.avx2_fma), yn(r.avx512), yn(r.avx512_bf16), yn(r.amx_bf16),
                      r.layer_kernels.c_str(), r.decode_products.c_str(),
                      r.frozen_products == "vnni_dpbf16" ? "vdpbf16ps on the VNNI pack"
                      : r.frozen_products == "vnni_fma"  ? "FP32 FMA on the VNNI pack"
                                                         : "the same");
        return buf;
    }
    std::snprintf(buf, sizeof buf,
                  "numerics         fast (the CPU's fastest paths: bytes depend on them)\n"
                  "instruction sets %s\n"
                  "build            %s\n"
                  "cpu              avx2+fma %s, avx512 %s, avx512_bf16 %s, amx_bf16 %s\n"
                  "layer kernels    %s (rmsnorm, rope, swiglu, attention, sampling, exact KL)\n"
                  "decode products  %s (BF16 products of at most 32 rows but the frozen base's)\n"
                  "frozen products  %s\n"
                  "other products   %s (dispatches by itself; ONEDNN_VERBOSE=1 names its kernels)\n"
                  "BF16 products    %s\n"
                  "                 (%s)\n",
                  r.isa.c_str(), r.build.c_str(), yn(r.avx2_fma), yn(r.avx512), yn(r.avx512_bf16), yn(r.amx_bf16),
                  r.layer_kernels.c_str(), r.decode_products.c_str(),
                  r.frozen_products == "amx" ? "amx (tdpbf16ps; every BF16 product of the frozen base, decode included)"
                  : r.frozen_products == "dnnl+vnni"
                      ? ("oneDNN, decode vdpbf16ps on the VNNI pack (no AMX: " + r.frozen_why + ")").c_str()
                  : r.frozen_products == "vnni_fma" ? ("FP32 FMA on the VNNI pack at any rows; oneDNN above 32 rows "
                                                       "where outputs or reduction are under 512 (no AMX: " +
                                                       r.frozen_why + ")")
                                                          .c_str()
                                                    : ("oneDNN (no AMX: " + r.frozen_why + ")").c_str(),
                  r.onednn.c_str(),
                  r.bf16_products != "native" ? "as FP32 products of the BF16-rounded values"
                  : r.avx512_bf16             ? "native (oneDNN's BF16 kernels)"
                                              : "native (oneDNN's BF16 kernels, emulated: no AVX-512 BF16)",
                  r.bf16_why.c_str());
    return buf;
}

json dispatch_json(const DispatchReport& r) {
    if (r.numerics == "canonical")
        return {{"numerics", r.numerics},
                {"isa", r.isa},
                {"build", r.build},
                {"cpu",
                 {{"avx2_fma", r.avx2_fma},
                  {"avx512", r.avx512},
                  {"avx512_bf16", r.avx512_bf16},
                  {"amx_bf16", r.amx_bf16}}},
                {"layer_kernels", r.layer_kernels},
                {"products", r.decode_products},
                {"frozen_products", r.frozen_products}};
    return {
        {"numerics", r.numerics},
        {"isa", r.isa},
        {"build", r.build},
        {"cpu",
         {{"avx2_fma", r.avx2_fma}, {"avx512", r.avx512}, {"avx512_bf16", r.avx512_bf16}, {"amx_bf16", r.amx_bf16}}},
        {"layer_kernels", r.layer_kernels},
        {"decode_products", r.decode_products},
        {"frozen_products",
         r.frozen_products == "amx" ? r.frozen_products : r.frozen_products + " (" + r.frozen_why + ")"},
        {"other_products", r.onednn},
        {"bf16_products", r.bf16_products},
        {"bf16_products_why", r.bf16_basis}};
}

}  // namespace ppolab
