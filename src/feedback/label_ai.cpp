#include "feedback/label_ai.h"

#include "data/rubric.h"

namespace ppolab {

VoteChoice rubric_choice(const CandidateResponse& a, const CandidateResponse& b, int expected_action) {
    auto success = [&](const CandidateResponse& r) {
        return evaluate_response(r.text, finish_reason_parse(r.finish_reason), expected_action).rubric_success;
    };
    const bool ok_a = success(a), ok_b = success(b);
    if (ok_a && !ok_b) return VoteChoice::a;
    if (ok_b && !ok_a) return VoteChoice::b;
    return ok_a ? VoteChoice::tie : VoteChoice::reject;
}

VoteFile label_with_rubric(const CandidateFile& candidates, const std::string& candidate_file_sha256,
                           const std::function<int(const CandidatePair&)>& expected_action) {
    VoteFile v;
    v.feedback_kind = "ai";
    v.checkpoint_sha256 = candidates.checkpoint_sha256;
    v.labeler = kRubricLabeler;
    v.human_attestation = false;
    v.candidate_file_sha256 = candidate_file_sha256;
    v.created_by = "ppolab feedback label-ai --labeler rubric";
    for (const CandidatePair& p : candidates.pairs)
        v.votes.push_back({p.id, rubric_choice(p.a, p.b, expected_action(p)), utc_timestamp_now()});
    return v;
}

}  // namespace ppolab
