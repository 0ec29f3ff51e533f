// test_support.h — the helpers most test suites need, in one place: the
// message of the ppolab::Error a statement throws, the ppolab binary under
// test, and a shell command's exit code with its output.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

#include "util/error.h"

namespace ppolab::test {

// The message of the ppolab::Error that `f` throws, if it throws one.
inline std::optional<std::string> thrown_message(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return std::string(e.what());
    }
    return std::nullopt;
}

// The message, or "(no error)" (a test expecting an error then prints that).
inline std::string error_of(const std::function<void()>& f) { return thrown_message(f).value_or("(no error)"); }
// The message, or "" (for tests that also assert that nothing was thrown).
inline std::string message_of(const std::function<void()>& f) { return thrown_message(f).value_or(""); }

// The ppolab binary under test ($PPOLAB_BINARY, set by CTest).
inline std::string ppolab_binary() {
    const char* b = std::getenv("PPOLAB_BINARY");
    return b ? b : "build/bin/ppolab";
}

struct Output {
    int rc;           // exit status, -1 if the command did not exit normally
    std::string out;  // stdout and stderr, interleaved
};

inline Output run_shell(const std::string& cmd) {
    Output r{-1, ""};
    FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

}  // namespace ppolab::test
