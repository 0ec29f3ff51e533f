// Gradients of the Qwen2 model against PyTorch autograd (float64) on the
// same small random Qwen2 (tests/oracle/qwen2_ref.py), for three losses:
// token cross-entropy over response tokens, the Bradley–Terry pair loss,
// and the squared value loss (see run_loss in test_qwen2_common.h).
//
// 1. FP32 weights, LoRA (B non-zero), a scalar head and full-parameter
//    gradients all at once: every LoRA A/B, both head tensors and every
//    weight, norm, bias and the tied embedding are compared. Tolerance: max
//    |ppolab − torch| ≤ 1e-4 · max |torch| per tensor. ppolab computes in FP32
//    (relative rounding ~1e-7 per operation; sums over ≤ 96 terms and the
//    softmax backward's cancellation amplify it); measured ≈ 1.5e-6. The
//    error is relative to max(max |torch|, 1e-6): the BT loss gives the head
//    bias an exact zero gradient, which FP32 sums reach only up to ~1e-8.
// 2. BF16 base, LoRA only: the oracle applies the forward roundings, but
//    ppolab's backward also rounds the gradient entering each BF16 product's
//    input-backward to BF16 (matmul.h), 2^-9 relative per element, which the
//    float64 oracle does not: tolerance 3e-2 · max |torch| per tensor
//    (measured ≈ 5e-3). A wrong gradient is off by O(1).
// 3. Mixed precision (pretraining's "bf16"): FP32 masters, the model on
//    their BF16 copy (qwen2_bf16_copy), full-parameter gradients. The oracle
//    is case 2's on the copy's values, whose float64 autograd gives the
//    gradient of every weight (the rounding of the copy is the identity, as
//    for the masters). On top of case 2's roundings, dW += dYᵀX rounds dY
//    and X to BF16 (2^-9 relative per element): same tolerance, 3e-2 ·
//    max |torch| per tensor (measured ≈ 6e-3).
#include "test_qwen2_common.h"

using namespace ppolab;
using namespace ppolab::test;

namespace {

constexpr Loss kLosses[] = {Loss::ce, Loss::bt, Loss::value};

json run_json(const ScoringBatch& s, const std::vector<float>& targets) {
    return {{"prefix", ""},
            {"tokens", rows_json(s.tokens, s.B, s.T)},
            {"mask", rows_json(s.mask, s.B, s.T)},
            {"response_mask", rows_json(s.response_mask, s.B, s.T)},
            {"value_targets", rows_json(targets, s.B, s.T)},
            {"tasks", {"ce", "bt", "value"}}};
}

struct Grad {
    std::string name;
    std::vector<float> g;
};

std::vector<Grad> grads_of(const ParamList& list) {
    std::vector<Grad> out;
    for (const auto& p : list) out.push_back({p.name, {p.grad, p.grad + p.numel()}});
    return out;
}

// The oracle on the model's weights (as their values: a BF16 copy's, when
// the model reads one), the adapters and the head, for the three losses.
void run_oracle(Oracle& o, const Qwen2Config& c, const Qwen2Weights& w, LoraAdapters* lora, ScalarHead& head, bool bf16,
                const ScoringBatch& s, const std::vector<float>& targets) {
    o.add(weight_tensors(w));
    if (lora) o.add(param_tensors(lora->parameters()));
    o.add(param_tensors(head.parameters()));
    o.spec()["config"] = config_json(c);
    o.spec()["bf16"] = bf16;
    o.spec()["lora"] = lora ? json{{"rank", lora->config().rank}, {"alpha", lora->config().alpha}} : json(nullptr);
    o.spec()["runs"] = {run_json(s, targets)};
    o.run();
}

// Each gradient within tol · max |torch| of the oracle's (rel_max_error); the
// loss within loss_tol relative. Prints the worst tensor.
// One gradient is exactly zero: the Bradley–Terry loss reads only the
// difference of two scores, so the head bias adds +g and −g for each pair.
// In float that sum is rounding noise, at most a few ulps of the terms
// (|g| ≤ 1 per pair, 4 pairs: ≤ 8·4·ε_f32 = 3.8e-6; measured 3e-8, and
// exactly 0 when the compiler contracts the multiply-adds differently), so
// a tensor whose float64 gradient is zero (≤ 1e-12) is checked against
// that absolute bound instead of a relative error.
void expect_grads_match(const Oracle& o, Loss kind, double loss, double loss_tol, const std::vector<Grad>& all,
                        double tol, const char* label) {
    EXPECT_NEAR(loss, o.get(std::string(loss_name(kind)) + ".loss")[0], loss_tol * std::abs(loss)) << loss_name(kind);
    double worst = 0;
    std::string worst_name;
    for (const auto& x : all) {
        const auto& want = o.get(std::string(loss_name(kind)) + ".grad." + x.name);
        ASSERT_EQ(want.size(), x.g.size()) << x.name;
        double want_max = 0, got_max = 0;
        for (size_t i = 0; i < want.size(); ++i) {
            want_max = std::max(want_max, std::abs(static_cast<double>(want[i])));
            got_max = std::max(got_max, std::abs(static_cast<double>(x.g[i])));
        }
        if (want_max <= 1e-12) {  // an exact zero (see above)
            EXPECT_LE(got_max, 8 * 4 * 1.2e-7)
                << label << " " << loss_name(kind) << " exact-zero gradient of " << x.name;
            continue;
        }
        const double e = rel_max_error(x.g, want);
        EXPECT_LT(e, tol) << label << " " << loss_name(kind) << " gradient of " << x.name;
        if (e > worst) worst = e, worst_name = x.name;
    }
    std::printf("[%s %s] loss %.6f, %zu tensors, worst relative gradient error %.2e (%s)\n", label, loss_name(kind),
                loss, all.size(), worst, worst_name.c_str());
}

}  // namespace

TEST(Qwen2Grad, Fp32LoraHeadAndFullModeMatchTorchAutograd) {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::f32);
    Qwen2Weights g = qwen2_grads_like(w);
    LoraAdapters lora = random_lora(c, 21);
    ScalarHead head = random_head(c.hidden_size, 22);
    Qwen2 model(w, &lora);
    model.set_full_grads(&g);
    Scorer sc(model);
    ScoringBatch s = pair_batch(c.vocab_size, 23);
    std::vector<float> targets = value_targets(s, 24);
    Oracle o;
    run_oracle(o, c, w, &lora, head, false, s, targets);

    for (Loss kind : kLosses) {
        lora.zero_grad();
        head.zero_grad();
        qwen2_grads_zero(g);
        const double loss = run_loss(kind, sc, s, head, targets, true);
        std::vector<Grad> all = grads_of(lora.parameters());
        for (auto& x : grads_of(head.parameters())) all.push_back(x);
        for (auto& x : grads_of(qwen2_parameters(w, &g))) all.push_back(x);
        expect_grads_match(o, kind, loss, 1e-5, all, 1e-4, "FP32");
    }
}

TEST(Qwen2Grad, Bf16BaseLoraGradientsMatchTorchAutograd) {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::bf16);
    LoraAdapters lora = random_lora(c, 31);
    ScalarHead head = random_head(c.hidden_size, 32);
    Qwen2 model(w, &lora);
    Scorer sc(model);
    ScoringBatch s = pair_batch(c.vocab_size, 33);
    std::vector<float> targets = value_targets(s, 34);
    Oracle o;
    run_oracle(o, c, w, &lora, head, true, s, targets);

    for (Loss kind : kLosses) {
        lora.zero_grad();
        head.zero_grad();
        const double loss = run_loss(kind, sc, s, head, targets, true);
        std::vector<Grad> all = grads_of(lora.parameters());
        for (auto& x : grads_of(head.parameters())) all.push_back(x);
        expect_grads_match(o, kind, loss, 1e-2, all, 3e-2, "BF16");
    }
}

TEST(Qwen2Grad, MixedPrecisionFullModeMatchesTorchAutograd) {
    Qwen2Config c = small_config();
    Qwen2Weights master = small_weights(c, WeightType::f32);
    Qwen2Weights compute;
    qwen2_bf16_copy(master, compute);
    // The copy: every matrix rounded to nearest even, every vector as is.
    ASSERT_EQ(compute.embed_tokens.type, WeightType::bf16);
    for (size_t i = 0; i < master.embed_tokens.f.size(); ++i)
        ASSERT_EQ(compute.embed_tokens.b[i], float_to_bf16(master.embed_tokens.f[i])) << i;
    EXPECT_EQ(compute.layers[0].down_proj.type, WeightType::bf16);
    EXPECT_EQ(compute.layers[0].q_bias, master.layers[0].q_bias);
    EXPECT_EQ(compute.norm, master.norm);

    Qwen2Weights g = qwen2_grads_like(master);
    ScalarHead head = random_head(c.hidden_size, 42);
    Qwen2 model(compute);
    model.set_full_grads(&g);
    Scorer sc(model);
    ScoringBatch s = pair_batch(c.vocab_size, 43);
    std::vector<float> targets = value_targets(s, 44);
    Oracle o;
    run_oracle(o, c, compute, nullptr, head, true, s, targets);

    for (Loss kind : kLosses) {
        head.zero_grad();
        qwen2_grads_zero(g);
        const double loss = run_loss(kind, sc, s, head, targets, true);
        expect_grads_match(o, kind, loss, 1e-2, grads_of(qwen2_parameters(master, &g)), 3e-2, "mixed");
    }
}

// LoRA with B = 0 (the SPEC's initial state) still gives A no gradient and B
// a non-zero one; frozen weights (no full grads) receive nothing.
TEST(Qwen2Grad, FreshLoraGradientsFlowToBOnly) {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::bf16);
    LoraAdapters lora(c, LoraConfig{}, 5);
    ScalarHead head = ScalarHead::zeros(c.hidden_size);
    Qwen2 model(w, &lora);
    Scorer sc(model);
    ScoringBatch s = pair_batch(c.vocab_size, 6);
    run_loss(Loss::ce, sc, s, head, {}, true);
    for (const auto& p : lora.parameters()) {
        double norm = 0;
        for (int64_t i = 0; i < p.numel(); ++i) norm += std::abs(p.grad[i]);
        if (p.name.ends_with("lora_A")) EXPECT_EQ(norm, 0.0) << p.name;
        else EXPECT_GT(norm, 0.0) << p.name;
    }
}
