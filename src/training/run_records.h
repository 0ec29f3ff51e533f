// run_records.h — a study's own records, read back and checked before use.
//
// `ppolab run` trusts nothing it reads from its folder: run-state.json must
// have the structure run writes (validate_run_state), and before anything
// is gathered into results.json (and before a resumed run continues) the
// chains' stage records must agree with the recorded options and with each
// other (check_run_records): every record's identity.config is the one the
// options give for its chain (study.seed + k, so swapped replicate folders
// are caught), each later stage names the SFT policy and judge its chain's
// SFT and judge stages finished with, and findings.json covers every chain.
// A record edited, swapped, emptied or truncated is refused by name, with
// what differs; nothing is written.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "training/run_layout.h"
#include "util/json.h"

namespace ppolab {

// Every field `ppolab run` reads from run-state.json, by name and kind: an
// Error naming `file` and the field ("run-state.json: field 'steps' must be
// an object, got array").
void validate_run_state(const json& state, const std::filesystem::path& file);

// One chain of the study as its records must show it: its folders, the
// identity.config its options give (training/study_config.h
// config_identity of the chain's configuration) and how errors name it.
struct ChainExpectation {
    RunLayout layout;
    json config_identity;
    std::string name;  // "replicate 1 (study.seed 43)", "the run"
};
// `findings`: the study's findings.json (checked when it exists).
void check_run_records(const std::filesystem::path& findings, const std::vector<ChainExpectation>& chains);

}  // namespace ppolab
