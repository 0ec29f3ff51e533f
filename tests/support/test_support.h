// test_support.h — the two helpers most test suites need, in one place:
// the message of the ppolab::Error a statement throws, and a shell
// command's exit code with its output (stdout and stderr together).
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <functional>
#include <string>

#include "util/error.h"

namespace ppolab::test {

// What `f` throws as ppolab::Error, or "(no error)" (a test that expects an
// error then fails on the message it prints).
inline std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
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
