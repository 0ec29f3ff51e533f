// resume_state.h — exact resume states (SPEC §6).
//
// A resume state holds everything a stage needs to continue as if it had
// never stopped: learned tensors (named groups: "actor", "critic", …), the
// moments and step of every AdamW, every scheduler's position, every Philox
// state, free JSON (history, cursors, permutations, consumed ids) and an
// identity block (config hash, base identities, data hashes) that a resumed
// run must match. Durations are never part of it: a state is a pure function
// of the numbers, so a resumed run and a continuous one give equal states.
//
// File format: a safetensors file (tensors + one metadata entry
// "ppolab_resume_state" holding the JSON below), gzip-compressed at level 1
// with mtime 0 — the same state always gives the same bytes. Tensor names:
//   learned/<group>/<tensor>
//   adamw/<optimiser>/exp_avg/<tensor>, adamw/<optimiser>/exp_avg_sq/<tensor>
// all F32. The metadata JSON (keys sorted):
//   {"format": "ppolab-resume-state", "version": 1, "identity": {…},
//    "learned": {group: {"tensors": [names in order], "identity": sha256}},
//    "optimizers": {name: {"step", "config", "params": [names], "exp_avg_identity", "exp_avg_sq_identity"}},
//    "schedulers": {name: {"schedule": {…}, "next_step", "next_lr"}},
//    "rngs": {name: {"seed", "stream", "counter"}}, "extra": {…}}
// Loading checks all of it: gzip integrity, safetensors structure, format
// and version, every tensor present with dtype F32 and no tensor left over,
// identities recomputed from the bytes equal to those recorded, next_lr
// equal to the schedule's value, and (if given) the expected identity block.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "training/adamw.h"
#include "training/schedule.h"
#include "training/tensors.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/rng.h"

namespace ppolab {

struct SchedulerState {
    Schedule schedule;
    int64_t next_step = 0;  // index of the next update
};

struct ResumeState {
    json identity = json::object();                           // must match on resume
    std::map<std::string, std::vector<NamedTensor>> learned;  // group → tensors, in order
    std::map<std::string, AdamWState> optimizers;
    std::map<std::string, SchedulerState> schedulers;
    std::map<std::string, Philox> rngs;
    json extra = json::object();  // history, cursors, consumed ids…
};

inline constexpr int kResumeStateVersion = 1;

// The uncompressed safetensors bytes (deterministic).
std::string serialize_resume_state(const ResumeState& state);
// Parses and validates those bytes; `where` names the file in errors.
ResumeState parse_resume_state(std::string bytes, const std::string& where);

struct StateFileInfo {
    uint64_t raw_bytes = 0;      // safetensors bytes before compression
    uint64_t file_bytes = 0;     // gzip bytes on disk
    std::string file_sha256;     // of the file on disk
    std::string content_sha256;  // state_content_sha256
    json to_json() const;
};

// gzip level 1, written atomically; refuses an existing file unless
// Overwrite::replace (a "latest" slot). On error nothing on disk changes.
StateFileInfo save_resume_state(const fs::path& path, const ResumeState& state, Overwrite mode = Overwrite::refuse);
// Reads, decompresses and validates; with `expected_identity`, refuses a
// state whose identity block differs (naming the first differing field).
// Memory stays bounded whatever the file holds (util/input_limits.h): the
// file must be a regular file within PPOLAB_MAX_STATE_MIB, and it is
// inflated as a stream against the size its own safetensors header
// promises — the 8-byte length (refused below 2 or above the format's
// 100 MB), the header, then exactly the data its data_offsets describe —
// refusing a promise above PPOLAB_MAX_STATE_INFLATED_MIB or above what the
// gzip bytes could hold, and a stream holding even one byte more, without
// inflating the rest. At most the promised size is ever held.
ResumeState load_resume_state(const fs::path& path, const json* expected_identity = nullptr);
// The same inflation of gzip bytes in memory (the fuzz target, tests).
std::string inflate_resume_state(std::string_view compressed, const std::string& where);

// "" when every numeric field is bit-for-bit equal (tensors, moments, steps,
// schedules, RNG states, identity and extra JSON with doubles compared by
// bits), else a description of the first difference.
std::string states_first_difference(const ResumeState& a, const ResumeState& b);
inline bool states_equal(const ResumeState& a, const ResumeState& b) { return states_first_difference(a, b).empty(); }
// sha256 of the canonical (uncompressed) serialisation: equal states, equal hashes.
std::string state_content_sha256(const ResumeState& state);

// First difference between two JSON values ("" if none), doubles by bits;
// `path` prefixes the reported location (e.g. "identity").
std::string json_first_difference(const json& a, const json& b, const std::string& path);
// Error "<where>: resume identity differs at <field>: state has X, this run has Y".
void check_identity(const json& recorded, const json& expected, const std::string& where);

}  // namespace ppolab
