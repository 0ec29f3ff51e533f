// Forward logits of the Qwen2 model (with LoRA adapters whose B is non-zero)
// against the independent PyTorch implementation tests/oracle/qwen2_ref.py:
// one sequence, a left-padded batch of different lengths, and KV-cached
// incremental decoding versus a full forward — with FP32 and BF16 weights.
//
// Tolerances (max |ppolab − torch| over real positions, relative to the
// largest |logit| of the case):
//  * FP32 weights: 1e-5. The oracle runs in float64; ppolab in FP32 with
//    FP32 accumulation over sums of ≤ 96 terms through 2 layers, whose
//    rounding error is a few 1e-7 relative (measured ≈ 5e-7).
//  * BF16 weights: 1e-2. The oracle applies the same BF16 roundings (input
//    of each base product, each projection output) but from float64 values;
//    where an FP32 value sits at a rounding boundary the two round to
//    neighbouring BF16 numbers (one BF16 ulp = 2^-8 relative), and such
//    flips propagate. Measured ≈ 3e-4; a missing rounding or a wrong
//    operation gives errors of order 1 (checked by the FP32/BF16 cross test).
//  * Cached decoding vs ppolab's own full forward: 1e-5 relative (FP32) —
//    the same operations in a different order.
#include <algorithm>

#include "model/generate.h"
#include "test_qwen2_common.h"

using namespace ppolab;
using namespace ppolab::test;

namespace {

struct Padded {
    int64_t B = 0, T = 0;
    std::vector<int32_t> tokens;  // (B, T)
    std::vector<uint8_t> mask;    // (B, T)
};

Padded left_pad(const std::vector<std::vector<int32_t>>& rows, int32_t pad) {
    Padded p;
    p.B = static_cast<int64_t>(rows.size());
    for (const auto& r : rows) p.T = std::max<int64_t>(p.T, static_cast<int64_t>(r.size()));
    p.tokens.assign(static_cast<size_t>(p.B * p.T), pad);
    p.mask.assign(static_cast<size_t>(p.B * p.T), 0);
    for (int64_t b = 0; b < p.B; ++b) {
        const auto& r = rows[static_cast<size_t>(b)];
        int64_t off = b * p.T + p.T - static_cast<int64_t>(r.size());
        for (size_t j = 0; j < r.size(); ++j) {
            p.tokens[static_cast<size_t>(off) + j] = r[j];
            p.mask[static_cast<size_t>(off) + j] = 1;
        }
    }
    return p;
}

std::vector<int32_t> random_tokens(Philox& rng, int64_t n, int64_t V) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
    return t;
}

// Oracle logits (B, T, V) for each padded batch, one oracle process for all.
std::vector<std::vector<double>> oracle_logits(const Qwen2Weights& w, LoraAdapters& lora, bool bf16,
                                               const std::vector<const Padded*>& batches) {
    Oracle o;
    o.add(weight_tensors(w));
    o.add(param_tensors(lora.parameters()));
    o.spec()["config"] = config_json(w.config);
    o.spec()["bf16"] = bf16;
    o.spec()["lora"] = {{"rank", lora.config().rank}, {"alpha", lora.config().alpha}};
    for (size_t i = 0; i < batches.size(); ++i)
        o.spec()["runs"].push_back({{"prefix", std::to_string(i) + "."},
                                    {"tokens", rows_json(batches[i]->tokens, batches[i]->B, batches[i]->T)},
                                    {"mask", rows_json(batches[i]->mask, batches[i]->B, batches[i]->T)},
                                    {"tasks", {"logits"}}});
    o.run();
    std::vector<std::vector<double>> out;
    for (size_t i = 0; i < batches.size(); ++i) out.push_back(o.get(std::to_string(i) + ".logits"));
    return out;
}

// Relative error over real positions only (padded positions are undefined).
double masked_error(const std::vector<float>& got, const std::vector<double>& want, const Padded& p, int64_t V) {
    double diff = 0, scale = 1e-12;
    for (int64_t n = 0; n < p.B * p.T; ++n) {
        if (!p.mask[static_cast<size_t>(n)]) continue;
        for (int64_t v = 0; v < V; ++v) {
            const size_t i = static_cast<size_t>(n * V + v);
            diff = std::max(diff, std::abs(got[i] - want[i]));
            scale = std::max(scale, std::abs(want[i]));
        }
    }
    return diff / scale;
}

std::vector<float> full_logits(Qwen2& m, const Padded& p) {
    m.forward(p.tokens.data(), p.mask.data(), p.B, p.T, false);
    std::vector<float> out(static_cast<size_t>(p.B * p.T * m.config().vocab_size));
    m.logits(out.data());
    return out;
}

void check_against_oracle(WeightType type, double tol) {
    const bool bf16 = type == WeightType::bf16;
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, type);
    LoraAdapters lora = random_lora(c, 11);
    Qwen2 model(w, &lora);
    Philox rng(5, 1);
    const int64_t V = c.vocab_size;

    // 1. one sequence; 2. a left-padded batch of different lengths (pad id 3
    // is a real token id: it must not matter); 3. cached decoding: prefill
    // prompts of lengths 5, 2, 4, then feed 6 tokens per row.
    Padded one = left_pad({random_tokens(rng, 13, V)}, 0);
    Padded batch = left_pad({random_tokens(rng, 13, V), random_tokens(rng, 6, V), random_tokens(rng, 2, V)}, 3);
    std::vector<std::vector<int32_t>> prompts = {random_tokens(rng, 5, V), random_tokens(rng, 2, V),
                                                 random_tokens(rng, 4, V)};
    const int64_t B = 3, P = 5, steps = 6;
    std::vector<std::vector<int32_t>> fed(B);
    std::vector<std::vector<int32_t>> full_rows;
    for (int64_t b = 0; b < B; ++b) {
        fed[static_cast<size_t>(b)] = random_tokens(rng, steps, V);
        auto r = prompts[static_cast<size_t>(b)];
        r.insert(r.end(), fed[static_cast<size_t>(b)].begin(), fed[static_cast<size_t>(b)].end());
        full_rows.push_back(r);
    }
    Padded full = left_pad(full_rows, 0);  // (3, 11): the same columns as the cache
    ASSERT_EQ(full.T, P + steps);
    auto ref = oracle_logits(w, lora, bf16, {&one, &batch, &full});

    double e1 = masked_error(full_logits(model, one), ref[0], one, V);
    EXPECT_LT(e1, tol) << "one sequence, " << (bf16 ? "BF16" : "FP32");
    double e2 = masked_error(full_logits(model, batch), ref[1], batch, V);
    EXPECT_LT(e2, tol) << "left-padded batch, " << (bf16 ? "BF16" : "FP32");
    const std::vector<double>& want = ref[2];
    std::vector<float> own = full_logits(model, full);

    Padded pre = left_pad(prompts, 0);
    KvCache cache(c, B, 16);
    const float* h = model.forward(pre.tokens.data(), pre.mask.data(), B, P, false, &cache);
    std::vector<float> last(static_cast<size_t>(B * c.hidden_size));
    for (int64_t b = 0; b < B; ++b)
        std::copy(h + (b * P + P - 1) * c.hidden_size, h + (b * P + P) * c.hidden_size,
                  last.begin() + b * c.hidden_size);
    std::vector<float> logits(static_cast<size_t>(B * V));
    linear_forward(logits.data(), last.data(), w.output_matrix().view(), B);
    double e_oracle = 0, e_own = 0;
    for (int64_t s = 0; s <= steps; ++s) {
        if (s > 0) {
            std::vector<int32_t> tok(B);
            for (int64_t b = 0; b < B; ++b)
                tok[static_cast<size_t>(b)] = fed[static_cast<size_t>(b)][static_cast<size_t>(s - 1)];
            model.decode_step(cache, tok.data(), logits.data());
        }
        const int64_t col = P - 1 + s;  // the column whose logits this step gives
        std::vector<double> ref_torch(static_cast<size_t>(B * V));
        std::vector<float> ref_own(static_cast<size_t>(B * V));
        for (int64_t b = 0; b < B; ++b)
            for (int64_t v = 0; v < V; ++v) {
                ref_torch[static_cast<size_t>(b * V + v)] = want[static_cast<size_t>((b * full.T + col) * V + v)];
                ref_own[static_cast<size_t>(b * V + v)] = own[static_cast<size_t>((b * full.T + col) * V + v)];
            }
        e_oracle = std::max(e_oracle, rel_max_error(logits, ref_torch));
        e_own = std::max(e_own, rel_max_error(logits, ref_own));
    }
    EXPECT_EQ(cache.S, P + steps);
    EXPECT_LT(e_oracle, tol) << "cached decoding vs torch, " << (bf16 ? "BF16" : "FP32");
    EXPECT_LT(e_own, bf16 ? tol : 1e-5) << "cached decoding vs full forward, " << (bf16 ? "BF16" : "FP32");
    std::printf("[%s] max relative logit error: one %.2e, batch %.2e, decode vs torch %.2e, decode vs full %.2e\n",
                bf16 ? "BF16" : "FP32", e1, e2, e_oracle, e_own);
}

}  // namespace

TEST(Qwen2Forward, Fp32MatchesTorch) { check_against_oracle(WeightType::f32, 1e-5); }

TEST(Qwen2Forward, Bf16MatchesTorchWithTheSameRoundings) { check_against_oracle(WeightType::bf16, 1e-2); }

// The oracle comparison can fail: BF16 logits differ from the FP32 logits of
// the same (BF16-valued) weights by far more than the FP32 tolerance, so the
// roundings are real and the FP32 tolerance discriminates.
TEST(Qwen2Forward, Bf16RoundingIsVisible) {
    Qwen2Config c = small_config();
    Qwen2Weights wb = small_weights(c, WeightType::bf16);
    Qwen2Weights wf = wb;
    for (Matrix* m : {&wf.embed_tokens}) {
        m->f.resize(m->b.size());
        for (size_t i = 0; i < m->b.size(); ++i) m->f[i] = bf16_to_float(m->b[i]);
        m->type = WeightType::f32;
    }
    for (auto& L : wf.layers)
        for (Matrix* m : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj}) {
            m->f.resize(m->b.size());
            for (size_t i = 0; i < m->b.size(); ++i) m->f[i] = bf16_to_float(m->b[i]);
            m->type = WeightType::f32;
        }
    Philox rng(8, 0);
    Padded p = left_pad({random_tokens(rng, 10, c.vocab_size)}, 0);
    Qwen2 mb(wb), mf(wf);
    double e = rel_max_error(full_logits(mb, p), full_logits(mf, p));
    EXPECT_GT(e, 1e-4);
    EXPECT_LT(e, 5e-2);
}

// A row's logits do not depend on its padding or on the other rows.
TEST(Qwen2Forward, RowsIndependentOfPaddingAndBatch) {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::f32);
    Qwen2 model(w);
    Philox rng(9, 0);
    auto a = random_tokens(rng, 4, c.vocab_size), b = random_tokens(rng, 9, c.vocab_size);
    std::vector<float> alone = full_logits(model, left_pad({a}, 0));
    std::vector<float> batched = full_logits(model, left_pad({b, a}, 17));
    const int64_t V = c.vocab_size;
    std::vector<float> row(batched.begin() + (9 + 5) * V, batched.end());  // row 1, columns 5..8
    EXPECT_LT(rel_max_error(row, alone), 1e-5);
}

TEST(Qwen2Forward, RefusesBadTokens) {
    Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::f32);
    Qwen2 model(w);
    std::vector<int32_t> t = {1, 300};
    std::vector<uint8_t> m = {1, 1};
    EXPECT_THROW(model.forward(t.data(), m.data(), 1, 2), Error);
}
