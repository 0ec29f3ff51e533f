// bench_model.cpp — whole-model speed on the exact Qwen2.5-0.5B shape (random
// BF16 weights in memory, 2 threads), the workloads of SPEC §11:
//
//   forward  — forward of 1×128 tokens with full logits (128 × 151936)
//   decode   — KV-cached decode: 64 new tokens after a 64-token prompt
//              (tok/s over the 64 decode steps; the prefill is reported apart)
//   lora1    — LoRA (r 8, α 16, all seven projections) fwd + bwd of the mean
//   lora4      token cross-entropy over 1×128 / 4×128 tokens (full-vocab
//              log-softmax through lm_logprobs), adapter gradients accumulated
//
//   lora4-products — the frozen matrix products of lora4's step alone: the
//              seven projections of every layer and the LM head (in chunks
//              of lm_chunk_rows), forward and backward to the input over the
//              same 512 rows, on the same automatic paths, in the step's
//              order (but each LM-head chunk's backward right after its
//              forward); no attention, norms, softmax, SwiGLU or adapters. Its
//              tok/s is what the step could reach if nothing but its frozen
//              products took time (compare.py rounds: what lora4's target
//              needs of it)
//   decode8  — the same for 8 rows decoded together (tok/s of all 8 rows), as
//   decode32   evaluation decoded its independent rows before session 19; for
//              32 rows, as it decodes them now (kRowInvariantRows)
//
//   bench_model [--workload all|forward|decode|decode8|decode32|lora1|lora4|lora4-products] [--reps N]
//               [--freeze]
//               [--ab-amx | --ab-lm-chunk]
//
// --ab-amx alternates, repetition by repetition in one process, the frozen
// base's products on the AMX tiles and on oneDNN (matmul_set_amx_allowed):
// each workload then prints both sides (names ending " [amx]" and
// " [oneDNN]") and "amx_speedup", the median over repetitions of oneDNN's
// time / AMX's time in the same repetition — a ratio the machine's drift
// between runs does not reach. Needs --freeze and AMX tiles.
// --ab-lm-chunk alternates in the same way the LM head's chunks of rows
// (lm_set_chunk_bytes): the default budget (" [lm chunk 160 MiB]") against
// chunks of 64 rows (" [lm chunk 64 rows]"), the engine before session 18;
// "lm_chunk_speedup" is the median of the 64-row time / the default's.
//
// --freeze freezes every base matrix (freeze_base_matrices: prepacked for
// oneDNN) before the workloads, as an engine holding a frozen base may do;
// the names of the results then end in " (frozen base)".
// Prints one JSON line per workload: {"name", "tok_s", "ms", "reps",
// "peak_rss_mib", ...}. The random weights are made once; each workload then
// runs in its own forked child (before any OpenMP thread exists in the
// parent), so that its peak RSS — weights included — is its own.
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "kernels/lm_head.h"
#include "kernels/matmul_backend.h"
#include "model/init.h"
#include "model/kv_cache.h"
#include "model/lora.h"
#include "model/qwen2.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/rng.h"

using namespace ppolab;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Process CPU time (all threads): with one thread, the time the work itself
// took, whatever else the machine was running.
double cpu_s() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double peak_rss_mib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
    Philox rng(seed, 3);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
    return t;
}

std::string suffix;                     // " (frozen base)" with --freeze
enum class Ab { none, amx, lm_chunk };  // --ab-amx, --ab-lm-chunk
Ab ab = Ab::none;

// The sides a workload times in each repetition: the default, or (A/B) the
// engine's choice then the alternative.
std::vector<bool> sides() { return ab != Ab::none ? std::vector<bool>{true, false} : std::vector<bool>{true}; }
void choose_side(bool first) {
    if (ab == Ab::amx) matmul_set_amx_allowed(first);
    if (ab == Ab::lm_chunk) lm_set_chunk_bytes(first ? kLmChunkBytes : 0);
}
const char* side_name(bool first) {
    if (ab == Ab::amx) return first ? " [amx]" : " [oneDNN]";
    return first ? " [lm chunk 160 MiB]" : " [lm chunk 64 rows]";
}
const char* speedup_key() { return ab == Ab::amx ? "amx_speedup" : "lm_chunk_speedup"; }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// secs: wall seconds per repetition; cpus: process CPU seconds per repetition.
void report(const std::string& name, int64_t tokens, const std::vector<double>& secs, const std::vector<double>& cpus,
            const std::string& extra) {
    const double s = median(secs), c = median(cpus);
    std::printf(
        "{\"name\": \"%s\", \"tok_s\": %.2f, \"ms\": %.2f, \"tok_per_cpu_s\": %.2f, \"cpu_ms\": %.2f, "
        "\"threads\": %d, \"reps\": %zu, \"peak_rss_mib\": %.0f%s}\n",
        (name + suffix).c_str(), static_cast<double>(tokens) / s, s * 1e3, static_cast<double>(tokens) / c, c * 1e3,
        omp_get_max_threads(), secs.size(), peak_rss_mib(), extra.c_str());
    std::fflush(stdout);
}

// One report per side; with two, the per-repetition ratio too.
void report_sides(const std::string& name, int64_t tokens, const std::vector<double> (&secs)[2],
                  const std::vector<double> (&cpus)[2], const std::string& extra) {
    if (ab == Ab::none) return report(name, tokens, secs[0], cpus[0], extra);
    std::vector<double> ratio;
    for (size_t r = 0; r < secs[0].size(); ++r) ratio.push_back(secs[1][r] / secs[0][r]);
    const char* key = speedup_key();
    char buf[160];
    std::snprintf(buf, sizeof buf, ", \"%s\": %.3f, \"%s_min\": %.3f, \"%s_max\": %.3f", key, median(ratio), key,
                  *std::min_element(ratio.begin(), ratio.end()), key, *std::max_element(ratio.begin(), ratio.end()));
    report(name + side_name(true), tokens, secs[0], cpus[0], extra + buf);
    report(name + side_name(false), tokens, secs[1], cpus[1], extra);
}

void run_forward(const Qwen2Weights& w, int reps) {
    const int64_t T = 128, V = w.config.vocab_size;
    Qwen2 model(w);
    std::vector<int32_t> tokens = random_tokens(T, V, 1);  // (1, T)
    std::vector<uint8_t> mask(T, 1);                       // (1, T)
    std::vector<float> logits(T * V);                      // (1, T, V)
    std::vector<double> secs[2], cpus[2];
    for (int r = 0; r <= reps; ++r)  // r = 0: warm-up (first touch, primitives)
        for (bool side : sides()) {
            choose_side(side);
            double t0 = now_s(), c0 = cpu_s();
            model.forward(tokens.data(), mask.data(), 1, T, /*save_for_backward=*/false);
            model.logits(logits.data());
            if (r > 0) {
                secs[side ? 0 : 1].push_back(now_s() - t0);
                cpus[side ? 0 : 1].push_back(cpu_s() - c0);
            }
        }
    report_sides("forward 1x128 full logits", T, secs, cpus, "");
}

void run_decode(const Qwen2Weights& w, int64_t B, int reps) {
    const int64_t P = 64, G = 64, V = w.config.vocab_size;
    Qwen2 model(w);
    KvCache cache(w.config, B, P + G);
    std::vector<int32_t> prompt = random_tokens(B * P, V, 2);  // (B, P)
    std::vector<int32_t> fed = random_tokens(B * G, V, 3);     // (G, B) the tokens fed back
    std::vector<uint8_t> mask(B * P, 1);
    std::vector<float> logits(B * V);  // (B, V)
    std::vector<double> secs[2], cpus[2], prefill[2];
    for (int r = 0; r <= reps; ++r)
        for (bool side : sides()) {
            choose_side(side);
            cache.clear();
            double t0 = now_s();
            model.forward(prompt.data(), mask.data(), B, P, /*save_for_backward=*/false, &cache);
            double t1 = now_s(), c1 = cpu_s();
            for (int64_t g = 0; g < G; ++g) model.decode_step(cache, &fed[g * B], logits.data());
            double t2 = now_s();
            if (r > 0) {
                prefill[side ? 0 : 1].push_back(t1 - t0);
                secs[side ? 0 : 1].push_back(t2 - t1);
                cpus[side ? 0 : 1].push_back(cpu_s() - c1);
            }
        }
    // Bytes of weight read per decode step: every matrix once (LM head tied).
    double bytes = 0;
    for (const auto& l : w.layers)
        for (const ProjectionInfo& p : kProjections) bytes += 2.0 * (l.*p.weight).numel();
    bytes += 2.0 * w.output_matrix().numel();
    const double step = median(secs[0]) / G;  // wall seconds per token
    char extra[160];
    std::snprintf(extra, sizeof extra, ", \"prefill_ms\": %.2f, \"weight_gb_s\": %.1f", median(prefill[0]) * 1e3,
                  bytes / step * 1e-9);
    if (ab == Ab::amx) {  // the prefill is where the tiles work: its own ratio
        std::vector<double> ratio;
        for (size_t r = 0; r < prefill[0].size(); ++r) ratio.push_back(prefill[1][r] / prefill[0][r]);
        char more[96];
        std::snprintf(more, sizeof more, ", \"prefill_ms_onednn\": %.2f, \"prefill_amx_speedup\": %.3f",
                      median(prefill[1]) * 1e3, median(ratio));
        std::strncat(extra, more, sizeof extra - std::strlen(extra) - 1);
    }
    report_sides(B == 1 ? std::string("decode 64 after 64") : "decode " + std::to_string(B) + "x64 after 64", B * G,
                 secs, cpus, extra);
}

void run_lora(const Qwen2Weights& w, int64_t B, int reps) {
    const int64_t T = 128, N = B * T, V = w.config.vocab_size, H = w.config.hidden_size;
    LoraAdapters lora(w.config, LoraConfig{}, 50);
    Qwen2 model(w, &lora);
    std::vector<int32_t> tokens = random_tokens(N, V, 4);   // (B, T)
    std::vector<int32_t> targets = random_tokens(N, V, 5);  // (B, T) next tokens
    std::vector<uint8_t> mask(N, 1);
    std::vector<float> logp(N), dlogp(N, -1.f / static_cast<float>(N)), dh(N * H);  // loss = −mean logp
    std::vector<double> secs[2], cpus[2];
    LmKeep keep;  // the forward's logits for the backward, as the engine's Scorer keeps them
    double loss = 0;
    for (int r = 0; r <= reps; ++r)
        for (bool side : sides()) {
            choose_side(side);
            lora.zero_grad();
            double t0 = now_s(), c0 = cpu_s();
            const float* h = model.forward(tokens.data(), mask.data(), B, T, /*save_for_backward=*/true);
            lm_logprobs_forward(logp.data(), h, targets.data(), w.output_matrix().view(), N, &keep);
            lm_logprobs_backward(dh.data(), nullptr, dlogp.data(), h, targets.data(), w.output_matrix().view(), N,
                                 &keep);
            model.backward(dh.data());
            if (r > 0) {
                secs[side ? 0 : 1].push_back(now_s() - t0);
                cpus[side ? 0 : 1].push_back(cpu_s() - c0);
            }
            loss = 0;
            for (float x : logp) loss -= x;
            loss /= static_cast<double>(N);
        }
    char extra[64];
    std::snprintf(extra, sizeof extra, ", \"loss\": %.4f", loss);
    report_sides("lora fwd+bwd CE " + std::to_string(B) + "x128", N, secs, cpus, extra);
}

// lora4's frozen products alone (see the header): per layer the seven
// forwards, the LM head's forward and backward to the input chunk by chunk,
// then per layer (last first) the seven backwards to the input, accumulating
// where the step does (k, v, up). Inputs are BF16 values (the products round
// theirs anyway); the outputs are not read.
void run_products(const Qwen2Weights& w, int64_t B, int reps) {
    const Qwen2Config& c = w.config;
    const int64_t T = 128, N = B * T, H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
    const int64_t Q = c.num_attention_heads * c.head_dim, KV = c.kv_dim(), L = c.num_hidden_layers;
    Philox rng(6, 3);
    auto buffer = [&](int64_t n) {
        std::vector<float> v(static_cast<size_t>(n));
        for (float& x : v) x = round_to_bf16(static_cast<float>(rng.uniform() - 0.5));
        return v;
    };
    // Each product's input and output: x (N, H) into q, k, v; att (N, Q) into o;
    // x into gate, up; act (N, I) into down. Backward: the gradients of those.
    std::vector<float> x = buffer(N * H), att = buffer(N * Q), act = buffer(N * I);
    std::vector<float> dq = buffer(N * Q), dk = buffer(N * KV), dh = buffer(N * H), dI = buffer(N * I);
    std::vector<float> q(N * Q), k(N * KV), o(N * H), gate(N * I), dx(N * H), datt(N * Q), dact(N * I);
    const int64_t chunk = std::min(N, lm_chunk_rows(V));
    std::vector<float> logits(static_cast<size_t>(chunk * V)), dlogits = buffer(chunk * V), dhid(N * H);
    const WeightView head = w.output_matrix().view();
    std::vector<double> secs[2], cpus[2];
    for (int r = 0; r <= reps; ++r)
        for (bool side : sides()) {
            choose_side(side);
            double t0 = now_s(), c0 = cpu_s();
            for (int64_t l = 0; l < L; ++l) {
                const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
                linear_forward(q.data(), x.data(), lw.q_proj.view(), N);
                linear_forward(k.data(), x.data(), lw.k_proj.view(), N);
                linear_forward(k.data(), x.data(), lw.v_proj.view(), N);
                linear_forward(o.data(), att.data(), lw.o_proj.view(), N);
                linear_forward(gate.data(), x.data(), lw.gate_proj.view(), N);
                linear_forward(gate.data(), x.data(), lw.up_proj.view(), N);
                linear_forward(o.data(), act.data(), lw.down_proj.view(), N);
            }
            for (int64_t n0 = 0; n0 < N; n0 += chunk) {
                const int64_t rows = std::min(chunk, N - n0);
                linear_forward(logits.data(), x.data() + n0 * H, head, rows);
                linear_backward_input(dhid.data() + n0 * H, dlogits.data(), head, rows);
            }
            for (int64_t l = L - 1; l >= 0; --l) {
                const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
                linear_backward_input(dact.data(), dh.data(), lw.down_proj.view(), N);
                linear_backward_input(dx.data(), dI.data(), lw.gate_proj.view(), N);
                linear_backward_input(dx.data(), dI.data(), lw.up_proj.view(), N, /*accumulate=*/true);
                linear_backward_input(datt.data(), dh.data(), lw.o_proj.view(), N);
                linear_backward_input(dx.data(), dq.data(), lw.q_proj.view(), N);
                linear_backward_input(dx.data(), dk.data(), lw.k_proj.view(), N, /*accumulate=*/true);
                linear_backward_input(dx.data(), dk.data(), lw.v_proj.view(), N, /*accumulate=*/true);
            }
            if (r > 0) {
                secs[side ? 0 : 1].push_back(now_s() - t0);
                cpus[side ? 0 : 1].push_back(cpu_s() - c0);
            }
        }
    report_sides("lora fwd+bwd CE " + std::to_string(B) + "x128 frozen products alone", N, secs, cpus, "");
}

}  // namespace

int main(int argc, char** argv) {
    std::string workload = "all";
    int reps = 3;
    bool freeze = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--workload" && i + 1 < argc) workload = argv[++i];
        else if (a == "--freeze") freeze = true;
        else if (a == "--ab-amx") ab = Ab::amx;
        else if (a == "--ab-lm-chunk") ab = Ab::lm_chunk;
        else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr,
                         "bench_model: unknown argument '%s'; expected --workload "
                         "all|forward|decode|decode8|decode32|lora1|lora4|lora4-products, "
                         "--reps N, --freeze, --ab-amx, --ab-lm-chunk\n",
                         a.c_str());
            return 2;
        }
    }
    if (!std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(2);
    try {
        InitOptions init;
        init.seed = 1;
        init.matrices = WeightType::bf16;
        Qwen2Weights w = random_weights(model_shape("qwen2.5-0.5b"), init);
        if (freeze) {
            freeze_base_matrices(w);
            suffix = " (frozen base)";
        }
        if (ab == Ab::amx && (!freeze || !matmul_has_amx()))
            fail("bench_model: --ab-amx needs --freeze and AMX tiles (",
                 matmul_has_amx() ? "add --freeze" : "none here", ")");
        std::vector<std::string> todo;
        if (workload == "all") todo = {"forward", "decode", "lora1", "lora4"};
        else if (workload == "forward" || workload == "decode" || workload == "decode8" || workload == "decode32" ||
                 workload == "lora1" || workload == "lora4" || workload == "lora4-products")
            todo = {workload};
        else
            fail("bench_model: --workload '", workload,
                 "'; expected all, forward, decode, decode8, decode32, lora1, lora4 or lora4-products");
        int failures = 0;
        for (const std::string& name : todo) {
            std::fflush(stdout);
            pid_t pid = fork();
            if (pid < 0) fail("bench_model: fork failed");
            if (pid == 0) {
                try {
                    if (name == "forward") run_forward(w, reps);
                    if (name == "decode") run_decode(w, 1, reps);
                    if (name == "decode8") run_decode(w, 8, reps);
                    if (name == "decode32") run_decode(w, 32, reps);
                    if (name == "lora1") run_lora(w, 1, reps);
                    if (name == "lora4") run_lora(w, 4, reps);
                    if (name == "lora4-products") run_products(w, 4, reps);
                } catch (const Error& e) {
                    std::fprintf(stderr, "bench_model %s: %s\n", name.c_str(), e.what());
                    _exit(1);
                }
                std::fflush(stdout);
                _exit(0);
            }
            int status = 0;
            waitpid(pid, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                std::fprintf(stderr, "bench_model: workload %s failed\n", name.c_str());
                ++failures;
            }
        }
        return failures ? 1 : 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
