// oracle_util.h — running a Python oracle from a test ($PPOLAB_PYTHON).
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/test_support.h"
#include "util/fileio.h"
#include "util/json.h"

namespace ppolab::test {

inline std::string python() {
    const char* p = std::getenv("PPOLAB_PYTHON");
    return p && *p ? p : "/usr/bin/python3";
}

inline fs::path fresh_temp_dir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("ppolab_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

// Runs `python script args…`; fails the test (throws) if it does not exit 0.
inline void run_python(const fs::path& script, const std::string& args) {
    std::string cmd = "'" + python() + "' '" + script.string() + "' " + args;
    int rc = std::system(cmd.c_str());
    if (rc != 0) throw std::runtime_error("oracle failed (exit " + std::to_string(rc) + "): " + cmd);
}

}  // namespace ppolab::test
