// cmd_config.cpp — `ppolab config`: print the effective study configuration.
#include <cstdio>

#include "cli/command.h"
#include "training/study_config.h"

namespace ppolab::cli {

static Command config_cmd(
    "config",
    "config [--preset seed|tiny|generic] [--config FILE]... [--set key=value]... [--identity] [--list]\n"
    "                              print the effective config (preset, then files, then --set) as JSON",
    {"identity", "list"}, [](const Args& args) {
        args.allow_only({"preset", "config", "set", "identity", "list"});
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
    });

}  // namespace ppolab::cli
