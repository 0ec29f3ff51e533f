// stage_options.h — the options every stage shares (SPEC command-line
// contract): --run DIR, --preset P, --config FILE…, --set key=value…, --model DIR.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "util/json.h"

namespace ppolab::cli {

inline const std::vector<std::string> kStageOptions = {"run", "preset", "config", "set", "model"};

struct StageOptions {
    fs::path run;
    json config;
    std::optional<fs::path> model;
};

StageOptions stage_options(const Args& args, const std::string& default_run = "runs/default");
std::vector<std::string> with_stage_options(std::vector<std::string> extra);

}  // namespace ppolab::cli
