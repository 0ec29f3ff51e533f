// test_lora_peft.cpp — ppolab's LoRA projection (model/lora.h) against the real
// PEFT library (tests/model/lora_peft_ref.py, PEFT 0.13.2 on Debian's torch,
// installed by scripts/test-venv.sh): the same base (with bias), A, B, r 8,
// α 16, input and output gradient; the output y and the gradients of the
// input, A and B compared, with a BF16 base and with an FP32 base, at a row
// count of the small-M path (8) and of oneDNN's (16); and the export's round
// trip: a ppolab checkpoint folder and PEFT export loaded by transformers and
// PEFT (tests/model/peft_logits_ref.py) give ppolab's logits. Not a skippable
// oracle: without peft the test fails and says what to install.
//
// Inputs: Gaussian A, B (so the branch is as large as the base product: a
// missing or misscaled branch is off by far more than any tolerance), BF16
// values for x, dy, W and bias (what a BF16 model's activations and a BF16
// checkpoint hold), α/r = 2 (a power of two: scaling rounds nothing).
//
// Tolerances, from what each side rounds (u = 2⁻²⁴; ulp(v) of BF16 =
// 2^(⌊log2|v|⌋ − 7); S = the same sums over absolute values, in double):
//  * FP32 base: both sides compute y = Wx + b + 2·B(Ax), dx = Wᵀdy + 2·Aᵀ(Bᵀdy),
//    dA = 2·(Bᵀdy)ᵀx, dB = 2·dyᵀ(Ax) in FP32, in different orders; each
//    nested sum of n terms is within γ_n·S of the exact value (Higham 3.5),
//    so the two differ by at most 2·γ_n·S, n = in + out + r + M (a bound on
//    every nesting depth here).
//  * BF16 base: PEFT runs the base in BF16 — W·x accumulated in FP32 and the
//    output rounded to BF16 (the bias added inside or after, so up to two
//    roundings of |Wx| + |b|) — then adds the FP32 branch and rounds the sum
//    to BF16; ppolab sums base, bias and branch in FP32 and rounds once
//    (qwen2.h). So |Δy| ≤ ulp(|Wx| + |b|) + ulp(|y|) + 2·γ_n·S. For dx,
//    PEFT's BF16 input receives the base's BF16 gradient, the branch's
//    gradient cast to BF16 and their BF16 sum (three half-ulp roundings);
//    ppolab's FP32 dx has none: |Δdx| ≤ 1.5·ulp(max(|Wᵀdy|, |branch|,
//    |dx|)) + 2·γ_n·S. dA and dB are FP32 on both sides (dy arrives in FP32
//    from the output's cast; x is BF16-exact): the FP32 bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/hf_folder.h"
#include "model/lora.h"
#include "model/qwen2.h"
#include "model/tensor_table.h"
#include "test_qwen2_common.h"
#include "training/oracle_util.h"
#include "training/peft.h"
#include "util/bf16.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/rng.h"

using namespace ppolab;
using ppolab::test::Output;
using ppolab::test::ppolab_binary;
using ppolab::test::run_shell;

namespace {

constexpr int64_t kRank = 8;
constexpr double kAlpha = 16.0;

double ulp_bf16(double v) {
    v = std::fabs(v);
    if (v == 0.0) return 0.0;
    return std::ldexp(1.0, std::ilogb(v) - 7);
}

struct Case {
    std::string name;
    bool bf16 = false;
    int64_t M = 0, in = 0, out = 0;
    std::vector<float> x, W, bias, A, B, dy;  // BF16-exact x, W, bias, dy; Gaussian A, B
    // ppolab's results
    std::vector<float> y, dx, dA, dB;
};

std::vector<float> bf16_exact(int64_t n, double scale, Philox& rng) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = round_to_bf16(static_cast<float>(rng.normal() * scale));
    return v;
}

Case make_case(const std::string& name, bool bf16, int64_t M, int64_t in, int64_t out, uint64_t seed) {
    Philox rng(seed, 0);
    Case c{name, bf16, M, in, out, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
    c.x = bf16_exact(M * in, 1.0, rng);
    c.W = bf16_exact(out * in, 1.0 / std::sqrt(static_cast<double>(in)), rng);
    c.bias = bf16_exact(out, 0.5, rng);
    c.A.resize(static_cast<size_t>(kRank * in));
    for (float& a : c.A) a = static_cast<float>(rng.normal() / std::sqrt(static_cast<double>(in)));
    c.B.resize(static_cast<size_t>(out * kRank));
    for (float& b : c.B) b = static_cast<float>(rng.normal() / std::sqrt(static_cast<double>(kRank)) * 0.5);
    c.dy = bf16_exact(M * out, 1.0, rng);
    return c;
}

// ppolab's projection forward and backward on the case.
void run_ppolab(Case& c) {
    Matrix W;
    W.type = c.bf16 ? WeightType::bf16 : WeightType::f32;
    W.rows = c.out;
    W.cols = c.in;
    if (c.bf16) {
        for (float w : c.W) W.b.push_back(float_to_bf16(w));
    } else {
        W.f = c.W;
    }
    W.freeze();  // the study's frozen base (prepacked where it is BF16)
    LoraAdapter a;
    a.rank = kRank;
    a.in = c.in;
    a.out = c.out;
    a.scale = static_cast<float>(kAlpha / kRank);
    a.A = c.A;
    a.B = c.B;
    a.dA.assign(a.A.size(), 0.f);
    a.dB.assign(a.B.size(), 0.f);
    c.y.assign(static_cast<size_t>(c.M * c.out), 0.f);
    std::vector<float> mid(static_cast<size_t>(c.M * kRank)), scratch(static_cast<size_t>(c.M * kRank));
    projection_forward(c.y.data(), mid.data(), c.x.data(), W, c.bias.data(), &a, c.M);
    c.dx.assign(static_cast<size_t>(c.M * c.in), 0.f);
    ProjectionGrads g;
    g.adapter = &a;
    projection_backward(c.dx.data(), g, c.dy.data(), c.x.data(), mid.data(), W, &a, c.M, scratch.data());
    c.dA = a.dA;
    c.dB = a.dB;
}

// The exact results in double, with the magnitudes that bound their FP32
// evaluation (absolute values everywhere) and, for the BF16 rules, the base
// and branch parts on their own.
struct Exact {
    std::vector<double> y, y_abs, y_base_abs;          // (M, out)
    std::vector<double> dx, dx_abs, dx_base, dx_lora;  // (M, in)
    std::vector<double> dA, dA_abs, dB, dB_abs;
};

Exact exact(const Case& c) {
    const double s = kAlpha / kRank;
    const int64_t M = c.M, I = c.in, O = c.out, R = kRank;
    Exact e;
    std::vector<double> ax(M * R), ax_abs(M * R), bdy(M * R), bdy_abs(M * R);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t r = 0; r < R; ++r) {
            for (int64_t i = 0; i < I; ++i) {
                ax[m * R + r] += double(c.A[r * I + i]) * c.x[m * I + i];
                ax_abs[m * R + r] += std::fabs(double(c.A[r * I + i]) * c.x[m * I + i]);
            }
            for (int64_t o = 0; o < O; ++o) {
                bdy[m * R + r] += double(c.B[o * R + r]) * c.dy[m * O + o];
                bdy_abs[m * R + r] += std::fabs(double(c.B[o * R + r]) * c.dy[m * O + o]);
            }
        }
    e.y.assign(M * O, 0);
    e.y_abs.assign(M * O, 0);
    e.y_base_abs.assign(M * O, 0);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t o = 0; o < O; ++o) {
            double base = c.bias[o], base_abs = std::fabs(c.bias[o]), lora = 0, lora_abs = 0;
            for (int64_t i = 0; i < I; ++i) {
                base += double(c.W[o * I + i]) * c.x[m * I + i];
                base_abs += std::fabs(double(c.W[o * I + i]) * c.x[m * I + i]);
            }
            for (int64_t r = 0; r < R; ++r) {
                lora += s * c.B[o * R + r] * ax[m * R + r];
                lora_abs += s * std::fabs(double(c.B[o * R + r])) * ax_abs[m * R + r];
            }
            e.y[m * O + o] = base + lora;
            e.y_abs[m * O + o] = base_abs + lora_abs;
            e.y_base_abs[m * O + o] = base_abs;
        }
    e.dx.assign(M * I, 0);
    e.dx_abs.assign(M * I, 0);
    e.dx_base.assign(M * I, 0);
    e.dx_lora.assign(M * I, 0);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < I; ++i) {
            double b = 0, b_abs = 0, l = 0, l_abs = 0;
            for (int64_t o = 0; o < O; ++o) {
                b += double(c.W[o * I + i]) * c.dy[m * O + o];
                b_abs += std::fabs(double(c.W[o * I + i]) * c.dy[m * O + o]);
            }
            for (int64_t r = 0; r < R; ++r) {
                l += s * c.A[r * I + i] * bdy[m * R + r];
                l_abs += s * std::fabs(double(c.A[r * I + i])) * bdy_abs[m * R + r];
            }
            e.dx[m * I + i] = b + l;
            e.dx_abs[m * I + i] = b_abs + l_abs;
            e.dx_base[m * I + i] = b;
            e.dx_lora[m * I + i] = l;
        }
    e.dA.assign(R * I, 0);
    e.dA_abs.assign(R * I, 0);
    for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < I; ++i)
            for (int64_t m = 0; m < M; ++m) {
                e.dA[r * I + i] += s * bdy[m * R + r] * c.x[m * I + i];
                e.dA_abs[r * I + i] += s * bdy_abs[m * R + r] * std::fabs(double(c.x[m * I + i]));
            }
    e.dB.assign(O * R, 0);
    e.dB_abs.assign(O * R, 0);
    for (int64_t o = 0; o < O; ++o)
        for (int64_t r = 0; r < R; ++r)
            for (int64_t m = 0; m < M; ++m) {
                e.dB[o * R + r] += s * c.dy[m * O + o] * ax[m * R + r];
                e.dB_abs[o * R + r] += s * std::fabs(double(c.dy[m * O + o])) * ax_abs[m * R + r];
            }
    return e;
}

// got (ppolab) against peft, element by element, each within bound(i);
// both also near the exact value (a shared mistake would not pass).
template <class Bound>
::testing::AssertionResult within(const std::string& what, const std::vector<float>& ours, const json& theirs,
                                  const std::vector<double>& exact_values, Bound bound) {
    if (theirs.size() != ours.size())
        return ::testing::AssertionFailure()
               << what << ": PEFT gave " << theirs.size() << " values, ppolab " << ours.size();
    double worst = 0;  // max |ppolab − PEFT| / bound, printed for the log
    for (size_t i = 0; i < ours.size(); ++i) {
        const double p = theirs[i].get<double>(), b = bound(i);
        if (b > 0) worst = std::max(worst, std::fabs(ours[i] - p) / b);
        if (std::fabs(ours[i] - p) > b)
            return ::testing::AssertionFailure()
                   << what << "[" << i << "]: ppolab " << ours[i] << ", PEFT " << p << ", |difference| "
                   << std::fabs(ours[i] - p) << " > bound " << b << " (exact " << exact_values[i] << ")";
        if (std::fabs(ours[i] - exact_values[i]) > b)
            return ::testing::AssertionFailure()
                   << what << "[" << i << "]: ppolab " << ours[i] << " is " << std::fabs(ours[i] - exact_values[i])
                   << " from the exact value " << exact_values[i] << " > bound " << b;
    }
    std::printf("  %-3s max |ppolab - PEFT| / bound = %.3f\n", what.c_str(), worst);
    return ::testing::AssertionSuccess();
}

// Runs tests/model/SCRIPT with ARGS under $PPOLAB_PYTHON, its output in
// dir/log.txt; exit code 3 (peft, transformers missing) says what to install.
::testing::AssertionResult run_oracle(const std::string& script, const std::vector<std::string>& args,
                                      const fs::path& dir) {
    std::string cmd = "'" + test::python() + "' '" + (test::source_dir() / "tests/model" / script).string() + "'";
    for (const std::string& a : args) cmd += " '" + a + "'";
    cmd += " > '" + (dir / "log.txt").string() + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3)
        return ::testing::AssertionFailure()
               << "peft/transformers are not importable by $PPOLAB_PYTHON (" << test::python()
               << "): scripts/test-venv.sh installs them. " << read_file(dir / "log.txt");
    if (rc != 0) return ::testing::AssertionFailure() << script << " failed: " << read_file(dir / "log.txt");
    return ::testing::AssertionSuccess();
}

// The logits (T, V) of one row under a model with optional adapters.
std::vector<float> model_logits(const Qwen2Weights& w, LoraAdapters* adapters, const std::vector<int32_t>& ids) {
    const int64_t T = static_cast<int64_t>(ids.size());
    Qwen2 model(w, adapters);
    std::vector<uint8_t> mask(ids.size(), 1);
    model.forward(ids.data(), mask.data(), 1, T, false);
    std::vector<float> out(static_cast<size_t>(T * w.config.vocab_size));
    model.logits(out.data());
    return out;
}

}  // namespace

TEST(LoraPeft, ProjectionAndGradientsMatchPeft) {
    std::vector<Case> cases = {
        make_case("fp32_small_m", false, 8, 96, 80, 1),
        make_case("fp32_dnnl", false, 16, 96, 80, 2),
        make_case("bf16_small_m", true, 8, 96, 80, 3),
        make_case("bf16_dnnl", true, 16, 96, 80, 4),
    };
    fs::path dir = test::fresh_temp_dir("lora_peft");
    json spec = {{"cases", json::array()}};
    std::vector<float> data;
    for (Case& c : cases) {
        run_ppolab(c);
        json offsets;
        for (auto [name, v] : std::vector<std::pair<const char*, const std::vector<float>*>>{
                 {"x", &c.x}, {"W", &c.W}, {"bias", &c.bias}, {"A", &c.A}, {"B", &c.B}, {"dy", &c.dy}}) {
            offsets[name] = data.size();
            data.insert(data.end(), v->begin(), v->end());
        }
        spec["cases"].push_back({{"name", c.name},
                                 {"bf16", c.bf16},
                                 {"M", c.M},
                                 {"in", c.in},
                                 {"out", c.out},
                                 {"rank", kRank},
                                 {"alpha", kAlpha},
                                 {"tensors", offsets}});
    }
    fs::create_directories(dir / "in");
    write_file_atomic(dir / "in" / "case.json", spec.dump());
    write_file_atomic(dir / "in" / "tensors.f32",
                      std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float)));
    ASSERT_TRUE(run_oracle("lora_peft_ref.py", {(dir / "in").string(), (dir / "out.json").string()}, dir));
    const json r = read_json_file(dir / "out.json");
    std::printf("oracle: torch %s, peft %s, transformers %s\n", r["versions"]["torch"].get<std::string>().c_str(),
                r["versions"]["peft"].get<std::string>().c_str(),
                r["versions"]["transformers"].get<std::string>().c_str());
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        std::printf("%s:\n", c.name.c_str());
        const json& p = r["cases"][c.name];
        EXPECT_EQ(p["scaling"].get<double>(), kAlpha / kRank);
        EXPECT_EQ(p["y_dtype"], c.bf16 ? "torch.bfloat16" : "torch.float32");
        const Exact e = exact(c);
        const double u = std::ldexp(1.0, -24);
        const double n = static_cast<double>(c.in + c.out + kRank + c.M);
        const double gamma2 = 2 * n * u / (1 - n * u);
        auto fp32 = [&](const std::vector<double>& abs) { return [&, abs](size_t i) { return gamma2 * abs[i]; }; };
        if (c.bf16) {
            EXPECT_TRUE(within("y", c.y, p["y"], e.y, [&](size_t i) {
                return ulp_bf16(e.y_base_abs[i]) + ulp_bf16(e.y[i]) + gamma2 * e.y_abs[i];
            }));
            EXPECT_TRUE(within("dx", c.dx, p["dx"], e.dx, [&](size_t i) {
                const double big = std::max({std::fabs(e.dx_base[i]), std::fabs(e.dx_lora[i]), std::fabs(e.dx[i])});
                return 1.5 * ulp_bf16(big) + gamma2 * e.dx_abs[i];
            }));
        } else {
            EXPECT_TRUE(within("y", c.y, p["y"], e.y, fp32(e.y_abs)));
            EXPECT_TRUE(within("dx", c.dx, p["dx"], e.dx, fp32(e.dx_abs)));
        }
        EXPECT_TRUE(within("dA", c.dA, p["dA"], e.dA, fp32(e.dA_abs)));
        EXPECT_TRUE(within("dB", c.dB, p["dB"], e.dB, fp32(e.dB_abs)));
        // The comparison has teeth: the branch moves y by far more than the bound.
        double branch = 0, bound = 0;
        for (size_t i = 0; i < e.y.size(); ++i) {
            double base = c.bias[i % static_cast<size_t>(c.out)];
            const int64_t m = static_cast<int64_t>(i) / c.out, o = static_cast<int64_t>(i) % c.out;
            for (int64_t k = 0; k < c.in; ++k) base += double(c.W[o * c.in + k]) * c.x[m * c.in + k];
            branch = std::max(branch, std::fabs(e.y[i] - base));
            bound = std::max(bound, ulp_bf16(e.y_base_abs[i]) + ulp_bf16(e.y[i]) + gamma2 * e.y_abs[i]);
        }
        EXPECT_GT(branch, 20 * bound) << "the LoRA branch is too small for the test to see it";
    }
    fs::remove_all(dir);
}

// The round trip ppolab → PEFT → logits: a random Qwen2 (random norms and
// biases) saved as a Hugging Face folder (BF16), random adapters on all seven
// projections (B ≠ 0) exported for PEFT; ppolab reads the folder back widened
// to FP32, transformers loads it in float32, PEFT adds the export, and both
// compute the logits of one sequence. Both sides are FP32 throughout with
// different operation orders (sums of ≤ 96 terms over 2 layers: differences
// of a few 1e-6 expected); 1e-4 is far below what the adapter changes (the
// test checks that the logits without it are farther off by 100× at least).
TEST(LoraPeft, ExportedAdapterGivesTheSameLogitsInTransformers) {
    using namespace ppolab::test;
    const Qwen2Config c = small_config();
    Qwen2Weights w = small_weights(c, WeightType::f32, 17);
    LoraAdapters lora = random_lora(c, 23, 0.05);
    fs::path dir = test::fresh_temp_dir("peft_logits");
    save_checkpoint(dir / "model", w, qwen_model_dir(), json{{"eos_token_id", 151645}});
    PeftInfo info;
    info.rank = lora.config().rank;
    info.alpha = lora.config().alpha;
    info.base_model = "random-qwen2";
    export_peft(dir / "adapter", lora.parameters(), info);
    const std::vector<int32_t> ids = {5, 17, 233, 42, 0, 299, 64, 8};
    const int64_t T = static_cast<int64_t>(ids.size()), V = c.vocab_size;
    // The folder holds BF16 (its format); both sides read it back widened to FP32.
    const Qwen2Weights saved = load_checkpoint(dir / "model", WeightType::f32);
    Qwen2 model(saved, &lora);
    std::vector<uint8_t> mask(ids.size(), 1);
    model.forward(ids.data(), mask.data(), 1, T, false);
    std::vector<float> ours(static_cast<size_t>(T * V));
    model.logits(ours.data());
    std::string list;
    for (int32_t t : ids) list += (list.empty() ? "" : ",") + std::to_string(t);
    fs::create_directories(dir / "out");
    ASSERT_TRUE(run_oracle("peft_logits_ref.py",
                           {(dir / "model").string(), (dir / "adapter").string(), list, (dir / "out").string()}, dir));
    const json r = read_json_file(dir / "out" / "out.json");
    ASSERT_EQ(r["T"].get<int64_t>(), T);
    ASSERT_EQ(r["V"].get<int64_t>(), V);
    auto load = [&](const char* name) {
        const std::string bytes = read_file(dir / "out" / name);
        EXPECT_EQ(bytes.size(), ours.size() * sizeof(float)) << name;
        std::vector<float> v(ours.size());
        std::memcpy(v.data(), bytes.data(), std::min(bytes.size(), v.size() * sizeof(float)));
        return v;
    };
    const std::vector<float> with = load("with.f32"), without = load("without.f32");
    double worst = 0, adapter_effect = 0;
    for (size_t i = 0; i < ours.size(); ++i) {
        worst = std::max(worst, std::fabs(double(ours[i]) - with[i]));
        adapter_effect = std::max(adapter_effect, std::fabs(double(ours[i]) - without[i]));
    }
    std::printf("logits: max |ppolab - PEFT| %.3g, max |ppolab - base without adapter| %.3g\n", worst, adapter_effect);
    EXPECT_LE(worst, 1e-4) << "ppolab's logits differ from transformers + PEFT on the exported adapter";
    EXPECT_GE(adapter_effect, 1e-2) << "the adapter hardly changes the logits: the comparison would not see it";
    fs::remove_all(dir);
}

// merge_lora (what `ppolab export merged` writes): every merged weight of a
// BF16 base within half a BF16 ulp (plus the FP32 step) of W + (α/r)·B·A
// computed in double, everything else bit for bit the base; transformers
// loads the saved folder and gives ppolab's logits of the same folder (both
// FP32, as the round trip above); and the merged model stays close to the
// adapted one: the per-weight BF16 rounding moves the logits by less than a
// tenth of what the adapter itself changes.
TEST(LoraPeft, MergedWeightsLoadInTransformersAndKeepTheAdapter) {
    using namespace ppolab::test;
    const Qwen2Config c = small_config();
    const Qwen2Weights base = small_weights(c, WeightType::bf16, 29);
    LoraAdapters lora = random_lora(c, 31, 0.05);
    const Qwen2Weights merged = merge_lora(base, lora);
    int64_t changed = 0;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        for (const ProjectionInfo& p : kProjections) {
            const Matrix& W = base.layers[static_cast<size_t>(l)].*p.weight;
            const Matrix& Wm = merged.layers[static_cast<size_t>(l)].*p.weight;
            const LoraAdapter* a = lora.get(l, p.proj);
            ASSERT_NE(a, nullptr);
            ASSERT_EQ(Wm.type, WeightType::bf16);
            for (int64_t o = 0; o < W.rows; ++o)
                for (int64_t i = 0; i < W.cols; ++i) {
                    double delta = 0;
                    for (int64_t k = 0; k < a->rank; ++k) delta += double(a->B[o * a->rank + k]) * a->A[k * W.cols + i];
                    const double exact_w = W.at(o, i) + double(a->scale) * delta;
                    const double bound = 0.5 * ulp_bf16(exact_w) + std::ldexp(std::fabs(exact_w), -24);
                    ASSERT_LE(std::fabs(Wm.at(o, i) - exact_w), bound)
                        << "layer " << l << " " << p.name << " [" << o << ", " << i << "]";
                    changed += Wm.b[o * W.cols + i] != W.b[o * W.cols + i];
                }
        }
    EXPECT_GT(changed, 1000) << "the adapters hardly changed the weights: the test would not see a lost merge";
    EXPECT_EQ(merged.embed_tokens.b, base.embed_tokens.b);
    EXPECT_EQ(merged.norm, base.norm);
    for (size_t l = 0; l < base.layers.size(); ++l) {
        EXPECT_EQ(merged.layers[l].q_bias, base.layers[l].q_bias);
        EXPECT_EQ(merged.layers[l].input_layernorm, base.layers[l].input_layernorm);
    }
    // The saved folder in transformers (float32) against ppolab reading it back in FP32.
    fs::path dir = test::fresh_temp_dir("merged_logits");
    save_checkpoint(dir / "merged", merged, qwen_model_dir(), json{{"eos_token_id", 151645}});
    save_checkpoint(dir / "base", base, qwen_model_dir(), json{{"eos_token_id", 151645}});
    PeftInfo info;
    info.base_model = "random-qwen2";
    export_peft(dir / "none", LoraAdapters(c, LoraConfig{}, 1).parameters(), info);  // B = 0: the base itself
    const std::vector<int32_t> ids = {7, 250, 3, 99, 41, 0, 12};
    const int64_t T = static_cast<int64_t>(ids.size()), V = c.vocab_size;
    std::string list;
    for (int32_t t : ids) list += (list.empty() ? "" : ",") + std::to_string(t);
    fs::create_directories(dir / "out");
    ASSERT_TRUE(run_oracle("peft_logits_ref.py",
                           {(dir / "merged").string(), (dir / "none").string(), list, (dir / "out").string()}, dir));
    const std::string bytes = read_file(dir / "out" / "without.f32");  // transformers on the merged folder
    ASSERT_EQ(bytes.size(), static_cast<size_t>(T * V) * sizeof(float));
    std::vector<float> theirs(static_cast<size_t>(T * V));
    std::memcpy(theirs.data(), bytes.data(), bytes.size());
    auto logits_of = [&](const Qwen2Weights& w, LoraAdapters* adapters) { return model_logits(w, adapters, ids); };
    const Qwen2Weights merged32 = load_checkpoint(dir / "merged", WeightType::f32);
    const Qwen2Weights base32 = load_checkpoint(dir / "base", WeightType::f32);
    const std::vector<float> ours_merged = logits_of(merged32, nullptr);
    const std::vector<float> adapted = logits_of(base32, &lora);  // the policy, FP32, unmerged
    const std::vector<float> plain = logits_of(base32, nullptr);
    double folder = 0, merge_effect = 0, adapter_effect = 0;
    for (size_t i = 0; i < theirs.size(); ++i) {
        folder = std::max(folder, std::fabs(double(ours_merged[i]) - theirs[i]));
        merge_effect = std::max(merge_effect, std::fabs(double(theirs[i]) - adapted[i]));
        adapter_effect = std::max(adapter_effect, std::fabs(double(adapted[i]) - plain[i]));
    }
    std::printf("merged: |ppolab - transformers| %.3g on the folder; |merged - adapted| %.3g; adapter effect %.3g\n",
                folder, merge_effect, adapter_effect);
    EXPECT_LE(folder, 1e-4) << "transformers reads the merged folder differently from ppolab";
    EXPECT_GE(adapter_effect, 0.1) << "the adapter hardly changes the logits: the comparison would not see it";
    EXPECT_LE(merge_effect, 0.1 * adapter_effect) << "merging lost more than a tenth of what the adapter does";
    fs::remove_all(dir);
}

// An adapter written by PEFT itself (tests/model/peft_write_ref.py: r 4,
// α 12, q/v/down only, layer 1 only, lora_dropout 0.1) read by read_peft +
// lora_from_peft: ppolab's FP32 logits with it equal PEFT's (both FP32, the
// bound of the round trip above); `ppolab score --adapter` reads the same
// folder into the same numbers as the in-process model; options that change
// the arithmetic, and an adapter made for another shape, are refused with an
// error naming the field or the tensor.
TEST(LoraPeft, AnAdapterWrittenByPeftLoadsWithItsOwnChoices) {
    using namespace ppolab::test;
    const Qwen2Config c = small_config();
    const Qwen2Weights base = small_weights(c, WeightType::bf16, 37);
    fs::path dir = test::fresh_temp_dir("peft_written");
    save_checkpoint(dir / "model", base, qwen_model_dir(), json{{"eos_token_id", 151645}});
    const std::vector<int32_t> ids = {11, 200, 5, 77, 0, 31};
    const int64_t T = static_cast<int64_t>(ids.size()), V = c.vocab_size;
    std::string list;
    for (int32_t t : ids) list += (list.empty() ? "" : ",") + std::to_string(t);
    fs::create_directories(dir / "out");
    ASSERT_TRUE(run_oracle("peft_write_ref.py",
                           {(dir / "model").string(), (dir / "adapter").string(), list, (dir / "out").string()}, dir));

    const PeftAdapter read = read_peft(dir / "adapter");
    EXPECT_EQ(read.info.rank, 4);
    EXPECT_EQ(read.info.alpha, 12.0);
    EXPECT_EQ(read.tensors.size(), 6u) << "q, v, down of layer 1, A and B each";
    LoraAdapters lora = lora_from_peft(read, c, "adapter");
    const std::string bytes = read_file(dir / "out" / "with.f32");
    ASSERT_EQ(bytes.size(), static_cast<size_t>(T * V) * sizeof(float));
    std::vector<float> theirs(static_cast<size_t>(T * V));
    std::memcpy(theirs.data(), bytes.data(), bytes.size());
    auto logits_of = [&](const Qwen2Weights& w, LoraAdapters* adapters) { return model_logits(w, adapters, ids); };
    const Qwen2Weights base32 = load_checkpoint(dir / "model", WeightType::f32);
    const std::vector<float> ours = logits_of(base32, &lora), plain = logits_of(base32, nullptr);
    double worst = 0, effect = 0;
    for (size_t i = 0; i < ours.size(); ++i) {
        worst = std::max(worst, std::fabs(double(ours[i]) - theirs[i]));
        effect = std::max(effect, std::fabs(double(plain[i]) - theirs[i]));
    }
    std::printf("PEFT-written adapter: max |ppolab - PEFT| %.3g, adapter effect %.3g\n", worst, effect);
    EXPECT_LE(worst, 1e-4);
    EXPECT_GE(effect, 1e-2) << "the adapter hardly changes the logits: the comparison would not see it";

    // score --adapter: the BF16 model of the folder with the same adapters, bit for bit.
    const fs::path dump = dir / "score.f32";
    Output o = run_shell("'" + ppolab_binary() + "' score --model '" + (dir / "model").string() + "' --adapter '" +
                         (dir / "adapter").string() + "' --ids " + list + " --dump-logits '" + dump.string() + "'");
    ASSERT_EQ(o.rc, 0) << o.out;
    const Qwen2Weights base16 = load_checkpoint(dir / "model", WeightType::bf16);
    const std::vector<float> ours16 = logits_of(base16, &lora);
    EXPECT_EQ(read_file(dump), std::string(reinterpret_cast<const char*>(ours16.data()), ours16.size() * 4));
    // generate --adapter reads it too (greedy: the first token is the in-process model's argmax).
    o = run_shell("'" + ppolab_binary() + "' generate --model '" + (dir / "model").string() + "' --adapter '" +
                  (dir / "adapter").string() + "' --raw --prompt 'a b' --greedy --max-new-tokens 1 --json");
    ASSERT_EQ(o.rc, 0) << o.out;
    {
        const json g = json::parse(o.out.substr(o.out.find('{')));
        const std::vector<int32_t> prompt = g["prompt_ids"].get<std::vector<int32_t>>();
        Qwen2 model(base16, &lora);
        std::vector<uint8_t> mask(prompt.size(), 1);
        model.forward(prompt.data(), mask.data(), 1, static_cast<int64_t>(prompt.size()), false);
        std::vector<float> l(static_cast<size_t>(prompt.size()) * static_cast<size_t>(V));
        model.logits(l.data());
        const float* last = l.data() + (prompt.size() - 1) * static_cast<size_t>(V);
        const int32_t argmax = static_cast<int32_t>(std::max_element(last, last + V) - last);
        EXPECT_EQ(g["ids"][0].get<int32_t>(), argmax) << o.out;
    }

    // Refused: what would change the arithmetic, and another model's shapes.
    const json config = read_json_file(dir / "adapter" / "adapter_config.json");
    for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{{"use_dora", true},
                                                                                {"use_rslora", true},
                                                                                {"bias", "lora_only"},
                                                                                {"modules_to_save", {"lm_head"}},
                                                                                {"fan_in_fan_out", true}}) {
        const fs::path bad = dir / ("bad_" + field);
        fs::create_directories(bad);
        fs::copy_file(dir / "adapter" / "adapter_model.safetensors", bad / "adapter_model.safetensors");
        json changed = config;
        changed[field] = value;
        write_file_atomic(bad / "adapter_config.json", changed.dump(2));
        o = run_shell("'" + ppolab_binary() + "' score --model '" + (dir / "model").string() + "' --adapter '" +
                      bad.string() + "' --ids " + list);
        EXPECT_NE(o.rc, 0) << field;
        EXPECT_NE(o.out.find((bad / "adapter_config.json").string() + ": " + field), std::string::npos)
            << field << ": " << o.out;
    }
    Qwen2Config other = c;
    other.intermediate_size = 80;  // down_proj's A is (r, intermediate)
    try {
        lora_from_peft(read, other, "adapter");
        ADD_FAILURE() << "an adapter for another shape was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("mlp.down_proj.lora_A' has shape [4, 96]; this model expects [4, 80]"),
                  std::string::npos)
            << e.what();
    }
    fs::remove_all(dir);
}
