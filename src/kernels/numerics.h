// numerics.h — which arithmetic the engine computes with, and which
// instruction sets it may use.
//
// engine.numerics (config) chooses the arithmetic, process-wide:
//   canonical — the default. Every number that reaches a state, a
//               generation, a metric or a verdict is defined by a plain C++
//               reference (matmul_reference.h, the layer kernels' scalar
//               paths): each output of a matrix product is a chain of
//               FP32 FMAs from +0 over k ascending (BF16 products: pair by
//               pair, the odd term of each pair first, as `vdpbf16ps`
//               sums), then added to the destination when accumulating;
//               denormals are flushed (below); reductions have one fixed
//               association; exp, log, sin, cos are ppolab's own. Every
//               vectorised, blocked or threaded path equals its reference bit
//               for bit, so the bytes do not depend on the CPU, the thread
//               count, the world size or the batch. `vdpbf16ps` runs where
//               the CPU has it (it computes exactly those chains); oneDNN
//               and the AMX tiles (other orders) never run.
//   fast      — the fastest paths this CPU has (AMX tiles, `vdpbf16ps`,
//               oneDNN): same contract up to summation order, bytes that
//               depend on the instruction set.
// The mode is in every output's identity; a resume refuses a change.
//
// PPOLAB_ISA (environment, read once) caps the instruction sets the kernels
// may use, to force a path: scalar | avx2 | avx512 | avx512_bf16 | amx; unset
// or "native": whatever the CPU has. A CPU that lacks the named set is
// refused by name (numerics_check_environment).
//
// Denormals are flushed, in both modes, on every thread: MXCSR's FTZ and DAZ
// are set before main (a static initializer here) and again by
// numerics_check_environment, and threads inherit them from the thread that
// creates them (POSIX: pthread_create copies the floating-point
// environment), OpenMP's pool included. `vdpbf16ps` flushes whatever MXCSR
// says, so this one policy lets it and FMA give the same bits.
#pragma once
#include <string>

namespace ppolab {

enum class Numerics { canonical, fast };

Numerics numerics_mode();
void numerics_set_mode(Numerics mode);  // before products run on other threads
const char* numerics_name(Numerics mode);
// "canonical" | "fast"; anything else: an Error naming `where` and the value.
Numerics numerics_parse(const std::string& value, const std::string& where);
inline bool numerics_canonical() { return numerics_mode() == Numerics::canonical; }

// The instruction-set cap, ordered: each level includes the ones before.
enum class IsaCap { scalar, avx2, avx512, avx512_bf16, amx, native };
const char* isa_cap_name(IsaCap cap);
// PPOLAB_ISA as read (native when unset or empty); an unknown name is an Error.
IsaCap isa_cap_requested();
// The cap in force: what PPOLAB_ISA asks for, or native. Valid names only
// (the kernels call it; main checks the environment first).
IsaCap isa_cap();
// What this CPU (and Linux, for the AMX tiles) supports, highest first.
IsaCap isa_cpu_best();
// Refuses an unknown PPOLAB_ISA, or one the CPU lacks, with a named Error.
void numerics_check_environment();
// The denormal policy: sets FTZ and DAZ on the calling thread; whether they are set.
void numerics_flush_denormals();
bool numerics_denormals_flushed();
// One line for `ppolab version` and the run's engine block: the mode, the cap.
std::string numerics_summary();

}  // namespace ppolab
