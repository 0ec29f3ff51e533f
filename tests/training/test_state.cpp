// Resume states: a toy training run interrupted, saved, loaded and resumed
// equals the continuous run bit for bit; damaged or mismatched files are
// refused with a clear error and leave the disk as it was.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>

#include "model/safetensors.h"
#include "oracle_util.h"
#include "support/test_support.h"
#include "training/adamw.h"
#include "training/identity.h"
#include "training/resume_state.h"
#include "training/schedule.h"
#include "util/error.h"
#include "util/gzip.h"
#include "util/sha256.h"

using ppolab::test::error_of;
using namespace ppolab;

namespace {

// A toy trainer with everything a real stage has: two roles with their own
// optimisers and schedules, a data order drawn from a Philox stream with a
// cursor, a noise stream, and a history.
struct ToyRun {
    static constexpr int64_t kItems = 5;   // "prompts"
    static constexpr int64_t kTotal = 12;  // updates
    std::vector<float> w = std::vector<float>(12), b = std::vector<float>(4),
                       v = std::vector<float>(5);  // (3,4) (4) (5)
    std::vector<float> gw = std::vector<float>(12), gb = std::vector<float>(4), gv = std::vector<float>(5);
    ParamList actor_params() {
        return {{"layer.w", {3, 4}, w.data(), gw.data()}, {"layer.b", {4}, b.data(), gb.data()}};
    }
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
        for (size_t i = 0; i < w.size(); ++i)
            gw[i] = w[i] - static_cast<float>(item) * 0.3f + static_cast<float>(noise.normal());
        for (size_t i = 0; i < b.size(); ++i) gb[i] = 4.0f * (b[i] + 1.0f) + static_cast<float>(noise.normal());
        for (size_t i = 0; i < v.size(); ++i)
            gv[i] = v[i] - static_cast<float>(i) + static_cast<float>(noise.uniform());
        const double actor_lr = actor_schedule.at(updates), critic_lr = critic_schedule.at(updates);
        const double na = clip_grad_norm(actor_params(), 1.0, "actor");
        const double nc = clip_grad_norm(critic_params(), 1.0, "critic");
        actor.step(actor_lr);
        critic.step(critic_lr);
        ++updates;
        history.push_back({{"update", updates},
                           {"item", item},
                           {"actor_lr", actor_lr},
                           {"actor_norm", na},
                           {"critic_norm", nc},
                           {"loss", 0.5 * na * na}});
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
        fs::path a = dir / ("continuous-" + std::to_string(k) + ".gz"),
                 b = dir / ("resumed-" + std::to_string(k) + ".gz");
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
        {"moments",
         [](ToyRun& r) {
             r.actor = AdamW(r.actor_params(), AdamWConfig{0.9, 0.999, 1e-8, 0.01});
         }},
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
    cases.emplace_back("moments.gz",
                       rebuild(gz, nullptr,
                               [](std::vector<TensorToWrite>& ts) {
                                   static std::string zeros;
                                   for (auto& t : ts)
                                       if (t.name == "adamw/actor/exp_avg/layer.b") {
                                           zeros.assign(t.bytes.size(), '\0');
                                           t.bytes = zeros;
                                       }
                               }),
                       "exp_avg identity");
    cases.emplace_back("missing.gz",
                       rebuild(gz, nullptr,
                               [](std::vector<TensorToWrite>& ts) {
                                   std::erase_if(ts, [](auto& t) { return t.name == "learned/critic/head.weight"; });
                               }),
                       "'learned/critic/head.weight'");
    cases.emplace_back(
        "extra.gz",
        rebuild(gz, nullptr,
                [](std::vector<TensorToWrite>& ts) {
                    static const float one = 1.0f;
                    ts.push_back(
                        {"learned/actor/sneaky", "F32", {1}, std::string_view(reinterpret_cast<const char*>(&one), 4)});
                }),
        "unexpected tensor 'learned/actor/sneaky'");
    cases.emplace_back("dtype.gz",
                       rebuild(gz, nullptr,
                               [](std::vector<TensorToWrite>& ts) {
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

// ------------------------------------------------------------ hostile state files: bounded memory

namespace {

// gzip(prefix + `zeros` zero bytes) written to `path`, streamed: the zeros are
// never held (1 GiB of zeros compresses to about 1 MB at level 9).
void write_gzip_with_zeros(const fs::path& path, const std::string& prefix, uint64_t zeros) {
    z_stream zs{};
    ASSERT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
    FILE* out = std::fopen(path.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    const std::string chunk(1 << 20, '\0');
    std::vector<char> buffer(1 << 16);
    auto feed = [&](const char* data, size_t size, int flush) {
        zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
        zs.avail_in = static_cast<uInt>(size);
        do {
            zs.next_out = reinterpret_cast<Bytef*>(buffer.data());
            zs.avail_out = static_cast<uInt>(buffer.size());
            deflate(&zs, flush);
            std::fwrite(buffer.data(), 1, buffer.size() - zs.avail_out, out);
        } while (zs.avail_out == 0 || zs.avail_in != 0);
    };
    feed(prefix.data(), prefix.size(), Z_NO_FLUSH);
    for (uint64_t left = zeros; left > 0;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
        feed(chunk.data(), n, Z_NO_FLUSH);
        left -= n;
    }
    feed(nullptr, 0, Z_FINISH);
    deflateEnd(&zs);
    ASSERT_EQ(std::fclose(out), 0);
}

struct ChildLoad {
    std::string message;        // the load's error, or "(no error)"
    long peak_growth_kib = -1;  // growth of the child's peak resident memory during the load
};

// Runs `load` in a forked child and reports its error and how much its peak
// resident memory grew (ru_maxrss starts at the RSS inherited at fork).
ChildLoad measure_in_child(const std::function<void()>& load) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        struct rusage before, after;
        ::getrusage(RUSAGE_SELF, &before);
        std::string message;
        try {
            message = error_of(load);
        } catch (const std::exception& e) {
            message = std::string("(not a ppolab::Error) ") + e.what();
        }
        ::getrusage(RUSAGE_SELF, &after);
        const std::string report = std::to_string(after.ru_maxrss - before.ru_maxrss) + "\n" + message;
        size_t done = 0;
        while (done < report.size()) {
            const ssize_t n = ::write(fds[1], report.data() + done, report.size() - done);
            if (n <= 0) break;
            done += static_cast<size_t>(n);
        }
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string report;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) report.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child died: status " << status;
    ChildLoad out;
    const size_t nl = report.find('\n');
    if (nl == std::string::npos) return out;
    out.peak_growth_kib = std::stol(report.substr(0, nl));
    out.message = report.substr(nl + 1);
    return out;
}

constexpr uint64_t kGiB = uint64_t(1) << 30;
constexpr long kSmallKib = 64 * 1024;  // 64 MiB: far below the 1 GiB bombs, far above the toy state

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// safetensors bytes: the length prefix and `header_json` padded to 8.
std::string safetensors_head(std::string header_json) {
    header_json.append((8 - header_json.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(uint64_t(header_json.size()) >> (8 * i) & 0xff);
    return out + header_json;
}

using ppolab::test::ScopedEnv;

}  // namespace

TEST(ResumeStateBounds, AValidStateRoundTripsBitForBit) {
    fs::path dir = test::fresh_temp_dir("state_bounds_valid");
    ToyRun run;
    run.run_until(4);
    const ResumeState s = run.state();
    const StateFileInfo info = save_resume_state(dir / "a.state.gz", s);
    const ResumeState back = load_resume_state(dir / "a.state.gz");
    EXPECT_EQ(states_first_difference(s, back), "");
    save_resume_state(dir / "b.state.gz", back);
    EXPECT_EQ(read_file(dir / "a.state.gz"), read_file(dir / "b.state.gz"));  // same bytes on disk
    const std::string raw = inflate_resume_state(read_file(dir / "a.state.gz"), "a.state.gz");
    EXPECT_EQ(raw, serialize_resume_state(s));
    EXPECT_EQ(raw.size(), info.raw_bytes);
    fs::remove_all(dir);
}

TEST(ResumeStateBounds, AZerosBombFailsAtTheHeaderWithoutInflating) {
    fs::path dir = test::fresh_temp_dir("state_bounds_zeros");
    const fs::path bomb = dir / "interrupt.state.gz";
    write_gzip_with_zeros(bomb, "", kGiB);
    EXPECT_LT(fs::file_size(bomb), 8u << 20);
    const ChildLoad r = measure_in_child([&] { load_resume_state(bomb); });
    EXPECT_EQ(r.message, bomb.string() +
                             ": safetensors header length 0 is too small for a JSON object "
                             "(not a resume state; a file of zeros?)");
    EXPECT_GE(r.peak_growth_kib, 0);
    EXPECT_LT(r.peak_growth_kib, kSmallKib) << "loading the bomb grew memory by " << r.peak_growth_kib << " KiB";

    // The measurement sees memory that is really held (the check can fail).
    const ChildLoad control = measure_in_child([] {
        std::vector<char> held(256u << 20);
        for (size_t i = 0; i < held.size(); i += 4096) held[i] = 1;
        volatile char sink = held[held.size() / 2];
        (void)sink;
    });
    EXPECT_EQ(control.message, "(no error)");
    EXPECT_GT(control.peak_growth_kib, 200 * 1024);
    fs::remove_all(dir);
}

TEST(ResumeStateBounds, AValidStateFollowedByZerosIsRefusedAtTheFirstExtraByte) {
    fs::path dir = test::fresh_temp_dir("state_bounds_tail");
    ToyRun run;
    run.run_until(2);
    const std::string raw = serialize_resume_state(run.state());
    const fs::path bomb = dir / "tail.state.gz";
    write_gzip_with_zeros(bomb, raw, kGiB);  // one gzip stream: the state, then 1 GiB of zeros
    const ChildLoad r = measure_in_child([&] { load_resume_state(bomb); });
    EXPECT_EQ(r.message, bomb.string() + ": the gzip stream holds more than the " + std::to_string(raw.size()) +
                             " bytes its safetensors header promises (refused without inflating the rest: a damaged "
                             "or hostile file)");
    EXPECT_LT(r.peak_growth_kib, kSmallKib) << "loading the bomb grew memory by " << r.peak_growth_kib << " KiB";

    // A second gzip member after a complete state is refused too.
    const std::string two = gzip_compress(raw, 1) + gzip_compress(std::string(1000, '\0'), 1);
    write_file_atomic(dir / "two.state.gz", two);
    EXPECT_EQ(error_of([&] { load_resume_state(dir / "two.state.gz"); }),
              (dir / "two.state.gz").string() + ": unexpected bytes after the gzip stream");
    // And the state alone still loads.
    write_file_atomic(dir / "alone.state.gz", gzip_compress(raw, 1));
    EXPECT_TRUE(states_equal(load_resume_state(dir / "alone.state.gz"), run.state()));
    fs::remove_all(dir);
}

TEST(ResumeStateBounds, PromisesOverTheCapOrBeyondTheFileAreRefusedBeforeAllocating) {
    fs::path dir = test::fresh_temp_dir("state_bounds_promise");
    // A header promising 3 GiB of F32 data, and no data at all.
    const std::string huge =
        safetensors_head(R"({"x":{"dtype":"F32","shape":[805306368],"data_offsets":[0,3221225472]}})");
    write_file_atomic(dir / "huge.state.gz", gzip_compress(huge, 1));
    const uint64_t total = huge.size() + 3221225472ull;
    std::string m = error_of([&] { load_resume_state(dir / "huge.state.gz"); });
    EXPECT_EQ(m, (dir / "huge.state.gz").string() + ": its safetensors header promises " + std::to_string(total) +
                     " bytes, over the 2048 MiB limit for resume states (decompressed) (raise it with "
                     "PPOLAB_MAX_STATE_INFLATED_MIB=<MiB>)");
    {
        // Raised: the cap no longer refuses it, but a small file cannot hold 3 GiB.
        ScopedEnv raise("PPOLAB_MAX_STATE_INFLATED_MIB", "4096");
        const ChildLoad r = measure_in_child([&] { load_resume_state(dir / "huge.state.gz"); });
        EXPECT_TRUE(has(r.message, ": its safetensors header promises " + std::to_string(total) + " bytes, but " +
                                       std::to_string(fs::file_size(dir / "huge.state.gz")) +
                                       " bytes of gzip can hold at most "))
            << r.message;
        EXPECT_LT(r.peak_growth_kib, kSmallKib);
    }
    // A header length over the format's 100 MB, or promising more than the file.
    write_file_atomic(dir / "len.state.gz", gzip_compress(std::string(8, '\xff'), 1));
    m = error_of([&] { load_resume_state(dir / "len.state.gz"); });
    EXPECT_EQ(m, (dir / "len.state.gz").string() +
                     ": safetensors header length 18446744073709551615 exceeds the "
                     "format's limit of 100000000 bytes (corrupt or hostile file)");
    std::string len =
        std::string("\x00\xe1\xf5\x05\x00\x00\x00\x00", 8);  // a 100 000 000-byte header: the format's most
    write_file_atomic(dir / "short.state.gz", gzip_compress(len, 1));
    m = error_of([&] { load_resume_state(dir / "short.state.gz"); });
    EXPECT_TRUE(has(m, "short.state.gz: its safetensors header length promises at least 100000008 bytes, but ")) << m;
    // A promise the data does not keep: truncated, named.
    const std::string part =
        safetensors_head(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})") + "12345678";
    write_file_atomic(dir / "part.state.gz", gzip_compress(part, 1));
    m = error_of([&] { load_resume_state(dir / "part.state.gz"); });
    EXPECT_EQ(m, (dir / "part.state.gz").string() +
                     ": gzip stream is truncated (the tensor data its header promises: 16 bytes expected, the stream "
                     "ends after 8)");
    fs::remove_all(dir);
}

TEST(ResumeStateBounds, TheCompressedFileIsCheckedBeforeItIsRead) {
    fs::path dir = test::fresh_temp_dir("state_bounds_file");
    ToyRun run;
    run.run_until(1);
    std::string m = error_of([&] { load_resume_state(dir); });
    EXPECT_EQ(m, "resume state '" + dir.string() + "' is a directory, expected a regular file");
    m = error_of([&] { load_resume_state("/dev/zero"); });
    EXPECT_EQ(m, "resume state '/dev/zero' is a character device, expected a regular file");
    // Over the compressed limit: refused by its size, whatever it holds.
    std::string noise(3u << 19, '\0');  // 1.5 MiB
    Philox rng(5, 5);
    for (char& c : noise) c = static_cast<char>(rng.uniform() * 256);
    write_file_atomic(dir / "big.state.gz", noise);
    ScopedEnv lower("PPOLAB_MAX_STATE_MIB", "1");
    m = error_of([&] { load_resume_state(dir / "big.state.gz"); });
    EXPECT_EQ(m, "resume state '" + (dir / "big.state.gz").string() +
                     "' is 1572864 bytes, over the 1 MiB limit for resume state files (compressed) (raise it with "
                     "PPOLAB_MAX_STATE_MIB=<MiB>)");
    save_resume_state(dir / "ok.state.gz", run.state());
    EXPECT_TRUE(states_equal(load_resume_state(dir / "ok.state.gz"), run.state()));
    fs::remove_all(dir);
}

// The hostile inputs committed in the fuzz corpus are refused as such (the
// replay test only proves they do not crash).
TEST(ResumeStateBounds, FuzzCorpusBombsAreRefusedWithTheirReason) {
    const fs::path dir = test::source_dir() / "fuzz" / "corpus" / "resume_state";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"bomb-tail.state.gz", "the gzip stream holds more than the 1584 bytes its safetensors header promises"},
        {"bomb-zeros.state.gz", "safetensors header length 0 is too small"},
        {"promise-huge.state.gz", "over the 2048 MiB limit for resume states (decompressed)"},
        {"dup-key-metadata.state.gz", "key 'version' appears twice in the object at the top level"},
    };
    for (const auto& [name, fragment] : cases) {
        const std::string m = error_of([&] { load_resume_state(dir / name); });
        EXPECT_TRUE(has(m, (dir / name).string())) << m;
        EXPECT_TRUE(has(m, fragment)) << name << ": " << m;
    }
}
