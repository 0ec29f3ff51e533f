// command.h — the subcommand registry and a small argument parser.
//
// Each cmd_*.cpp file registers its subcommands with a static Command
// object, so adding a command touches exactly one file.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ppolab::cli {

// Parsed "--key value", "--flag" and positional arguments. Options that may
// repeat (like --set) keep every value in order.
class Args {
public:
    Args(std::vector<std::string> argv, std::vector<std::string> flags);
    bool has(const std::string& key) const;
    std::string get(const std::string& key) const;  // Error if missing
    std::string get(const std::string& key, const std::string& fallback) const;
    int64_t get_int(const std::string& key, int64_t fallback) const;
    std::vector<std::string> all(const std::string& key) const;
    const std::vector<std::string>& positional() const { return positional_; }
    // Error naming the first option not in `known`.
    void allow_only(const std::vector<std::string>& known) const;

private:
    std::map<std::string, std::vector<std::string>> values_;
    std::vector<std::string> positional_;
};

struct Command {
    using Run = std::function<int(const Args&)>;
    // `flags` are the options that take no value (e.g. "greedy", "json");
    // `help`, when given, is printed under the usage by `ppolab CMD --help`.
    Command(std::string name, std::string usage, std::vector<std::string> flags, Run run, std::string help = "");
};

struct CommandInfo {
    std::string usage;
    std::vector<std::string> flags;
    Command::Run run;
    std::string help;
};
std::map<std::string, CommandInfo>& registry();

// The commands that run under `mpirun -np W` with W > 1 (SPEC §13): the
// data-parallel stages, and `version` (which says the world); every other
// command runs as one process and is refused there.
bool data_parallel(const std::string& command);
std::string data_parallel_commands();  // "sft, reward, dpo, ppo, rloo, grpo, evaluate, overoptimisation, run, version"

}  // namespace ppolab::cli
