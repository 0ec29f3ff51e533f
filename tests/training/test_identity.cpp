#include <gtest/gtest.h>

#include <cstring>

#include "support/test_support.h"
#include "training/identity.h"
#include "util/error.h"
#include "util/sha256.h"

using ppolab::test::message_of;
using namespace ppolab;

namespace {
std::string_view bytes_of(const std::vector<float>& v) {
    return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}
}  // namespace

TEST(Identity, DocumentedByteLayout) {
    std::vector<float> a{1.0f, 2.0f}, b{-3.0f};
    // Listed out of name order: the identity sorts by name.
    std::vector<TensorBytes> t{{"z.bias", "F32", {1}, bytes_of(b)}, {"a.weight", "F32", {1, 2}, bytes_of(a)}};
    std::string manifest = "a.weight\tF32\t[1, 2]\t" + sha256_hex(bytes_of(a)) + "\n" + "z.bias\tF32\t[1]\t" +
                           sha256_hex(bytes_of(b)) + "\n";
    EXPECT_EQ(tensors_identity(t), sha256_hex(manifest));
    json m = tensors_manifest(t);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0]["name"], "a.weight");
    EXPECT_EQ(m[1]["sha256"], sha256_hex(bytes_of(b)));
}

TEST(Identity, SensitiveToEveryBitNameAndShapeButNotListingOrder) {
    std::vector<float> w{0.5f, -1.0f, 2.0f, 4.0f, 8.0f, 16.0f}, g(6, 0.0f), h{1.0f}, gh(1, 0.0f);
    ParamList p{{"w", {2, 3}, w.data(), g.data()}, {"h", {1}, h.data(), gh.data()}};
    const std::string id = learned_identity(p);
    EXPECT_EQ(id, learned_identity(capture_params(p)));
    ParamList swapped{p[1], p[0]};
    EXPECT_EQ(learned_identity(swapped), id);
    uint32_t bits;
    std::memcpy(&bits, &w[4], 4);
    bits ^= 1u;  // lowest mantissa bit
    std::memcpy(&w[4], &bits, 4);
    EXPECT_NE(learned_identity(p), id);
    bits ^= 1u;
    std::memcpy(&w[4], &bits, 4);
    EXPECT_EQ(learned_identity(p), id);
    ParamList renamed = p;
    renamed[0].name = "w2";
    EXPECT_NE(learned_identity(renamed), id);
    ParamList reshaped = p;
    reshaped[0].shape = {3, 2};
    EXPECT_NE(learned_identity(reshaped), id);
    ParamList dup{p[0], p[0]};
    EXPECT_NE(message_of([&] { learned_identity(dup); }).find("'w' appears twice"), std::string::npos);
    // A frozen identity sees dtypes too.
    std::vector<TensorBytes> f32{{"x", "F32", {1}, bytes_of(h)}}, other{{"x", "I32", {1}, bytes_of(h)}};
    EXPECT_NE(frozen_identity(f32), frozen_identity(other));
}

TEST(Isolation, DisjointRolesPass) {
    std::vector<float> a(10), ga(10), b(10), gb(10), r(10);
    check_isolation({{"actor", {{"x", {10}, a.data(), ga.data()}}, false},
                     {"critic", {{"x", {10}, b.data(), gb.data()}}, false},
                     {"reference", {{"x", {10}, r.data(), nullptr}}, true}});
}

TEST(Isolation, OverlapsAndFrozenGradientsAreErrorsNamingTheRoles) {
    std::vector<float> block(40), grads(40);
    // Partial overlap: the critic's tensor starts inside the actor's.
    std::string m = message_of([&] {
        check_isolation({{"actor", {{"lora_A", {10}, block.data(), grads.data()}}, false},
                         {"critic", {{"lora_B", {10}, block.data() + 9, grads.data() + 20}}, false}});
    });
    EXPECT_NE(m.find("'actor'"), std::string::npos) << m;
    EXPECT_NE(m.find("'critic'"), std::string::npos) << m;
    EXPECT_NE(m.find("share mutable storage"), std::string::npos) << m;
    // One role's gradient buffer is another role's data.
    m = message_of([&] {
        check_isolation({{"actor", {{"a", {10}, block.data(), grads.data()}}, false},
                         {"reward", {{"b", {5}, grads.data() + 5, nullptr}}, true}});
    });
    EXPECT_NE(m.find("'reward'"), std::string::npos) << m;
    EXPECT_NE(m.find("gradient"), std::string::npos) << m;
    // A range contained in a long one that started earlier (not adjacent after sorting).
    m = message_of([&] {
        check_isolation(
            {{"actor", {{"long", {30}, block.data(), nullptr}, {"mid", {2}, block.data() + 32, nullptr}}, true},
             {"critic", {{"inner", {2}, block.data() + 20, nullptr}}, true}});
    });
    EXPECT_NE(m.find("'long'"), std::string::npos) << m;
    EXPECT_NE(m.find("'inner'"), std::string::npos) << m;
    // Adjacent but not overlapping is fine.
    check_isolation({{"actor", {{"a", {10}, block.data(), nullptr}}, true},
                     {"critic", {{"b", {10}, block.data() + 10, nullptr}}, true}});
    // Frozen role with a gradient buffer.
    m = message_of([&] { check_isolation({{"reference", {{"q", {10}, block.data(), grads.data()}}, true}}); });
    EXPECT_NE(m.find("frozen"), std::string::npos) << m;
    EXPECT_NE(m.find("'q'"), std::string::npos) << m;
    // Within one role.
    m = message_of([&] {
        check_isolation({{"actor",
                          {{"a", {10}, block.data(), grads.data()}, {"b", {10}, block.data() + 5, grads.data() + 10}},
                          false}});
    });
    EXPECT_NE(m.find("within one role"), std::string::npos) << m;
}
