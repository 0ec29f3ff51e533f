#include "model/heads.h"

#include <algorithm>

#include "util/error.h"
#include "util/rng.h"

namespace ppolab {

ScalarHead ScalarHead::zeros(int64_t hidden) {
    if (hidden <= 0) fail("scalar head: hidden size must be positive, got ", hidden);
    ScalarHead h;
    h.hidden = hidden;
    h.weight.assign(static_cast<size_t>(hidden), 0.f);
    h.bias.assign(1, 0.f);
    h.dweight.assign(static_cast<size_t>(hidden), 0.f);
    h.dbias.assign(1, 0.f);
    return h;
}

ScalarHead ScalarHead::reward_init(int64_t hidden, uint64_t seed, double stddev) {
    ScalarHead h = zeros(hidden);
    Philox rng(seed, /*stream=*/0x48656164);  // "Head"
    for (auto& w : h.weight) w = static_cast<float>(rng.normal() * stddev);
    return h;
}

void ScalarHead::forward(float* out, const float* h, int64_t N) const {
    // out (N); h (N, H)
    for (int64_t n = 0; n < N; ++n) {
        const float* hn = h + n * hidden;
        double acc = 0;  // an (N) output: accumulate in double, cost nothing
        for (int64_t c = 0; c < hidden; ++c) acc += static_cast<double>(weight[c]) * hn[c];
        out[n] = static_cast<float>(acc + bias[0]);
    }
}

void ScalarHead::backward(float* dh, const float* dout, const float* h, int64_t N) {
    // dh (N, H); dout (N); h (N, H)
    for (int64_t n = 0; n < N; ++n) {
        const float g = dout[n];
        const float* hn = h + n * hidden;
        float* dhn = dh + n * hidden;
        for (int64_t c = 0; c < hidden; ++c) {
            dhn[c] = g * weight[c];
            dweight[c] += g * hn[c];
        }
        dbias[0] += g;
    }
}

ParamList ScalarHead::parameters() {
    return {{"head.weight", {1, hidden}, weight.data(), dweight.data()}, {"head.bias", {1}, bias.data(), dbias.data()}};
}

void ScalarHead::zero_grad() {
    std::fill(dweight.begin(), dweight.end(), 0.f);
    std::fill(dbias.begin(), dbias.end(), 0.f);
}

}  // namespace ppolab
