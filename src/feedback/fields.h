// fields.h — field checks shared by the feedback file parsers: exact field
// sets (a misspelt key is an error, not a silently missing value), typed
// reads that name the file and field, and the rule for names and other free
// text that people see (participant, labeler, ids): valid UTF-8 without
// control characters, of bounded length. Prompts and answers are not names:
// they may hold newlines and keep their own rules.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"
#include "util/json.h"

namespace ppolab::feedback_detail {

// Limits of the name-like fields, in bytes of UTF-8.
inline constexpr size_t kMaxNameBytes = 200;   // participant, labeler
inline constexpr size_t kMaxIdBytes = 200;     // pair ids, prompt ids
inline constexpr size_t kMaxNoteBytes = 1000;  // created_by

// `obj` must be an object holding every `required` key and no key outside
// `required` ∪ `optional`.
inline void check_fields(const json& obj, const std::vector<std::string_view>& required,
                         const std::vector<std::string_view>& optional, std::string_view where) {
    if (!obj.is_object()) fail(where, ": expected a JSON object, got ", obj.type_name());
    for (std::string_view key : required)
        if (!obj.contains(key)) fail(where, ": missing field '", key, "'");
    for (auto it = obj.begin(); it != obj.end(); ++it) {
        const std::string& key = it.key();
        if (std::find(required.begin(), required.end(), key) == required.end() &&
            std::find(optional.begin(), optional.end(), key) == optional.end())
            fail(where, ": unexpected field '", key, "'");
    }
}

inline std::string nonempty_string(const json& obj, std::string_view key, std::string_view where) {
    std::string v = json_string(obj, key, where);
    if (v.empty()) fail(where, ": field '", key, "' must not be empty");
    return v;
}

// A string as a JSON literal ("a\u0000b"): safe to put in an error message
// whatever it holds (control characters escaped, invalid UTF-8 replaced).
inline std::string shown(std::string_view text) {
    return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

// "" when `text` is valid UTF-8 (shortest forms, no surrogates, at most
// U+10FFFF) without control characters — C0 (U+0000–U+001F), DEL (U+007F),
// C1 (U+0080–U+009F) — line or paragraph separators (U+2028, U+2029) or
// bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
// U+2066–U+2069); else what is wrong and at which byte.
inline std::string printable_text_problem(std::string_view s) {
    auto at = [](const char* what, uint32_t cp, size_t i) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "holds %s U+%04X at byte %zu", what, static_cast<unsigned>(cp), i);
        return std::string(buf);
    };
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        uint32_t cp = 0;
        size_t n = 0;
        if (c < 0x80) cp = c, n = 1;
        else if (c >= 0xC2 && c <= 0xDF) cp = c & 0x1Fu, n = 2;
        else if (c >= 0xE0 && c <= 0xEF) cp = c & 0x0Fu, n = 3;
        else if (c >= 0xF0 && c <= 0xF4) cp = c & 0x07u, n = 4;
        bool valid = n > 0 && i + n <= s.size();
        for (size_t k = 1; valid && k < n; ++k) {
            const auto b = static_cast<unsigned char>(s[i + k]);
            valid = (b & 0xC0u) == 0x80u;
            cp = (cp << 6) | (b & 0x3Fu);
        }
        if (valid &&
            ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)))
            valid = false;
        if (!valid) return "is not valid UTF-8 (at byte " + std::to_string(i) + ")";
        if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) return at("the control character", cp, i);
        if (cp == 0x2028 || cp == 0x2029) return at("the line separator", cp, i);
        if (cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
            (cp >= 0x2066 && cp <= 0x2069))
            return at("the bidirectional control", cp, i);
        i += n;
    }
    return "";
}

// Refuses `text` (the value of field `key` in `where`) unless it is printable
// UTF-8 (printable_text_problem) of at most `max_bytes` bytes. The message
// names the file and field and never repeats the bytes themselves.
inline void check_printable_text(std::string_view text, std::string_view key, std::string_view where,
                                 size_t max_bytes) {
    std::string problem = printable_text_problem(text);
    if (problem.empty() && text.size() > max_bytes) problem = "is " + std::to_string(text.size()) + " bytes long";
    if (!problem.empty())
        fail(where, ": field '", key, "' must be printable UTF-8 text of at most ", max_bytes,
             " bytes (no control characters); it ", problem);
}

// json_string + check_printable_text.
inline std::string printable_string(const json& obj, std::string_view key, std::string_view where, size_t max_bytes) {
    std::string v = json_string(obj, key, where);
    check_printable_text(v, key, where, max_bytes);
    return v;
}

}  // namespace ppolab::feedback_detail
