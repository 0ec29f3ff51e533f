#include "model/generate.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "kernels/matmul.h"
#include "util/error.h"

namespace ppolab {

static int64_t longest(const std::vector<std::vector<int32_t>>& prompts) {
    int64_t P = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        if (prompts[i].empty()) fail("generate: prompt ", i, " is empty");
        P = std::max(P, static_cast<int64_t>(prompts[i].size()));
    }
    return P;
}

// Row b draws from (*row_rngs)[b] when given, else from `shared`.
static std::vector<Generation> generate_rows(Qwen2& model, KvCache& cache,
                                             const std::vector<std::vector<int32_t>>& prompts,
                                             const GenerationOptions& opt, Philox* shared,
                                             std::vector<Philox>* row_rngs) {
    const auto& c = model.config();
    const int64_t B = static_cast<int64_t>(prompts.size()), H = c.hidden_size, V = c.vocab_size;
    if (B == 0) fail("generate: no prompts");
    if (row_rngs && static_cast<int64_t>(row_rngs->size()) != B)
        fail("generate: ", row_rngs->size(), " row generators for ", B, " prompts");
    if (opt.max_new_tokens <= 0) fail("generate: max_new_tokens must be positive, got ", opt.max_new_tokens);
    const int64_t P = longest(prompts);
    if (cache.B != B || cache.S_max < P + opt.max_new_tokens - 1)
        fail("generate: KV cache of (B=", cache.B, ", S_max=", cache.S_max, ") cannot hold ", B, " rows of ", P,
             " prompt + ", opt.max_new_tokens, " new tokens");

    // 1. prefill: the left-padded prompts in one forward, or each prompt alone
    std::vector<float> last(static_cast<size_t>(B * H));  // (B, H) hidden state of each prompt's last token
    if (opt.independent_rows) {
        if (B > kRowInvariantRows)
            fail("generate: ", B, " independent rows; at most ", kRowInvariantRows, " decode bitwise alone");
        cache.clear();
        KvCache one(c, 1, P);
        for (int64_t b = 0; b < B; ++b) {
            const auto& p = prompts[static_cast<size_t>(b)];
            const int64_t Pb = static_cast<int64_t>(p.size());
            const std::vector<uint8_t> ones(static_cast<size_t>(Pb), 1);
            const float* hidden = model.forward(p.data(), ones.data(), 1, Pb, /*save_for_backward=*/false, &one);
            std::memcpy(last.data() + b * H, hidden + (Pb - 1) * H, static_cast<size_t>(H) * sizeof(float));
            cache.place_row(b, one, P);
        }
    } else {
        std::vector<int32_t> tokens(static_cast<size_t>(B * P), opt.pad_id);  // (B, P)
        std::vector<uint8_t> mask(static_cast<size_t>(B * P), 0);             // (B, P)
        for (int64_t b = 0; b < B; ++b) {
            const auto& p = prompts[static_cast<size_t>(b)];
            const int64_t off = b * P + P - static_cast<int64_t>(p.size());
            std::copy(p.begin(), p.end(), tokens.begin() + off);
            std::fill(mask.begin() + off, mask.begin() + (b + 1) * P, 1);
        }
        const float* hidden = model.forward(tokens.data(), mask.data(), B, P, /*save_for_backward=*/false, &cache);
        for (int64_t b = 0; b < B; ++b)
            std::memcpy(last.data() + b * H, hidden + (b * P + P - 1) * H, static_cast<size_t>(H) * sizeof(float));
    }
    std::vector<float> logits(static_cast<size_t>(B * V));  // (B, V)
    linear_forward(logits.data(), last.data(), model.weights().output_matrix().view(), B);

    // 2. sample, then feed the sampled tokens back one step at a time
    std::vector<Generation> out(static_cast<size_t>(B));
    for (auto& g : out) {
        g.tokens.reserve(static_cast<size_t>(opt.max_new_tokens));
        g.logprobs.reserve(static_cast<size_t>(opt.max_new_tokens));
    }
    std::vector<int32_t> next(static_cast<size_t>(B), opt.pad_id);  // (B)
    std::vector<double> uniform(static_cast<size_t>(B));            // (B) this step's draw of each running row
    std::vector<SampledToken> picked(static_cast<size_t>(B));
    // An Error (logits not finite) leaves the parallel loop as the lowest such row's.
    std::vector<std::exception_ptr> errors(static_cast<size_t>(B));
    auto live = [&](int64_t b) { return out[static_cast<size_t>(b)].finish_reason.empty(); };
    for (int64_t step = 0; step < opt.max_new_tokens; ++step) {
        // The draws in row order (one per running row), then each row's token
        // from its logits, rows in parallel (a pass over the vocabulary each).
        if (!opt.greedy)
            for (int64_t b = 0; b < B; ++b)
                if (live(b))
                    uniform[static_cast<size_t>(b)] =
                        (row_rngs ? (*row_rngs)[static_cast<size_t>(b)] : *shared).uniform();
#pragma omp parallel for schedule(dynamic) if (B > 1)
        for (int64_t b = 0; b < B; ++b) {
            if (!live(b)) continue;  // finished rows feed their last token, ignored
            const float* row = logits.data() + b * V;
            try {
                picked[static_cast<size_t>(b)] = opt.greedy
                                                     ? sample_greedy(row, V)
                                                     : sample_temperature1_at(row, V, uniform[static_cast<size_t>(b)]);
            } catch (...) {
                errors[static_cast<size_t>(b)] = std::current_exception();
            }
        }
        for (const std::exception_ptr& e : errors)
            if (e) std::rethrow_exception(e);
        bool running = false;
        for (int64_t b = 0; b < B; ++b) {
            if (!live(b)) continue;
            Generation& g = out[static_cast<size_t>(b)];
            const SampledToken s = picked[static_cast<size_t>(b)];
            g.tokens.push_back(s.token);
            g.logprobs.push_back(s.logp);
            next[static_cast<size_t>(b)] = s.token;
            if (s.token == opt.eos_id ||
                std::find(opt.extra_eos_ids.begin(), opt.extra_eos_ids.end(), s.token) != opt.extra_eos_ids.end())
                g.finish_reason = "eos";
            else if (step + 1 == opt.max_new_tokens) g.finish_reason = "length";
            else running = true;
        }
        if (!running) break;
        model.decode_step(cache, next.data(), logits.data());
    }
    return out;
}

std::vector<Generation> generate(Qwen2& model, KvCache& cache, const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& opt, Philox& rng) {
    return generate_rows(model, cache, prompts, opt, &rng, nullptr);
}

std::vector<Generation> generate(Qwen2& model, KvCache& cache, const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& opt, std::vector<Philox>& row_rngs) {
    return generate_rows(model, cache, prompts, opt, nullptr, &row_rngs);
}

std::vector<Generation> generate(Qwen2& model, const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& options, Philox& rng) {
    KvCache cache(model.config(), static_cast<int64_t>(prompts.size()),
                  longest(prompts) + std::max<int64_t>(options.max_new_tokens - 1, 1));
    return generate(model, cache, prompts, options, rng);
}

std::vector<Generation> generate(Qwen2& model, const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& options, std::vector<Philox>& row_rngs) {
    KvCache cache(model.config(), static_cast<int64_t>(prompts.size()),
                  longest(prompts) + std::max<int64_t>(options.max_new_tokens - 1, 1));
    return generate(model, cache, prompts, options, row_rngs);
}

}  // namespace ppolab
