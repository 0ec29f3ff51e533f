// fields.h — field checks shared by the feedback file parsers: exact field
// sets (a misspelt key is an error, not a silently missing value) and typed
// reads that name the file and field.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"
#include "util/json.h"

namespace ppolab::feedback_detail {

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

}  // namespace ppolab::feedback_detail
