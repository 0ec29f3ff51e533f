// SPEC §7 leak guards: every refusal of the guarded opener.
#include <gtest/gtest.h>
#include <unistd.h>

#include "data/guarded_fs.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/fileio.h"

using ppolab::test::message_of;
using namespace ppolab;

namespace {
struct Tree {
    fs::path root;
    Tree() {
        root = fs::temp_directory_path() / ("ppolab_test_guard_" + std::to_string(::getpid()));
        fs::remove_all(root);
        fs::create_directories(root / "corpus/learn");
        fs::create_directories(root / "corpus/eval");
        fs::create_directories(root / "corpus/gold");
        fs::create_directories(root / "corpus/learnfoo");
        write_file_atomic(root / "corpus/learn/pairs.jsonl", "pairs\n");
        write_file_atomic(root / "corpus/eval/test.jsonl", "test\n");
        write_file_atomic(root / "corpus/gold/labels.jsonl", "labels\n");
        write_file_atomic(root / "corpus/learnfoo/x", "sibling with a common prefix\n");
        write_file_atomic(root / "corpus/manifest.json", "{}\n");
    }
    ~Tree() { fs::remove_all(root); }
};

}  // namespace

TEST(GuardedReader, ReadsInsideItsRoots) {
    Tree t;
    GuardedReader sft("sft", corpus_read_roots(t.root / "corpus", CorpusAccess::learn));
    EXPECT_EQ(sft.read(t.root / "corpus/learn/pairs.jsonl"), "pairs\n");
    EXPECT_EQ(sft.read(t.root / "corpus/manifest.json"), "{}\n");
    EXPECT_TRUE(sft.exists(t.root / "corpus/learn/pairs.jsonl"));
    EXPECT_FALSE(sft.exists(t.root / "corpus/learn/absent.jsonl"));
    EXPECT_EQ(sft.stage(), "sft");
    GuardedReader report("report", corpus_read_roots(t.root / "corpus", CorpusAccess::all));
    EXPECT_EQ(report.read(t.root / "corpus/gold/labels.jsonl"), "labels\n");
}

TEST(GuardedReader, RefusesGoldAndEvalToLearningStages) {
    Tree t;
    GuardedReader sft("sft", corpus_read_roots(t.root / "corpus", CorpusAccess::learn));
    std::string e = message_of([&] { sft.read(t.root / "corpus/gold/labels.jsonl"); });
    EXPECT_NE(e.find("stage 'sft'"), std::string::npos) << e;
    EXPECT_NE(e.find("gold/labels.jsonl"), std::string::npos) << e;
    EXPECT_NE(e.find("corpus/learn"), std::string::npos) << e;  // names the roots
    EXPECT_THROW(sft.read(t.root / "corpus/eval/test.jsonl"), Error);
    EXPECT_THROW(sft.exists(t.root / "corpus/gold/labels.jsonl"), Error);
    EXPECT_FALSE(sft.allows(t.root / "corpus/gold/labels.jsonl"));
    // A sibling folder sharing the root's prefix is outside it.
    EXPECT_THROW(sft.read(t.root / "corpus/learnfoo/x"), Error);
    // The corpus folder itself is not a root of a learning stage.
    EXPECT_THROW(sft.read(t.root / "corpus/eval/../gold/labels.jsonl"), Error);
    GuardedReader gen("evaluate", corpus_read_roots(t.root / "corpus", CorpusAccess::eval));
    EXPECT_EQ(gen.read(t.root / "corpus/eval/test.jsonl"), "test\n");
    EXPECT_THROW(gen.read(t.root / "corpus/learn/pairs.jsonl"), Error);
    EXPECT_THROW(gen.read(t.root / "corpus/gold/labels.jsonl"), Error);
}

TEST(GuardedReader, RefusesDotDotTricks) {
    Tree t;
    GuardedReader sft("ppo", corpus_read_roots(t.root / "corpus", CorpusAccess::learn));
    EXPECT_THROW(sft.read(t.root / "corpus/learn/../gold/labels.jsonl"), Error);
    EXPECT_THROW(sft.read(t.root / "corpus/learn/../../corpus/gold/labels.jsonl"), Error);
    EXPECT_THROW(sft.read(t.root / "corpus/learn/nonexistent/../../gold/labels.jsonl"), Error);
    // A relative path with .. from the working directory.
    fs::path cwd = fs::current_path();
    fs::current_path(t.root / "corpus/learn");
    std::string e = message_of([&] { sft.read("../gold/labels.jsonl"); });
    EXPECT_EQ(sft.read("pairs.jsonl"), "pairs\n");
    fs::current_path(cwd);
    EXPECT_NE(e.find("stage 'ppo'"), std::string::npos) << e;
    EXPECT_NE(e.find("resolves to"), std::string::npos) << e;
    // .. that stays inside is fine.
    EXPECT_EQ(sft.read(t.root / "corpus/learn/../learn/pairs.jsonl"), "pairs\n");
}

TEST(GuardedReader, RefusesSymlinksOutOfItsRoots) {
    Tree t;
    fs::create_symlink(t.root / "corpus/gold/labels.jsonl", t.root / "corpus/learn/labels.jsonl");
    fs::create_directory_symlink(t.root / "corpus/gold", t.root / "corpus/learn/g");
    fs::create_symlink("../gold/labels.jsonl", t.root / "corpus/learn/relative.jsonl");
    GuardedReader sft("reward", corpus_read_roots(t.root / "corpus", CorpusAccess::learn));
    std::string e = message_of([&] { sft.read(t.root / "corpus/learn/labels.jsonl"); });
    EXPECT_NE(e.find("stage 'reward'"), std::string::npos) << e;
    EXPECT_NE(e.find("gold"), std::string::npos) << e;
    EXPECT_THROW(sft.read(t.root / "corpus/learn/g/labels.jsonl"), Error);
    EXPECT_THROW(sft.read(t.root / "corpus/learn/relative.jsonl"), Error);
    EXPECT_THROW(sft.exists(t.root / "corpus/learn/g/labels.jsonl"), Error);
    // A symlink inside the roots pointing inside the roots is fine.
    fs::create_symlink(t.root / "corpus/learn/pairs.jsonl", t.root / "corpus/learn/alias.jsonl");
    EXPECT_EQ(sft.read(t.root / "corpus/learn/alias.jsonl"), "pairs\n");
}

TEST(GuardedReader, CheckpointRootsAndErrors) {
    Tree t;
    auto roots = corpus_read_roots(t.root / "corpus", CorpusAccess::learn);
    roots.push_back(t.root / "checkpoints/sft");  // created later
    GuardedReader sft("sft", roots);
    write_file_atomic(t.root / "checkpoints/sft/state.json", "{}");
    EXPECT_EQ(sft.read(t.root / "checkpoints/sft/state.json"), "{}");
    EXPECT_THROW(sft.read(t.root / "checkpoints/reward/state.json"), Error);
    EXPECT_THROW(sft.read(t.root / "corpus/learn"), Error);                // a folder
    EXPECT_THROW(sft.read(t.root / "corpus/learn/missing.jsonl"), Error);  // missing, inside
    EXPECT_THROW(GuardedReader("x", {fs::path()}), Error);
    GuardedReader none("nothing", {});
    EXPECT_THROW(none.read(t.root / "corpus/learn/pairs.jsonl"), Error);
}
