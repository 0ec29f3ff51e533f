// AdamW + clipping over 10 steps against torch.optim.AdamW and
// torch.nn.utils.clip_grad_norm_ (tests/oracle/adamw_ref.py), and the
// schedule against the tutorial's Python formula.
//
// Tolerance: ours and PyTorch's element operations are the same float
// operations in the same order, except (a) the gradient norm, which PyTorch
// sums in float per tensor and we sum in double — the clip scale then differs
// by a few float ulps — and (b) fused multiply-adds in PyTorch's vectorised
// kernels versus its scalar tails. Both are relative perturbations of order
// 1e-7 per step of the gradient fed to Adam; over 10 steps they stay below
// 2e-6 relative on parameters and moments (we assert |Δ| ≤ 2e-6·|x| + 1e-9
// for parameters, ≤ 1e-5·|x| + 1e-12 for moments: the second moment squares
// the gradient's relative error). Clipping is active in some steps only, and
// weight decay is on, so both paths are checked.
#include <gtest/gtest.h>

#include <cmath>

#include "oracle_util.h"
#include "training/adamw.h"
#include "training/schedule.h"
#include "util/rng.h"

using namespace ppolab;

namespace {

struct Case {
    AdamWConfig config;
    double max_norm;  // <= 0: no clipping
    double peak_lr;
    std::vector<double> grad_scales;  // one per step
};

void run_case(const Case& c, const std::string& tag) {
    Philox rng(1234, 5);
    const std::vector<std::pair<std::string, std::vector<int64_t>>> layout = {
        {"a.lora_A", {4, 7}}, {"a.lora_B", {5, 4}}, {"head.weight", {1, 9}}, {"head.bias", {1}}};
    std::vector<std::vector<float>> data, grad;
    ParamList params;
    json spec = {{"beta1", c.config.beta1},
                 {"beta2", c.config.beta2},
                 {"eps", c.config.eps},
                 {"weight_decay", c.config.weight_decay}};
    spec["max_norm"] = c.max_norm > 0 ? json(c.max_norm) : json(nullptr);
    spec["params"] = json::array();
    for (auto& [name, shape] : layout) {
        int64_t n = 1;
        for (auto d : shape) n *= d;
        data.emplace_back(n);
        grad.emplace_back(n);
        for (float& x : data.back()) x = static_cast<float>(rng.normal());
        spec["params"].push_back({{"name", name}, {"shape", shape}, {"values", data.back()}});
    }
    for (size_t i = 0; i < layout.size(); ++i)
        params.push_back({layout[i].first, layout[i].second, data[i].data(), grad[i].data()});

    AdamW opt(params, c.config);
    std::vector<double> norms;
    spec["steps"] = json::array();
    const int64_t total = static_cast<int64_t>(c.grad_scales.size());
    for (int64_t s = 0; s < total; ++s) {
        json step = {{"lr", learning_rate(s, total, c.peak_lr, 0.1, 0.1)}, {"grads", json::array()}};
        for (auto& g : grad) {
            for (float& x : g) x = static_cast<float>(rng.normal() * c.grad_scales[static_cast<size_t>(s)]);
            step["grads"].push_back(g);
        }
        spec["steps"].push_back(step);
        if (c.max_norm > 0) norms.push_back(clip_grad_norm(params, c.max_norm));
        opt.step(step["lr"].get<double>());
    }

    fs::path dir = test::fresh_temp_dir("adamw_oracle_" + tag);
    write_file_atomic(dir / "in.json", spec.dump());
    test::run_python(test::source_dir() / "tests/oracle/adamw_ref.py",
                     "'" + (dir / "in.json").string() + "' '" + (dir / "out.json").string() + "'");
    json ref = read_json_file(dir / "out.json");
    AdamWState st = opt.state();
    double worst_p = 0, worst_m = 0;
    ASSERT_EQ(ref["norms"].size(), norms.size());
    bool clipped = false, unclipped = false;
    for (size_t s = 0; s < norms.size(); ++s) {
        double r = ref["norms"][s].get<double>();
        EXPECT_NEAR(norms[s], r, 1e-6 * r) << "step " << s;
        (r > c.max_norm ? clipped : unclipped) = true;
    }
    if (c.max_norm > 0) {
        EXPECT_TRUE(clipped) << "the case must exercise clipping";
        EXPECT_TRUE(unclipped) << "the case must exercise a step without clipping";
    }
    for (size_t i = 0; i < layout.size(); ++i) {
        EXPECT_EQ(ref["steps"][i].get<double>(), static_cast<double>(st.step));
        for (size_t k = 0; k < data[i].size(); ++k) {
            double r = ref["params"][i][k].get<double>();
            double d = std::fabs(data[i][k] - r);
            worst_p = std::max(worst_p, d / (std::fabs(r) + 1e-9));
            EXPECT_LE(d, 2e-6 * std::fabs(r) + 1e-9) << layout[i].first << "[" << k << "]";
            for (int which = 0; which < 2; ++which) {
                double rm = ref[which ? "exp_avg_sq" : "exp_avg"][i][k].get<double>();
                double om = (which ? st.exp_avg_sq : st.exp_avg)[i].values[k];
                worst_m = std::max(worst_m, std::fabs(om - rm) / (std::fabs(rm) + 1e-12));
                EXPECT_LE(std::fabs(om - rm), 1e-5 * std::fabs(rm) + 1e-12)
                    << (which ? "exp_avg_sq " : "exp_avg ") << layout[i].first << "[" << k << "]";
            }
        }
    }
    std::printf("[%s] torch %s: worst relative difference params %.3g, moments %.3g\n", tag.c_str(),
                ref["torch"].get<std::string>().c_str(), worst_p, worst_m);
    fs::remove_all(dir);
}

}  // namespace

TEST(AdamWOracle, TenStepsWithWeightDecayAndClipping) {
    // Large gradients clip (norm ≫ 1), small ones do not.
    run_case({AdamWConfig{0.9, 0.999, 1e-8, 0.01}, 1.0, 0.05, {3, 0.05, 2, 1, 0.1, 4, 0.02, 5, 0.3, 2}}, "clip");
}

TEST(AdamWOracle, TenStepsOtherHyperparametersWithoutClipping) {
    run_case({AdamWConfig{0.8, 0.99, 1e-6, 0.1}, 0.0, 0.02, {1, 0.5, 2, 1, 0.1, 4, 0.02, 5, 0.3, 2}}, "noclip");
}

TEST(ScheduleOracle, BitIdenticalToTheTutorialsPython) {
    fs::path dir = test::fresh_temp_dir("schedule_oracle");
    const std::string script =
        "import json,sys\n"
        "def learning_rate(c,step,total,peak):\n"
        "    warm=max(1,int(total*c['warmup_ratio']))\n"
        "    if step<warm:return peak*(step+1)/warm\n"
        "    return peak*(1-min(1.,(step-warm)/max(1,total-warm-1))*(1-c['minimum_lr_ratio']))\n"
        "c={'warmup_ratio':0.1,'minimum_lr_ratio':0.1}\n"
        "out={str(t):[learning_rate(c,s,t,p) for p in (2e-5,5e-6,1e-5,1e-3) for s in range(t+1)] for t in "
        "(1,5,17,63,200,210)}\n"
        "json.dump(out,open(sys.argv[1],'w'))\n";
    write_file_atomic(dir / "schedule.py", script);
    test::run_python(dir / "schedule.py", "'" + (dir / "out.json").string() + "'");
    json ref = read_json_file(dir / "out.json");
    for (int64_t total : {1, 5, 17, 63, 200, 210}) {
        size_t i = 0;
        for (double peak : {2e-5, 5e-6, 1e-5, 1e-3})
            for (int64_t s = 0; s <= total; ++s, ++i)
                ASSERT_EQ(learning_rate(s, total, peak, 0.1, 0.1), ref[std::to_string(total)][i].get<double>())
                    << "total " << total << " step " << s << " peak " << peak;
    }
    fs::remove_all(dir);
}
