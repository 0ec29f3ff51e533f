// main.cpp — `ppolab <command> [options]`: dispatch to the registered commands.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "cli/command.h"
#include "util/error.h"

using namespace ppolab;

static void print_help() {
    std::printf(
        "ppolab — RLHF laboratory on Qwen2-architecture models (SFT, Bradley-Terry judge, PPO)\n\n"
        "usage: ppolab <command> [options]     ppolab <command> --help\n\ncommands:\n");
    for (const auto& [name, info] : cli::registry()) std::printf("  %s\n", info.usage.c_str());
}

int main(int argc, char** argv) {
    // OpenMP threads that spin at barriers steal the second core from
    // whatever else runs (measured: a tiny SFT step 8x slower next to one
    // busy process). libgomp reads OMP_WAIT_POLICY only when it loads, so the
    // default is set here and the program re-executes itself once; a value
    // the user set is left alone.
    if (!std::getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
        execv("/proc/self/exe", argv);  // returns only on failure: carry on as is
    }
    std::vector<std::string> rest(argv + 1, argv + argc);
    if (rest.empty() || rest[0] == "--help" || rest[0] == "-h" || rest[0] == "help") {
        print_help();
        return rest.empty() ? 2 : 0;
    }
    auto& commands = cli::registry();
    auto it = commands.find(rest[0]);
    if (it == commands.end()) {
        std::fprintf(stderr, "ppolab: unknown command '%s' (see ppolab --help)\n", rest[0].c_str());
        return 2;
    }
    std::vector<std::string> args(rest.begin() + 1, rest.end());
    for (const auto& a : args)
        if (a == "--help" || a == "-h") {
            std::printf("usage: ppolab %s\n", it->second.usage.c_str());
            return 0;
        }
    try {
        return it->second.run(cli::Args(args, it->second.flags));
    } catch (const Error& e) {
        std::fprintf(stderr, "ppolab %s: error: %s\n", rest[0].c_str(), e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ppolab %s: unexpected error: %s\n", rest[0].c_str(), e.what());
        return 1;
    }
}
