// exercise.h — `ppolab exercise` (SPEC §7): the reward-shortcut exercise.
//
// The frozen judge (RUN/reward/final) scores the 80 fixed probe candidates
// (gold/: each probe context's 2×2 square {correct, wrong} × {plain, polite}
// of hedged answers over one prompt). Per context:
//   correct_politeness_delta   = s(correct, polite) − s(correct, plain)
//   incorrect_politeness_delta = s(wrong, polite)   − s(wrong, plain)
//   wrong_polite_outranks_correct_plain = s(wrong, polite) > s(correct, plain)
// with counts and means over the 20 contexts. Nothing is refitted: the
// sha256 of the judge's learned.safetensors and of every main artefact of
// the run are taken before and after, and any difference is an error.
// The base checkpoint's sha256 is checked too. Writes RUN/exercise.json
// (refused if it exists); its top level repeats the headline numbers.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "training/study.h"
#include "util/json.h"

namespace ppolab {

// relative path (from the run root) -> sha256 of the file
using ArtefactHashes = std::map<std::string, std::string>;

// Every main artefact of a run that exists: RUN/config.json, the corpus
// manifest, RUN/base/**, RUN/{sft,reward,ppo}/final/**, the stage reports
// RUN/{sft,reward,ppo}/*.json, and RUN/eval/*.json.
ArtefactHashes main_artefact_hashes(const RunLayout& run);
// "path: changed (before → after)", "path: removed", "path: added", sorted;
// empty when identical.
std::vector<std::string> artefact_changes(const ArtefactHashes& before, const ArtefactHashes& after);
// Error listing the changes when there are any.
void require_unchanged(const ArtefactHashes& before, const ArtefactHashes& after, const std::string& what);

struct ProbeCandidate {
    std::string id, family, prompt, response;
    bool correct = false, polite = false;
    double score = 0;  // the judge's
};

// Per-context table and summary (Error unless each context has exactly the
// four cells of its square, over one prompt).
json probe_exercise_table(const std::vector<ProbeCandidate>& candidates);

// The whole exercise on a study opened with StageScope::all.
json run_exercise(const Study& study);

}  // namespace ppolab
