#include <gtest/gtest.h>

#include "training/schedule.h"
#include "util/error.h"

using namespace ppolab;

// Hand values of SPEC §3's formula: warm = max(1, floor(total·0.1)).
TEST(Schedule, SftSixtyThreeUpdates) {
    const double peak = 2e-5;
    // warm = floor(6.3) = 6; decay over max(1, 63 − 6 − 1) = 56 updates.
    EXPECT_DOUBLE_EQ(learning_rate(0, 63, peak, 0.1, 0.1), peak / 6);
    EXPECT_DOUBLE_EQ(learning_rate(2, 63, peak, 0.1, 0.1), peak * 3 / 6);
    EXPECT_DOUBLE_EQ(learning_rate(5, 63, peak, 0.1, 0.1), peak);
    EXPECT_DOUBLE_EQ(learning_rate(6, 63, peak, 0.1, 0.1), peak);
    EXPECT_DOUBLE_EQ(learning_rate(34, 63, peak, 0.1, 0.1), peak * 0.55);  // halfway: 1 − 0.5·0.9
    EXPECT_DOUBLE_EQ(learning_rate(62, 63, peak, 0.1, 0.1), peak * 0.1);   // last update: 10 % of peak
    EXPECT_DOUBLE_EQ(learning_rate(63, 63, peak, 0.1, 0.1), peak * 0.1);   // "next lr" after the end
}

TEST(Schedule, JudgeTwoHundredTenAndPpoTwoHundred) {
    const double peak = 2e-5;
    // 210 updates: warm = floor(21.000000000000004) = 21, decay over 188.
    EXPECT_DOUBLE_EQ(learning_rate(0, 210, peak, 0.1, 0.1), peak / 21);
    EXPECT_DOUBLE_EQ(learning_rate(20, 210, peak, 0.1, 0.1), peak);
    EXPECT_DOUBLE_EQ(learning_rate(21, 210, peak, 0.1, 0.1), peak);
    EXPECT_DOUBLE_EQ(learning_rate(21 + 47, 210, peak, 0.1, 0.1), peak * (1 - 0.25 * 0.9));
    EXPECT_DOUBLE_EQ(learning_rate(209, 210, peak, 0.1, 0.1), peak * 0.1);
    // 200 updates (PPO actor, 5e-6): warm = 20, decay over 179.
    const double actor = 5e-6;
    EXPECT_DOUBLE_EQ(learning_rate(0, 200, actor, 0.1, 0.1), actor / 20);
    EXPECT_DOUBLE_EQ(learning_rate(19, 200, actor, 0.1, 0.1), actor);
    EXPECT_DOUBLE_EQ(learning_rate(20, 200, actor, 0.1, 0.1), actor);
    EXPECT_DOUBLE_EQ(learning_rate(20 + 179, 200, actor, 0.1, 0.1), actor * 0.1);
    EXPECT_NEAR(learning_rate(100, 200, actor, 0.1, 0.1), actor * (1 - 80.0 / 179 * 0.9), 1e-20);
}

TEST(Schedule, TinyTotalsAndMonotonicity) {
    EXPECT_DOUBLE_EQ(learning_rate(0, 1, 1.0, 0.1, 0.1), 1.0);  // warm = max(1, 0) = 1
    EXPECT_DOUBLE_EQ(learning_rate(0, 5, 1.0, 0.1, 0.1), 1.0);
    EXPECT_DOUBLE_EQ(learning_rate(1, 5, 1.0, 0.1, 0.1), 1.0);
    EXPECT_DOUBLE_EQ(learning_rate(4, 5, 1.0, 0.1, 0.1), 0.1);
    EXPECT_DOUBLE_EQ(learning_rate(1, 2, 1.0, 0.1, 0.1), 1.0);  // max(1, 2−1−1) guards a zero division
    double prev = 2.0;
    for (int64_t s = 21; s < 210; ++s) {
        double lr = learning_rate(s, 210, 1.0, 0.1, 0.1);
        EXPECT_LT(lr, prev + 1e-15);
        prev = lr;
    }
}

TEST(Schedule, BadArgumentsAreErrors) {
    EXPECT_THROW(learning_rate(0, 0, 1.0, 0.1, 0.1), Error);
    EXPECT_THROW(learning_rate(-1, 10, 1.0, 0.1, 0.1), Error);
    EXPECT_THROW(learning_rate(0, 10, 1.0, 1.5, 0.1), Error);
    EXPECT_THROW(learning_rate(0, 10, 1.0, 0.1, -0.1), Error);
    EXPECT_THROW(learning_rate(0, 10, -1.0, 0.1, 0.1), Error);
    Schedule s{63, 2e-5, 0.1, 0.1};
    EXPECT_EQ(s.warmup_steps(), 6);
    EXPECT_EQ(Schedule::from_json(s.to_json(), "x"), s);
    json bad = s.to_json();
    bad["total"] = "63";
    try {
        Schedule::from_json(bad, "state.json: schedulers.actor");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'total'"), std::string::npos) << e.what();
    }
}
