// pretrain.h — the embedded tiny base model (SPEC §10): `ppolab pretrain`.
//
// From nothing to a Hugging Face folder, in order:
//   1. the base corpus: chat-formatted help requests answered in the rubric's
//      grammar with an action unrelated to the context, prose outside the
//      grammar, optionally "world knowledge" sentences; none of its prompts
//      is a corpus prompt (sha256 against the manifest: check_base_prompts);
//   2. a byte-level BPE tokenizer trained on it, with the ChatML specials;
//   3. a tiny Qwen2 (model_shape(config.shape), vocab = tokenizer size
//      rounded up to a multiple of 64) with FP32 master weights;
//   4. full-parameter AdamW on rows of seq_len tokens packed with whole
//      documents (loss on assistant turns + <|im_end|> and on prose);
//   5. a check of the base on the corpus's validation prompts (greedy and
//      temperature-1 generations scored by the rubric);
//   6. the folder: config.json (eos = <|im_end|>, bos = <|endoftext|>), BF16
//      model.safetensors, tokenizer.json, tokenizer_config.json (ChatML
//      template with the tiny system line), generation_config.json;
//   7. pretrain.json: config, seed, sha256s, loss curve, tokens, tokens/s,
//      the check.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/lm_head.h"
#include "model/qwen2.h"
#include "tokenizer/tokenizer.h"
#include "training/adamw.h"
#include "util/json.h"
#include "util/rng.h"

namespace ppolab {

// The tiny model's own short system line (its ChatML template's default):
// the tiny preset's model.system_prompt, the one place it is written.
std::string tiny_system_prompt();
inline constexpr std::string_view kEndOfText = "<|endoftext|>";
inline constexpr std::string_view kImStart = "<|im_start|>";
inline constexpr std::string_view kImEnd = "<|im_end|>";

// Every number of pretraining; one line per field. The names are those of
// the study config's "pretrain" object (presets/tiny.json) where it has them;
// from_study() reads them from there (plus model.shape, model.system_prompt
// and max_updates).
struct PretrainConfig {
    std::string shape = "tiny";                        // model_shape() name; vocab comes from the tokenizer
    std::string system_prompt = tiny_system_prompt();  // ChatML default system line
    uint64_t seed = 7;                                 // corpus sampling, init, batch order, sampled check
    // base corpus
    int64_t conversations = 6000;  // chat help requests with random-action answers
    int64_t prose = 1500;          // sentences outside the grammar
    bool world_knowledge = false;  // declarative problem -> fix sentences (outside chat)
    // tokenizer
    int64_t tokenizer_vocab_size = 512;  // BPE ids: 256 bytes + merges + 3 specials
    // training
    int64_t tokens = 1'000'000;     // positions to train on: updates = ceil(tokens / (rows · length))
    int64_t batch_rows = 16;        // rows per update
    int64_t sequence_length = 128;  // tokens per row (whole documents packed, rest padded)
    double lr = 1e-3;               // peak learning rate
    double warmup_ratio = 0.1;      // schedule.h
    double min_lr_ratio = 0.1;      // final lr / peak
    double clip = 1.0;              // gradient-norm clip
    double weight_decay = 0.01;     // AdamW decoupled weight decay
    double init_stddev = 0.02;      // N(0, σ) for every matrix
    // "fp32": every product in FP32. "bf16": mixed precision — FP32 master
    // weights, gradients and optimiser; every product (forward, input and
    // weight gradients) reads BF16 — a copy of the matrices refreshed after
    // every update (qwen2_bf16_copy) and BF16-rounded activations — with FP32
    // accumulation, like torch.autocast(bfloat16).
    std::string precision = "fp32";
    int64_t max_updates = -1;  // smoke runs: cap on the updates (-1: none)
    // the check on the validation prompts
    int64_t check_prompts = 180;        // how many validation prompts (0: no check)
    int64_t check_max_new_tokens = 48;  // generation limit of the check

    int64_t updates() const;  // ceil(tokens / (batch_rows · sequence_length)), capped by max_updates
    ordered_json to_json() const;
    // Unknown keys, wrong types and out-of-range values are Errors naming `where` and the field.
    static PretrainConfig from_json(const json& j, const std::string& where);
    // From an effective study config (study_config.h): pretrain.*, model.shape,
    // model.system_prompt, max_updates; fields it lacks keep their defaults.
    static PretrainConfig from_study(const json& study);
    // Applies "key=value" (value parsed as JSON when it parses, else as a string).
    void set(const std::string& assignment);
};

// One document of the base corpus: a chat (system line + user + assistant)
// or plain text.
struct PretrainDocument {
    std::string user;       // chat: the help request (the "prompt"); empty for prose
    std::string assistant;  // chat: the answer
    std::string text;       // prose: the plain text; empty for a chat
    bool is_chat() const { return !user.empty(); }
};

// Error naming the first document whose prompt (user turn) has the sha256 of
// a corpus prompt (`corpus_prompt_sha256`: id -> sha256, as in the
// manifest). `where` names the manifest.
void check_base_prompts(const std::vector<PretrainDocument>& docs,
                        const std::map<std::string, std::string>& corpus_prompt_sha256, std::string_view where);

// The text the tokenizer is trained on (chat rendered with ChatML, prose as is).
std::vector<std::string> pretrain_tokenizer_texts(const std::vector<PretrainDocument>& docs,
                                                  std::string_view system_prompt);

// tokenizer_config.json for a ChatML tokenizer with `system_prompt` as the
// template's default system line.
ordered_json tiny_tokenizer_config(std::string_view system_prompt);

// A tokenised document: tokens and, per token, whether it is predicted
// (counted in the loss).
struct PretrainExample {
    std::vector<int32_t> tokens;
    std::vector<uint8_t> loss;  // (tokens) 1: this token is a target
};
// chat: encode(render_chat(user, generation prompt)) [no loss] + encode(assistant)
//       + <|im_end|> [loss] + <|endoftext|> [no loss];
// prose: encode(text) + <|endoftext|> [loss on all but the first token].
PretrainExample pretrain_encode(const Tokenizer& tok, const PretrainDocument& doc, std::string_view system_prompt);

// Batches of packed rows: each epoch shuffles the examples (Philox) and packs
// whole examples into rows of T tokens, first fit over a window of 16 open
// rows in that order; the rest of a row is padding (mask 0). Documents in a
// row see the ones before them (as in GPT-style packing); every row starts a
// document at position 0. An example longer than T is an Error.
struct PackedBatch {
    int64_t B = 0, T = 0;
    std::vector<int32_t> tokens;  // (B, T)
    std::vector<uint8_t> mask;    // (B, T) 1 for a real token
    std::vector<uint8_t> target;  // (B, T) 1 where tokens[b, t] is predicted from position t − 1
    int64_t real_tokens() const;
    int64_t target_tokens() const;
};
class PackedBatcher {
public:
    PackedBatcher(const std::vector<PretrainExample>& examples, int64_t B, int64_t T, int32_t pad_id, Philox rng);
    PackedBatch next();
    int64_t epoch() const { return epoch_; }
    int64_t rows_per_epoch() const { return static_cast<int64_t>(rows_.size()); }

    // Where the next batch comes from (checkpoints): the epoch, the next row
    // of it, and the RNG as it was before that epoch was packed (packing is
    // a pure function of it, so the rows need not be stored).
    struct Position {
        int64_t epoch = -1;  // -1: nothing drawn yet
        int64_t cursor = 0;
        Philox epoch_rng{0, 0};
    };
    Position position() const;
    // Continues exactly from `p` (re-packs that epoch); Error naming `where`
    // when it does not fit this corpus.
    void restore(const Position& p, std::string_view where);

private:
    void pack_epoch();
    const std::vector<PretrainExample>& examples_;
    int64_t B_, T_;
    int32_t pad_id_;
    Philox rng_;
    Philox epoch_rng_;  // rng_ before the current epoch was packed
    int64_t epoch_ = -1;
    size_t cursor_ = 0;
    std::vector<std::vector<int64_t>> rows_;  // example indices per packed row
};

// Causal-LM loss over a packed batch: mean over target tokens of −log p.
// Full-parameter model (set_full_grads); forward + backward when `train`,
// the gradient accumulated into the model's grads.
class LmLoss {
public:
    explicit LmLoss(Qwen2& model) : model_(model) {}
    double forward_backward(const PackedBatch& batch, bool train = true);

private:
    Qwen2& model_;
    std::vector<int64_t> src_;      // (M) hidden rows b·T + t − 1 that predict a target
    std::vector<int32_t> targets_;  // (M)
    std::vector<float> sel_;        // (M, H)
    std::vector<float> dsel_;       // (M, H)
    std::vector<float> logp_;       // (M)
    std::vector<float> dlogp_;      // (M)
    std::vector<float> dhidden_;    // (B, T, H)
    LmKeep keep_;                   // the forward's logits for the backward
};

// The model config for a tokenizer: the shape's sizes, vocab rounded up to a
// multiple of 64, eos = <|im_end|>, bos = <|endoftext|>.
Qwen2Config pretrain_model_config(const std::string& shape, const Tokenizer& tok);
Qwen2Config pretrain_model_config(Qwen2Config shape, const Tokenizer& tok);

// Rubric rates of one decoding mode on the check prompts.
struct BaseCheck {
    int64_t n = 0;
    double recognized = 0, relevant = 0, success = 0;  // fractions of n
    double relevant_given_recognized = 0;              // relevant / recognised (0 if none)
    double ended_with_eos = 0;
    int64_t distinct_responses = 0;
    std::map<std::string, int64_t> top_responses;  // up to 5 most frequent texts with counts
    ordered_json to_json() const;
};
struct CheckPrompt {
    std::string id, prompt;
    int expected_action = 0;
};
// Generates for every prompt (rendered with ChatML and `system_prompt`) and
// scores with the rubric.
BaseCheck pretrain_check(Qwen2& model, const Tokenizer& tok, const std::vector<CheckPrompt>& prompts,
                         std::string_view system_prompt, bool greedy, int64_t max_new_tokens, Philox& rng);

// What a pretraining run reports (also written as pretrain.json).
struct PretrainReport {
    ordered_json json;
    double seconds = 0, train_seconds = 0, tokens_per_second = 0, final_loss = 0;
};

// Crash-safe checkpoints of pretraining (CheckpointFile, training/stage_lifecycle.h): every
// `every` updates and after the last one, the FP32 master weights, AdamW
// moments and step, schedule position, batcher position and the curves, to
// `path` (by default <out>.checkpoints/pretrain.state.gz beside the folder).
// A run that finds one with the same identity (config, documents,
// tokenizer, model config, binary) continues from it; it is removed once
// the folder is written.
struct PretrainCheckpoints {
    fs::path path;      // empty: pretrain_checkpoint_path(out)
    int64_t every = 0;  // 0: no periodic checkpoint (an existing one is still used)
};
fs::path pretrain_checkpoint_path(const fs::path& out);

// Steps 2–7 above for given documents: refuses an existing `out`, writes
// into a temporary sibling and renames it at the end. `check` may be empty.
// `shape` replaces model_shape(config.shape) (tests train a smaller model).
PretrainReport pretrain_run(const PretrainConfig& config, const std::vector<PretrainDocument>& docs,
                            const std::vector<CheckPrompt>& check, const fs::path& out,
                            const ordered_json& provenance = ordered_json::object(), const Qwen2Config* shape = nullptr,
                            const PretrainCheckpoints& checkpoints = {});

}  // namespace ppolab
