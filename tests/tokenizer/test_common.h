// test_common.h — helpers shared by the tokenizer tests.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/sha256.h"

namespace ppolab::test {

inline fs::path qwen_dir() { return qwen_model_dir(); }

inline fs::path temp_dir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("ppolab_test_tok_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

inline std::vector<json> read_jsonl(const fs::path& path) {
    std::vector<json> rows;
    std::ifstream in(path);
    if (!in) ADD_FAILURE() << "cannot open " << path;
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) rows.push_back(parse_json(line, path.string()));
    return rows;
}

inline std::string python() {
    const char* p = std::getenv("PPOLAB_PYTHON");
    return p ? p : "python3";
}

// The message of the Error that f() throws, or "" (and a failure) if none.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected an Error";
    return "";
}

}  // namespace ppolab::test
