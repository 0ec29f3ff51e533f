// corpus_audit.cpp — asserts every count and property of SPEC §1 and
// returns the audit written into the manifest.
#include <map>
#include <set>

#include "data/corpus.h"
#include "data/corpus_fields.h"
#include "data/rubric.h"
#include "util/error.h"

namespace ppolab {

namespace {

constexpr const char* kRubricScope = "finite declared grammar only; other prose UNCERTIFIED";
constexpr const char* kSignal =
    "simulated: a finite rubric generates the preferences and demonstrations; no human feedback";

void expect(const char* what, int64_t got, int64_t want) {
    if (got != want) fail("corpus audit: ", what, " is ", got, "; expected ", want);
}

// What the checks find, for the counts of the audit record.
struct AuditTally {
    std::set<std::string> ids;                              // every id seen so far
    std::map<std::string, std::set<std::string>> families;  // split -> families of its pairs
    std::map<std::string, int64_t> pairs_by_split;
    std::set<std::string> all_families;                          // of every split
    std::set<std::string> distinct;                              // pair, demonstration and rollout prompts
    std::map<std::string, std::set<std::string>> probe_prompts;  // probe context -> its prompts
    int64_t chosen_pass = 0, rejected_fail = 0, demonstrations_pass = 0, probe_agree = 0;

    void unique_id(const std::string& id) {
        if (!ids.insert(id).second) fail("corpus audit: duplicate id '", id, "'");
    }
};

// Pairs: counts, families per split, labels and prompts as SPEC §1 defines them.
void audit_pairs(const Corpus& corpus, AuditTally& t) {
    const CorpusConfig& c = corpus.config;
    const int n_families = kActionCount * c.families_per_action;
    const int n_train = kActionCount * c.train_per_action;
    const int n_val = kActionCount * c.validation_per_action;
    const int n_test = n_families - n_train - n_val;
    const auto splits = corpus_family_splits(c);
    for (const auto& p : corpus.pairs) {
        t.unique_id(p.id);
        if (p.family.size() != 5 || p.family.rfind("OH", 0) != 0 ||
            !corpus_detail::is_ascii_digits(std::string_view(p.family).substr(2)))
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
        t.families[p.split].insert(p.family);
        ++t.pairs_by_split[p.split];
        if (!evaluate_response(p.chosen, FinishReason::eos, p.expected_action).rubric_success)
            fail("corpus audit: pair ", p.id, ": chosen response '", p.chosen, "' fails the rubric");
        ++t.chosen_pass;
        RubricVerdict rv = evaluate_response(p.rejected, FinishReason::eos, p.expected_action);
        if (rv.rubric_success)
            fail("corpus audit: pair ", p.id, ": rejected response '", p.rejected, "' passes the rubric");
        if (!rv.recognized) fail("corpus audit: pair ", p.id, ": rejected response is not in the grammar");
        ++t.rejected_fail;
    }
    expect("number of pairs", int64_t(corpus.pairs.size()), int64_t(n_families) * c.pair_variants);
    expect("train pairs", t.pairs_by_split["train"], int64_t(n_train) * c.pair_variants);
    expect("validation pairs", t.pairs_by_split["validation"], int64_t(n_val) * c.pair_variants);
    expect("test pairs", t.pairs_by_split["test"], int64_t(n_test) * c.pair_variants);
    expect("train families", int64_t(t.families["train"].size()), n_train);
    expect("validation families", int64_t(t.families["validation"].size()), n_val);
    expect("test families", int64_t(t.families["test"].size()), n_test);
    for (const auto& [split, fams] : t.families)
        if (split != "train" && split != "validation" && split != "test")
            fail("corpus audit: unknown split '", split, "'");
    int64_t family_total = 0;
    for (const auto& [split, fams] : t.families) {
        t.all_families.insert(fams.begin(), fams.end());
        family_total += int64_t(fams.size());
    }
    if (family_total != int64_t(t.all_families.size()))
        fail("corpus audit: the train, validation and test families are not disjoint");
}

// Demonstrations and rollouts: train families only, responses pass; then the
// pair, demonstration and rollout prompts are all distinct.
void audit_demonstrations_and_rollouts(const Corpus& corpus, AuditTally& t) {
    const CorpusConfig& c = corpus.config;
    const std::set<std::string>& train = t.families["train"];
    std::set<std::string> demo_families, rollout_families;
    for (const auto& d : corpus.demonstrations) {
        t.unique_id(d.id);
        if (!train.count(d.family)) fail("corpus audit: demonstration ", d.id, " is not from a train family");
        demo_families.insert(d.family);
        if (d.expected_action != std::stoi(d.family.substr(2)) / c.families_per_action)
            fail("corpus audit: demonstration ", d.id, " has the wrong expected action ", d.expected_action);
        if (d.prompt != corpus_prompt(d.family, d.expected_action, "demonstration", c.demonstration_variant))
            fail("corpus audit: demonstration ", d.id, ": prompt does not match its template");
        if (!evaluate_response(d.response, FinishReason::eos, d.expected_action).rubric_success)
            fail("corpus audit: demonstration ", d.id, ": response '", d.response, "' fails the rubric");
        ++t.demonstrations_pass;
    }
    for (const auto& r : corpus.rollouts) {
        t.unique_id(r.id);
        if (!train.count(r.family)) fail("corpus audit: rollout ", r.id, " is not from a train family");
        rollout_families.insert(r.family);
        if (r.expected_action != std::stoi(r.family.substr(2)) / c.families_per_action)
            fail("corpus audit: rollout ", r.id, " has the wrong expected action ", r.expected_action);
        if (r.prompt != corpus_prompt(r.family, r.expected_action, "live rollout request", r.variant))
            fail("corpus audit: rollout ", r.id, ": prompt does not match its template");
    }
    const int n_train = kActionCount * c.train_per_action;
    expect("demonstrations", int64_t(corpus.demonstrations.size()), n_train);
    expect("rollout prompts", int64_t(corpus.rollouts.size()), int64_t(n_train) * c.rollouts_per_family);
    if (demo_families != train) fail("corpus audit: demonstration families differ from the train families");
    if (c.rollouts_per_family > 0 && rollout_families != train)
        fail("corpus audit: rollout families differ from the train families");

    for (const auto& p : corpus.pairs) t.distinct.insert(p.prompt);
    for (const auto& d : corpus.demonstrations) t.distinct.insert(d.prompt);
    for (const auto& r : corpus.rollouts) t.distinct.insert(r.prompt);
    const size_t n_inputs = corpus.pairs.size() + corpus.demonstrations.size() + corpus.rollouts.size();
    expect("distinct pair, demonstration and rollout prompts", int64_t(t.distinct.size()), int64_t(n_inputs));
}

// Probes: a 2x2 square over one prompt per context, labels agree with the rubric.
void audit_probes(const Corpus& corpus, AuditTally& t) {
    const CorpusConfig& c = corpus.config;
    for (const auto& p : corpus.probes) {
        t.unique_id(p.id);
        if (t.all_families.count(p.family)) fail("corpus audit: probe family ", p.family, " is also a corpus family");
        t.probe_prompts[p.family].insert(p.prompt);
        if (t.distinct.count(p.prompt))
            fail("corpus audit: probe ", p.id, " prompt is also a pair/demonstration/rollout prompt");
        if (p.prompt != corpus_probe_prompt(p.family, p.expected_action))
            fail("corpus audit: probe ", p.id, ": prompt does not match its template");
        RubricVerdict v = evaluate_response(p.candidate_response, FinishReason::eos, p.expected_action);
        if (v.rubric_success != p.candidate_correct || v.polite != p.candidate_polite || v.caution != 1)
            fail("corpus audit: probe ", p.id, ": labels correct=", p.candidate_correct, " polite=", p.candidate_polite,
                 " disagree with the rubric (success=", v.rubric_success, " polite=", v.polite, " caution=", v.caution,
                 ")");
        ++t.probe_agree;
    }
    expect("probe rows", int64_t(corpus.probes.size()), int64_t(c.probe_contexts) * 4);
    expect("probe contexts", int64_t(t.probe_prompts.size()), c.probe_contexts);
    std::set<std::string> distinct_probe_prompts;
    for (const auto& [family, prompts] : t.probe_prompts) {
        if (prompts.size() != 1)
            fail("corpus audit: probe context ", family, " has ", prompts.size(), " prompts; expected 1");
        distinct_probe_prompts.insert(*prompts.begin());
    }
    expect("distinct probe prompts", int64_t(distinct_probe_prompts.size()), c.probe_contexts);
    std::map<std::string, std::set<std::pair<bool, bool>>> squares;
    for (const auto& p : corpus.probes) squares[p.family].insert({p.candidate_correct, p.candidate_polite});
    for (const auto& [family, cells] : squares)
        if (cells.size() != 4) fail("corpus audit: probe context ", family, " is not a full 2x2 square");
}

// The audit record of the manifest, in its fixed field order.
ordered_json audit_record(const Corpus& corpus, AuditTally& t) {
    const CorpusConfig& c = corpus.config;
    const int64_t n_inputs = int64_t(corpus.pairs.size() + corpus.demonstrations.size() + corpus.rollouts.size());
    ordered_json a;
    a["dataset"] = c.dataset;
    a["study_revision"] = c.study_revision;
    a["seed"] = c.seed;
    a["human_feedback"] = false;
    a["signal"] = kSignal;
    a["families"] = kActionCount * c.families_per_action;
    a["pairs"] = int64_t(corpus.pairs.size());
    a["pairs_by_split"] = {{"train", t.pairs_by_split["train"]},
                           {"validation", t.pairs_by_split["validation"]},
                           {"test", t.pairs_by_split["test"]}};
    a["families_by_split"] = {{"train", t.families["train"].size()},
                              {"validation", t.families["validation"].size()},
                              {"test", t.families["test"].size()}};
    a["families_disjoint"] = true;
    a["warmstart_demonstrations"] = int64_t(corpus.demonstrations.size());
    a["rollout_prompts"] = int64_t(corpus.rollouts.size());
    a["distinct_pair_demo_rollout_prompts"] = int64_t(t.distinct.size());
    a["probe_rows"] = int64_t(corpus.probes.size());
    a["unique_probe_contexts"] = int64_t(t.probe_prompts.size());
    a["probe_families_disjoint"] = true;
    a["probe_factorial"] =
        std::to_string(c.probe_contexts) + " contexts x correctness 2 x politeness 2; the same prompt within a context";
    a["actor_evaluation_rows_per_policy"] = t.pairs_by_split["test"] + int64_t(corpus.probes.size());
    a["actor_unique_contexts_per_policy"] = t.pairs_by_split["test"] + int64_t(t.probe_prompts.size());
    a["prompts_hashed"] = n_inputs + int64_t(corpus.probes.size());
    a["chosen_pass_rubric"] = t.chosen_pass;
    a["rejected_fail_rubric"] = t.rejected_fail;
    a["demonstrations_pass_rubric"] = t.demonstrations_pass;
    a["probe_labels_agree_with_rubric"] = t.probe_agree;
    a["shared_six_actions"] = true;
    a["rubric_scope"] = kRubricScope;
    return a;
}

}  // namespace

ordered_json corpus_audit(const Corpus& corpus) {
    AuditTally tally;
    audit_pairs(corpus, tally);
    audit_demonstrations_and_rollouts(corpus, tally);
    audit_probes(corpus, tally);
    return audit_record(corpus, tally);
}

}  // namespace ppolab
