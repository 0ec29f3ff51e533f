// learned_io.h — a role's learned tensors (LoRA adapters, heads) as a plain
// safetensors file with ppolab names, and reloading it (SPEC §6: final
// adapters and heads are written as safetensors and reloaded).
//
// Layout: one F32 tensor per parameter under its ppolab name, in ParamList
// order, plus the metadata entry "ppolab_learned" holding the JSON
//   {"format": "ppolab-learned", "version": 1, "tensors": [names in order],
//    "learned_identity": sha256 (identity.h), "info": {free JSON: role, stage, identity block…}}
// Reading checks the metadata, dtypes, that the listed tensors are exactly
// those in the file, and that the recomputed identity equals the recorded
// one; loading into a ParamList also checks names and shapes, and writes
// nothing unless everything matches.
#pragma once
#include <string>
#include <vector>

#include "model/param.h"
#include "training/tensors.h"
#include "util/fileio.h"
#include "util/json.h"

namespace ppolab {

struct LearnedFile {
    std::vector<NamedTensor> tensors;  // in saved order
    std::string identity;              // learned identity (verified)
    json info;                         // free JSON given at save time
};

// Returns the learned identity written in the file.
std::string save_learned(const fs::path& path, const ParamList& params, const json& info = json::object(),
                         Overwrite mode = Overwrite::refuse);
LearnedFile read_learned(const fs::path& path);
// read_learned, then the layout must equal `params` (names in order, shapes);
// with `expected_identity`, the file's learned identity must equal it.
LearnedFile load_learned(const fs::path& path, const ParamList& params, const std::string* expected_identity = nullptr);

}  // namespace ppolab
