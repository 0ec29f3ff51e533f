// scoring.h — teacher-forced scoring of (prompt, response) rows: the
// per-token log-probs of actor and reference, the reward model's score and
// the critic's values (SPEC §2–§4), each with its backward.
//
// Batch layout: prompts left-padded to the longest prompt P, responses
// right-padded to the longest response R, T = P + R; so response token j of
// every row sits at column P + j. Masks are by position: `mask` marks real
// tokens, `response_mask` the response tokens (EOS included when the row has
// it). Rows over the limits are refused, never truncated.
//
// Per-token outputs are (B, T) by position: the entry at a response
// position t holds the value for the token at t (zero elsewhere):
//   logp[b, t]   = log p(tokens[b, t] | tokens[b, < t])  (from the hidden state at t − 1)
//   values[b, t] = V before token t = head(hidden[b, t − 1])
//   scores[b]    = head(hidden[b, t_last]), t_last the last position with
//                  response_mask = 1 — never the last index of the batch.
// The log-probs use the chunked lm_logprobs kernels: (B·T × vocab) logits
// never exist.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/lm_head.h"
#include "model/heads.h"
#include "model/qwen2.h"

namespace ppolab {

struct ScoringLimits {
    int64_t max_prompt = 256;   // tokens of the rendered prompt
    int64_t max_response = 64;  // tokens of the response, EOS included
    int64_t max_context = 320;  // prompt + response
};

struct ScoringRow {
    std::vector<int32_t> prompt;    // non-empty
    std::vector<int32_t> response;  // non-empty
};

struct ScoringBatch {
    int64_t B = 0, P = 0, R = 0, T = 0;
    std::vector<int32_t> tokens;         // (B, T) pad_id where not real
    std::vector<uint8_t> mask;           // (B, T) 1 for a real token (2, 3: packed pair branches)
    std::vector<uint8_t> response_mask;  // (B, T) 1 for a response token
    // Packed pairs only: the positions b·T + t whose hidden states the
    // reward head reads, chosen answers first, then rejected (2 per row).
    std::vector<int64_t> reads;
};

// Error naming the row, the limit and the length when a row is over a limit
// or has an empty prompt or response.
ScoringBatch scoring_batch(const std::vector<ScoringRow>& rows, const ScoringLimits& limits, int32_t pad_id);

// The reward model's pairs, packed: rows = [chosen 1..n, rejected 1..n] (the
// Bradley–Terry order), pair i = rows i and n + i with the same prompt. Each
// pair becomes one row [prompt | chosen (mask 2) | rejected (mask 3)],
// left-padded: the prompt is computed once, each answer sees only the
// prompt and itself, with the positions it would have alone (qwen2.h), so
// the scores equal those of scoring_batch(rows) up to float summation order
// (on the seed preset the prompt is ~65 of a pair's ~76 tokens per answer).
// `reads` holds the 2n last answer tokens in the order of rows. Every row is
// checked against the limits as in scoring_batch; pairs whose prompts
// differ are an Error. reward_scores and response_logprobs take such a batch
// (the first token of a rejected answer is produced by the prompt's last
// position, as in its own row); critic_values does not.
ScoringBatch packed_pair_batch(const std::vector<ScoringRow>& rows, const ScoringLimits& limits, int32_t pad_id);

// Positions (b·T + t) of response tokens, row-major; and t_last of each row
// (of a packed pair batch: its `reads`).
std::vector<int64_t> response_positions(const ScoringBatch& batch);
std::vector<int64_t> last_response_positions(const ScoringBatch& batch);  // (B) Error if a row has none

// Runs the model over a scoring batch and keeps what the backwards need.
// Each *_backward must follow its forward (with for_backward = true) and
// accumulates into the model's trainable parameters (LoRA, full mode) and
// the head.
class Scorer {
public:
    explicit Scorer(Qwen2& model) : model_(model) {}
    Scorer(const Scorer&) = delete;  // one scorer per model: the kept logits belong to its last forward
    Scorer& operator=(const Scorer&) = delete;

    void response_logprobs(const ScoringBatch& batch, float* logp, bool for_backward = false);  // (B, T)
    void response_logprobs_backward(const ScoringBatch& batch, const float* dlogp);             // (B, T)

    void reward_scores(const ScoringBatch& batch, const ScalarHead& head, float* scores,
                       bool for_backward = false);  // (B), or (reads) of a packed pair batch
    void reward_scores_backward(const ScoringBatch& batch, ScalarHead& head, const float* dscores);

    void critic_values(const ScoringBatch& batch, const ScalarHead& head, float* values,
                       bool for_backward = false);  // (B, T)
    void critic_values_backward(const ScoringBatch& batch, ScalarHead& head, const float* dvalues);

    Qwen2& model() { return model_; }
    // The final hidden states the last forward read (M, H): after
    // response_logprobs, the rows at response_positions(batch)[i] − 1, the
    // prefixes that produce the response tokens (sequence_kl.h takes them).
    const std::vector<float>& selected_hidden() const { return sel_; }

private:
    // Gathers hidden rows src[i] into sel_ (M, H).
    void gather(const std::vector<int64_t>& src);
    // dhidden_ (B, T, H) = 0, then rows src[i] get dsel_[i]; model backward.
    void scatter_backward(const std::vector<int64_t>& src);

    Qwen2& model_;
    std::vector<int64_t> src_;      // (M) hidden rows read
    std::vector<int32_t> targets_;  // (M)
    std::vector<float> sel_;        // (M, H)
    std::vector<float> dsel_;       // (M, H)
    std::vector<float> out_;        // (M)
    std::vector<float> dout_;       // (M)
    std::vector<float> dhidden_;    // (B, T, H)
    LmKeep keep_;                   // the forward's logits for the backward
};

}  // namespace ppolab
