// study.h — what every learning stage opens first: the effective config,
// the run folder, the frozen base model and its tokenizer, and the rule that
// turns corpus text into token rows (SPEC §3: prompts rendered with the
// model's chat template, responses end with EOS, limits refuse, never
// truncate).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/guarded_fs.h"
#include "model/scoring.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"
#include "training/config_types.h"
#include "training/run_layout.h"
#include "util/json.h"

namespace ppolab {

// Where a stage may read (SPEC §7 leak guards).
enum class StageScope {
    learn,  // pretrain, SFT, judge, PPO: corpus learn/ + manifest, the model, their own outputs
    eval,   // evaluate's generation: corpus eval/ + manifest, the model, policy checkpoints
    all,    // scoring, exercise, report
};

struct Study {
    json config;      // effective config (preset + files + --set)
    StudyConfig cfg;  // the same, parsed once (config_types.h)
    RunLayout run;
    fs::path model_dir;   // the base checkpoint folder
    Qwen2Weights base;    // frozen BF16 base (shared read-only by every role; its matrices prepacked)
    int32_t eos_id = -1;  // only this id ends a response
    int32_t pad_id = -1;
    ScoringLimits limits;
    std::string system_prompt;  // the chat template's system line
    std::string model_sha256;   // checkpoint_sha256(model_dir)
    std::string base_identity;  // frozen identity of the base tensors
    std::string code_sha256;    // of the running ppolab binary

    // Loads the base named by the config (RUN/base for the tiny preset,
    // `model_override` — `--model DIR` — otherwise), checks the seed pin and
    // the EOS/PAD ids, and builds the stage's guarded reader; `own_outputs`
    // are files the stage writes and may read back (an evaluation on the
    // validation prompts, whose outputs lie in eval/ beside the held-out ones).
    static Study open(const json& config, const RunLayout& run, const std::optional<fs::path>& model_override,
                      const std::string& stage, StageScope scope, const std::vector<fs::path>& own_outputs = {});

    const GuardedReader& reader() const { return *reader_; }
    const Tokenizer& tokenizer() const { return *tokenizer_; }

    // The rendered prompt's ids: system line, the user's text, then
    // "<|im_start|>assistant\n".
    std::vector<int32_t> encode_prompt(const std::string& user_text) const;
    // The response's ids followed by EOS.
    std::vector<int32_t> encode_response(const std::string& text) const;
    ScoringRow encode_row(const std::string& prompt, const std::string& response) const;
    ScoringBatch batch(const std::vector<ScoringRow>& rows) const;
    // The judge's pairs, [chosen 1..n, rejected 1..n], packed one pair a row
    // (packed_pair_batch: the shared prompt computed once).
    ScoringBatch pair_batch(const std::vector<ScoringRow>& rows) const;

    // The part of every identity block that does not depend on the stage:
    // config identity, model, tokenizer, base identity, code.
    json identity() const;

private:
    std::optional<GuardedReader> reader_;
    std::optional<Tokenizer> tokenizer_;
};

// The frozen identity of a model's base tensors (names of the Hugging Face
// checkpoint, stored dtype, every byte).
std::string base_frozen_identity(const Qwen2Weights& weights);
// sha256 of /proc/self/exe: the code that produced an output.
std::string running_binary_sha256();
// Peak resident memory of this process, bytes.
int64_t peak_rss_bytes();

}  // namespace ppolab
