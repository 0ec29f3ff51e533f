// Crash-safe checkpoints (training/crash_checkpoints.h, util/fileio.h): a killed
// write's temporary is recognised and removed, the previous checkpoint stays
// intact when a write fails (hook, non-finite tensor), a checkpoint of
// another run is refused naming the field, non-finite values are named, the
// test hook parses strictly, the checkpoint keys stay out of the config
// hash, and a packed batcher restored from its position continues exactly.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>

#include "support/test_support.h"
#include "training/crash_checkpoints.h"
#include "training/fault_hooks.h"
#include "training/pretrain.h"
#include "training/stage_lifecycle.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/sha256.h"

using ppolab::test::message_of;
using namespace ppolab;

namespace {

fs::path fresh_dir(const std::string& name) {
    fs::path d = fs::temp_directory_path() / ("ppolab_test_checkpoints_" + std::to_string(::getpid())) / name;
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

ResumeState toy_state(float value) {
    ResumeState st;
    st.identity = {{"stage", "toy"}, {"config", {{"lr", 0.5}}}};
    st.learned["actor"] = {NamedTensor{"w", {2, 2}, {value, 2.f, 3.f, 4.f}}};
    AdamWState opt;
    opt.step = 3;
    opt.exp_avg = {NamedTensor{"w", {2, 2}, {0.1f, 0.2f, 0.3f, 0.4f}}};
    opt.exp_avg_sq = {NamedTensor{"w", {2, 2}, {0.01f, 0.02f, 0.03f, 0.04f}}};
    st.optimizers["adamw"] = opt;
    st.rngs["sampler"] = Philox(7, 1);
    st.extra = {{"updates", 3}, {"epoch_order", {2, 0, 1}}, {"epoch_position", 1}};
    return st;
}

}  // namespace

TEST(AtomicTemporary, NamesOfKilledWritesOnly) {
    EXPECT_TRUE(is_atomic_temporary(".continuous.state.gz.tmp1807413393"));
    EXPECT_TRUE(is_atomic_temporary(".x.tmp0"));
    EXPECT_FALSE(is_atomic_temporary("continuous.state.gz"));
    EXPECT_FALSE(is_atomic_temporary(".continuous.state.gz"));
    EXPECT_FALSE(is_atomic_temporary(".a.tmp"));
    EXPECT_FALSE(is_atomic_temporary(".a.tmp12x"));
    EXPECT_FALSE(is_atomic_temporary("a.tmp12"));

    const fs::path d = fresh_dir("temporaries");
    write_file_atomic(d / "keep.json", "{}");
    write_file_atomic(d / ".keep.json.tmp42", "half");
    write_file_atomic(d / ".other.tmp7", "half");
    EXPECT_EQ(remove_atomic_temporaries(d), 2);
    EXPECT_TRUE(fs::exists(d / "keep.json"));
    EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
    EXPECT_EQ(remove_atomic_temporaries(d / "missing"), 0);
}

TEST(AtomicWrite, AFailureBeforeTheRenameLeavesThePreviousFileAndNoTemporary) {
    const fs::path d = fresh_dir("hook");
    const fs::path f = d / "latest.bin";
    write_file_atomic(f, "old");
    fs::path seen;
    const std::string msg = message_of([&] {
        write_file_atomic(f, {std::string_view("new")}, Overwrite::replace, [&](const fs::path& tmp) {
            seen = tmp;
            EXPECT_EQ(read_file(tmp), "new");  // complete and flushed before the rename
            fail("interrupted");
        });
    });
    EXPECT_EQ(msg, "interrupted");
    EXPECT_TRUE(is_atomic_temporary(seen.filename().string())) << seen;
    EXPECT_FALSE(fs::exists(seen));
    EXPECT_EQ(read_file(f), "old");
}

TEST(Checkpoint, WriteLoadAndRefuseAnotherRun) {
    const fs::path d = fresh_dir("load");
    const fs::path ck = checkpoint_path(d / "sft", "continuous");
    EXPECT_EQ(ck, d / "sft" / "checkpoints" / "continuous.state.gz");
    const ResumeState st = toy_state(1.f);
    EXPECT_FALSE(load_checkpoint(ck, st.identity, "sft continuous").has_value());
    write_checkpoint(ck, st, "sft update 3");
    // A killed write's temporary beside it is cleaned up on load.
    write_file_atomic(ck.parent_path() / ".continuous.state.gz.tmp99", "partial");
    std::optional<ResumeState> back = load_checkpoint(ck, st.identity, "sft continuous");
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(states_first_difference(*back, st), "");
    EXPECT_FALSE(fs::exists(ck.parent_path() / ".continuous.state.gz.tmp99"));

    json other = st.identity;
    other["config"]["lr"] = 0.25;
    const std::string msg = message_of([&] { load_checkpoint(ck, other, "sft continuous"); });
    EXPECT_NE(msg.find(ck.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("identity.config.lr: 0.5 vs 0.25"), std::string::npos) << msg;
    EXPECT_NE(msg.find("remove it to start the stage over"), std::string::npos) << msg;

    remove_checkpoint(ck);
    EXPECT_FALSE(fs::exists(ck.parent_path()));  // the empty checkpoints/ folder goes too
}

TEST(Checkpoint, NonFiniteTensorsAreNotCheckpointedAndThePreviousOneStays) {
    const fs::path d = fresh_dir("nonfinite");
    const fs::path ck = checkpoint_path(d / "ppo", "resume");
    write_checkpoint(ck, toy_state(1.f), "ppo iteration 4");
    const std::string before = sha256_file(ck);
    const std::string msg = message_of(
        [&] { write_checkpoint(ck, toy_state(std::numeric_limits<float>::quiet_NaN()), "ppo iteration 5"); });
    EXPECT_NE(msg.find("ppo iteration 5 learned 'actor': tensor 'w' is not finite (nan at element 0 of shape [2, 2])"),
              std::string::npos)
        << msg;
    EXPECT_EQ(sha256_file(ck), before);
    EXPECT_EQ(std::distance(fs::directory_iterator(ck.parent_path()), fs::directory_iterator()), 1);
    ResumeState moments = toy_state(1.f);
    moments.optimizers["adamw"].exp_avg_sq[0].values[3] = std::numeric_limits<float>::infinity();
    EXPECT_NE(message_of([&] { write_checkpoint(ck, moments, "x"); }).find("optimiser 'adamw' exp_avg_sq: tensor 'w'"),
              std::string::npos);
    EXPECT_EQ(sha256_file(ck), before);
}

TEST(Checkpoint, DueAtMultiplesOnly) {
    EXPECT_FALSE(checkpoint_due(0, 10));
    EXPECT_FALSE(checkpoint_due(5, 0));
    EXPECT_FALSE(checkpoint_due(5, 4));
    EXPECT_TRUE(checkpoint_due(5, 5));
    EXPECT_TRUE(checkpoint_due(5, 10));
    EXPECT_TRUE(checkpoint_due(1, 3));
}

TEST(NonFinite, ErrorsNameWhereAndWhat) {
    const std::vector<float> v = {1.f, 2.f, std::numeric_limits<float>::infinity()};
    EXPECT_EQ(message_of([&] { check_finite(v, "ppo iteration 3 rollout iteration-003-slot-1", "critic value"); }),
              "ppo iteration 3 rollout iteration-003-slot-1: critic value is not finite (inf at index 2 of 3)");
    const std::vector<double> a = {0.5, std::nan("")};
    EXPECT_NE(message_of([&] {
                  check_finite(a, "ppo iteration 1", "advantage");
              }).find("advantage is not finite (nan at index 1"),
              std::string::npos);
    EXPECT_EQ(message_of([&] { check_finite(std::nan(""), "sft update 9", "loss"); }),
              "sft update 9: loss is not finite (nan)");
    EXPECT_EQ(message_of([&] { check_finite(v.data() == nullptr ? 0.0 : 1.0, "x", "y"); }), "");
}

TEST(FaultHooks, NonFiniteHookParsesStrictly) {
    ::unsetenv("PPOLAB_TEST_NONFINITE");
    EXPECT_FALSE(FaultHooks::from_environment().nonfinite("sft", "loss", 1));
    ::setenv("PPOLAB_TEST_NONFINITE", "ppo.score@3", 1);
    const FaultHooks hooks = FaultHooks::from_environment();
    EXPECT_TRUE(hooks.nonfinite("ppo", "score", 3));
    EXPECT_FALSE(hooks.nonfinite("ppo", "score", 2));
    EXPECT_FALSE(hooks.nonfinite("ppo", "value", 3));
    EXPECT_FALSE(hooks.nonfinite("sft", "score", 3));
    auto parse_error = [] { return message_of([] { FaultHooks::from_environment(); }); };
    ::setenv("PPOLAB_TEST_NONFINITE", "ppo.scores@3", 1);
    EXPECT_NE(parse_error().find("unknown quantity 'ppo.scores'"), std::string::npos);
    ::setenv("PPOLAB_TEST_NONFINITE", "ppo.score", 1);
    EXPECT_NE(parse_error().find("<stage>.<quantity>@<n>"), std::string::npos);
    ::setenv("PPOLAB_TEST_NONFINITE", "ppo.score@0", 1);
    EXPECT_NE(parse_error().find("n >= 1"), std::string::npos);
    ::unsetenv("PPOLAB_TEST_NONFINITE");
    // Read once: a stage's hooks do not follow later changes of the environment.
    EXPECT_TRUE(hooks.nonfinite("ppo", "score", 3));
}

TEST(FaultHooks, KillInCheckpointCountsTheStagesWrites) {
    ::unsetenv("PPOLAB_TEST_KILL_IN_CHECKPOINT");
    EXPECT_FALSE(FaultHooks::from_environment().kill_in_checkpoint(1));
    ::setenv("PPOLAB_TEST_KILL_IN_CHECKPOINT", "2", 1);
    const FaultHooks hooks = FaultHooks::from_environment();
    EXPECT_FALSE(hooks.kill_in_checkpoint(1));
    EXPECT_TRUE(hooks.kill_in_checkpoint(2));
    EXPECT_FALSE(hooks.kill_in_checkpoint(3));
    for (const char* bad : {"0", "x", "2x", "-1"}) {
        ::setenv("PPOLAB_TEST_KILL_IN_CHECKPOINT", bad, 1);
        EXPECT_NE(message_of([] {
                      FaultHooks::from_environment();
                  }).find("PPOLAB_TEST_KILL_IN_CHECKPOINT must be a checkpoint number >= 1"),
                  std::string::npos)
            << bad;
    }
    ::unsetenv("PPOLAB_TEST_KILL_IN_CHECKPOINT");
    // A CheckpointFile counts its own writes; without the hook every write completes.
    const fs::path dir = fs::temp_directory_path() / ("ppolab_fault_hooks_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    const FaultHooks none;
    CheckpointFile file(dir / "checkpoints" / "continuous.state.gz", none);
    const ResumeState st = toy_state(1.f);
    file.save(st, "test update 1");
    file.save(st, "test update 2");
    EXPECT_EQ(file.written(), 2);
    EXPECT_TRUE(fs::exists(file.path()));
    file.remove();
    EXPECT_FALSE(fs::exists(file.path().parent_path()));
    fs::remove_all(dir);
}

TEST(CheckpointConfig, FrequenciesAreNotPartOfTheConfigIdentity) {
    const json a = effective_config("tiny", {}, {});
    const json b = effective_config("tiny", {}, {"checkpoint.every_updates=3", "checkpoint.every_iterations=0"});
    const json c = effective_config("tiny", {}, {"sft.lr=0.003"});
    EXPECT_EQ(config_sha256(a), config_sha256(b));
    EXPECT_NE(config_sha256(a), config_sha256(c));
    for (const char* preset : {"tiny", "seed", "generic"})
        for (const char* k : {"checkpoint.every_updates", "checkpoint.pretrain_every_updates",
                              "checkpoint.every_iterations", "checkpoint.every_rows"})
            EXPECT_GE(config_int(preset_config(preset), k), 1) << preset << " " << k;
    EXPECT_NE(message_of([] {
                  effective_config("tiny", {}, {"checkpoint.every_updates=-1"});
              }).find("'checkpoint.every_updates' must be >= 0, got -1"),
              std::string::npos);
}

TEST(PackedBatcherPosition, RestoredBatcherContinuesExactly) {
    // 37 examples of 5..40 tokens into rows of 64: several rows per epoch, several epochs.
    std::vector<PretrainExample> examples;
    for (int i = 0; i < 37; ++i) {
        PretrainExample e;
        const int n = 5 + (i * 7) % 36;
        for (int k = 0; k < n; ++k) {
            e.tokens.push_back(3 + (i + k) % 50);
            e.loss.push_back(k > 0);
        }
        examples.push_back(e);
    }
    for (int stop : {0, 1, 3, 7, 12}) {
        PackedBatcher a(examples, 4, 64, 0, Philox(5, 1));
        for (int i = 0; i < stop; ++i) a.next();
        const PackedBatcher::Position at = a.position();
        PackedBatcher b(examples, 4, 64, 0, Philox(999, 9));  // another RNG: restore replaces it
        b.restore(at, "test");
        for (int i = 0; i < 10; ++i) {
            const PackedBatch x = a.next(), y = b.next();
            ASSERT_EQ(x.tokens, y.tokens) << "stop " << stop << " batch " << i;
            ASSERT_EQ(x.mask, y.mask);
            ASSERT_EQ(x.target, y.target);
            ASSERT_EQ(a.epoch(), b.epoch());
        }
    }
    PackedBatcher a(examples, 4, 64, 0, Philox(5, 1));
    a.next();
    PackedBatcher::Position bad = a.position();
    bad.cursor = 1000;
    EXPECT_NE(message_of([&] {
                  PackedBatcher(examples, 4, 64, 0, Philox(5, 1)).restore(bad, "ck.gz");
              }).find("ck.gz: batcher cursor 1000 is outside"),
              std::string::npos);
}
