// test_support.h — the helpers most test suites need, in one place: the
// message of the ppolab::Error a statement throws, the ppolab binary under
// test, the committed Qwen2.5 tokenizer folder, and a shell command's (or a
// ppolab command line's) exit code with its output.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// The source tree ($PPOLAB_SOURCE_DIR, set by CTest; else the working directory).
inline std::filesystem::path source_dir() {
    const char* s = std::getenv("PPOLAB_SOURCE_DIR");
    return s && *s ? std::filesystem::path(s) : std::filesystem::current_path();
}

// The real Qwen2.5-0.5B-Instruct tokenizer, config, generation config and chat
// template, committed in the repository (models/qwen2.5-0.5b-instruct/README.md
// says where they came from). The tests that use it fail, never skip, without it.
inline std::filesystem::path qwen_model_dir() { return source_dir() / "models" / "qwen2.5-0.5b-instruct"; }

// Sets an environment variable for one scope, restoring what was there.
struct ScopedEnv {
    std::string name;
    std::optional<std::string> before;
    ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
        if (const char* v = std::getenv(name.c_str())) before = v;
        ::setenv(name.c_str(), value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (before) ::setenv(name.c_str(), before->c_str(), 1);
        else ::unsetenv(name.c_str());
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
};

struct Output {
    int rc;           // exit status, -1 if the command did not exit normally
    std::string out;  // stdout and stderr, interleaved
};

// stderr joins the output, or (merge_stderr false) goes to the test's log.
inline Output run_shell(const std::string& cmd, bool merge_stderr = true) {
    Output r{-1, ""};
    FILE* p = ::popen((merge_stderr ? cmd + " 2>&1" : cmd).c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

// `ppolab ARGS` (stderr joined): its exit code, its output in `out`. The
// binary is $PPOLAB_BINARY, which CTest sets; without it the test fails.
inline int run_cli(const std::string& args, std::string& out) {
    const char* bin = std::getenv("PPOLAB_BINARY");
    if (!bin) {
        ADD_FAILURE() << "PPOLAB_BINARY is not set (run through ctest)";
        out.clear();
        return -1;
    }
    Output o = run_shell(std::string(bin) + " " + args);
    out = std::move(o.out);
    return o.rc;
}

// The steps of the smallest run that has a judge: prepare, a 2-update
// pretraining, one SFT and one judge update (each a ppolab command and its
// own options; the caller adds --run and anything else).
inline const std::vector<std::string>& micro_judge_run_steps() {
    static const std::vector<std::string> steps = {
        "prepare",
        "pretrain --set max_updates=2 --set pretrain.conversations=400 --set pretrain.prose=50"
        " --set pretrain.check_prompts=0",
        "sft --set max_updates=1", "reward --set max_updates=1"};
    return steps;
}

}  // namespace ppolab::test
