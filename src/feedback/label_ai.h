// label_ai.h — a declared AI (automatic) labeller for a candidate file
// (`ppolab feedback label-ai`). The one labeller here is the corpus's
// reserved rubric (data/rubric.h): for each pair it recognises both answers
// against the prompt's expected action and chooses
//   a or b    when exactly one of them is a rubric success,
//   tie       when both are,
//   reject    when neither is (no acceptable answer).
// The file it writes says so: feedback_kind "ai", human_attestation false,
// the labeller's name and the candidate file's sha256.
#pragma once
#include <functional>
#include <string>

#include "feedback/candidates.h"
#include "feedback/votes.h"

namespace ppolab {

inline constexpr const char* kRubricLabeler = "rubric:OfficeHelpPrefs-v1 (ppolab reserved rubric)";

VoteChoice rubric_choice(const CandidateResponse& a, const CandidateResponse& b, int expected_action);

// Labels every pair; `expected_action(pair)` is the rubric's expected action
// of the pair's prompt (from the corpus's gold labels).
VoteFile label_with_rubric(const CandidateFile& candidates, const std::string& candidate_file_sha256,
                           const std::function<int(const CandidatePair&)>& expected_action);

}  // namespace ppolab
