#include "training/study_config.h"

#include <cmath>
#include <map>

#include "training/config_types.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ppolab {

const std::map<std::string, std::string>& embedded_presets();  // presets_embedded.cpp (generated)

std::vector<std::string> preset_names() {
    std::vector<std::string> names;
    for (const auto& [name, text] : embedded_presets()) names.push_back(name);
    return names;
}

static std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
    return out;
}

json preset_config(std::string_view name) {
    auto it = embedded_presets().find(std::string(name));
    if (it == embedded_presets().end()) fail("unknown preset '", name, "' (known presets: ", join(preset_names()), ")");
    const std::string where = "built-in preset '" + it->first + "'";
    json preset = parse_json(it->second, where);
    if (!preset.contains("overlay_on")) return preset;
    // An overlay: its base preset with the overlay's keys (its own name
    // and description among them) put on top, kinds checked as for --config.
    const json base_name = preset["overlay_on"];
    if (!base_name.is_string() || base_name == it->first)
        fail(where, ": 'overlay_on' must name another preset, got ", base_name.dump());
    preset.erase("overlay_on");
    json base = preset_config(base_name.get<std::string>());
    base["preset"] = it->first;  // the overlay's own "preset" must say the same
    return merge_config(base, preset, where);
}

static const char* kind_of(const json& v) {
    if (v.is_number()) return "number";
    return v.type_name();
}

static json merge_at(const json& base, const json& overlay, const std::string& path, const std::string& where) {
    const std::string at = path.empty() ? "(top level)" : "'" + path + "'";
    if (base.is_null() || overlay.is_null()) return overlay;
    if (base.is_object()) {
        if (!overlay.is_object()) fail(where, ": key ", at, " must be an object, got ", kind_of(overlay));
        json out = base;
        for (auto& [key, value] : overlay.items()) {
            const std::string sub = path.empty() ? key : path + "." + key;
            if (!base.contains(key)) {
                std::vector<std::string> known;
                for (auto& [k, v] : base.items()) known.push_back(k);
                fail(where, ": unknown config key '", sub, "' (keys", path.empty() ? "" : " under '" + path + "'", ": ",
                     join(known), ")");
            }
            out[key] = merge_at(base[key], value, sub, where);
        }
        return out;
    }
    if (base.is_number()) {
        if (!overlay.is_number())
            fail(where, ": key ", at, " must be a number, got ", kind_of(overlay), " ", overlay.dump());
        if (base.is_number_integer()) {
            // The same bound however the number is written (1e18 or
            // 1000000000000000000): kMaxConfigInteger, exact in a double.
            const bool too_big =
                overlay.is_number_unsigned() ? overlay.get<uint64_t>() > uint64_t(kMaxConfigInteger)
                : overlay.is_number_integer()
                    ? overlay.get<int64_t>() > kMaxConfigInteger || overlay.get<int64_t>() < -kMaxConfigInteger
                    : !(std::fabs(overlay.get<double>()) <= double(kMaxConfigInteger));
            if (overlay.is_number_float() && !too_big && overlay.get<double>() != std::floor(overlay.get<double>()))
                fail(where, ": key ", at, " must be an integer, got ", overlay.dump());
            if (too_big)
                fail(where, ": key ", at, " must be an integer in [-", kMaxConfigInteger, ", ", kMaxConfigInteger,
                     "] (2^53), got ", overlay.dump());
            if (overlay.is_number_float()) return json(static_cast<int64_t>(overlay.get<double>()));
            return overlay;
        }
        if (base.is_number_float() && !overlay.is_number_float()) return json(overlay.get<double>());
        return overlay;
    }
    if (base.type() != overlay.type())
        fail(where, ": key ", at, " must be a ", kind_of(base), ", got ", kind_of(overlay), " ", overlay.dump());
    return overlay;
}

json merge_config(const json& base, const json& overlay, const std::string& where) {
    if (!overlay.is_object()) fail(where, ": a config must be a JSON object, got ", overlay.type_name());
    if (overlay.contains("preset") && base.contains("preset") && overlay["preset"] != base["preset"])
        fail(where, ": field 'preset' is ", overlay["preset"].dump(), " but the preset in use is ",
             base["preset"].dump(), " (choose the preset with --preset)");
    return merge_at(base, overlay, "", where);
}

// A string holding a NUL byte (JSON's \u0000) would be cut short wherever
// it is passed on as C text (a step's arguments, a tokenizer, a file name).
static void refuse_nul_strings(const json& v, const std::string& where) {
    if (v.is_string() && v.get_ref<const std::string&>().find('\0') != std::string::npos)
        fail(where, ": a string holds a NUL byte (\\u0000), which no config value may hold");
    if (v.is_structured())
        for (const json& x : v) refuse_nul_strings(x, where);
}

void set_config_value(json& config, std::string_view assignment) {
    const std::string where = "--set " + std::string(assignment);
    const size_t eq = assignment.find('=');
    if (eq == std::string_view::npos || eq == 0) fail(where, ": expected key=value (e.g. sft.lr=1e-3)");
    const std::string path(assignment.substr(0, eq));
    const std::string text(assignment.substr(eq + 1));
    json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) value = text;  // not JSON: the text itself
    else value = parse_json(text, where);    // JSON: a repeated key is an error, as in every JSON input
    // A number that is not zero but rounds to it (1e-400) is refused, not read as 0.
    if (value.is_number_float() && value.get<double>() == 0.0) {
        const std::string mantissa = text.substr(0, text.find_first_of("eE"));
        if (mantissa.find_first_of("123456789") != std::string::npos)
            fail(where, ": ", text, " is too small for a double (it would be read as 0)");
    }
    refuse_nul_strings(value, where);
    // Build the nested overlay {"a": {"b": value}} and merge it.
    json overlay = value;
    size_t end = path.size();
    while (true) {
        const size_t dot = path.rfind('.', end - 1);
        const size_t start = dot == std::string::npos ? 0 : dot + 1;
        const std::string key = path.substr(start, end - start);
        if (key.empty()) fail(where, ": empty key in '", path, "'");
        overlay = json{{key, overlay}};
        if (dot == std::string::npos) break;
        end = dot;
    }
    config = merge_config(config, overlay, where);
}

json effective_config(std::string_view preset, const std::vector<fs::path>& config_files,
                      const std::vector<std::string>& sets) {
    json config = preset_config(preset);
    for (const fs::path& file : config_files) {
        const json overlay = read_json_file(file, InputKind::config);
        refuse_nul_strings(overlay, file.string());
        config = merge_config(config, overlay, file.string());
    }
    for (const std::string& s : sets) set_config_value(config, s);
    validate_study_config(config);
    return config;
}

void validate_study_config(const json& c) { (void)StudyConfig::parse(c); }

std::string config_sha256(const json& config) {
    // How often checkpoints are written changes no number of the study (a
    // run may be resumed with another frequency), nor how many replicates a
    // set has (each chain is named by its study.seed).
    if (!config.is_object() || (!config.contains("checkpoint") && !config.contains("replicates")))
        return sha256_hex(config.dump());
    json numbers = config;
    numbers.erase("checkpoint");
    numbers.erase("replicates");
    return sha256_hex(numbers.dump());
}

json config_identity(const json& config) {
    return json{{"preset", config_string(config, "preset")},
                {"corpus_revision", config_string(config, "corpus.revision")},
                {"study_revision", config_string(config, "corpus.study_revision")},
                {"numerics", config_string(config, "engine.numerics")},
                {"config_sha256", config_sha256(config)}};
}

const json& config_at(const json& config, std::string_view path) {
    const json* node = &config;
    size_t start = 0;
    while (true) {
        const size_t dot = path.find('.', start);
        const std::string key(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
        if (!node->is_object() || !node->contains(key))
            fail("config: missing key '", path.substr(0, dot == std::string_view::npos ? path.size() : dot), "'");
        node = &(*node)[key];
        if (dot == std::string_view::npos) return *node;
        start = dot + 1;
    }
}

int64_t config_int(const json& config, std::string_view path) {
    const json& v = config_at(config, path);
    if (!v.is_number_integer()) fail("config: '", path, "' must be an integer, got ", kind_of(v), " ", v.dump());
    // A key whose preset value is null takes any value: bound it here too
    // (a number above 2^63 would otherwise wrap to a negative one).
    if ((v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMaxConfigInteger)) ||
        (!v.is_number_unsigned() && (v.get<int64_t>() > kMaxConfigInteger || v.get<int64_t>() < -kMaxConfigInteger)))
        fail("config: '", path, "' must be an integer in [-", kMaxConfigInteger, ", ", kMaxConfigInteger,
             "] (2^53), got ", v.dump());
    return v.get<int64_t>();
}

double config_number(const json& config, std::string_view path) {
    const json& v = config_at(config, path);
    if (!v.is_number()) fail("config: '", path, "' must be a number, got ", kind_of(v), " ", v.dump());
    return v.get<double>();
}

bool config_bool(const json& config, std::string_view path) {
    const json& v = config_at(config, path);
    if (!v.is_boolean()) fail("config: '", path, "' must be true or false, got ", kind_of(v), " ", v.dump());
    return v.get<bool>();
}

std::string config_string(const json& config, std::string_view path) {
    const json& v = config_at(config, path);
    if (!v.is_string()) fail("config: '", path, "' must be a string, got ", kind_of(v), " ", v.dump());
    return v.get<std::string>();
}

std::optional<int64_t> config_optional_int(const json& config, std::string_view path) {
    if (config_at(config, path).is_null()) return std::nullopt;
    return config_int(config, path);
}

}  // namespace ppolab
