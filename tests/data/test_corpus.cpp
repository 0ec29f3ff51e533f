// OfficeHelpPrefs-v1: SPEC §1 counts and properties, the audit's refusals,
// the SPEC §7 layout, byte-identical writes, loaders and corruption checks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "data/corpus.h"
#include "data/corpus_fields.h"
#include "data/rubric.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/sha256.h"

using ppolab::test::message_of;
using namespace ppolab;

namespace {

fs::path temp_root() {
    static fs::path root = [] {
        fs::path p = fs::temp_directory_path() / ("ppolab_test_corpus_" + std::to_string(::getpid()));
        fs::remove_all(p);
        fs::create_directories(p);
        return p;
    }();
    return root;
}

const Corpus& corpus() {
    static const Corpus c = corpus_generate();
    return c;
}

// A freshly written corpus folder (each test gets its own).
fs::path written(const std::string& name) {
    fs::path dir = temp_root() / name;
    corpus_write(corpus(), dir);
    return dir;
}

GuardedReader all_reader(const fs::path& dir) {
    return GuardedReader("report", corpus_read_roots(dir, CorpusAccess::all));
}

void expect_audit_fails(const Corpus& bad, const std::string& fragment) {
    std::string e = message_of([&] { corpus_audit(bad); });
    EXPECT_NE(e.find(fragment), std::string::npos) << "expected '" << fragment << "', got '" << e << "'";
}

class Environment : public ::testing::Environment {
public:
    void TearDown() override { fs::remove_all(temp_root()); }
};
[[maybe_unused]] auto* env = ::testing::AddGlobalTestEnvironment(new Environment);

}  // namespace

TEST(Corpus, SpecCountsInTheAudit) {
    ordered_json a = corpus_audit(corpus());
    EXPECT_EQ(a["dataset"], "OfficeHelpPrefs-v1");
    EXPECT_EQ(a["study_revision"], "r001");
    EXPECT_EQ(a["seed"], 49);
    EXPECT_EQ(a["human_feedback"], false);
    EXPECT_EQ(a["families"], 240);
    EXPECT_EQ(a["pairs"], 1200);
    EXPECT_EQ(a["pairs_by_split"]["train"], 840);
    EXPECT_EQ(a["pairs_by_split"]["validation"], 180);
    EXPECT_EQ(a["pairs_by_split"]["test"], 180);
    EXPECT_EQ(a["families_by_split"]["train"], 168);
    EXPECT_EQ(a["families_by_split"]["validation"], 36);
    EXPECT_EQ(a["families_by_split"]["test"], 36);
    EXPECT_EQ(a["warmstart_demonstrations"], 168);
    EXPECT_EQ(a["rollout_prompts"], 672);
    EXPECT_EQ(a["distinct_pair_demo_rollout_prompts"], 2040);
    EXPECT_EQ(a["probe_rows"], 80);
    EXPECT_EQ(a["unique_probe_contexts"], 20);
    EXPECT_EQ(a["actor_evaluation_rows_per_policy"], 260);
    EXPECT_EQ(a["actor_unique_contexts_per_policy"], 200);
    EXPECT_EQ(a["chosen_pass_rubric"], 1200);
    EXPECT_EQ(a["rejected_fail_rubric"], 1200);
    EXPECT_EQ(a["probe_labels_agree_with_rubric"], 80);
    EXPECT_EQ(a["prompts_hashed"], 2120);
}

TEST(Corpus, RecordsFollowTheSpecFormulas) {
    const Corpus& c = corpus();
    ASSERT_EQ(c.pairs.size(), 1200u);
    // Independent restatement of SPEC §1's variant table.
    const int table[5][6] = {{1, 1, 0, 0, 2, 0},
                             {1, 0, 0, 0, 1, 1},
                             {1, 1, 1, 0, 0, 0},
                             {1, 1, 0, 1, 2, 1},
                             {1, 0, 1, 0, 1, 0}};  // chosen(correct?,caution,polite) rejected(...)
    for (const auto& p : c.pairs) {
        const int index = std::stoi(p.family.substr(2));
        const int a = index / 40, wrong = (a + 1 + index % 5) % 6;
        const int* t = table[p.variant];
        EXPECT_EQ(p.expected_action, a);
        EXPECT_EQ(p.id, p.family + "-P" + std::to_string(p.variant));
        EXPECT_EQ(p.chosen, response_text(t[0] ? a : wrong, t[1], t[2])) << p.id;
        EXPECT_EQ(p.rejected, response_text(t[3] ? a : wrong, t[4], t[5])) << p.id;
    }
    EXPECT_EQ(c.pairs[0].prompt,
              "Help request OH000, note 0. Source: preference card. The office printer shows a paused print queue. "
              "Give one relevant next step without claiming a guaranteed fix.");
    EXPECT_EQ(c.pairs[1].prompt.rfind("Case OH000, message 1. Source: preference card. ", 0), 0u);
    EXPECT_EQ(c.pairs[2].prompt.rfind("Desk incident OH000, record 2. Source: preference card. ", 0), 0u);
    EXPECT_EQ(c.pairs[239 * 5 + 4].prompt,
              "Case OH239, message 4. Source: preference card. The web portal says the login session has expired. "
              "Give one relevant next step without claiming a guaranteed fix.");
    for (const auto& d : c.demonstrations) {
        const int index = std::stoi(d.family.substr(2));
        EXPECT_EQ(d.response, response_text(index / 40, 1, index % 2 == 0));
        EXPECT_EQ(d.prompt.rfind("Case " + d.family + ", message 7. Source: demonstration. ", 0), 0u) << d.prompt;
    }
    std::set<int> variants;
    for (const auto& r : c.rollouts) variants.insert(r.variant);
    EXPECT_EQ(variants, (std::set<int>{11, 12, 13, 14}));
    EXPECT_EQ(c.rollouts[0].prompt.rfind(
                  "Desk incident " + c.rollouts[0].family + ", record 11. Source: live rollout request. ", 0),
              0u);
    EXPECT_EQ(c.rollouts[1].prompt.rfind("Help request " + c.rollouts[1].family + ", note 12. ", 0), 0u);
    ASSERT_EQ(c.probes.size(), 80u);
    EXPECT_EQ(c.probes[4 * 7].prompt,
              "New remote support context PROBE07. The desk monitor stays dark after the desk was moved. A previous "
              "unrelated case was closed. Give one relevant next step without claiming a guaranteed fix.");
    EXPECT_EQ(c.probes[4 * 7 + 3].id, "PROBE07-C0-P1");
    EXPECT_EQ(c.probes[4 * 7 + 3].candidate_response, response_text(2, 1, true));
}

TEST(Corpus, AuditRefusesBrokenCorpora) {
    {
        Corpus bad = corpus();
        std::swap(bad.pairs[3].chosen, bad.pairs[3].rejected);
        expect_audit_fails(bad, "chosen response");
    }
    {
        Corpus bad = corpus();
        bad.pairs[3].rejected = bad.pairs[3].chosen;
        expect_audit_fails(bad, "passes the rubric");
    }
    {
        Corpus bad = corpus();  // probes leaked into train
        DemonstrationRecord d{"PROBE00-SFT", "PROBE00", 0, bad.probes[0].prompt, response_text(0, 1, false)};
        bad.demonstrations.push_back(d);
        expect_audit_fails(bad, "not from a train family");
    }
    {
        Corpus bad = corpus();
        bad.pairs[10].split = bad.pairs[10].split == "train" ? "test" : "train";
        expect_audit_fails(bad, "split");
    }
    {
        Corpus bad = corpus();
        bad.rollouts[5].prompt = bad.demonstrations[0].prompt;
        expect_audit_fails(bad, "prompt does not match");
    }
    {
        Corpus bad = corpus();
        bad.pairs.pop_back();
        expect_audit_fails(bad, "pairs");
    }
    {
        Corpus bad = corpus();
        bad.probes[1].candidate_polite = !bad.probes[1].candidate_polite;
        expect_audit_fails(bad, "disagree with the rubric");
    }
    {
        Corpus bad = corpus();
        bad.probes.push_back(bad.probes[0]);
        expect_audit_fails(bad, "duplicate id");
    }
    {
        Corpus bad = corpus();
        bad.demonstrations[0].response = "Resume the print queue. This will definitely fix it.";
        expect_audit_fails(bad, "fails the rubric");
    }
}

TEST(Corpus, LayoutSeparatesLearnEvalGold) {
    fs::path dir = written("layout");
    std::set<std::string> files;
    for (auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files.insert(fs::relative(e.path(), dir).generic_string());
    std::set<std::string> want(corpus_file_names().begin(), corpus_file_names().end());
    want.insert("manifest.json");
    EXPECT_EQ(files, want);
    for (const std::string name :
         {"learn/demonstrations.jsonl", "learn/train_pairs.jsonl", "learn/validation_pairs.jsonl",
          "learn/rollout_prompts.jsonl", "eval/test_prompts.jsonl", "eval/probe_prompts.jsonl", "manifest.json"}) {
        std::string text = read_file(dir / name);
        EXPECT_EQ(text.find("expected_action"), std::string::npos) << name;
        EXPECT_EQ(text.find("candidate"), std::string::npos) << name;
        EXPECT_EQ(text.find("\"split\""), std::string::npos) << name;
    }
    for (const std::string name : {"eval/test_prompts.jsonl", "eval/probe_prompts.jsonl"}) {
        std::string text = read_file(dir / name);
        EXPECT_EQ(text.find("chosen"), std::string::npos) << name;
        EXPECT_EQ(text.find("response"), std::string::npos) << name;
    }
    // No test or probe prompt anywhere under learn/.
    std::string learn;
    for (auto& e : fs::directory_iterator(dir / "learn")) learn += read_file(e.path());
    for (const auto& p : corpus().pairs) {
        if (p.split == "test") {
            EXPECT_EQ(learn.find(p.prompt), std::string::npos) << p.id;
        }
    }
    for (const auto& p : corpus().probes) EXPECT_EQ(learn.find(p.prompt), std::string::npos) << p.id;
    // Line counts per file.
    auto lines = [&](const std::string& name) {
        std::string t = read_file(dir / name);
        return std::count(t.begin(), t.end(), '\n');
    };
    EXPECT_EQ(lines("learn/demonstrations.jsonl"), 168);
    EXPECT_EQ(lines("learn/train_pairs.jsonl"), 840);
    EXPECT_EQ(lines("learn/validation_pairs.jsonl"), 180);
    EXPECT_EQ(lines("learn/rollout_prompts.jsonl"), 672);
    EXPECT_EQ(lines("eval/test_prompts.jsonl"), 180);
    EXPECT_EQ(lines("eval/probe_prompts.jsonl"), 80);
    EXPECT_EQ(lines("gold/test_pairs.jsonl"), 180);
    EXPECT_EQ(lines("gold/labels.jsonl"), 1200 + 168 + 672 + 80);
}

TEST(Corpus, ManifestHoldsAuditAndEveryHash) {
    fs::path dir = written("manifest");
    json m = read_json_file(dir / "manifest.json");
    EXPECT_EQ(m["audit"], json::parse(corpus_audit(corpus()).dump()));
    for (const auto& name : corpus_file_names()) {
        EXPECT_EQ(m["files"][name]["sha256"], sha256_file(dir / name)) << name;
        EXPECT_EQ(m["files"][name]["bytes"], fs::file_size(dir / name)) << name;
    }
    EXPECT_EQ(m["prompt_sha256"].size(), 2120u);
    EXPECT_EQ(m["prompt_sha256"]["OH002-P0"], sha256_hex(corpus().pairs[10].prompt));
    EXPECT_EQ(m["prompt_sha256"]["PROBE19-C1-P1"], sha256_hex(corpus().probes[77].prompt));
    Manifest parsed = verify_corpus(all_reader(dir), dir);
    EXPECT_EQ(parsed.config.seed, 49);
    EXPECT_EQ(parsed.files.size(), corpus_file_names().size());
}

TEST(Corpus, SecondWriteIsByteIdentical) {
    fs::path a = written("same_a");
    fs::path b = temp_root() / "same_b";
    corpus_write(corpus_generate(), b);  // a fresh generation, not the cached one
    for (const auto& name : corpus_file_names()) EXPECT_EQ(read_file(a / name), read_file(b / name)) << name;
    EXPECT_EQ(read_file(a / "manifest.json"), read_file(b / "manifest.json"));
    CorpusConfig other;
    other.seed = 50;
    fs::path c = temp_root() / "seed50";
    corpus_write(corpus_generate(other), c);
    EXPECT_NE(read_file(a / "learn/train_pairs.jsonl"), read_file(c / "learn/train_pairs.jsonl"));
    EXPECT_EQ(read_json_file(c / "manifest.json")["seed"], 50);
}

TEST(Corpus, ExistingFolderIsRefusedAndNothingWritten) {
    fs::path dir = temp_root() / "existing";
    fs::create_directories(dir);
    write_file_atomic(dir / "keep.txt", "mine");
    std::string e = message_of([&] { corpus_write(corpus(), dir); });
    EXPECT_NE(e.find("refusing to overwrite existing corpus folder"), std::string::npos) << e;
    EXPECT_EQ(read_file(dir / "keep.txt"), "mine");
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
    // A broken corpus (audit failure) leaves no folder and no partial sibling.
    Corpus bad = corpus();
    bad.pairs[0].rejected = bad.pairs[0].chosen;
    fs::path target = temp_root() / "broken";
    EXPECT_THROW(corpus_write(bad, target), Error);
    EXPECT_FALSE(fs::exists(target));
    for (auto& entry : fs::directory_iterator(temp_root()))
        EXPECT_EQ(entry.path().filename().string().find(".partial"), std::string::npos) << entry.path();
}

TEST(Corpus, LoadersReadWhatEachStageMay) {
    fs::path dir = written("loaders");
    GuardedReader learn("sft", corpus_read_roots(dir, CorpusAccess::learn));
    auto demos = load_demonstrations(learn, dir);
    ASSERT_EQ(demos.size(), 168u);
    EXPECT_EQ(demos[0].prompt, corpus().demonstrations[0].prompt);
    EXPECT_EQ(demos[0].response, corpus().demonstrations[0].response);
    EXPECT_EQ(load_pairs(learn, dir, PairSplit::train).size(), 840u);
    EXPECT_EQ(load_pairs(learn, dir, PairSplit::validation).size(), 180u);
    EXPECT_EQ(load_rollout_prompts(learn, dir).size(), 672u);
    EXPECT_THROW(load_pairs(learn, dir, PairSplit::test), Error);
    EXPECT_THROW(load_gold(learn, dir), Error);
    EXPECT_THROW(load_eval_prompts(learn, dir, EvalPopulation::test), Error);
    std::string e = message_of([&] { load_gold(learn, dir); });
    EXPECT_NE(e.find("leak guard: stage 'sft'"), std::string::npos) << e;

    GuardedReader gen("evaluate", corpus_read_roots(dir, CorpusAccess::eval));
    auto test = load_eval_prompts(gen, dir, EvalPopulation::test);
    auto probes = load_eval_prompts(gen, dir, EvalPopulation::probe);
    EXPECT_EQ(test.size(), 180u);
    EXPECT_EQ(probes.size(), 80u);
    EXPECT_THROW(load_gold(gen, dir), Error);
    EXPECT_THROW(load_demonstrations(gen, dir), Error);

    GuardedReader all = all_reader(dir);
    GoldLabels gold = load_gold(all, dir);
    EXPECT_EQ(gold.rows.size(), 2120u);
    EXPECT_EQ(gold.at(test[0].id).population, "pair");
    EXPECT_EQ(gold.at(test[0].id).split, "test");
    EXPECT_EQ(gold.at("PROBE03-C0-P1").candidate_polite, true);
    EXPECT_EQ(gold.at("PROBE03-C0-P1").candidate_correct, false);
    EXPECT_EQ(gold.at("PROBE03-C0-P1").expected_action, 3);
    EXPECT_EQ(gold.at(load_rollout_prompts(all, dir)[0].id).population, "rollout");
    EXPECT_THROW(gold.at("nope"), Error);
    EXPECT_EQ(load_pairs(all, dir, PairSplit::test).size(), 180u);
    // The whole corpus reads back equal to what was generated.
    Corpus back = corpus_load(all, dir);
    ASSERT_EQ(back.pairs.size(), corpus().pairs.size());
    for (size_t i = 0; i < back.pairs.size(); ++i) {
        EXPECT_EQ(back.pairs[i].id, corpus().pairs[i].id);
        EXPECT_EQ(back.pairs[i].split, corpus().pairs[i].split);
        EXPECT_EQ(back.pairs[i].variant, corpus().pairs[i].variant);
        EXPECT_EQ(back.pairs[i].expected_action, corpus().pairs[i].expected_action);
        EXPECT_EQ(back.pairs[i].chosen, corpus().pairs[i].chosen);
    }
    EXPECT_EQ(corpus_audit(back).dump(), corpus_audit(corpus()).dump());
}

TEST(Corpus, ChangedOrCorruptFilesAreDetected) {
    {
        fs::path dir = written("changed");
        std::string t = read_file(dir / "learn/train_pairs.jsonl");
        t[t.find("This may help.")] = 't';
        write_file_atomic(dir / "learn/train_pairs.jsonl", t, Overwrite::replace);
        GuardedReader learn("sft", corpus_read_roots(dir, CorpusAccess::learn));
        std::string e = message_of([&] { load_pairs(learn, dir, PairSplit::train); });
        EXPECT_NE(e.find("train_pairs.jsonl: sha256"), std::string::npos) << e;
        EXPECT_NE(e.find("changed after prepare"), std::string::npos) << e;
        EXPECT_THROW(verify_corpus(all_reader(dir), dir), Error);
    }
    {
        fs::path dir = written("corrupt_manifest");
        std::string m = read_file(dir / "manifest.json");
        write_file_atomic(dir / "manifest.json", m.substr(0, m.size() / 2), Overwrite::replace);
        std::string e = message_of([&] { verify_corpus(all_reader(dir), dir); });
        EXPECT_NE(e.find("manifest.json: not valid JSON"), std::string::npos) << e;
        GuardedReader learn("sft", corpus_read_roots(dir, CorpusAccess::learn));
        EXPECT_THROW(load_demonstrations(learn, dir), Error);
    }
    {
        fs::path dir = written("manifest_fields");
        json m = read_json_file(dir / "manifest.json");
        m["files"].erase("gold/labels.jsonl");
        write_json_atomic(dir / "manifest.json", m, Overwrite::replace);
        std::string e = message_of([&] { verify_corpus(all_reader(dir), dir); });
        EXPECT_NE(e.find("missing field 'gold/labels.jsonl'"), std::string::npos) << e;
    }
    {
        fs::path dir = written("manifest_audit");
        json m = read_json_file(dir / "manifest.json");
        m["audit"]["pairs"] = 1201;
        write_json_atomic(dir / "manifest.json", m, Overwrite::replace);
        std::string e = message_of([&] { verify_corpus(all_reader(dir), dir); });
        EXPECT_NE(e.find("the audit does not match"), std::string::npos) << e;
    }
    {
        fs::path dir = written("manifest_prompt");
        json m = read_json_file(dir / "manifest.json");
        m["prompt_sha256"]["OH000-P0"] = std::string(64, 'a');
        write_json_atomic(dir / "manifest.json", m, Overwrite::replace);
        EXPECT_THROW(verify_corpus(all_reader(dir), dir), Error);
    }
    {
        fs::path dir = written("extra_file");
        write_file_atomic(dir / "learn/probes.jsonl", read_file(dir / "eval/probe_prompts.jsonl"));
        std::string e = message_of([&] { verify_corpus(all_reader(dir), dir); });
        EXPECT_NE(e.find("'learn/probes.jsonl' is not listed"), std::string::npos) << e;
    }
    {
        fs::path dir = written("symlink");
        fs::create_symlink(dir / "gold/labels.jsonl", dir / "learn/labels.jsonl");
        std::string e = message_of([&] { verify_corpus(all_reader(dir), dir); });
        EXPECT_NE(e.find("symlink"), std::string::npos) << e;
    }
    {
        // A consistent re-hash does not hide a label change: gold and learn disagree.
        fs::path dir = written("rehash");
        std::string t = read_file(dir / "gold/labels.jsonl");
        size_t pos = t.find("\"expected_action\":0");
        t.replace(pos, 19, "\"expected_action\":1");
        write_file_atomic(dir / "gold/labels.jsonl", t, Overwrite::replace);
        json m = read_json_file(dir / "manifest.json");
        m["files"]["gold/labels.jsonl"] = {{"sha256", sha256_hex(t)}, {"bytes", t.size()}};
        write_json_atomic(dir / "manifest.json", m, Overwrite::replace);
        EXPECT_THROW(verify_corpus(all_reader(dir), dir), Error);
    }
}

// Digits in ids and family names are tested byte by byte as ASCII: a non-ASCII
// byte (a negative char) where a digit belongs gets the clear error, never
// std::isdigit's undefined behaviour.
TEST(Corpus, NonAsciiBytesAreNeverDigits) {
    for (int b = 0; b < 256; ++b) {
        const std::string one(1, static_cast<char>(b));
        EXPECT_EQ(corpus_detail::is_ascii_digits(one), b >= '0' && b <= '9') << "byte " << b;
    }
    EXPECT_FALSE(corpus_detail::is_ascii_digits(""));
    EXPECT_TRUE(corpus_detail::is_ascii_digits("0123456789"));
    EXPECT_FALSE(corpus_detail::is_ascii_digits("12\xB3"));  // superscript three in Latin-1

    Corpus bad = corpus();
    bad.pairs[0].family =
        "OH\xC3\xA9"
        "0";  // "OHé0": five bytes, two of them not digits
    expect_audit_fails(bad,
                       "has family 'OH\xC3\xA9"
                       "0'; expected OH<3 digits>");

    // corpus_load: the variant of a pair id whose suffix is 'é' (the files
    // re-hashed in the manifest, so only the id itself is wrong).
    fs::path dir = written("non_ascii_id");
    std::string pairs = read_file(dir / "learn/train_pairs.jsonl");
    const std::string id = json::parse(pairs.substr(0, pairs.find('\n')))["id"].get<std::string>();
    const std::string bad_id = id.substr(0, id.rfind("-P") + 2) + "\xC3\xA9";
    json m = read_json_file(dir / "manifest.json");
    for (const char* name : {"learn/train_pairs.jsonl", "gold/labels.jsonl"}) {
        std::string t = read_file(dir / name);
        const size_t pos = t.find("\"" + id + "\"");
        ASSERT_NE(pos, std::string::npos) << name;
        t.replace(pos + 1, id.size(), bad_id);
        write_file_atomic(dir / name, t, Overwrite::replace);
        m["files"][name] = {{"sha256", sha256_hex(t)}, {"bytes", t.size()}};
    }
    write_json_atomic(dir / "manifest.json", m, Overwrite::replace);
    std::string e = message_of([&] { corpus_load(all_reader(dir), dir); });
    EXPECT_NE(e.find("train_pairs.jsonl: id '" + bad_id + "' must end with '-P<n>'"), std::string::npos) << e;
}

TEST(Corpus, JsonlParsersNameFileLineAndField) {
    const std::string good = R"({"id":"a","family":"f","prompt":"p","prompt_sha256":")" + sha256_hex("p") + "\"}\n";
    EXPECT_EQ(parse_prompts(good, "x.jsonl").size(), 1u);
    auto err = [](auto fn) {
        try {
            fn();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(err([&] { parse_prompts(good + good, "x.jsonl"); }).find("x.jsonl:2: duplicate id 'a'"),
              std::string::npos);
    EXPECT_NE(err([&] { parse_prompts(good.substr(0, good.size() - 1), "x.jsonl"); }).find("newline"),
              std::string::npos);
    EXPECT_NE(err([&] { parse_prompts(good + "\n", "x.jsonl"); }).find("x.jsonl:2: blank line"), std::string::npos);
    EXPECT_NE(err([&] { parse_prompts("[1]\n", "x.jsonl"); }).find("x.jsonl:1: expected a JSON object"),
              std::string::npos);
    EXPECT_NE(err([&] { parse_prompts("{\"id\":\n", "x.jsonl"); }).find("x.jsonl:1: not valid JSON"),
              std::string::npos);
    std::string extra = good;
    extra.insert(1, "\"expected_action\":1,");
    EXPECT_NE(err([&] { parse_prompts(extra, "x.jsonl"); }).find("unexpected field 'expected_action'"),
              std::string::npos);
    std::string badsha = R"({"id":"a","family":"f","prompt":"q","prompt_sha256":")" + sha256_hex("p") + "\"}\n";
    EXPECT_NE(err([&] { parse_prompts(badsha, "x.jsonl"); }).find("x.jsonl:1: field 'prompt_sha256'"),
              std::string::npos);
    std::string missing = R"({"id":"a","prompt":"p","prompt_sha256":")" + sha256_hex("p") + "\"}\n";
    EXPECT_NE(err([&] { parse_prompts(missing, "x.jsonl"); }).find("missing field 'family'"), std::string::npos);
    EXPECT_NE(err([&] {
                  parse_gold(R"({"id":"a","population":"pair","split":"train","family":"f",)"
                             R"("expected_action":9,"chosen":"c","rejected":"r"})"
                             "\n",
                             "g.jsonl");
              }).find("g.jsonl:1: field 'expected_action' must be in [0, 5], got 9"),
              std::string::npos);
    EXPECT_NE(err([&] {
                  parse_gold(R"({"id":"a","population":"rollout","split":"test","family":"f","expected_action":1})"
                             "\n",
                             "g.jsonl");
              }).find("not valid for population"),
              std::string::npos);
    EXPECT_NE(err([&] { manifest_parse("{}", "m.json"); }).find("m.json: missing field"), std::string::npos);
    EXPECT_THROW(manifest_parse("", "m.json"), Error);
    EXPECT_THROW(manifest_parse("[]", "m.json"), Error);
}

TEST(Corpus, EveryNumberIsAConfigValue) {
    CorpusConfig c;
    c.families_per_action = 5;
    c.train_per_action = 3;
    c.validation_per_action = 1;
    c.rollouts_per_family = 2;
    c.probe_contexts = 3;
    c.dataset = "OfficeHelpPrefs-small";
    Corpus small = corpus_generate(c);
    ordered_json a = corpus_audit(small);
    EXPECT_EQ(a["families"], 30);
    EXPECT_EQ(a["pairs_by_split"]["train"], 18 * 5);
    EXPECT_EQ(a["pairs_by_split"]["validation"], 6 * 5);
    EXPECT_EQ(a["pairs_by_split"]["test"], 6 * 5);
    EXPECT_EQ(a["rollout_prompts"], 36);
    EXPECT_EQ(a["probe_rows"], 12);
    EXPECT_EQ(a["dataset"], "OfficeHelpPrefs-small");
    fs::path dir = temp_root() / "small";
    corpus_write(small, dir);
    Manifest m = verify_corpus(all_reader(dir), dir);
    EXPECT_EQ(m.config.families_per_action, 5);
    EXPECT_EQ(m.config.dataset, "OfficeHelpPrefs-small");
    c.train_per_action = 6;  // more than the families of an action
    json bad = json::parse(corpus_config_to_json(c).dump());
    EXPECT_THROW(corpus_config_from_json(bad, "config"), Error);
}

// The voting page shows a prompt's situation first and its case reference
// small: the two parts put back together are the prompt, for every heading.
TEST(Corpus, PromptPartsSplitTheReferenceFromTheSituation) {
    for (int variant = 0; variant < 3; ++variant) {
        const std::string prompt = corpus_prompt("OH116", 2, "email", variant);
        const PromptParts p = corpus_prompt_parts(prompt);
        EXPECT_EQ(p.reference + " " + p.situation, prompt);
        EXPECT_NE(p.reference.find("OH116"), std::string::npos) << p.reference;
        EXPECT_EQ(p.reference.substr(p.reference.size() - 14), "Source: email.") << p.reference;
        EXPECT_EQ(p.situation.rfind(action_context(2), 0), 0u) << p.situation;
    }
    EXPECT_EQ(corpus_prompt_parts(corpus_prompt("OH001", 0, "chat", 0)).reference,
              "Help request OH001, note 0. Source: chat.");
    // Any other shape: all situation.
    for (const std::string other : {"My printer is offline.", "Case closed. Source: none", "Source: x. y",
                                    "Case OH1. Note. Source: chat. Help.", ""}) {
        const PromptParts p = corpus_prompt_parts(other);
        EXPECT_EQ(p.reference, "") << other;
        EXPECT_EQ(p.situation, other);
    }
}
