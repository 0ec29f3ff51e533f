#include "training/losses.h"

#include <cmath>

#include "util/canon_math.h"

namespace ppolab {

double sft_token_loss(const float* logp, const uint8_t* response_mask, int64_t n, double denominator, float* dlogp) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        if (response_mask[i]) sum -= static_cast<double>(logp[i]);
        if (dlogp) dlogp[i] = response_mask[i] ? static_cast<float>(-1.0 / denominator) : 0.f;
    }
    return sum / denominator;
}

// softplus(x) = log(1 + e^x), without overflow for large |x|. exp and log1p
// are ppolab's own (util/canon_math.h): the same bits on every CPU.
static double softplus(double x) { return x > 0 ? x + canon_log1p(canon_exp(-x)) : canon_log1p(canon_exp(x)); }
static double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + canon_exp(-x)) : canon_exp(x) / (1.0 + canon_exp(x)); }

double bradley_terry_loss(const float* chosen, const float* rejected, int64_t n, float* dchosen, float* drejected,
                          double denominator) {
    const double d = denominator > 0 ? denominator : static_cast<double>(n);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double margin = static_cast<double>(chosen[i]) - static_cast<double>(rejected[i]);
        total += softplus(-margin);
        // d/dmargin of softplus(−margin) = −σ(−margin)
        const double g = -sigmoid(-margin) / d;
        if (dchosen) dchosen[i] = static_cast<float>(g);
        if (drejected) drejected[i] = static_cast<float>(-g);
    }
    return total / d;
}

double dpo_loss(const double* pc, const double* pr, const double* rc, const double* rr, int64_t n, double beta,
                double* dchosen, double* drejected, DpoPairTerms* terms, double denominator) {
    const double d = denominator > 0 ? denominator : static_cast<double>(n);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double chosen = beta * (pc[i] - rc[i]), rejected = beta * (pr[i] - rr[i]);
        const double z = chosen - rejected;
        total += softplus(-z);
        // d/dz softplus(−z) = −σ(−z); dz/dπ_c = β, dz/dπ_r = −β
        const double g = -sigmoid(-z) * beta / d;
        if (dchosen) dchosen[i] = g;
        if (drejected) drejected[i] = -g;
        if (terms) terms[i] = {chosen, rejected, z};
    }
    return total / d;
}

}  // namespace ppolab
