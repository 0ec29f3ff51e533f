// crash_checkpoints.h — periodic crash-safe resume checkpoints (issue #9).
//
// Every long stage writes, at its natural boundaries, the same exact
// ResumeState (resume_state.h) it would save at its end — plus, mid-epoch, the
// epoch's permutation and the position in it — to
//   RUN/<stage>/checkpoints/<mode>.state.gz     (sft, reward, ppo)
//   <base>.checkpoints/pretrain.state.gz          (pretrain; RUN/base.checkpoints)
// The write is atomic (gzip into a temporary file in the same folder, fsync,
// rename over the previous checkpoint): a kill at any moment leaves the
// newest complete checkpoint, never half of one. When a stage starts and a
// checkpoint of the same stage and mode exists, it continues from it (its
// identity must match: a different config, corpus or binary is an error
// naming the differing field), so its final state is bit for bit the one an
// uninterrupted run reaches. After the stage has written its final outputs
// the checkpoint is removed.
//
// How often: config keys `checkpoint.every_updates` (SFT, judge: every N
// optimiser updates, and at each epoch end), `checkpoint.pretrain_every_updates`
// (pretraining: every N steps, and after the last), `checkpoint.every_iterations`
// (PPO) and `checkpoint.every_rows` (evaluate: generations so far, per
// policy); 0 disables. They change no number, so
// they are not part of the config identity (study_config.h).
//
// The crash tests' fault injection (a kill inside a checkpoint write, a NaN
// at a chosen update) is fault_hooks.h; the stage lifecycle passes it here.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "training/resume_state.h"
#include "util/fileio.h"
#include "util/json.h"

namespace ppolab {

// RUN/<stage>/checkpoints/<mode>.state.gz for a stage folder and mode.
fs::path checkpoint_path(const fs::path& stage_dir, const std::string& mode);

// True when update/iteration number `count` (1-based, counted over the whole
// stage, so positions do not depend on restarts) is a checkpoint boundary.
inline bool checkpoint_due(int64_t every, int64_t count) { return every > 0 && count > 0 && count % every == 0; }

// Removes temporaries a killed atomic write left in `dir` (".<name>.tmp<N>",
// never complete files); returns how many. A missing folder is fine.
int remove_atomic_temporaries(const fs::path& dir);

// Writes `state` to `path` atomically, replacing the previous checkpoint only
// once the new one is complete. Every learned tensor and optimiser moment
// must be finite (Error naming `what` and the tensor; nothing written). On a
// full disk the Error names the file and "No space left on device", the
// temporary is removed and the previous checkpoint is unchanged. Returns
// the sizes (no sha256: a checkpoint is read back by load_checkpoint only).
// `die_before_rename` (PPOLAB_TEST_KILL_IN_CHECKPOINT, fault_hooks.h) raises
// SIGKILL once the temporary is complete, before the rename; `write_number`
// is printed in that line.
StateFileInfo write_checkpoint(const fs::path& path, const ResumeState& state, const std::string& what,
                               bool die_before_rename = false, int64_t write_number = 0);

// The checkpoint at `path`, if there is one: loaded and checked (integrity,
// identity equal to `identity`, else an Error naming the file and the
// differing field and saying how to start over), with a line on stderr
// saying the stage continues from it. Temporaries of killed writes next to it
// are removed first. nullopt when there is none.
std::optional<ResumeState> load_checkpoint(const fs::path& path, const json& identity, const std::string& what);

// A stage writes its report last. Outputs of an attempt that was killed
// before writing `report` are unfinished: each existing one is removed (a
// line on stderr says so) so the stage can write it again. `what` names the
// stage in that line.
void remove_unfinished_outputs(const std::vector<fs::path>& outputs, const fs::path& report, const std::string& what);

// Removes the checkpoint (and its folder if empty) after the stage finished.
void remove_checkpoint(const fs::path& path);

// Error "<where>: <quantity> is not finite (<value> at index i of n)" when a
// value is NaN or infinite.
void check_finite(std::span<const float> values, const std::string& where, const std::string& quantity);
void check_finite(std::span<const double> values, const std::string& where, const std::string& quantity);
void check_finite(double value, const std::string& where, const std::string& quantity);
// Every tensor's values finite; Error names `where` and the tensor.
void check_finite_tensors(const std::vector<NamedTensor>& tensors, const std::string& where);

}  // namespace ppolab
