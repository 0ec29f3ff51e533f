// cmd_config.cpp — `ppolab config`: print the effective study configuration,
// or explain its keys (meaning, unit, check, each preset's default).
#include <algorithm>
#include <cstdio>

#include "cli/command.h"
#include "training/config_types.h"
#include "training/study_config.h"
#include "util/error.h"

namespace ppolab::cli {

namespace {

// Levenshtein distance, for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

// The keys nearest `key`: within a third of its length, or the same last part.
std::vector<std::string> close_keys(const std::string& key, const std::vector<ConfigFieldDoc>& docs) {
    std::vector<std::pair<size_t, std::string>> scored;
    const std::string tail = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
    for (const ConfigFieldDoc& d : docs) {
        const size_t dist = edit_distance(key, d.key);
        const std::string d_tail = d.key.substr(d.key.rfind('.') == std::string::npos ? 0 : d.key.rfind('.') + 1);
        if (dist <= std::max<size_t>(2, key.size() / 3) || d_tail == tail) scored.emplace_back(dist, d.key);
    }
    std::sort(scored.begin(), scored.end());
    std::vector<std::string> out;
    for (size_t i = 0; i < scored.size() && i < 5; ++i) out.push_back(scored[i].second);
    return out;
}

void print_key_line(const ConfigFieldDoc& d) {
    std::printf("  %-34s %s [%s]\n", d.key.c_str(), d.meaning.c_str(), d.unit.c_str());
}

// One key: meaning, type and check, unit, and its value in every preset.
void explain_key(const ConfigFieldDoc& d) {
    std::printf("%s: %s\n", d.key.c_str(), d.meaning.c_str());
    std::printf("  type:    %s%s\n", d.type.c_str(), d.check.empty() ? "" : (", " + d.check).c_str());
    std::printf("  unit:    %s\n", d.unit.c_str());
    std::printf("  default:\n");
    for (const std::string& preset : preset_names())
        std::printf("    %-8s %s\n", preset.c_str(), config_at(preset_config(preset), d.key).dump().c_str());
}

int explain(const std::vector<std::string>& keys) {
    const std::vector<ConfigFieldDoc> docs = config_field_docs();
    const std::vector<ConfigSectionDoc> sections = config_section_docs();
    if (keys.size() > 1) fail("config --explain: one key at a time, got ", keys.size());
    if (keys.empty()) {
        std::printf("top level\n");
        for (const ConfigFieldDoc& d : docs)
            if (d.key.find('.') == std::string::npos) print_key_line(d);
        for (const ConfigSectionDoc& s : sections) std::printf("%-10s %s\n", s.name.c_str(), s.meaning.c_str());
        std::printf("(ppolab config --explain SECTION lists its keys; --explain KEY explains one)\n");
        return 0;
    }
    const std::string& key = keys[0];
    for (const ConfigSectionDoc& s : sections) {
        if (s.name != key) continue;
        std::printf("%s: %s\n", s.name.c_str(), s.meaning.c_str());
        for (const ConfigFieldDoc& d : docs)
            if (d.key.rfind(key + ".", 0) == 0) print_key_line(d);
        return 0;
    }
    for (const ConfigFieldDoc& d : docs)
        if (d.key == key) {
            explain_key(d);
            return 0;
        }
    std::string near;
    for (const std::string& k : close_keys(key, docs)) near += (near.empty() ? "" : ", ") + k;
    fail("config --explain: unknown config key '", key, "'",
         near.empty() ? std::string(" (ppolab config --explain lists the sections)") : " (close: " + near + ")");
}

}  // namespace

static Command config_cmd(
    "config",
    "config [--preset seed|tiny|generic] [--config FILE]... [--set key=value]... [--identity] [--list]\n"
    "                              print the effective config (preset, then files, then --set) as JSON\n"
    "  config --explain [SECTION|KEY]\n"
    "                              a key's meaning, type, unit and default in every preset; a section's keys",
    {"identity", "list", "explain"},
    [](const Args& args) {
        args.allow_only({"preset", "config", "set", "identity", "list", "explain"});
        if (args.has("explain")) return explain(args.positional());
        if (!args.positional().empty()) fail("config: unexpected argument '", args.positional()[0], "'");
        if (args.has("list")) {
            for (const std::string& name : preset_names()) std::printf("%s\n", name.c_str());
            return 0;
        }
        std::vector<fs::path> files;
        for (const std::string& f : args.all("config")) files.emplace_back(f);
        const json config = effective_config(args.get("preset", kDefaultPreset), files, args.all("set"));
        const json out = args.has("identity") ? config_identity(config) : config;
        std::printf("%s\n", out.dump(2).c_str());
        return 0;
    },
    "--explain KEY (\"ppo.beta\") prints what the key means, its type and allowed values, its unit and its value\n"
    "in each preset; --explain SECTION (\"ppo\") lists the section's keys; --explain alone lists the sections.\n"
    "An unknown key is an error naming it and the closest keys.\n");

}  // namespace ppolab::cli
