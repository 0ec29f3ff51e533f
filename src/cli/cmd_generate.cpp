// cmd_generate.cpp — `ppolab generate`: sample a completion from a checkpoint folder.
//
// generate renders the prompt with the chat template (Qwen2.5's, its default
// system prompt unless --system; --raw skips the template), then decodes
// with the KV cache. It honours the folder's generation_config.json unless
// --ignore-generation-config: do_sample false → greedy; eos_token_id (one id
// or a list) ends a row; max_new_tokens. Sampling is always temperature 1
// over the full vocabulary: a temperature ≠ 1, top_k or top_p asked there is
// not implemented and is reported on stderr, never silently dropped.
#include <cstdio>

#include "cli/command.h"
#include "model/generate.h"
#include "model/hf_folder.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "training/peft.h"
#include "training/tensors.h"
#include "util/error.h"
#include "util/json.h"

namespace ppolab::cli {

namespace {

struct GenerationSettings {
    bool greedy = false;
    int64_t max_new_tokens = 64;
    std::vector<int32_t> eos;  // first: the EOS id; the rest end a row too
    std::vector<std::string> not_honoured;
};

// What generation_config.json asks, as far as ppolab implements it.
GenerationSettings read_generation_config(const fs::path& dir, const Qwen2Config& config) {
    GenerationSettings s;
    if (config.eos_token_id >= 0) s.eos.push_back(static_cast<int32_t>(config.eos_token_id));
    const fs::path file = dir / "generation_config.json";
    if (!fs::is_regular_file(file)) return s;
    const json g = read_json_file(file);
    const std::string where = file.string();
    if (g.contains("do_sample")) s.greedy = !json_bool(g, "do_sample", where);
    if (g.contains("max_new_tokens")) s.max_new_tokens = json_int(g, "max_new_tokens", where);
    if (g.contains("eos_token_id")) {
        s.eos.clear();
        const json& e = g["eos_token_id"];
        if (e.is_number_integer()) {
            s.eos.push_back(e.get<int32_t>());
        } else if (e.is_array()) {
            for (const json& x : e) {
                if (!x.is_number_integer()) fail(where, ": field 'eos_token_id' must hold integers, got ", x.dump());
                s.eos.push_back(x.get<int32_t>());
            }
        } else {
            fail(where, ": field 'eos_token_id' must be an integer or a list, got ", e.type_name());
        }
    }
    if (!s.greedy) {
        if (g.contains("temperature") && json_number(g, "temperature", where) != 1.0)
            s.not_honoured.push_back("temperature " + g["temperature"].dump());
        if (g.contains("top_k") && !g["top_k"].is_null() && json_int(g, "top_k", where) != 0)
            s.not_honoured.push_back("top_k " + g["top_k"].dump());
        if (g.contains("top_p") && !g["top_p"].is_null() && json_number(g, "top_p", where) != 1.0)
            s.not_honoured.push_back("top_p " + g["top_p"].dump());
    }
    if (g.contains("repetition_penalty") && json_number(g, "repetition_penalty", where) != 1.0)
        s.not_honoured.push_back("repetition_penalty " + g["repetition_penalty"].dump());
    return s;
}

int run_generate(const Args& args) {
    args.allow_only({"model", "prompt", "greedy", "max-new-tokens", "seed", "json", "system", "raw",
                     "ignore-generation-config", "adapter"});
    const fs::path dir = args.get("model");
    const std::string prompt = args.get("prompt");
    const int64_t seed = args.get_int("seed", 0);
    if (seed < 0) fail("--seed must be a non-negative integer, got ", seed);

    const Qwen2Weights weights = load_checkpoint(dir, WeightType::bf16);
    const Tokenizer tok = Tokenizer::from_file(dir);
    GenerationSettings gs;
    if (args.has("ignore-generation-config")) {
        if (weights.config.eos_token_id >= 0) gs.eos.push_back(static_cast<int32_t>(weights.config.eos_token_id));
    } else {
        gs = read_generation_config(dir, weights.config);
    }
    if (gs.eos.empty()) {
        const int32_t im_end = tok.token_to_id("<|im_end|>");
        if (im_end >= 0) gs.eos.push_back(im_end);
    }
    if (args.has("greedy")) gs.greedy = true;
    gs.max_new_tokens = args.get_int("max-new-tokens", gs.max_new_tokens);
    // Bounded before it sizes the KV cache (Qwen2.5-0.5B: 12 KiB per position).
    constexpr int64_t kMaxNewTokens = 32768;
    if (gs.max_new_tokens <= 0 || gs.max_new_tokens > kMaxNewTokens)
        fail("--max-new-tokens must be in [1, ", kMaxNewTokens, "], got ", gs.max_new_tokens,
             args.has("max-new-tokens") ? "" : " (from generation_config.json's max_new_tokens)");
    if (!gs.greedy && !gs.not_honoured.empty()) {
        std::string list;
        for (const auto& x : gs.not_honoured) list += (list.empty() ? "" : ", ") + x;
        std::fprintf(stderr,
                     "generate: generation_config.json asks %s; not implemented: ppolab samples at temperature 1 "
                     "over the full vocabulary (no top-k/top-p)\n",
                     list.c_str());
    }

    const std::string text =
        args.has("raw") ? prompt
                        : render_chat({{"user", prompt}}, true, args.get("system", std::string(kQwenDefaultSystem)));
    const std::vector<int32_t> ids = tok.encode(text);
    if (ids.empty()) fail("--prompt: the rendered prompt has no tokens");
    const int64_t limit = weights.config.max_position_embeddings;
    if (limit > 0 && static_cast<int64_t>(ids.size()) + gs.max_new_tokens > limit)
        fail("--prompt: ", ids.size(), " prompt tokens + ", gs.max_new_tokens, " new tokens exceed the model's ", limit,
             " positions (max_position_embeddings); the prompt is refused, not truncated");

    // --adapter DIR: a trained policy (a stage's final/ folder, learned.safetensors) or a PEFT folder.
    LoraAdapters adapters;
    if (args.has("adapter")) adapters = load_adapters(args.get("adapter"), weights.config);
    Qwen2 model(weights, args.has("adapter") ? &adapters : nullptr);
    GenerationOptions opt;
    opt.max_new_tokens = gs.max_new_tokens;
    opt.greedy = gs.greedy;
    if (!gs.eos.empty()) {
        opt.eos_id = gs.eos[0];
        opt.extra_eos_ids.assign(gs.eos.begin() + 1, gs.eos.end());
    }
    Philox rng(static_cast<uint64_t>(seed));
    Generation g = generate(model, {ids}, opt, rng)[0];

    std::vector<int32_t> body = g.tokens;
    if (g.finish_reason == "eos" && !body.empty()) body.pop_back();
    const std::string completion = tok.decode(body);
    if (args.has("json")) {
        ordered_json out;
        out["prompt_ids"] = ids;
        out["ids"] = g.tokens;
        out["logprobs"] = g.logprobs;
        out["finish_reason"] = g.finish_reason;
        out["text"] = completion;
        out["sampling"] = gs.greedy ? "greedy" : "temperature 1, full vocabulary, no top-k/top-p";
        out["seed"] = seed;
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        std::printf("%s\n", completion.c_str());
    }
    return 0;
}

}  // namespace

static Command generate_cmd(
    "generate",
    "generate --model DIR --prompt TEXT [--greedy] [--max-new-tokens N] [--seed N] [--json] [--system TEXT]\n"
    "         [--raw] [--ignore-generation-config] [--adapter DIR]   sample a chat completion (temperature 1,\n"
    "                            full vocabulary); --adapter: a PEFT folder or a trained policy (e.g. RUN/sft/final)",
    {"greedy", "json", "raw", "ignore-generation-config"}, run_generate);

}  // namespace ppolab::cli
