// corpus.h — OfficeHelpPrefs-v1 (SPEC §1): generation, audit, the on-disk
// layout of SPEC §7 and its validated loaders. One interface over one file
// per section: corpus_config.cpp, corpus_generate.cpp, corpus_audit.cpp,
// corpus_write.cpp, corpus_read.cpp (and corpus_fields.h, the row and field
// checks they share).
//
// Layout written by corpus_write (every file JSONL, one object per line,
// fields in a fixed order, byte-identical across runs of the same seed):
//
//   learn/demonstrations.jsonl      id family prompt prompt_sha256 response
//   learn/train_pairs.jsonl         id family prompt prompt_sha256 chosen rejected
//   learn/validation_pairs.jsonl    (same fields)
//   learn/rollout_prompts.jsonl     id family prompt prompt_sha256
//   eval/test_prompts.jsonl         id family prompt prompt_sha256
//   eval/probe_prompts.jsonl        id family prompt prompt_sha256
//   gold/labels.jsonl               every label (see GoldLabel)
//   gold/test_pairs.jsonl           id family prompt prompt_sha256 chosen rejected
//   manifest.json                   identity, config, audit, sha256 of every
//                                   prompt and of every file
//
// learn/ and eval/ hold no expected action; gold/ holds every label. Every
// loader reads through a GuardedReader (leak guard) and checks the file's
// sha256 against the manifest before parsing it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "data/guarded_fs.h"
#include "util/json.h"

namespace ppolab {

// Every number of the corpus, with the seed preset's defaults (SPEC §1).
struct CorpusConfig {
    std::string dataset = "OfficeHelpPrefs-v1";  // corpus revision
    std::string study_revision = "r001";
    int64_t seed = 49;               // random.Random(seed) for the family split
    int families_per_action = 40;    // 6 actions -> 240 families OH000..OH239
    int train_per_action = 28;       // shuffled positions [0, 28) train
    int validation_per_action = 6;   // [28, 34) validation, the rest test
    int pair_variants = 5;           // pairs per family (variants 0..4)
    int demonstration_variant = 7;   // heading variant of the SFT prompt
    int rollout_first_variant = 11;  // rollout prompts use variants 11..14
    int rollouts_per_family = 4;
    int probe_contexts = 20;  // PROBE00..PROBE19, 4 rows each
};
ordered_json corpus_config_to_json(const CorpusConfig& config);
CorpusConfig corpus_config_from_json(const json& value, std::string_view where);

struct PairRecord {
    std::string id;      // OH012-P3
    std::string family;  // OH012
    std::string split;   // train | validation | test
    int variant = 0;
    int expected_action = 0;
    std::string prompt;
    std::string chosen, rejected;
};
struct DemonstrationRecord {
    std::string id;  // OH000-SFT
    std::string family;
    int expected_action = 0;
    std::string prompt;
    std::string response;
};
struct RolloutRecord {
    std::string id;  // OH000-RL2
    std::string family;
    int variant = 0;  // heading variant 11..14
    int expected_action = 0;
    std::string prompt;
};
struct ProbeRecord {
    std::string id;      // PROBE03-C1-P0
    std::string family;  // PROBE03
    int expected_action = 0;
    std::string prompt;  // the same for the 4 rows of a context
    bool candidate_correct = false;
    bool candidate_polite = false;
    std::string candidate_response;
};

struct Corpus {
    CorpusConfig config;
    std::vector<PairRecord> pairs;  // family order, variants 0..4 (all splits)
    std::vector<DemonstrationRecord> demonstrations;
    std::vector<RolloutRecord> rollouts;
    std::vector<ProbeRecord> probes;
};

// The split of family index i: "train" | "validation" | "test" (tutorial's
// split_help_families, CPython's generator).
std::vector<std::string> corpus_family_splits(const CorpusConfig& config);
std::string corpus_prompt(const std::string& family, int action, const std::string& kind, int variant);
std::string corpus_probe_prompt(const std::string& family, int action);
// A corpus prompt as a person reads it (the voting page): the case reference
// ("Help request OH116, note 12. Source: email.") and the situation with its
// request, so that reference + " " + situation is the prompt. A prompt of any
// other shape is all situation (reference empty).
struct PromptParts {
    std::string reference, situation;
};
PromptParts corpus_prompt_parts(std::string_view prompt);
Corpus corpus_generate(const CorpusConfig& config = {});

// Asserts every count and property of SPEC §1 (Error naming the first one
// that fails) and returns the audit written into the manifest.
ordered_json corpus_audit(const Corpus& corpus);

// Writes the layout above into `dir`, which must not exist: everything is
// built in a temporary sibling folder and renamed at the end, so a failure
// leaves nothing behind. Returns the manifest.
ordered_json corpus_write(const Corpus& corpus, const fs::path& dir);

// ---- reading -------------------------------------------------------------

struct FileDigest {
    std::string sha256;
    int64_t bytes = 0;
};
struct Manifest {
    CorpusConfig config;
    json audit;
    std::map<std::string, std::string> prompt_sha256;  // id -> sha256 of the prompt
    std::map<std::string, FileDigest> files;           // relative path -> digest
};
// Parses and validates manifest text (`where` names it in errors).
Manifest manifest_parse(std::string_view text, std::string_view where);
Manifest load_manifest(const GuardedReader& reader, const fs::path& dir);

struct Demonstration {
    std::string id, family, prompt, response;
};
struct PreferencePair {
    std::string id, family, prompt, chosen, rejected;
};
struct PromptRow {
    std::string id, family, prompt;
};
// Validated JSONL parsers (exact field set, types, prompt_sha256 matches).
std::vector<Demonstration> parse_demonstrations(std::string_view text, std::string_view where);
std::vector<PreferencePair> parse_pairs(std::string_view text, std::string_view where);
std::vector<PromptRow> parse_prompts(std::string_view text, std::string_view where);

enum class PairSplit { train, validation, test };  // test pairs live in gold/
enum class EvalPopulation { test, probe };

// Each loader reads its file through `reader`, checks its sha256 against the
// manifest (also read through `reader`), then parses it.
std::vector<Demonstration> load_demonstrations(const GuardedReader& reader, const fs::path& dir);
std::vector<PreferencePair> load_pairs(const GuardedReader& reader, const fs::path& dir, PairSplit split);
std::vector<PromptRow> load_rollout_prompts(const GuardedReader& reader, const fs::path& dir);
std::vector<PromptRow> load_eval_prompts(const GuardedReader& reader, const fs::path& dir, EvalPopulation population);

struct GoldLabel {
    std::string id, population, split, family;  // population: pair|demonstration|rollout|probe
    int expected_action = 0;
    std::string chosen, rejected;    // pairs
    std::string response;            // demonstrations
    std::string candidate_response;  // probes
    bool candidate_correct = false, candidate_polite = false;
};
struct GoldLabels {
    std::vector<GoldLabel> rows;
    std::map<std::string, size_t> index;               // id -> row
    const GoldLabel& at(const std::string& id) const;  // Error naming the id
};
GoldLabels parse_gold(std::string_view text, std::string_view where);
GoldLabels load_gold(const GuardedReader& reader, const fs::path& dir);

// Reads the whole corpus back (needs a reader allowed everywhere in `dir`).
Corpus corpus_load(const GuardedReader& reader, const fs::path& dir);
// Re-hashes every file against the manifest, refuses unlisted files and
// symlinks, reloads the corpus and re-runs the audit, which must equal the
// manifest's. Returns the manifest.
Manifest verify_corpus(const GuardedReader& reader, const fs::path& dir);

// The relative paths of the layout, in manifest order.
const std::vector<std::string>& corpus_file_names();

}  // namespace ppolab
