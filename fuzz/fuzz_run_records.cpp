// fuzz_run_records.cpp — libFuzzer target for a study's own records read
// back (training/run_records.h): the input as run-state.json, as a chain's
// stage record (sft/continuous.json) and as findings.json.
//
// Any input must either pass or be refused with ppolab::Error; no other
// exception (a JSON type error, a filesystem error) may escape.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "training/run_records.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

namespace {

namespace fs = std::filesystem;

// One run folder for the process, removed at exit.
const fs::path& folder() {
    static const fs::path dir = [] {
        std::string tmpl = (fs::temp_directory_path() / "ppolab-fuzz-run-records.XXXXXX").string();
        if (!::mkdtemp(tmpl.data())) std::abort();
        fs::create_directories(fs::path(tmpl) / "sft");
        std::atexit([] {
            std::error_code ec;
            fs::remove_all(folder(), ec);
        });
        return fs::path(tmpl);
    }();
    return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace ppolab;
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        validate_run_state(parse_json(bytes, "run-state.json"), "run-state.json");
    } catch (const Error&) {}
    const fs::path run = folder();
    const ChainExpectation chain{RunLayout{run},
                                 json{{"config_sha256", std::string(64, '0')}, {"numerics", "canonical"}}, "the run"};
    for (const fs::path& file : {run / "sft" / "continuous.json", run / "findings.json"}) {
        std::error_code ec;
        fs::remove(run / "sft" / "continuous.json", ec);
        fs::remove(run / "findings.json", ec);
        write_file_atomic(file, bytes);
        try {
            check_run_records(run / "findings.json", {chain});
        } catch (const Error&) {}
    }
    return 0;
}
