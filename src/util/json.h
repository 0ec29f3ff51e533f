// json.h — nlohmann::json plus readers that name the file and field on error.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "util/fileio.h"

namespace ppolab {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Parses text; `where` (a file name) is named in the error. A key that
// appears twice in one object, at any depth, is an error naming the key and
// where the object is ("votes.json: key 'consent' appears twice in the
// object at votes[2]"): JSON leaves duplicates undefined and nlohmann would
// silently keep the last one.
json parse_json(std::string_view text, std::string_view where);
// read_input_file(path, kind) (bounded, regular files only), then parse_json.
json read_json_file(const fs::path& path, InputKind kind = InputKind::json);
// Pretty JSON (2 spaces, trailing newline), written atomically.
void write_json_atomic(const fs::path& path, const json& value, Overwrite mode = Overwrite::refuse);
void write_json_atomic(const fs::path& path, const ordered_json& value, Overwrite mode = Overwrite::refuse);

// Field access with errors like: "config.json: field 'hidden_size' must be an
// integer, got string".
const json& json_field(const json& obj, std::string_view key, std::string_view where);
int64_t json_int(const json& obj, std::string_view key, std::string_view where);
double json_number(const json& obj, std::string_view key, std::string_view where);
bool json_bool(const json& obj, std::string_view key, std::string_view where);
std::string json_string(const json& obj, std::string_view key, std::string_view where);

[[noreturn]] void fail_json_kind(std::string_view what, const char* detail);
// fn(), with any nlohmann exception it raises (a value of another kind than
// the reader expects: a number where an object was, an array for a string)
// turned into an Error naming `what` ("sft-scored.json: a value of another
// kind than ppolab writes there ([json.exception.type_error.302] …)"). For
// readers of records ppolab wrote itself and reads back, which a person or a
// script may have edited.
template <class F>
decltype(auto) reading_json(std::string_view what, F&& fn) {
    try {
        return fn();
    } catch (const json::exception& e) {
        fail_json_kind(what, e.what());
    }
}

}  // namespace ppolab
