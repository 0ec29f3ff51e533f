// progress.h — a progress bar on stderr for long stages.
//
// On a terminal it redraws one line; otherwise (logs, CI) it prints a line
// at most every 10 % so logs stay short. Set PPOLAB_QUIET=1 to silence it.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace ppolab {

class Progress {
public:
    // A prefix for every progress line of this process (`ppolab run` sets
    // "step 4/18 sft continuous" before each step); empty: none.
    static void set_context(std::string context);

    Progress(std::string label, int64_t total);
    ~Progress();
    void update(int64_t done, const std::string& status = "");
    void finish(const std::string& status = "");

private:
    std::string label_;
    int64_t total_;
    int64_t last_decile_ = -1;
    bool tty_;
    bool quiet_;
    bool finished_ = false;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace ppolab
