// Unit tests of the feedback layer without a model: candidate and vote file
// parsers (every field checked, no crash on bad bytes), timestamps, the
// seeded split, collect_votes's rules on a synthetic candidate file, the
// rubric labeller's choice, the voting session (consent, votes, continuing
// an earlier file, refusals), the HTTP request parser and routes, and the
// hostile-input rules: printable names, single headers, exact content type,
// fetch metadata. (The live server under a flood: serve_hostile.py.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "data/rubric.h"
#include "feedback/candidates.h"
#include "feedback/fields.h"
#include "feedback/label_ai.h"
#include "feedback/serve.h"
#include "feedback/votes.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/sha256.h"

using ppolab::test::error_of;
using namespace ppolab;

namespace {

const std::string kSha = std::string(64, 'a');

// n pairs, splits cycling train, train, train, validation, test.
json candidates_json(int n) {
    json pairs = json::array();
    const char* splits[] = {"train", "train", "train", "validation", "test"};
    for (int i = 0; i < n; ++i)
        pairs.push_back({{"id", "p" + std::to_string(i)},
                         {"split", splits[i % 5]},
                         {"prompt_id", "OH000-RL" + std::to_string(i)},
                         {"prompt", "prompt " + std::to_string(i)},
                         {"a", {{"text", "A"}, {"token_ids", {1, 2}}, {"finish_reason", "eos"}}},
                         {"b", {{"text", "B"}, {"token_ids", {3}}, {"finish_reason", "length"}}}});
    return {{"format", 1}, {"checkpoint_sha256", kSha}, {"pairs", pairs}};
}

json human_votes(const json& cands, const std::string& choice = "a") {
    json votes = json::array();
    for (const json& p : cands["pairs"])
        votes.push_back({{"pair_id", p["id"]}, {"choice", choice}, {"timestamp", "2025-03-01T10:00:00Z"}});
    return {{"format", 1},          {"feedback_kind", "human"}, {"checkpoint_sha256", kSha},
            {"participant", "ada"}, {"consent", true},          {"human_attestation", true},
            {"votes", votes}};
}

#define EXPECT_ERROR(stmt, text) \
    EXPECT_NE(error_of([&] { stmt; }).find(text), std::string::npos) << error_of([&] { stmt; })

}  // namespace

TEST(Candidates, RoundTripAndFind) {
    const json j = candidates_json(7);
    const CandidateFile c = parse_candidates(j.dump(), "c.json");
    ASSERT_EQ(c.pairs.size(), 7u);
    EXPECT_EQ(c.pairs[3].split, "validation");
    EXPECT_EQ(c.pairs[0].a.token_ids, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(c.find("p4")->split, "test");
    EXPECT_EQ(c.find("nope"), nullptr);
    const CandidateFile back = parse_candidates(candidates_to_json(c).dump(), "again");
    EXPECT_EQ(candidates_to_json(back).dump(), candidates_to_json(c).dump());
}

TEST(Candidates, EveryFieldIsChecked) {
    auto with = [](auto edit) {
        json j = candidates_json(2);
        edit(j);
        return j.dump();
    };
    EXPECT_ERROR(parse_candidates("{", "c.json"), "c.json: not valid JSON");
    EXPECT_ERROR(parse_candidates("[]", "c.json"), "expected a JSON object");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["format"] = 2; }), "c.json"), "field 'format' must be 1");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["checkpoint_sha256"] = "ABC"; }), "c.json"), "64 lowercase hex");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["pairs"] = json::array(); }), "c.json"), "'pairs' is empty");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["extra"] = 1; }), "c.json"), "unexpected field 'extra'");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["pairs"][1]["id"] = "p0"; }), "c.json"), "appears twice");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["pairs"][0]["split"] = "probe"; }), "c.json"),
                 "pairs[0]: field 'split' must be train, validation or test");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["pairs"][0].erase("prompt_id"); }), "c.json"),
                 "missing field 'prompt_id'");
    EXPECT_ERROR(parse_candidates(with([](json& j) {
                                      j["pairs"][1]["a"]["token_ids"] = {1, -2};
                                  }),
                                  "c.json"),
                 "pairs[1].a: field 'token_ids[1]' must be an integer");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["pairs"][1]["b"]["token_ids"] = {1.5}; }), "c.json"),
                 "'token_ids[0]' must be an integer");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["pairs"][1]["b"]["token_ids"] = {4294967297ull}; }), "c.json"),
                 "'token_ids[0]' must be an integer");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["pairs"][0]["a"]["token_ids"] = json::array(); }), "c.json"),
                 "must not be empty");
    EXPECT_ERROR(parse_candidates(with([](json& j) { j["pairs"][0]["b"]["finish_reason"] = "stop"; }), "c.json"),
                 "'finish_reason' must be \"eos\" or \"length\"");
}

TEST(Candidates, SplitsAreSeededAndSized) {
    const auto s = assign_feedback_splits(100, 49, 0.6, 0.15);
    std::map<std::string, int> n;
    for (const auto& x : s) ++n[x];
    EXPECT_EQ(n["train"], 60);
    EXPECT_EQ(n["validation"], 15);
    EXPECT_EQ(n["test"], 25);
    EXPECT_EQ(s, assign_feedback_splits(100, 49, 0.6, 0.15));
    EXPECT_NE(s, assign_feedback_splits(100, 50, 0.6, 0.15));
    // interleaved, not in blocks: the first 20 pairs hold more than one split
    std::set<std::string> first(s.begin(), s.begin() + 20);
    EXPECT_GT(first.size(), 1u);
    EXPECT_ERROR(assign_feedback_splits(10, 1, 0.8, 0.3), "sum <= 1");
}

TEST(Votes, Timestamps) {
    EXPECT_TRUE(is_utc_timestamp("2025-03-01T10:00:00Z"));
    EXPECT_TRUE(is_utc_timestamp("2024-02-29T23:59:59.123Z"));
    EXPECT_FALSE(is_utc_timestamp("2023-02-29T10:00:00Z"));
    EXPECT_FALSE(is_utc_timestamp("2025-03-01 10:00:00Z"));
    EXPECT_FALSE(is_utc_timestamp("2025-03-01T10:00:00"));
    EXPECT_FALSE(is_utc_timestamp("2025-03-01T10:00:00+01:00"));
    EXPECT_FALSE(is_utc_timestamp("2025-13-01T10:00:00Z"));
    EXPECT_FALSE(is_utc_timestamp("2025-03-01T24:00:00Z"));
    EXPECT_FALSE(is_utc_timestamp("2025-03-01T10:00:00.Z"));
    EXPECT_FALSE(is_utc_timestamp(""));
    EXPECT_TRUE(is_utc_timestamp(utc_timestamp_now()));
}

TEST(Votes, ParseHumanAndAi) {
    const json c = candidates_json(3);
    VoteFile h = parse_votes(human_votes(c).dump(), "v.json");
    EXPECT_EQ(h.who(), "ada");
    EXPECT_EQ(h.votes.size(), 3u);
    EXPECT_EQ(parse_votes(votes_to_json(h).dump(), "again").votes[2].pair_id, "p2");
    json ai = human_votes(c, "tie");
    ai.erase("participant");
    ai.erase("consent");
    ai["feedback_kind"] = "ai";
    ai["labeler"] = "rubric";
    ai["human_attestation"] = false;
    ai["candidate_file_sha256"] = kSha;
    VoteFile a = parse_votes(ai.dump(), "ai.json");
    EXPECT_EQ(a.who(), "rubric");
    EXPECT_EQ(a.votes[0].choice, VoteChoice::tie);
    ai["participant"] = "x";
    EXPECT_ERROR(parse_votes(ai.dump(), "ai.json"), "names a 'labeler', not a 'participant'");
    json h2 = human_votes(c);
    h2["votes"][1]["extra"] = 1;
    EXPECT_ERROR(parse_votes(h2.dump(), "v.json"), "v.json: votes[1]: unexpected field 'extra'");
    h2 = human_votes(c);
    h2["feedback_kind"] = "crowd";
    EXPECT_ERROR(parse_votes(h2.dump(), "v.json"), "'feedback_kind' must be \"human\" or \"ai\"");
}

TEST(Votes, CollectCountsTiesAndRejects) {
    const json cj = candidates_json(20);  // 12 train, 4 validation, 4 test
    const std::string cbytes = cj.dump();
    const CandidateFile c = parse_candidates(cbytes, "c.json");
    json v = human_votes(cj);
    v["votes"][0]["choice"] = "tie";
    v["votes"][1]["choice"] = "reject";
    v["votes"][2]["choice"] = "b";
    VoteRules rules{"human", kSha, 9, 4, 4};
    VoteCollection got = collect_votes(c, {"c.json", cbytes}, {{"v.json", v.dump()}}, rules);
    EXPECT_EQ(got.train.size(), 10u);  // 12 train pairs, one tie and one reject
    EXPECT_EQ(got.validation.size(), 4u);
    EXPECT_EQ(got.test.size(), 4u);
    EXPECT_EQ(got.ties, 1);
    EXPECT_EQ(got.rejects, 1);
    EXPECT_EQ(got.train[0].choice, VoteChoice::b);
    EXPECT_EQ(got.provenance["files"][0]["sha256"], sha256_hex(v.dump()));
    EXPECT_EQ(got.provenance["files"][0]["binary"], 18);
    EXPECT_EQ(got.provenance["candidate_file"]["sha256"], sha256_hex(cbytes));
    rules.min_train = 11;
    EXPECT_ERROR(collect_votes(c, {"c.json", cbytes}, {{"v.json", v.dump()}}, rules),
                 "insufficient binary labels (a or b; ties and rejects do not count): train 10, validation 4, test 4; "
                 "need at least 11 train");
    // a second participant may vote the same pairs; the same one may not
    rules.min_train = 9;
    json w = human_votes(cj);
    w["participant"] = "grace";
    EXPECT_EQ(collect_votes(c, {"c.json", cbytes}, {{"v.json", v.dump()}, {"w.json", w.dump()}}, rules).train.size(),
              22u);
    w["participant"] = "ada";
    EXPECT_ERROR(collect_votes(c, {"c.json", cbytes}, {{"v.json", v.dump()}, {"w.json", w.dump()}}, rules),
                 "w.json: votes[0]: duplicate participant vote: 'ada' already voted on pair 'p0'");
    EXPECT_ERROR(collect_votes(c, {"c.json", cbytes}, {{"v.json", v.dump()}}, VoteRules{"human", std::string(64, 'b')}),
                 "candidates belong to a different supervised policy");
}

// Cohen's κ by hand: x = a a b b tie, y = a b b b tie. p_o = 4/5; the
// marginals are x (a .4, b .4, tie .2), y (a .2, b .6, tie .2), so p_e =
// .08 + .24 + .04 = .36 and κ = (.8 − .36) / (1 − .36) = .6875.
TEST(Votes, AgreementAndCohensKappa) {
    using C = VoteChoice;
    VoteAgreement a = vote_agreement({C::a, C::a, C::b, C::b, C::tie}, {C::a, C::b, C::b, C::b, C::tie});
    EXPECT_EQ(a.pairs, 5);
    EXPECT_DOUBLE_EQ(a.raw, 0.8);
    ASSERT_TRUE(a.kappa.has_value());
    EXPECT_NEAR(*a.kappa, 0.6875, 1e-12);
    // Perfect agreement over two categories: κ = 1; systematic disagreement: κ = −1.
    EXPECT_NEAR(*vote_agreement({C::a, C::b}, {C::a, C::b}).kappa, 1.0, 1e-12);
    EXPECT_NEAR(*vote_agreement({C::a, C::b}, {C::b, C::a}).kappa, -1.0, 1e-12);
    // Both always chose the same one answer: chance explains all, κ undefined.
    a = vote_agreement({C::reject, C::reject}, {C::reject, C::reject});
    EXPECT_DOUBLE_EQ(a.raw, 1.0);
    EXPECT_FALSE(a.kappa.has_value());
    EXPECT_ERROR(vote_agreement({C::a}, {}), "two equally long, non-empty lists");

    // In the provenance: every two voters over the pairs both voted, in file order.
    const json cj = candidates_json(20);
    const std::string cbytes = cj.dump();
    const CandidateFile c = parse_candidates(cbytes, "c.json");
    json v = human_votes(cj), w = human_votes(cj, "b"), g = human_votes(cj);
    w["participant"] = "grace";
    g["participant"] = "lin";
    g["votes"] = json::array({g["votes"][0], g["votes"][1]});  // lin voted p0 and p1 only
    v["votes"][0]["choice"] = "b";
    const VoteRules rules{"human", kSha, 9, 4, 4};
    const VoteCollection one = collect_votes(c, {"c.json", cbytes}, {{"v.json", v.dump()}}, rules);
    EXPECT_FALSE(one.provenance.contains("agreement"));  // one voter: nothing to compare
    const json agreement =
        collect_votes(c, {"c.json", cbytes}, {{"v.json", v.dump()}, {"w.json", w.dump()}, {"g.json", g.dump()}}, rules)
            .provenance["agreement"];
    ASSERT_EQ(agreement.size(), 3u) << agreement.dump();
    EXPECT_EQ(agreement[0]["between"], json::array({"ada", "grace"}));
    EXPECT_EQ(agreement[0]["pairs"], 20);
    EXPECT_DOUBLE_EQ(agreement[0]["raw"].get<double>(), 0.05);  // only p0: b and b
    // ada: b once, a 19 times; grace: b always → p_e = 0.05, κ = (0.05 − 0.05) / 0.95 = 0
    EXPECT_NEAR(agreement[0]["cohen_kappa"].get<double>(), 0.0, 1e-12);
    EXPECT_EQ(agreement[1]["between"], json::array({"ada", "lin"}));
    EXPECT_EQ(agreement[1]["pairs"], 2);
    EXPECT_DOUBLE_EQ(agreement[1]["raw"].get<double>(), 0.5);
    EXPECT_EQ(agreement[2]["between"], json::array({"grace", "lin"}));
    EXPECT_DOUBLE_EQ(agreement[2]["raw"].get<double>(), 0.0);
    EXPECT_TRUE(agreement[2]["cohen_kappa"].is_number());  // grace b b, lin a a: p_e = 0, κ = 0
    EXPECT_NEAR(agreement[2]["cohen_kappa"].get<double>(), 0.0, 1e-12);
}

// The voting page's Back keeps what it takes back: `withdrawn` entries
// parse, round-trip, are checked field by field, are not trained on, and
// their pair may be voted again.
TEST(Votes, WithdrawnVotesAreKeptAndChecked) {
    const json cj = candidates_json(20);
    const std::string cbytes = cj.dump();
    json v = human_votes(cj);
    v["withdrawn"] = json::array({{{"pair_id", "p0"},
                                   {"choice", "b"},
                                   {"timestamp", "2025-03-01T09:59:00Z"},
                                   {"withdrawn_at", "2025-03-01T09:59:30.5Z"}},
                                  {{"pair_id", "p0"},
                                   {"choice", "tie"},
                                   {"timestamp", "2025-03-01T09:59:40Z"},
                                   {"withdrawn_at", "2025-03-01T09:59:50Z"}}});
    const VoteFile f = parse_votes(v.dump(), "v.json");
    ASSERT_EQ(f.withdrawn.size(), 2u);
    EXPECT_EQ(f.withdrawn[0].vote.choice, VoteChoice::b);
    EXPECT_EQ(f.withdrawn[0].withdrawn_at, "2025-03-01T09:59:30.5Z");
    EXPECT_EQ(parse_votes(votes_to_json(f).dump(), "again").withdrawn[1].vote.timestamp, "2025-03-01T09:59:40Z");
    EXPECT_FALSE(votes_to_json(parse_votes(human_votes(cj).dump(), "v.json")).contains("withdrawn"));
    const VoteCollection got = collect_votes(parse_candidates(cbytes, "c.json"), {"c.json", cbytes},
                                             {{"v.json", v.dump()}}, VoteRules{"human", kSha, 9, 4, 4});
    EXPECT_EQ(got.train.size(), 12u);  // the withdrawn votes are not labels
    EXPECT_EQ(got.provenance["files"][0]["withdrawn"], 2);
    json bad = v;
    bad["withdrawn"][1].erase("withdrawn_at");
    EXPECT_ERROR(parse_votes(bad.dump(), "v.json"), "v.json: withdrawn[1]: missing field 'withdrawn_at'");
    bad = v;
    bad["withdrawn"][0]["withdrawn_at"] = "yesterday";
    EXPECT_ERROR(parse_votes(bad.dump(), "v.json"), "v.json: withdrawn[0]: field 'withdrawn_at' must be a UTC ISO");
    bad = v;
    bad["withdrawn"][0]["choice"] = "maybe";
    EXPECT_ERROR(parse_votes(bad.dump(), "v.json"), "withdrawn[0]: field 'choice' must be one of a, b, tie, reject");
    bad = v;
    bad["withdrawn"][0]["why"] = "oops";
    EXPECT_ERROR(parse_votes(bad.dump(), "v.json"), "withdrawn[0]: unexpected field 'why'");
    bad = v;
    bad["withdrawn"] = "none";
    EXPECT_ERROR(parse_votes(bad.dump(), "v.json"), "field 'withdrawn' must be an array");
}

TEST(LabelAi, RubricChoice) {
    const int action = 2;
    const std::string good = response_text(action, 1, false);             // relevant, hedged
    const std::string wrong = response_text((action + 1) % 6, 0, false);  // another action
    const CandidateResponse ok{good, {1}, "eos"}, bad{wrong, {1}, "eos"}, cut{good, {1}, "length"};
    ASSERT_TRUE(evaluate_response(good, FinishReason::eos, action).rubric_success);
    EXPECT_EQ(rubric_choice(ok, bad, action), VoteChoice::a);
    EXPECT_EQ(rubric_choice(bad, ok, action), VoteChoice::b);
    EXPECT_EQ(rubric_choice(ok, ok, action), VoteChoice::tie);
    EXPECT_EQ(rubric_choice(bad, cut, action), VoteChoice::reject);  // cut without EOS is no success
    EXPECT_EQ(rubric_choice(cut, ok, action), VoteChoice::b);
    CandidateFile c = parse_candidates(candidates_json(3).dump(), "c.json");
    c.pairs[1].a = ok;
    VoteFile v = label_with_rubric(c, kSha, [&](const CandidatePair&) { return action; });
    EXPECT_EQ(v.feedback_kind, "ai");
    EXPECT_FALSE(v.human_attestation);
    EXPECT_EQ(v.votes[1].choice, VoteChoice::a);
    EXPECT_EQ(v.votes[0].choice, VoteChoice::reject);
    // what it writes is a valid AI vote file
    EXPECT_EQ(parse_votes(votes_to_json(v).dump(), "ai.json").labeler, kRubricLabeler);
}

class Session : public ::testing::Test {
protected:
    void SetUp() override {
        dir = fs::temp_directory_path() / ("ppolab_test_vote_session_" + std::to_string(::getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
        out = dir / "votes.json";
    }
    void TearDown() override { fs::remove_all(dir); }
    VoteSession make() {
        const std::string bytes = candidates_json(3).dump();
        return VoteSession(parse_candidates(bytes, "c.json"), sha256_hex(bytes), out);
    }
    fs::path dir, out;
};

TEST_F(Session, ConsentVoteContinue) {
    {
        VoteSession s = make();
        EXPECT_FALSE(s.state()["consented"]);
        EXPECT_TRUE(s.state()["pair"].is_null());
        EXPECT_ERROR(s.vote({{"pair_id", "p0"}, {"choice", "a"}}), "give consent first");
        EXPECT_ERROR(s.consent({{"participant", "ada"}, {"consent", true}}), "attestation box");
        EXPECT_ERROR(s.consent({{"participant", "  "}, {"consent", true}, {"human_attestation", true}}),
                     "name is required");
        EXPECT_FALSE(fs::exists(out));
        json st = s.consent({{"participant", " ada "}, {"consent", true}, {"human_attestation", true}});
        EXPECT_EQ(st["participant"], "ada");
        EXPECT_EQ(st["pair"]["id"], "p0");
        EXPECT_TRUE(fs::exists(out));
        EXPECT_ERROR(s.vote({{"pair_id", "p1"}, {"choice", "a"}}), "not the pair on offer");
        EXPECT_ERROR(s.vote({{"pair_id", "p0"}, {"choice", "A"}}), "must be one of a, b, tie, reject");
        st = s.vote({{"pair_id", "p0"}, {"choice", "b"}});
        EXPECT_EQ(st["voted"], 1);
        EXPECT_EQ(st["pair"]["id"], "p1");
        const VoteFile f = parse_votes(read_file(out), out.string());
        ASSERT_EQ(f.votes.size(), 1u);
        EXPECT_EQ(f.votes[0].choice, VoteChoice::b);
        EXPECT_EQ(f.participant, "ada");
    }
    // a new session on the same file continues
    VoteSession again = make();
    EXPECT_TRUE(again.state()["consented"]);
    EXPECT_EQ(again.state()["pair"]["id"], "p1");
    EXPECT_ERROR(again.consent({{"participant", "bob"}, {"consent", true}, {"human_attestation", true}}),
                 "already given");
    again.vote({{"pair_id", "p1"}, {"choice", "tie"}});
    json st = again.vote({{"pair_id", "p2"}, {"choice", "reject"}});
    EXPECT_TRUE(st["pair"].is_null());
    EXPECT_EQ(st["voted"], 3);
    EXPECT_ERROR(again.vote({{"pair_id", "p2"}, {"choice", "a"}}), "every pair has been voted");
}

TEST_F(Session, UndoTakesTheLastVoteBack) {
    VoteSession s = make();
    EXPECT_ERROR(s.undo({{"pair_id", "p0"}}), "give consent first");
    s.consent({{"participant", "ada"}, {"consent", true}, {"human_attestation", true}});
    EXPECT_ERROR(s.undo({{"pair_id", "p0"}}), "no vote to take back");
    EXPECT_TRUE(s.state()["last"].is_null());
    s.vote({{"pair_id", "p0"}, {"choice", "a"}});
    json st = s.vote({{"pair_id", "p1"}, {"choice", "b"}});
    EXPECT_EQ(st["last"], json({{"pair_id", "p1"}, {"choice", "b"}}));
    EXPECT_ERROR(s.undo({{"pair_id", "p0"}}), "pair 'p0' is not the last vote ('p1')");
    EXPECT_ERROR(s.undo({{"pair_id", 3}}), "pair_id must be a string");
    st = s.undo({{"pair_id", "p1"}});
    EXPECT_EQ(st["voted"], 1);
    EXPECT_EQ(st["withdrawn"], 1);
    EXPECT_EQ(st["pair"]["id"], "p1");  // offered again
    EXPECT_EQ(st["last"]["pair_id"], "p0");
    st = s.undo({{"pair_id", "p0"}});  // Back twice
    EXPECT_EQ(st["pair"]["id"], "p0");
    s.vote({{"pair_id", "p0"}, {"choice", "tie"}});
    const VoteFile f = parse_votes(read_file(out), out.string());
    ASSERT_EQ(f.votes.size(), 1u);
    EXPECT_EQ(f.votes[0].choice, VoteChoice::tie);
    ASSERT_EQ(f.withdrawn.size(), 2u);  // nothing is lost: both, newest last
    EXPECT_EQ(f.withdrawn[0].vote.pair_id, "p1");
    EXPECT_EQ(f.withdrawn[0].vote.choice, VoteChoice::b);
    EXPECT_EQ(f.withdrawn[1].vote.pair_id, "p0");
    EXPECT_TRUE(is_utc_timestamp(f.withdrawn[1].withdrawn_at));
    // a new session on the file continues with the withdrawn votes kept
    VoteSession again = make();
    EXPECT_EQ(again.state()["withdrawn"], 2);
    EXPECT_EQ(again.state()["pair"]["id"], "p1");
    again.vote({{"pair_id", "p1"}, {"choice", "a"}});
    EXPECT_EQ(parse_votes(read_file(out), out.string()).withdrawn.size(), 2u);
}

// The state splits a corpus-shaped prompt into its case reference and the
// situation; it carries the guide text (the default, or the session's own).
TEST_F(Session, StateShowsTheSituationAndTheGuide) {
    EXPECT_EQ(make().state()["guide"], kDefaultVoteGuide);  // (writes nothing before consent)
    json cj = candidates_json(2);
    cj["pairs"][0]["prompt"] = "Case OH042, message 3. Source: chat. The screen is dark. Give one step.";
    const std::string bytes = cj.dump();
    VoteSession s(parse_candidates(bytes, "c.json"), sha256_hex(bytes), out, "Prefer the clearer answer.");
    EXPECT_EQ(s.state()["guide"], "Prefer the clearer answer.");
    const json pair = s.consent({{"participant", "ada"}, {"consent", true}, {"human_attestation", true}})["pair"];
    EXPECT_EQ(pair["reference"], "Case OH042, message 3. Source: chat.");
    EXPECT_EQ(pair["situation"], "The screen is dark. Give one step.");
    EXPECT_EQ(pair["prompt"], cj["pairs"][0]["prompt"]);
}

TEST_F(Session, GuideFileRules) {
    const fs::path g = dir / "guide.txt";
    write_file_atomic(g, "Line one.\r\nLine two: ünïcode.\n", Overwrite::replace);
    EXPECT_EQ(read_vote_guide(g), "Line one.\r\nLine two: ünïcode.\n");
    write_file_atomic(g,
                      "ok\nbad\x07"
                      "bell\n",
                      Overwrite::replace);
    EXPECT_ERROR(read_vote_guide(g), "guide.txt: line 2 must be printable UTF-8 text");
    write_file_atomic(g, " \n\n", Overwrite::replace);
    EXPECT_ERROR(read_vote_guide(g), "the guide is empty");
    write_file_atomic(g, std::string(kMaxVoteGuideBytes + 1, 'x'), Overwrite::replace);
    EXPECT_ERROR(read_vote_guide(g), "over its limit of 16384");
    EXPECT_ERROR(read_vote_guide(dir / "missing.txt"), "missing.txt");
}

TEST_F(Session, RefusesAnotherCandidateFile) {
    { make().consent({{"participant", "ada"}, {"consent", true}, {"human_attestation", true}}); }
    const std::string other = candidates_json(4).dump();
    EXPECT_ERROR(VoteSession(parse_candidates(other, "o.json"), sha256_hex(other), out),
                 "made for another candidate file");
    write_file_atomic(out, "not json", Overwrite::replace);
    EXPECT_ERROR(make(), "not valid JSON");
}

TEST(Http, ParseRequests) {
    EXPECT_FALSE(parse_http_request("GET / HTTP/1.1\r\nHost: x").has_value());
    auto r = parse_http_request("GET /api/state?x=1 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->method, "GET");
    EXPECT_EQ(r->target, "/api/state?x=1");
    EXPECT_EQ(r->host, "127.0.0.1:80");
    const std::string post =
        "POST /api/vote HTTP/1.1\r\nhost: a\r\nCONTENT-TYPE: Application/JSON\r\nContent-Length: 4\r\n\r\n";
    EXPECT_FALSE(parse_http_request(post + "ab").has_value());
    r = parse_http_request(post + "abcd");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->body, "abcd");
    EXPECT_EQ(r->content_type, "application/json");
    EXPECT_ERROR(parse_http_request("GARBAGE\r\n\r\n"), "request line is malformed");
    EXPECT_ERROR(parse_http_request("GET / HTTP/2\r\n\r\n"), "HTTP version");
    EXPECT_ERROR(parse_http_request("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), "Content-Length is malformed");
    EXPECT_ERROR(parse_http_request("POST / HTTP/1.1\r\nContent-Length: 999999\r\n\r\n"), "body is over");
    EXPECT_ERROR(parse_http_request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), "Transfer-Encoding");
    EXPECT_ERROR(parse_http_request(std::string(kHttpMaxHeader + 10, 'x')), "header is over");
}

// The page served at / is src/feedback/vote_page.html byte for byte (it has
// no placeholder: the server's state comes from /api/state), embedded at
// build time.
TEST_F(Session, ServedPageIsTheFileBytes) {
    const fs::path file = ppolab::test::source_dir() / "src" / "feedback" / "vote_page.html";
    const std::string page = read_file(file);
    ASSERT_GT(page.size(), 1000u) << file;
    EXPECT_EQ(vote_page_html(), page);
    VoteSession s = make();
    HttpRequest r;
    r.method = "GET";
    r.target = "/";
    r.host = "127.0.0.1:8000";
    const HttpResponse got = handle_vote_request(s, r, 8000);
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.content_type, "text/html; charset=utf-8");
    EXPECT_EQ(sha256_hex(got.body), sha256_hex(page));
}

TEST_F(Session, HttpRoutesAndGuards) {
    VoteSession s = make();
    auto req = [](std::string method, std::string target, std::string host, std::string body = "",
                  std::string type = "application/json", std::string origin = "") {
        HttpRequest r;
        r.method = method;
        r.target = target;
        r.host = host;
        r.body = body;
        r.content_type = type;
        r.origin = origin;
        return r;
    };
    const std::string host = "127.0.0.1:8000";
    EXPECT_EQ(handle_vote_request(s, req("GET", "/", host), 8000).status, 200);
    EXPECT_NE(handle_vote_request(s, req("GET", "/", host), 8000).body.find("id=\"btn-reject\""), std::string::npos);
    EXPECT_EQ(handle_vote_request(s, req("GET", "/", "localhost:8000"), 8000).status, 200);
    EXPECT_EQ(handle_vote_request(s, req("GET", "/", "evil.example:8000"), 8000).status, 421);  // DNS rebinding
    EXPECT_EQ(handle_vote_request(s, req("GET", "/", "127.0.0.1:9"), 8000).status, 421);
    EXPECT_EQ(handle_vote_request(s, req("GET", "/nope", host), 8000).status, 404);
    EXPECT_EQ(handle_vote_request(s, req("DELETE", "/api/vote", host), 8000).status, 405);
    const std::string consent = R"({"participant":"ada","consent":true,"human_attestation":true})";
    EXPECT_EQ(handle_vote_request(s, req("POST", "/api/consent", host, consent, "text/plain"), 8000).status, 415);
    EXPECT_EQ(handle_vote_request(
                  s, req("POST", "/api/consent", host, consent, "application/json", "http://evil.example"), 8000)
                  .status,
              403);
    EXPECT_EQ(handle_vote_request(s, req("POST", "/api/consent", host, "{oops"), 8000).status, 400);
    EXPECT_FALSE(fs::exists(out));
    HttpResponse ok = handle_vote_request(
        s, req("POST", "/api/consent", host, consent, "application/json", "http://127.0.0.1:8000"), 8000);
    EXPECT_EQ(ok.status, 200) << ok.body;
    HttpResponse v = handle_vote_request(s, req("POST", "/api/vote", host, R"({"pair_id":"p1","choice":"a"})"), 8000);
    EXPECT_EQ(v.status, 409);
    EXPECT_NE(v.body.find("not the pair on offer"), std::string::npos);
    v = handle_vote_request(s, req("POST", "/api/vote", host, R"({"pair_id":"p0","choice":"a"})"), 8000);
    EXPECT_EQ(v.status, 200);
    EXPECT_EQ(json::parse(v.body)["voted"], 1);
    // Back: a POST like the others, guarded the same way
    EXPECT_EQ(handle_vote_request(s, req("GET", "/api/undo", host), 8000).status, 405);
    EXPECT_EQ(handle_vote_request(s, req("POST", "/api/undo", host, R"({"pair_id":"p0"})", "text/plain"), 8000).status,
              415);
    EXPECT_EQ(
        handle_vote_request(
            s, req("POST", "/api/undo", host, R"({"pair_id":"p0"})", "application/json", "http://evil.example"), 8000)
            .status,
        403);
    v = handle_vote_request(s, req("POST", "/api/undo", host, R"({"pair_id":"p9"})"), 8000);
    EXPECT_EQ(v.status, 409);
    v = handle_vote_request(s, req("POST", "/api/undo", host, R"({"pair_id":"p0"})"), 8000);
    EXPECT_EQ(v.status, 200) << v.body;
    EXPECT_EQ(json::parse(v.body)["voted"], 0);
    EXPECT_EQ(json::parse(v.body)["withdrawn"], 1);
}

// ---- hostile input: names, duplicate headers, content types, fetch metadata ----

TEST(Names, PrintableTextRule) {
    using feedback_detail::printable_text_problem;
    EXPECT_EQ(printable_text_problem("Ada Lovelace"), "");
    EXPECT_EQ(printable_text_problem("Zoë 山田 \xF0\x9F\x98\x80"), "");  // é, CJK, an emoji: valid UTF-8
    EXPECT_EQ(printable_text_problem(""), "");
    EXPECT_EQ(printable_text_problem("a\nb"), "holds the control character U+000A at byte 1");
    EXPECT_EQ(printable_text_problem(std::string("ab\0c", 4)), "holds the control character U+0000 at byte 2");
    EXPECT_EQ(printable_text_problem("\tx"), "holds the control character U+0009 at byte 0");
    EXPECT_EQ(printable_text_problem("a\x7f"), "holds the control character U+007F at byte 1");
    EXPECT_EQ(printable_text_problem("a\xC2\x85"), "holds the control character U+0085 at byte 1");  // C1 NEL
    EXPECT_EQ(printable_text_problem("\xE2\x80\xAE"
                                     "abc"),
              "holds the bidirectional control U+202E at byte 0");
    EXPECT_EQ(printable_text_problem("a\xE2\x80\xA8"), "holds the line separator U+2028 at byte 1");
    EXPECT_EQ(printable_text_problem("a\xFF"), "is not valid UTF-8 (at byte 1)");
    EXPECT_EQ(printable_text_problem("\xC0\xAF"), "is not valid UTF-8 (at byte 0)");          // overlong '/'
    EXPECT_EQ(printable_text_problem("x\xE0\x80\xAF"), "is not valid UTF-8 (at byte 1)");     // overlong, 3 bytes
    EXPECT_EQ(printable_text_problem("\xED\xA0\x80"), "is not valid UTF-8 (at byte 0)");      // a surrogate
    EXPECT_EQ(printable_text_problem("\xF4\x90\x80\x80"), "is not valid UTF-8 (at byte 0)");  // over U+10FFFF
    EXPECT_EQ(printable_text_problem("ab\xE2\x82"), "is not valid UTF-8 (at byte 2)");        // cut short
    EXPECT_EQ(printable_text_problem("\x80"), "is not valid UTF-8 (at byte 0)");              // a lone continuation
    // the message never carries the bytes themselves (a NUL would cut it)
    const std::string m =
        error_of([] { feedback_detail::check_printable_text(std::string("a\0b", 3), "participant", "v.json", 200); });
    EXPECT_EQ(m,
              "v.json: field 'participant' must be printable UTF-8 text of at most 200 bytes (no control characters); "
              "it holds the control character U+0000 at byte 1");
    EXPECT_ERROR(feedback_detail::check_printable_text(std::string(201, 'x'), "labeler", "ai.json", 200),
                 "ai.json: field 'labeler' must be printable UTF-8 text of at most 200 bytes (no control characters); "
                 "it is 201 bytes long");
    EXPECT_NO_THROW(feedback_detail::check_printable_text(std::string(200, 'x'), "labeler", "ai.json", 200));
}

TEST(Names, VoteFilesRefuseUnprintableNames) {
    const json c = candidates_json(3);
    const std::vector<std::pair<std::string, std::string>> bad = {{std::string("a\nb\0c", 5), "U+000A at byte 1"},
                                                                  {std::string("ab\0c", 4), "U+0000 at byte 2"},
                                                                  {"a\x7f"
                                                                   "b",
                                                                   "U+007F at byte 1"},
                                                                  {"a\xC2\x9B"
                                                                   "b",
                                                                   "U+009B at byte 1"},
                                                                  {std::string(201, 'n'), "is 201 bytes long"}};
    for (const auto& [name, what] : bad) {
        json h = human_votes(c);
        h["participant"] = name;
        const std::string m = error_of([&] { parse_votes(h.dump(), "v.json"); });
        EXPECT_NE(m.find("v.json: field 'participant' must be printable UTF-8 text"), std::string::npos) << m;
        EXPECT_NE(m.find(what), std::string::npos) << m;
        EXPECT_EQ(m.find('\0'), std::string::npos);
    }
    // invalid UTF-8 cannot even be read as JSON: the parser names the file and the byte
    std::string bytes = human_votes(c).dump();
    bytes.replace(bytes.find("\"ada\""), 5,
                  "\"a\xFF"
                  "da\"");
    EXPECT_ERROR(parse_votes(bytes, "v.json"), "v.json: not valid JSON");
    EXPECT_ERROR(parse_votes(bytes, "v.json"), "UTF-8");
    // an AI file's labeler, a vote's pair id and created_by follow the same rule
    json ai = human_votes(c, "tie");
    ai.erase("participant");
    ai.erase("consent");
    ai["feedback_kind"] = "ai";
    ai["labeler"] = "rubric\r\nX-Injected: 1";
    ai["human_attestation"] = false;
    ai["candidate_file_sha256"] = kSha;
    EXPECT_ERROR(parse_votes(ai.dump(), "ai.json"), "ai.json: field 'labeler' must be printable UTF-8 text");
    json h = human_votes(c);
    h["votes"][1]["pair_id"] = std::string("p1\0", 3);
    EXPECT_ERROR(parse_votes(h.dump(), "v.json"), "v.json: votes[1]: field 'pair_id' must be printable UTF-8 text");
    h = human_votes(c);
    h["created_by"] = "serve\x1b[31m";
    EXPECT_ERROR(parse_votes(h.dump(), "v.json"), "v.json: field 'created_by' must be printable UTF-8 text");
    // a value echoed in a message is escaped, not cut at its NUL
    h = human_votes(c);
    h["votes"][0]["choice"] = std::string("a\0b", 3);
    EXPECT_ERROR(parse_votes(h.dump(), "v.json"), "must be one of a, b, tie, reject; got \"a\\u0000b\"");
    // names people really have are kept as they are
    h = human_votes(c);
    h["participant"] = "Zoë O'Brien-山田";
    EXPECT_EQ(parse_votes(h.dump(), "v.json").participant, "Zoë O'Brien-山田");
}

TEST(Names, CandidateIdsArePrintableButTextsMayHoldNewlines) {
    json j = candidates_json(2);
    j["pairs"][1]["id"] = "p1\n<b>";
    EXPECT_ERROR(parse_candidates(j.dump(), "c.json"), "c.json: pairs[1]: field 'id' must be printable UTF-8 text");
    j = candidates_json(2);
    j["pairs"][0]["prompt_id"] = std::string("OH\0", 3);
    EXPECT_ERROR(parse_candidates(j.dump(), "c.json"),
                 "c.json: pairs[0]: field 'prompt_id' must be printable UTF-8 text");
    j = candidates_json(2);
    j["pairs"][0]["prompt"] = "line one\nline two\ttabbed";
    j["pairs"][0]["a"]["text"] = "answer\nover lines";
    EXPECT_EQ(parse_candidates(j.dump(), "c.json").pairs[0].prompt, "line one\nline two\ttabbed");
}

TEST_F(Session, ConsentRefusesUnprintableNames) {
    VoteSession s = make();
    auto consent = [&](const std::string& name) {
        return error_of([&] { s.consent({{"participant", name}, {"consent", true}, {"human_attestation", true}}); });
    };
    for (const auto& [name, what] : std::vector<std::pair<std::string, std::string>>{
             {std::string("a\nb\0c", 5), "U+000A at byte 1"},
             {std::string("ab\0c", 4), "U+0000 at byte 2"},
             {"a\x7f", "U+007F"},
             {"a\xC2\x80", "U+0080"},
             {"a\xFF"
              "b",
              "is not valid UTF-8 (at byte 1)"},  // only C++ callers can pass these: JSON cannot hold them
             {"\tada", "U+0009 at byte 0"},
             {std::string(201, 'x'), "is 201 bytes long"}}) {
        const std::string m = consent(name);
        EXPECT_NE(m.find("consent: field 'participant' must be printable UTF-8 text"), std::string::npos) << m;
        EXPECT_NE(m.find(what), std::string::npos) << m;
    }
    EXPECT_ERROR(s.consent({{"participant", 7}, {"consent", true}, {"human_attestation", true}}),
                 "field 'participant' must be a string");
    EXPECT_ERROR(s.consent({{"consent", true}, {"human_attestation", true}}), "a participant name is required");
    EXPECT_FALSE(fs::exists(out));
    json st = s.consent(
        {{"participant", "  " + std::string(200, 'y') + " "}, {"consent", true}, {"human_attestation", true}});
    EXPECT_EQ(st["participant"], std::string(200, 'y'));
}

TEST(Http, SingleHeadersAppearOnce) {
    const std::string get = "GET / HTTP/1.1\r\n";
    EXPECT_ERROR(parse_http_request(get + "Host: evil.example\r\nHost: 127.0.0.1:80\r\n\r\n"),
                 "HTTP header 'Host' appears more than once");
    EXPECT_ERROR(parse_http_request(get + "Host: 127.0.0.1:80\r\nhOsT: evil.example\r\n\r\n"),
                 "HTTP header 'Host' appears more than once");
    EXPECT_ERROR(parse_http_request("POST / HTTP/1.1\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\n{}"),
                 "HTTP header 'Content-Length' appears more than once");
    EXPECT_ERROR(parse_http_request(get + "Origin: a\r\nOrigin: b\r\n\r\n"), "'Origin' appears more than once");
    EXPECT_ERROR(parse_http_request(get + "Content-Type: a\r\nContent-Type: b\r\n\r\n"),
                 "'Content-Type' appears more than once");
    EXPECT_ERROR(parse_http_request(get + "Sec-Fetch-Site: none\r\nSec-Fetch-Site: cross-site\r\n\r\n"),
                 "'Sec-Fetch-Site' appears more than once");
    // other headers may repeat
    EXPECT_TRUE(parse_http_request(get + "Accept: a\r\nAccept: b\r\n\r\n").has_value());
    // a header name with a space, a folded line, a control character, a bad target or method
    EXPECT_ERROR(parse_http_request(get + "Host : evil.example\r\n\r\n"), "header line is malformed");
    EXPECT_ERROR(parse_http_request(get + "Host: a\r\n  folded\r\n\r\n"), "header line is malformed");
    EXPECT_ERROR(parse_http_request(get + std::string("X-A: a\0b\r\n\r\n", 12)), "control character");
    EXPECT_ERROR(parse_http_request(get + "X-A: a\nHost: evil\r\n\r\n"), "control character");
    EXPECT_ERROR(parse_http_request(get + "Host: \xFF\r\n\r\n"), "'Host' must be printable ASCII");
    EXPECT_ERROR(parse_http_request("GET /\xFF HTTP/1.1\r\n\r\n"), "request target");
    EXPECT_ERROR(parse_http_request("GET x HTTP/1.1\r\n\r\n"), "request target");
    EXPECT_ERROR(parse_http_request("G(T / HTTP/1.1\r\n\r\n"), "method is not a token");
    auto r =
        parse_http_request(get + "Sec-Fetch-Site: Cross-Site\r\nContent-Type: Application/JSON; Charset=UTF-8\r\n\r\n");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->sec_fetch_site, "cross-site");
    EXPECT_EQ(r->content_type, "application/json; charset=utf-8");
}

TEST(Http, JsonContentTypeExactly) {
    EXPECT_TRUE(is_json_content_type("application/json"));
    EXPECT_TRUE(is_json_content_type("application/json; charset=utf-8"));
    EXPECT_TRUE(is_json_content_type("application/json;charset=\"utf-8\""));
    EXPECT_FALSE(is_json_content_type("application/jsonx"));
    EXPECT_FALSE(is_json_content_type("application/json-patch+json"));
    EXPECT_FALSE(is_json_content_type("application/json; charset=latin1"));
    EXPECT_FALSE(is_json_content_type("application/json; charset=utf-8; x=1"));
    EXPECT_FALSE(is_json_content_type("application/json;"));
    EXPECT_FALSE(is_json_content_type("text/plain; application/json"));
    EXPECT_FALSE(is_json_content_type(""));
}

TEST_F(Session, HttpRefusesForeignSitesAndTypes) {
    VoteSession s = make();
    const std::string host = "127.0.0.1:8000";
    auto post = [&](std::string type, std::string sec_fetch_site, std::string origin = "",
                    std::string body = R"({"participant":"ada","consent":true,"human_attestation":true})") {
        HttpRequest r;
        r.method = "POST";
        r.target = "/api/consent";
        r.host = host;
        r.content_type = type;
        r.sec_fetch_site = sec_fetch_site;
        r.origin = origin;
        r.body = body;
        return handle_vote_request(s, r, 8000);
    };
    HttpResponse r = post("application/jsonx", "");
    EXPECT_EQ(r.status, 415);
    EXPECT_NE(r.body.find("application/jsonx"), std::string::npos) << r.body;
    EXPECT_EQ(post("application/json; charset=latin1", "").status, 415);
    r = post("application/json", "cross-site");
    EXPECT_EQ(r.status, 403);
    EXPECT_NE(r.body.find("cross-site request refused (Sec-Fetch-Site 'cross-site')"), std::string::npos) << r.body;
    EXPECT_EQ(post("application/json", "same-site").status, 403);
    EXPECT_EQ(post("application/json", "cross-site", "http://127.0.0.1:8000").status, 403);
    EXPECT_EQ(post("application/json", "same-origin", "http://evil.example").status, 403);
    r = post("application/json", "", "", R"({"participant":"a\nb","consent":true,"human_attestation":true})");
    EXPECT_EQ(r.status, 409);
    EXPECT_NE(r.body.find("field 'participant' must be printable UTF-8 text"), std::string::npos) << r.body;
    r = post("application/json", "", "", "{\"participant\":\"a\xFF\",\"consent\":true,\"human_attestation\":true}");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("UTF-8"), std::string::npos) << r.body;
    EXPECT_FALSE(fs::exists(out));
    r = post("application/json; charset=utf-8", "same-origin", "http://localhost:8000");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(fs::exists(out));
    // a Host that is not text is refused, and the answer is still valid JSON
    HttpRequest g;
    g.method = "GET";
    g.target = "/";
    g.host = "\xFF\xFE";
    r = handle_vote_request(s, g, 8000);
    EXPECT_EQ(r.status, 421);
    EXPECT_FALSE(json::parse(r.body, nullptr, /*allow_exceptions=*/false).is_discarded()) << r.body;
}
