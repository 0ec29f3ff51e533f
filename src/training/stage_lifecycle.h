// stage_lifecycle.h — TRY NOT TO MODIFY: the bookkeeping every learning stage
// (pretraining, SFT, the judge, PPO) shares around its algorithm. A reader of
// an algorithm can skip this file: it changes no number.
//
//   outputs      RUN/<stage>/<mode>.state.gz, <mode>.json (run_layout.h),
//                RUN/tensorboard/<stage>/<mode>/ (tensorboard.h);
//                a finished report is never overwritten, and what an attempt
//                killed before its report left is removed;
//   start        continue from this mode's crash checkpoint (identity
//                checked, crash_checkpoints.h), or — mode `resume` — from the
//                interrupt state; the trainer says how to restore its state;
//   checkpoints  periodic crash-safe checkpoints, their count and seconds;
//   the end      the final exact state, the report fields every stage has
//                (state_file, checkpoints, seconds, peak_rss_bytes), the
//                atomic report write, then the checkpoint's removal;
//   fault hooks  the crash tests' faults (fault_hooks.h), read once at start;
//   ranks        under MPI (parallel/world.h) only rank 0 writes any of it;
//                the report says the world size, the state never does.
//
// Pretraining writes a folder, not a stage report: it uses CheckpointFile
// (the checkpoint part) alone.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "training/crash_checkpoints.h"
#include "training/fault_hooks.h"
#include "training/resume_state.h"
#include "training/run_layout.h"
#include "util/json.h"

namespace ppolab {

// interrupt stops after the configured epoch/iteration and saves its state;
// resume loads that state and finishes; continuous runs everything at once.
enum class StageMode { interrupt, continuous, resume };
const char* stage_mode_name(StageMode mode);
StageMode parse_stage_mode(std::string_view text);  // Error naming the accepted values

// Puts a loaded state into the trainer; `from` names the file in errors.
using RestoreState = std::function<void(const ResumeState& state, const fs::path& from)>;

// One crash checkpoint file of a stage: loading it (identity checked),
// writing it (counted and timed, the kill hook applied) and removing it.
class CheckpointFile {
public:
    CheckpointFile(fs::path path, const FaultHooks& hooks) : path_(std::move(path)), hooks_(hooks) {}

    const fs::path& path() const { return path_; }
    // The checkpoint, if one exists (load_checkpoint: identity checked).
    std::optional<ResumeState> load(const json& identity, const std::string& what) const;
    // Writes `state` atomically (write_checkpoint); `what` names the position in errors.
    void save(const ResumeState& state, const std::string& what);
    void remove() const { remove_checkpoint(path_); }

    int64_t written() const { return written_; }
    double seconds() const { return seconds_; }

private:
    fs::path path_;
    const FaultHooks& hooks_;
    int64_t written_ = 0;
    double seconds_ = 0;
};

class StageLifecycle {
public:
    // Refuses a finished report; removes this mode's unfinished outputs (its
    // state, `extra_outputs`, and in continuous mode RUN/<stage>/final).
    StageLifecycle(const RunLayout& run, std::string stage, StageMode mode, std::vector<fs::path> extra_outputs = {});
    StageLifecycle(const StageLifecycle&) = delete;
    StageLifecycle& operator=(const StageLifecycle&) = delete;

    const std::string& stage() const { return stage_; }
    StageMode mode() const { return mode_; }
    const std::string& mode_name() const { return mode_name_; }
    std::string what() const { return stage_ + " " + mode_name_; }  // "ppo resume"
    const fs::path& state_path() const { return state_path_; }
    const fs::path& report_path() const { return report_path_; }
    const FaultHooks& hooks() const { return hooks_; }
    CheckpointFile& checkpoint() { return checkpoint_; }

    // Continues from the checkpoint if there is one (true), else in resume
    // mode from RUN/<stage>/interrupt.state.gz (identity checked), else
    // starts afresh. `restore` puts the state into the trainer.
    bool start(const json& identity, const RestoreState& restore);
    // What the report says the stage continued from (null: it did not).
    void set_restarted(json restarted) { restarted_ = std::move(restarted); }

    // The final exact state, RUN/<stage>/<mode>.state.gz.
    StateFileInfo save_state(const ResumeState& state) const;
    // Adds seconds, peak_rss_bytes, state_file and the checkpoints block
    // (`every` — e.g. {"every_updates", n} — plus written/seconds/restarted_from).
    void add_common_fields(json& report, double seconds, const StateFileInfo& state_file,
                           const std::pair<std::string, int64_t>& every) const;
    // Writes the report atomically, then removes the checkpoint and `also_remove`.
    void finish(const json& report, const std::vector<fs::path>& also_remove = {}) const;

private:
    const RunLayout& run_;
    std::string stage_;
    StageMode mode_;
    std::string mode_name_;
    fs::path state_path_, report_path_;
    FaultHooks hooks_;
    CheckpointFile checkpoint_;
    json restarted_ = nullptr;
};

}  // namespace ppolab
