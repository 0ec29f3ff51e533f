// peft.h — LoRA adapters in the Hugging Face PEFT layout (SPEC §9), so other
// tools (PEFT, vLLM, llama.cpp's converters) can load them.
//
// A folder with
//   adapter_config.json        PEFT's LoraConfig keys (peft_type "LORA", r,
//                              lora_alpha, lora_dropout, target_modules, bias
//                              "none", task_type "CAUSAL_LM", fan_in_fan_out false, …)
//   adapter_model.safetensors  F32 tensors named as PEFT saves them:
//     base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight   (r, in)
//     base_model.model.model.layers.{i}.mlp.down_proj.lora_B.weight      (out, r)
//   i.e. "base_model.model." + ppolab name + ".weight".
// Only LoRA tensors belong there; scalar heads are saved with save_learned.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/lora.h"
#include "model/param.h"
#include "model/tensor_table.h"
#include "training/tensors.h"
#include "util/fileio.h"
#include "util/json.h"

namespace ppolab {

struct PeftInfo {
    int64_t rank = 8;                                       // r
    double alpha = 16.0;                                    // lora_alpha
    double dropout = 0.0;                                   // lora_dropout
    std::vector<std::string> targets = projection_names();  // target_modules: every projection
    std::string base_model;                                 // base_model_name_or_path
    std::string revision;                                   // "" → null
};

std::string peft_tensor_name(const std::string& ppolab_name);  // Error if not a LoRA A/B name
std::string ppolab_tensor_name(const std::string& peft_name);  // inverse; Error if not a PEFT LoRA name

json peft_adapter_config(const PeftInfo& info);

// Writes the folder (built in a temporary sibling, then renamed); refuses an
// existing folder. Every tensor must be a LoRA A/B of a listed target with
// rank info.rank, each A paired with its B.
void export_peft(const fs::path& dir, const ParamList& lora, const PeftInfo& info);

struct PeftAdapter {
    PeftInfo info;
    json config;                       // adapter_config.json as read
    std::vector<NamedTensor> tensors;  // ppolab names, in file order
};
// Reads and validates a PEFT LoRA folder (F32, BF16 or F16 tensors → F32),
// from ppolab or from PEFT itself: LoRA on any subset of the seven
// projections (and of the layers), its own r and lora_alpha. Options whose
// arithmetic differs from y = Wx + (lora_alpha/r)·B(Ax) are refused with an
// error naming the field: use_dora, use_rslora, bias other than "none",
// lora_bias, fan_in_fan_out, rank/alpha patterns, modules_to_save,
// layer_replication. lora_dropout is read but has no effect at inference
// (PEFT too applies none in eval mode).
PeftAdapter read_peft(const fs::path& dir);

// The adapter as a model's LoraAdapters: every tensor of the file into its
// slot (the shape must be the model's for that projection: Error naming the
// tensor, expected and found); projections or layers the file does not
// adapt keep B = 0, i.e. no change.
LoraAdapters lora_from_peft(const PeftAdapter& adapter, const Qwen2Config& model, const std::string& where);

// What `generate --adapter` and `score --adapter` read: a PEFT folder (it has
// adapter_config.json) or a stage's learned state (final/ or its
// learned.safetensors; a head, if any, is not needed).
LoraAdapters load_adapters(const fs::path& path, const Qwen2Config& model);

}  // namespace ppolab
