// Central finite differences on a tiny FP32 Qwen2 (no PyTorch involved):
// for each loss (CE, Bradley–Terry, value) and each kind of parameter —
// LoRA A and B of every target, head weight and bias, and in full mode the
// embedding, norms, q/k/v biases and every matrix — the analytic gradient
// at two coordinates (the largest |g| of the tensor and a random one)
// is compared with (L(θ + h) − L(θ − h)) / 2h.
//
// Tolerance: |fd − g| ≤ 2e-2 · max(|g|, |fd|) + noise, noise = 8 ulp(L) / 2h.
// The forward is FP32: L(θ ± h) each carry the rounding of a two-layer float
// forward, a few ulps of L (measured: up to 2.8 ulps in the difference
// L(θ+h) − L(θ−h), a Bradley–Terry coordinate whose true gradient is ~3e-5;
// which coordinates come near it depends on how the compiler contracts
// multiply-adds, so the bound allows 8). With h = 1e-3 that is an absolute
// noise of 5e-4–2e-3 for |L| ≈ 1.6–4.1; the O(h²) truncation error is
// relative ~1e-5. The largest-|g| coordinate of each tensor makes the
// relative test bite: at least a third of the coordinates must have
// 2e-2·|g| above the noise (checked below), so the test is not vacuous.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "test_qwen2_common.h"

using namespace ppolab;
using namespace ppolab::test;

namespace {

Qwen2Config tiny_config() {
    Qwen2Config c = small_config();
    c.vocab_size = 61;
    c.hidden_size = 32;
    c.intermediate_size = 40;
    c.head_dim = 8;
    return c;
}

void check_fd(Loss kind) {
    // ~700 forwards of a tiny model: threads would only add barrier waits
    // (and numerics do not depend on the thread count here).
    omp_set_num_threads(1);
    Qwen2Config c = tiny_config();
    Qwen2Weights w = small_weights(c, WeightType::f32, 3, 0.15);
    Qwen2Weights g = qwen2_grads_like(w);
    LoraAdapters lora = random_lora(c, 4, 0.1);
    ScalarHead head = random_head(c.hidden_size, 5);
    Qwen2 model(w, &lora);
    model.set_full_grads(&g);
    Scorer sc(model);
    ScoringBatch s = pair_batch(c.vocab_size, 6);
    std::vector<float> targets = value_targets(s, 7);

    lora.zero_grad();
    head.zero_grad();
    qwen2_grads_zero(g);
    const double L0 = run_loss(kind, sc, s, head, targets, true);
    const double noise =
        8.0 * (std::nextafter(static_cast<float>(std::abs(L0)), INFINITY) - std::abs(static_cast<float>(L0)));

    ParamList params = lora.parameters();
    for (auto& p : head.parameters()) params.push_back(p);
    for (auto& p : qwen2_parameters(w, &g)) params.push_back(p);
    Philox rng(17, static_cast<uint64_t>(kind));
    const float h = 1e-3f;
    const double abs_tol = noise / (2.0 * static_cast<double>(h));
    int checked = 0, biting = 0;
    for (const auto& p : params) {
        if (kind == Loss::ce && p.name.starts_with("head.")) continue;  // CE does not read the head
        std::vector<int64_t> coords;
        int64_t big = 0;
        for (int64_t i = 1; i < p.numel(); ++i)
            if (std::abs(p.grad[i]) > std::abs(p.grad[big])) big = i;
        coords.push_back(big);
        for (int k = 0; k < 1 && p.numel() > 1; ++k)
            coords.push_back(static_cast<int64_t>(rng.below(static_cast<uint64_t>(p.numel()))));
        for (int64_t i : coords) {
            const float keep = p.data[i];
            p.data[i] = keep + h;
            double lp = run_loss(kind, sc, s, head, targets, false);
            p.data[i] = keep - h;
            double lm = run_loss(kind, sc, s, head, targets, false);
            p.data[i] = keep;
            const double fd = (lp - lm) / (2.0 * static_cast<double>(h));
            const double an = p.grad[i];
            EXPECT_LE(std::abs(fd - an), 2e-2 * std::max(std::abs(an), std::abs(fd)) + abs_tol)
                << loss_name(kind) << ": " << p.name << "[" << i << "] analytic " << an << ", finite difference " << fd;
            ++checked;
            biting += 2e-2 * std::abs(an) > abs_tol;
        }
    }
    std::printf("[%s] L %.4f, noise bound %.2e; %d coordinates checked, %d where the 2%% relative term exceeds it\n",
                loss_name(kind), L0, abs_tol, checked, biting);
    EXPECT_GT(biting, checked / 3);  // the check is not vacuous
}

}  // namespace

TEST(Qwen2FiniteDifferences, CrossEntropy) { check_fd(Loss::ce); }
TEST(Qwen2FiniteDifferences, BradleyTerry) { check_fd(Loss::bt); }
TEST(Qwen2FiniteDifferences, ValueLoss) { check_fd(Loss::value); }
