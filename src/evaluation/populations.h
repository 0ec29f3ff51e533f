// populations.h — the bookkeeping of SPEC §7's held-out evaluation, as pure
// functions over generated rows (no model, no files):
//
//   * a row is one generation: its prompt, response ids, decoded text, how it
//     ended, its learned score and the per-token actor/reference log-probs,
//     and (after scoring) its rubric verdict;
//   * the 4 rows of a probe context share one prompt, so greedy decoding must
//     give them identical responses (checked, error otherwise);
//   * a population of unique contexts keeps one row per distinct prompt (the
//     first in row order): 260 rows are 200 independent cases, not 260;
//   * metrics per population: rubric success over all outputs, recognised
//     coverage, relevant and unsupported certainty over the recognised
//     outputs, refusals, no-EOS, undecodable, mean length, mean learned
//     score, mean sampled actor/reference log-ratio, with their counts and
//     denominators.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/rubric.h"
#include "evaluation/exact_gold.h"
#include "util/json.h"

namespace ppolab {

struct EvalRow {
    std::string id;                         // corpus id: OH004-P0, PROBE03-C1-P0
    std::string family;                     // OH004, PROBE03
    std::string population;                 // "test" | "probe" | "validation"
    std::string prompt;                     // the user's text (the chat template is applied by the study)
    std::vector<int32_t> response;          // (tokens) generated ids, EOS included when it ended the row
    std::string text;                       // decoded response without the final EOS
    std::string finish_reason;              // "eos" | "length"
    bool decodable = true;                  // every token decodes to valid UTF-8
    std::optional<double> learned_score;    // the frozen judge's score of (prompt, response)
    std::vector<float> actor_logp;          // (tokens) teacher-forced, the generating policy
    std::vector<float> reference_logp;      // (tokens) teacher-forced, the SFT policy
    std::vector<float> sampling_logp;       // (tokens) from the generation forward itself
    std::optional<double> kl_exact_to_sft;  // exact sequence KL of the policy to SFT (model/sequence_kl.h)
    std::optional<GrammarMass> grammar;     // the grammar's sentences under the policy (exact_gold.h)
    std::optional<RubricVerdict> verdict;   // set by scoring only
    int expected_action = -1;               // set by scoring only (a label from gold/)

    // mean over response tokens of (actor − reference); nullopt without both.
    std::optional<double> mean_logratio() const;
};

ordered_json eval_row_to_json(const EvalRow& row);
EvalRow eval_row_from_json(const json& value, std::string_view where);

// One row per distinct prompt, the first in row order.
std::vector<const EvalRow*> unique_contexts(const std::vector<const EvalRow*>& rows);
// The rows of one population ("test", "probe", "validation"), in row order.
std::vector<const EvalRow*> rows_of(const std::vector<EvalRow>& rows, std::string_view population);

// Rows sharing a prompt must have identical responses (greedy decoding is a
// function of the prompt): Error naming the prompt's first row, the row that
// differs, and the first differing token position.
void check_repeated_generations(const std::vector<EvalRow>& rows);

// Metrics of a population; every row must carry its verdict.
ordered_json population_metrics(const std::vector<const EvalRow*>& rows);

// The populations of SPEC §7 for one policy: test, probe_rows,
// probe_unique_contexts, all_rows, all_unique_contexts — or, for the
// validation set, validation and validation_unique_contexts.
ordered_json policy_metrics(const std::vector<EvalRow>& rows, bool validation);

}  // namespace ppolab
