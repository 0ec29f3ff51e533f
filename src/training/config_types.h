// config_types.h — the study's configuration as typed structs, one per
// top-level section of the presets, in the manner of CleanRL's `Args`:
// parsed once from the effective JSON (study_config.h: preset, files,
// --set), validated, and documented field by field.
//
// Each section is declared once, as a list of fields
//     X(type, member, unit, check, meaning)
// that expands into the struct's members and into its field table (key,
// member pointer, unit, check, meaning). The table drives parsing, the range
// checks of validate_study_config, the round trip back to JSON,
// `ppolab config --explain KEY` and the key table in docs/. A key is its
// section and member name ("ppo.beta"). Keys whose value may be null are
// std::optional; a null means "not pinned" or "read from the model folder".
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "util/json.h"

namespace ppolab {

using ConfigNames = std::vector<std::string>;
using OptionalInt = std::optional<int64_t>;
using OptionalString = std::optional<std::string>;

// One field's value check (on top of its JSON kind and kMaxConfigInteger).
struct FieldCheck {
    enum class Type { none, count, range, one_of, subset_of };
    Type type = Type::none;
    int64_t min = 0, max = 0;  // count: >= min and <= max (kMaxConfigCount unless the field says)
    double lo = 0, hi = 0;     // range: [lo, hi], or (lo, hi] when lo_open
    bool lo_open = false;
    std::vector<std::string> names;  // one_of: the value; subset_of: every element (non-empty list)
};
namespace field {
FieldCheck any();
FieldCheck count(int64_t min);               // an integer in [min, kMaxConfigCount]
FieldCheck count(int64_t min, int64_t max);  // … in [min, max]: a count that sizes memory
FieldCheck range(double lo, double hi);
FieldCheck above(double lo, double hi);  // (lo, hi]
FieldCheck one_of(std::vector<std::string> names);
FieldCheck subset_of(std::vector<std::string> names);
// "in (0, inf]", "an integer >= 1 and <= 1000000000", …; "" for any().
std::string describe(const FieldCheck& check);
}  // namespace field

inline constexpr double kConfigInf = std::numeric_limits<double>::infinity();  // printed "inf" in errors
// The projections a LoRA adapter may target (SPEC §2).
const std::vector<std::string>& lora_target_names();

#define PPOLAB_CONFIG_MEMBER(type, member, unit, check, meaning) type member{};

// corpus: the synthetic OfficeHelpPrefs corpus (SPEC §1).
#define PPOLAB_CORPUS_FIELDS(X)                                                                                 \
    X(std::string, name, "name", field::any(), "the corpus's name")                                             \
    X(std::string, revision, "revision", field::any(), "corpus revision named in every output's identity")      \
    X(std::string, study_revision, "revision", field::any(), "revision of the study's protocol on that corpus") \
    X(int64_t, seed, "seed", field::any(), "seed of the corpus generation (ppolab prepare)")
struct CorpusSection {
    PPOLAB_CORPUS_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// model: the frozen base model every role adapts (SPEC §2).
#define PPOLAB_MODEL_FIELDS(X)                                                                                        \
    X(OptionalString, shape, "name", field::any(),                                                                    \
      "architecture shape: tiny (pretrained by ppolab in RUN/base) or a named checkpoint; null: any folder")          \
    X(OptionalString, name_or_path, "name", field::any(), "the base model's name (PEFT base_model_name_or_path)")     \
    X(OptionalString, revision, "git revision", field::any(), "the base model's pinned revision; null: not pinned")   \
    X(bool, pin_architecture, "flag", field::any(), "refuse a base whose config.json is not the seed's architecture") \
    X(std::string, base_dtype, "dtype", field::any(), "stored dtype of the frozen base weights")                      \
    X(OptionalString, eos_token, "token", field::any(), "the only token that ends a response")                        \
    X(OptionalInt, eos_token_id, "token id", field::any(), "expected id of eos_token; null: not checked")             \
    X(OptionalString, pad_token, "token", field::any(), "the padding token")                                          \
    X(OptionalInt, pad_token_id, "token id", field::any(), "expected id of pad_token; null: not checked")             \
    X(std::string, chat_template, "name", field::any(), "the chat template that renders prompts")                     \
    X(std::string, system_prompt, "text", field::any(), "the chat template's system line")
struct ModelSection {
    PPOLAB_MODEL_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// pretrain: pretraining the tiny base model from scratch (SPEC §10).
#define PPOLAB_PRETRAIN_FIELDS(X)                                                                                  \
    X(bool, enabled, "flag", field::any(), "`ppolab run` pretrains the base first (the tiny preset)")              \
    X(OptionalInt, tokenizer_vocab_size, "tokens", field::any(), "size of the byte-level BPE vocabulary to train") \
    X(int64_t, tokens, "tokens", field::any(), "training tokens to process")                                       \
    X(int64_t, batch_rows, "rows", field::any(), "sequences per optimiser update")                                 \
    X(int64_t, sequence_length, "tokens", field::any(), "tokens per training sequence")                            \
    X(double, lr, "learning rate", field::above(0, kConfigInf), "peak learning rate")                              \
    X(double, weight_decay, "coefficient", field::range(0, kConfigInf), "AdamW decoupled weight decay")            \
    X(double, clip, "gradient norm", field::above(0, kConfigInf), "global gradient-norm clip")                     \
    X(double, warmup_ratio, "fraction of updates", field::range(0, 1), "linear warm-up share of the schedule")     \
    X(double, min_lr_ratio, "fraction of lr", field::range(0, 1), "cosine decay's floor as a fraction of lr")      \
    X(int64_t, seed, "seed", field::any(), "seed of the initialisation and the data order")                        \
    X(bool, world_knowledge, "flag", field::any(), "mix general-knowledge prose into the pretraining text")        \
    X(int64_t, conversations, "conversations", field::any(), "synthetic help-desk conversations in the text")      \
    X(int64_t, prose, "passages", field::any(), "synthetic prose passages in the text")                            \
    X(double, init_stddev, "standard deviation", field::any(), "stddev of the normal initialisation of weights")   \
    X(std::string, precision, "precision", field::any(), "training precision (fp32 or bf16)")                      \
    X(int64_t, check_prompts, "prompts", field::any(), "prompts generated to check the pretrained base (0: none)") \
    X(int64_t, check_max_new_tokens, "tokens", field::any(), "longest answer generated by that check")
struct PretrainSection {
    PPOLAB_PRETRAIN_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// lora: the adapters every role trains (SPEC §2).
#define PPOLAB_LORA_FIELDS(X)                                                                                       \
    X(int64_t, rank, "rank", field::count(1), "rank r of every adapter (<= 65536 and the projections' dimensions)") \
    X(int64_t, alpha, "scale numerator", field::above(0, kConfigInf),                                               \
      "LoRA alpha: adapters are scaled by alpha / rank")                                                            \
    X(double, dropout, "probability", field::range(0, 0), "adapter dropout (SPEC §2: none; nothing implements it)") \
    X(ConfigNames, targets, "projection names", field::subset_of(lora_target_names()),                              \
      "the projections that get adapters")                                                                          \
    X(OptionalInt, parameters_per_role, "parameters", field::any(),                                                 \
      "expected adapter parameters per role; null: not checked")
struct LoraSection {
    PPOLAB_LORA_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// heads: the scalar heads of the judge and the critic (SPEC §2).
#define PPOLAB_HEADS_FIELDS(X)                                       \
    X(OptionalInt, parameters, "parameters", field::any(),           \
      "expected parameters of one scalar head; null: not checked")   \
    X(double, reward_weight_std, "standard deviation", field::any(), \
      "stddev of the judge head's normal initialisation")            \
    X(bool, critic_zero_init, "flag", field::any(), "the critic's head starts at zero")
struct HeadsConfig {
    PPOLAB_HEADS_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// limits: token budgets; a row over them is refused, never truncated (SPEC §3).
#define PPOLAB_LIMITS_FIELDS(X)                                                                             \
    X(int64_t, max_prompt, "tokens", field::count(1, kMaxConfigTokens), "longest rendered prompt")          \
    X(int64_t, max_response, "tokens", field::count(1, kMaxConfigTokens), "longest response, EOS included") \
    X(int64_t, max_context, "tokens", field::count(1, kMaxConfigTokens), "longest prompt + response (> max_response)")
struct LimitsConfig {
    PPOLAB_LIMITS_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// adamw: the optimiser's moments, shared by every stage (SPEC §3).
#define PPOLAB_ADAMW_FIELDS(X)                                                \
    X(double, beta1, "decay rate", field::range(0, 1), "first-moment decay")  \
    X(double, beta2, "decay rate", field::range(0, 1), "second-moment decay") \
    X(double, eps, "epsilon", field::above(0, 1), "added to the second moment's square root")
struct AdamWSection {
    PPOLAB_ADAMW_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// The optimiser fields every learning stage has (lr is per stage: PPO has two).
#define PPOLAB_OPTIMISER_FIELDS(X)                                                                             \
    X(double, weight_decay, "coefficient", field::range(0, kConfigInf), "AdamW decoupled weight decay")        \
    X(double, clip, "gradient norm", field::above(0, kConfigInf), "global gradient-norm clip")                 \
    X(double, warmup_ratio, "fraction of updates", field::range(0, 1), "linear warm-up share of the schedule") \
    X(double, min_lr_ratio, "fraction of lr", field::range(0, 1), "cosine decay's floor as a fraction of lr")

// sft: supervised fine-tuning of the policy adapter (SPEC §3).
#define PPOLAB_SFT_FIELDS(X)                                                                             \
    X(int64_t, epochs, "epochs", field::count(1), "passes over the SFT training rows")                   \
    X(int64_t, accumulation, "rows per update", field::count(1), "rows whose gradients make one update") \
    X(double, lr, "learning rate", field::above(0, kConfigInf), "peak learning rate")                    \
    PPOLAB_OPTIMISER_FIELDS(X)                                                                           \
    X(int64_t, adapter_seed, "seed", field::any(), "seed of the adapter's initialisation")               \
    X(int64_t, sampler_seed, "seed", field::any(), "seed of the row order")                              \
    X(int64_t, interrupt_epoch, "epochs", field::count(0), "epoch after which `--mode interrupt` stops")
struct SftConfig {
    PPOLAB_SFT_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// reward: the Bradley–Terry judge (SPEC §3). `RewardConfig` is PPO's reward
// shaping (ppo_math.h), hence the name.
#define PPOLAB_JUDGE_FIELDS(X)                                                                                 \
    X(int64_t, epochs, "epochs", field::count(1), "passes over the training pairs")                            \
    X(int64_t, pairs_per_update, "pairs per update", field::count(1), "pairs whose gradients make one update") \
    X(double, lr, "learning rate", field::above(0, kConfigInf), "peak learning rate")                          \
    PPOLAB_OPTIMISER_FIELDS(X)                                                                                 \
    X(int64_t, adapter_seed, "seed", field::any(), "seed of the adapter's initialisation")                     \
    X(int64_t, head_seed, "seed", field::any(), "seed of the reward head's initialisation")                    \
    X(int64_t, sampler_seed, "seed", field::any(), "seed of the pair order")                                   \
    X(int64_t, interrupt_epoch, "epochs", field::count(0), "epoch after which `--mode interrupt` stops")
struct JudgeConfig {
    PPOLAB_JUDGE_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// dpo: Direct Preference Optimisation of a policy from SFT on the train
// pairs, the frozen SFT as reference (SPEC §12, a baseline to PPO).
#define PPOLAB_DPO_FIELDS(X)                                                                                   \
    X(int64_t, epochs, "epochs", field::count(1), "passes over the training pairs")                            \
    X(int64_t, pairs_per_update, "pairs per update", field::count(1), "pairs whose gradients make one update") \
    X(double, lr, "learning rate", field::above(0, kConfigInf), "peak learning rate")                          \
    PPOLAB_OPTIMISER_FIELDS(X)                                                                                 \
    X(double, beta, "coefficient", field::above(0, kConfigInf),                                                \
      "β of the DPO loss: the strength of the implicit KL to the reference (its inverse temperature)")         \
    X(int64_t, sampler_seed, "seed", field::any(), "seed of the pair order")                                   \
    X(int64_t, interrupt_epoch, "epochs", field::count(0), "epoch after which `--mode interrupt` stops")
struct DpoConfig {
    PPOLAB_DPO_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// ppo: PPO of the actor and critic against the judge (SPEC §4–§5).
#define PPOLAB_PPO_FIELDS(X)                                                                                           \
    X(int64_t, iterations, "iterations", field::count(1), "rollout-and-update iterations")                             \
    X(int64_t, prompts_per_iteration, "prompts", field::count(1), "prompts rolled out per iteration")                  \
    X(int64_t, updates_per_iteration, "updates", field::count(1), "optimiser updates per iteration")                   \
    X(double, actor_lr, "learning rate", field::above(0, kConfigInf), "the actor's peak learning rate")                \
    X(double, critic_lr, "learning rate", field::above(0, kConfigInf), "the critic's peak learning rate")              \
    PPOLAB_OPTIMISER_FIELDS(X)                                                                                         \
    X(double, beta, "coefficient", field::range(0, kConfigInf), "KL penalty per token against the SFT policy")         \
    X(double, gamma, "discount", field::range(0, 1), "discount of future rewards")                                     \
    X(double, lambda, "GAE lambda", field::range(0, 1), "generalised advantage estimation's lambda")                   \
    X(double, clip_epsilon, "ratio", field::above(0, 1), "clip range of the probability ratio")                        \
    X(double, value_loss_coef, "coefficient", field::range(0, kConfigInf), "weight of the critic's loss")              \
    X(double, temperature, "temperature", field::above(0, kConfigInf), "sampling temperature (only 1 is implemented)") \
    X(std::string, missing_eos, "rule", field::one_of({"replace", "add"}),                                             \
      "a response without EOS: replace its score by the penalty, or add the penalty")                                  \
    X(double, missing_eos_penalty, "reward", field::any(), "reward given to a response that did not end with EOS")     \
    X(int64_t, interrupt_iteration, "iterations", field::count(0), "iteration after which `--mode interrupt` stops")   \
    X(int64_t, sampler_seed, "seed", field::any(), "seed of the prompt order")                                         \
    X(int64_t, generation_seed, "seed", field::any(), "seed of the sampled responses")                                 \
    X(int64_t, snapshot_every, "iterations", field::count(0),                                                          \
      "continuous mode: the actor's adapters saved every this many iterations (RUN/ppo/snapshots; 0: none)")           \
    X(bool, whiten_advantages, "flag", field::any(),                                                                   \
      "design switch: whiten the advantages over the iteration's tokens (TRL's default; the seed: off)")               \
    X(bool, value_clipping, "flag", field::any(),                                                                      \
      "design switch: clip the critic's values to old +- cliprange_value in its loss (the seed: off)")                 \
    X(double, cliprange_value, "value", field::above(0, kConfigInf), "the value clip range when value_clipping is on") \
    X(std::string, kl_penalty, "rule", field::one_of({"reward_k1", "loss_k3"}),                                        \
      "design switch: the KL penalty as k1 in the per-token rewards (the seed) or as β·k3 in the actor's loss")
struct PpoConfig {
    PPOLAB_PPO_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// rl: the critic-free group baselines RLOO and GRPO against the frozen judge
// (SPEC §12): k samples per prompt, one advantage per response from the
// group, PPO's clipped ratio and reductions, no critic. The reward rule
// (ppo.missing_eos, ppo.missing_eos_penalty) is PPO's.
#define PPOLAB_RL_FIELDS(X)                                                                                          \
    X(std::string, advantage, "baseline", field::one_of({"rloo", "grpo"}),                                           \
      "`ppolab rloo`'s advantage: leave-one-out (RLOO) or group-normalised (GRPO); the folder RUN/rloo or RUN/grpo") \
    X(int64_t, iterations, "iterations", field::count(1), "sample-and-update iterations")                            \
    X(int64_t, prompts_per_iteration, "prompts", field::count(1), "prompts per iteration")                           \
    X(int64_t, samples_per_prompt, "responses", field::count(2), "k: responses sampled per prompt (the group)")      \
    X(int64_t, updates_per_iteration, "updates", field::count(1), "optimiser updates per iteration")                 \
    X(double, lr, "learning rate", field::above(0, kConfigInf), "the policy's peak learning rate")                   \
    PPOLAB_OPTIMISER_FIELDS(X)                                                                                       \
    X(double, beta, "coefficient", field::range(0, kConfigInf), "KL penalty on the sampled log-ratio sum")           \
    X(double, clip_epsilon, "ratio", field::above(0, 1), "clip range of the probability ratio")                      \
    X(int64_t, interrupt_iteration, "iterations", field::count(0), "iteration after which `--mode interrupt` stops") \
    X(int64_t, sampler_seed, "seed", field::any(), "seed of the prompt order")                                       \
    X(int64_t, generation_seed, "seed", field::any(), "seed of the sampled responses")
struct RlConfig {
    PPOLAB_RL_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// evaluation: generations of every policy on held-out prompts (SPEC §6).
#define PPOLAB_EVALUATION_FIELDS(X)                                                                      \
    X(ConfigNames, populations, "population names", field::any(), "prompt populations evaluated")        \
    X(bool, greedy, "flag", field::any(), "generate greedily")                                           \
    X(bool, sampled, "flag", field::any(), "also generate by sampling")                                  \
    X(double, sample_temperature, "temperature", field::any(), "temperature of the sampled generations") \
    X(int64_t, sample_seed, "seed", field::any(), "seed of the sampled generations")                     \
    X(int64_t, snapshot_samples, "samples per prompt", field::count(1, 4096),                            \
      "overoptimisation: temperature-1 samples per test prompt and PPO snapshot")                        \
    X(int64_t, best_of_n, "samples per prompt", field::count(1, 4096),                                   \
      "overoptimisation: SFT samples per test prompt for best-of-n")                                     \
    X(OptionalInt, exact_prompts, "prompts", field::count(1),                                            \
      "distinct prompts of each population measured exactly over the rubric's grammar; null: all")
struct EvaluationConfig {
    PPOLAB_EVALUATION_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// feedback: the preference labels the judge learns from (SPEC §8).
#define PPOLAB_FEEDBACK_FIELDS(X)                                                                              \
    X(std::string, kind, "source", field::one_of({"human", "ai"}),                                             \
      "who labels the pairs: people voting, or an AI judge")                                                   \
    X(int64_t, min_train_labels, "labels", field::count(1), "fewest training labels the judge accepts")        \
    X(int64_t, min_validation_labels, "labels", field::count(1), "fewest validation labels the judge accepts") \
    X(int64_t, min_test_labels, "labels", field::count(1), "fewest test labels the judge accepts")             \
    X(int64_t, split_seed, "seed", field::any(), "seed of the train/validation/test split")                    \
    X(int64_t, candidate_seed, "seed", field::any(), "seed of the candidate pairs")                            \
    X(int64_t, pairs, "pairs", field::count(1), "candidate pairs offered for labelling")                       \
    X(double, train_fraction, "fraction of pairs", field::range(0, 1), "share of the pairs for training")      \
    X(double, validation_fraction, "fraction of pairs", field::range(0, 1), "share for validation (the rest: test)")
struct FeedbackConfig {
    PPOLAB_FEEDBACK_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// checkpoint: how often resume states are written (0: never); outside the
// config hash, since it changes no number.
#define PPOLAB_CHECKPOINT_FIELDS(X)                                                                                \
    X(int64_t, every_updates, "updates", field::count(0), "SFT and judge: a resume state every this many updates") \
    X(int64_t, pretrain_every_updates, "updates", field::count(0), "pretraining: a resume state every this many")  \
    X(int64_t, every_iterations, "iterations", field::count(0), "PPO: a resume state every this many iterations")  \
    X(int64_t, every_rows, "rows", field::count(0), "evaluation: a resume state every this many rows")
struct CheckpointConfig {
    PPOLAB_CHECKPOINT_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// parallel: how an update's work is cut for data-parallel ranks (SPEC §13).
// The chunk count changes the numbers (each chunk's gradient is summed in
// chunk order), so it is in the config hash; the world size (`mpirun -np W`,
// any W dividing the chunks) is not, and changes none.
#define PPOLAB_PARALLEL_FIELDS(X)                                                                                 \
    X(int64_t, chunks, "chunks", field::count(1, 4096),                                                           \
      "chunks of every update (SFT examples, judge and DPO pairs, PPO minibatch rows); `mpirun -np W` needs W | " \
      "chunks; 1: the single-process update")
struct ParallelSection {
    PPOLAB_PARALLEL_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// engine: how the numbers are computed (kernels/numerics.h). In the config
// hash: the two modes give different bytes.
#define PPOLAB_ENGINE_FIELDS(X)                                                                                \
    X(std::string, numerics, "name", field::one_of({"canonical", "fast"}),                                     \
      "canonical: the reference arithmetic, the same bytes on every x86-64 CPU, thread count, world size and " \
      "batch; fast: the CPU's fastest paths (AMX tiles, vdpbf16ps, oneDNN), bytes that depend on them")
struct EngineSection {
    PPOLAB_ENGINE_FIELDS(PPOLAB_CONFIG_MEMBER)
};
// Sets the process's arithmetic to engine.numerics (numerics_set_mode):
// every stage calls it before it computes anything.
void engine_apply(const EngineSection& engine);

// study: the one seed every stochastic seed of a chain derives from.
// The rule (StudyConfig::seed): a configured stage seed S is used as
// S + 1000 × study.seed, so study.seed 0 runs the preset's seeds unchanged.
// It applies to the adapter and head initialisations, the row, pair and
// prompt orders, PPO's rollout sampling and evaluation's sampling
// (sft.*_seed, reward.*_seed, ppo.*_seed, dpo.sampler_seed, rl.*_seed,
// evaluation.sample_seed) and to
// pretrain.seed; never to the corpus (corpus.seed, feedback.split_seed,
// feedback.candidate_seed): every replicate learns from the same data.
#define PPOLAB_STUDY_FIELDS(X) \
    X(int64_t, seed, "seed", field::range(0, 1000000), "the chain's seed; replicate k of a set runs study.seed + k")
struct StudySection {
    PPOLAB_STUDY_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// replicates: how many independent chains `ppolab run` trains (outside the
// config hash: each chain's numbers are named by its study.seed).
#define PPOLAB_REPLICATES_FIELDS(X)                                                                        \
    X(int64_t, count, "chains", field::count(1, 1000),                                                     \
      "independent SFT -> judge -> PPO -> evaluation chains on one corpus (RUN/replicates/<k>/ when > 1)") \
    X(bool, repretrain_base, "flag", field::any(),                                                         \
      "tiny preset: each replicate also pretrains its own base (pretrain.seed derived); off: one shared base")
struct ReplicatesSection {
    PPOLAB_REPLICATES_FIELDS(PPOLAB_CONFIG_MEMBER)
};

// The top-level keys that are not sections.
#define PPOLAB_TOP_FIELDS(X)                                                                                 \
    X(std::string, preset, "name", field::any(), "the preset this config starts from (tiny, seed, generic)") \
    X(std::string, description, "text", field::any(), "what the preset is for")                              \
    X(OptionalInt, max_updates, "updates", field::count(1),                                                  \
      "cap on each stage's optimiser updates (smoke runs); null: none")

// The whole effective config, one member per top-level key.
struct StudyConfig {
    PPOLAB_TOP_FIELDS(PPOLAB_CONFIG_MEMBER)
    StudySection study;
    ReplicatesSection replicates;
    CorpusSection corpus;
    ModelSection model;
    PretrainSection pretrain;
    LoraSection lora;
    HeadsConfig heads;
    LimitsConfig limits;
    AdamWSection adamw;
    SftConfig sft;
    JudgeConfig reward;
    PpoConfig ppo;
    DpoConfig dpo;
    RlConfig rl;
    EvaluationConfig evaluation;
    FeedbackConfig feedback;
    CheckpointConfig checkpoint;
    ParallelSection parallel;
    EngineSection engine;

    // Reads every key (each with its kind, as config_int & co.), refuses
    // unknown and missing ones, and runs every check (validate_study_config).
    static StudyConfig parse(const json& config);
    // The JSON it was parsed from: parse(c).to_json() == c.
    json to_json() const;
    // The seed a stage uses for a configured seed (the study section's rule).
    uint64_t seed(int64_t configured) const { return static_cast<uint64_t>(configured + 1000 * study.seed); }
};

// One key's documentation, for --explain and the docs.
struct ConfigFieldDoc {
    std::string key;   // "ppo.beta", "max_updates"
    std::string type;  // integer, number, boolean, string, list of strings; "or null" for optional keys
    std::string unit;
    std::string meaning;
    std::string check;  // describe(check): "" when any value of the type is accepted
};
std::vector<ConfigFieldDoc> config_field_docs();  // every key, in StudyConfig's order
struct ConfigSectionDoc {
    std::string name;
    std::string meaning;
};
std::vector<ConfigSectionDoc> config_section_docs();  // the sections, in StudyConfig's order

}  // namespace ppolab
