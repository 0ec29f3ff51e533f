// stage_options.h — the options every stage shares (SPEC command-line
// contract): --run DIR, --preset P, --config FILE…, --set key=value…, --model DIR,
// --replicate K (replicate K of a set: RUN/replicates/K, study.seed + K),
// and the one place where a command opens its run folder: a command that
// writes into RUN holds RUN's lock (util/run_lock.h) for as long as it runs.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "training/run_layout.h"
#include "util/json.h"
#include "util/run_lock.h"

namespace ppolab::cli {

inline const std::vector<std::string> kStageOptions = {"run", "preset", "config", "set", "model", "replicate"};

// What a command does with its run folder.
enum class RunAccess {
    read,    // reads it only (or writes elsewhere): no lock, nothing checked
    write,   // writes into it: holds its lock; a folder that does not exist
             // holds nothing to protect (the command fails on its missing
             // inputs before it writes), so nothing is created or locked
    create,  // creates it if needed (prepare --run, run --out), then locks it
};

struct StageOptions {
    RunLayout run;  // RUN, or replicate K of the study in RUN
    json config;    // effective config; a replicate's study.seed is the set's + K
    std::optional<fs::path> model;
    RunLock lock;  // held while the command runs (RunAccess::write, create)
};

// The stage options, the config checked first, then the run folder opened
// with `access`.
StageOptions stage_options(const Args& args, RunAccess access = RunAccess::write);
std::vector<std::string> with_stage_options(std::vector<std::string> extra);
// The run folder of --run and --replicate for `config` (the effective config
// before the replicate's seed): RUN itself, or replicate K of RUN (an Error
// unless 0 <= K < replicates.count). Adds K to config's study.seed.
RunLayout run_layout(const Args& args, json& config);

// Opens `run` with `access` for the commands that do not take the stage
// options (ppolab run, pretrain, resume-check, feedback label-ai): the
// folder's lock, held until the returned RunLock is destroyed. A path that
// exists but is not a folder is an Error ("is a file, not a run folder").
RunLock open_run_folder(const fs::path& run, RunAccess access);
// Whether `path` (existing or not) lies inside the folder `run`: a command
// whose --out FILE lands in RUN writes into RUN.
bool path_inside(const fs::path& path, const fs::path& run);

}  // namespace ppolab::cli
