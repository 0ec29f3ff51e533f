#include "cli/stage_options.h"

#include "training/study_config.h"

namespace ppolab::cli {

StageOptions stage_options(const Args& args, const std::string& default_run) {
    StageOptions o;
    o.run = args.get("run", default_run);
    std::vector<fs::path> files;
    for (const std::string& f : args.all("config")) files.emplace_back(f);
    o.config = effective_config(args.get("preset", kDefaultPreset), files, args.all("set"));
    if (args.has("model")) o.model = fs::path(args.get("model"));
    return o;
}

std::vector<std::string> with_stage_options(std::vector<std::string> extra) {
    extra.insert(extra.end(), kStageOptions.begin(), kStageOptions.end());
    return extra;
}

}  // namespace ppolab::cli
