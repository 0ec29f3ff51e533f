// overoptimisation_math.h — the maths of reward over-optimisation curves
// (Gao, Schulman & Hilton 2022, "Scaling laws for reward model
// overoptimization"; Beirami et al. 2024, "Theoretical guarantees on the
// best-of-n alignment policy"): how the gold score R moves as a policy is
// pushed away from its start, measured by d = sqrt(KL(policy ‖ start)).
//
// Best-of-n. From N ≥ n samples of one prompt, each with a proxy (judge)
// score and a value (e.g. rubric success), the best-of-n policy draws n
// samples and keeps the one of highest proxy. Its expected value is estimated
// without bias from all N samples at once (the estimator of Gao et al. 2022, after
// Nakano et al. 2021):
// sort by proxy, descending; the k-th best (1-based) is the kept one exactly
// when it is drawn and none of the k − 1 better ones is, so among the C(N, n)
// equally likely n-subsets it wins in C(N − k, n − 1) of them:
//     E = Σ_k w_k · value_(k),   w_k = C(N − k, n − 1) / C(N, n)   (Σ_k w_k = 1).
// The weights are a running product, w_1 = n / N,
// w_{k+1} = w_k · (N − k − n + 1) / (N − k), exact to a few ulps for N up to
// thousands (no factorials, no cancellation). Ties in the proxy: a group of
// equal proxies takes positions a..b in any order; with uniformly random
// tie-breaking each of its members is equally likely at each of those
// positions, so each position's expected value is the group's mean value,
// and that is what the estimate uses (it is then independent of input order).
// n = 1 gives the plain mean; n = N the value of the max-proxy sample.
//
// The KL of best-of-n, log n − (n − 1)/n, is the analytic formula of
// Stiennon et al. 2020 / Gao et al. 2022; Beirami et al. 2024 prove it is an
// UPPER BOUND on the true KL(best-of-n ‖ base) (equality only in the limit of
// a continuous proxy without ties), so curves plotted against it are shifted
// right of the truth.
//
// The functional forms (Gao et al. 2022, eq. 1–2), with R(0) = 0 (the gain
// relative to the start, so no intercept):
//     best-of-n: R(d) = d (α − β d),        peak at d* = α / (2β)       when β > 0 and α > 0
//     RL:        R(d) = d (α − β log d),    peak at d* = exp(α/β − 1)   when β > 0
// Both are linear in (α, β): ordinary least squares on the columns
// (d, −d²) or (d, −d log d), solved by a two-column QR (Gram–Schmidt with
// re-orthogonalisation) rather than the normal equations, so noiseless data
// give α, β to ~1e-13. Points with d = 0 have R = 0 in both forms whatever
// (α, β) are, so they carry no information and are left out (`points` counts
// the ones used). A best-of-n fit with α ≤ 0 (or any fit with β ≤ 0) has no
// peak inside d > 0: has_peak is false and d_star is NaN (JSON null).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "util/json.h"

namespace ppolab {

// E[value of the max-proxy sample among n drawn without replacement from the N given]; 1 ≤ n ≤ N.
double best_of_n_estimate(const std::vector<double>& proxy, const std::vector<double>& value, int64_t n);
// The weights w_1..w_N above (position k − 1 holds w_k); 1 ≤ n ≤ N.
std::vector<double> best_of_n_weights(int64_t N, int64_t n);
// log n − (n − 1)/n: an upper bound on KL(best-of-n ‖ base) in nats; 0 at n = 1.
double kl_best_of_n(int64_t n);

struct OveroptFit {
    double alpha = 0, beta = 0;
    double d_star = std::numeric_limits<double>::quiet_NaN();  // sqrt(KL) at the peak of R; NaN without one
    bool has_peak = false;
    int64_t points = 0;  // points with d > 0 (those the fit used)
    double rmse = 0;     // root mean squared residual over those points
};

// d = sqrt(KL) ≥ 0 and r = R(d), the same length. Fewer than 2 points with d > 0, or fewer than 2 distinct such d
// (a singular system), is an Error naming the fit and the counts.
OveroptFit fit_best_of_n(const std::vector<double>& d, const std::vector<double>& r);  // r = d(α − βd)
OveroptFit fit_rl(const std::vector<double>& d, const std::vector<double>& r);         // r = d(α − β log d)
// {"alpha","beta","d_star","kl_star","has_peak","points","rmse"}; d_star and kl_star = d*² are null without a peak.
json fit_json(const OveroptFit&);

}  // namespace ppolab
