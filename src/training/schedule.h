// schedule.h — the learning-rate schedule of every stage (SPEC §3).
//
// For update index `step` (0-based) of `total` updates:
//   warm = max(1, floor(total · warmup_ratio))
//   lr   = peak · (step + 1) / warm                                   while step < warm
//   lr   = peak · (1 − min(1, (step − warm) / max(1, total − warm − 1)) · (1 − min_ratio))
// i.e. a linear warm-up over the first 10 % of the updates, then a linear
// decay that reaches min_ratio · peak at the last update (step = total − 1)
// and stays there. The arithmetic is done in double in the same order as the
// tutorial's Python, so the values are bit-identical to it.
#pragma once
#include <cstdint>

#include "util/json.h"

namespace ppolab {

double learning_rate(int64_t step, int64_t total, double peak, double warmup_ratio, double min_ratio);

// The schedule of one optimiser, as a value: a resume state records it and
// the position (`next_step`, the index of the next update).
struct Schedule {
    int64_t total = 0;          // number of updates of the stage
    double peak = 0.0;          // peak learning rate
    double warmup_ratio = 0.1;  // fraction of `total` spent warming up
    double min_ratio = 0.1;     // final learning rate as a fraction of peak

    double at(int64_t step) const { return learning_rate(step, total, peak, warmup_ratio, min_ratio); }
    int64_t warmup_steps() const;
    json to_json() const;
    static Schedule from_json(const json& j, const std::string& where);
    bool operator==(const Schedule&) const = default;
};

}  // namespace ppolab
