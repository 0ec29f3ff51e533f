#include "training/schedule.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace ppolab {

static int64_t warm_of(int64_t total, double warmup_ratio) {
    // Python's int(total * ratio) is a truncation; both are non-negative here.
    return std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(total) * warmup_ratio)));
}

double learning_rate(int64_t step, int64_t total, double peak, double warmup_ratio, double min_ratio) {
    if (total < 1) fail("learning-rate schedule: total updates must be >= 1, got ", total);
    if (step < 0) fail("learning-rate schedule: update index must be >= 0, got ", step);
    if (!(warmup_ratio >= 0.0 && warmup_ratio <= 1.0))
        fail("learning-rate schedule: warmup_ratio must be in [0, 1], got ", warmup_ratio);
    if (!(min_ratio >= 0.0 && min_ratio <= 1.0))
        fail("learning-rate schedule: min_lr_ratio must be in [0, 1], got ", min_ratio);
    if (!std::isfinite(peak) || peak < 0.0) fail("learning-rate schedule: peak must be finite and >= 0, got ", peak);
    const int64_t warm = warm_of(total, warmup_ratio);
    if (step < warm) return peak * static_cast<double>(step + 1) / static_cast<double>(warm);
    const double progress =
        std::min(1.0, static_cast<double>(step - warm) / static_cast<double>(std::max<int64_t>(1, total - warm - 1)));
    return peak * (1.0 - progress * (1.0 - min_ratio));
}

int64_t Schedule::warmup_steps() const { return warm_of(total, warmup_ratio); }

json Schedule::to_json() const {
    return json{{"total", total}, {"peak", peak}, {"warmup_ratio", warmup_ratio}, {"min_ratio", min_ratio}};
}

Schedule Schedule::from_json(const json& j, const std::string& where) {
    Schedule s;
    s.total = json_int(j, "total", where);
    s.peak = json_number(j, "peak", where);
    s.warmup_ratio = json_number(j, "warmup_ratio", where);
    s.min_ratio = json_number(j, "min_ratio", where);
    (void)s.at(0);  // validates every field
    return s;
}

}  // namespace ppolab
