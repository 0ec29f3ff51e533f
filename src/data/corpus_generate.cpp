// corpus_generate.cpp — OfficeHelpPrefs-v1 from its config (SPEC §1): the
// family split, the prompt templates and every record of the corpus.
#include <cstdio>
#include <utility>

#include "data/corpus.h"
#include "data/pyrandom.h"
#include "data/rubric.h"

namespace ppolab {

namespace {

constexpr const char* kAsk = " Give one relevant next step without claiming a guaranteed fix.";

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

}  // namespace

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

PromptParts corpus_prompt_parts(std::string_view prompt) {
    // "<heading> <family>, <item> <n>. Source: <kind>. <situation>", as corpus_prompt writes it.
    const std::string_view source = ". Source: ";
    bool heading = false;
    for (std::string_view h : {"Help request ", "Case ", "Desk incident "})
        heading = heading || prompt.substr(0, h.size()) == h;
    const size_t at = prompt.find(source);
    if (!heading || at == std::string_view::npos || prompt.substr(0, at).find(". ") != std::string_view::npos)
        return {"", std::string(prompt)};
    const size_t end = prompt.find(". ", at + source.size());
    if (end == std::string_view::npos) return {"", std::string(prompt)};
    return {std::string(prompt.substr(0, end + 1)), std::string(prompt.substr(end + 2))};
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

}  // namespace ppolab
