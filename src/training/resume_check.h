// resume_check.h — the proof of exact resume (SPEC §6): two resume states
// (resume_state.h) compared bit for bit.
#pragma once
#include <string>

#include "training/run_layout.h"
#include "util/fileio.h"
#include "util/json.h"

namespace ppolab {

// Compares RUN/<stage>/continuous.state.gz with resume.state.gz bit for bit;
// writes RUN/<stage>/resume-check.json {status PASS|FAIL, first_difference,
// both file sha256 and content sha256}. Returns it.
json resume_check(const RunLayout& run, const std::string& stage);

// Loads two resume states and compares them bit for bit
// (states_first_difference): {status PASS|FAIL, first_difference, both
// files' sha256 and content sha256}. Used by `resume-check --states A B`
// (the crash harness compares a killed-and-restarted run with an
// uninterrupted one).
json compare_state_files(const fs::path& a, const fs::path& b);

}  // namespace ppolab
