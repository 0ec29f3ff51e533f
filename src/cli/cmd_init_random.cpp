// cmd_init_random.cpp — `ppolab init-random`: a random-weight checkpoint
// folder in the Hugging Face layout (config.json, BF16 model.safetensors,
// generation_config.json, tokenizer files) that load_checkpoint reads back.
#include <cstdio>
#include <set>

#include "cli/command.h"
#include "model/hf_folder.h"
#include "model/init.h"
#include "model/tensor_table.h"
#include "util/error.h"

namespace ppolab::cli {

// The id of an added token with this exact content, or -1.
static int64_t added_token_id(const json& tokenizer, const std::string& content) {
    if (!tokenizer.contains("added_tokens") || !tokenizer["added_tokens"].is_array()) return -1;
    for (const json& t : tokenizer["added_tokens"])
        if (t.is_object() && t.value("content", "") == content && t.contains("id") && t["id"].is_number_integer())
            return t["id"].get<int64_t>();
    return -1;
}

static int init_random(const Args& args) {
    args.allow_only({"preset", "out", "seed", "tokenizer"});
    const std::string preset = args.get("preset");
    const fs::path out = args.get("out");
    const int64_t seed = args.get_int("seed", 0);
    if (seed < 0) fail("--seed must be a non-negative integer, got ", seed);
    if (!args.has("tokenizer"))
        fail(
            "init-random needs --tokenizer PATH (a tokenizer.json or a folder holding one) to write a complete "
            "checkpoint folder");
    const fs::path tokenizer = args.get("tokenizer");
    Qwen2Config config = model_shape(preset);
    if (fs::exists(out)) fail("refusing to overwrite existing folder '", out.string(), "'");

    const fs::path tokenizer_json = fs::is_directory(tokenizer) ? tokenizer / "tokenizer.json" : tokenizer;
    const int64_t tokens = tokenizer_vocab_size(tokenizer_json);
    if (preset == "tiny") {
        // The tiny shape takes its vocabulary from the tokenizer (rounded up
        // to a multiple of 64, as Qwen pads its embedding) and its special
        // ids from the tokenizer's ChatML tokens.
        config.vocab_size = (tokens + 63) / 64 * 64;
        const json tok = read_json_file(tokenizer_json, InputKind::tokenizer);
        config.bos_token_id = added_token_id(tok, "<|endoftext|>");
        config.eos_token_id = added_token_id(tok, "<|im_end|>");
    } else if (tokens > config.vocab_size) {
        fail(tokenizer_json.string(), ": the tokenizer has ", tokens, " tokens; the ", preset, " shape holds ",
             config.vocab_size);
    }

    json generation;
    if (fs::is_directory(tokenizer) && fs::is_regular_file(tokenizer / "generation_config.json")) {
        generation = read_json_file(tokenizer / "generation_config.json", InputKind::config);
    } else {
        generation = json::object();
        if (config.bos_token_id >= 0) generation["bos_token_id"] = config.bos_token_id;
        if (config.eos_token_id >= 0) generation["eos_token_id"] = config.eos_token_id;
    }

    InitOptions options;
    options.seed = static_cast<uint64_t>(seed);
    options.matrices = WeightType::bf16;
    const Qwen2Weights weights = random_weights(config, options);
    save_checkpoint(out, weights, tokenizer, generation);

    int64_t params = 0;
    for (const TensorSpec& s : qwen2_tensor_table(config)) params += s.numel();
    std::printf("init-random: preset %s, seed %lld, %lld parameters (vocab %lld, width %lld, %lld layers)\n",
                preset.c_str(), static_cast<long long>(seed), static_cast<long long>(params),
                static_cast<long long>(config.vocab_size), static_cast<long long>(config.hidden_size),
                static_cast<long long>(config.num_hidden_layers));
    std::printf("wrote %s/\n", out.string().c_str());
    std::set<fs::path> files(fs::directory_iterator(out), fs::directory_iterator{});
    for (const fs::path& f : files)
        std::printf("  %-26s %12llu bytes\n", f.filename().string().c_str(),
                    static_cast<unsigned long long>(fs::file_size(f)));
    std::printf("checkpoint sha256 %s\n", checkpoint_sha256(out).c_str());
    return 0;
}

static Command init_random_cmd(
    "init-random",
    "init-random --preset qwen2.5-0.5b|tiny --out DIR [--seed N] --tokenizer PATH\n"
    "                            write a random-weight checkpoint folder (BF16, Hugging Face layout)",
    {}, init_random);

}  // namespace ppolab::cli
