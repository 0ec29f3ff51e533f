// summary.h — what a person reads at the end of `ppolab run`: one
// fixed-width table (every line under 100 columns, nothing cut, no JSON),
// built from RUN/results.json alone.
//
//   held-out greedy generations, per policy (SFT, PPO) and population (test
//   rows, probe contexts, all contexts): rows, rubric success, relevant (of
//   the outputs the rubric recognised), mean learned score, mean actor /
//   reference log-ratio — three significant figures;
//   the judge's accuracy on the held-out test pairs; the three resume checks;
//   minutes per step; where results.json and report.html are.
//
// A value the run did not produce (a build without `evaluate`, a judge from
// votes) prints as "—", never as 0.
#pragma once
#include <filesystem>
#include <string>

#include "util/json.h"

namespace ppolab {

inline constexpr int kSummaryColumns = 100;  // every line of the summary is shorter

// `results`: the object written to RUN/results.json; `run_root`: the run folder as the user named it.
std::string study_summary(const json& results, const std::filesystem::path& run_root);

// x to three significant figures ("43.9", "0.0100", "-0.970", "100", "1.23e+04"); "—" for null.
std::string sig3(const json& x);

}  // namespace ppolab
