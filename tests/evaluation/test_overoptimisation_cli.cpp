// Smoke: PPO snapshots and `ppolab overoptimisation` end to end on a micro
// run (prepare; pretrain, SFT and judge with one or two updates; PPO of 3
// iterations with a snapshot every iteration, responses capped at 8 tokens).
//   * snapshots: iteration-0001 and -0002 (never the last, which is
//     final/actor), listed in the report; none in interrupt/resume modes;
//     final actor and critic tensors the same as a run without snapshots;
//     a run killed inside its 2nd checkpoint write and rerun ends with the
//     same snapshot files (a half-written one removed);
//   * the command: 4 points (0 = SFT, KL exactly 0), per-sequence KL ≥ 0,
//     proxy, gold and the rubric fields, best-of-n per prompt; the same bytes
//     in another folder; a label file reachable by sampling refused before
//     anything is written; a missing snapshot named; an unfinished PPO refused;
//     no overwrite.
#include <gtest/gtest.h>

#include <unistd.h>
#include <string>

#include "support/test_support.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/sha256.h"

using ppolab::test::Output;
using ppolab::test::run_shell;
using namespace ppolab;

namespace {

const std::string kPpo =
    " --set limits.max_response=8 --set ppo.iterations=3 --set ppo.interrupt_iteration=1"
    " --set checkpoint.every_iterations=1";
const std::string kOverOpt =
    " --set limits.max_response=8 --set evaluation.snapshot_samples=1"
    " --set evaluation.best_of_n=2";

struct Micro {
    fs::path root;
    std::string bin;
    Output run(const std::string& verb, const fs::path& run_dir, const std::string& rest,
               const std::string& env = "") const {
        return run_shell(env + "'" + bin + "' " + verb + " --run '" + run_dir.string() + "'" + rest);
    }
};

std::string tree_digest(const fs::path& dir) {
    std::string all;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file())
            all += e.path().lexically_relative(dir).generic_string() + " " + sha256_file(e.path()) + "\n";
    return all;
}

}  // namespace

TEST(CmdOverOptimisation, SnapshotsAndMicroRunEndToEnd) {
    ::setenv("PPOLAB_QUIET", "1", 1);
    Micro m{fs::temp_directory_path() / ("ppolab_test_overopt_" + std::to_string(::getpid())),
            ppolab::test::ppolab_binary()};
    fs::remove_all(m.root);
    fs::create_directories(m.root);
    const fs::path a = m.root / "a";
    for (const std::string& step : ppolab::test::micro_judge_run_steps()) {
        const std::string verb = step.substr(0, step.find(' '));
        Output o = m.run(verb, a, step.substr(verb.size()));
        ASSERT_EQ(o.rc, 0) << step << "\n" << o.out;
    }
    const fs::path no_snap = m.root / "no-snap", modes = m.root / "modes", crash = m.root / "crash";
    for (const fs::path& p : {no_snap, modes, crash}) fs::copy(a, p, fs::copy_options::recursive);

    // An unfinished PPO is refused before anything is sampled.
    Output early = m.run("overoptimisation", a, kOverOpt);
    EXPECT_NE(early.rc, 0);
    EXPECT_NE(early.out.find("PPO has not finished"), std::string::npos) << early.out;

    // 1. snapshots at iterations 1 and 2, not 3 (= final/actor)
    Output ppo = m.run("ppo", a, kPpo + " --set ppo.snapshot_every=1");
    ASSERT_EQ(ppo.rc, 0) << ppo.out;
    const fs::path snaps = a / "ppo" / "snapshots";
    EXPECT_TRUE(fs::exists(snaps / "iteration-0001" / "learned.safetensors"));
    EXPECT_TRUE(fs::exists(snaps / "iteration-0002" / "peft" / "adapter_model.safetensors"));
    EXPECT_FALSE(fs::exists(snaps / "iteration-0003"));
    EXPECT_FALSE(fs::exists(snaps / "iteration-0000"));
    const json report = read_json_file(a / "ppo" / "continuous.json");
    EXPECT_EQ(report.at("snapshots").at("iterations"), json::array({1, 2}));
    EXPECT_NE(tree_digest(snaps / "iteration-0001"), tree_digest(snaps / "iteration-0002"));

    // ... changing no number: the same final tensors without snapshots
    Output plain = m.run("ppo", no_snap, kPpo + " --set ppo.snapshot_every=0");
    ASSERT_EQ(plain.rc, 0) << plain.out;
    EXPECT_FALSE(fs::exists(no_snap / "ppo" / "snapshots"));
    const json plain_report = read_json_file(no_snap / "ppo" / "continuous.json");
    EXPECT_EQ(plain_report.at("final_learned"), report.at("final_learned"));
    EXPECT_EQ(plain_report.at("history"), report.at("history"));

    // ... and none in interrupt or resume mode
    for (const char* mode : {"interrupt", "resume"}) {
        Output o = m.run("ppo", modes, kPpo + " --set ppo.snapshot_every=1 --mode " + std::string(mode));
        ASSERT_EQ(o.rc, 0) << mode << "\n" << o.out;
        EXPECT_FALSE(fs::exists(modes / "ppo" / "snapshots")) << mode;
    }

    // ... and a crash: killed in the 2nd checkpoint write (after snapshot 2),
    // rerun from checkpoint 1: the same files, a half-written one removed.
    const std::string snap_set = kPpo + " --set ppo.snapshot_every=1";
    Output killed = m.run("ppo", crash, snap_set, "PPOLAB_TEST_KILL_IN_CHECKPOINT=2 ");
    EXPECT_NE(killed.rc, 0) << killed.out;
    ASSERT_TRUE(fs::exists(crash / "ppo" / "snapshots" / "iteration-0002"));
    fs::create_directories(crash / "ppo" / "snapshots" / ".iteration-0003.partial");
    Output again = m.run("ppo", crash, snap_set);
    ASSERT_EQ(again.rc, 0) << again.out;
    EXPECT_NE(again.out.find("continuing from checkpoint"), std::string::npos) << again.out;
    EXPECT_EQ(tree_digest(crash / "ppo" / "snapshots"), tree_digest(snaps));
    EXPECT_EQ(read_json_file(crash / "ppo" / "continuous.json").at("final_learned"), report.at("final_learned"));

    // 2. failure modes first (each refused before sampling, nothing written)
    const fs::path out = a / "eval" / "overoptimisation.json";
    const fs::path test_prompts = a / "corpus" / "eval" / "test_prompts.jsonl", saved = m.root / "tp.jsonl";
    fs::rename(test_prompts, saved);
    fs::create_symlink(fs::path("..") / "gold" / "labels.jsonl", test_prompts);
    Output leak = m.run("overoptimisation", a, kOverOpt);
    EXPECT_NE(leak.rc, 0) << leak.out;
    EXPECT_NE(leak.out.find("labels.jsonl"), std::string::npos) << leak.out;
    EXPECT_FALSE(fs::exists(out));
    fs::remove(test_prompts);
    fs::rename(saved, test_prompts);
    fs::rename(snaps / "iteration-0002", m.root / "moved");
    Output missing = m.run("overoptimisation", a, kOverOpt);
    EXPECT_NE(missing.rc, 0);
    EXPECT_NE(missing.out.find((snaps / "iteration-0002").string()), std::string::npos) << missing.out;
    EXPECT_FALSE(fs::exists(out));
    fs::rename(m.root / "moved", snaps / "iteration-0002");

    // 3. the command, here and in a copy elsewhere
    const fs::path copy = m.root / "elsewhere" / "a";
    fs::create_directories(copy.parent_path());
    fs::copy(a, copy, fs::copy_options::recursive);
    Output oo = m.run("overoptimisation", a, kOverOpt);
    ASSERT_EQ(oo.rc, 0) << oo.out;
    const json doc = read_json_file(out);
    EXPECT_EQ(doc.at("format"), "ppolab-overoptimisation");
    EXPECT_EQ(doc.at("samples_per_prompt"), 1);
    EXPECT_EQ(doc.at("best_of_n"), 2);
    ASSERT_EQ(doc.at("prompts").size(), 180u);
    const json& points = doc.at("snapshots");
    ASSERT_EQ(points.size(), 4u);
    const std::vector<std::string> policies = {"sft/final", "ppo/snapshots/iteration-0001",
                                               "ppo/snapshots/iteration-0002", "ppo/final/actor"};
    for (size_t i = 0; i < 4; ++i) {
        SCOPED_TRACE(i);
        const json& p = points[i];
        EXPECT_EQ(p.at("iteration"), static_cast<int64_t>(i));
        EXPECT_EQ(p.at("policy"), policies[i]);
        ASSERT_EQ(p.at("sequences").size(), 180u);
        double kl = 0, gold = 0;
        for (const json& s : p.at("sequences")) {
            EXPECT_LE(s.at("response_ids").size(), 8u);
            EXPECT_EQ(s.at("tokens"), s.at("response_ids").size());
            EXPECT_GE(s.at("kl_exact").get<double>(), 0.0);
            if (i == 0) {
                EXPECT_EQ(s.at("kl_exact").get<double>(), 0.0);
                EXPECT_EQ(s.at("kl_k1").get<double>(), 0.0);
            }
            EXPECT_TRUE(s.at("gold").is_boolean());
            EXPECT_TRUE(s.at("status") == "CERTIFIED" || s.at("status") == "UNCERTIFIED");
            EXPECT_TRUE(s.at("relevant").is_boolean() && s.at("polite").is_boolean());
            kl += s.at("kl_exact").get<double>();
            gold += s.at("gold").get<bool>();
        }
        EXPECT_NEAR(p.at("kl_exact").get<double>(), kl / 180, 1e-12);
        EXPECT_NEAR(p.at("gold").get<double>(), gold / 180, 1e-12);
        if (i == 3) {
            EXPECT_GT(p.at("kl_exact").get<double>(), 0.0);
        }
    }
    ASSERT_EQ(doc.at("best_of_n_samples").size(), 180u);
    for (const json& b : doc.at("best_of_n_samples")) {
        EXPECT_EQ(b.at("proxy").size(), 2u);
        EXPECT_EQ(b.at("gold").size(), 2u);
        EXPECT_EQ(b.at("text").size(), 2u);
    }
    // Sampling read no gold/: its reader's roots as recorded.
    for (const json& r : doc.at("identity").at("readable_roots"))
        EXPECT_EQ(r.get<std::string>().find("gold"), std::string::npos);
    const std::string text = read_file(out);
    EXPECT_EQ(text.find(m.root.string()), std::string::npos);
    EXPECT_EQ(text.find("seconds"), std::string::npos);
    EXPECT_TRUE(read_json_file(a / "eval" / "overoptimisation-timings.json").contains("best_of_n"));
    Output there = m.run("overoptimisation", copy, kOverOpt);
    ASSERT_EQ(there.rc, 0) << there.out;
    EXPECT_EQ(sha256_hex(text), sha256_file(copy / "eval" / "overoptimisation.json"));
    Output twice = m.run("overoptimisation", a, kOverOpt);
    EXPECT_NE(twice.rc, 0);
    EXPECT_NE(twice.out.find("refusing to overwrite"), std::string::npos) << twice.out;
    fs::remove_all(m.root);
}
