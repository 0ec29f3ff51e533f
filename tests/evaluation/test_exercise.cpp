// The exercise's pure parts: the probe-square table on a hand example, and
// the sha256 proof that no artefact changed (a changed, removed or added
// artefact is detected; files outside the main artefacts are not).
#include <gtest/gtest.h>

#include <unistd.h>
#include <fstream>

#include "evaluation/exercise.h"
#include "util/error.h"

using namespace ppolab;

namespace {

std::vector<ProbeCandidate> square(const std::string& family, double cp, double cq, double wp, double wq) {
    // (correct, polite) cells with scores: correct-plain cp, correct-polite cq, wrong-plain wp, wrong-polite wq
    return {{family + "-C1-P0", family, "prompt " + family, "a", true, false, cp},
            {family + "-C1-P1", family, "prompt " + family, "b", true, true, cq},
            {family + "-C0-P0", family, "prompt " + family, "c", false, false, wp},
            {family + "-C0-P1", family, "prompt " + family, "d", false, true, wq}};
}

void write(const fs::path& p, const std::string& bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
}

}  // namespace

TEST(Exercise, ProbeTableOnAHandExample) {
    std::vector<ProbeCandidate> c = square("PROBE00", 1.0, 1.5, -1.0, 2.0);  // wrong-polite 2.0 > correct-plain 1.0
    for (const ProbeCandidate& x : square("PROBE01", 3.0, 2.0, 0.0, 0.5)) c.push_back(x);  // 0.5 < 3.0
    const json t = probe_exercise_table(c);
    EXPECT_EQ(t["contexts"], 2);
    EXPECT_EQ(t["candidates"], 8);
    EXPECT_EQ(t["wrong_polite_outranks_correct_plain_contexts"], 1);
    EXPECT_EQ(t["correct_politeness_delta_positive_contexts"], 1);
    EXPECT_EQ(t["incorrect_politeness_delta_positive_contexts"], 2);
    EXPECT_DOUBLE_EQ(t["mean_correct_politeness_delta"].get<double>(), (0.5 + -1.0) / 2);
    EXPECT_DOUBLE_EQ(t["mean_incorrect_politeness_delta"].get<double>(), (3.0 + 0.5) / 2);
    const json& p0 = t["per_context"][0];
    EXPECT_EQ(p0["context"], "PROBE00");
    EXPECT_DOUBLE_EQ(p0["correct_politeness_delta"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(p0["incorrect_politeness_delta"].get<double>(), 3.0);
    EXPECT_EQ(p0["wrong_polite_outranks_correct_plain"], true);
    EXPECT_EQ(t["per_context"][1]["wrong_polite_outranks_correct_plain"], false);
    EXPECT_EQ(p0["candidate_ids"]["wrong_polite"], "PROBE00-C0-P1");
    // a tie does not outrank
    const json tie = probe_exercise_table(square("PROBE02", 1.0, 1.0, 0.0, 1.0));
    EXPECT_EQ(tie["wrong_polite_outranks_correct_plain_contexts"], 0);
}

TEST(Exercise, ProbeTableRefusesIncompleteSquares) {
    std::vector<ProbeCandidate> c = square("PROBE00", 1, 2, 3, 4);
    c.pop_back();
    EXPECT_THROW(probe_exercise_table(c), Error);
    c = square("PROBE00", 1, 2, 3, 4);
    c[3].polite = false;  // two wrong-plain cells
    EXPECT_THROW(probe_exercise_table(c), Error);
    c = square("PROBE00", 1, 2, 3, 4);
    c[2].prompt = "another prompt";
    EXPECT_THROW(probe_exercise_table(c), Error);
}

TEST(Exercise, ChangedArtefactIsDetected) {
    const fs::path root = fs::temp_directory_path() / ("ppolab_test_exercise_" + std::to_string(::getpid()));
    fs::remove_all(root);
    RunLayout run{root};
    write(run.config(), "{}");
    write(run.corpus() / "manifest.json", "{\"m\":1}");
    write(run.corpus() / "gold" / "labels.jsonl", "x");  // covered by the manifest's hashes, not hashed here
    write(run.base() / "model.safetensors", "base");
    write(run.final_dir("reward") / "learned.safetensors", "judge");
    write(run.final_dir("reward") / "peft" / "adapter_model.safetensors", "judge-peft");
    write(run.final_dir("sft") / "learned.safetensors", "sft");
    write(run.final_dir("ppo") / "actor" / "learned.safetensors", "actor");
    write(run.report("reward", "continuous"), "{\"r\":1}");
    write(run.stage("ppo") / "continuous.state.gz", "state");  // not a main artefact
    write(run.stage("ppo") / "rollouts" / "a.json", "{}");     // not a main artefact
    write(run.eval() / "metrics.json", "{}");

    const ArtefactHashes before = main_artefact_hashes(run);
    EXPECT_EQ(before.size(), 9u);
    EXPECT_TRUE(before.count("reward/final/learned.safetensors"));
    EXPECT_TRUE(before.count("reward/final/peft/adapter_model.safetensors"));
    EXPECT_TRUE(before.count("ppo/final/actor/learned.safetensors"));
    EXPECT_TRUE(before.count("reward/continuous.json"));
    EXPECT_TRUE(before.count("eval/metrics.json"));
    EXPECT_TRUE(before.count("corpus/manifest.json"));
    EXPECT_FALSE(before.count("ppo/continuous.state.gz"));
    EXPECT_TRUE(artefact_changes(before, main_artefact_hashes(run)).empty());
    EXPECT_NO_THROW(require_unchanged(before, main_artefact_hashes(run), "exercise"));

    // one byte of the judge changed: named, with both hashes
    write(run.final_dir("reward") / "learned.safetensors", "judgf");
    std::vector<std::string> changes = artefact_changes(before, main_artefact_hashes(run));
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].rfind(
                  "reward/final/learned.safetensors: changed (" + before.at("reward/final/learned.safetensors"), 0),
              0u)
        << changes[0];
    try {
        require_unchanged(before, main_artefact_hashes(run), "exercise");
        FAIL() << "a changed judge was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("reward/final/learned.safetensors"), std::string::npos) << e.what();
    }
    write(run.final_dir("reward") / "learned.safetensors", "judge");
    EXPECT_TRUE(artefact_changes(before, main_artefact_hashes(run)).empty());

    // removed and added artefacts; non-artefacts ignored
    fs::remove(run.report("reward", "continuous"));
    write(run.eval() / "ppo-scored.json", "{}");
    write(run.stage("ppo") / "rollouts" / "a.json", "{\"changed\":1}");
    changes = artefact_changes(before, main_artefact_hashes(run));
    ASSERT_EQ(changes.size(), 2u);
    EXPECT_EQ(changes[0], "eval/ppo-scored.json: added");
    EXPECT_EQ(changes[1], "reward/continuous.json: removed");
    fs::remove_all(root);
}
