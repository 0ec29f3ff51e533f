#include "util/json.h"

#include "util/error.h"

namespace ppolab {

json parse_json(std::string_view text, std::string_view where) {
    json value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
        // Parse again with exceptions to get the byte position in the message.
        try {
            json again = json::parse(text.begin(), text.end());
            (void)again;
        } catch (const json::exception& e) {  // parse_error, or out_of_range for a number overflow
            fail(where, ": not valid JSON (", e.what(), ")");
        }
        fail(where, ": not valid JSON");
    }
    return value;
}

json read_json_file(const fs::path& path) { return parse_json(read_file(path), path.string()); }

void write_json_atomic(const fs::path& path, const json& value, Overwrite mode) {
    write_file_atomic(path, value.dump(2) + "\n", mode);
}

void write_json_atomic(const fs::path& path, const ordered_json& value, Overwrite mode) {
    write_file_atomic(path, value.dump(2) + "\n", mode);
}

const json& json_field(const json& obj, std::string_view key, std::string_view where) {
    if (!obj.is_object()) fail(where, ": expected a JSON object, got ", obj.type_name());
    auto it = obj.find(key);
    if (it == obj.end()) fail(where, ": missing field '", key, "'");
    return *it;
}

int64_t json_int(const json& obj, std::string_view key, std::string_view where) {
    const json& v = json_field(obj, key, where);
    if (!v.is_number_integer()) fail(where, ": field '", key, "' must be an integer, got ", v.type_name());
    return v.get<int64_t>();
}

double json_number(const json& obj, std::string_view key, std::string_view where) {
    const json& v = json_field(obj, key, where);
    if (!v.is_number()) fail(where, ": field '", key, "' must be a number, got ", v.type_name());
    return v.get<double>();
}

bool json_bool(const json& obj, std::string_view key, std::string_view where) {
    const json& v = json_field(obj, key, where);
    if (!v.is_boolean()) fail(where, ": field '", key, "' must be true or false, got ", v.type_name());
    return v.get<bool>();
}

std::string json_string(const json& obj, std::string_view key, std::string_view where) {
    const json& v = json_field(obj, key, where);
    if (!v.is_string()) fail(where, ": field '", key, "' must be a string, got ", v.type_name());
    return v.get<std::string>();
}

}  // namespace ppolab
