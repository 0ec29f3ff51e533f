// `ppolab prepare` end to end through the real binary ($PPOLAB_BINARY):
// the audit in manifest.json, byte-identical reruns, refusals that write
// nothing, and --verify on corrupt corpora.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "util/fileio.h"
#include "util/json.h"

using namespace ppolab;

namespace {

struct Result {
    int rc;
    std::string out;  // stdout and stderr
};

Result run(const std::string& args) {
    const char* bin = std::getenv("PPOLAB_BINARY");
    if (!bin) ADD_FAILURE() << "PPOLAB_BINARY is not set (run through ctest)";
    std::string cmd = std::string(bin ? bin : "ppolab") + " " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return {-1, "popen failed"};
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

fs::path temp_root() {
    static fs::path root = [] {
        fs::path p = fs::temp_directory_path() / ("ppolab_test_prepare_cli_" + std::to_string(::getpid()));
        fs::remove_all(p);
        fs::create_directories(p);
        return p;
    }();
    return root;
}

std::map<std::string, std::string> tree(const fs::path& dir) {
    std::map<std::string, std::string> files;
    for (auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files[fs::relative(e.path(), dir).generic_string()] = read_file(e.path());
    return files;
}

class Environment : public ::testing::Environment {
public:
    void TearDown() override { fs::remove_all(temp_root()); }
};
[[maybe_unused]] auto* env = ::testing::AddGlobalTestEnvironment(new Environment);

}  // namespace

TEST(PrepareCli, WritesTheAuditedCorpusIdenticallyTwice) {
    const fs::path a = temp_root() / "a", b = temp_root() / "b";
    Result r = run("prepare --out " + a.string());
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("pairs 1200: train 840 / validation 180 / test 180 (families 168 / 36 / 36"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("no human feedback"), std::string::npos) << r.out;
    json m = read_json_file(a / "manifest.json");
    const json& audit = m.at("audit");
    EXPECT_EQ(audit.at("pairs_by_split"), json({{"train", 840}, {"validation", 180}, {"test", 180}}));
    EXPECT_EQ(audit.at("families_by_split"), json({{"train", 168}, {"validation", 36}, {"test", 36}}));
    EXPECT_EQ(audit.at("warmstart_demonstrations"), 168);
    EXPECT_EQ(audit.at("rollout_prompts"), 672);
    EXPECT_EQ(audit.at("distinct_pair_demo_rollout_prompts"), 2040);
    EXPECT_EQ(audit.at("probe_rows"), 80);
    EXPECT_EQ(audit.at("unique_probe_contexts"), 20);
    EXPECT_EQ(audit.at("families_disjoint"), true);
    EXPECT_EQ(audit.at("seed"), 49);
    EXPECT_EQ(m.at("files").size(), 8u);
    EXPECT_EQ(m.at("prompt_sha256").size(), 2120u);
    ASSERT_EQ(run("prepare --out " + b.string() + " --seed 49").rc, 0);
    auto ta = tree(a), tb = tree(b);
    EXPECT_EQ(ta.size(), 9u);
    EXPECT_TRUE(ta == tb) << "a second run with the same seed differs";
    Result v = run("prepare --verify " + a.string());
    EXPECT_EQ(v.rc, 0) << v.out;
    EXPECT_NE(v.out.find("verified: 8 files"), std::string::npos) << v.out;
}

TEST(PrepareCli, RunFolderSeedAndConfig) {
    const fs::path runf = temp_root() / "run";
    Result r = run("prepare --run " + runf.string() + " --seed 50");
    ASSERT_EQ(r.rc, 0) << r.out;
    json m = read_json_file(runf / "corpus/manifest.json");
    EXPECT_EQ(m.at("seed"), 50);
    EXPECT_EQ(m.at("audit").at("pairs_by_split").at("test"), 180);
    // The corpus identity comes from the study config.
    const fs::path c = temp_root() / "config";
    r = run("prepare --out " + c.string() + " --preset seed --set corpus.seed=51 --set corpus.study_revision=r002");
    ASSERT_EQ(r.rc, 0) << r.out;
    m = read_json_file(c / "manifest.json");
    EXPECT_EQ(m.at("seed"), 51);
    EXPECT_EQ(m.at("study_revision"), "r002");
    EXPECT_EQ(m.at("dataset"), "OfficeHelpPrefs-v1");
    // With neither --out nor --run, the corpus goes to runs/default/corpus (here under a scratch cwd).
    const fs::path scratch = temp_root() / "cwd";
    fs::create_directories(scratch);
    const fs::path cwd = fs::current_path();
    fs::current_path(scratch);
    r = run("prepare");
    fs::current_path(cwd);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(fs::exists(scratch / "runs/default/corpus/manifest.json"));
}

TEST(PrepareCli, BadInputsFailClearlyAndWriteNothing) {
    const fs::path existing = temp_root() / "existing";
    fs::create_directories(existing);
    Result r = run("prepare --out " + existing.string());
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("refusing to overwrite existing corpus folder"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::is_empty(existing));

    r = run("prepare --out " + (temp_root() / "w").string() + " --run " + (temp_root() / "v").string());
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("either --out DIR or --run RUN"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(temp_root() / "w"));
    EXPECT_FALSE(fs::exists(temp_root() / "v"));
    r = run("prepare --out " + (temp_root() / "z").string() + " --set corpus.seed=oops");
    EXPECT_NE(r.rc, 0) << r.out;
    EXPECT_FALSE(fs::exists(temp_root() / "z"));
    r = run("prepare --out " + (temp_root() / "x").string() + " --seed abc");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("--seed expects an integer"), std::string::npos) << r.out;
    r = run("prepare --out " + (temp_root() / "y").string() + " --bogus 1");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.out.find("unknown option --bogus"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(temp_root() / "x"));
    EXPECT_FALSE(fs::exists(temp_root() / "y"));

    // A corrupt manifest: --verify names it and changes nothing.
    const fs::path c = temp_root() / "corrupt";
    ASSERT_EQ(run("prepare --out " + c.string()).rc, 0);
    std::string m = read_file(c / "manifest.json");
    write_file_atomic(c / "manifest.json", m.substr(0, 1000), Overwrite::replace);
    auto before = tree(c);
    r = run("prepare --verify " + c.string());
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("manifest.json: not valid JSON"), std::string::npos) << r.out;
    EXPECT_TRUE(tree(c) == before);
    // A changed corpus file.
    write_file_atomic(c / "manifest.json", m, Overwrite::replace);
    std::string t = read_file(c / "eval/test_prompts.jsonl");
    write_file_atomic(c / "eval/test_prompts.jsonl", t + t.substr(0, t.find('\n') + 1), Overwrite::replace);
    r = run("prepare --verify " + c.string());
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("test_prompts.jsonl: sha256"), std::string::npos) << r.out;
    r = run("prepare --verify " + (temp_root() / "absent").string());
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("is not a corpus folder"), std::string::npos) << r.out;
    // Nothing stray was left next to the outputs.
    for (auto& e : fs::directory_iterator(temp_root()))
        EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
}
