// Generation never reads labels: the prompts of the held-out evaluation come
// through the generation step's guarded reader (corpus eval/ + manifest),
// carry no label, and a label file made reachable from eval/ (a symlink into
// gold/) or named directly is refused.
#include <gtest/gtest.h>

#include <fstream>

#include <unistd.h>

#include "data/corpus.h"
#include "evaluation/evaluate.h"
#include "util/error.h"

using namespace ppolab;

namespace {

struct Fixture {
    fs::path root;
    RunLayout run;
    Fixture() {
        root = fs::temp_directory_path() / ("ppolab_test_eval_guard_" + std::to_string(::getpid()));
        fs::remove_all(root);
        fs::create_directories(root);
        run.root = root;
        corpus_write(corpus_generate(), run.corpus());
    }
    ~Fixture() { fs::remove_all(root); }
    // The corpus part of the generation step's roots (Study::open adds the
    // model and the policy folders, never gold/).
    GuardedReader generation_reader(EvalSet set) const {
        return GuardedReader(
            "evaluate-generate",
            corpus_read_roots(run.corpus(), set == EvalSet::validation ? CorpusAccess::learn : CorpusAccess::eval));
    }
};

}  // namespace

TEST(EvalGuard, GenerationPromptsCarryNoLabels) {
    Fixture f;
    EXPECT_EQ(evaluation_generation_scope(EvalSet::held_out), StageScope::eval);
    EXPECT_EQ(evaluation_generation_scope(EvalSet::validation), StageScope::learn);
    const std::vector<EvalRow> rows =
        evaluation_prompts(f.generation_reader(EvalSet::held_out), f.run.corpus(), EvalSet::held_out);
    ASSERT_EQ(rows.size(), 260u);
    std::vector<const EvalRow*> all, probes;
    for (const EvalRow& r : rows) {
        all.push_back(&r);
        if (r.population == "probe") probes.push_back(&r);
        EXPECT_EQ(r.expected_action, -1) << r.id;
        EXPECT_FALSE(r.verdict.has_value()) << r.id;
    }
    EXPECT_EQ(rows_of(rows, "test").size(), 180u);
    EXPECT_EQ(probes.size(), 80u);
    EXPECT_EQ(unique_contexts(probes).size(), 20u);
    EXPECT_EQ(unique_contexts(all).size(), 200u);
    const std::vector<EvalRow> validation =
        evaluation_prompts(f.generation_reader(EvalSet::validation), f.run.corpus(), EvalSet::validation);
    EXPECT_EQ(validation.size(), 180u);
    // validation prompts live in learn/: the held-out generation may not read them
    EXPECT_THROW(evaluation_prompts(f.generation_reader(EvalSet::held_out), f.run.corpus(), EvalSet::validation),
                 Error);
}

TEST(EvalGuard, LabelFileReachableByGenerationIsRefused) {
    Fixture f;
    const GuardedReader reader = f.generation_reader(EvalSet::held_out);
    const fs::path labels = f.run.corpus() / "gold" / "labels.jsonl";
    // named directly
    EXPECT_THROW(reader.read(labels), Error);
    // through eval/: the test prompts replaced by a symlink to the labels
    const fs::path test_prompts = f.run.corpus() / "eval" / "test_prompts.jsonl";
    fs::remove(test_prompts);
    fs::create_symlink(fs::path("..") / "gold" / "labels.jsonl", test_prompts);
    try {
        evaluation_prompts(reader, f.run.corpus(), EvalSet::held_out);
        FAIL() << "generation read a label file through a symlink in eval/";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("labels.jsonl"), std::string::npos) << msg;
        EXPECT_NE(msg.find("evaluate-generate"), std::string::npos) << msg;
    }
    // the whole eval/ folder swapped for a symlink to gold/
    fs::remove_all(f.run.corpus() / "eval");
    fs::create_directory_symlink("gold", f.run.corpus() / "eval");
    EXPECT_FALSE(reader.allows(f.run.corpus() / "eval" / "labels.jsonl"));
    EXPECT_THROW(evaluation_prompts(reader, f.run.corpus(), EvalSet::held_out), Error);
    // scoring (the whole run) may read the labels
    const GuardedReader scoring("evaluate-score", corpus_read_roots(f.run.corpus(), CorpusAccess::all));
    EXPECT_NO_THROW(load_gold(scoring, f.run.corpus()));
}

// The validation prompts evaluate the base and every trained policy the run
// has (the settings sweep scores PPO there); the held-out set SFT and PPO.
TEST(EvalGuard, ValidationEvaluatesEveryTrainedPolicy) {
    const fs::path root = fs::temp_directory_path() / ("ppolab_test_eval_policies_" + std::to_string(::getpid()));
    fs::remove_all(root);
    RunLayout run;
    run.root = root;
    using V = std::vector<std::string>;
    EXPECT_EQ(evaluation_policies(run, EvalSet::validation), V({"base"}));
    EXPECT_EQ(evaluation_policies(run, EvalSet::held_out), V({"sft", "ppo"}));
    auto touch = [](const fs::path& p) {
        fs::create_directories(p.parent_path());
        std::ofstream(p) << "x";
    };
    touch(run.final_dir("sft") / "learned.safetensors");
    EXPECT_EQ(evaluation_policies(run, EvalSet::validation), V({"base", "sft"}));
    touch(run.final_dir("ppo") / "actor" / "learned.safetensors");
    EXPECT_EQ(evaluation_policies(run, EvalSet::validation), V({"base", "sft", "ppo"}));
    EXPECT_EQ(evaluation_policies(run, EvalSet::held_out), V({"sft", "ppo"}));
    fs::remove_all(root);
}
