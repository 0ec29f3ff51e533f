// Pretraining of the tiny base (training/pretrain.h): config, the corpus
// guard, encoding and packing, the loss's gradient, and micro end-to-end
// runs (loss decreases, the folder loads, refusals, determinism).
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <set>

#include "data/corpus.h"
#include "data/rubric.h"
#include "model/hf_folder.h"
#include "model/init.h"
#include "support/test_support.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/chat.h"
#include "training/pretrain.h"
#include "training/resume_state.h"
#include "util/error.h"
#include "util/sha256.h"

using ppolab::test::message_of;
using namespace ppolab;

namespace {

// A small base-like corpus: help requests that are not corpus prompts,
// answered in the grammar with an action unrelated to the context, plus prose.
std::vector<PretrainDocument> micro_docs(int64_t chats, int64_t prose, uint64_t seed) {
    Philox rng(seed, 9);
    std::vector<PretrainDocument> docs;
    const char* prose_lines[] = {
        "The office opens at eight and the kitchen closes at four.",
        "Meeting rooms can be booked from the calendar on the intranet.",
        "Visitors sign in at the front desk and wear a badge.",
        "The printer on the second floor is shared by two teams.",
    };
    for (int64_t i = 0; i < chats; ++i) {
        const int ctx = static_cast<int>(rng.below(kActionCount));
        const int act = static_cast<int>(rng.below(kActionCount));
        PretrainDocument d;
        d.user = "Help request T" + std::to_string(i) + ". " + action_context(ctx) + " What should I try?";
        d.assistant = response_text(act, static_cast<int>(rng.below(3)), rng.below(2) == 1);
        docs.push_back(d);
    }
    for (int64_t i = 0; i < prose; ++i) {
        PretrainDocument d;
        d.text = prose_lines[rng.below(4)];
        docs.push_back(d);
    }
    return docs;
}

Tokenizer micro_tokenizer(const std::vector<PretrainDocument>& docs, int64_t vocab) {
    const std::string text = train_bpe_tokenizer_json(pretrain_tokenizer_texts(docs, tiny_system_prompt()), vocab,
                                                      {"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
    return Tokenizer::from_json_text(text, "micro tokenizer");
}

PretrainConfig micro_config() {
    PretrainConfig c;
    c.seed = 11;
    c.tokenizer_vocab_size = 420;
    c.batch_rows = 4;
    c.sequence_length = 128;
    c.tokens = 4 * 128 * 25;  // 25 updates
    c.lr = 3e-3;
    c.precision = "bf16";  // the tiny preset's mixed precision, so the runs below cover it (checkpoints too)
    c.check_prompts = 12;
    c.check_max_new_tokens = 12;
    return c;
}

// A smaller Qwen2 than `tiny` so that the end-to-end runs take seconds.
Qwen2Config micro_shape() {
    Qwen2Config c = model_shape("tiny");
    c.hidden_size = 64;
    c.intermediate_size = 128;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 16;
    return c;
}

std::vector<CheckPrompt> micro_check() {
    const Corpus corpus = corpus_generate();
    std::vector<CheckPrompt> out;
    for (const auto& p : corpus.pairs)
        if (p.split == "validation" && out.size() < 12) out.push_back({p.id, p.prompt, p.expected_action});
    return out;
}

fs::path fresh_dir(const std::string& name) {
    fs::path d = fs::temp_directory_path() / ("ppolab_test_pretrain_" + std::to_string(::getpid())) / name;
    fs::remove_all(d);
    fs::create_directories(d.parent_path());
    return d;
}

}  // namespace

// ---------------------------------------------------------------- config

TEST(PretrainConfig, JsonRoundTripSetAndErrors) {
    PretrainConfig c;
    c.tokens = 12345;
    c.world_knowledge = true;
    c.system_prompt = "Hi.";
    const PretrainConfig back = PretrainConfig::from_json(c.to_json(), "x");
    EXPECT_EQ(back.to_json(), c.to_json());

    c.set("lr=0.005");
    EXPECT_DOUBLE_EQ(c.lr, 0.005);
    c.set("system_prompt=You help.");  // not JSON: taken as a string
    EXPECT_EQ(c.system_prompt, "You help.");
    EXPECT_NE(message_of([&] { c.set("lrr=1"); }).find("unknown pretrain config field"), std::string::npos);
    EXPECT_NE(message_of([&] { c.set("lr=-1"); }).find("field 'lr' must be in (0"), std::string::npos);
    EXPECT_NE(message_of([&] { c.set("batch_rows=\"x\""); }).find("batch_rows"), std::string::npos);
    EXPECT_NE(message_of([&] { c.set("shape=huge"); }).find("unknown model shape 'huge'"), std::string::npos);
    c.set("precision=bf16");
    EXPECT_EQ(c.precision, "bf16");
    EXPECT_NE(message_of([&] {
                  c.set("precision=fp16");
              }).find("field 'precision' must be \"fp32\" or \"bf16\", got \"fp16\""),
              std::string::npos);
    json bad = {{"tokens", 10}, {"colour", 1}};
    EXPECT_NE(message_of([&] {
                  PretrainConfig::from_json(bad, "cfg.json");
              }).find("cfg.json: unknown pretrain config field 'colour'"),
              std::string::npos);
}

TEST(PretrainConfig, UpdatesFromTokensAndStudyKeys) {
    PretrainConfig c;
    c.tokens = 1'000'000;
    c.batch_rows = 16;
    c.sequence_length = 128;
    EXPECT_EQ(c.updates(), 489);  // ceil(1e6 / 2048)
    c.max_updates = 3;
    EXPECT_EQ(c.updates(), 3);

    json study = {
        {"model", {{"shape", "tiny"}, {"system_prompt", "Be brief."}, {"name_or_path", "x"}}},
        {"pretrain", {{"enabled", true}, {"tokens", 4096}, {"lr", 0.01}, {"seed", 5}, {"tokenizer_vocab_size", 400}}},
        {"max_updates", 1}};
    const PretrainConfig s = PretrainConfig::from_study(study);
    EXPECT_EQ(s.system_prompt, "Be brief.");
    EXPECT_EQ(s.tokens, 4096);
    EXPECT_DOUBLE_EQ(s.lr, 0.01);
    EXPECT_EQ(s.seed, 5u);
    EXPECT_EQ(s.tokenizer_vocab_size, 400);
    EXPECT_EQ(s.updates(), 1);
}

// ---------------------------------------------------------------- the corpus guard

TEST(PretrainCorpusGuard, DetectsACorpusPromptBySha256) {
    const Corpus corpus = corpus_generate();
    std::map<std::string, std::string> manifest;
    for (const auto& p : corpus.pairs) manifest[p.id] = sha256_hex(p.prompt);
    for (const auto& d : corpus.demonstrations) manifest[d.id] = sha256_hex(d.prompt);
    for (const auto& r : corpus.rollouts) manifest[r.id] = sha256_hex(r.prompt);
    for (const auto& p : corpus.probes) manifest[p.id] = sha256_hex(p.prompt);
    ASSERT_EQ(manifest.size(), 2040u + 80u);

    std::vector<PretrainDocument> docs = micro_docs(50, 5, 1);
    EXPECT_NO_THROW(check_base_prompts(docs, manifest, "manifest.json"));

    // A validation prompt sneaking in is found, named, and its position given.
    const PairRecord* val = nullptr;
    for (const auto& p : corpus.pairs)
        if (p.split == "validation") {
            val = &p;
            break;
        }
    ASSERT_NE(val, nullptr);
    PretrainDocument leak;
    leak.user = val->prompt;
    leak.assistant = response_text(0, 1, false);
    docs.insert(docs.begin() + 17, leak);
    const std::string msg = message_of([&] { check_base_prompts(docs, manifest, "RUN/corpus/manifest.json"); });
    EXPECT_NE(msg.find("base corpus document 17"), std::string::npos) << msg;
    EXPECT_NE(msg.find("corpus prompt '" + val->id + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("RUN/corpus/manifest.json"), std::string::npos) << msg;

    // One changed character is a different prompt (the guard is exact, by hash).
    docs[17].user += " ";
    EXPECT_NO_THROW(check_base_prompts(docs, manifest, "manifest.json"));
}

// ---------------------------------------------------------------- encoding and packing

TEST(PretrainEncode, LossOnTheAnswerAndImEndOnly) {
    const auto docs = micro_docs(30, 5, 2);
    const Tokenizer tok = micro_tokenizer(docs, 300);
    const PretrainDocument& chat = docs[0];
    const PretrainExample ex = pretrain_encode(tok, chat, tiny_system_prompt());
    ASSERT_EQ(ex.tokens.size(), ex.loss.size());
    // The whole example decodes to the rendered conversation plus <|endoftext|>.
    const std::string rendered =
        render_chat({{"user", chat.user}, {"assistant", chat.assistant}}, false, tiny_system_prompt());
    const std::string full = tok.decode(ex.tokens);
    EXPECT_EQ(full, rendered.substr(0, rendered.size() - 1) + "<|endoftext|>");  // "\n" after <|im_end|> replaced
    // The counted tokens are exactly the answer and <|im_end|>.
    std::vector<int32_t> counted;
    for (size_t i = 0; i < ex.tokens.size(); ++i)
        if (ex.loss[i]) counted.push_back(ex.tokens[i]);
    EXPECT_EQ(tok.decode(counted), chat.assistant + "<|im_end|>");
    EXPECT_EQ(ex.tokens.back(), tok.token_to_id("<|endoftext|>"));
    EXPECT_EQ(ex.loss.back(), 0);

    const PretrainDocument& prose = docs.back();
    ASSERT_FALSE(prose.is_chat());
    const PretrainExample px = pretrain_encode(tok, prose, tiny_system_prompt());
    EXPECT_EQ(tok.decode(px.tokens), prose.text + "<|endoftext|>");
    EXPECT_EQ(px.loss[0], 0);
    for (size_t i = 1; i < px.loss.size(); ++i) EXPECT_EQ(px.loss[i], 1);
}

TEST(PretrainPacking, WholeDocumentsEveryOneOncePerEpoch) {
    std::vector<PretrainExample> ex;
    for (int i = 0; i < 23; ++i) {
        PretrainExample e;
        const int n = 3 + (i * 7) % 11;  // lengths 3..13
        for (int k = 0; k < n; ++k) e.tokens.push_back(1000 * (i + 1) + k);
        e.loss.assign(static_cast<size_t>(n), 1);
        e.loss[0] = 0;
        ex.push_back(e);
    }
    const int64_t B = 2, T = 20;
    PackedBatcher batcher(ex, B, T, /*pad_id=*/-7, Philox(5, 1));
    std::map<int, int> seen;  // example -> times its first token was seen
    int64_t rows = 0;
    while (batcher.epoch() <= 0) {
        const PackedBatch b = batcher.next();
        if (batcher.epoch() > 0 && rows >= batcher.rows_per_epoch()) break;
        for (int64_t r = 0; r < B && rows < batcher.rows_per_epoch(); ++r, ++rows) {
            int64_t t = 0;
            // real tokens first, then padding only
            while (t < T && b.mask[r * T + t]) ++t;
            for (int64_t u = t; u < T; ++u) {
                EXPECT_EQ(b.mask[r * T + u], 0);
                EXPECT_EQ(b.tokens[r * T + u], -7);
                EXPECT_EQ(b.target[r * T + u], 0);
            }
            EXPECT_EQ(b.target[r * T], 0);  // nothing predicts a row's first token
            // whole documents: each starts at k = 0 and runs to its full length
            for (int64_t u = 0; u < t;) {
                const int id = b.tokens[r * T + u] / 1000 - 1, k0 = b.tokens[r * T + u] % 1000;
                ASSERT_EQ(k0, 0) << "row " << r << " position " << u;
                const int64_t n = static_cast<int64_t>(ex[id].tokens.size());
                for (int64_t k = 0; k < n; ++k) {
                    ASSERT_EQ(b.tokens[r * T + u + k], ex[id].tokens[k]);
                    if (u + k > 0) {
                        EXPECT_EQ(b.target[r * T + u + k], ex[id].loss[k]);
                    }
                }
                ++seen[id];
                u += n;
            }
        }
    }
    EXPECT_EQ(seen.size(), ex.size());
    for (auto& [id, n] : seen) EXPECT_EQ(n, 1) << "example " << id;

    PretrainExample big;
    big.tokens.assign(21, 1);
    big.loss.assign(21, 1);
    std::vector<PretrainExample> too_long{big};
    EXPECT_NE(message_of([&] { PackedBatcher(too_long, B, T, 0, Philox(1)); }).find("21 tokens; seq_len is 20"),
              std::string::npos);
}

// ---------------------------------------------------------------- the loss

// The loss glue (gather of predicting positions, mean over targets, scatter
// of the gradient) against a directional finite difference in the weights:
// L(w + εd) − L(w − εd) ≈ 2ε ⟨∇L, d⟩ with d = ∇L / |∇L|.
TEST(PretrainLoss, GradientMatchesDirectionalFiniteDifference) {
    Qwen2Config c = model_shape("tiny");
    c.vocab_size = 64;
    c.hidden_size = 32;
    c.intermediate_size = 48;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 8;
    InitOptions io;
    io.seed = 3;
    io.matrices = WeightType::f32;
    io.stddev = 0.2;
    io.randomize_norms_and_biases = true;
    Qwen2Weights w = random_weights(c, io);
    Qwen2Weights g = qwen2_grads_like(w);
    Qwen2 model(w);
    model.set_full_grads(&g);
    const ParamList params = qwen2_parameters(w, &g);

    std::vector<PretrainExample> ex;
    Philox rng(4);
    for (int i = 0; i < 5; ++i) {
        PretrainExample e;
        const int n = 4 + i;
        for (int k = 0; k < n; ++k) e.tokens.push_back(static_cast<int32_t>(rng.below(64)));
        e.loss.assign(static_cast<size_t>(n), static_cast<uint8_t>(i % 2));  // some documents not counted
        e.loss[static_cast<size_t>(n - 1)] = 1;
        ex.push_back(e);
    }
    PackedBatcher batcher(ex, 2, 16, 0, Philox(6));
    const PackedBatch batch = batcher.next();
    LmLoss lm(model);
    zero_grads(params);
    const double l0 = lm.forward_backward(batch, true);
    EXPECT_GT(l0, 0);
    double norm2 = 0;
    for (const auto& p : params)
        for (int64_t i = 0; i < p.numel(); ++i) norm2 += double(p.grad[i]) * p.grad[i];
    const double norm = std::sqrt(norm2);
    ASSERT_GT(norm, 1e-3);
    std::vector<std::vector<float>> base, dir;
    for (const auto& p : params) {
        base.emplace_back(p.data, p.data + p.numel());
        dir.emplace_back(p.grad, p.grad + p.numel());
    }
    auto loss_at = [&](double eps) {
        for (size_t k = 0; k < params.size(); ++k)
            for (int64_t i = 0; i < params[k].numel(); ++i)
                params[k].data[i] = static_cast<float>(base[k][i] + eps * dir[k][i] / norm);
        return lm.forward_backward(batch, false);
    };
    const double eps = 1e-2;
    const double fd = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
    // FP32 forward: the difference of two losses near 4 carries ~1e-6
    // rounding, /2ε = 5e-5 of noise; curvature over ε = 1e-2 adds O(ε²).
    EXPECT_NEAR(fd, norm, 2e-2 * norm) << "directional derivative " << fd << " vs |grad| " << norm;
}

// ---------------------------------------------------------------- end to end

class PretrainRun : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        ::setenv("PPOLAB_QUIET", "1", 1);
        docs_ = new std::vector<PretrainDocument>(micro_docs(400, 60, 3));
        check_ = new std::vector<CheckPrompt>(micro_check());
        dir_a_ = new fs::path(fresh_dir("a"));
        dir_b_ = new fs::path(fresh_dir("b"));
        const Qwen2Config shape = micro_shape();
        report_ = new PretrainReport(pretrain_run(micro_config(), *docs_, *check_, *dir_a_, {}, &shape));
    }
    static void TearDownTestSuite() {
        fs::remove_all(dir_a_->parent_path());
        delete docs_;
        delete check_;
        delete dir_a_;
        delete dir_b_;
        delete report_;
    }
    static std::vector<PretrainDocument>* docs_;
    static std::vector<CheckPrompt>* check_;
    static fs::path* dir_a_;
    static fs::path* dir_b_;
    static PretrainReport* report_;
};
std::vector<PretrainDocument>* PretrainRun::docs_ = nullptr;
std::vector<CheckPrompt>* PretrainRun::check_ = nullptr;
fs::path* PretrainRun::dir_a_ = nullptr;
fs::path* PretrainRun::dir_b_ = nullptr;
PretrainReport* PretrainRun::report_ = nullptr;

TEST_F(PretrainRun, LossDecreases) {
    const json j = read_json_file(*dir_a_ / "pretrain.json");
    const auto& curve = j.at("training").at("loss_curve");
    ASSERT_EQ(curve.size(), 25u);
    double first = 0, last = 0;
    for (int i = 0; i < 5; ++i) {
        first += curve[i].get<double>() / 5;
        last += curve[20 + i].get<double>() / 5;
    }
    // From ≈ ln(vocab) at random init to well below it.
    EXPECT_GT(first, 4.5);
    EXPECT_LT(last, first - 1.5) << "first 5 updates " << first << ", last 5 " << last;
    EXPECT_DOUBLE_EQ(report_->final_loss, curve[24].get<double>());
    EXPECT_GT(j.at("training").at("tokens_seen").get<int64_t>(), 25 * 4 * 128 / 2);
    EXPECT_GT(j.at("training").at("tokens_per_second").get<double>(), 0);
}

TEST_F(PretrainRun, FolderLoadsAsACheckpoint) {
    const Tokenizer tok = Tokenizer::from_file(*dir_a_);
    const Qwen2Weights w = load_checkpoint(*dir_a_);
    EXPECT_EQ(w.config.vocab_size % 64, 0);
    EXPECT_GE(w.config.vocab_size, tok.vocab_size());
    EXPECT_LE(tok.vocab_size(), 420);
    EXPECT_EQ(w.config.eos_token_id, tok.token_to_id("<|im_end|>"));
    EXPECT_EQ(w.config.bos_token_id, tok.token_to_id("<|endoftext|>"));
    EXPECT_TRUE(w.config.tie_word_embeddings);
    EXPECT_EQ(w.config.hidden_size, 64);
    EXPECT_EQ(w.config.num_hidden_layers, 2);
    EXPECT_EQ(w.embed_tokens.type, WeightType::bf16);
    const json gen = read_json_file(*dir_a_ / "generation_config.json");
    EXPECT_EQ(gen.at("eos_token_id"), w.config.eos_token_id);
    EXPECT_EQ(gen.at("pad_token_id"), w.config.bos_token_id);
    const json tc = read_json_file(*dir_a_ / "tokenizer_config.json");
    EXPECT_EQ(tc.at("eos_token"), "<|im_end|>");
    EXPECT_NE(tc.at("chat_template").get<std::string>().find(tiny_system_prompt()), std::string::npos);

    const json j = read_json_file(*dir_a_ / "pretrain.json");
    EXPECT_EQ(j.at("tokenizer").at("sha256"), tok.sha256());
    EXPECT_EQ(j.at("model").at("checkpoint_sha256"), checkpoint_sha256(*dir_a_));
    EXPECT_EQ(j.at("config"), json(micro_config().to_json()));
    // The check: both decoding modes, every prompt scored, rates in [0, 1].
    for (const char* mode : {"greedy", "sampled_temperature_1"}) {
        const json& m = j.at("check").at(mode);
        EXPECT_EQ(m.at("n"), 12);
        for (const char* r : {"recognized_rate", "relevant_rate", "success_rate"}) {
            EXPECT_GE(m.at(r).get<double>(), 0.0);
            EXPECT_LE(m.at(r).get<double>(), 1.0);
        }
        EXPECT_LE(m.at("relevant_rate").get<double>(), m.at("recognized_rate").get<double>());
    }
    // Nothing but the folder was left in the parent (no staging folder).
    int entries = 0;
    for (const auto& e : fs::directory_iterator(dir_a_->parent_path())) entries += e.path() != *dir_b_;
    EXPECT_EQ(entries, 1);
}

TEST_F(PretrainRun, RefusesAnExistingFolder) {
    const std::string before = checkpoint_sha256(*dir_a_);
    PretrainConfig c = micro_config();
    c.tokens = 4 * 128;
    const Qwen2Config shape = micro_shape();
    const std::string msg = message_of([&] { pretrain_run(c, *docs_, {}, *dir_a_, {}, &shape); });
    EXPECT_NE(msg.find("refusing to overwrite existing folder"), std::string::npos) << msg;
    EXPECT_EQ(checkpoint_sha256(*dir_a_), before);
}

TEST_F(PretrainRun, SameSeedSameBytes) {
    const Qwen2Config shape = micro_shape();
    pretrain_run(micro_config(), *docs_, *check_, *dir_b_, {}, &shape);
    EXPECT_EQ(sha256_file(*dir_a_ / "model.safetensors"), sha256_file(*dir_b_ / "model.safetensors"));
    EXPECT_EQ(sha256_file(*dir_a_ / "tokenizer.json"), sha256_file(*dir_b_ / "tokenizer.json"));
    const json a = read_json_file(*dir_a_ / "pretrain.json"), b = read_json_file(*dir_b_ / "pretrain.json");
    EXPECT_EQ(a.at("training").at("loss_curve"), b.at("training").at("loss_curve"));
    EXPECT_EQ(a.at("check"), b.at("check"));
}

// Crash safety: a checkpointed run stopped by a non-finite gradient, then by
// a non-finite loss, continues each time from its last checkpoint (weights,
// moments, schedule, batcher position, curves) and ends with the bytes of the
// uninterrupted run (dir_a_, no checkpoints).
TEST_F(PretrainRun, StoppedByNonFiniteValuesContinuesFromCheckpointsToTheSameBytes) {
    const fs::path root = fs::temp_directory_path() / ("ppolab_test_pretrain_ck_" + std::to_string(::getpid()));
    fs::remove_all(root);
    const fs::path out = root / "base";
    const fs::path ck = pretrain_checkpoint_path(out);
    EXPECT_EQ(ck, root / "base.checkpoints" / "pretrain.state.gz");
    const Qwen2Config shape = micro_shape();
    const PretrainCheckpoints every3{{}, 3};

    ::setenv("PPOLAB_TEST_NONFINITE", "pretrain.gradient@8", 1);
    std::string msg = message_of([&] { pretrain_run(micro_config(), *docs_, *check_, out, {}, &shape, every3); });
    EXPECT_NE(msg.find("pretrain step 8 gradients: parameter '"), std::string::npos) << msg;
    EXPECT_NE(msg.find("has a non-finite gradient"), std::string::npos) << msg;
    EXPECT_FALSE(fs::exists(out));
    ASSERT_TRUE(fs::exists(ck));
    EXPECT_EQ(json_int(load_resume_state(ck).extra, "step", "ck"), 6);

    ::setenv("PPOLAB_TEST_NONFINITE", "pretrain.loss@14", 1);
    msg = message_of([&] { pretrain_run(micro_config(), *docs_, *check_, out, {}, &shape, every3); });
    EXPECT_EQ(msg, "pretrain step 14: loss is not finite (nan)");
    EXPECT_EQ(json_int(load_resume_state(ck).extra, "step", "ck"), 12);

    ::unsetenv("PPOLAB_TEST_NONFINITE");
    pretrain_run(micro_config(), *docs_, *check_, out, {}, &shape, every3);
    EXPECT_EQ(sha256_file(*dir_a_ / "model.safetensors"), sha256_file(out / "model.safetensors"));
    const json a = read_json_file(*dir_a_ / "pretrain.json"), b = read_json_file(out / "pretrain.json");
    EXPECT_EQ(a.at("training").at("loss_curve"), b.at("training").at("loss_curve"));
    EXPECT_EQ(a.at("training").at("grad_norm_curve"), b.at("training").at("grad_norm_curve"));
    EXPECT_EQ(a.at("training").at("tokens_seen"), b.at("training").at("tokens_seen"));
    EXPECT_EQ(a.at("check"), b.at("check"));
    EXPECT_EQ(b.at("training").at("checkpoints").at("restarted_from").at("step"), 12);
    EXPECT_FALSE(fs::exists(ck.parent_path()));  // removed once the folder is written
    fs::remove_all(root);
}
