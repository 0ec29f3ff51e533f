// DPO's loss and gradient against float64 autograd in PyTorch
// (tests/oracle/dpo_ref.py, TRL's sigmoid form). Both compute the same
// float64 expression, ours as softplus(−z) with the gradient by hand, the
// oracle as −logsigmoid(z) by autograd: they agree to a few ulps (asserted
// within 1e-12 relative, 1e-15 absolute where σ(−z) is tiny), over log-ratio
// differences from −60 to 60 and β from 1e-4 to 2.
#include <gtest/gtest.h>

#include <cmath>

#include "oracle_util.h"
#include "training/losses.h"
#include "util/rng.h"

using namespace ppolab;

TEST(DpoOracle, LossAndGradientMatchTorchAutograd) {
    Philox rng(31, 0);
    for (double beta : {1e-4, 0.1, 0.5, 2.0}) {
        const int64_t n = 64;
        std::vector<double> pc(n), pr(n), rc(n), rr(n);
        for (int64_t i = 0; i < n; ++i) {
            // Summed log-probs of answers of 5–40 tokens; the policy drifts from the reference by up to ±30 nats.
            rc[i] = -40 * (0.1 + rng.uniform());
            rr[i] = -40 * (0.1 + rng.uniform());
            pc[i] = rc[i] + 30 * (2 * rng.uniform() - 1);
            pr[i] = rr[i] + 30 * (2 * rng.uniform() - 1);
        }
        pc[0] = rc[0], pr[0] = rr[0];  // one pair where the policy is its reference
        pr[1] = pc[1], rr[1] = rc[1];  // one pair with y_c = y_r
        std::vector<double> dc(n), dr(n);
        std::vector<DpoPairTerms> terms(n);
        const double loss =
            dpo_loss(pc.data(), pr.data(), rc.data(), rr.data(), n, beta, dc.data(), dr.data(), terms.data());
        const json spec = {{"beta", beta},
                           {"policy_chosen", pc},
                           {"policy_rejected", pr},
                           {"reference_chosen", rc},
                           {"reference_rejected", rr}};
        const fs::path dir = test::fresh_temp_dir("dpo_oracle");
        write_file_atomic(dir / "in.json", spec.dump());
        test::run_python(test::source_dir() / "tests/oracle/dpo_ref.py",
                         "'" + (dir / "in.json").string() + "' '" + (dir / "out.json").string() + "'");
        const json ref = read_json_file(dir / "out.json");
        // 1e-12 relative, or 1e-15 absolute for gradients of pairs far on either side (σ(−z) ≈ e^−z).
        auto near = [](double got, double want) { return std::fabs(got - want) <= 1e-12 * std::fabs(want) + 1e-15; };
        EXPECT_TRUE(near(loss, ref["loss"].get<double>())) << "beta " << beta << ": " << loss << " vs " << ref["loss"];
        for (int64_t i = 0; i < n; ++i) {
            EXPECT_TRUE(near(dc[i], ref["dchosen"][i].get<double>())) << beta << " pair " << i;
            EXPECT_TRUE(near(dr[i], ref["drejected"][i].get<double>())) << beta << " pair " << i;
            EXPECT_TRUE(near(terms[i].chosen_reward, ref["chosen_rewards"][i].get<double>()));
            EXPECT_TRUE(near(terms[i].rejected_reward, ref["rejected_rewards"][i].get<double>()));
        }
        fs::remove_all(dir);
    }
}
