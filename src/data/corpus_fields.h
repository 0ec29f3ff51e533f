// corpus_fields.h — the row and field checks shared by the corpus files
// (corpus_config, corpus_audit, corpus_write, corpus_read); internal to data/.
#pragma once
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"
#include "util/json.h"

namespace ppolab::corpus_detail {

// True when `text` is non-empty and every byte is an ASCII digit '0'..'9'.
// (std::isdigit on a plain char is undefined for the negative chars of any
// non-ASCII byte, so input text is never passed to it.)
bool is_ascii_digits(std::string_view text);
// True for exactly 64 lowercase hex digits.
bool is_hex64(std::string_view text);

// `obj` has every one of `fields` and no other key (Error naming `at`).
void expect_fields(const json& obj, const std::vector<std::string>& fields, const std::string& at);

// Appends one JSONL line: the row's dump and '\n'.
void append_line(std::string& out, const ordered_json& row);

// Calls fn(object, "file:line") for every line; the file must end in a
// newline and contain no blank line.
template <typename Fn>
void for_each_jsonl(std::string_view text, std::string_view where, Fn fn) {
    if (!text.empty() && text.back() != '\n')
        fail(where, ": the last line does not end with a newline (truncated file?)");
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

// Field 'prompt', checked against its field 'prompt_sha256'.
std::string checked_prompt(const json& obj, const std::string& at);
// Field `key`, an action index in [0, kActionCount).
int checked_action(const json& obj, const std::string& key, const std::string& at);
// Inserts a non-empty id into `seen`; Error on an empty or repeated one.
void check_unique(std::set<std::string>& seen, const std::string& id, const std::string& at);
// Suffix number of an id like "OH012-P3" after `marker` ("-P", "-RL"):
// 1 to 4 ASCII digits.
int id_suffix(const std::string& id, const std::string& marker, const std::string& at);

}  // namespace ppolab::corpus_detail
