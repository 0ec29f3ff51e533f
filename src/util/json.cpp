#include "util/json.h"

#include <functional>
#include <set>
#include <vector>

#include "util/error.h"

namespace ppolab {

namespace {

// Follows the parser's events to refuse a repeated key in any object. One
// frame per open object or array: its keys so far (objects) or the number
// of elements begun (arrays), and the last key or index, for the location.
class DuplicateKeyGuard {
public:
    explicit DuplicateKeyGuard(std::string_view where) : where_(where) {}

    bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
        switch (event) {
            case json::parse_event_t::object_start:
                begin_element();
                frames_.push_back({true, {}, {}, 0});
                break;
            case json::parse_event_t::array_start:
                begin_element();
                frames_.push_back({false, {}, {}, 0});
                break;
            case json::parse_event_t::object_end:
            case json::parse_event_t::array_end:
                if (!frames_.empty()) frames_.pop_back();
                break;
            case json::parse_event_t::key: {
                if (frames_.empty()) break;
                Frame& f = frames_.back();
                const std::string& key = parsed.get_ref<const std::string&>();
                if (!f.keys.insert(key).second)
                    fail(where_, ": key '", key, "' appears twice in the object at ", location(),
                         " (each key may appear once)");
                f.last_key = key;
                break;
            }
            case json::parse_event_t::value: begin_element(); break;
        }
        return true;
    }

private:
    struct Frame {
        bool object;
        std::set<std::string> keys;
        std::string last_key;
        size_t elements;  // arrays: elements begun
    };

    void begin_element() {
        if (!frames_.empty() && !frames_.back().object) ++frames_.back().elements;
    }
    // "votes[2]" for the innermost object (the last frame), "the top level" for the root.
    std::string location() const {
        std::string out;
        for (size_t i = 0; i + 1 < frames_.size(); ++i) {
            const Frame& f = frames_[i];
            if (f.object) out += (out.empty() ? "" : ".") + f.last_key;
            else out += "[" + std::to_string(f.elements - 1) + "]";
        }
        return out.empty() ? "the top level" : "'" + out + "'";
    }

    std::string_view where_;
    std::vector<Frame> frames_;
};

}  // namespace

json parse_json(std::string_view text, std::string_view where) {
    DuplicateKeyGuard guard(where);
    json value = json::parse(text.begin(), text.end(), json::parser_callback_t(std::ref(guard)),
                             /*allow_exceptions=*/false);
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

json read_json_file(const fs::path& path, InputKind kind) {
    return parse_json(read_input_file(path, kind), path.string());
}

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

void fail_json_kind(std::string_view what, const char* detail) {
    fail(what, ": a value of another kind than ppolab writes there (", detail,
         "); the file was edited: restore it or run the step that writes it again");
}

}  // namespace ppolab
