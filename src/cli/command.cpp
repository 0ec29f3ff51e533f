#include "cli/command.h"

#include <algorithm>

#include "util/error.h"

namespace ppolab::cli {

Args::Args(std::vector<std::string> argv, std::vector<std::string> flags) {
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (a.rfind("--", 0) == 0 && a.size() > 2) {
            std::string key = a.substr(2);
            auto eq = key.find('=');
            if (eq != std::string::npos) {
                values_[key.substr(0, eq)].push_back(key.substr(eq + 1));
            } else if (std::find(flags.begin(), flags.end(), key) != flags.end()) {
                values_[key].push_back("true");
            } else {
                if (i + 1 >= argv.size()) fail("option --", key, " needs a value");
                values_[key].push_back(argv[++i]);
            }
        } else {
            positional_.push_back(a);
        }
    }
}

bool Args::has(const std::string& key) const { return values_.count(key) != 0; }

std::string Args::get(const std::string& key) const {
    auto it = values_.find(key);
    if (it == values_.end()) fail("missing required option --", key);
    if (it->second.size() != 1) fail("option --", key, " given more than once");
    return it->second.front();
}

std::string Args::get(const std::string& key, const std::string& fallback) const {
    return has(key) ? get(key) : fallback;
}

int64_t Args::get_int(const std::string& key, int64_t fallback) const {
    if (!has(key)) return fallback;
    std::string v = get(key);
    try {
        size_t used = 0;
        long long n = std::stoll(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
        return n;
    } catch (const std::exception&) {
        fail("option --", key, " expects an integer, got '", v, "'");
    }
}

std::vector<std::string> Args::all(const std::string& key) const {
    auto it = values_.find(key);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
}

void Args::allow_only(const std::vector<std::string>& known) const {
    for (const auto& [key, _] : values_)
        if (std::find(known.begin(), known.end(), key) == known.end()) fail("unknown option --", key, " (see --help)");
}

std::map<std::string, CommandInfo>& registry() {
    static std::map<std::string, CommandInfo> commands;
    return commands;
}

Command::Command(std::string name, std::string usage, std::vector<std::string> flags, Run run, std::string help) {
    registry()[std::move(name)] = CommandInfo{std::move(usage), std::move(flags), std::move(run), std::move(help)};
}

static const std::vector<std::string> kDataParallel = {"sft",      "reward",           "dpo", "ppo",    "rloo", "grpo",
                                                       "evaluate", "overoptimisation", "run", "version"};

bool data_parallel(const std::string& command) {
    return std::find(kDataParallel.begin(), kDataParallel.end(), command) != kDataParallel.end();
}

std::string data_parallel_commands() {
    std::string out;
    for (const std::string& c : kDataParallel) out += (out.empty() ? "" : ", ") + c;
    return out;
}

}  // namespace ppolab::cli
