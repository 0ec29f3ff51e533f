// One update's gradient as a fixed sum of chunks (training/chunked_update.h),
// in a world of one: the chunk shapes, the sum in chunk order (checked
// against the test's own left fold, bit for bit), the losses and traces in
// chunk order, empty chunks, and one chunk = the plain update. The same sum
// across ranks is tests/cli/mpi_smoke.sh's.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "training/chunked_update.h"
#include "training/rollouts.h"
#include "util/error.h"

using namespace ppolab;

TEST(ChunkItems, FixedShapesFirstChunksTakeTheRemainder) {
    std::vector<std::pair<int64_t, int64_t>> got;
    for (int64_t c = 0; c < 3; ++c) got.push_back(chunk_items(8, 3, c));
    EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 8}}));
    EXPECT_EQ(chunk_items(2, 4, 0), (std::pair<int64_t, int64_t>{0, 1}));
    EXPECT_EQ(chunk_items(2, 4, 1), (std::pair<int64_t, int64_t>{1, 2}));
    EXPECT_EQ(chunk_items(2, 4, 2), (std::pair<int64_t, int64_t>{2, 2}));  // empty
    EXPECT_EQ(chunk_items(2, 4, 3), (std::pair<int64_t, int64_t>{2, 2}));
    EXPECT_EQ(chunk_items(7, 1, 0), (std::pair<int64_t, int64_t>{0, 7}));
}

namespace {

// Two tensors whose gradient from items [b, e) is a per-item term of
// awkward magnitudes, so that the order of the float additions shows.
struct Toy {
    std::vector<float> a = std::vector<float>(5, 0.f), b = std::vector<float>(3, 0.f);
    std::vector<float> ga = std::vector<float>(5), gb = std::vector<float>(3);
    ParamList params() { return {{"a", {5}, a.data(), ga.data()}, {"b", {3}, b.data(), gb.data()}}; }
    static float term(int64_t item, size_t i) {
        return static_cast<float>(std::pow(10.0, static_cast<double>((item * 7 + static_cast<int64_t>(i)) % 9) - 4) *
                                  ((item + static_cast<int64_t>(i)) % 2 ? -1.0 : 1.0) / 3.0);
    }
    void zero() {
        std::fill(ga.begin(), ga.end(), 0.f);
        std::fill(gb.begin(), gb.end(), 0.f);
    }
    ChunkOutput compute(int64_t begin, int64_t end, std::vector<std::pair<int64_t, int64_t>>* calls) {
        if (calls) calls->push_back({begin, end});
        ChunkOutput out;
        for (int64_t item = begin; item < end; ++item) {
            for (size_t i = 0; i < ga.size(); ++i) ga[i] += term(item, i);
            for (size_t i = 0; i < gb.size(); ++i) gb[i] += term(item, i + 5);
            out.loss += 0.1 * static_cast<double>(item + 1);
            out.trace.push_back({{"item", item}});
        }
        return out;
    }
};

}  // namespace

TEST(ChunkedGradient, SumsTheChunksInChunkOrder) {
    const int64_t items = 10, chunks = 4;
    Toy toy;
    std::vector<std::pair<int64_t, int64_t>> calls;
    const ChunkOutput out = chunked_gradient(
        toy.params(), chunks, items, [&] { toy.zero(); },
        [&](int64_t b, int64_t e) { return toy.compute(b, e, &calls); });
    EXPECT_EQ(calls, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 8}, {8, 10}}));

    // The test's own fold: each chunk from zero, then ((g0 + g1) + g2) + g3.
    std::vector<std::vector<float>> per_chunk;
    double loss = 0;
    for (int64_t c = 0; c < chunks; ++c) {
        Toy one;
        const auto [b, e] = chunk_items(items, chunks, c);
        loss += one.compute(b, e, nullptr).loss;
        std::vector<float> g(one.ga);
        g.insert(g.end(), one.gb.begin(), one.gb.end());
        per_chunk.push_back(g);
    }
    std::vector<float> want = per_chunk[0];
    for (int64_t c = 1; c < chunks; ++c)
        for (size_t i = 0; i < want.size(); ++i) want[i] += per_chunk[static_cast<size_t>(c)][i];
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(toy.ga[i], want[i]) << i;
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(toy.gb[i], want[5 + i]) << i;
    EXPECT_EQ(out.loss, loss);
    ASSERT_EQ(out.trace.size(), 10u);
    for (int64_t i = 0; i < items; ++i) EXPECT_EQ(out.trace[static_cast<size_t>(i)]["item"], i);

    // The order matters for these magnitudes: one pass over all items differs.
    Toy plain;
    chunked_gradient(
        plain.params(), 1, items, [&] { plain.zero(); },
        [&](int64_t b, int64_t e) { return plain.compute(b, e, nullptr); });
    bool differs = false;
    for (size_t i = 0; i < 5; ++i) differs = differs || plain.ga[i] != toy.ga[i];
    for (size_t i = 0; i < 3; ++i) differs = differs || plain.gb[i] != toy.gb[i];
    EXPECT_TRUE(differs) << "the toy terms do not show the order of the additions";
}

TEST(ChunkedGradient, OneChunkIsThePlainUpdate) {
    Toy toy, plain;
    int zeroed = 0;
    const ChunkOutput out = chunked_gradient(
        toy.params(), 1, 6, [&] { ++zeroed, toy.zero(); },
        [&](int64_t b, int64_t e) { return toy.compute(b, e, nullptr); });
    plain.zero();
    const ChunkOutput want = plain.compute(0, 6, nullptr);
    EXPECT_EQ(zeroed, 1);
    EXPECT_EQ(toy.ga, plain.ga);
    EXPECT_EQ(toy.gb, plain.gb);
    EXPECT_EQ(out.loss, want.loss);
    EXPECT_EQ(out.trace, want.trace);
}

TEST(ChunkedGradient, EmptyChunksAreNotComputedAndAddZeros) {
    Toy toy;
    std::vector<std::pair<int64_t, int64_t>> calls;
    std::fill(toy.ga.begin(), toy.ga.end(), 99.f);  // stale gradient: must not survive
    chunked_gradient(
        toy.params(), 4, 2, [&] { toy.zero(); }, [&](int64_t b, int64_t e) { return toy.compute(b, e, &calls); });
    EXPECT_EQ(calls, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}}));
    Toy want;
    want.compute(0, 1, nullptr);
    std::vector<float> g1a(5, 0.f);
    for (size_t i = 0; i < 5; ++i) g1a[i] = Toy::term(1, i);
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(toy.ga[i], ((want.ga[i] + g1a[i]) + 0.f) + 0.f) << i;
}

TEST(ChunkedGradient, RanksAgreeInAWorldOfOne) {
    Toy toy;
    EXPECT_NO_THROW(check_ranks_agree(toy.params(), "toy"));
}

// PPO's and RLOO/GRPO's rollouts by chunks of slots (training/rollouts.h):
// each chunk produced once, as one range, in chunk order; the result in slot
// order; an id seen before refused.
TEST(RolloutsByChunks, EachChunkOnceInSlotOrder) {
    std::vector<std::pair<int64_t, int64_t>> asked;
    auto produce = [&](int64_t begin, int64_t end) {
        asked.push_back({begin, end});
        std::vector<Rollout> out;
        for (int64_t k = begin; k < end; ++k) {
            Rollout r;
            r.id = "slot-" + std::to_string(k);
            r.old_logp = {static_cast<float>(k)};
            out.push_back(r);
        }
        return out;
    };
    std::set<std::string> seen;
    const std::vector<Rollout> got = rollouts_by_chunks(3, 4, seen, produce);
    EXPECT_EQ(asked, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 3}, {3, 4}}));
    ASSERT_EQ(got.size(), 4u);
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k].id, "slot-" + std::to_string(k));
    EXPECT_EQ(seen.size(), 4u);

    asked.clear();
    seen.clear();
    EXPECT_EQ(rollouts_by_chunks(4, 2, seen, produce).size(), 2u);  // empty chunks are not produced
    EXPECT_EQ(asked, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 2}}));
    try {
        rollouts_by_chunks(1, 4, seen, produce);
        FAIL() << "a repeated rollout id was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rollout id slot-0 was already consumed"), std::string::npos) << e.what();
    }
}

// A slot's generator is keyed by (seed, stage tag, iteration, slot) alone:
// distinct for every key, from counter 0, whatever else was drawn.
TEST(SlotGenerator, KeyedBySeedTagIterationAndSlot) {
    std::set<uint64_t> streams;
    for (uint64_t tag : {4u, 6u})
        for (int64_t it = 1; it <= 3; ++it)
            for (int64_t slot = 0; slot < 5; ++slot) {
                const Philox g = slot_generator(7, tag, it, slot);
                EXPECT_EQ(g.seed(), 7u);
                EXPECT_EQ(g.counter(), 0u);
                EXPECT_EQ(g.stream(), tag << 56 | static_cast<uint64_t>(it) << 24 | static_cast<uint64_t>(slot));
                streams.insert(g.stream());
            }
    EXPECT_EQ(streams.size(), 2u * 3u * 5u);
    Philox a = slot_generator(7, 4, 2, 1), b = slot_generator(7, 4, 2, 1), other = slot_generator(7, 4, 2, 2);
    const auto first = a.next_block();
    EXPECT_EQ(first, b.next_block());
    EXPECT_NE(first, other.next_block());
}
