#include "data/corpus.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "data/pyrandom.h"
#include "data/rubric.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/sha256.h"

namespace ppolab {

namespace {

constexpr const char* kAsk = " Give one relevant next step without claiming a guaranteed fix.";
constexpr const char* kRubricScope = "finite declared grammar only; other prose UNCERTIFIED";
constexpr const char* kSignal =
    "simulated: a finite rubric generates the preferences and demonstrations; no human feedback";

const std::vector<std::string> kFiles = {
    "learn/demonstrations.jsonl", "learn/train_pairs.jsonl", "learn/validation_pairs.jsonl",
    "learn/rollout_prompts.jsonl", "eval/test_prompts.jsonl", "eval/probe_prompts.jsonl",
    "gold/labels.jsonl",          "gold/test_pairs.jsonl",
};

std::string family_name(int index) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "OH%03d", index);
    return buf;
}
std::string probe_name(int index) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "PROBE%02d", index);
    return buf;
}

// Chosen and rejected (action, caution, polite) of pair variant v (SPEC §1).
struct Spec {
    int action, caution;
    bool polite;
};
std::pair<Spec, Spec> pair_variant_specs(int variant, int action, int wrong) {
    switch (variant % 5) {
        case 0: return {{action, 1, false}, {wrong, 2, false}};
        case 1: return {{action, 0, false}, {wrong, 1, true}};
        case 2: return {{action, 1, true}, {wrong, 0, false}};
        case 3: return {{action, 1, false}, {action, 2, true}};
        default: return {{action, 0, true}, {wrong, 1, false}};
    }
}

// ---- JSONL ---------------------------------------------------------------

void append_line(std::string& out, const ordered_json& row) {
    out += row.dump();
    out += '\n';
}

// Calls fn(object, "file:line") for every line; the file must end in a
// newline and contain no blank line.
template <typename Fn>
void for_each_jsonl(std::string_view text, std::string_view where, Fn fn) {
    if (!text.empty() && text.back() != '\n') fail(where, ": the last line does not end with a newline (truncated file?)");
    size_t start = 0;
    int line = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        ++line;
        std::string at = std::string(where) + ":" + std::to_string(line);
        std::string_view row = text.substr(start, end - start);
        if (row.empty()) fail(at, ": blank line; expected one JSON object per line");
        json value = parse_json(row, at);
        if (!value.is_object()) fail(at, ": expected a JSON object, got ", value.type_name());
        fn(value, at);
        start = end + 1;
    }
}

void expect_fields(const json& obj, const std::vector<std::string>& fields, const std::string& at) {
    for (const auto& f : fields) (void)json_field(obj, f, at);
    for (auto it = obj.begin(); it != obj.end(); ++it)
        if (std::find(fields.begin(), fields.end(), it.key()) == fields.end())
            fail(at, ": unexpected field '", it.key(), "'");
}

std::string checked_prompt(const json& obj, const std::string& at) {
    std::string prompt = json_string(obj, "prompt", at);
    std::string sha = json_string(obj, "prompt_sha256", at);
    std::string got = sha256_hex(prompt);
    if (sha != got) fail(at, ": field 'prompt_sha256' is ", sha, " but the prompt hashes to ", got);
    return prompt;
}

void check_unique(std::set<std::string>& seen, const std::string& id, const std::string& at) {
    if (id.empty()) fail(at, ": field 'id' is empty");
    if (!seen.insert(id).second) fail(at, ": duplicate id '", id, "'");
}

bool is_hex64(const std::string& s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

int checked_action(const json& obj, const std::string& key, const std::string& at) {
    int64_t a = json_int(obj, key, at);
    if (a < 0 || a >= kActionCount) fail(at, ": field '", key, "' must be in [0, ", kActionCount - 1, "], got ", a);
    return static_cast<int>(a);
}

// Suffix number of an id like "OH012-P3" after `marker` ("-P", "-RL").
int id_suffix(const std::string& id, const std::string& marker, const std::string& at) {
    size_t pos = id.rfind(marker);
    if (pos == std::string::npos) fail(at, ": id '", id, "' lacks '", marker, "<n>'");
    std::string digits = id.substr(pos + marker.size());
    if (digits.empty() || digits.size() > 4 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
        fail(at, ": id '", id, "' must end with '", marker, "<n>'");
    return std::stoi(digits);
}

}  // namespace

// ---- config ----------------------------------------------------------------

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
    expect_fields(j, {"dataset", "study_revision", "seed", "families_per_action", "train_per_action",
                      "validation_per_action", "pair_variants", "demonstration_variant", "rollout_first_variant",
                      "rollouts_per_family", "probe_contexts"},
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

// ---- generation ------------------------------------------------------------

std::vector<std::string> corpus_family_splits(const CorpusConfig& c) {
    const int per = c.families_per_action;
    std::vector<std::string> splits(static_cast<size_t>(kActionCount * per));
    PyRandom rng(c.seed);
    for (int action = 0; action < kActionCount; ++action) {
        std::vector<int> ids;
        for (int i = action * per; i < (action + 1) * per; ++i) ids.push_back(i);
        rng.shuffle(ids);
        for (int pos = 0; pos < per; ++pos)
            splits[static_cast<size_t>(ids[static_cast<size_t>(pos)])] =
                pos < c.train_per_action                             ? "train"
                : pos < c.train_per_action + c.validation_per_action ? "validation"
                                                                     : "test";
    }
    return splits;
}

std::string corpus_prompt(const std::string& family, int action, const std::string& kind, int variant) {
    const std::string v = std::to_string(variant);
    const std::string headings[3] = {"Help request " + family + ", note " + v + ".",
                                     "Case " + family + ", message " + v + ".",
                                     "Desk incident " + family + ", record " + v + "."};
    return headings[variant % 3] + " Source: " + kind + ". " + action_context(action) + kAsk;
}

std::string corpus_probe_prompt(const std::string& family, int action) {
    return "New remote support context " + family + ". " + action_context(action) +
           " A previous unrelated case was closed." + kAsk;
}

Corpus corpus_generate(const CorpusConfig& c) {
    Corpus corpus;
    corpus.config = c;
    const auto splits = corpus_family_splits(c);
    for (int index = 0; index < int(splits.size()); ++index) {
        const std::string family = family_name(index);
        const int action = index / c.families_per_action;
        const std::string& split = splits[static_cast<size_t>(index)];
        for (int variant = 0; variant < c.pair_variants; ++variant) {
            const int wrong = (action + 1 + index % 5) % kActionCount;
            auto [chosen, rejected] = pair_variant_specs(variant, action, wrong);
            PairRecord p;
            p.id = family + "-P" + std::to_string(variant);
            p.family = family;
            p.split = split;
            p.variant = variant;
            p.expected_action = action;
            p.prompt = corpus_prompt(family, action, "preference card", variant);
            p.chosen = response_text(chosen.action, chosen.caution, chosen.polite);
            p.rejected = response_text(rejected.action, rejected.caution, rejected.polite);
            corpus.pairs.push_back(std::move(p));
        }
        if (split == "train") {
            DemonstrationRecord d;
            d.id = family + "-SFT";
            d.family = family;
            d.expected_action = action;
            d.prompt = corpus_prompt(family, action, "demonstration", c.demonstration_variant);
            d.response = response_text(action, 1, index % 2 == 0);
            corpus.demonstrations.push_back(std::move(d));
            for (int k = 0; k < c.rollouts_per_family; ++k) {
                RolloutRecord r;
                r.id = family + "-RL" + std::to_string(k);
                r.family = family;
                r.variant = c.rollout_first_variant + k;
                r.expected_action = action;
                r.prompt = corpus_prompt(family, action, "live rollout request", r.variant);
                corpus.rollouts.push_back(std::move(r));
            }
        }
    }
    for (int index = 0; index < c.probe_contexts; ++index) {
        const std::string family = probe_name(index);
        const int action = index % kActionCount;
        const int wrong = (action + 1) % kActionCount;
        const std::string prompt = corpus_probe_prompt(family, action);
        for (auto [correct, polite] : {std::pair{true, false}, {true, true}, {false, false}, {false, true}}) {
            ProbeRecord p;
            p.id = family + "-C" + std::to_string(int(correct)) + "-P" + std::to_string(int(polite));
            p.family = family;
            p.expected_action = action;
            p.prompt = prompt;
            p.candidate_correct = correct;
            p.candidate_polite = polite;
            p.candidate_response = response_text(correct ? action : wrong, 1, polite);
            corpus.probes.push_back(std::move(p));
        }
    }
    return corpus;
}

// ---- audit -----------------------------------------------------------------

ordered_json corpus_audit(const Corpus& corpus) {
    const CorpusConfig& c = corpus.config;
    const int n_families = kActionCount * c.families_per_action;
    const int n_train = kActionCount * c.train_per_action;
    const int n_val = kActionCount * c.validation_per_action;
    const int n_test = n_families - n_train - n_val;
    auto expect = [](const char* what, int64_t got, int64_t want) {
        if (got != want) fail("corpus audit: ", what, " is ", got, "; expected ", want);
    };
    const auto splits = corpus_family_splits(c);

    // Pairs: counts, families per split, labels and prompts as SPEC §1 defines them.
    std::map<std::string, std::set<std::string>> families;
    std::map<std::string, int64_t> pairs_by_split;
    std::set<std::string> ids;
    auto unique_id = [&](const std::string& id) {
        if (!ids.insert(id).second) fail("corpus audit: duplicate id '", id, "'");
    };
    int64_t chosen_pass = 0, rejected_fail = 0;
    for (const auto& p : corpus.pairs) {
        unique_id(p.id);
        if (p.family.size() != 5 || p.family.rfind("OH", 0) != 0 || !std::all_of(p.family.begin() + 2, p.family.end(), ::isdigit))
            fail("corpus audit: pair ", p.id, " has family '", p.family, "'; expected OH<3 digits>");
        const int index = std::stoi(p.family.substr(2));
        if (index >= n_families) fail("corpus audit: pair ", p.id, ": family index ", index, " >= ", n_families);
        if (p.expected_action != index / c.families_per_action)
            fail("corpus audit: pair ", p.id, " expects action ", p.expected_action, "; family ", p.family,
                 " has action ", index / c.families_per_action);
        if (p.split != splits[static_cast<size_t>(index)])
            fail("corpus audit: pair ", p.id, " is in split '", p.split, "'; the seed-", c.seed, " split puts ",
                 p.family, " in '", splits[static_cast<size_t>(index)], "'");
        if (p.prompt != corpus_prompt(p.family, p.expected_action, "preference card", p.variant))
            fail("corpus audit: pair ", p.id, ": prompt does not match its template");
        families[p.split].insert(p.family);
        ++pairs_by_split[p.split];
        if (!evaluate_response(p.chosen, FinishReason::eos, p.expected_action).rubric_success)
            fail("corpus audit: pair ", p.id, ": chosen response '", p.chosen, "' fails the rubric");
        ++chosen_pass;
        if (evaluate_response(p.rejected, FinishReason::eos, p.expected_action).rubric_success)
            fail("corpus audit: pair ", p.id, ": rejected response '", p.rejected, "' passes the rubric");
        RubricVerdict rv = evaluate_response(p.rejected, FinishReason::eos, p.expected_action);
        if (!rv.recognized) fail("corpus audit: pair ", p.id, ": rejected response is not in the grammar");
        ++rejected_fail;
    }
    expect("number of pairs", int64_t(corpus.pairs.size()), int64_t(n_families) * c.pair_variants);
    expect("train pairs", pairs_by_split["train"], int64_t(n_train) * c.pair_variants);
    expect("validation pairs", pairs_by_split["validation"], int64_t(n_val) * c.pair_variants);
    expect("test pairs", pairs_by_split["test"], int64_t(n_test) * c.pair_variants);
    expect("train families", int64_t(families["train"].size()), n_train);
    expect("validation families", int64_t(families["validation"].size()), n_val);
    expect("test families", int64_t(families["test"].size()), n_test);
    for (const auto& [split, fams] : families)
        if (split != "train" && split != "validation" && split != "test")
            fail("corpus audit: unknown split '", split, "'");
    std::set<std::string> all_families;
    int64_t family_total = 0;
    for (const auto& [split, fams] : families) {
        all_families.insert(fams.begin(), fams.end());
        family_total += int64_t(fams.size());
    }
    if (family_total != int64_t(all_families.size()))
        fail("corpus audit: the train, validation and test families are not disjoint");

    // Demonstrations and rollouts: train families only, responses pass.
    std::set<std::string> demo_families, rollout_families;
    int64_t demonstrations_pass = 0;
    for (const auto& d : corpus.demonstrations) {
        unique_id(d.id);
        if (!families["train"].count(d.family))
            fail("corpus audit: demonstration ", d.id, " is not from a train family");
        demo_families.insert(d.family);
        if (d.expected_action != std::stoi(d.family.substr(2)) / c.families_per_action)
            fail("corpus audit: demonstration ", d.id, " has the wrong expected action ", d.expected_action);
        if (d.prompt != corpus_prompt(d.family, d.expected_action, "demonstration", c.demonstration_variant))
            fail("corpus audit: demonstration ", d.id, ": prompt does not match its template");
        if (!evaluate_response(d.response, FinishReason::eos, d.expected_action).rubric_success)
            fail("corpus audit: demonstration ", d.id, ": response '", d.response, "' fails the rubric");
        ++demonstrations_pass;
    }
    for (const auto& r : corpus.rollouts) {
        unique_id(r.id);
        if (!families["train"].count(r.family)) fail("corpus audit: rollout ", r.id, " is not from a train family");
        rollout_families.insert(r.family);
        if (r.expected_action != std::stoi(r.family.substr(2)) / c.families_per_action)
            fail("corpus audit: rollout ", r.id, " has the wrong expected action ", r.expected_action);
        if (r.prompt != corpus_prompt(r.family, r.expected_action, "live rollout request", r.variant))
            fail("corpus audit: rollout ", r.id, ": prompt does not match its template");
    }
    expect("demonstrations", int64_t(corpus.demonstrations.size()), n_train);
    expect("rollout prompts", int64_t(corpus.rollouts.size()), int64_t(n_train) * c.rollouts_per_family);
    if (demo_families != families["train"]) fail("corpus audit: demonstration families differ from the train families");
    if (c.rollouts_per_family > 0 && rollout_families != families["train"])
        fail("corpus audit: rollout families differ from the train families");

    // Distinct prompts of pairs, demonstrations and rollouts.
    std::set<std::string> distinct;
    for (const auto& p : corpus.pairs) distinct.insert(p.prompt);
    for (const auto& d : corpus.demonstrations) distinct.insert(d.prompt);
    for (const auto& r : corpus.rollouts) distinct.insert(r.prompt);
    const int64_t n_inputs = int64_t(corpus.pairs.size() + corpus.demonstrations.size() + corpus.rollouts.size());
    expect("distinct pair, demonstration and rollout prompts", int64_t(distinct.size()), n_inputs);

    // Probes: a 2x2 square over one prompt per context, labels agree with the rubric.
    std::map<std::string, std::set<std::string>> probe_prompts;
    int64_t probe_agree = 0;
    for (const auto& p : corpus.probes) {
        unique_id(p.id);
        if (all_families.count(p.family)) fail("corpus audit: probe family ", p.family, " is also a corpus family");
        probe_prompts[p.family].insert(p.prompt);
        if (distinct.count(p.prompt)) fail("corpus audit: probe ", p.id, " prompt is also a pair/demonstration/rollout prompt");
        if (p.prompt != corpus_probe_prompt(p.family, p.expected_action))
            fail("corpus audit: probe ", p.id, ": prompt does not match its template");
        RubricVerdict v = evaluate_response(p.candidate_response, FinishReason::eos, p.expected_action);
        if (v.rubric_success != p.candidate_correct || v.polite != p.candidate_polite || v.caution != 1)
            fail("corpus audit: probe ", p.id, ": labels correct=", p.candidate_correct, " polite=", p.candidate_polite,
                 " disagree with the rubric (success=", v.rubric_success, " polite=", v.polite, " caution=", v.caution, ")");
        ++probe_agree;
    }
    expect("probe rows", int64_t(corpus.probes.size()), int64_t(c.probe_contexts) * 4);
    expect("probe contexts", int64_t(probe_prompts.size()), c.probe_contexts);
    std::set<std::string> distinct_probe_prompts;
    for (const auto& [family, prompts] : probe_prompts) {
        if (prompts.size() != 1) fail("corpus audit: probe context ", family, " has ", prompts.size(), " prompts; expected 1");
        distinct_probe_prompts.insert(*prompts.begin());
    }
    expect("distinct probe prompts", int64_t(distinct_probe_prompts.size()), c.probe_contexts);
    std::map<std::string, std::set<std::pair<bool, bool>>> squares;
    for (const auto& p : corpus.probes) squares[p.family].insert({p.candidate_correct, p.candidate_polite});
    for (const auto& [family, cells] : squares)
        if (cells.size() != 4) fail("corpus audit: probe context ", family, " is not a full 2x2 square");

    ordered_json a;
    a["dataset"] = c.dataset;
    a["study_revision"] = c.study_revision;
    a["seed"] = c.seed;
    a["human_feedback"] = false;
    a["signal"] = kSignal;
    a["families"] = n_families;
    a["pairs"] = int64_t(corpus.pairs.size());
    a["pairs_by_split"] = {{"train", pairs_by_split["train"]},
                           {"validation", pairs_by_split["validation"]},
                           {"test", pairs_by_split["test"]}};
    a["families_by_split"] = {{"train", families["train"].size()},
                              {"validation", families["validation"].size()},
                              {"test", families["test"].size()}};
    a["families_disjoint"] = true;
    a["warmstart_demonstrations"] = int64_t(corpus.demonstrations.size());
    a["rollout_prompts"] = int64_t(corpus.rollouts.size());
    a["distinct_pair_demo_rollout_prompts"] = int64_t(distinct.size());
    a["probe_rows"] = int64_t(corpus.probes.size());
    a["unique_probe_contexts"] = int64_t(probe_prompts.size());
    a["probe_families_disjoint"] = true;
    a["probe_factorial"] = std::to_string(c.probe_contexts) +
                           " contexts x correctness 2 x politeness 2; the same prompt within a context";
    a["actor_evaluation_rows_per_policy"] = pairs_by_split["test"] + int64_t(corpus.probes.size());
    a["actor_unique_contexts_per_policy"] = pairs_by_split["test"] + int64_t(probe_prompts.size());
    a["prompts_hashed"] = n_inputs + int64_t(corpus.probes.size());
    a["chosen_pass_rubric"] = chosen_pass;
    a["rejected_fail_rubric"] = rejected_fail;
    a["demonstrations_pass_rubric"] = demonstrations_pass;
    a["probe_labels_agree_with_rubric"] = probe_agree;
    a["shared_six_actions"] = true;
    a["rubric_scope"] = kRubricScope;
    return a;
}

// ---- writing ---------------------------------------------------------------

const std::vector<std::string>& corpus_file_names() { return kFiles; }

ordered_json corpus_write(const Corpus& corpus, const fs::path& dir) {
    if (dir.empty()) fail("corpus output folder is an empty path");
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dir, ec)))
        fail("refusing to overwrite existing corpus folder '", dir.string(),
             "' (a new corpus needs a new folder, and a changed corpus a new revision)");
    const ordered_json audit = corpus_audit(corpus);

    // File contents, in memory first.
    std::map<std::string, std::string> files;
    ordered_json prompt_sha = ordered_json::object();
    auto prompt_fields = [&](ordered_json& row, const std::string& id, const std::string& family,
                             const std::string& prompt) {
        row["id"] = id;
        row["family"] = family;
        row["prompt"] = prompt;
        row["prompt_sha256"] = sha256_hex(prompt);
        prompt_sha[id] = row["prompt_sha256"];
    };
    std::string& labels = files["gold/labels.jsonl"];
    for (const auto& p : corpus.pairs) {
        ordered_json row;
        prompt_fields(row, p.id, p.family, p.prompt);
        row["chosen"] = p.chosen;
        row["rejected"] = p.rejected;
        append_line(files[p.split == "test" ? "gold/test_pairs.jsonl" : "learn/" + p.split + "_pairs.jsonl"], row);
        if (p.split == "test") {
            ordered_json prompt_row;
            prompt_fields(prompt_row, p.id, p.family, p.prompt);
            append_line(files["eval/test_prompts.jsonl"], prompt_row);
        }
        ordered_json label = {{"id", p.id}, {"population", "pair"}, {"split", p.split}, {"family", p.family},
                              {"expected_action", p.expected_action}, {"chosen", p.chosen}, {"rejected", p.rejected}};
        append_line(labels, label);
    }
    for (const auto& d : corpus.demonstrations) {
        ordered_json row;
        prompt_fields(row, d.id, d.family, d.prompt);
        row["response"] = d.response;
        append_line(files["learn/demonstrations.jsonl"], row);
        ordered_json label = {{"id", d.id}, {"population", "demonstration"}, {"split", "train"}, {"family", d.family},
                              {"expected_action", d.expected_action}, {"response", d.response}};
        append_line(labels, label);
    }
    for (const auto& r : corpus.rollouts) {
        ordered_json row;
        prompt_fields(row, r.id, r.family, r.prompt);
        append_line(files["learn/rollout_prompts.jsonl"], row);
        ordered_json label = {{"id", r.id}, {"population", "rollout"}, {"split", "train"}, {"family", r.family},
                              {"expected_action", r.expected_action}};
        append_line(labels, label);
    }
    for (const auto& p : corpus.probes) {
        ordered_json row;
        prompt_fields(row, p.id, p.family, p.prompt);
        append_line(files["eval/probe_prompts.jsonl"], row);
        ordered_json label = {{"id", p.id},
                              {"population", "probe"},
                              {"split", "probe"},
                              {"family", p.family},
                              {"expected_action", p.expected_action},
                              {"candidate_response", p.candidate_response},
                              {"candidate_correct", p.candidate_correct},
                              {"candidate_polite", p.candidate_polite}};
        append_line(labels, label);
    }
    for (const auto& name : kFiles) (void)files[name];  // an empty population still has its (empty) file

    ordered_json manifest;
    manifest["dataset"] = corpus.config.dataset;
    manifest["study_revision"] = corpus.config.study_revision;
    manifest["seed"] = corpus.config.seed;
    manifest["human_feedback"] = false;
    manifest["layout"] = {{"learn", "what learning stages may read: demonstrations, train/validation pairs, rollout prompts; no expected actions"},
                          {"eval", "what generation for evaluation may read: test and probe prompts; no labels"},
                          {"gold", "every label; read only by scoring, exercise and report"}};
    manifest["config"] = corpus_config_to_json(corpus.config);
    manifest["audit"] = audit;
    manifest["prompt_sha256"] = prompt_sha;
    ordered_json digests = ordered_json::object();
    for (const auto& name : kFiles)
        digests[name] = {{"sha256", sha256_hex(files[name])}, {"bytes", int64_t(files[name].size())}};
    manifest["files"] = digests;

    // Build in a hidden sibling folder, then rename it into place.
    fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
    fs::create_directories(parent, ec);
    if (ec) fail("cannot create folder '", parent.string(), "': ", ec.message());
    std::random_device rd;
    fs::path tmp = parent / ("." + dir.filename().string() + ".partial" + std::to_string(rd()));
    try {
        create_new_directory(tmp);
        for (const auto& name : kFiles) write_file_atomic(tmp / name, files[name]);
        write_json_atomic(tmp / "manifest.json", manifest);
        if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_NOREPLACE) != 0)
            fail("cannot move the finished corpus into '", dir.string(), "': ", std::strerror(errno),
                 errno == EEXIST ? " (it appeared while the corpus was written)" : "");
    } catch (...) {
        fs::remove_all(tmp, ec);
        throw;
    }
    int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
    return manifest;
}

// ---- reading ---------------------------------------------------------------

Manifest manifest_parse(std::string_view text, std::string_view where) {
    const std::string at(where);
    json j = parse_json(text, at);
    expect_fields(j, {"dataset", "study_revision", "seed", "human_feedback", "layout", "config", "audit",
                      "prompt_sha256", "files"},
                  at);
    Manifest m;
    m.config = corpus_config_from_json(json_field(j, "config", at), at + ": config");
    if (json_string(j, "dataset", at) != m.config.dataset)
        fail(at, ": field 'dataset' is '", json_string(j, "dataset", at), "' but config.dataset is '", m.config.dataset, "'");
    if (json_string(j, "study_revision", at) != m.config.study_revision)
        fail(at, ": field 'study_revision' disagrees with config.study_revision");
    if (json_int(j, "seed", at) != m.config.seed) fail(at, ": field 'seed' disagrees with config.seed");
    if (json_bool(j, "human_feedback", at)) fail(at, ": field 'human_feedback' must be false for a simulated corpus");
    m.audit = json_field(j, "audit", at);
    if (!m.audit.is_object()) fail(at, ": field 'audit' must be an object, got ", m.audit.type_name());
    const json& prompts = json_field(j, "prompt_sha256", at);
    if (!prompts.is_object()) fail(at, ": field 'prompt_sha256' must be an object, got ", prompts.type_name());
    for (auto it = prompts.begin(); it != prompts.end(); ++it) {
        if (!it->is_string() || !is_hex64(it->get<std::string>()))
            fail(at, ": prompt_sha256['", it.key(), "'] must be 64 lowercase hex digits");
        m.prompt_sha256[it.key()] = it->get<std::string>();
    }
    const json& files = json_field(j, "files", at);
    if (!files.is_object()) fail(at, ": field 'files' must be an object, got ", files.type_name());
    for (const auto& name : kFiles) {
        const std::string fat = at + ": files['" + name + "']";
        const json& entry = json_field(files, name, at + ": files");
        expect_fields(entry, {"sha256", "bytes"}, fat);
        FileDigest d;
        d.sha256 = json_string(entry, "sha256", fat);
        if (!is_hex64(d.sha256)) fail(fat, ": field 'sha256' must be 64 lowercase hex digits, got '", d.sha256, "'");
        d.bytes = json_int(entry, "bytes", fat);
        if (d.bytes < 0) fail(fat, ": field 'bytes' must be >= 0, got ", d.bytes);
        m.files[name] = d;
    }
    for (auto it = files.begin(); it != files.end(); ++it)
        if (!m.files.count(it.key())) fail(at, ": files lists unexpected file '", it.key(), "'");
    return m;
}

Manifest load_manifest(const GuardedReader& reader, const fs::path& dir) {
    const fs::path path = dir / "manifest.json";
    return manifest_parse(reader.read(path, InputKind::json), path.string());
}

namespace {
// The bytes of one corpus file, checked against the manifest.
std::string read_checked(const GuardedReader& reader, const fs::path& dir, const std::string& name) {
    Manifest m = load_manifest(reader, dir);
    const fs::path path = dir / name;
    std::string bytes = reader.read(path);
    const FileDigest& d = m.files.at(name);
    std::string got = sha256_hex(bytes);
    if (got != d.sha256 || int64_t(bytes.size()) != d.bytes)
        fail(path.string(), ": sha256 ", got, " (", bytes.size(), " bytes) does not match the manifest's ", d.sha256,
             " (", d.bytes, " bytes): the file changed after prepare");
    return bytes;
}
}  // namespace

std::vector<Demonstration> parse_demonstrations(std::string_view text, std::string_view where) {
    std::vector<Demonstration> out;
    std::set<std::string> seen;
    for_each_jsonl(text, where, [&](const json& o, const std::string& at) {
        expect_fields(o, {"id", "family", "prompt", "prompt_sha256", "response"}, at);
        Demonstration d{json_string(o, "id", at), json_string(o, "family", at), checked_prompt(o, at),
                        json_string(o, "response", at)};
        check_unique(seen, d.id, at);
        out.push_back(std::move(d));
    });
    return out;
}

std::vector<PreferencePair> parse_pairs(std::string_view text, std::string_view where) {
    std::vector<PreferencePair> out;
    std::set<std::string> seen;
    for_each_jsonl(text, where, [&](const json& o, const std::string& at) {
        expect_fields(o, {"id", "family", "prompt", "prompt_sha256", "chosen", "rejected"}, at);
        PreferencePair p{json_string(o, "id", at), json_string(o, "family", at), checked_prompt(o, at),
                         json_string(o, "chosen", at), json_string(o, "rejected", at)};
        check_unique(seen, p.id, at);
        out.push_back(std::move(p));
    });
    return out;
}

std::vector<PromptRow> parse_prompts(std::string_view text, std::string_view where) {
    std::vector<PromptRow> out;
    std::set<std::string> seen;
    for_each_jsonl(text, where, [&](const json& o, const std::string& at) {
        expect_fields(o, {"id", "family", "prompt", "prompt_sha256"}, at);
        PromptRow r{json_string(o, "id", at), json_string(o, "family", at), checked_prompt(o, at)};
        check_unique(seen, r.id, at);
        out.push_back(std::move(r));
    });
    return out;
}

GoldLabels parse_gold(std::string_view text, std::string_view where) {
    GoldLabels g;
    std::set<std::string> seen;
    for_each_jsonl(text, where, [&](const json& o, const std::string& at) {
        GoldLabel l;
        l.population = json_string(o, "population", at);
        std::vector<std::string> fields = {"id", "population", "split", "family", "expected_action"};
        if (l.population == "pair") {
            fields.insert(fields.end(), {"chosen", "rejected"});
        } else if (l.population == "demonstration") {
            fields.push_back("response");
        } else if (l.population == "probe") {
            fields.insert(fields.end(), {"candidate_response", "candidate_correct", "candidate_polite"});
        } else if (l.population != "rollout") {
            fail(at, ": field 'population' must be pair, demonstration, rollout or probe, got '", l.population, "'");
        }
        expect_fields(o, fields, at);
        l.id = json_string(o, "id", at);
        l.split = json_string(o, "split", at);
        l.family = json_string(o, "family", at);
        l.expected_action = checked_action(o, "expected_action", at);
        const bool split_ok = l.population == "pair" ? (l.split == "train" || l.split == "validation" || l.split == "test")
                              : l.population == "probe" ? l.split == "probe"
                                                        : l.split == "train";
        if (!split_ok) fail(at, ": split '", l.split, "' is not valid for population '", l.population, "'");
        if (l.population == "pair") {
            l.chosen = json_string(o, "chosen", at);
            l.rejected = json_string(o, "rejected", at);
        } else if (l.population == "demonstration") {
            l.response = json_string(o, "response", at);
        } else if (l.population == "probe") {
            l.candidate_response = json_string(o, "candidate_response", at);
            l.candidate_correct = json_bool(o, "candidate_correct", at);
            l.candidate_polite = json_bool(o, "candidate_polite", at);
        }
        check_unique(seen, l.id, at);
        g.index[l.id] = g.rows.size();
        g.rows.push_back(std::move(l));
    });
    return g;
}

const GoldLabel& GoldLabels::at(const std::string& id) const {
    auto it = index.find(id);
    if (it == index.end()) fail("gold labels: no label for id '", id, "'");
    return rows[it->second];
}

std::vector<Demonstration> load_demonstrations(const GuardedReader& reader, const fs::path& dir) {
    const std::string name = "learn/demonstrations.jsonl";
    return parse_demonstrations(read_checked(reader, dir, name), (dir / name).string());
}

std::vector<PreferencePair> load_pairs(const GuardedReader& reader, const fs::path& dir, PairSplit split) {
    const std::string name = split == PairSplit::train        ? "learn/train_pairs.jsonl"
                             : split == PairSplit::validation ? "learn/validation_pairs.jsonl"
                                                              : "gold/test_pairs.jsonl";
    return parse_pairs(read_checked(reader, dir, name), (dir / name).string());
}

std::vector<PromptRow> load_rollout_prompts(const GuardedReader& reader, const fs::path& dir) {
    const std::string name = "learn/rollout_prompts.jsonl";
    return parse_prompts(read_checked(reader, dir, name), (dir / name).string());
}

std::vector<PromptRow> load_eval_prompts(const GuardedReader& reader, const fs::path& dir, EvalPopulation population) {
    const std::string name = population == EvalPopulation::test ? "eval/test_prompts.jsonl" : "eval/probe_prompts.jsonl";
    return parse_prompts(read_checked(reader, dir, name), (dir / name).string());
}

GoldLabels load_gold(const GuardedReader& reader, const fs::path& dir) {
    const std::string name = "gold/labels.jsonl";
    return parse_gold(read_checked(reader, dir, name), (dir / name).string());
}

Corpus corpus_load(const GuardedReader& reader, const fs::path& dir) {
    Corpus corpus;
    Manifest m = load_manifest(reader, dir);
    corpus.config = m.config;
    GoldLabels gold = load_gold(reader, dir);
    std::set<std::string> used;
    auto label = [&](const std::string& id, const std::string& population, const std::string& where) -> const GoldLabel& {
        auto it = gold.index.find(id);
        if (it == gold.index.end()) fail(where, ": id '", id, "' has no label in gold/labels.jsonl");
        const GoldLabel& l = gold.rows[it->second];
        if (l.population != population)
            fail(where, ": id '", id, "' is a ", population, " but gold/labels.jsonl calls it a ", l.population);
        used.insert(id);
        return l;
    };
    auto check_family = [](const std::string& where, const std::string& id, const std::string& file_family,
                           const GoldLabel& l) {
        if (file_family != l.family)
            fail(where, ": id '", id, "' has family '", file_family, "' but gold says '", l.family, "'");
    };
    const std::pair<PairSplit, std::string> pair_files[] = {{PairSplit::train, "learn/train_pairs.jsonl"},
                                                            {PairSplit::validation, "learn/validation_pairs.jsonl"},
                                                            {PairSplit::test, "gold/test_pairs.jsonl"}};
    const char* split_names[] = {"train", "validation", "test"};
    for (const auto& [split, name] : pair_files) {
        const std::string where = (dir / name).string();
        for (const auto& p : load_pairs(reader, dir, split)) {
            const GoldLabel& l = label(p.id, "pair", where);
            check_family(where, p.id, p.family, l);
            if (l.split != split_names[int(split)])
                fail(where, ": pair '", p.id, "' is in this file but gold puts it in split '", l.split, "'");
            if (p.chosen != l.chosen || p.rejected != l.rejected)
                fail(where, ": pair '", p.id, "' chosen/rejected differ from gold/labels.jsonl");
            PairRecord r;
            r.id = p.id;
            r.family = p.family;
            r.split = l.split;
            r.variant = id_suffix(p.id, "-P", where);
            r.expected_action = l.expected_action;
            r.prompt = p.prompt;
            r.chosen = p.chosen;
            r.rejected = p.rejected;
            corpus.pairs.push_back(std::move(r));
        }
    }
    std::sort(corpus.pairs.begin(), corpus.pairs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    {
        const std::string where = (dir / "eval/test_prompts.jsonl").string();
        std::map<std::string, std::string> test_prompts;
        for (const auto& r : load_eval_prompts(reader, dir, EvalPopulation::test)) test_prompts[r.id] = r.prompt;
        size_t n_test = 0;
        for (const auto& p : corpus.pairs) {
            if (p.split != "test") continue;
            ++n_test;
            auto it = test_prompts.find(p.id);
            if (it == test_prompts.end() || it->second != p.prompt)
                fail(where, ": test pair '", p.id, "' is missing or has a different prompt");
        }
        if (n_test != test_prompts.size())
            fail(where, ": ", test_prompts.size(), " test prompts but ", n_test, " test pairs");
    }
    {
        const std::string where = (dir / "learn/demonstrations.jsonl").string();
        for (const auto& d : load_demonstrations(reader, dir)) {
            const GoldLabel& l = label(d.id, "demonstration", where);
            check_family(where, d.id, d.family, l);
            if (d.response != l.response) fail(where, ": demonstration '", d.id, "' response differs from gold");
            corpus.demonstrations.push_back({d.id, d.family, l.expected_action, d.prompt, d.response});
        }
    }
    {
        const std::string where = (dir / "learn/rollout_prompts.jsonl").string();
        for (const auto& r : load_rollout_prompts(reader, dir)) {
            const GoldLabel& l = label(r.id, "rollout", where);
            check_family(where, r.id, r.family, l);
            corpus.rollouts.push_back(
                {r.id, r.family, m.config.rollout_first_variant + id_suffix(r.id, "-RL", where), l.expected_action, r.prompt});
        }
    }
    {
        const std::string where = (dir / "eval/probe_prompts.jsonl").string();
        for (const auto& r : load_eval_prompts(reader, dir, EvalPopulation::probe)) {
            const GoldLabel& l = label(r.id, "probe", where);
            check_family(where, r.id, r.family, l);
            corpus.probes.push_back({r.id, r.family, l.expected_action, r.prompt, l.candidate_correct,
                                     l.candidate_polite, l.candidate_response});
        }
    }
    for (const auto& l : gold.rows)
        if (!used.count(l.id))
            fail((dir / "gold/labels.jsonl").string(), ": label '", l.id, "' matches no row of learn/ or eval/ or gold/test_pairs.jsonl");
    return corpus;
}

Manifest verify_corpus(const GuardedReader& reader, const fs::path& dir) {
    Manifest m = load_manifest(reader, dir);
    // Every file on disk is listed, regular, and hashes as the manifest says.
    std::error_code ec;
    std::set<std::string> listed(kFiles.begin(), kFiles.end());
    listed.insert("manifest.json");
    const fs::path root = reader.resolve(dir);
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        const std::string rel = fs::relative(it->path(), root).generic_string();
        if (it->is_symlink()) fail(dir.string(), ": '", rel, "' is a symlink; a corpus holds regular files only");
        if (it->is_directory()) {
            if (rel != "learn" && rel != "eval" && rel != "gold")
                fail(dir.string(), ": unexpected folder '", rel, "' (not in the manifest's layout)");
            continue;
        }
        if (!listed.count(rel)) fail(dir.string(), ": file '", rel, "' is not listed in manifest.json");
    }
    if (ec) fail("cannot list '", dir.string(), "': ", ec.message());
    for (const auto& [name, digest] : m.files) {
        const fs::path path = dir / name;
        std::string bytes = reader.read(path);
        std::string got = sha256_hex(bytes);
        if (got != digest.sha256 || int64_t(bytes.size()) != digest.bytes)
            fail(path.string(), ": sha256 ", got, " (", bytes.size(), " bytes) does not match the manifest's ",
                 digest.sha256, " (", digest.bytes, " bytes): the file changed after prepare");
    }
    // The contents re-audit to the manifest's audit, prompt hashes included.
    Corpus corpus = corpus_load(reader, dir);
    json audit = json::parse(corpus_audit(corpus).dump());
    if (audit != m.audit)
        fail(dir.string(), "/manifest.json: the audit does not match the corpus files (manifest says ",
             m.audit.dump(), ", the files give ", audit.dump(), ")");
    std::map<std::string, std::string> prompts;
    for (const auto& p : corpus.pairs) prompts[p.id] = sha256_hex(p.prompt);
    for (const auto& d : corpus.demonstrations) prompts[d.id] = sha256_hex(d.prompt);
    for (const auto& r : corpus.rollouts) prompts[r.id] = sha256_hex(r.prompt);
    for (const auto& p : corpus.probes) prompts[p.id] = sha256_hex(p.prompt);
    if (prompts != m.prompt_sha256)
        fail(dir.string(), "/manifest.json: prompt_sha256 does not match the prompts of the corpus files (",
             m.prompt_sha256.size(), " listed, ", prompts.size(), " in the files)");
    return m;
}

}  // namespace ppolab
