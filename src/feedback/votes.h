// votes.h — vote files (format 1) and every rule of SPEC §8 that decides
// whether a set of them may train a judge.
//
//   {format: 1,
//    feedback_kind: "human" | "ai",
//    checkpoint_sha256,              must equal the candidate file's
//    participant | labeler,          who voted: a person's name, or the AI labeller's
//    consent,                        human: true (given on the consent page); ai: absent
//    consent_timestamp,              human, optional: when consent was given
//    human_attestation,              human: true; ai: false
//    candidate_file_sha256,          ai: required; human: optional; sha256 of the candidate file's bytes
//    created_by,                     optional: the program that wrote the file
//    votes: [{pair_id, choice, timestamp}]}
//
// choice ∈ {a, b, tie, reject}: a or b is better, both equally good, or
// neither acceptable. timestamp: UTC ISO 8601, "YYYY-MM-DDTHH:MM:SS[.fff…]Z".
// A pair appears at most once per participant (across all files given).
// Ties and rejects are counted, never trained on; a (or b) labels are the
// "binary" labels: at least feedback.min_{train,validation,test}_labels of
// them per split, else an error naming the counts.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "feedback/candidates.h"
#include "util/json.h"

namespace ppolab {

enum class VoteChoice { a, b, tie, reject };
const char* vote_choice_name(VoteChoice choice);
// nullopt-free: Error naming the accepted values, with `where`.
VoteChoice parse_vote_choice(std::string_view text, std::string_view where);

struct Vote {
    std::string pair_id;
    VoteChoice choice = VoteChoice::tie;
    std::string timestamp;
};

// A vote its voter took back (the voting page's Back): kept in the file, never trained on.
struct WithdrawnVote {
    Vote vote;
    std::string withdrawn_at;  // UTC ISO 8601, like the vote's timestamp
};

struct VoteFile {
    std::string feedback_kind;  // "human" | "ai"
    std::string checkpoint_sha256;
    std::string participant;            // human files
    std::string labeler;                // ai files
    bool consent = false;               // human files: true
    std::string consent_timestamp;      // optional
    bool human_attestation = false;     // human: true, ai: false
    std::string candidate_file_sha256;  // "" when absent (human files may omit it)
    std::string created_by;             // optional
    std::vector<Vote> votes;
    std::vector<WithdrawnVote> withdrawn;  // optional field 'withdrawn', oldest first

    const std::string& who() const { return feedback_kind == "human" ? participant : labeler; }
};

// Parses and checks everything a file says about itself: format 1, the
// field set and types, the kind's provenance (human: consent and
// attestation true and a participant; ai: attestation false, a labeller and
// the candidate file's sha256), every choice and timestamp, and no pair twice
// among the votes (a withdrawn vote's pair may be voted again).
VoteFile parse_votes(std::string_view bytes, std::string_view where);
ordered_json votes_to_json(const VoteFile& file);

// "YYYY-MM-DDTHH:MM:SS" + optional fraction + "Z", with a real calendar date.
bool is_utc_timestamp(std::string_view text);
// Now, as such a timestamp with milliseconds.
std::string utc_timestamp_now();

// ---- a set of vote files against one candidate file --------------------

struct VoteRules {
    std::string feedback_kind;          // human | ai: one kind per run
    std::string sft_checkpoint_sha256;  // the SFT checkpoint in use
    int64_t min_train = 30, min_validation = 4, min_test = 8;
};

struct VoteSource {
    std::string path;   // named in errors and in the provenance
    std::string bytes;  // the file as read
};

// One binary label: the preferred and the other response of a pair.
struct BinaryLabel {
    std::string pair_id, participant, split, timestamp;
    VoteChoice choice = VoteChoice::a;  // a | b
};

struct VoteCollection {
    std::string feedback_kind;
    std::vector<BinaryLabel> train, validation, test;  // in file order, then vote order
    int64_t ties = 0, rejects = 0;
    // {feedback_kind, candidate_file: {path, sha256, checkpoint_sha256, pairs},
    //  files: [{path, sha256, kind, participant|labeler, votes, binary, ties, rejects}],
    //  counts: {train, validation, test} (binary labels), ties, rejects,
    //  agreement (only when two voters share pairs): [{between: [who, who],
    //  pairs, raw, cohen_kappa (null when undefined)}] for every two voters
    //  in file order}
    json provenance;
};

// How two voters agree on the pairs both voted, over the four choices (a, b,
// tie, reject): raw = the share of identical choices p_o; Cohen's κ =
// (p_o − p_e) / (1 − p_e) with p_e = Σ_c p_x(c) p_y(c) from each voter's own
// marginals; nullopt when p_e = 1 (both always made the same one choice:
// chance explains everything, κ is undefined).
struct VoteAgreement {
    int64_t pairs = 0;
    double raw = 0;
    std::optional<double> kappa;
};
// x[i] and y[i] are the two voters' choices on the same pair; Error if the
// lengths differ or are 0.
VoteAgreement vote_agreement(const std::vector<VoteChoice>& x, const std::vector<VoteChoice>& y);

// Every cross-file rule, in this order: the candidate file belongs to the SFT
// checkpoint in use; each vote file parses (parse_votes), is of the run's
// kind, names the candidate file's checkpoint (and, for ai, its sha256);
// every vote names a known pair; no participant votes a pair twice; then
// the minimum binary counts per split. The first broken rule is an Error
// naming the file and the rule.
VoteCollection collect_votes(const CandidateFile& candidates, const VoteSource& candidate_file,
                             const std::vector<VoteSource>& vote_files, const VoteRules& rules);

}  // namespace ppolab
