// test_qwen2_common.h — shared pieces of the Qwen2 model tests: a small
// random config, and the bridge to the independent PyTorch oracle
// tests/oracle/qwen2_ref.py (run with $PPOLAB_PYTHON).
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "model/heads.h"
#include "model/init.h"
#include "model/lora.h"
#include "model/qwen2.h"
#include "util/error.h"
#include "util/json.h"
#include "util/rng.h"

namespace ppolab::test {

// 2 layers, width 64, 4 heads, 2 KV heads (head dim 16), MLP 96, vocab 300, tied.
inline Qwen2Config small_config() {
    Qwen2Config c;
    c.vocab_size = 300;
    c.hidden_size = 64;
    c.intermediate_size = 96;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 16;
    c.max_position_embeddings = 512;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 10000.0;
    c.tie_word_embeddings = true;
    return c;
}

// Random weights with random norms and biases (a dropped one cannot go unseen).
inline Qwen2Weights small_weights(const Qwen2Config& c, WeightType type, uint64_t seed = 7, double stddev = 0.08) {
    InitOptions o;
    o.seed = seed;
    o.matrices = type;
    o.stddev = stddev;
    o.randomize_norms_and_biases = true;
    return random_weights(c, o);
}

// LoRA adapters with B drawn at random too (B = 0 would hide every B path).
inline LoraAdapters random_lora(const Qwen2Config& c, uint64_t seed, double b_std = 0.05) {
    LoraConfig lc;
    LoraAdapters lora(c, lc, seed);
    Philox rng(seed, 99);
    for (auto& p : lora.parameters())
        if (p.name.ends_with("lora_B"))
            for (int64_t i = 0; i < p.numel(); ++i) p.data[i] = static_cast<float>(rng.normal() * b_std);
    return lora;
}

inline ScalarHead random_head(int64_t H, uint64_t seed) {
    ScalarHead h = ScalarHead::reward_init(H, seed, 0.3);
    h.bias[0] = 0.25f;
    return h;
}

// Every weight by its Hugging Face name, as FP32 (BF16 values convert exactly).
struct NamedTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> values;
};

inline std::vector<NamedTensor> weight_tensors(const Qwen2Weights& w) {
    Qwen2Weights f = w;  // FP32 copy, for qwen2_parameters' names and order
    auto to_f32 = [](Matrix& m) {
        if (m.type == WeightType::f32) return;
        m.f.resize(m.b.size());
        for (size_t i = 0; i < m.b.size(); ++i) m.f[i] = bf16_to_float(m.b[i]);
        m.b.clear();
        m.type = WeightType::f32;
    };
    to_f32(f.embed_tokens);
    for (auto& L : f.layers)
        for (Matrix* m : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj})
            to_f32(*m);
    if (!f.config.tie_word_embeddings) to_f32(f.lm_head);
    std::vector<NamedTensor> out;
    for (auto& p : qwen2_parameters(f, nullptr)) out.push_back({p.name, p.shape, {p.data, p.data + p.numel()}});
    return out;
}

inline std::vector<NamedTensor> param_tensors(ParamList list) {
    std::vector<NamedTensor> out;
    for (auto& p : list) out.push_back({p.name, p.shape, {p.data, p.data + p.numel()}});
    return out;
}

template <typename T>
json rows_json(const std::vector<T>& v, int64_t B, int64_t T_) {
    json rows = json::array();
    for (int64_t b = 0; b < B; ++b) {
        json row = json::array();
        for (int64_t t = 0; t < T_; ++t) row.push_back(v[static_cast<size_t>(b * T_ + t)]);
        rows.push_back(row);
    }
    return rows;
}

// One oracle call: tensors and a case description in, named float64 arrays out.
class Oracle {
public:
    std::map<std::string, std::vector<double>> out;

    void add(const std::vector<NamedTensor>& ts) {
        for (const auto& t : ts) {
            case_["tensors"][t.name] = {{"shape", t.shape}, {"offset", data_.size()}};
            data_.insert(data_.end(), t.values.begin(), t.values.end());
        }
    }
    json& spec() { return case_; }

    void run() {
        static std::atomic<int> counter{0};
        namespace fs = std::filesystem;
        fs::path dir = fs::temp_directory_path() /
                       ("ppolab_qwen2_oracle_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        fs::remove_all(dir);
        fs::create_directories(dir / "in");
        {
            std::ofstream f(dir / "in" / "case.json");
            f << case_.dump();
            std::ofstream g(dir / "in" / "tensors.f32", std::ios::binary);
            g.write(reinterpret_cast<const char*>(data_.data()), static_cast<std::streamsize>(data_.size() * 4));
        }
        const char* py = std::getenv("PPOLAB_PYTHON");
        const char* src = std::getenv("PPOLAB_SOURCE_DIR");
        std::string script = std::string(src ? src : ".") + "/tests/oracle/qwen2_ref.py";
        std::string cmd = std::string("\"") + (py ? py : "/usr/bin/python3") + "\" \"" + script + "\" \"" +
                          (dir / "in").string() + "\" \"" + (dir / "out").string() + "\"";
        int rc = std::system(cmd.c_str());
        ASSERT_EQ(rc, 0) << "oracle failed: " << cmd;
        json manifest;
        {
            std::ifstream f(dir / "out" / "out.json");
            f >> manifest;
        }
        const size_t bytes = static_cast<size_t>(fs::file_size(dir / "out" / "out.f64"));
        std::vector<double> all(bytes / 8);
        std::ifstream g(dir / "out" / "out.f64", std::ios::binary);
        g.read(reinterpret_cast<char*>(all.data()), static_cast<std::streamsize>(bytes));
        for (auto& [name, meta] : manifest.items()) {
            size_t n = 1;
            for (auto d : meta["shape"]) n *= d.get<size_t>();
            size_t off = meta["offset"].get<size_t>();
            out[name] = std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(off),
                                            all.begin() + static_cast<std::ptrdiff_t>(off + n));
        }
        fs::remove_all(dir);
    }

    const std::vector<double>& get(const std::string& name) const {
        auto it = out.find(name);
        if (it == out.end()) throw std::runtime_error("oracle output '" + name + "' missing");
        return it->second;
    }

private:
    json case_ = json::object();
    std::vector<float> data_;
};

inline json config_json(const Qwen2Config& c) {
    return {{"vocab_size", c.vocab_size},
            {"hidden_size", c.hidden_size},
            {"intermediate_size", c.intermediate_size},
            {"num_hidden_layers", c.num_hidden_layers},
            {"num_attention_heads", c.num_attention_heads},
            {"num_key_value_heads", c.num_key_value_heads},
            {"head_dim", c.head_dim},
            {"rms_norm_eps", c.rms_norm_eps},
            {"rope_theta", c.rope_theta},
            {"tie_word_embeddings", c.tie_word_embeddings}};
}

// max |got − want| / max(max |want|, floor): one number per tensor, printed on failure.
template <typename A, typename B>
double rel_max_error(const A& got, const B& want, double floor = 1e-12) {
    double diff = 0, scale = floor;
    for (size_t i = 0; i < want.size(); ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
        scale = std::max(scale, std::abs(static_cast<double>(want[i])));
    }
    return diff / scale;
}

}  // namespace ppolab::test

#include "model/scoring.h"

namespace ppolab::test {

// The three losses of the gradient checks, on a scoring batch:
//   ce    = −mean over response tokens of log p(token | prefix)
//   bt    = −mean log σ(s_c − s_r), rows [0, B/2) chosen, [B/2, B) rejected
//   value = 0.5 · mean over response tokens of (V − target)²
// Returns the loss; with `backward` also runs the backward.
enum class Loss { ce, bt, value };
inline const char* loss_name(Loss l) { return l == Loss::ce ? "ce" : l == Loss::bt ? "bt" : "value"; }

inline double run_loss(Loss kind, Scorer& sc, const ScoringBatch& s, ScalarHead& head,
                       const std::vector<float>& targets, bool backward) {
    const int64_t N = s.B * s.T;
    int64_t M = 0;
    for (auto r : s.response_mask) M += r;
    if (kind == Loss::ce) {
        std::vector<float> logp(static_cast<size_t>(N)), d(static_cast<size_t>(N), 0.f);
        sc.response_logprobs(s, logp.data(), backward);
        double loss = 0;
        for (int64_t n = 0; n < N; ++n)
            if (s.response_mask[static_cast<size_t>(n)]) {
                loss -= logp[static_cast<size_t>(n)];
                d[static_cast<size_t>(n)] = -1.f / static_cast<float>(M);
            }
        if (backward) sc.response_logprobs_backward(s, d.data());
        return loss / static_cast<double>(M);
    }
    if (kind == Loss::bt) {
        const int64_t half = s.B / 2;
        std::vector<float> scores(static_cast<size_t>(s.B)), d(static_cast<size_t>(s.B), 0.f);
        sc.reward_scores(s, head, scores.data(), backward);
        double loss = 0;
        for (int64_t i = 0; i < half; ++i) {
            const double diff = scores[static_cast<size_t>(i)] - scores[static_cast<size_t>(i + half)];
            loss += std::log1p(std::exp(-diff));
            const double g = -1.0 / (1.0 + std::exp(diff)) / static_cast<double>(half);  // dL/ds_c
            d[static_cast<size_t>(i)] = static_cast<float>(g);
            d[static_cast<size_t>(i + half)] = static_cast<float>(-g);
        }
        if (backward) sc.reward_scores_backward(s, head, d.data());
        return loss / static_cast<double>(half);
    }
    std::vector<float> values(static_cast<size_t>(N)), d(static_cast<size_t>(N), 0.f);
    sc.critic_values(s, head, values.data(), backward);
    double loss = 0;
    for (int64_t n = 0; n < N; ++n)
        if (s.response_mask[static_cast<size_t>(n)]) {
            const double e = values[static_cast<size_t>(n)] - targets[static_cast<size_t>(n)];
            loss += 0.5 * e * e;
            d[static_cast<size_t>(n)] = static_cast<float>(e / static_cast<double>(M));
        }
    if (backward) sc.critic_values_backward(s, head, d.data());
    return loss / static_cast<double>(M);
}

// Two chosen/rejected pairs of (prompt, response) rows of different lengths:
// prompts left-padded, responses right-padded, so the last batch column is
// padding for every row but one.
inline ScoringBatch pair_batch(int64_t V, uint64_t seed) {
    Philox rng(seed, 3);
    auto toks = [&](int64_t n) {
        std::vector<int32_t> t(static_cast<size_t>(n));
        for (auto& x : t) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
        return t;
    };
    std::vector<ScoringRow> rows = {{toks(5), toks(4)}, {toks(3), toks(2)}, {toks(6), toks(3)}, {toks(2), toks(5)}};
    return scoring_batch(rows, ScoringLimits{}, 0);
}

inline std::vector<float> value_targets(const ScoringBatch& s, uint64_t seed) {
    Philox rng(seed, 4);
    std::vector<float> t(static_cast<size_t>(s.B * s.T), 0.f);
    for (size_t i = 0; i < t.size(); ++i)
        if (s.response_mask[i]) t[i] = static_cast<float>(rng.normal());
    return t;
}

}  // namespace ppolab::test
