// One test per rule of SPEC §8 through the real command,
// `ppolab reward --run RUN --votes FILE... --candidates FILE`, on a micro run
// (prepare, a few pretraining updates, one SFT update, 64 exported pairs):
// each test writes a malformed vote (or candidate) file, expects the command
// to fail with the rule's message, and checks that nothing was written
// (no RUN/reward, no RUN/feedback). A positive control trains the judge on
// the well-formed file and shows that an existing output is never overwritten.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "feedback/candidates.h"
#include "support/test_support.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/sha256.h"

using ppolab::test::Output;
using ppolab::test::run_shell;
using namespace ppolab;

namespace {

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

std::string binary() { return quoted(fs::path(ppolab::test::ppolab_binary())); }

// Micro settings: seconds, not minutes.
const char* kMicro =
    " --set pretrain.conversations=400 --set pretrain.prose=50 --set pretrain.check_prompts=0"
    " --set sft.accumulation=32 --set reward.pairs_per_update=32 --set reward.epochs=1 --set feedback.pairs=64";

}  // namespace

class VoteRules : public ::testing::Test {
protected:
    static inline fs::path root, run, candidates;
    static inline std::string candidate_bytes;
    static inline json valid;  // a well-formed human vote file: "a" on every pair

    static void SetUpTestSuite() {
        ::setenv("PPOLAB_QUIET", "1", 1);
        root = fs::temp_directory_path() / ("ppolab_test_vote_rules_" + std::to_string(::getpid()));
        fs::remove_all(root);
        fs::create_directories(root);
        run = root / "run";
        candidates = root / "candidates.json";
        const std::string r = " --run " + quoted(run) + kMicro;
        for (const std::string& step :
             {"prepare" + r, "pretrain" + r + " --set max_updates=2", "sft" + r + " --set max_updates=1",
              "feedback export" + r + " --out " + quoted(candidates)}) {
            Output o = run_shell(binary() + " " + step);
            ASSERT_EQ(o.rc, 0) << step << "\n" << o.out;
        }
        candidate_bytes = read_file(candidates);
        const json c = json::parse(candidate_bytes);
        valid = {{"format", 1},
                 {"feedback_kind", "human"},
                 {"checkpoint_sha256", c["checkpoint_sha256"]},
                 {"participant", "test participant"},
                 {"consent", true},
                 {"human_attestation", true},
                 {"candidate_file_sha256", sha256_hex(candidate_bytes)},
                 {"votes", json::array()}};
        for (const json& p : c["pairs"])
            valid["votes"].push_back(
                {{"pair_id", p["id"]}, {"choice", "a"}, {"timestamp", "2025-03-01T10:00:00.000Z"}});
    }
    static void TearDownTestSuite() { fs::remove_all(root); }

    // Writes `files` (name -> text), runs reward --votes on them, expects a
    // failure naming `message` and no output.
    static void expect_refused(const std::vector<std::pair<std::string, std::string>>& files,
                               const std::string& message, const std::string& extra = "",
                               const fs::path& cands = candidates) {
        std::string votes;
        for (const auto& [name, text] : files) {
            write_file_atomic(root / name, text, Overwrite::replace);
            votes += " --votes " + quoted(root / name);
        }
        const Output o = run_shell(binary() + " reward --run " + quoted(run) + kMicro + votes + " --candidates " +
                                   quoted(cands) + extra);
        EXPECT_NE(o.rc, 0) << o.out;
        EXPECT_NE(o.out.find(message), std::string::npos) << "expected: " << message << "\ngot: " << o.out;
        EXPECT_FALSE(fs::exists(run / "reward")) << "a refused vote file wrote RUN/reward";
        EXPECT_FALSE(fs::exists(run / "feedback")) << "a refused vote file wrote RUN/feedback";
    }
    static std::string edited(const std::function<void(json&)>& edit) {
        json v = valid;
        edit(v);
        return v.dump(1);
    }
    static json as_ai(json v) {
        v.erase("participant");
        v.erase("consent");
        v["feedback_kind"] = "ai";
        v["labeler"] = "test labeller";
        v["human_attestation"] = false;
        return v;
    }
};

TEST_F(VoteRules, NotJson) { expect_refused({{"v.json", "{\"format\": 1,"}}, "v.json: not valid JSON"); }

TEST_F(VoteRules, Format) {
    expect_refused({{"v.json", edited([](json& v) { v["format"] = 2; })}},
                   "field 'format' must be 1 (vote file format 1)");
    expect_refused({{"v.json", edited([](json& v) { v.erase("format"); })}}, "missing field 'format'");
}

TEST_F(VoteRules, HumanConsent) {
    expect_refused({{"v.json", edited([](json& v) { v["consent"] = false; })}},
                   "human votes require explicit consent: field 'consent' must be true, got false");
    expect_refused({{"v.json", edited([](json& v) { v.erase("consent"); })}},
                   "human votes require explicit consent: field 'consent' must be true, got nothing (missing)");
}

TEST_F(VoteRules, HumanAttestation) {
    expect_refused({{"v.json", edited([](json& v) { v["human_attestation"] = "yes"; })}},
                   "human votes require human attestation: field 'human_attestation' must be true");
}

TEST_F(VoteRules, HumanParticipant) {
    expect_refused({{"v.json", edited([](json& v) { v.erase("participant"); })}},
                   "human votes must name their participant: missing field 'participant'");
    expect_refused({{"v.json", edited([](json& v) { v["participant"] = " "; })}},
                   "human votes must name their participant: field 'participant' is empty");
}

TEST_F(VoteRules, AiAttestationFalse) {
    json v = as_ai(valid);
    v["human_attestation"] = true;
    expect_refused({{"ai.json", v.dump()}}, "AI preferences must not claim human attestation", " --feedback-kind ai");
}

TEST_F(VoteRules, AiLabeler) {
    json v = as_ai(valid);
    v.erase("labeler");
    expect_refused({{"ai.json", v.dump()}}, "AI preferences must identify their labeler: missing field 'labeler'",
                   " --feedback-kind ai");
}

TEST_F(VoteRules, AiCandidateFileSha256) {
    json v = as_ai(valid);
    v["candidate_file_sha256"] = std::string(64, '0');
    expect_refused({{"ai.json", v.dump()}}, "AI labels refer to a different candidate corpus", " --feedback-kind ai");
    v.erase("candidate_file_sha256");
    expect_refused({{"ai.json", v.dump()}}, "missing field 'candidate_file_sha256'", " --feedback-kind ai");
}

TEST_F(VoteRules, OneKindPerRun) {
    expect_refused({{"ai.json", as_ai(valid).dump()}},
                   "feedback_kind is \"ai\" but this run learns from human feedback");
    expect_refused({{"v.json", valid.dump()}}, "feedback_kind is \"human\" but this run learns from ai feedback",
                   " --feedback-kind ai");
}

TEST_F(VoteRules, CheckpointOfVotesMatchesCandidates) {
    expect_refused({{"v.json", edited([](json& v) { v["checkpoint_sha256"] = std::string(64, 'e'); })}},
                   "checkpoint_sha256 eeee");
    expect_refused({{"v.json", edited([](json& v) { v["checkpoint_sha256"] = std::string(64, 'e'); })}},
                   "differs from the candidate file's");
}

TEST_F(VoteRules, CandidatesBelongToTheRunsSft) {
    json c = json::parse(candidate_bytes);
    c["checkpoint_sha256"] = std::string(64, 'c');
    const fs::path other = root / "other-candidates.json";
    write_file_atomic(other, c.dump(), Overwrite::replace);
    json v = valid;
    v["checkpoint_sha256"] = c["checkpoint_sha256"];
    v.erase("candidate_file_sha256");
    expect_refused({{"v.json", v.dump()}}, "candidates belong to a different supervised policy", "", other);
}

TEST_F(VoteRules, CandidateTextMatchesItsTokens) {
    json c = json::parse(candidate_bytes);
    c["pairs"][0]["a"]["text"] = "a text the judge never sees";
    const fs::path other = root / "tampered-candidates.json";
    write_file_atomic(other, c.dump(), Overwrite::replace);
    json v = valid;
    v.erase("candidate_file_sha256");
    expect_refused({{"v.json", v.dump()}}, "field 'text' differs from the decoding of its token_ids", "", other);
}

TEST_F(VoteRules, KnownPairIds) {
    expect_refused({{"v.json", edited([](json& v) { v["votes"][5]["pair_id"] = "pair-9999"; })}},
                   "votes[5]: unknown pair_id 'pair-9999'");
}

TEST_F(VoteRules, Choices) {
    expect_refused({{"v.json", edited([](json& v) { v["votes"][2]["choice"] = "both"; })}},
                   "votes[2]: field 'choice' must be one of a, b, tie, reject; got \"both\"");
}

TEST_F(VoteRules, Timestamps) {
    expect_refused({{"v.json", edited([](json& v) { v["votes"][3].erase("timestamp"); })}},
                   "votes[3]: missing field 'timestamp'");
    expect_refused({{"v.json", edited([](json& v) { v["votes"][3]["timestamp"] = "yesterday"; })}},
                   "votes[3]: field 'timestamp' must be a UTC ISO 8601 time");
}

TEST_F(VoteRules, DuplicateParticipantVotes) {
    expect_refused({{"v.json", edited([](json& v) { v["votes"][7]["pair_id"] = v["votes"][1]["pair_id"]; })}},
                   "votes[7]: duplicate participant vote: 'test participant' already voted on pair");
    json first = valid, second = valid;
    first["votes"] = json::array({valid["votes"][0]});
    second["votes"].erase(second["votes"].begin() + 1);  // still holds pair 0
    expect_refused({{"v1.json", first.dump()}, {"v2.json", second.dump()}},
                   "v2.json: votes[0]: duplicate participant vote: 'test participant' already voted on pair");
}

TEST_F(VoteRules, MinimumBinaryLabels) {
    // ties and rejects are not binary labels: make most train votes ties
    const json c = json::parse(candidate_bytes);
    int train = 0, validation = 0, test = 0;
    json v = valid;
    for (size_t i = 0; i < c["pairs"].size(); ++i) {
        const std::string split = c["pairs"][i]["split"];
        if (split == "train" && ++train > 20) v["votes"][i]["choice"] = train % 2 ? "tie" : "reject";
        if (split == "validation") ++validation;
        if (split == "test") ++test;
    }
    ASSERT_GT(train, 30);
    expect_refused({{"v.json", v.dump()}},
                   "insufficient binary labels (a or b; ties and rejects do not count): train 20, validation " +
                       std::to_string(validation) + ", test " + std::to_string(test) +
                       "; need at least 30 train, 4 validation and 8 test");
}

TEST_F(VoteRules, NeedsTheCandidateFile) {
    write_file_atomic(root / "v.json", valid.dump(), Overwrite::replace);
    const Output o =
        run_shell(binary() + " reward --run " + quoted(run) + kMicro + " --votes " + quoted(root / "v.json"));
    EXPECT_NE(o.rc, 0);
    EXPECT_NE(o.out.find("reward --votes needs --candidates FILE"), std::string::npos) << o.out;
    EXPECT_FALSE(fs::exists(run / "reward"));
}

// The positive control, on a copy of the run: the same file is accepted, its
// provenance reaches the judge's report, and nothing is ever overwritten.
TEST_F(VoteRules, WellFormedVotesTrainTheJudgeOnce) {
    const fs::path copy = root / "run-accepted";
    fs::remove_all(copy);
    fs::copy(run, copy, fs::copy_options::recursive);
    const fs::path votes = root / "valid.json";
    write_file_atomic(votes, valid.dump(1), Overwrite::replace);
    const std::string cmd = binary() + " reward --run " + quoted(copy) + kMicro + " --candidates " +
                            quoted(candidates) + " --votes " + quoted(votes);
    Output o = run_shell(cmd);
    ASSERT_EQ(o.rc, 0) << o.out;
    const json report = read_json_file(copy / "reward" / "continuous.json");
    const json& fb = report["identity"]["data"]["feedback"];
    EXPECT_EQ(fb["feedback_kind"], "human");
    EXPECT_EQ(fb["files"][0]["sha256"], sha256_file(votes));
    EXPECT_EQ(fb["files"][0]["votes"], valid["votes"].size());
    EXPECT_EQ(fb["candidate_file"]["sha256"], sha256_hex(candidate_bytes));
    EXPECT_EQ(fb["ties"], 0);
    EXPECT_TRUE(fs::exists(copy / "reward" / "final" / "learned.safetensors"));
    EXPECT_TRUE(fs::exists(copy / "feedback" / "test_votes.json"));
    // again: refused, and the outputs are unchanged
    const std::string before = sha256_file(copy / "reward" / "continuous.json");
    o = run_shell(cmd);
    EXPECT_NE(o.rc, 0);
    EXPECT_NE(o.out.find("refusing to overwrite"), std::string::npos) << o.out;
    EXPECT_EQ(sha256_file(copy / "reward" / "continuous.json"), before);
    // and the corpus judge cannot be mixed into a run whose judge learns from votes
    o = run_shell(binary() + " reward --run " + quoted(copy) + kMicro + " --mode interrupt");
    EXPECT_NE(o.rc, 0);
    EXPECT_NE(o.out.find("a run's judge learns from one source"), std::string::npos) << o.out;
    EXPECT_FALSE(fs::exists(copy / "reward" / "interrupt.json"));
}

// Names people see are printable text: valid UTF-8, no control characters,
// at most 200 bytes; the error names the file and the field and is not cut
// at a NUL.
TEST_F(VoteRules, NamesArePrintableText) {
    expect_refused({{"v.json", edited([](json& v) { v["participant"] = std::string("a\nb\0c", 5); })}},
                   "v.json: field 'participant' must be printable UTF-8 text of at most 200 bytes (no control "
                   "characters); it holds the control character U+000A at byte 1");
    expect_refused({{"v.json", edited([](json& v) { v["participant"] = std::string("ab\0c", 4); })}},
                   "v.json: field 'participant' must be printable UTF-8 text of at most 200 bytes (no control "
                   "characters); it holds the control character U+0000 at byte 2");
    expect_refused({{"v.json", edited([](json& v) {
                         v["participant"] =
                             "a\x7f"
                             "b";
                     })}},
                   "U+007F at byte 1");
    expect_refused({{"v.json", edited([](json& v) { v["participant"] = std::string(201, 'p'); })}},
                   "field 'participant' must be printable UTF-8 text of at most 200 bytes (no control characters); it "
                   "is 201 bytes long");
    // bytes that are not UTF-8 are refused by the JSON reader, which names the file and the byte
    std::string bytes = valid.dump(1);
    bytes.replace(bytes.find("test participant"), 4, "te\xFFt");
    expect_refused({{"v.json", bytes}}, "v.json: not valid JSON");
    json ai = as_ai(valid);
    ai["labeler"] = "labeller\n(forged line)";
    expect_refused({{"ai.json", ai.dump()}}, "ai.json: field 'labeler' must be printable UTF-8 text",
                   " --feedback-kind ai");
}
