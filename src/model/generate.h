// generate.h — autoregressive generation for a batch of prompts with a KV
// cache: prefill the left-padded prompts, then one decode step per new token.
//
// Only `eos_id` ends a row (finish reason "eos", EOS kept as the row's last
// token); a row that reaches max_new_tokens ends with "length". Sampling is
// greedy or temperature 1 (sampling.h); rows draw in row order, one uniform
// per sampled token of each still-running row, so the tokens depend only on
// the generator's state. Each token's log-prob is log_softmax of the logits
// it was drawn from (the sampling forward's `old_logp`).
//
// independent_rows: each prompt is prefilled alone (its own forward, no
// padding) and placed right-aligned in the batch's cache, then the rows
// decode together. Up to kRowInvariantRows rows (matmul.h), every row's
// tokens and log-probs are then bitwise those it gets generated alone, so
// rows can be batched for speed and still be independent computations.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/qwen2.h"
#include "model/sampling.h"

namespace ppolab {

struct GenerationOptions {
    int64_t max_new_tokens = 64;
    int32_t eos_id = -1;  // -1: no EOS, every row runs to max_new_tokens
    // Further ids that end a row like EOS (the `generate` command honouring a
    // generation_config.json that lists several; the study leaves it empty).
    std::vector<int32_t> extra_eos_ids;
    int32_t pad_id = 0;             // fills the left padding of shorter prompts
    bool greedy = false;            // else temperature-1 full-vocabulary sampling
    bool independent_rows = false;  // see above; at most kRowInvariantRows prompts
};

struct Generation {
    std::vector<int32_t> tokens;  // the new tokens, EOS included when it ended the row
    std::vector<float> logprobs;  // (tokens) log p of each under the sampling forward
    std::string finish_reason;    // "eos" or "length"
};

// cache: B = prompts.size() rows, S_max ≥ longest prompt + max_new_tokens − 1;
// reused across calls (allocated once by the caller at the context limit).
std::vector<Generation> generate(Qwen2& model, KvCache& cache, const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& options, Philox& rng);
// Convenience: allocates a cache of the needed size.
std::vector<Generation> generate(Qwen2& model, const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& options, Philox& rng);
// One generator per row (row_rngs.size() == prompts.size()): row b draws
// from row_rngs[b] only, so its draws do not depend on the other rows or
// on how the rows are batched (overoptimisation's keyed samples).
std::vector<Generation> generate(Qwen2& model, KvCache& cache, const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& options, std::vector<Philox>& row_rngs);
// Convenience: allocates a cache of the needed size.
std::vector<Generation> generate(Qwen2& model, const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& options, std::vector<Philox>& row_rngs);

}  // namespace ppolab
