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
// Reads and validates a PEFT LoRA folder (F32, BF16 or F16 tensors → F32).
PeftAdapter read_peft(const fs::path& dir);

}  // namespace ppolab
