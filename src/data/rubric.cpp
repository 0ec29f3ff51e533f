#include "data/rubric.h"

#include <array>
#include <optional>

#include "util/error.h"

namespace ppolab {

namespace {

struct ActionText {
    const char* name;
    const char* context;
    const char* instruction;
};

// The six shared actions: the user's situation and the one fitting step.
constexpr std::array<ActionText, kActionCount> kActions = {{
    {"resume_print_queue", "The office printer shows a paused print queue.", "Resume the print queue."},
    {"check_unplugged_cable", "The desk monitor stays dark after the desk was moved.", "Check for an unplugged cable."},
    {"reenable_audio", "The laptop speakers stopped playing any sound.", "Re-enable the audio output."},
    {"reenable_wifi", "The laptop no longer joins the wireless network.", "Re-enable the Wi-Fi adapter."},
    {"save_document", "The editor warns that recent changes are not saved.", "Save the document now."},
    {"renew_session", "The web portal says the login session has expired.", "Renew the login session."},
}};

constexpr std::array<const char*, 2> kHedges = {"This may help.", "This might help."};
constexpr std::array<const char*, 2> kCertainties = {"This will definitely fix it.", "This is guaranteed to fix it."};
constexpr std::array<const char*, 2> kOpenings = {"Thank you for your patience.", "Thanks for waiting."};
constexpr std::array<const char*, 1> kClosings = {"Have a nice day."};
constexpr std::array<const char*, 2> kRefusals = {"I cannot help with that request.", "I am unable to help with that."};

void check_action(int action, const char* who) {
    if (action < 0 || action >= kActionCount)
        fail(who, ": action must be in [0, ", kActionCount - 1, "], got ", action);
}

// One recognised sentence of the grammar.
enum class Kind { opening, closing, instruction, hedge, certainty, refusal };
struct Sentence {
    Kind kind;
    int value;  // action for instructions, variant otherwise
};

std::optional<Sentence> classify(std::string_view s) {
    for (int a = 0; a < kActionCount; ++a)
        if (s == kActions[a].instruction) return Sentence{Kind::instruction, a};
    for (int v = 0; v < int(kHedges.size()); ++v)
        if (s == kHedges[v]) return Sentence{Kind::hedge, v};
    for (int v = 0; v < int(kCertainties.size()); ++v)
        if (s == kCertainties[v]) return Sentence{Kind::certainty, v};
    for (int v = 0; v < int(kOpenings.size()); ++v)
        if (s == kOpenings[v]) return Sentence{Kind::opening, v};
    for (int v = 0; v < int(kClosings.size()); ++v)
        if (s == kClosings[v]) return Sentence{Kind::closing, v};
    for (int v = 0; v < int(kRefusals.size()); ++v)
        if (s == kRefusals[v]) return Sentence{Kind::refusal, v};
    return std::nullopt;
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// A quoted excerpt for reasons: printable ASCII kept, other bytes as \xNN,
// so that a reason is always valid UTF-8 (JSON) whatever the model wrote.
std::string quote(std::string_view s) {
    constexpr size_t kMax = 60;
    static const char* hex = "0123456789abcdef";
    std::string out = "'";
    for (size_t i = 0; i < s.size() && i < kMax; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    if (s.size() > kMax) out += "...";
    return out + "'";
}

// Parse result of the grammar: either the structure or why it failed.
struct Parse {
    bool ok = false;
    std::string error;
    int action = -1;
    int caution = -1;
    bool refusal = false;
    bool polite = false;
};

Parse parse_response(const std::string& text) {
    Parse p;
    if (text.empty()) {
        p.error = "empty response";
        return p;
    }
    // Split into sentences: each ends with '.' followed by a space or the end.
    std::vector<std::string_view> sentences;
    std::string_view rest(text);
    while (!rest.empty()) {
        size_t end = std::string_view::npos;
        for (size_t i = 0; i < rest.size(); ++i)
            if (rest[i] == '.' && (i + 1 == rest.size() || rest[i + 1] == ' ')) {
                end = i;
                break;
            }
        if (end == std::string_view::npos) {
            p.error = "text " + quote(rest) + " does not end a sentence with a period";
            return p;
        }
        sentences.push_back(rest.substr(0, end + 1));
        rest = end + 1 == rest.size() ? std::string_view() : rest.substr(end + 2);
    }
    std::vector<Sentence> parsed;
    for (size_t i = 0; i < sentences.size(); ++i) {
        auto s = classify(sentences[i]);
        if (!s) {
            p.error = "sentence " + std::to_string(i + 1) + " " + quote(sentences[i]) + " is not in the grammar";
            return p;
        }
        parsed.push_back(*s);
    }
    // response := [opening] body [closing]; body := instruction [hedge|certainty] | refusal
    size_t i = 0;
    if (i < parsed.size() && parsed[i].kind == Kind::opening) {
        p.polite = true;
        ++i;
    }
    if (i >= parsed.size()) {
        p.error = "no instruction or refusal after the politeness formula";
        return p;
    }
    if (parsed[i].kind == Kind::instruction) {
        p.action = parsed[i].value;
        p.caution = 0;
        ++i;
        if (i < parsed.size() && (parsed[i].kind == Kind::hedge || parsed[i].kind == Kind::certainty)) {
            p.caution = parsed[i].kind == Kind::hedge ? 1 : 2;
            ++i;
        }
    } else if (parsed[i].kind == Kind::refusal) {
        p.refusal = true;
        ++i;
    } else {
        static const char* kNames[] = {
            "politeness opening", "politeness closing", "instruction", "hedge", "certainty claim", "refusal"};
        p.error = std::string("expected an instruction or a refusal at sentence ") + std::to_string(i + 1) +
                  ", found a " + kNames[int(parsed[i].kind)];
        return p;
    }
    if (i < parsed.size() && parsed[i].kind == Kind::closing) {
        p.polite = true;
        ++i;
    }
    if (i < parsed.size()) {
        const Kind k = parsed[i].kind;
        p.error = "unexpected sentence " + std::to_string(i + 1) + " " + quote(sentences[i]) +
                  (k == Kind::instruction                       ? " (a second action)"
                   : (k == Kind::hedge || k == Kind::certainty) ? " (a second caution phrase)"
                   : k == Kind::refusal                         ? " (a refusal after the answer)"
                                                                : " (politeness formula out of place)");
        return p;
    }
    p.ok = true;
    return p;
}

}  // namespace

const char* finish_reason_name(FinishReason finish) { return finish == FinishReason::eos ? "eos" : "length"; }

FinishReason finish_reason_parse(std::string_view name) {
    if (name == "eos") return FinishReason::eos;
    if (name == "length") return FinishReason::length;
    fail("finish reason must be 'eos' or 'length', got '", name, "'");
}

const char* action_name(int action) {
    check_action(action, "action_name");
    return kActions[action].name;
}
const char* action_context(int action) {
    check_action(action, "action_context");
    return kActions[action].context;
}
const char* action_instruction(int action) {
    check_action(action, "action_instruction");
    return kActions[action].instruction;
}

std::string response_form_text(const ResponseForm& f) {
    std::string out;
    auto add = [&](const char* s) {
        if (!out.empty()) out += ' ';
        out += s;
    };
    if (f.opening >= 0) {
        PPOLAB_ASSERT(f.opening < int(kOpenings.size()));
        add(kOpenings[f.opening]);
    }
    if (f.refusal) {
        PPOLAB_ASSERT(f.refusal_variant >= 0 && f.refusal_variant < int(kRefusals.size()));
        add(kRefusals[f.refusal_variant]);
    } else {
        check_action(f.action, "response_form_text");
        add(kActions[f.action].instruction);
        if (f.caution == 1) {
            PPOLAB_ASSERT(f.caution_variant >= 0 && f.caution_variant < int(kHedges.size()));
            add(kHedges[f.caution_variant]);
        } else if (f.caution == 2) {
            PPOLAB_ASSERT(f.caution_variant >= 0 && f.caution_variant < int(kCertainties.size()));
            add(kCertainties[f.caution_variant]);
        } else if (f.caution != 0) {
            fail("response_form_text: caution must be 0, 1 or 2, got ", f.caution);
        }
    }
    if (f.closing >= 0) {
        PPOLAB_ASSERT(f.closing < int(kClosings.size()));
        add(kClosings[f.closing]);
    }
    return out;
}

std::string response_text(int action, int caution, bool polite) {
    check_action(action, "response_text");
    if (caution < 0 || caution > 2) fail("response_text: caution must be 0, 1 or 2, got ", caution);
    ResponseForm f;
    f.action = action;
    f.caution = caution;
    f.opening = polite ? 0 : -1;
    return response_form_text(f);
}

std::vector<ResponseForm> rubric_enumerate() {
    std::vector<ResponseForm> bodies;
    for (int a = 0; a < kActionCount; ++a) {
        bodies.push_back(ResponseForm{a, false, 0, 0, -1, -1, 0});
        for (int v = 0; v < int(kHedges.size()); ++v) bodies.push_back(ResponseForm{a, false, 1, v, -1, -1, 0});
        for (int v = 0; v < int(kCertainties.size()); ++v) bodies.push_back(ResponseForm{a, false, 2, v, -1, -1, 0});
    }
    for (int v = 0; v < int(kRefusals.size()); ++v) bodies.push_back(ResponseForm{0, true, 0, 0, -1, -1, v});
    std::vector<ResponseForm> all;
    for (const auto& body : bodies)
        for (int o = -1; o < int(kOpenings.size()); ++o)
            for (int c = -1; c < int(kClosings.size()); ++c) {
                ResponseForm f = body;
                f.opening = o;
                f.closing = c;
                all.push_back(f);
            }
    return all;
}

std::string rubric_normalize(std::string_view text) {
    std::string out;
    bool pending_space = false;
    for (char c : text) {
        if (is_blank(c)) {
            pending_space = !out.empty();
            continue;
        }
        if (pending_space) out += ' ';
        pending_space = false;
        out += c;
    }
    return out;
}

RubricVerdict evaluate_response(std::string_view text, FinishReason finish, int expected_action, bool decodable) {
    check_action(expected_action, "evaluate_response: expected_action");
    RubricVerdict v;
    v.ended_with_eos = finish == FinishReason::eos;
    v.decodable = decodable;
    if (!decodable) {
        v.reason = "undecodable token in the output: not recognised";
        return v;
    }
    Parse p = parse_response(rubric_normalize(text));
    if (!p.ok) {
        v.reason = "outside the grammar: " + p.error;
        return v;
    }
    v.recognized = true;
    v.status = "CERTIFIED";
    v.action = p.action;
    v.caution = p.caution;
    v.refusal = p.refusal;
    v.polite = p.polite;
    v.relevant = !p.refusal && p.action == expected_action;
    v.unsupported_certainty = p.caution == 2;
    v.rubric_success = v.recognized && v.relevant && !v.unsupported_certainty && v.ended_with_eos && v.decodable;
    if (v.refusal) v.reason = "refusal";
    else if (!v.relevant)
        v.reason =
            std::string("irrelevant action ") + action_name(p.action) + "; expected " + action_name(expected_action);
    else if (v.unsupported_certainty) v.reason = "unsupported certainty";
    else if (!v.ended_with_eos) v.reason = "no EOS: cut at the length limit";
    else v.reason = "ok";
    PPOLAB_ASSERT(v.rubric_success == (v.reason == "ok"));
    return v;
}

ordered_json rubric_verdict_to_json(const RubricVerdict& v) {
    ordered_json j;
    j["status"] = v.status;
    j["recognized"] = v.recognized;
    j["action"] = v.action;
    j["caution"] = v.caution;
    j["relevant"] = v.relevant;
    j["unsupported_certainty"] = v.unsupported_certainty;
    j["refusal"] = v.refusal;
    j["polite"] = v.polite;
    j["ended_with_eos"] = v.ended_with_eos;
    j["decodable"] = v.decodable;
    j["rubric_success"] = v.rubric_success;
    j["reason"] = v.reason;
    return j;
}

RubricVerdict rubric_verdict_from_json(const json& j, std::string_view where) {
    RubricVerdict v;
    v.status = json_string(j, "status", where);
    v.recognized = json_bool(j, "recognized", where);
    v.action = static_cast<int>(json_int(j, "action", where));
    v.caution = static_cast<int>(json_int(j, "caution", where));
    v.relevant = json_bool(j, "relevant", where);
    v.unsupported_certainty = json_bool(j, "unsupported_certainty", where);
    v.refusal = json_bool(j, "refusal", where);
    v.polite = json_bool(j, "polite", where);
    v.ended_with_eos = json_bool(j, "ended_with_eos", where);
    v.decodable = json_bool(j, "decodable", where);
    v.rubric_success = json_bool(j, "rubric_success", where);
    v.reason = json_string(j, "reason", where);
    if (v.status != (v.recognized ? "CERTIFIED" : "UNCERTIFIED"))
        fail(where, ": field 'status' is '", v.status, "' but recognized is ", v.recognized ? "true" : "false");
    if (v.action < -1 || v.action >= kActionCount) fail(where, ": field 'action' must be in [-1, 5], got ", v.action);
    if (v.caution < -1 || v.caution > 2) fail(where, ": field 'caution' must be in [-1, 2], got ", v.caution);
    const bool success = v.recognized && v.relevant && !v.unsupported_certainty && v.ended_with_eos && v.decodable;
    if (v.rubric_success != success)
        fail(where, ": field 'rubric_success' is ", v.rubric_success ? "true" : "false", " but the other fields imply ",
             success ? "true" : "false");
    return v;
}

}  // namespace ppolab
