// stopwatch.h — wall seconds since a moment, on the steady clock: what the
// stages record as their timings (never in a hashed file).
#pragma once
#include <chrono>

namespace ppolab {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace ppolab
