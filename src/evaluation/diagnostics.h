// diagnostics.h — shortcut diagnostics of a finished study (RUN/eval/diagnostics.json):
// what the judge's learned score goes with, and how the outputs outside the
// rubric's grammar differ from it. Diagnostics only: no rubric verdict changes.
//
// Computed in evaluate's scoring step (StageScope::all, after training) from
//   * "sft", "ppo": the scored held-out rows (RUN/eval/<policy>-scored.json),
//     one row per distinct prompt (the 4 rows of a probe context are one case);
//   * "rollouts": every saved PPO rollout of the continuous mode
//     (RUN/ppo/rollouts/continuous), scored here by the rubric with gold labels.
// For each group:
//   * Pearson correlation of the learned score with the response length
//     (tokens, EOS included) and with the rubric's `polite` flag (null with a
//     reason when a variable is constant or there are fewer than 2 outputs);
//   * the share of polite outputs and of each action (by name), refusals and
//     uncertified outputs; the number of distinct responses;
//   * every UNCERTIFIED output's nearest sentence of the grammar (byte-level
//     insert/delete distance over the rubric's 192 sentences, ties to the first
//     in rubric_enumerate order) and its edit, in named groups with counts and
//     one example each.
// No durations, no absolute paths: the same run gives the same bytes.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/guarded_fs.h"
#include "data/rubric.h"
#include "training/run_layout.h"
#include "util/json.h"

namespace ppolab {

// ---- correlation ------------------------------------------------------------

struct Correlation {
    std::optional<double> r;  // nullopt when undefined
    int64_t n = 0;            // pairs
    std::string reason;       // why undefined ("" when r is set)
};
// Pearson's r of (x, y) in float64 (two-pass: means, then centred sums);
// undefined when n < 2 or either variable is constant. Sizes must match.
Correlation pearson(const std::vector<double>& x, const std::vector<double>& y, std::string_view x_name,
                    std::string_view y_name);
ordered_json correlation_to_json(const Correlation& c);

// ---- edits against the grammar ---------------------------------------------

// Byte-level insert/delete edit distance (no substitutions): |a| + |b| − 2·LCS.
// Without substitutions a short sentence cannot be "reached" by rewriting
// letters: a cut-off hedge ". This may help" is nearest to an answer ending
// with that hedge, not to the shortest instruction.
int64_t edit_distance(std::string_view a, std::string_view b);

struct GrammarMatch {
    std::string sentence;  // the nearest sentence of the grammar (canonical spacing)
    int64_t distance = 0;  // edit_distance(normalised text, sentence)
};
// The nearest sentence to rubric_normalize(text) among rubric_enumerate().
GrammarMatch nearest_grammar_sentence(std::string_view text);

// The named edit groups, in the order they are tried (the first that fits):
extern const std::vector<std::string> kEditGroups;
// The group of the edit turning `sentence` into `text` (normalised first);
// `decodable` false is its own group. Always one of kEditGroups.
std::string classify_edit(std::string_view text, std::string_view sentence, bool decodable = true);

// ---- the diagnostics -------------------------------------------------------

// One output as the diagnostics see it.
struct DiagnosticOutput {
    std::string id;    // row or rollout id
    std::string text;  // decoded response (without EOS)
    double learned_score = 0;
    int64_t tokens = 0;     // response tokens, EOS included
    RubricVerdict verdict;  // the rubric's verdict (unchanged)
};

// The diagnostics of one group of outputs (see the header comment).
ordered_json diagnose_outputs(const std::vector<DiagnosticOutput>& outputs);

fs::path diagnostics_path(const RunLayout& run);  // RUN/eval/diagnostics.json
// The whole file: {"format": "ppolab-diagnostics", "note", "sources",
// "groups": {"sft": …, "ppo": …, "rollouts": …}} — a group whose input is
// absent is {"absent": "<what is missing>"}.
ordered_json shortcut_diagnostics(const GuardedReader& reader, const RunLayout& run);
// Computes and writes diagnostics_path (replacing an earlier one: derived data).
void write_shortcut_diagnostics(const GuardedReader& reader, const RunLayout& run);

}  // namespace ppolab
