// TensorBoard event files (training/tensorboard.h): CRC-32C against its
// published check value; the tags, steps and values of an SFT-like and a
// PPO-like report read back by TensorBoard's own EventAccumulator
// (tests/training/tensorboard_read.py, PyPI tensorboard in the test venv);
// the same report gives the same bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "training/oracle_util.h"
#include "training/tensorboard.h"
#include "util/fileio.h"
#include "util/json.h"

using namespace ppolab;

namespace {

json sft_like_report() {
    json h = json::array();
    for (int u = 1; u <= 6; ++u)
        h.push_back({{"epoch", (u + 2) / 3},
                     {"update", u},
                     {"loss", 1.0 / u},
                     {"lr", 1e-3 * u},
                     {"denominator", 100 + u},
                     {"denominator_kind", "tokens"},
                     {"rows", json::array({{{"id", "x"}, {"tokens", 3}}})},
                     {"complete", true}});
    json v = json::array({{{"epoch", 1}, {"mean_token_logprob", -0.5}, {"used_for_selection", false}},
                          {{"epoch", 2}, {"mean_token_logprob", -0.25}}});
    return {{"history", h}, {"validation_history", v}, {"seconds", 12.5}};
}

json ppo_like_report() {
    json h = json::array();
    for (int i = 1; i <= 4; ++i)
        h.push_back({{"iteration", i},
                     {"objective/kl", 0.01 * i},
                     {"objective/scores", -1.0 + i},
                     {"policy/clipfrac", 0.0},
                     {"rollout_ids", json::array({"a", "b"})}});
    return {{"history", h}};
}

}  // namespace

TEST(Tensorboard, PretrainCurvesOneScalarPerUpdate) {
    const json training = {{"loss_curve", {6.5, 6.0, 5.5}}, {"grad_norm_curve", {1.0, 0.5, 0.25}}, {"updates", 3}};
    const std::vector<TensorboardScalar> s = pretrain_scalars(training);
    ASSERT_EQ(s.size(), 6u);
    EXPECT_EQ(s[0].tag, "train/loss");
    EXPECT_EQ(s[0].step, 1);
    EXPECT_EQ(s[2].value, 5.5f);
    EXPECT_EQ(s[5].tag, "train/grad_norm");
    EXPECT_EQ(s[5].step, 3);
    EXPECT_EQ(s[5].value, 0.25f);
}

TEST(Tensorboard, Crc32cCheckValue) {
    EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value (RFC 3720 B.4 family)
    EXPECT_EQ(crc32c(""), 0u);
}

TEST(Tensorboard, ReportsReadBackByTensorboard) {
    fs::path dir = test::fresh_temp_dir("tensorboard");
    const RunLayout run{dir / "run"};
    write_stage_tensorboard(run, "sft", "continuous", sft_like_report());
    write_stage_tensorboard(run, "ppo", "continuous", ppo_like_report());
    const fs::path sft_file = run.tensorboard("sft", "continuous") / "events.out.tfevents.0.ppolab";
    ASSERT_TRUE(fs::exists(sft_file));
    const std::string first = read_file(sft_file);
    write_stage_tensorboard(run, "sft", "continuous", sft_like_report());  // replaces: same bytes
    EXPECT_EQ(read_file(sft_file), first);

    auto read_back = [&](const std::string& stage) {
        const fs::path out = dir / (stage + ".json");
        const std::string cmd = "'" + test::python() + "' '" +
                                (test::source_dir() / "tests/training/tensorboard_read.py").string() + "' '" +
                                run.tensorboard(stage, "continuous").string() + "' '" + out.string() + "' > '" +
                                (dir / "log.txt").string() + "' 2>&1";
        const int rc = std::system(cmd.c_str());
        EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) != 3)
            << "tensorboard is not importable by $PPOLAB_PYTHON (" << test::python()
            << "): scripts/test-venv.sh installs it. " << read_file(dir / "log.txt");
        EXPECT_EQ(rc, 0) << read_file(dir / "log.txt");
        return rc == 0 ? read_json_file(out) : json::object();
    };
    const json sft = read_back("sft");
    ASSERT_TRUE(sft.contains("scalars")) << sft.dump();
    std::printf("tensorboard %s\n", sft["version"].get<std::string>().c_str());
    EXPECT_EQ(sft["file_version"].get<double>(), 2.0);  // TensorBoard parsed "brain.Event:2"
    EXPECT_EQ(sft["wall_times"], json::array({0.0}));
    // train/<key> at every update; strings, lists and booleans are not scalars; epoch is the step's.
    std::set<std::string> tags;
    for (auto& [t, v] : sft["scalars"].items()) tags.insert(t);
    EXPECT_EQ(tags,
              (std::set<std::string>{"train/loss", "train/lr", "train/denominator", "validation/mean_token_logprob"}));
    const json& loss = sft["scalars"]["train/loss"];
    ASSERT_EQ(loss.size(), 6u);
    for (int u = 1; u <= 6; ++u) {
        EXPECT_EQ(loss[u - 1][0].get<int64_t>(), u);
        EXPECT_EQ(loss[u - 1][1].get<double>(), static_cast<double>(static_cast<float>(1.0 / u)));
    }
    // Validation at each epoch's last update (epoch 1: updates 1–3, epoch 2: 4–6).
    EXPECT_EQ(sft["scalars"]["validation/mean_token_logprob"], json::parse("[[3, -0.5], [6, -0.25]]"));

    const json ppo = read_back("ppo");
    ASSERT_TRUE(ppo.contains("scalars")) << ppo.dump();
    tags.clear();
    for (auto& [t, v] : ppo["scalars"].items()) tags.insert(t);
    EXPECT_EQ(tags, (std::set<std::string>{"objective/kl", "objective/scores", "policy/clipfrac"}));
    const json& kl = ppo["scalars"]["objective/kl"];
    ASSERT_EQ(kl.size(), 4u);
    for (int i = 1; i <= 4; ++i) {
        EXPECT_EQ(kl[i - 1][0].get<int64_t>(), i);
        EXPECT_EQ(kl[i - 1][1].get<double>(), static_cast<double>(static_cast<float>(0.01 * i)));
    }
    EXPECT_EQ(ppo["scalars"]["objective/scores"][0][1].get<double>(), 0.0);  // step 1, value 0: both written
    fs::remove_all(dir);
}
