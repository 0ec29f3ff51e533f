// study_config.h — the study's configuration: built-in presets, --config
// files and --set overrides (SPEC intro: every number is a config value).
//
// A preset is a JSON document compiled into the binary
// (src/training/presets/*.json): `seed` (the SPEC's numbers,
// Qwen2.5-0.5B-Instruct pinned) and `tiny` (the embedded default, SPEC §10)
// are complete; `generic` (the seed's numbers on any Qwen2-architecture
// folder) is an overlay, `"overlay_on": "seed"`, holding only the keys that
// differ. All three effective presets have the same keys.
// Overrides can only change keys that exist — a typo is an error naming the
// key — and must keep each value's JSON kind (number, string, bool, array,
// object); a key whose preset value is null accepts any value of the kind
// its typed field takes (config_types.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/fileio.h"
#include "util/json.h"

namespace ppolab {

std::vector<std::string> preset_names();  // sorted: generic, seed, tiny
inline constexpr const char* kDefaultPreset = "tiny";
json preset_config(std::string_view name);  // overlays merged; Error listing the known presets

// Recursively applies `overlay` onto `base`; `where` names the overlay's
// source (a file, "--set sft.lr=1e-3") in errors.
json merge_config(const json& base, const json& overlay, const std::string& where);
// Applies one "a.b.c=value" assignment; the value is parsed as JSON and, if
// that fails, taken as a string ("ppo.missing_eos=add").
void set_config_value(json& config, std::string_view assignment);
// Every integer key holds a value in [-kMaxConfigInteger, kMaxConfigInteger]
// (2^53: exact as a double, the same bound for 1e18 and 1000000000000000000);
// every count (epochs, iterations, rows, limits, frequencies, max_updates,
// lora.rank…) is at most kMaxConfigCount, so products of two counts fit in
// 64 bits; lora.rank at most kMaxLoraRank (and, once the model is known, at
// most the smallest dimension of a targeted projection).
inline constexpr int64_t kMaxConfigInteger = int64_t(1) << 53;
inline constexpr int64_t kMaxConfigCount = 1'000'000'000;
inline constexpr int64_t kMaxLoraRank = 65536;
// Counts that size memory have bounds of their own (config_types.h):
// replicates.count 1000, best-of-n and snapshot samples 4096, and the token
// limits kMaxConfigTokens (2^20: above every supported model's positions;
// the model's own max_position_embeddings is checked when it is known).
inline constexpr int64_t kMaxConfigTokens = int64_t(1) << 20;
// Range and enumeration checks of the values every stage relies on (learning
// rates > 0, ratios in [0, 1], epochs >= 1, missing_eos in {replace, add},
// known LoRA targets, limits that fit, …); errors name the key, the allowed
// values and what was found. It is StudyConfig::parse (config_types.h), whose
// field tables hold the checks.
void validate_study_config(const json& config);
// The effective config: preset, then each file in order, then each --set,
// then validate_study_config.
json effective_config(std::string_view preset, const std::vector<fs::path>& config_files,
                      const std::vector<std::string>& sets);

// sha256 of the compact dump (keys sorted) without the "checkpoint" object
// (how often checkpoints are written changes no number): two configs with
// the same values have the same hash.
std::string config_sha256(const json& config);
// The block every output's identity carries: preset, revisions, config hash.
json config_identity(const json& config);

// Access by dotted path ("sft.lr"); errors name the path, expected kind and
// what was found. New code reads the typed StudyConfig (config_types.h).
const json& config_at(const json& config, std::string_view path);
int64_t config_int(const json& config, std::string_view path);
double config_number(const json& config, std::string_view path);
bool config_bool(const json& config, std::string_view path);
std::string config_string(const json& config, std::string_view path);
std::optional<int64_t> config_optional_int(const json& config, std::string_view path);  // null → nullopt

}  // namespace ppolab
