// numerics.cpp — the arithmetic mode and the instruction-set cap (numerics.h).
#include "kernels/numerics.h"

#include <xmmintrin.h>

#include <atomic>
#include <cstdlib>

#include "kernels/unit_rates.h"
#include "util/error.h"

namespace ppolab {

namespace {

std::atomic<Numerics> mode{Numerics::canonical};

constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;  // MXCSR bits 15 and 6

// Before main, on the thread that will create every other.
[[maybe_unused]] const bool flushed_before_main = (numerics_flush_denormals(), true);

const char* const kCapNames[] = {"scalar", "avx2", "avx512", "avx512_bf16", "amx", "native"};

bool cpu_avx512() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

}  // namespace

Numerics numerics_mode() { return mode.load(std::memory_order_relaxed); }
void numerics_set_mode(Numerics m) { mode.store(m); }
const char* numerics_name(Numerics m) { return m == Numerics::canonical ? "canonical" : "fast"; }

Numerics numerics_parse(const std::string& value, const std::string& where) {
    if (value == "canonical") return Numerics::canonical;
    if (value == "fast") return Numerics::fast;
    fail(where, ": expected \"canonical\" or \"fast\", got \"", value, "\"");
}

const char* isa_cap_name(IsaCap cap) { return kCapNames[static_cast<int>(cap)]; }

IsaCap isa_cap_requested() {
    const char* v = std::getenv("PPOLAB_ISA");
    if (!v || !*v) return IsaCap::native;
    const std::string s = v;
    for (int i = 0; i <= static_cast<int>(IsaCap::native); ++i)
        if (s == kCapNames[i]) return static_cast<IsaCap>(i);
    fail("PPOLAB_ISA: expected one of scalar, avx2, avx512, avx512_bf16, amx, native; got \"", s, "\"");
}

IsaCap isa_cap() {
    static const IsaCap cap = [] {
        try {
            return isa_cap_requested();
        } catch (const Error&) {
            return IsaCap::native;  // main refuses it before any kernel runs
        }
    }();
    return cap;
}

IsaCap isa_cpu_best() {
    static const IsaCap best = [] {
        __builtin_cpu_init();
        if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return IsaCap::scalar;
        if (!cpu_avx512()) return IsaCap::avx2;
        if (!__builtin_cpu_supports("avx512bf16")) return IsaCap::avx512;
        if (!unit_rates::cpu_has_amx_bf16() || !unit_rates::request_amx_tiles(nullptr)) return IsaCap::avx512_bf16;
        return IsaCap::amx;
    }();
    return best;
}

void numerics_flush_denormals() { _mm_setcsr(_mm_getcsr() | kFlushToZero | kDenormalsAreZero); }
bool numerics_denormals_flushed() {
    return (_mm_getcsr() & (kFlushToZero | kDenormalsAreZero)) == (kFlushToZero | kDenormalsAreZero);
}

void numerics_check_environment() {
    numerics_flush_denormals();
    const IsaCap want = isa_cap_requested();
    if (want == IsaCap::native) return;
    const IsaCap best = isa_cpu_best();
    if (static_cast<int>(want) > static_cast<int>(best))
        fail("PPOLAB_ISA=", isa_cap_name(want), ": this CPU does not have it (its best is ", isa_cap_name(best),
             "; choose one of scalar", static_cast<int>(best) >= 1 ? ", avx2" : "",
             static_cast<int>(best) >= 2 ? ", avx512" : "", static_cast<int>(best) >= 3 ? ", avx512_bf16" : "",
             static_cast<int>(best) >= 4 ? ", amx" : "", ")");
}

std::string numerics_summary() {
    const IsaCap cap = isa_cap();
    return std::string(numerics_name(numerics_mode())) + ", instruction sets " +
           (cap == IsaCap::native ? std::string("native (") + isa_cap_name(isa_cpu_best()) + ")"
                                  : std::string("capped at ") + isa_cap_name(cap) + " (PPOLAB_ISA)");
}

}  // namespace ppolab
