// cmd_score.cpp — `ppolab score`: teacher-forced log-probs of a token
// sequence under a checkpoint folder, optionally with the raw logits.
#include <cstdio>
#include <sstream>

#include "cli/command.h"
#include "model/hf_folder.h"
#include "model/qwen2.h"
#include "model/sampling.h"
#include "training/peft.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

namespace ppolab::cli {

namespace {

std::vector<int32_t> parse_ids(const std::string& text, int64_t vocab) {
    std::vector<int32_t> ids;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        size_t used = 0;
        long long v = -1;
        try {
            v = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != item.size() || item.empty()) fail("--ids: '", item, "' is not an integer (expected 1,2,3,…)");
        if (v < 0 || v >= vocab) fail("--ids: token id ", v, " is outside the vocabulary [0, ", vocab, ")");
        ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) fail("--ids: no token ids given");
    return ids;
}

int run_score(const Args& args) {
    args.allow_only({"model", "ids", "dump-logits", "adapter"});
    const fs::path dir = args.get("model");
    if (args.has("dump-logits")) {  // checked before any work: ppolab never replaces a file it was given
        std::error_code ec;
        if (fs::symlink_status(args.get("dump-logits"), ec).type() != fs::file_type::not_found)
            fail("--dump-logits ", args.get("dump-logits"),
                 ": already exists; ppolab writes a new file, never over one");
    }
    const Qwen2Weights weights = load_checkpoint(dir, WeightType::bf16);
    const Qwen2Config& c = weights.config;
    const std::vector<int32_t> ids = parse_ids(args.get("ids"), c.vocab_size);
    const int64_t T = static_cast<int64_t>(ids.size());
    if (c.max_position_embeddings > 0 && T > c.max_position_embeddings)
        fail("--ids: ", T, " tokens exceed the model's ", c.max_position_embeddings, " positions");

    // --adapter DIR: a PEFT folder or a stage's learned state (training/peft.h: load_adapters).
    LoraAdapters adapters;
    if (args.has("adapter")) adapters = load_adapters(args.get("adapter"), c);
    Qwen2 model(weights, args.has("adapter") ? &adapters : nullptr);
    std::vector<uint8_t> mask(static_cast<size_t>(T), 1);
    model.forward(ids.data(), mask.data(), 1, T, /*save_for_backward=*/false);
    std::vector<float> logits(static_cast<size_t>(T * c.vocab_size));  // (T, V)
    model.logits(logits.data());
    ordered_json out;
    out["ids"] = ids;
    std::vector<double> lp;
    double sum = 0;
    for (int64_t t = 1; t < T; ++t) {
        lp.push_back(log_softmax_at(logits.data() + (t - 1) * c.vocab_size, c.vocab_size, ids[static_cast<size_t>(t)]));
        sum += lp.back();
    }
    out["logprobs"] = lp;  // entry t−1: log p(ids[t] | ids[< t])
    out["sum_logprob"] = sum;
    if (args.has("dump-logits")) {
        const fs::path file = args.get("dump-logits");
        write_file_atomic(file,
                          std::string_view(reinterpret_cast<const char*>(logits.data()), logits.size() * sizeof(float)),
                          Overwrite::refuse);
        out["logits_file"] = file.string();
        out["logits_shape"] = {T, c.vocab_size};
        out["logits_dtype"] = "float32 little-endian";
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
}

}  // namespace

static Command score_cmd(
    "score",
    "score --model DIR --ids 1,2,3 [--dump-logits FILE] [--adapter DIR]   log p(id_t | ids before t) as "
    "JSON; --adapter: a PEFT folder or a trained policy (e.g. RUN/sft/final)",
    {}, run_score);

}  // namespace ppolab::cli
