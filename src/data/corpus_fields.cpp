#include "data/corpus_fields.h"

#include <algorithm>

#include "data/rubric.h"
#include "util/sha256.h"

namespace ppolab::corpus_detail {

bool is_ascii_digits(std::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_hex64(std::string_view s) {
    return s.size() == 64 &&
           std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

void expect_fields(const json& obj, const std::vector<std::string>& fields, const std::string& at) {
    for (const auto& f : fields) (void)json_field(obj, f, at);
    for (auto it = obj.begin(); it != obj.end(); ++it)
        if (std::find(fields.begin(), fields.end(), it.key()) == fields.end())
            fail(at, ": unexpected field '", it.key(), "'");
}

void append_line(std::string& out, const ordered_json& row) {
    out += row.dump();
    out += '\n';
}

std::string checked_prompt(const json& obj, const std::string& at) {
    std::string prompt = json_string(obj, "prompt", at);
    std::string sha = json_string(obj, "prompt_sha256", at);
    std::string got = sha256_hex(prompt);
    if (sha != got) fail(at, ": field 'prompt_sha256' is ", sha, " but the prompt hashes to ", got);
    return prompt;
}

int checked_action(const json& obj, const std::string& key, const std::string& at) {
    int64_t a = json_int(obj, key, at);
    if (a < 0 || a >= kActionCount) fail(at, ": field '", key, "' must be in [0, ", kActionCount - 1, "], got ", a);
    return static_cast<int>(a);
}

void check_unique(std::set<std::string>& seen, const std::string& id, const std::string& at) {
    if (id.empty()) fail(at, ": field 'id' is empty");
    if (!seen.insert(id).second) fail(at, ": duplicate id '", id, "'");
}

int id_suffix(const std::string& id, const std::string& marker, const std::string& at) {
    size_t pos = id.rfind(marker);
    if (pos == std::string::npos) fail(at, ": id '", id, "' lacks '", marker, "<n>'");
    std::string digits = id.substr(pos + marker.size());
    if (digits.size() > 4 || !is_ascii_digits(digits)) fail(at, ": id '", id, "' must end with '", marker, "<n>'");
    return std::stoi(digits);
}

}  // namespace ppolab::corpus_detail
