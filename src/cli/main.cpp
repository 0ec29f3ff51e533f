// main.cpp — `ppolab <command> [options]`: dispatch to the registered commands.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/command.h"
#include "kernels/matmul_backend.h"
#include "kernels/numerics.h"
#include "parallel/world.h"
#include "util/error.h"

using namespace ppolab;

static void print_help() {
    std::printf(
        "ppolab — RLHF laboratory on Qwen2-architecture models (SFT, Bradley-Terry judge, PPO)\n\n"
        "usage: ppolab <command> [options]     ppolab <command> --help\n\ncommands:\n");
    for (const auto& [name, info] : cli::registry()) std::printf("  %s\n", info.usage.c_str());
}

int main(int argc, char** argv) {
    // How long an OpenMP thread spins at a barrier before it sleeps decides
    // the speed on 2 cores. Spinning forever (OMP_WAIT_POLICY=ACTIVE, or
    // libgomp's default of 300 000 spins) steals the second core from
    // whatever else runs (a tiny SFT step 8x slower next to one busy
    // process); sleeping at once (PASSIVE) pays a futex wake in each of the
    // ~170 parallel regions of a decode step. A short spin is best in both
    // cases (BENCHMARKS.md, 0.5B shape, 2 threads): decode 33 tok/s quiet
    // (PASSIVE 24, ACTIVE 36) and 16.7 tok/s next to two busy processes
    // (PASSIVE 10.7). libgomp reads its settings only when it loads, so the
    // default is set here and the program re-executes itself once; a value
    // the user set (either variable) is left alone.
    if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
        setenv("GOMP_SPINCOUNT", "10000", 1);
        execv("/proc/self/exe", argv);  // returns only on failure: carry on as is
    }
    // Under `mpirun -np W` every rank joins the job here (parallel/world.h);
    // rank 0 speaks and writes, the others compute in silence.
    try {
        parallel::init(&argc, &argv);
    } catch (const Error& e) {
        std::fprintf(stderr, "ppolab: error: %s\n", e.what());
        return 1;
    }
    const parallel::World& world = parallel::world();
    if (!world.writer()) {
        setenv("PPOLAB_QUIET", "1", 1);
        if (!std::freopen("/dev/null", "w", stdout)) std::perror("ppolab: /dev/null");
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
            std::printf("usage: ppolab %s\n%s", it->second.usage.c_str(), it->second.help.c_str());
            return 0;
        }
    // A failing rank ends the whole job (the others would wait for it in a collective).
    auto failed = [&](const char* kind, const char* what) {
        const std::string who =
            world.size > 1 ? " (rank " + std::to_string(world.rank) + " of " + std::to_string(world.size) + ")" : "";
        std::fprintf(stderr, "ppolab %s%s: %s: %s\n", rest[0].c_str(), who.c_str(), kind, what);
        if (world.size > 1) parallel::abort_job(1);
        parallel::finalize();
        return 1;
    };
    try {
        numerics_check_environment();  // a bad PPOLAB_ISA fails here, by name
        bf16_products_native();        // a bad PPOLAB_BF16_PRODUCTS fails here, not inside a product
        if (world.size > 1) {          // before any collective: the same command line on every rank
            std::string joined;
            for (const std::string& a : args) joined += (joined.empty() ? "" : " ") + a;
            parallel::agree("before " + rest[0], {{"command", rest[0]}, {"arguments", joined}});
        }
        if (world.size > 1 && !cli::data_parallel(rest[0]))
            fail("ppolab ", rest[0], " runs as one process; under mpirun (", world.size,
                 " ranks) only the data-parallel commands run: ", cli::data_parallel_commands());
        const int rc = it->second.run(cli::Args(args, it->second.flags));
        parallel::finalize();
        return rc;
    } catch (const Error& e) {
        return failed("error", e.what());
    } catch (const std::filesystem::filesystem_error& e) {
        // A path the system refuses (a symlink loop, a name over 255 bytes, a
        // permission) wherever it was met: the path and the system's reason.
        std::string what = "'" + e.path1().string() + "'";
        if (!e.path2().empty()) what += " and '" + e.path2().string() + "'";
        what += ": " + e.code().message();
        return failed("error", what.c_str());
    } catch (const std::exception& e) {
        return failed("unexpected error", e.what());
    }
}
