// corpus_config.cpp — CorpusConfig to and from the JSON of config.json and
// the manifest (SPEC §1).
#include "data/corpus.h"
#include "data/corpus_fields.h"
#include "util/error.h"

namespace ppolab {

using corpus_detail::expect_fields;

ordered_json corpus_config_to_json(const CorpusConfig& c) {
    ordered_json j;
    j["dataset"] = c.dataset;
    j["study_revision"] = c.study_revision;
    j["seed"] = c.seed;
    j["families_per_action"] = c.families_per_action;
    j["train_per_action"] = c.train_per_action;
    j["validation_per_action"] = c.validation_per_action;
    j["pair_variants"] = c.pair_variants;
    j["demonstration_variant"] = c.demonstration_variant;
    j["rollout_first_variant"] = c.rollout_first_variant;
    j["rollouts_per_family"] = c.rollouts_per_family;
    j["probe_contexts"] = c.probe_contexts;
    return j;
}

CorpusConfig corpus_config_from_json(const json& j, std::string_view where) {
    std::string at = std::string(where);
    expect_fields(
        j,
        {"dataset", "study_revision", "seed", "families_per_action", "train_per_action", "validation_per_action",
         "pair_variants", "demonstration_variant", "rollout_first_variant", "rollouts_per_family", "probe_contexts"},
        at);
    CorpusConfig c;
    auto bounded = [&](const char* key, int64_t lo, int64_t hi) {
        int64_t v = json_int(j, key, at);
        if (v < lo || v > hi) fail(at, ": field '", key, "' must be in [", lo, ", ", hi, "], got ", v);
        return static_cast<int>(v);
    };
    c.dataset = json_string(j, "dataset", at);
    c.study_revision = json_string(j, "study_revision", at);
    c.seed = json_int(j, "seed", at);
    c.families_per_action = bounded("families_per_action", 1, 166);  // OH%03d names: at most 1000 families
    c.train_per_action = bounded("train_per_action", 1, c.families_per_action);
    c.validation_per_action = bounded("validation_per_action", 0, c.families_per_action - c.train_per_action);
    c.pair_variants = bounded("pair_variants", 1, 5);
    c.demonstration_variant = bounded("demonstration_variant", 0, 1000);
    c.rollout_first_variant = bounded("rollout_first_variant", 0, 1000);
    c.rollouts_per_family = bounded("rollouts_per_family", 0, 100);
    c.probe_contexts = bounded("probe_contexts", 0, 100);
    return c;
}

}  // namespace ppolab
