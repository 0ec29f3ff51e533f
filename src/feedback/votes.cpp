#include "feedback/votes.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include "feedback/fields.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ppolab {

using feedback_detail::check_fields;
using feedback_detail::kMaxIdBytes;
using feedback_detail::kMaxNameBytes;
using feedback_detail::kMaxNoteBytes;
using feedback_detail::nonempty_string;
using feedback_detail::printable_string;

const char* vote_choice_name(VoteChoice c) {
    switch (c) {
        case VoteChoice::a: return "a";
        case VoteChoice::b: return "b";
        case VoteChoice::tie: return "tie";
        case VoteChoice::reject: return "reject";
    }
    return "?";
}

VoteChoice parse_vote_choice(std::string_view text, std::string_view where) {
    if (text == "a") return VoteChoice::a;
    if (text == "b") return VoteChoice::b;
    if (text == "tie") return VoteChoice::tie;
    if (text == "reject") return VoteChoice::reject;
    fail(where, ": field 'choice' must be one of a, b, tie, reject; got ", feedback_detail::shown(text));
}

bool is_utc_timestamp(std::string_view t) {
    // YYYY-MM-DDTHH:MM:SS[.f+]Z
    if (t.size() < 20 || t.back() != 'Z') return false;
    auto digits = [&](size_t from, size_t n, int& out) {
        out = 0;
        for (size_t i = from; i < from + n; ++i) {
            if (t[i] < '0' || t[i] > '9') return false;
            out = out * 10 + (t[i] - '0');
        }
        return true;
    };
    int year, month, day, hour, minute, second;
    if (!digits(0, 4, year) || t[4] != '-' || !digits(5, 2, month) || t[7] != '-' || !digits(8, 2, day) ||
        t[10] != 'T' || !digits(11, 2, hour) || t[13] != ':' || !digits(14, 2, minute) || t[16] != ':' ||
        !digits(17, 2, second))
        return false;
    const std::string_view rest = t.substr(19, t.size() - 20);  // between seconds and Z
    if (!rest.empty()) {
        if (rest[0] != '.' || rest.size() < 2 || rest.size() > 10) return false;
        for (size_t i = 1; i < rest.size(); ++i)
            if (rest[i] < '0' || rest[i] > '9') return false;
    }
    if (year < 1970 || month < 1 || month > 12 || hour > 23 || minute > 59 || second > 60) return false;
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    const int in_month = days[month - 1] + (month == 2 && leap ? 1 : 0);
    return day >= 1 && day <= in_month;
}

std::string utc_timestamp_now() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t secs = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
    return buf;
}

VoteFile parse_votes(std::string_view bytes, std::string_view where) {
    const std::string file(where);
    const json j = parse_json(bytes, where);
    if (!j.is_object()) fail(file, ": expected a JSON object (a vote file), got ", j.type_name());
    if (!j.contains("format")) fail(file, ": missing field 'format' (vote file format 1)");
    const json& format = j["format"];
    if (!format.is_number_integer() || format.get<int64_t>() != 1)
        fail(file, ": field 'format' must be 1 (vote file format 1), got ", format.dump());
    VoteFile v;
    v.feedback_kind = json_string(j, "feedback_kind", file);
    auto shown = [&](const char* key) { return j.contains(key) ? j[key].dump() : std::string("nothing (missing)"); };
    if (v.feedback_kind == "human") {
        if (j.contains("labeler")) fail(file, ": a human vote file names a 'participant', not a 'labeler'");
        if (!j.contains("consent") || j["consent"] != true)
            fail(file, ": human votes require explicit consent: field 'consent' must be true, got ", shown("consent"));
        if (!j.contains("human_attestation") || j["human_attestation"] != true)
            fail(file, ": human votes require human attestation: field 'human_attestation' must be true, got ",
                 shown("human_attestation"));
        if (!j.contains("participant"))
            fail(file, ": human votes must name their participant: missing field 'participant'");
        check_fields(
            j, {"format", "feedback_kind", "checkpoint_sha256", "participant", "consent", "human_attestation", "votes"},
            {"consent_timestamp", "candidate_file_sha256", "created_by", "withdrawn"}, file);
        v.consent = true;
        v.human_attestation = true;
        v.participant = printable_string(j, "participant", file, kMaxNameBytes);
        if (v.participant.find_first_not_of(' ') == std::string::npos)
            fail(file, ": human votes must name their participant: field 'participant' is empty");
        if (j.contains("consent_timestamp")) {
            v.consent_timestamp = json_string(j, "consent_timestamp", file);
            if (!is_utc_timestamp(v.consent_timestamp))
                fail(file, ": field 'consent_timestamp' must be a UTC ISO 8601 time (YYYY-MM-DDTHH:MM:SSZ), got ",
                     feedback_detail::shown(v.consent_timestamp));
        }
    } else if (v.feedback_kind == "ai") {
        if (j.contains("participant")) fail(file, ": an AI vote file names a 'labeler', not a 'participant'");
        if (!j.contains("human_attestation") || j["human_attestation"] != false)
            fail(file,
                 ": AI preferences must not claim human attestation: field 'human_attestation' must be false, got ",
                 shown("human_attestation"));
        if (!j.contains("labeler")) fail(file, ": AI preferences must identify their labeler: missing field 'labeler'");
        if (!j.contains("candidate_file_sha256"))
            fail(file,
                 ": AI preferences must name the candidate file they label: missing field 'candidate_file_sha256'");
        if (j.contains("consent") && j["consent"] != false)
            fail(file, ": field 'consent' is a person's; an AI vote file must omit it or set it false, got ",
                 j["consent"].dump());
        check_fields(j,
                     {"format", "feedback_kind", "checkpoint_sha256", "labeler", "human_attestation",
                      "candidate_file_sha256", "votes"},
                     {"consent", "created_by", "withdrawn"}, file);
        v.labeler = printable_string(j, "labeler", file, kMaxNameBytes);
        if (v.labeler.find_first_not_of(' ') == std::string::npos)
            fail(file, ": AI preferences must identify their labeler: field 'labeler' is empty");
    } else {
        fail(file, ": field 'feedback_kind' must be \"human\" or \"ai\", got ",
             feedback_detail::shown(v.feedback_kind));
    }
    v.checkpoint_sha256 = json_string(j, "checkpoint_sha256", file);
    if (!is_sha256_hex(v.checkpoint_sha256))
        fail(file, ": field 'checkpoint_sha256' must be 64 lowercase hex digits, got ",
             feedback_detail::shown(v.checkpoint_sha256));
    if (j.contains("candidate_file_sha256")) {
        v.candidate_file_sha256 = json_string(j, "candidate_file_sha256", file);
        if (!is_sha256_hex(v.candidate_file_sha256))
            fail(file, ": field 'candidate_file_sha256' must be 64 lowercase hex digits, got ",
                 feedback_detail::shown(v.candidate_file_sha256));
    }
    if (j.contains("created_by")) v.created_by = printable_string(j, "created_by", file, kMaxNoteBytes);

    // One vote: {pair_id, choice, timestamp} plus `extra` (withdrawn_at for a withdrawn one).
    auto parse_vote = [&](const json& e, const std::string& at, bool withdrawn) {
        std::vector<std::string_view> required = {"pair_id", "choice", "timestamp"};
        if (withdrawn) required.emplace_back("withdrawn_at");
        check_fields(e, required, {}, at);
        Vote vote;
        vote.pair_id = nonempty_string(e, "pair_id", at);
        feedback_detail::check_printable_text(vote.pair_id, "pair_id", at, kMaxIdBytes);
        vote.choice = parse_vote_choice(json_string(e, "choice", at), at);
        for (const std::string_view key : required) {
            if (key == "pair_id" || key == "choice") continue;
            if (!is_utc_timestamp(json_string(e, key, at)))
                fail(at, ": field '", key, "' must be a UTC ISO 8601 time (YYYY-MM-DDTHH:MM:SS[.fff]Z), got ",
                     feedback_detail::shown(json_string(e, key, at)));
        }
        vote.timestamp = e["timestamp"].get<std::string>();
        return vote;
    };
    if (j.contains("withdrawn")) {
        const json& w = j["withdrawn"];
        if (!w.is_array()) fail(file, ": field 'withdrawn' must be an array, got ", w.type_name());
        for (size_t i = 0; i < w.size(); ++i) {
            const std::string at = file + ": withdrawn[" + std::to_string(i) + "]";
            Vote vote = parse_vote(w[i], at, true);
            v.withdrawn.push_back({std::move(vote), w[i]["withdrawn_at"].get<std::string>()});
        }
    }
    const json& votes = j["votes"];
    if (!votes.is_array()) fail(file, ": field 'votes' must be an array, got ", votes.type_name());
    std::set<std::string> seen;
    for (size_t i = 0; i < votes.size(); ++i) {
        const std::string at = file + ": votes[" + std::to_string(i) + "]";
        Vote vote = parse_vote(votes[i], at, false);
        if (!seen.insert(vote.pair_id).second)
            fail(at, ": duplicate participant vote: '", v.who(), "' already voted on pair '", vote.pair_id,
                 "' in this file");
        v.votes.push_back(std::move(vote));
    }
    return v;
}

ordered_json votes_to_json(const VoteFile& v) {
    ordered_json o;
    o["format"] = 1;
    o["feedback_kind"] = v.feedback_kind;
    o["checkpoint_sha256"] = v.checkpoint_sha256;
    if (v.feedback_kind == "human") {
        o["participant"] = v.participant;
        o["consent"] = v.consent;
        if (!v.consent_timestamp.empty()) o["consent_timestamp"] = v.consent_timestamp;
    } else {
        o["labeler"] = v.labeler;
    }
    o["human_attestation"] = v.human_attestation;
    if (!v.candidate_file_sha256.empty()) o["candidate_file_sha256"] = v.candidate_file_sha256;
    if (!v.created_by.empty()) o["created_by"] = v.created_by;
    ordered_json votes = ordered_json::array();
    for (const Vote& e : v.votes) {
        ordered_json x;
        x["pair_id"] = e.pair_id;
        x["choice"] = vote_choice_name(e.choice);
        x["timestamp"] = e.timestamp;
        votes.push_back(std::move(x));
    }
    o["votes"] = std::move(votes);
    if (!v.withdrawn.empty()) {
        ordered_json w = ordered_json::array();
        for (const WithdrawnVote& e : v.withdrawn)
            w.push_back({{"pair_id", e.vote.pair_id},
                         {"choice", vote_choice_name(e.vote.choice)},
                         {"timestamp", e.vote.timestamp},
                         {"withdrawn_at", e.withdrawn_at}});
        o["withdrawn"] = std::move(w);
    }
    return o;
}

VoteAgreement vote_agreement(const std::vector<VoteChoice>& x, const std::vector<VoteChoice>& y) {
    if (x.size() != y.size() || x.empty())
        fail("internal: agreement needs two equally long, non-empty lists of choices (", x.size(), " and ", y.size(),
             ")");
    const double n = static_cast<double>(x.size());
    double same = 0, px[4] = {0, 0, 0, 0}, py[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < x.size(); ++i) {
        same += x[i] == y[i];
        px[static_cast<int>(x[i])] += 1 / n;
        py[static_cast<int>(y[i])] += 1 / n;
    }
    VoteAgreement a{static_cast<int64_t>(x.size()), same / n, std::nullopt};
    double pe = 0;
    for (int c = 0; c < 4; ++c) pe += px[c] * py[c];
    if (pe < 1 - 1e-12) a.kappa = (a.raw - pe) / (1 - pe);
    return a;
}

namespace {

// provenance.agreement: every two voters (in the order their files came)
// over the pairs both voted; empty when no two voters share a pair.
json agreement_table(const std::vector<std::pair<std::string, std::map<std::string, VoteChoice>>>& voters) {
    json table = json::array();
    for (size_t i = 0; i < voters.size(); ++i)
        for (size_t j = i + 1; j < voters.size(); ++j) {
            std::vector<VoteChoice> x, y;
            for (const auto& [pair, choice] : voters[i].second)
                if (auto it = voters[j].second.find(pair); it != voters[j].second.end()) {
                    x.push_back(choice);
                    y.push_back(it->second);
                }
            if (x.empty()) continue;
            const VoteAgreement a = vote_agreement(x, y);
            table.push_back({{"between", {voters[i].first, voters[j].first}},
                             {"pairs", a.pairs},
                             {"raw", a.raw},
                             {"cohen_kappa", a.kappa ? json(*a.kappa) : json()}});
        }
    return table;
}

}  // namespace

VoteCollection collect_votes(const CandidateFile& candidates, const VoteSource& candidate_file,
                             const std::vector<VoteSource>& vote_files, const VoteRules& rules) {
    if (rules.feedback_kind != "human" && rules.feedback_kind != "ai")
        fail("--feedback-kind must be human or ai, got '", rules.feedback_kind, "'");
    if (candidates.checkpoint_sha256 != rules.sft_checkpoint_sha256)
        fail(candidate_file.path, ": candidates belong to a different supervised policy (checkpoint_sha256 ",
             candidates.checkpoint_sha256, "; the run's SFT checkpoint is ", rules.sft_checkpoint_sha256, ")");
    if (vote_files.empty()) fail("no vote file given (--votes FILE...)");
    const std::string candidate_sha = sha256_hex(candidate_file.bytes);

    VoteCollection out;
    out.feedback_kind = rules.feedback_kind;
    json files = json::array();
    std::set<std::pair<std::string, std::string>> seen;  // (participant, pair id)
    std::set<std::string> paths;
    // Each voter's choice per pair, voters in the order their first file came.
    std::vector<std::pair<std::string, std::map<std::string, VoteChoice>>> voters;
    for (const VoteSource& src : vote_files) {
        if (!paths.insert(src.path).second) fail(src.path, ": the same vote file is given twice");
        const VoteFile v = parse_votes(src.bytes, src.path);
        if (v.feedback_kind != rules.feedback_kind)
            fail(src.path, ": feedback_kind is \"", v.feedback_kind, "\" but this run learns from ",
                 rules.feedback_kind, " feedback (--feedback-kind ", rules.feedback_kind, "; one kind per run)");
        if (v.checkpoint_sha256 != candidates.checkpoint_sha256)
            fail(src.path, ": vote file provenance is mismatched: checkpoint_sha256 ", v.checkpoint_sha256,
                 " differs from the candidate file's ", candidates.checkpoint_sha256);
        if (v.feedback_kind == "ai" && v.candidate_file_sha256 != candidate_sha)
            fail(src.path, ": AI labels refer to a different candidate corpus: candidate_file_sha256 ",
                 v.candidate_file_sha256, " but ", candidate_file.path, " has sha256 ", candidate_sha);
        if (v.feedback_kind == "human" && !v.candidate_file_sha256.empty() && v.candidate_file_sha256 != candidate_sha)
            fail(src.path, ": votes refer to a different candidate file: candidate_file_sha256 ",
                 v.candidate_file_sha256, " but ", candidate_file.path, " has sha256 ", candidate_sha);
        int64_t binary = 0, ties = 0, rejects = 0;
        for (size_t i = 0; i < v.votes.size(); ++i) {
            const Vote& vote = v.votes[i];
            const CandidatePair* pair = candidates.find(vote.pair_id);
            if (!pair)
                fail(src.path, ": votes[", i, "]: unknown pair_id '", vote.pair_id, "' (not in ", candidate_file.path,
                     ")");
            if (!seen.insert({v.who(), vote.pair_id}).second)
                fail(src.path, ": votes[", i, "]: duplicate participant vote: '", v.who(), "' already voted on pair '",
                     vote.pair_id, "' (in an earlier file)");
            auto voter = std::find_if(voters.begin(), voters.end(), [&](const auto& w) { return w.first == v.who(); });
            if (voter == voters.end()) voter = voters.insert(voters.end(), {v.who(), {}});
            voter->second[vote.pair_id] = vote.choice;
            if (vote.choice == VoteChoice::tie) {
                ++ties;
            } else if (vote.choice == VoteChoice::reject) {
                ++rejects;
            } else {
                ++binary;
                BinaryLabel label{vote.pair_id, v.who(), pair->split, vote.timestamp, vote.choice};
                (pair->split == "train"        ? out.train
                 : pair->split == "validation" ? out.validation
                                               : out.test)
                    .push_back(std::move(label));
            }
        }
        out.ties += ties;
        out.rejects += rejects;
        json f{{"path", src.path},        {"sha256", sha256_hex(src.bytes)},
               {"kind", v.feedback_kind}, {"votes", v.votes.size()},
               {"binary", binary},        {"ties", ties},
               {"rejects", rejects}};
        f[v.feedback_kind == "human" ? "participant" : "labeler"] = v.who();
        if (!v.withdrawn.empty()) f["withdrawn"] = v.withdrawn.size();  // taken back by the voter, not trained on
        files.push_back(std::move(f));
    }
    const int64_t n_train = static_cast<int64_t>(out.train.size()), n_val = static_cast<int64_t>(out.validation.size()),
                  n_test = static_cast<int64_t>(out.test.size());
    if (n_train < rules.min_train || n_val < rules.min_validation || n_test < rules.min_test)
        fail("insufficient binary labels (a or b; ties and rejects do not count): train ", n_train, ", validation ",
             n_val, ", test ", n_test, "; need at least ", rules.min_train, " train, ", rules.min_validation,
             " validation and ", rules.min_test, " test (feedback.min_*_labels)");
    out.provenance = {{"feedback_kind", rules.feedback_kind},
                      {"candidate_file",
                       {{"path", candidate_file.path},
                        {"sha256", candidate_sha},
                        {"checkpoint_sha256", candidates.checkpoint_sha256},
                        {"pairs", candidates.pairs.size()}}},
                      {"files", files},
                      {"counts", {{"train", n_train}, {"validation", n_val}, {"test", n_test}}},
                      {"ties", out.ties},
                      {"rejects", out.rejects}};
    if (json agreement = agreement_table(voters); !agreement.empty()) out.provenance["agreement"] = agreement;
    return out;
}

}  // namespace ppolab
