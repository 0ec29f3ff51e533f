#include "util/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ppolab {

namespace {
std::string& context() {
    static std::string c;
    return c;
}
std::string prefix() { return context().empty() ? std::string() : "[" + context() + "] "; }
}  // namespace

void Progress::set_context(std::string c) { context() = std::move(c); }

Progress::Progress(std::string label, int64_t total)
    : label_(std::move(label)),
      total_(total > 0 ? total : 1),
      tty_(::isatty(STDERR_FILENO) != 0),
      quiet_(std::getenv("PPOLAB_QUIET") && std::strcmp(std::getenv("PPOLAB_QUIET"), "0") != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
    if (!finished_ && tty_ && !quiet_) std::fputc('\n', stderr);
}

void Progress::update(int64_t done, const std::string& status) {
    if (quiet_) return;
    auto now = std::chrono::steady_clock::now();
    double secs = std::chrono::duration<double>(now - start_).count();
    double frac = static_cast<double>(done) / static_cast<double>(total_);
    if (tty_) {
        if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
        last_draw_ = now;
        const int width = 30;
        int filled = static_cast<int>(frac * width);
        char bar[width + 1];
        for (int i = 0; i < width; ++i) bar[i] = i < filled ? '#' : '.';
        bar[width] = 0;
        double eta = done > 0 ? secs * (1.0 / frac - 1.0) : 0.0;
        std::fprintf(stderr, "\r%s%-10s [%s] %lld/%lld %5.1fs eta %5.1fs %s\x1b[K", prefix().c_str(), label_.c_str(),
                     bar, static_cast<long long>(done), static_cast<long long>(total_), secs, eta, status.c_str());
    } else {
        int64_t decile = static_cast<int64_t>(frac * 10);
        if (decile == last_decile_) return;
        last_decile_ = decile;
        std::fprintf(stderr, "%s%s %lld/%lld (%.1fs) %s\n", prefix().c_str(), label_.c_str(),
                     static_cast<long long>(done), static_cast<long long>(total_), secs, status.c_str());
    }
    std::fflush(stderr);
}

void Progress::finish(const std::string& status) {
    if (finished_) return;
    update(total_, status);
    if (tty_ && !quiet_) std::fputc('\n', stderr);
    finished_ = true;
}

}  // namespace ppolab
