// Resume states: a toy training run interrupted, saved, loaded and resumed
// equals the continuous run bit for bit; damaged or mismatched files are
// refused with a clear error and leave the disk as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "model/safetensors.h"
#include "oracle_util.h"
#include "training/adamw.h"
#include "training/identity.h"
#include "training/schedule.h"
#include "training/state.h"
#include "util/error.h"
#include "util/gzip.h"
#include "util/sha256.h"
#include "support/test_support.h"

using ppolab::test::error_of;
using namespace ppolab;

namespace {

// A toy trainer with everything a real stage has: two roles with their own
// optimisers and schedules, a data order drawn from a Philox stream with a
// cursor, a noise stream, and a history.
struct ToyRun {
    static constexpr int64_t kItems = 5;  // "prompts"
    static constexpr int64_t kTotal = 12; // updates
    std::vector<float> w = std::vector<float>(12), b = std::vector<float>(4), v = std::vector<float>(5);  // (3,4) (4) (5)
    std::vector<float> gw = std::vector<float>(12), gb = std::vector<float>(4), gv = std::vector<float>(5);
    ParamList actor_params() { return {{"layer.w", {3, 4}, w.data(), gw.data()}, {"layer.b", {4}, b.data(), gb.data()}}; }
    ParamList critic_params() { return {{"head.weight", {1, 5}, v.data(), gv.data()}}; }
    AdamW actor{actor_params(), AdamWConfig{0.9, 0.999, 1e-8, 0.01}};
    AdamW critic{critic_params(), AdamWConfig{0.9, 0.999, 1e-8, 0.01}};
    Schedule actor_schedule{kTotal, 5e-2, 0.1, 0.1};
    Schedule critic_schedule{kTotal, 1e-1, 0.1, 0.1};
    Philox sampler{149, 0};
    Philox noise{249, 7};
    std::vector<int64_t> order;
    int64_t cursor = 0;
    int64_t updates = 0;
    json history = json::array();

    ToyRun() {
        Philox init(49, 3);
        for (float& x : w) x = static_cast<float>(init.normal());
        for (float& x : b) x = static_cast<float>(init.normal() * 0.1);
    }

    int64_t next_item() {
        if (cursor == static_cast<int64_t>(order.size())) {
            order = sampler.permutation(kItems);
            cursor = 0;
        }
        return order[static_cast<size_t>(cursor++)];
    }

    void step() {
        const int64_t item = next_item();
        // Gradient of 0.5·|p − target(item)|² plus noise: deterministic given the state.
        for (size_t i = 0; i < w.size(); ++i) gw[i] = w[i] - static_cast<float>(item) * 0.3f + static_cast<float>(noise.normal());
        for (size_t i = 0; i < b.size(); ++i) gb[i] = 4.0f * (b[i] + 1.0f) + static_cast<float>(noise.normal());
        for (size_t i = 0; i < v.size(); ++i) gv[i] = v[i] - static_cast<float>(i) + static_cast<float>(noise.uniform());
        const double actor_lr = actor_schedule.at(updates), critic_lr = critic_schedule.at(updates);
        const double na = clip_grad_norm(actor_params(), 1.0, "actor");
        const double nc = clip_grad_norm(critic_params(), 1.0, "critic");
        actor.step(actor_lr);
        critic.step(critic_lr);
        ++updates;
        history.push_back({{"update", updates}, {"item", item}, {"actor_lr", actor_lr}, {"actor_norm", na},
                           {"critic_norm", nc}, {"loss", 0.5 * na * na}});
    }

    void run_until(int64_t stop) {
        while (updates < stop) step();
    }

    ResumeState state() const {
        ResumeState s;
        s.identity = {{"stage", "toy"}, {"config_sha256", sha256_hex("toy config")}, {"base", "frozen-identity-x"}};
        ParamList a = const_cast<ToyRun*>(this)->actor_params(), c = const_cast<ToyRun*>(this)->critic_params();
        s.learned["actor"] = capture_params(a);
        s.learned["critic"] = capture_params(c);
        s.optimizers["actor"] = actor.state();
        s.optimizers["critic"] = critic.state();
        s.schedulers["actor"] = {actor_schedule, updates};
        s.schedulers["critic"] = {critic_schedule, updates};
        s.rngs.emplace("sampler", sampler);
        s.rngs.emplace("noise", noise);
        s.extra = {{"order", order}, {"cursor", cursor}, {"updates", updates}, {"history", history}};
        return s;
    }

    void restore(const ResumeState& s, const std::string& where) {
        restore_params(s.learned.at("actor"), actor_params(), where + " learned.actor");
        restore_params(s.learned.at("critic"), critic_params(), where + " learned.critic");
        actor.load_state(s.optimizers.at("actor"), where + " optimizer.actor");
        critic.load_state(s.optimizers.at("critic"), where + " optimizer.critic");
        if (!(s.schedulers.at("actor").schedule == actor_schedule)) fail(where, ": actor schedule differs");
        updates = s.schedulers.at("actor").next_step;
        sampler = s.rngs.at("sampler");
        noise = s.rngs.at("noise");
        order = s.extra.at("order").get<std::vector<int64_t>>();
        cursor = s.extra.at("cursor").get<int64_t>();
        history = s.extra.at("history");
    }
};


// Every file under dir with its sha256: "nothing on disk changed" is equality of two snapshots.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
    std::map<std::string, std::string> out;
    for (auto& e : fs::recursive_directory_iterator(dir))
        out[fs::relative(e.path(), dir).string()] = e.is_regular_file() ? sha256_file(e.path()) : "dir";
    return out;
}

// Rebuilds a state file's safetensors bytes with an edit applied to the
// metadata JSON and/or the tensor list (valid gzip, valid safetensors).
std::string rebuild(const std::string& gz, const std::function<void(json&)>& edit_meta,
                    const std::function<void(std::vector<TensorToWrite>&)>& edit_tensors = nullptr) {
    std::string raw = gzip_decompress(gz, "x");
    SafetensorsFile f = SafetensorsFile::from_bytes(raw, "x");
    json meta = json::parse(f.metadata().at("ppolab_resume_state"));
    if (edit_meta) edit_meta(meta);
    std::vector<TensorToWrite> ts;
    for (const SafetensorsTensor& t : f.tensors())
        ts.push_back({t.name, t.dtype, t.shape, std::string_view(reinterpret_cast<const char*>(t.data), t.size)});
    if (edit_tensors) edit_tensors(ts);
    return gzip_compress(serialize_safetensors(ts, {{"ppolab_resume_state", meta.dump()}}), 1);
}

}  // namespace

TEST(ResumeState, InterruptedAndResumedEqualsContinuousBitwise) {
    fs::path dir = test::fresh_temp_dir("state_resume");
    ToyRun continuous;
    continuous.run_until(ToyRun::kTotal);

    for (int64_t k : {1, 5, 7}) {  // interrupt inside the first permutation, at its end, and later
        ToyRun first;
        first.run_until(k);
        fs::path ckpt = dir / ("interrupt-" + std::to_string(k) + ".state.gz");
        StateFileInfo info = save_resume_state(ckpt, first.state());
        EXPECT_EQ(info.file_sha256, sha256_file(ckpt));
        EXPECT_LT(info.file_bytes, info.raw_bytes + 64);

        ToyRun resumed;  // a fresh process: different initial values, RNGs at 0
        json expected_identity = first.state().identity;
        resumed.restore(load_resume_state(ckpt, &expected_identity), ckpt.string());
        resumed.run_until(ToyRun::kTotal);

        EXPECT_EQ(states_first_difference(continuous.state(), resumed.state()), "") << "interrupt at " << k;
        EXPECT_TRUE(states_equal(continuous.state(), resumed.state()));
        EXPECT_EQ(state_content_sha256(continuous.state()), state_content_sha256(resumed.state()));
        // The files themselves are byte-identical (gzip level 1, mtime 0).
        fs::path a = dir / ("continuous-" + std::to_string(k) + ".gz"), b = dir / ("resumed-" + std::to_string(k) + ".gz");
        save_resume_state(a, continuous.state());
        save_resume_state(b, resumed.state());
        EXPECT_EQ(read_file(a), read_file(b));
        // Reloaded states equal the in-memory ones.
        EXPECT_EQ(states_first_difference(load_resume_state(a), continuous.state()), "");
    }
    fs::remove_all(dir);
}

TEST(ResumeState, TwoInterruptionsInARowStillEqualTheContinuousRun) {
    fs::path dir = test::fresh_temp_dir("state_twice");
    ToyRun continuous;
    continuous.run_until(ToyRun::kTotal);
    ToyRun first;
    first.run_until(3);
    save_resume_state(dir / "latest.gz", first.state());
    ToyRun second;
    second.restore(load_resume_state(dir / "latest.gz"), "latest.gz");
    second.run_until(8);
    save_resume_state(dir / "latest.gz", second.state(), Overwrite::replace);  // the "latest" slot
    ToyRun third;
    third.restore(load_resume_state(dir / "latest.gz"), "latest.gz");
    third.run_until(ToyRun::kTotal);
    EXPECT_EQ(states_first_difference(continuous.state(), third.state()), "");
    EXPECT_EQ(third.history.size(), static_cast<size_t>(ToyRun::kTotal));
    fs::remove_all(dir);
}

TEST(ResumeState, ForgettingAnyPartOfTheStateIsDetected) {
    // The comparison must be able to fail: resume without one piece of state.
    ToyRun continuous;
    continuous.run_until(ToyRun::kTotal);
    const ResumeState saved = [] {
        ToyRun r;
        r.run_until(4);
        return r.state();
    }();
    const std::vector<std::pair<std::string, std::function<void(ToyRun&)>>> forgets = {
        {"noise RNG", [](ToyRun& r) { r.noise = Philox(249, 7); }},
        {"sampler RNG", [](ToyRun& r) { r.sampler = Philox(149, 0); }},
        {"cursor", [](ToyRun& r) { r.cursor = 0; }},
        {"moments", [](ToyRun& r) { r.actor = AdamW(r.actor_params(), AdamWConfig{0.9, 0.999, 1e-8, 0.01}); }},
    };
    for (auto& [what, forget] : forgets) {
        ToyRun resumed;
        resumed.restore(saved, "saved");
        forget(resumed);
        resumed.run_until(ToyRun::kTotal);
        std::string d = states_first_difference(continuous.state(), resumed.state());
        EXPECT_NE(d, "") << "forgetting the " << what << " went unnoticed";
    }
    // A single flipped bit in a moment is a reported difference.
    ResumeState a = continuous.state(), b = a;
    uint32_t bits;
    std::memcpy(&bits, &b.optimizers["critic"].exp_avg_sq[0].values[2], 4);
    bits ^= 1;
    std::memcpy(&b.optimizers["critic"].exp_avg_sq[0].values[2], &bits, 4);
    std::string d = states_first_difference(a, b);
    EXPECT_NE(d.find("optimiser 'critic'"), std::string::npos) << d;
    EXPECT_NE(d.find("exp_avg_sq"), std::string::npos) << d;
    EXPECT_NE(d.find("element 2"), std::string::npos) << d;
    EXPECT_NE(state_content_sha256(a), state_content_sha256(b));
    // A double in the history differing in its last bit.
    ResumeState c = a;
    double x = c.extra["history"][3]["actor_lr"].get<double>();
    c.extra["history"][3]["actor_lr"] = std::nextafter(x, 1.0);
    d = states_first_difference(a, c);
    EXPECT_NE(d.find("extra.history[3].actor_lr"), std::string::npos) << d;
}

TEST(ResumeState, DamagedOrMismatchedFilesAreRefusedAndNothingChanges) {
    fs::path dir = test::fresh_temp_dir("state_damage");
    ToyRun run;
    run.run_until(3);
    const ResumeState good = run.state();
    save_resume_state(dir / "good.gz", good);
    const std::string gz = read_file(dir / "good.gz");

    // Each case: a file name, its bytes, and a fragment the error must contain.
    std::vector<std::tuple<std::string, std::string, std::string>> cases;
    cases.emplace_back("truncated.gz", gz.substr(0, gz.size() / 2), "truncated");
    cases.emplace_back("empty.gz", "", "");
    {
        std::string bad = gz;
        bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x40);
        cases.emplace_back("flipped.gz", bad, "gzip");
    }
    {
        std::string bad = gz;
        bad[bad.size() - 6] = static_cast<char>(bad[bad.size() - 6] ^ 0x01);  // CRC32 trailer
        cases.emplace_back("crc.gz", bad, "gzip");
    }
    cases.emplace_back("plain.gz", gzip_decompress(gz, "x"), "gzip");  // not compressed at all
    cases.emplace_back("version.gz", rebuild(gz, [](json& m) { m["version"] = 2; }), "version 2");
    cases.emplace_back("format.gz", rebuild(gz, [](json& m) { m["format"] = "something-else"; }), "format");
    cases.emplace_back("nometa.gz", gzip_compress(serialize_safetensors({}, {}), 1), "not a ppolab resume state");
    cases.emplace_back("identity.gz", rebuild(gz, [](json& m) { m["learned"]["actor"]["identity"] = sha256_hex("x"); }),
                       "altered");
    cases.emplace_back("moments.gz", rebuild(gz, nullptr, [](std::vector<TensorToWrite>& ts) {
                           static std::string zeros;
                           for (auto& t : ts)
                               if (t.name == "adamw/actor/exp_avg/layer.b") {
                                   zeros.assign(t.bytes.size(), '\0');
                                   t.bytes = zeros;
                               }
                       }),
                       "exp_avg identity");
    cases.emplace_back("missing.gz", rebuild(gz, nullptr, [](std::vector<TensorToWrite>& ts) {
                           std::erase_if(ts, [](auto& t) { return t.name == "learned/critic/head.weight"; });
                       }),
                       "'learned/critic/head.weight'");
    cases.emplace_back("extra.gz", rebuild(gz, nullptr, [](std::vector<TensorToWrite>& ts) {
                           static const float one = 1.0f;
                           ts.push_back({"learned/actor/sneaky", "F32", {1}, std::string_view(reinterpret_cast<const char*>(&one), 4)});
                       }),
                       "unexpected tensor 'learned/actor/sneaky'");
    cases.emplace_back("dtype.gz", rebuild(gz, nullptr, [](std::vector<TensorToWrite>& ts) {
                           for (auto& t : ts)
                               if (t.name == "learned/actor/layer.b") t.dtype = "I32";
                       }),
                       "dtype I32");
    cases.emplace_back("lr.gz", rebuild(gz, [](json& m) { m["schedulers"]["actor"]["next_lr"] = 0.5; }), "next_lr");
    cases.emplace_back("rng.gz", rebuild(gz, [](json& m) { m["rngs"]["noise"]["counter"] = -3; }), "'counter'");
    cases.emplace_back("field.gz", rebuild(gz, [](json& m) { m["durations"] = json::object(); }), "'durations'");

    for (auto& [name, bytes, fragment] : cases) write_file_atomic(dir / name, bytes);
    const auto before = snapshot(dir);
    for (auto& [name, bytes, fragment] : cases) {
        std::string m = error_of([&] { load_resume_state(dir / name); });
        EXPECT_NE(m, "(no error)") << name;
        if (std::getenv("PPOLAB_VERBOSE")) std::printf("%s\n", m.c_str());
        EXPECT_NE(m.find(name), std::string::npos) << name << ": the error must name the file: " << m;
        EXPECT_NE(m.find(fragment), std::string::npos) << name << ": " << m;
    }
    EXPECT_EQ(snapshot(dir), before);

    // Identity mismatch against this run's identity block names the field.
    json other = good.identity;
    other["base"] = "frozen-identity-y";
    std::string m = error_of([&] { load_resume_state(dir / "good.gz", &other); });
    EXPECT_NE(m.find("identity.base"), std::string::npos) << m;

    // Refusing to overwrite leaves the old file; replace swaps atomically.
    ToyRun later;
    later.run_until(6);
    m = error_of([&] { save_resume_state(dir / "good.gz", later.state()); });
    EXPECT_NE(m.find("refusing to overwrite"), std::string::npos) << m;
    EXPECT_EQ(snapshot(dir), before);
    save_resume_state(dir / "good.gz", later.state(), Overwrite::replace);
    EXPECT_TRUE(states_equal(load_resume_state(dir / "good.gz"), later.state()));

    // A state that does not fit the live objects is refused before anything is written.
    ResumeState wrong = good;
    wrong.learned["actor"][0].shape = {4, 3};
    ToyRun target;
    const std::vector<float> w0 = target.w, b0 = target.b;
    m = error_of([&] { target.restore(wrong, "wrong.gz"); });
    EXPECT_NE(m.find("'layer.w' has shape [4, 3]; expected [3, 4]"), std::string::npos) << m;
    EXPECT_EQ(target.w, w0);
    EXPECT_EQ(target.b, b0);
    fs::remove_all(dir);
}

TEST(ResumeState, SerialisationIsDeterministicAndComplete) {
    ToyRun run;
    run.run_until(2);
    ResumeState s = run.state();
    EXPECT_EQ(serialize_resume_state(s), serialize_resume_state(s));
    ResumeState back = parse_resume_state(serialize_resume_state(s), "memory");
    EXPECT_EQ(states_first_difference(s, back), "");
    EXPECT_EQ(back.rngs.at("noise").counter(), run.noise.counter());
    EXPECT_EQ(back.optimizers.at("actor").step, 2);
    // Large Philox values survive (uint64 in JSON).
    s.rngs.emplace("big", Philox(UINT64_MAX, UINT64_MAX - 1));
    s.rngs.at("big").set_counter(UINT64_MAX - 2);
    back = parse_resume_state(serialize_resume_state(s), "memory");
    EXPECT_EQ(back.rngs.at("big"), s.rngs.at("big"));
    // Non-finite numbers in free JSON are refused, not silently nulled.
    s.extra["loss"] = std::nan("");
    EXPECT_NE(error_of([&] { serialize_resume_state(s); }).find("extra.loss"), std::string::npos);
}

// The fuzz target's seed inputs (fuzz/corpus/resume_state) must be real,
// loadable states, or the fuzzer would start from nothing but rejects.
TEST(ResumeState, FuzzSeedCorpusHoldsValidStates) {
    const char* src = std::getenv("PPOLAB_SOURCE_DIR");
    ASSERT_NE(src, nullptr);
    const fs::path dir = fs::path(src) / "fuzz" / "corpus" / "resume_state";
    ResumeState s = load_resume_state(dir / "seed.state.gz");
    EXPECT_EQ(s.learned.at("sft").size(), 2u);
    EXPECT_EQ(s.optimizers.at("adamw").step, 3);
    EXPECT_EQ(s.schedulers.at("lr").next_step, 3);
    ResumeState raw = parse_resume_state(read_file(dir / "seed-raw.safetensors"), "seed-raw");
    EXPECT_TRUE(states_equal(s, raw));
    EXPECT_NO_THROW(load_resume_state(dir / "empty.state.gz"));
}
