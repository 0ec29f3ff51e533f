// PyRandom against values drawn by CPython's random.Random (committed
// fixture written by scripts/make_pyrandom_fixture.py), and the SPEC §1
// family split it must reproduce.
#include <gtest/gtest.h>

#include <cstdio>

#include "data/corpus.h"
#include "data/pyrandom.h"
#include "util/error.h"
#include "util/json.h"

using namespace ppolab;

static const json& fixture() {
    static const json f = read_json_file("tests/fixtures/data/pyrandom.json");
    return f;
}

TEST(PyRandom, MatchesCPythonDraws) {
    const json& seeds = fixture().at("seeds");
    ASSERT_GE(seeds.size(), 5u);
    for (const auto& row : seeds) {
        const int64_t seed = row.at("seed").get<int64_t>();
        SCOPED_TRACE("seed " + std::to_string(seed));
        PyRandom r(seed);
        const auto& u = row.at("uint32");
        for (size_t i = 0; i < u.size(); ++i) ASSERT_EQ(r.genrand_uint32(), u[i].get<uint32_t>()) << "draw " << i;
        for (const auto& kv : row.at("getrandbits")) {
            const int k = kv[0].get<int>();
            EXPECT_EQ(r.getrandbits(k), kv[1].get<uint64_t>()) << "getrandbits(" << k << ")";
        }
        for (const auto& nv : row.at("randbelow")) {
            const uint64_t n = nv[0].get<uint64_t>();
            EXPECT_EQ(r.randbelow(n), nv[1].get<uint64_t>()) << "_randbelow(" << n << ")";
        }
        for (const auto& hex : row.at("random")) {
            double want = std::strtod(hex.get<std::string>().c_str(), nullptr);
            EXPECT_EQ(r.random(), want);
        }
        for (const auto& want : row.at("shuffle")) {
            std::vector<int> x(want.size());
            for (size_t i = 0; i < x.size(); ++i) x[i] = int(i);
            r.shuffle(x);
            EXPECT_EQ(x, want.get<std::vector<int>>());
        }
    }
}

TEST(PyRandom, RejectsBadArguments) {
    PyRandom r(49);
    EXPECT_THROW(r.randbelow(0), Error);
    EXPECT_THROW(r.getrandbits(65), Error);
    EXPECT_THROW(r.getrandbits(-1), Error);
    EXPECT_EQ(r.getrandbits(0), 0u);
}

static std::vector<std::string> families_in(const std::vector<std::string>& splits, const std::string& which) {
    std::vector<std::string> out;
    for (size_t i = 0; i < splits.size(); ++i)
        if (splits[i] == which) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "OH%03zu", i);
            out.push_back(buf);
        }
    return out;
}

TEST(PyRandom, FamilySplitEqualsTheTutorials) {
    CorpusConfig c;
    auto splits = corpus_family_splits(c);
    EXPECT_EQ(splits, fixture().at("split_seed49").get<std::vector<std::string>>());
    // SPEC §1's own check.
    auto val = families_in(splits, "validation");
    auto test = families_in(splits, "test");
    ASSERT_EQ(val.size(), 36u);
    ASSERT_EQ(test.size(), 36u);
    EXPECT_EQ(std::vector<std::string>(val.begin(), val.begin() + 3),
              (std::vector<std::string>{"OH002", "OH003", "OH014"}));
    EXPECT_EQ(std::vector<std::string>(test.begin(), test.begin() + 3),
              (std::vector<std::string>{"OH004", "OH007", "OH020"}));
    EXPECT_EQ(families_in(splits, "train").size(), 168u);
    // Another seed gives another split, also equal to CPython's.
    c.seed = 7;
    auto other = corpus_family_splits(c);
    EXPECT_EQ(other, fixture().at("split_seed7").get<std::vector<std::string>>());
    EXPECT_NE(other, splits);
}
