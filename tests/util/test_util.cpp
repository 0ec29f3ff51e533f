#include <gtest/gtest.h>

#include <filesystem>

#include "util/bf16.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/gzip.h"
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
