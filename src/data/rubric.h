// rubric.h — the reserved rubric of OfficeHelpPrefs-v1: a finite grammar of
// help-desk answers and an independent recogniser for it (SPEC §1).
//
// The grammar (every terminal is a whole sentence ending in a period):
//
//   response := [opening] body [closing]
//   body     := instruction(action) [hedge | certainty] | refusal
//
//   instruction  one per action (6 actions, see action_instruction)
//   hedge        caution 1: "This may help." | "This might help."
//   certainty    caution 2, unsupported certainty:
//                "This will definitely fix it." | "This is guaranteed to fix it."
//   opening      politeness: "Thank you for your patience." | "Thanks for waiting."
//   closing      politeness: "Have a nice day."
//   refusal      "I cannot help with that request." | "I am unable to help with that."
//
// The recogniser normalises whitespace only (runs of blanks become one
// space, ends trimmed); everything else must match exactly. Anything outside
// the grammar is UNCERTIFIED: not necessarily false, never a certified
// success. The rubric knows nothing of models or tokens: callers say how
// generation ended and whether every token decoded.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "util/json.h"

namespace ppolab {

constexpr int kActionCount = 6;

// Caution levels of an instruction.
enum class Caution { plain = 0, hedged = 1, certain = 2 };

// How a generation ended: with the EOS token, or cut at the length limit.
enum class FinishReason { eos, length };
const char* finish_reason_name(FinishReason finish);
FinishReason finish_reason_parse(std::string_view name);  // "eos" | "length"; Error otherwise

// The six shared actions, indexed 0..5.
const char* action_name(int action);         // e.g. "resume_print_queue"
const char* action_context(int action);      // the user's situation (used in prompts)
const char* action_instruction(int action);  // the grammar's instruction sentence

// One sentence of the grammar, fully specified: which variant of each slot.
struct ResponseForm {
    int action = 0;           // 0..5; ignored when refusal
    bool refusal = false;     // body is a refusal (variant = refusal_variant)
    int caution = 0;          // 0 plain, 1 hedged, 2 certain
    int caution_variant = 0;  // 0..1 for hedged/certain
    int opening = -1;         // -1 none, else opening variant 0..1
    int closing = -1;         // -1 none, else closing variant 0
    int refusal_variant = 0;  // 0..1
};

// The text of a form (canonical spacing: one space between sentences).
std::string response_form_text(const ResponseForm& form);
// The corpus generator's response: variant 0 of each slot; polite means the
// first opening formula, no closing.
std::string response_text(int action, int caution, bool polite);
// Every sentence the grammar can make (192 forms).
std::vector<ResponseForm> rubric_enumerate();

struct RubricVerdict {
    bool recognized = false;             // the text is a sentence of the grammar (and decodable)
    std::string status = "UNCERTIFIED";  // "CERTIFIED" iff recognized
    int action = -1;                     // recognised action, -1 for none/refusal/unrecognised
    int caution = -1;                    // recognised caution level, -1 if none
    bool relevant = false;               // recognised action == expected action
    bool unsupported_certainty = false;  // caution 2
    bool refusal = false;
    bool polite = false;  // an opening or closing formula
    bool ended_with_eos = false;
    bool decodable = true;
    bool rubric_success = false;  // recognized ∧ relevant ∧ ¬unsupported_certainty ∧ EOS ∧ decodable
    std::string reason;           // "ok" or why not a success
};

// Recognises `text` against the grammar. expected_action must be 0..5.
RubricVerdict evaluate_response(std::string_view text, FinishReason finish, int expected_action, bool decodable = true);

ordered_json rubric_verdict_to_json(const RubricVerdict& verdict);
RubricVerdict rubric_verdict_from_json(const json& value, std::string_view where);

// Whitespace normalisation used by the recogniser (exposed for tests).
std::string rubric_normalize(std::string_view text);

}  // namespace ppolab
