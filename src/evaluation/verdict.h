// verdict.h — the study's answer in one code and one sentence, from two
// bootstrap intervals (evaluation/confidence.h):
//
//   gold  = PPO − SFT rubric success on a population (a fraction; printed in
//           percentage points, 0 decimals),
//   proxy = PPO − SFT mean judge score on the same population (printed with
//           the decimals that give the largest of |mean|, |low|, |high| two
//           significant digits: 1.8 [1.2, 2.4], 0.034 [0.012, 0.056]).
//
// Each difference is "down" (high < 0), "up" (low > 0) or "flat" (the
// interval holds 0). The nine combinations:
//
//   gold \ proxy  up                       flat                       down
//   up            improved                 improved_judge_flat        improved_judge_down
//   flat          judge_gain_only          no_change                  judge_down_only
//   down          exploited                degraded_judge_flat        degraded
//
// e.g. "PPO lowered rubric success on test by 14 points [−22, −6] while the
// judge's score rose by 1.8 [1.2, 2.4] (5 replicates × 180 prompts, 95%
// intervals): the policy exploited the judge". The units come from the
// intervals; with one replicate the sentence adds that only prompt noise is
// in the interval. Negative numbers use the Unicode minus (U+2212) throughout.
#pragma once
#include <string>

#include "evaluation/confidence.h"
#include "util/json.h"

namespace ppolab {

struct Verdict {
    std::string code;   // one of the nine above
    std::string text;   // one sentence
    std::string gold;   // "down" | "flat" | "up"
    std::string proxy;  // "down" | "flat" | "up"
};
// {"code","text","gold","proxy"}
json verdict_json(const Verdict&);

// "down" (high < 0), "up" (low > 0) or "flat"; an Error when a bound is not finite.
std::string interval_direction(const Interval& i, const std::string& what);

// gold_diff: PPO − SFT rubric success (fraction); proxy_diff: PPO − SFT judge score; population: "test", "probe"…
// gold_measure names the gold in the sentence: "rubric success" (greedy answers) or "expected rubric success"
// (exact, under each policy's distribution: exact_gold.h).
Verdict study_verdict(const Interval& gold_diff, const Interval& proxy_diff, const std::string& population,
                      const std::string& gold_measure = "rubric success");

}  // namespace ppolab
