#include "training/pretrain.h"

#include "training/study_config.h"

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "data/rubric.h"
#include "kernels/lm_head.h"
#include "model/config.h"
#include "model/generate.h"
#include "model/hf_folder.h"
#include "model/init.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/chat.h"
#include "training/crash_checkpoints.h"
#include "training/schedule.h"
#include "training/stage_lifecycle.h"
#include "training/study.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/sha256.h"
#include "util/stopwatch.h"

namespace ppolab {

std::string tiny_system_prompt() { return config_string(preset_config("tiny"), "model.system_prompt"); }

// ---------------------------------------------------------------- config

int64_t PretrainConfig::updates() const {
    const int64_t per = batch_rows * sequence_length;
    int64_t n = std::max<int64_t>(1, (tokens + per - 1) / per);
    if (max_updates >= 0) n = std::min(n, max_updates);
    return n;
}

ordered_json PretrainConfig::to_json() const {
    ordered_json j;
    j["shape"] = shape;
    j["system_prompt"] = system_prompt;
    j["seed"] = seed;
    j["conversations"] = conversations;
    j["prose"] = prose;
    j["world_knowledge"] = world_knowledge;
    j["tokenizer_vocab_size"] = tokenizer_vocab_size;
    j["tokens"] = tokens;
    j["batch_rows"] = batch_rows;
    j["sequence_length"] = sequence_length;
    j["lr"] = lr;
    j["warmup_ratio"] = warmup_ratio;
    j["min_lr_ratio"] = min_lr_ratio;
    j["clip"] = clip;
    j["weight_decay"] = weight_decay;
    j["init_stddev"] = init_stddev;
    j["precision"] = precision;
    j["max_updates"] = max_updates;
    j["check_prompts"] = check_prompts;
    j["check_max_new_tokens"] = check_max_new_tokens;
    return j;
}

static void check_range(bool ok, const std::string& where, const char* field, const std::string& expected,
                        const json& got) {
    if (!ok) fail(where, ": field '", field, "' must be ", expected, ", got ", got.dump());
}

static std::string known_keys() {
    std::string out;
    const ordered_json all = PretrainConfig{}.to_json();
    for (auto it = all.begin(); it != all.end(); ++it) {
        if (!out.empty()) out += ", ";
        out += it.key();
    }
    return out;
}

PretrainConfig PretrainConfig::from_json(const json& j, const std::string& where) {
    if (!j.is_object()) fail(where, ": pretrain config must be a JSON object, got ", j.type_name());
    PretrainConfig c;
    const ordered_json known = c.to_json();
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!known.contains(it.key()))
            fail(where, ": unknown pretrain config field '", it.key(), "' (known: ", known_keys(), ")");
    auto integer = [&](const char* k, int64_t& v, int64_t lo, int64_t hi) {
        if (!j.contains(k)) return;
        v = json_int(j, k, where);
        check_range(v >= lo && v <= hi, where, k, "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                    j.at(k));
    };
    auto number = [&](const char* k, double& v, double lo, double hi, bool open_low) {
        if (!j.contains(k)) return;
        v = json_number(j, k, where);
        const bool ok = std::isfinite(v) && (open_low ? v > lo : v >= lo) && v <= hi;
        check_range(ok, where, k,
                    std::string(open_low ? "in (" : "in [") + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                    j.at(k));
    };
    if (j.contains("shape")) c.shape = json_string(j, "shape", where);
    if (j.contains("system_prompt")) c.system_prompt = json_string(j, "system_prompt", where);
    if (j.contains("seed")) {
        const json& s = j.at("seed");
        check_range(s.is_number_unsigned() || (s.is_number_integer() && s.get<int64_t>() >= 0), where, "seed",
                    "a non-negative integer", s);
        c.seed = s.get<uint64_t>();
    }
    integer("conversations", c.conversations, 1, 10'000'000);
    integer("prose", c.prose, 0, 10'000'000);
    if (j.contains("world_knowledge")) c.world_knowledge = json_bool(j, "world_knowledge", where);
    integer("tokenizer_vocab_size", c.tokenizer_vocab_size, 259, 1'000'000);
    integer("tokens", c.tokens, 1, int64_t{1} << 40);
    integer("batch_rows", c.batch_rows, 1, 65536);
    integer("sequence_length", c.sequence_length, 8, 65536);
    number("lr", c.lr, 0, 1, true);
    number("warmup_ratio", c.warmup_ratio, 0, 1, false);
    number("min_lr_ratio", c.min_lr_ratio, 0, 1, false);
    number("clip", c.clip, 0, 1e9, true);
    number("weight_decay", c.weight_decay, 0, 1, false);
    number("init_stddev", c.init_stddev, 0, 10, true);
    if (j.contains("precision")) {
        c.precision = json_string(j, "precision", where);
        check_range(c.precision == "fp32" || c.precision == "bf16", where, "precision", "\"fp32\" or \"bf16\"",
                    j.at("precision"));
    }
    if (j.contains("max_updates") && !j.at("max_updates").is_null())
        integer("max_updates", c.max_updates, -1, int64_t{1} << 40);
    integer("check_prompts", c.check_prompts, 0, 1'000'000);
    integer("check_max_new_tokens", c.check_max_new_tokens, 1, 4096);
    if (c.system_prompt.empty()) fail(where, ": field 'system_prompt' must not be empty");
    model_shape(c.shape);  // Error on an unknown shape
    return c;
}

PretrainConfig PretrainConfig::from_study(const json& study) {
    json j = json::object();
    const ordered_json known = PretrainConfig{}.to_json();
    if (study.contains("pretrain") && study.at("pretrain").is_object())
        for (auto it = study.at("pretrain").begin(); it != study.at("pretrain").end(); ++it)
            if (known.contains(it.key()) && !it.value().is_null()) j[it.key()] = it.value();
    if (study.contains("model") && study.at("model").is_object()) {
        const json& m = study.at("model");
        if (m.contains("shape") && m.at("shape").is_string()) j["shape"] = m.at("shape");
        if (m.contains("system_prompt") && m.at("system_prompt").is_string())
            j["system_prompt"] = m.at("system_prompt");
    }
    if (study.contains("max_updates") && !study.at("max_updates").is_null()) j["max_updates"] = study.at("max_updates");
    return from_json(j, "study config (pretrain)");
}

void PretrainConfig::set(const std::string& assignment) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) fail("--set '", assignment, "': expected key=value (e.g. tokens=500000)");
    const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
    json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) value = text;         // not JSON: the text itself
    else value = parse_json(text, "--set " + key);  // JSON: a repeated key is an error, as in every JSON input
    json j = to_json();
    if (!j.contains(key)) fail("--set ", key, ": unknown pretrain config field (known: ", known_keys(), ")");
    j[key] = value;
    *this = from_json(j, "--set " + key);
}

// ---------------------------------------------------------------- corpus checks and text

void check_base_prompts(const std::vector<PretrainDocument>& docs,
                        const std::map<std::string, std::string>& corpus_prompt_sha256, std::string_view where) {
    std::map<std::string, std::string> by_hash;  // sha256 -> a corpus prompt id
    for (const auto& [id, sha] : corpus_prompt_sha256) by_hash.emplace(sha, id);
    for (size_t i = 0; i < docs.size(); ++i) {
        if (!docs[i].is_chat()) continue;
        const std::string sha = sha256_hex(docs[i].user);
        auto it = by_hash.find(sha);
        if (it != by_hash.end())
            fail("base corpus document ", i, ": its prompt has sha256 ", sha, ", the sha256 of corpus prompt '",
                 it->second, "' in ", where,
                 "; the base model must never see a corpus prompt (held-out, validation, probe, demonstration or "
                 "rollout)");
    }
}

std::vector<std::string> pretrain_tokenizer_texts(const std::vector<PretrainDocument>& docs,
                                                  std::string_view system_prompt) {
    std::vector<std::string> texts;
    texts.reserve(docs.size());
    for (const auto& d : docs) {
        if (d.is_chat())
            texts.push_back(render_chat({{"user", d.user}, {"assistant", d.assistant}}, false, system_prompt));
        else texts.push_back(d.text);
    }
    return texts;
}

static std::string jinja_quote(std::string_view s) {
    std::string out = "'";
    for (char ch : s) {
        if (ch == '\'' || ch == '\\') out += '\\';
        if (ch == '\n') {
            out += "\\n";
            continue;
        }
        out += ch;
    }
    return out + "'";
}

ordered_json tiny_tokenizer_config(std::string_view system_prompt) {
    // ChatML; the system turn defaults to the tiny model's own line (as
    // Qwen2.5's template defaults to its own), see chat.h.
    std::string tpl =
        "{%- for message in messages %}"
        "{%- if loop.first and message['role'] != 'system' %}"
        "{{- '<|im_start|>system\\n' + " +
        jinja_quote(system_prompt) +
        " + '<|im_end|>\\n' }}"
        "{%- endif %}"
        "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    ordered_json j;
    j["add_bos_token"] = false;
    j["add_prefix_space"] = false;
    j["bos_token"] = nullptr;
    j["eos_token"] = std::string(kImEnd);
    j["pad_token"] = std::string(kEndOfText);
    j["unk_token"] = nullptr;
    j["additional_special_tokens"] = {std::string(kImStart), std::string(kImEnd)};
    j["chat_template"] = tpl;
    j["clean_up_tokenization_spaces"] = false;
    j["errors"] = "replace";
    j["model_max_length"] = 512;
    j["split_special_tokens"] = false;
    j["tokenizer_class"] = "Qwen2Tokenizer";
    return j;
}

static int32_t special_id(const Tokenizer& tok, std::string_view name) {
    const int32_t id = tok.token_to_id(name);
    if (id < 0) fail("tokenizer: special token ", name, " is missing");
    return id;
}

PretrainExample pretrain_encode(const Tokenizer& tok, const PretrainDocument& doc, std::string_view system_prompt) {
    PretrainExample ex;
    const int32_t eot = special_id(tok, kEndOfText);
    if (doc.is_chat()) {
        ex.tokens = tok.encode(render_chat({{"user", doc.user}}, true, system_prompt));
        ex.loss.assign(ex.tokens.size(), 0);
        std::vector<int32_t> answer = tok.encode(doc.assistant);
        answer.push_back(special_id(tok, kImEnd));
        ex.tokens.insert(ex.tokens.end(), answer.begin(), answer.end());
        ex.loss.insert(ex.loss.end(), answer.size(), 1);
        ex.tokens.push_back(eot);
        ex.loss.push_back(0);
    } else {
        ex.tokens = tok.encode(doc.text);
        ex.tokens.push_back(eot);
        ex.loss.assign(ex.tokens.size(), 1);
        ex.loss[0] = 0;  // nothing precedes the first token
    }
    return ex;
}

// ---------------------------------------------------------------- packed batches

int64_t PackedBatch::real_tokens() const { return std::count(mask.begin(), mask.end(), uint8_t{1}); }
int64_t PackedBatch::target_tokens() const { return std::count(target.begin(), target.end(), uint8_t{1}); }

PackedBatcher::PackedBatcher(const std::vector<PretrainExample>& examples, int64_t B, int64_t T, int32_t pad_id,
                             Philox rng)
    : examples_(examples), B_(B), T_(T), pad_id_(pad_id), rng_(rng), epoch_rng_(rng) {
    if (examples.empty()) fail("pretraining: no documents to train on");
    for (size_t i = 0; i < examples.size(); ++i)
        if (static_cast<int64_t>(examples[i].tokens.size()) > T)
            fail("pretraining document ", i, " has ", examples[i].tokens.size(), " tokens; seq_len is ", T,
                 " (documents are packed whole, never cut)");
}

PackedBatcher::Position PackedBatcher::position() const {
    return Position{epoch_, static_cast<int64_t>(cursor_), epoch_rng_};
}

void PackedBatcher::restore(const Position& p, std::string_view where) {
    if (p.epoch < -1) fail(where, ": batcher epoch must be >= -1, got ", p.epoch);
    if (p.epoch == -1) {
        if (p.cursor != 0) fail(where, ": batcher cursor must be 0 before the first epoch, got ", p.cursor);
        rng_ = p.epoch_rng;
        epoch_rng_ = p.epoch_rng;
        epoch_ = -1;
        cursor_ = 0;
        rows_.clear();
        return;
    }
    epoch_ = p.epoch - 1;
    rng_ = p.epoch_rng;
    pack_epoch();
    if (p.cursor < 0 || p.cursor > static_cast<int64_t>(rows_.size()))
        fail(where, ": batcher cursor ", p.cursor, " is outside the ", rows_.size(), " rows of epoch ", p.epoch);
    cursor_ = static_cast<size_t>(p.cursor);
}

void PackedBatcher::pack_epoch() {
    epoch_rng_ = rng_;
    ++epoch_;
    rows_.clear();
    cursor_ = 0;
    // First fit over a window of open rows, in shuffled order: each example
    // goes to the oldest open row it fits in, else opens a row; when the
    // window is full the oldest row is closed. Short documents (prose) fill
    // the gaps; on the tiny preset's base corpus a conversation is ~70–86
    // tokens, so two never share a 128-token row and ~62 % of the positions
    // are real tokens (pretrain.json: tokens_seen / positions_seen).
    constexpr size_t kOpenRows = 16;
    struct Open {
        int64_t used = 0;
        std::vector<int64_t> items;
    };
    std::vector<Open> open;
    const auto order = rng_.permutation(static_cast<int64_t>(examples_.size()));
    for (int64_t i : order) {
        const int64_t n = static_cast<int64_t>(examples_[static_cast<size_t>(i)].tokens.size());
        size_t r = 0;
        while (r < open.size() && open[r].used + n > T_) ++r;
        if (r == open.size()) {
            if (open.size() == kOpenRows) {
                rows_.push_back(std::move(open.front().items));
                open.erase(open.begin());
            }
            open.emplace_back();
            r = open.size() - 1;
        }
        open[r].used += n;
        open[r].items.push_back(i);
    }
    for (auto& o : open) rows_.push_back(std::move(o.items));
}

PackedBatch PackedBatcher::next() {
    PackedBatch b;
    b.B = B_;
    b.T = T_;
    b.tokens.assign(static_cast<size_t>(B_ * T_), pad_id_);
    b.mask.assign(static_cast<size_t>(B_ * T_), 0);
    b.target.assign(static_cast<size_t>(B_ * T_), 0);
    for (int64_t r = 0; r < B_; ++r) {
        if (epoch_ < 0 || cursor_ >= rows_.size()) pack_epoch();
        int64_t t = 0;
        for (int64_t i : rows_[cursor_]) {
            const PretrainExample& ex = examples_[static_cast<size_t>(i)];
            for (size_t k = 0; k < ex.tokens.size(); ++k, ++t) {
                const size_t at = static_cast<size_t>(r * T_ + t);
                b.tokens[at] = ex.tokens[k];
                b.mask[at] = 1;
                b.target[at] = t > 0 ? ex.loss[k] : 0;
            }
        }
        ++cursor_;
    }
    return b;
}

// ---------------------------------------------------------------- loss

double LmLoss::forward_backward(const PackedBatch& batch, bool train) {
    const int64_t B = batch.B, T = batch.T, H = model_.config().hidden_size;
    model_.forward(batch.tokens.data(), batch.mask.data(), B, T, /*save_for_backward=*/train);
    src_.clear();
    targets_.clear();
    for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 1; t < T; ++t) {
            const size_t at = static_cast<size_t>(b * T + t);
            if (!batch.target[at]) continue;
            PPOLAB_ASSERT(batch.mask[at] && batch.mask[at - 1]);
            src_.push_back(b * T + t - 1);
            targets_.push_back(batch.tokens[at]);
        }
    const int64_t M = static_cast<int64_t>(src_.size());
    if (M == 0) fail("pretraining batch has no target token");
    sel_.resize(static_cast<size_t>(M * H));
    const float* hidden = model_.hidden();
    for (int64_t i = 0; i < M; ++i)
        std::memcpy(sel_.data() + i * H, hidden + src_[static_cast<size_t>(i)] * H,
                    static_cast<size_t>(H) * sizeof(float));
    logp_.resize(static_cast<size_t>(M));
    const WeightView W = model_.weights().output_matrix().view();
    lm_logprobs_forward(logp_.data(), sel_.data(), targets_.data(), W, M, train ? &keep_ : nullptr);
    double sum = 0;
    for (float v : logp_) sum += v;
    const double loss = -sum / static_cast<double>(M);
    if (!train) return loss;

    float* dW = model_.output_grad();
    PPOLAB_ASSERT(dW != nullptr);
    dlogp_.assign(static_cast<size_t>(M), static_cast<float>(-1.0 / static_cast<double>(M)));
    dsel_.resize(static_cast<size_t>(M * H));
    lm_logprobs_backward(dsel_.data(), dW, dlogp_.data(), sel_.data(), targets_.data(), W, M, &keep_);
    dhidden_.assign(static_cast<size_t>(B * T * H), 0.f);
    for (int64_t i = 0; i < M; ++i)
        std::memcpy(dhidden_.data() + src_[static_cast<size_t>(i)] * H, dsel_.data() + i * H,
                    static_cast<size_t>(H) * sizeof(float));
    model_.backward(dhidden_.data());
    return loss;
}

// ---------------------------------------------------------------- model config

Qwen2Config pretrain_model_config(const std::string& shape, const Tokenizer& tok) {
    return pretrain_model_config(model_shape(shape), tok);
}

Qwen2Config pretrain_model_config(Qwen2Config c, const Tokenizer& tok) {
    c.vocab_size = (tok.vocab_size() + 63) / 64 * 64;
    c.eos_token_id = special_id(tok, kImEnd);
    c.bos_token_id = special_id(tok, kEndOfText);
    c.torch_dtype = "bfloat16";
    return c;
}

// ---------------------------------------------------------------- the check

ordered_json BaseCheck::to_json() const {
    ordered_json j;
    j["n"] = n;
    j["recognized_rate"] = recognized;
    j["relevant_rate"] = relevant;
    j["success_rate"] = success;
    j["relevant_given_recognized"] = relevant_given_recognized;
    j["ended_with_eos_rate"] = ended_with_eos;
    j["distinct_responses"] = distinct_responses;
    ordered_json top = ordered_json::array();
    std::vector<std::pair<int64_t, std::string>> sorted;
    for (const auto& [text, count] : top_responses) sorted.push_back({-count, text});
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [neg, text] : sorted) top.push_back({{"response", text}, {"count", -neg}});
    j["top_responses"] = top;
    return j;
}

BaseCheck pretrain_check(Qwen2& model, const Tokenizer& tok, const std::vector<CheckPrompt>& prompts,
                         std::string_view system_prompt, bool greedy, int64_t max_new_tokens, Philox& rng) {
    BaseCheck out;
    if (prompts.empty()) return out;
    std::vector<std::vector<int32_t>> encoded;
    for (const auto& p : prompts) encoded.push_back(tok.encode(render_chat({{"user", p.prompt}}, true, system_prompt)));
    GenerationOptions opt;
    opt.max_new_tokens = max_new_tokens;
    opt.eos_id = special_id(tok, kImEnd);
    opt.pad_id = special_id(tok, kEndOfText);
    opt.greedy = greedy;
    const std::vector<Generation> gens = generate(model, encoded, opt, rng);
    std::map<std::string, int64_t> counts;
    int64_t rec = 0, rel = 0, succ = 0, eos = 0;
    for (size_t i = 0; i < gens.size(); ++i) {
        const Generation& g = gens[i];
        const bool ended = g.finish_reason == "eos";
        const ResponseText shown = tok.decode_response(g.tokens, ended, opt.eos_id);
        const std::string& text = shown.text;
        const RubricVerdict v = evaluate_response(text, ended ? FinishReason::eos : FinishReason::length,
                                                  prompts[i].expected_action, shown.decodable);
        rec += v.recognized;
        rel += v.relevant;
        succ += v.rubric_success;
        eos += ended;
        ++counts[text];
    }
    const double n = static_cast<double>(prompts.size());
    out.n = static_cast<int64_t>(prompts.size());
    out.recognized = static_cast<double>(rec) / n;
    out.relevant = static_cast<double>(rel) / n;
    out.success = static_cast<double>(succ) / n;
    out.relevant_given_recognized = rec ? static_cast<double>(rel) / static_cast<double>(rec) : 0.0;
    out.ended_with_eos = static_cast<double>(eos) / n;
    out.distinct_responses = static_cast<int64_t>(counts.size());
    std::vector<std::pair<int64_t, std::string>> sorted;
    for (const auto& [text, c] : counts) sorted.push_back({-c, text});
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size() && i < 5; ++i) out.top_responses[sorted[i].second] = -sorted[i].first;
    return out;
}

// ---------------------------------------------------------------- the whole run

static std::string documents_sha256(const std::vector<PretrainDocument>& docs) {
    Sha256 h;
    for (const auto& d : docs) {
        ordered_json j;
        j["user"] = d.user;
        j["assistant"] = d.assistant;
        j["text"] = d.text;
        h.update(j.dump());
        h.update("\n");
    }
    return h.hex();
}

static std::string rate(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * x);
    return buf;
}

fs::path pretrain_checkpoint_path(const fs::path& out_in) {
    const fs::path out = out_in.has_filename() ? out_in : out_in.parent_path();
    return out.parent_path() / (out.filename().string() + ".checkpoints") / "pretrain.state.gz";
}

// Staging folders of attempts killed before their rename are never finished.
static void remove_stale_staging(const fs::path& out) {
    const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
    const std::string stem = "." + out.filename().string() + ".pretrain";
    std::error_code ec;
    if (!fs::is_directory(parent, ec)) return;
    for (const fs::directory_entry& e : fs::directory_iterator(parent))
        if (e.is_directory() && e.path().filename().string().rfind(stem, 0) == 0) {
            std::fprintf(stderr, "pretrain: removing %s (left by an attempt that stopped before finishing)\n",
                         e.path().c_str());
            fs::remove_all(e.path(), ec);
        }
}

namespace {

// Where training stands: the numbers of the exact state beside the weights,
// optimiser, schedule and batcher (no durations).
struct PretrainProgress {
    int64_t step = 0, tokens_seen = 0, targets_seen = 0;
    double final_loss = 0;
    json loss_curve = json::array(), norm_curve = json::array();

    json to_extra(const PackedBatcher::Position& at) const {
        return {{"step", step},
                {"batcher_epoch", at.epoch},
                {"batcher_cursor", at.cursor},
                {"tokens_seen", tokens_seen},
                {"target_tokens_seen", targets_seen},
                {"final_loss", final_loss},
                {"loss_curve", loss_curve},
                {"grad_norm_curve", norm_curve}};
    }
    // These numbers, and the batcher's position, from a checkpoint of `total` steps on `sched`.
    void restore(const ResumeState& st, const std::string& from, const Schedule& sched, int64_t total,
                 PackedBatcher& batcher) {
        const json& extra = st.extra;
        step = json_int(extra, "step", from);
        if (st.schedulers.at("lr").next_step != step || !(st.schedulers.at("lr").schedule == sched) || step > total)
            fail(from, ": scheduler position differs from the step count");
        batcher.restore({json_int(extra, "batcher_epoch", from), json_int(extra, "batcher_cursor", from),
                         st.rngs.at("batcher_epoch")},
                        from);
        tokens_seen = json_int(extra, "tokens_seen", from);
        targets_seen = json_int(extra, "target_tokens_seen", from);
        final_loss = json_number(extra, "final_loss", from);
        loss_curve = json_field(extra, "loss_curve", from);
        norm_curve = json_field(extra, "grad_norm_curve", from);
        if (static_cast<int64_t>(loss_curve.size()) != step || static_cast<int64_t>(norm_curve.size()) != step)
            fail(from, ": the loss and norm curves do not have ", step, " entries");
    }
    // pretrain.json's training block (without its checkpoints).
    ordered_json to_report(const PretrainConfig& config, int64_t updates, const PackedBatcher& batcher, double seconds,
                           double tokens_per_second) const {
        ordered_json tr;
        tr["updates"] = updates;
        tr["rows_per_epoch"] = batcher.rows_per_epoch();
        tr["epochs_started"] = batcher.epoch() + 1;
        tr["positions_seen"] = updates * config.batch_rows * config.sequence_length;
        tr["tokens_seen"] = tokens_seen;
        tr["target_tokens_seen"] = targets_seen;
        tr["seconds"] = seconds;
        tr["tokens_per_second"] = tokens_per_second;
        tr["final_loss"] = final_loss;
        tr["loss_curve"] = ordered_json::parse(loss_curve.dump());
        tr["grad_norm_curve"] = ordered_json::parse(norm_curve.dump());
        return tr;
    }
};

}  // namespace

// 5. the check of the base on the validation prompts: greedy and temperature 1.
static ordered_json base_check_json(Qwen2& model, const Tokenizer& tok, const std::vector<CheckPrompt>& check,
                                    const PretrainConfig& config) {
    if (check.empty()) return nullptr;
    Philox greedy_rng(config.seed, 2), sample_rng(config.seed, 3);
    const BaseCheck g =
        pretrain_check(model, tok, check, config.system_prompt, true, config.check_max_new_tokens, greedy_rng);
    const BaseCheck s =
        pretrain_check(model, tok, check, config.system_prompt, false, config.check_max_new_tokens, sample_rng);
    ordered_json check_json = ordered_json::object();
    check_json["prompts"] = "validation";
    check_json["chance_relevant_rate"] = 1.0 / kActionCount;
    check_json["greedy"] = g.to_json();
    check_json["sampled_temperature_1"] = s.to_json();
    std::fprintf(stderr,
                 "pretrain check on %lld validation prompts:\n"
                 "  greedy:  recognised %s, relevant %s (chance 16.7%%), success %s, %lld distinct answers\n"
                 "  sampled: recognised %s, relevant %s (chance 16.7%%), success %s, %lld distinct answers\n",
                 static_cast<long long>(g.n), rate(g.recognized).c_str(), rate(g.relevant).c_str(),
                 rate(g.success).c_str(), static_cast<long long>(g.distinct_responses), rate(s.recognized).c_str(),
                 rate(s.relevant).c_str(), rate(s.success).c_str(), static_cast<long long>(s.distinct_responses));
    return check_json;
}

// 6. tokenizer/ of the staging folder, and the generation config of the HF folder.
static void write_tokenizer_folder(const fs::path& tokdir, const std::string& tok_json, const PretrainConfig& config) {
    create_new_directory(tokdir);
    write_file_atomic(tokdir / "tokenizer.json", tok_json);
    write_json_atomic(tokdir / "tokenizer_config.json", tiny_tokenizer_config(config.system_prompt));
    ordered_json stm;
    stm["eos_token"] = std::string(kImEnd);
    stm["pad_token"] = std::string(kEndOfText);
    stm["additional_special_tokens"] = {std::string(kImStart), std::string(kImEnd)};
    write_json_atomic(tokdir / "special_tokens_map.json", stm);
}
static json generation_config(const Qwen2Config& mc, const PretrainConfig& config) {
    json gen;
    gen["bos_token_id"] = mc.bos_token_id;
    gen["eos_token_id"] = mc.eos_token_id;
    gen["pad_token_id"] = mc.bos_token_id;
    gen["do_sample"] = true;
    gen["temperature"] = 1.0;
    gen["top_k"] = 0;
    gen["top_p"] = 1.0;
    gen["max_new_tokens"] = config.check_max_new_tokens;
    return gen;
}

// The identity a checkpoint must match: config, documents, tokenizer, model config, provenance, binary.
static json pretrain_identity(const PretrainConfig& config, const std::vector<PretrainDocument>& docs,
                              const Tokenizer& tok, const Qwen2Config& mc, const ordered_json& provenance) {
    return {{"stage", "pretrain"},
            {"config", json::parse(config.to_json().dump())},
            {"documents_sha256", documents_sha256(docs)},
            {"tokenizer_sha256", tok.sha256()},
            {"model_config", json::parse(mc.to_json().dump())},
            {"provenance", json::parse(provenance.dump())},
            {"code_sha256", running_binary_sha256()}};
}

// A fresh temporary sibling of `out` (".<name>.pretrain<pid>-<random>"), renamed into place at the end.
static fs::path new_staging_folder(const fs::path& out) {
    const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
    std::random_device rd;
    fs::path staging = parent / ("." + out.filename().string() + ".pretrain" + std::to_string(::getpid()) + "-" +
                                 std::to_string(rd()));
    create_new_directory(staging);
    return staging;
}

// 2. every document's tokens and loss mask; the corpus's token and target counts.
static std::vector<PretrainExample> encode_documents(const Tokenizer& tok, const std::vector<PretrainDocument>& docs,
                                                     const PretrainConfig& config, int64_t& tokens, int64_t& targets) {
    std::vector<PretrainExample> examples;
    examples.reserve(docs.size());
    for (const auto& d : docs) {
        examples.push_back(pretrain_encode(tok, d, config.system_prompt));
        tokens += static_cast<int64_t>(examples.back().tokens.size());
        targets += std::count(examples.back().loss.begin(), examples.back().loss.end(), uint8_t{1});
    }
    return examples;
}

// 7. pretrain.json's tokenizer block.
static ordered_json tokenizer_json(const Tokenizer& tok, const BpeTrainStats& bpe, double seconds) {
    ordered_json tj;
    tj["sha256"] = tok.sha256();
    tj["vocab_size"] = tok.vocab_size();
    tj["merges"] = bpe.merges;
    tj["unique_pretokens"] = bpe.unique_words;
    tj["seconds"] = seconds;
    return tj;
}

// 7. pretrain.json's base_corpus block.
static ordered_json base_corpus_json(const std::vector<PretrainDocument>& docs, int64_t tokens, int64_t targets) {
    ordered_json cj;
    int64_t chats = 0;
    for (const auto& d : docs) chats += d.is_chat();
    cj["documents"] = static_cast<int64_t>(docs.size());
    cj["chat_documents"] = chats;
    cj["prose_documents"] = static_cast<int64_t>(docs.size()) - chats;
    cj["sha256"] = documents_sha256(docs);
    cj["tokens"] = tokens;
    cj["target_tokens"] = targets;
    return cj;
}

PretrainReport pretrain_run(const PretrainConfig& config, const std::vector<PretrainDocument>& docs,
                            const std::vector<CheckPrompt>& check, const fs::path& out_in,
                            const ordered_json& provenance, const Qwen2Config* shape,
                            const PretrainCheckpoints& checkpoints) {
    const auto t_start = Clock::now();
    const fs::path out = out_in.has_filename() ? out_in : out_in.parent_path();
    if (fs::exists(out)) fail("pretrain: refusing to overwrite existing folder '", out.string(), "'");
    if (docs.empty()) fail("pretrain: the base corpus is empty");
    if (checkpoints.every < 0) fail("pretrain: checkpoint.every_updates must be >= 0, got ", checkpoints.every);
    const FaultHooks hooks = FaultHooks::from_environment();
    CheckpointFile checkpoint(checkpoints.path.empty() ? pretrain_checkpoint_path(out) : checkpoints.path, hooks);
    remove_stale_staging(out);

    // 2. tokenizer
    const std::vector<std::string> specials = {std::string(kEndOfText), std::string(kImStart), std::string(kImEnd)};
    BpeTrainStats bpe;
    const std::string tok_json = train_bpe_tokenizer_json(pretrain_tokenizer_texts(docs, config.system_prompt),
                                                          config.tokenizer_vocab_size, specials, &bpe);
    const Tokenizer tok = Tokenizer::from_json_text(tok_json, "tokenizer.json (trained)");
    const double tokenizer_seconds = since(t_start);

    int64_t corpus_tokens = 0, corpus_targets = 0;
    const std::vector<PretrainExample> examples = encode_documents(tok, docs, config, corpus_tokens, corpus_targets);

    // 3. model with FP32 master weights
    const Qwen2Config mc = shape ? pretrain_model_config(*shape, tok) : pretrain_model_config(config.shape, tok);
    Qwen2Weights weights =
        random_weights(mc, InitOptions{.seed = config.seed, .matrices = WeightType::f32, .stddev = config.init_stddev});
    Qwen2Weights grads = qwen2_grads_like(weights);
    const bool mixed = config.precision == "bf16";
    Qwen2Weights compute;  // the BF16 copy the products read (mixed precision)
    if (mixed) qwen2_bf16_copy(weights, compute);
    Qwen2 model(mixed ? compute : weights);
    model.set_full_grads(&grads);
    const ParamList params = qwen2_parameters(weights, &grads);
    int64_t n_params = 0;
    for (const auto& p : params) n_params += p.numel();
    AdamWConfig ac;
    ac.weight_decay = config.weight_decay;
    AdamW opt(params, ac);
    const int64_t updates = config.updates();
    const Schedule sched{updates, config.lr, config.warmup_ratio, config.min_lr_ratio};

    // 4. training, continued from a checkpoint of the same identity if there is one
    PackedBatcher batcher(examples, config.batch_rows, config.sequence_length, special_id(tok, kEndOfText),
                          Philox(config.seed, /*stream=*/1));
    LmLoss lm(model);
    PretrainProgress at;
    const json identity = pretrain_identity(config, docs, tok, mc, provenance);
    auto exact_state = [&] {  // no durations
        ResumeState st;
        st.identity = identity;
        st.learned["model"] = capture_params(params);
        st.optimizers["adamw"] = opt.state();
        st.schedulers["lr"] = SchedulerState{sched, at.step};
        const PackedBatcher::Position pos = batcher.position();
        st.rngs["batcher_epoch"] = pos.epoch_rng;
        st.extra = at.to_extra(pos);
        return st;
    };
    ordered_json restarted = nullptr;
    if (std::optional<ResumeState> st = checkpoint.load(identity, "pretrain")) {
        const std::string from = checkpoint.path().string();
        restore_params(st->learned.at("model"), params, from);
        if (mixed) qwen2_bf16_copy(weights, compute);
        opt.load_state(st->optimizers.at("adamw"), from);
        at.restore(*st, from, sched, updates, batcher);
        restarted = {{"file", from}, {"step", at.step}};
        std::fprintf(stderr, "pretrain: continuing from checkpoint %s (step %lld of %lld)\n", from.c_str(),
                     static_cast<long long>(at.step), static_cast<long long>(updates));
    }
    const int64_t first_step = at.step, tokens_before = at.tokens_seen;
    const auto t_train = Clock::now();
    {
        Progress bar("pretrain", updates - first_step);
        while (at.step < updates) {
            const std::string where = "pretrain step " + std::to_string(at.step + 1);
            const PackedBatch batch = batcher.next();
            zero_grads(params);
            double loss = lm.forward_backward(batch, true);
            if (hooks.nonfinite("pretrain", "loss", at.step + 1)) loss = std::numeric_limits<double>::quiet_NaN();
            check_finite(loss, where, "loss");
            if (hooks.nonfinite("pretrain", "gradient", at.step + 1))
                params.front().grad[0] = std::numeric_limits<float>::quiet_NaN();
            const double norm = clip_grad_norm(params, config.clip, where + " gradients");
            opt.step(sched.at(at.step));
            if (mixed) qwen2_bf16_copy(weights, compute);
            ++at.step;
            at.tokens_seen += batch.real_tokens();
            at.targets_seen += batch.target_tokens();
            at.loss_curve.push_back(loss);
            at.norm_curve.push_back(norm);
            at.final_loss = loss;
            // Every N updates, and after the last (the check and the folder come next).
            if (checkpoint_due(checkpoints.every, at.step) || (checkpoints.every > 0 && at.step == updates))
                checkpoint.save(exact_state(), "pretrain step " + std::to_string(at.step));
            char status[96];
            std::snprintf(status, sizeof status, "loss %.4f  %.0f tok/s", loss,
                          static_cast<double>(at.tokens_seen - tokens_before) / std::max(1e-9, since(t_train)));
            bar.update(at.step - first_step, status);
        }
        bar.finish();
    }
    const double train_seconds = since(t_train);

    // 5. the check on the validation prompts (before writing: it goes into pretrain.json)
    const ordered_json check_json = base_check_json(model, tok, check, config);

    // 6.–7. the folder with pretrain.json, built in a temporary sibling and renamed into place
    const fs::path staging = new_staging_folder(out);
    try {
        const fs::path tokdir = staging / "tokenizer";
        write_tokenizer_folder(tokdir, tok_json, config);
        const fs::path hf = staging / "hf";
        save_checkpoint(hf, weights, tokdir, generation_config(mc, config));

        PretrainReport rep;
        rep.train_seconds = train_seconds;
        rep.tokens_per_second = static_cast<double>(at.tokens_seen - tokens_before) / std::max(1e-9, train_seconds);
        rep.final_loss = at.final_loss;
        ordered_json& j = rep.json;
        j["stage"] = "pretrain";
        j["provenance"] = provenance;
        j["config"] = config.to_json();
        j["seed"] = config.seed;
        j["base_corpus"] = base_corpus_json(docs, corpus_tokens, corpus_targets);
        j["tokenizer"] = tokenizer_json(tok, bpe, tokenizer_seconds);
        j["model"] = {{"config", mc.to_json()}, {"parameters", n_params}, {"checkpoint_sha256", checkpoint_sha256(hf)}};
        ordered_json tr = at.to_report(config, updates, batcher, train_seconds, rep.tokens_per_second);
        tr["checkpoints"] = {{"every_updates", checkpoints.every},
                             {"file", checkpoint.path().string()},
                             {"written_this_run", checkpoint.written()},
                             {"seconds_this_run", checkpoint.seconds()},
                             {"restarted_from", restarted}};
        j["training"] = tr;
        j["check"] = check_json;
        rep.seconds = since(t_start);
        j["seconds"] = rep.seconds;
        write_json_atomic(hf / "pretrain.json", j);
        fs::rename(hf, out);  // out did not exist (checked above); a sibling, so the same filesystem
        fs::remove_all(staging);
        checkpoint.remove();
        return rep;
    } catch (...) {
        std::error_code ec;
        fs::remove_all(staging, ec);
        throw;
    }
}

}  // namespace ppolab
