#include "model/sampling.h"

#include <cmath>

#include "util/error.h"

namespace ppolab {

static double max_logit(const float* logits, int64_t V) {
    double mx = -INFINITY;
    for (int64_t i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
    if (!std::isfinite(mx)) fail("sampling: logits are not finite (max ", mx, ")");
    return mx;
}

static double sum_exp(const float* logits, int64_t V, double mx) {
    double z = 0;
    for (int64_t i = 0; i < V; ++i) z += std::exp(static_cast<double>(logits[i]) - mx);
    return z;
}

double log_softmax_at(const float* logits, int64_t V, int64_t token) {
    PPOLAB_ASSERT(token >= 0 && token < V);
    const double mx = max_logit(logits, V);
    return static_cast<double>(logits[token]) - mx - std::log(sum_exp(logits, V, mx));
}

SampledToken sample_greedy(const float* logits, int64_t V) {
    PPOLAB_ASSERT(V > 0);
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i)
        if (logits[i] > logits[best]) best = i;  // strict: ties keep the lowest id
    return {static_cast<int32_t>(best), static_cast<float>(log_softmax_at(logits, V, best))};
}

SampledToken sample_temperature1(const float* logits, int64_t V, Philox& rng) {
    return sample_temperature1_at(logits, V, rng.uniform());
}

SampledToken sample_temperature1_at(const float* logits, int64_t V, double u) {
    PPOLAB_ASSERT(V > 0);
    const double mx = max_logit(logits, V);
    const double z = sum_exp(logits, V, mx);
    const double target = u * z;  // u · Σ exp: the CDF without dividing every term
    double cum = 0;
    int64_t pick = -1;
    for (int64_t i = 0; i < V; ++i) {
        const double e = std::exp(static_cast<double>(logits[i]) - mx);
        if (e > 0) pick = i;  // rounding fallback: the last token with p > 0
        cum += e;
        if (cum > target && e > 0) {
            pick = i;
            break;
        }
    }
    PPOLAB_ASSERT(pick >= 0);
    const double logp = static_cast<double>(logits[pick]) - mx - std::log(z);
    return {static_cast<int32_t>(pick), static_cast<float>(logp)};
}

}  // namespace ppolab
