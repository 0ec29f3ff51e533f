#include "cli/stage_options.h"

#include <system_error>

#include "parallel/world.h"
#include "training/config_types.h"
#include "training/study_config.h"
#include "util/error.h"

namespace ppolab::cli {

StageOptions stage_options(const Args& args, RunAccess access) {
    StageOptions o;
    std::vector<fs::path> files;
    for (const std::string& f : args.all("config")) files.emplace_back(f);
    o.config = effective_config(args.get("preset", kDefaultPreset), files, args.all("set"));
    o.run = run_layout(args, o.config);
    if (args.has("model")) o.model = fs::path(args.get("model"));
    o.lock = open_run_folder(o.run.study(), access);
    // A replicate's folder is made once its study exists (write access).
    std::error_code ec;
    if (o.run.is_replicate() && access != RunAccess::read && fs::is_directory(o.run.study(), ec)) {
        fs::create_directories(o.run.root, ec);
        if (ec) fail("cannot create the replicate folder '", o.run.root.string(), "': ", ec.message());
    }
    return o;
}

RunLayout run_layout(const Args& args, json& config) {
    const fs::path run = args.get("run", "runs/default");
    if (!args.has("replicate")) return RunLayout{run};
    const int64_t k = args.get_int("replicate", 0);
    const StudyConfig cfg = StudyConfig::parse(config);
    if (k < 0 || k >= cfg.replicates.count)
        fail("--replicate ", k, ": expected a replicate of the set, 0 to ", cfg.replicates.count - 1,
             " (replicates.count = ", cfg.replicates.count, ")");
    config["study"]["seed"] = cfg.study.seed + k;
    validate_study_config(config);
    return RunLayout::replicate(run, k, cfg.replicates.repretrain_base && cfg.pretrain.enabled);
}

std::vector<std::string> with_stage_options(std::vector<std::string> extra) {
    extra.insert(extra.end(), kStageOptions.begin(), kStageOptions.end());
    return extra;
}

RunLock open_run_folder(const fs::path& run, RunAccess access) {
    if (access == RunAccess::read) return RunLock{};
    std::error_code ec;
    const fs::file_status st = fs::status(run, ec);  // through symlinks
    if (st.type() == fs::file_type::none) fail("cannot inspect the run folder '", run.string(), "': ", ec.message());
    const bool exists = st.type() != fs::file_type::not_found;
    if (exists && !fs::is_directory(st)) fail("'", run.string(), "' is a file, not a run folder");
    if (!exists) {
        if (access == RunAccess::write) return RunLock{};
        fs::create_directories(run, ec);
        if (ec) fail("cannot create the run folder '", run.string(), "': ", ec.message());
    }
    // Under MPI rank 0 holds the lock for the job: the other ranks write nothing.
    if (!parallel::world().writer()) return RunLock{};
    return lock_run_folder(run);
}

bool path_inside(const fs::path& path, const fs::path& run) {
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
    if (ec) return false;
    const fs::path r = fs::weakly_canonical(fs::absolute(run, ec), ec);
    if (ec) return false;
    const fs::path rel = p.lexically_relative(r);
    return !rel.empty() && *rel.begin() != "..";
}

}  // namespace ppolab::cli
