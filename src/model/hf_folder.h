// hf_folder.h — Hugging Face model folders: config.json plus
// model.safetensors (or model.safetensors.index.json and its shards), the
// tokenizer files and generation_config.json. (Not the periodic crash
// checkpoints of training: those are training's.)
//
// Loading and saving walk qwen2_tensor_table (model/tensor_table.h), the
// one list of the tensors of a Qwen2 model with their shapes and fields.
//
// Loading rules:
//   * every tensor of the table is present with exactly its shape;
//   * any other tensor is an error, except lm_head.weight when the config
//     ties the embeddings: Hugging Face sometimes stores the tied copy; it is
//     accepted (and dropped) only if it equals model.embed_tokens.weight
//     value for value, since a different one would silently change the model;
//   * dtypes F32, BF16, F16: matrices are copied as is (BF16 → BF16),
//     rounded to nearest even (F32/F16 → BF16) or widened (→ FP32 when
//     matrices == f32); norms and biases become FP32.
// Everything is validated (all files, names, shapes, dtypes) before any
// weight memory is allocated.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/tensor_table.h"
#include "model/weights.h"
#include "util/fileio.h"
#include "util/json.h"

namespace ppolab {

// config.json + model.safetensors or model.safetensors.index.json shards.
Qwen2Weights load_checkpoint(const fs::path& dir, WeightType matrices = WeightType::bf16);

// Writes a new folder: config.json, generation_config.json (unless null),
// model.safetensors (BF16: FP32 master weights, norms and biases rounded to
// BF16) and the tokenizer files. `tokenizer_source` is a tokenizer.json file
// or a folder holding one (tokenizer_config.json, special_tokens_map.json and
// chat_template.jinja are copied too when present); an empty path writes no
// tokenizer. Refuses an existing dir; writes into a temporary sibling and
// renames it into place, so a failure leaves nothing behind.
void save_checkpoint(const fs::path& dir, const Qwen2Weights& weights, const fs::path& tokenizer_source,
                     const json& generation_config);

// SPEC §2: the seed preset runs Qwen2.5-0.5B-Instruct only. Error naming
// `where` and listing each differing field (expected vs got).
void check_seed_architecture(const Qwen2Config& config, const std::string& where);

// SHA-256 identity of a checkpoint: over config.json and the weight files
// (model.safetensors, or the index and its shards in name order), each
// preceded by its name and size. Tokenizer and generation files are not part
// of it. Stable across runs and machines for the same bytes.
std::string checkpoint_sha256(const fs::path& dir);

// The vocabulary size a tokenizer.json implies: 1 + the largest id of its
// model vocab and added tokens. Error naming the file if it has neither.
int64_t tokenizer_vocab_size(const fs::path& tokenizer_json);

}  // namespace ppolab
