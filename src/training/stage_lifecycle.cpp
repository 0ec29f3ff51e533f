#include "training/stage_lifecycle.h"

#include "parallel/world.h"
#include "training/study.h"
#include "training/tensorboard.h"
#include "util/error.h"
#include "util/stopwatch.h"

namespace ppolab {

const char* stage_mode_name(StageMode m) {
    return m == StageMode::interrupt ? "interrupt" : m == StageMode::continuous ? "continuous" : "resume";
}

StageMode parse_stage_mode(std::string_view text) {
    if (text == "interrupt") return StageMode::interrupt;
    if (text == "continuous") return StageMode::continuous;
    if (text == "resume") return StageMode::resume;
    fail("--mode must be interrupt, continuous or resume; got '", text, "'");
}

std::optional<ResumeState> CheckpointFile::load(const json& identity, const std::string& what) const {
    return load_checkpoint(path_, identity, what);
}

void CheckpointFile::save(const ResumeState& state, const std::string& what) {
    const auto t0 = Clock::now();
    const int64_t number = written_ + 1;
    if (parallel::world().writer()) write_checkpoint(path_, state, what, hooks_.kill_in_checkpoint(number), number);
    seconds_ += since(t0);
    written_ = number;
}

StageLifecycle::StageLifecycle(const RunLayout& run, std::string stage, StageMode mode,
                               std::vector<fs::path> extra_outputs)
    : run_(run),
      stage_(std::move(stage)),
      mode_(mode),
      mode_name_(stage_mode_name(mode)),
      state_path_(run.state(stage_, mode_name_)),
      report_path_(run.report(stage_, mode_name_)),
      hooks_(FaultHooks::from_environment()),
      checkpoint_(checkpoint_path(run.stage(stage_), mode_name_), hooks_) {
    // The report is written last: without it, what an earlier attempt wrote is unfinished.
    if (fs::exists(report_path_)) fail("refusing to overwrite ", report_path_.string(), " (a finished stage output)");
    std::vector<fs::path> unfinished = {state_path_};
    unfinished.insert(unfinished.end(), extra_outputs.begin(), extra_outputs.end());
    unfinished.push_back(run.tensorboard(stage_, mode_name_));
    if (mode_ == StageMode::continuous) unfinished.push_back(run.final_dir(stage_));
    // Rank 0 writes (and clears) the run's files; every rank reads them only
    // after it has (the other ranks' first look is the checkpoint, never removed here).
    if (parallel::world().writer()) remove_unfinished_outputs(unfinished, report_path_, what());
    parallel::barrier();
}

bool StageLifecycle::start(const json& identity, const RestoreState& restore) {
    if (std::optional<ResumeState> st = checkpoint_.load(identity, what())) {
        restore(*st, checkpoint_.path());
        return true;
    }
    if (mode_ == StageMode::resume) {
        const fs::path from = run_.state(stage_, "interrupt");
        restore(load_resume_state(from, &identity), from);
    }
    return false;
}

StateFileInfo StageLifecycle::save_state(const ResumeState& state) const {
    if (!parallel::world().writer()) return {};  // rank 0's file; the others' state is the same
    return save_resume_state(state_path_, state);
}

void StageLifecycle::add_common_fields(json& report, double seconds, const StateFileInfo& state_file,
                                       const std::pair<std::string, int64_t>& every) const {
    report["seconds"] = seconds;
    report["peak_rss_bytes"] = peak_rss_bytes();    // rank 0's
    report["world_size"] = parallel::world().size;  // never in the state: it changes no number
    report["state_file"] = state_file.to_json();
    report["checkpoints"] = {{every.first, every.second},
                             {"written_this_run", checkpoint_.written()},
                             {"seconds_this_run", checkpoint_.seconds()},
                             {"restarted_from", restarted_}};
}

void StageLifecycle::finish(const json& report, const std::vector<fs::path>& also_remove) const {
    if (parallel::world().writer()) {
        write_stage_tensorboard(run_, stage_, mode_name_, report);  // before the report that marks it finished
        write_json_atomic(report_path_, report);
        for (const fs::path& p : also_remove) remove_checkpoint(p);
        checkpoint_.remove();
    }
    parallel::barrier();  // no rank reads this stage's outputs before they are whole
}

}  // namespace ppolab
