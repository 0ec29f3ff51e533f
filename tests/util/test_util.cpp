#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "support/test_support.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/gzip.h"
#include "util/input_limits.h"
#include "util/json.h"
#include "util/sha256.h"

using namespace ppolab;

static fs::path temp_dir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("ppolab_test_util_" + name + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

TEST(Sha256, KnownVectors) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Gzip, RoundTripAndDeterminism) {
    std::string data;
    for (int i = 0; i < 100000; ++i) data.push_back(static_cast<char>(i * 7 % 251));
    std::string z = gzip_compress(data, 1);
    EXPECT_EQ(z, gzip_compress(data, 1));
    EXPECT_EQ(static_cast<unsigned char>(z[0]), 0x1f);
    EXPECT_EQ(gzip_decompress(z, "x"), data);
}

// Over one block (kGzipBlock): independent blocks joined into one member.
// Round trip through our inflater and through the system's gunzip (an
// independent reader), the same bytes twice, a corrupted middle block and a
// wrong CRC refused. The data: compressible runs and noise, not a whole
// number of blocks.
TEST(Gzip, BlocksJoinIntoOneMemberAnyGunzipReads) {
    std::string data;
    uint32_t x = 7;
    while (data.size() < 2 * kGzipBlock + 12345) {
        x = x * 1664525u + 1013904223u;
        if ((x >> 28) < 8) data.append(1 + (x >> 20) % 300, static_cast<char>(x >> 8));
        else data.push_back(static_cast<char>(x >> 24));
    }
    const std::string z = gzip_compress(data, 1);
    EXPECT_EQ(z, gzip_compress(data, 1));
    EXPECT_LT(z.size(), data.size());
    EXPECT_EQ(z.substr(0, 10), gzip_compress("", 1).substr(0, 10));  // zlib's header
    EXPECT_EQ(gzip_decompress(z, "blocks.gz"), data);

    const fs::path dir = temp_dir("gzip_blocks");
    write_file_atomic(dir / "blocks.gz", z);
    const std::string cmd = "gzip -dc '" + (dir / "blocks.gz").string() + "' > '" + (dir / "blocks").string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    EXPECT_TRUE(read_file(dir / "blocks") == data);

    std::string bad = z;
    bad[bad.size() / 2] ^= 0x5a;  // inside the second block's stream
    EXPECT_THROW(gzip_decompress(bad, "bad.gz"), Error);
    bad = z;
    bad[bad.size() - 6] ^= 0x01;  // the CRC
    EXPECT_THROW(gzip_decompress(bad, "bad.gz"), Error);
}

TEST(Gzip, TruncatedAndCorruptAreErrors) {
    std::string z = gzip_compress(std::string(5000, 'a'), 1);
    EXPECT_THROW(gzip_decompress(z.substr(0, z.size() / 2), "half.gz"), Error);
    std::string bad = z;
    bad[bad.size() / 2] ^= 0x5a;
    bad[bad.size() - 5] ^= 0x11;  // CRC/size trailer
    EXPECT_THROW(gzip_decompress(bad, "bad.gz"), Error);
    EXPECT_THROW(gzip_decompress("not gzip", "plain.txt"), Error);
}

TEST(FileIo, AtomicWriteRefusesOverwrite) {
    fs::path dir = temp_dir("atomic");
    write_file_atomic(dir / "a.txt", "one");
    EXPECT_EQ(read_file(dir / "a.txt"), "one");
    EXPECT_THROW(write_file_atomic(dir / "a.txt", "two"), Error);
    EXPECT_EQ(read_file(dir / "a.txt"), "one");
    write_file_atomic(dir / "a.txt", "three", Overwrite::replace);
    EXPECT_EQ(read_file(dir / "a.txt"), "three");
    int files = 0;
    for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
    EXPECT_EQ(files, 1);  // no temporary left behind
    EXPECT_THROW(create_new_directory(dir), Error);
    fs::remove_all(dir);
}

TEST(Json, ErrorsNameFileAndField) {
    try {
        parse_json("{\"a\": ", "cfg.json");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cfg.json"), std::string::npos);
    }
    json j = parse_json(R"({"n": "x"})", "c.json");
    try {
        json_int(j, "n", "c.json");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'n' must be an integer"), std::string::npos);
    }
}

TEST(Bf16, RoundsToNearestEven) {
    EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
    // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to even (1.0).
    EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);
    EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);
    EXPECT_FLOAT_EQ(f16_to_float(0x3c00), 1.0f);
    EXPECT_FLOAT_EQ(f16_to_float(0xc000), -2.0f);
    EXPECT_FLOAT_EQ(f16_to_float(0x0001), 5.9604645e-8f);
}

#include "util/rng.h"

TEST(Philox, KnownAnswerAndResume) {
    // Random123 known-answer test for philox4x32-10: counter 0, key 0.
    Philox zero(0, 0);
    auto b = zero.block(0);
    EXPECT_EQ(b[0], 0x6627e8d5u);
    EXPECT_EQ(b[1], 0xe169c58du);
    EXPECT_EQ(b[2], 0xbc57ac4cu);
    EXPECT_EQ(b[3], 0x9b00dbd8u);
    Philox a(42, 7);
    for (int i = 0; i < 10; ++i) a.uniform();
    Philox copy(42, 7);
    copy.set_counter(a.counter());
    EXPECT_EQ(a.uniform(), copy.uniform());
    auto p = a.permutation(100);
    std::vector<int64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < 100; ++i) EXPECT_EQ(sorted[i], i);
}

// ------------------------------------------------------------ bounded input files

namespace {

using ppolab::test::error_of;

using ppolab::test::ScopedEnv;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(InputFile, RefusesWhatIsNotARegularFileNamingIt) {
    fs::path dir = temp_dir("input_kinds");
    std::string m = error_of([&] { read_input_file(dir, InputKind::votes); });
    EXPECT_TRUE(contains(m, "vote file '" + dir.string() + "' is a directory, expected a regular file")) << m;
    m = error_of([&] { read_json_file(dir, InputKind::config); });
    EXPECT_TRUE(contains(m, "configuration file '" + dir.string() + "' is a directory, expected a regular file")) << m;

    // A FIFO with no writer: refused at once (opening it must not block).
    const fs::path fifo = dir / "pipe";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    m = error_of([&] { read_input_file(fifo, InputKind::candidates); });
    EXPECT_TRUE(contains(m, "candidate file '" + fifo.string() + "' is a FIFO (named pipe), expected a regular file"))
        << m;

    // /dev/zero would grow a string without end: refused before any read.
    m = error_of([&] { read_json_file("/dev/zero"); });
    EXPECT_TRUE(contains(m, "JSON file '/dev/zero' is a character device, expected a regular file")) << m;

    m = error_of([&] { read_input_file(dir / "absent.json", InputKind::json); });
    EXPECT_TRUE(contains(m, "cannot open JSON file '" + (dir / "absent.json").string() + "'")) << m;
    fs::remove_all(dir);
}

// Every other read of a file ppolab did not just write (whole files, hashes,
// safetensors maps) refuses a FIFO at once too: none of them may block.
TEST(InputFile, EveryReaderRefusesAFifoWithoutBlocking) {
    fs::path dir = temp_dir("fifo_readers");
    const fs::path fifo = dir / "pipe";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const std::string named = "'" + fifo.string() + "' is a FIFO (named pipe), expected a regular file";
    std::string m = error_of([&] { read_file(fifo); });
    EXPECT_TRUE(contains(m, "file " + named)) << m;
    m = error_of([&] { sha256_file(fifo); });
    EXPECT_TRUE(contains(m, "file " + named)) << m;
    m = error_of([&] { ::close(open_regular_file(fifo, "model file")); });
    EXPECT_TRUE(contains(m, "model file " + named)) << m;
    m = error_of([&] { ::close(open_regular_file(dir, "model file")); });
    EXPECT_TRUE(contains(m, "model file '" + dir.string() + "' is a directory")) << m;
    // A regular file still reads whole, and hashes as its bytes.
    write_file_atomic(dir / "x.txt", std::string("abc"));
    EXPECT_EQ(read_file(dir / "x.txt"), "abc");
    EXPECT_EQ(sha256_file(dir / "x.txt"), sha256_hex(std::string_view("abc")));
    fs::remove_all(dir);
}

TEST(InputFile, RefusesFilesOverTheLimitBeforeReadingAndTheLimitCanBeRaised) {
    fs::path dir = temp_dir("input_limit");
    const fs::path big = dir / "config.json";
    // 4 MiB + 1 byte of valid JSON: one byte over the configuration limit.
    std::string text = "{\"pad\": \"" + std::string((4u << 20) - 12, 'x') + "\"}";
    text.resize((4u << 20) + 1, ' ');
    write_file_atomic(big, text);
    ASSERT_EQ(fs::file_size(big), (4u << 20) + 1);
    std::string m = error_of([&] { read_json_file(big, InputKind::config); });
    EXPECT_TRUE(contains(m, "configuration file '" + big.string() +
                                "' is 4194305 bytes, over the 4 MiB limit for "
                                "configuration files (raise it with PPOLAB_MAX_CONFIG_MIB=<MiB>)"))
        << m;
    // The same bytes are a fine JSON file (64 MiB), and a fine config once the limit is raised.
    EXPECT_EQ(read_json_file(big).at("pad").get<std::string>().size(), (4u << 20) - 12);
    {
        ScopedEnv raise("PPOLAB_MAX_CONFIG_MIB", "5");
        EXPECT_EQ(input_limit_bytes(InputKind::config), 5u << 20);
        EXPECT_EQ(read_json_file(big, InputKind::config).at("pad").get<std::string>().size(), (4u << 20) - 12);
    }
    {
        ScopedEnv lower("PPOLAB_MAX_JSON_MIB", "1");
        m = error_of([&] { read_json_file(big); });
        EXPECT_TRUE(contains(m, "over the 1 MiB limit for JSON files (raise it with PPOLAB_MAX_JSON_MIB=<MiB>)")) << m;
    }
    // Exactly at the limit is accepted.
    const fs::path exact = dir / "exact.json";
    write_file_atomic(exact, std::string(1u << 20, ' '));
    {
        ScopedEnv lower("PPOLAB_MAX_VOTES_MIB", "1");
        EXPECT_EQ(read_input_file(exact, InputKind::votes).size(), 1u << 20);
    }
    for (const char* bad : {"0", "-1", "2x", "", "99999999"}) {
        ScopedEnv wrong("PPOLAB_MAX_VOTES_MIB", bad);
        m = error_of([&] { read_input_file(exact, InputKind::votes); });
        EXPECT_TRUE(contains(m, "environment variable PPOLAB_MAX_VOTES_MIB must be a whole number of MiB"))
            << bad << ": " << m;
    }
    // The documented defaults.
    EXPECT_EQ(input_limit_bytes(InputKind::config), 4u << 20);
    EXPECT_EQ(input_limit_bytes(InputKind::votes), 64u << 20);
    EXPECT_EQ(input_limit_bytes(InputKind::candidates), 64u << 20);
    EXPECT_EQ(input_limit_bytes(InputKind::json), 64u << 20);
    EXPECT_EQ(input_limit_bytes(InputKind::tokenizer), 32u << 20);
    EXPECT_EQ(input_limit_bytes(InputKind::state), uint64_t(2) << 30);
    EXPECT_EQ(input_limit_bytes(InputKind::state_inflated), uint64_t(2) << 30);
    fs::remove_all(dir);
}

TEST(InputFile, AFileThatGrowsWhileReadIsStoppedAtTheLimit) {
    // The size is checked at open; a file growing afterwards (a writer
    // appending) is cut off one byte past the limit, never read whole.
    fs::path dir = temp_dir("input_grow");
    const fs::path f = dir / "votes.json";
    write_file_atomic(f, "{}");
    ScopedEnv lower("PPOLAB_MAX_VOTES_MIB", "1");
    InputFile in(f, InputKind::votes);
    EXPECT_EQ(in.size(), 2u);
    {
        FILE* w = std::fopen(f.c_str(), "ab");
        ASSERT_NE(w, nullptr);
        const std::string more(3u << 20, ' ');
        ASSERT_EQ(std::fwrite(more.data(), 1, more.size(), w), more.size());
        std::fclose(w);
    }
    std::vector<char> buffer(1 << 16);
    uint64_t total = 0;
    std::string m = error_of([&] {
        while (size_t n = in.read_some(buffer.data(), buffer.size())) total += n;
    });
    EXPECT_TRUE(contains(m, "vote file '" + f.string() + "' grew past the 1 MiB limit for vote files")) << m;
    EXPECT_EQ(total, uint64_t(1) << 20);  // the bytes before the one that crossed the limit
    fs::remove_all(dir);
}

// ------------------------------------------------------------ duplicate JSON keys

TEST(Json, DuplicateKeysAreRefusedAtAnyDepthNamingKeyAndFile) {
    std::string m = error_of([] { parse_json(R"({"consent": false, "consent": true})", "votes.json"); });
    EXPECT_EQ(m, "votes.json: key 'consent' appears twice in the object at the top level (each key may appear once)");
    m = error_of([] {
        parse_json(R"({"format": 1, "votes": [{"pair": "p0", "pick": "a"}, {"pair": "p1", "pick": "a", "pick": "b"}]})",
                   "votes.json");
    });
    EXPECT_EQ(m, "votes.json: key 'pick' appears twice in the object at 'votes[1]' (each key may appear once)");
    m = error_of([] { parse_json(R"({"a": {"b": [1, [2], {"c": {"d": 1, "d": 2}}]}})", "deep.json"); });
    EXPECT_EQ(m, "deep.json: key 'd' appears twice in the object at 'a.b[2].c' (each key may appear once)");
    // Through the file reader too, naming the path.
    fs::path dir = temp_dir("dup_keys");
    write_file_atomic(dir / "cfg.json", R"({"sft": {"lr": 1e-3}, "sft": {"lr": 5}})");
    m = error_of([&] { read_json_file(dir / "cfg.json", InputKind::config); });
    EXPECT_TRUE(contains(m, (dir / "cfg.json").string() + ": key 'sft' appears twice")) << m;
    fs::remove_all(dir);
}

TEST(Json, ValidJsonStillParsesWithRepeatedKeysInSeparateObjects) {
    // The same key in sibling and nested objects is not a duplicate.
    const json j = parse_json(
        R"({"a": {"x": 1}, "b": {"x": 2, "a": {"x": 3}}, "l": [{"x": 4}, {"x": 5}], "x": [], "e": {}})", "ok.json");
    EXPECT_EQ(j["a"]["x"], 1);
    EXPECT_EQ(j["b"]["a"]["x"], 3);
    EXPECT_EQ(j["l"][1]["x"], 5);
    EXPECT_EQ(parse_json("[1, 2, {\"k\": null}]", "a.json")[2]["k"], nullptr);
    EXPECT_EQ(parse_json("42", "n.json"), 42);
    // Syntax errors still say where.
    EXPECT_TRUE(contains(error_of([] { parse_json(R"({"a": 1,})", "bad.json"); }), "bad.json: not valid JSON"));
}

// ------------------------------------------------------------ streaming gunzip

TEST(GzipInflater, HandsOutOnlyWhatIsAskedAndSeesTheEnd) {
    std::string data;  // incompressible: the gzip bytes span several of the inflater's 64 KiB pulls
    uint32_t x = 12345;
    for (int i = 0; i < 300000; ++i) {
        x = x * 1664525u + 1013904223u;
        data.push_back(static_cast<char>(x >> 24));
    }
    const std::string z = gzip_compress(data, 1);
    ASSERT_GT(z.size(), 200000u);
    size_t offset = 0, pulled = 0;
    auto source = [&](char* buf, size_t cap) {
        const size_t n = std::min(cap, z.size() - offset);
        std::memcpy(buf, z.data() + offset, n);
        offset += n;
        pulled += n;
        return n;
    };
    {
        GzipInflater in(source, "a.gz");
        std::string head(1000, '\0');
        in.read_exact(head.data(), head.size(), "the head");
        EXPECT_EQ(head, data.substr(0, 1000));
        EXPECT_EQ(in.produced(), 1000u);
        EXPECT_FALSE(in.at_end());    // more data follows
        EXPECT_LT(pulled, z.size());  // the rest was never pulled
    }
    offset = 0;
    {
        GzipInflater in(source, "a.gz");
        std::string all(data.size(), '\0');
        in.read_exact(all.data(), all.size(), "everything");
        EXPECT_EQ(all, data);
        EXPECT_TRUE(in.at_end());
        char c;
        EXPECT_EQ(in.read(&c, 1), 0u);
    }
    offset = 0;
    {
        GzipInflater in(source, "a.gz");
        std::string more(data.size() + 10, '\0');
        std::string m = error_of([&] { in.read_exact(more.data(), more.size(), "a promise"); });
        EXPECT_TRUE(contains(
            m, "a.gz: gzip stream is truncated (a promise: 300010 bytes expected, the stream ends after 300000)"))
            << m;
    }
    // Bytes after the stream are refused.
    const std::string twice = z + z;
    EXPECT_TRUE(contains(error_of([&] { gzip_decompress(twice, "two.gz"); }),
                         "two.gz: unexpected bytes after the gzip stream"));
}
