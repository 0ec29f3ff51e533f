// export_merged.h — `ppolab export merged`: a trained policy of a run as a
// plain Hugging Face Qwen2 folder, its LoRA folded into the base
// (model/lora.h: merge_lora), for tools that know no adapters (transformers
// without PEFT, llama.cpp's converter).
//
// The folder: config.json, model.safetensors (BF16), the base's tokenizer
// files and generation_config.json, and a README.md card naming the run,
// the policy, its learned identity, the study's identity and the scope of
// what it learned from. Written into a temporary sibling and renamed into
// place; an existing --out is refused.
#pragma once
#include <string>

#include "training/study.h"
#include "util/json.h"

namespace ppolab {

// "sft" → RUN/sft/final, "ppo" → RUN/ppo/final/actor; Error for any other
// name or a policy the run has not trained.
fs::path trained_policy_dir(const RunLayout& run, const std::string& policy);

// Writes `out`; returns what the card records (policy, learned identity,
// identity of the study).
json export_merged(const Study& study, const std::string& policy, const fs::path& out);

}  // namespace ppolab
