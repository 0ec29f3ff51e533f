#include "util/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string_view>
#include <system_error>
#include <thread>

#include "util/error.h"

namespace ppolab {

namespace fs = std::filesystem;

namespace {

struct Held {
    int fd = -1;
    int count = 0;
    pid_t pid = 0;  // the process that took it (a forked child's copy is not its own)
};

std::mutex& registry_mutex() {
    static std::mutex mu;
    return mu;
}

std::map<std::string, Held>& registry() {
    static std::map<std::string, Held> held;
    return held;
}

// Printable, bounded text from a file we do not trust.
std::string printable(std::string_view s, size_t max = 300) {
    std::string out;
    for (char c : s) {
        if (out.size() >= max) {
            out += "…";
            break;
        }
        out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
    }
    return out;
}

std::string read_fd(int fd) {
    std::string text;
    char buf[4096];
    const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    if (n > 0) text.assign(buf, static_cast<size_t>(n));
    return text;
}

// "pid 1234 (ppolab run --resume RUN)" from the lock file's content, or ""
// when it names no holder (yet: the holder writes it just after locking).
std::string holder_of(const std::string& content) {
    std::string pid, command;
    size_t start = 0;
    while (start < content.size()) {
        size_t end = content.find('\n', start);
        if (end == std::string::npos) end = content.size();
        const std::string_view line(content.data() + start, end - start);
        if (line.rfind("pid ", 0) == 0) pid = std::string(line.substr(4));
        if (line.rfind("command ", 0) == 0) command = std::string(line.substr(8));
        start = end + 1;
    }
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) return "";
    return "pid " + pid + (command.empty() ? "" : " (" + printable(command) + ")");
}

void release(const std::string& key) {
    std::lock_guard guard(registry_mutex());
    auto it = registry().find(key);
    if (it == registry().end() || it->second.pid != ::getpid()) return;
    if (--it->second.count > 0) return;
    // Clear the holder's note while the lock is still ours, then let go
    // (closing the last descriptor of the open file description unlocks).
    if (::ftruncate(it->second.fd, 0) != 0) { /* information only */
    }
    ::close(it->second.fd);
    registry().erase(it);
}

}  // namespace

std::string this_command_line() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string out;
    size_t start = 0;
    bool first = true;
    while (start < raw.size()) {
        size_t end = raw.find('\0', start);
        if (end == std::string::npos) end = raw.size();
        std::string arg = raw.substr(start, end - start);
        start = end + 1;
        if (first) {
            arg = fs::path(arg).filename().string();  // "ppolab", not "./build/bin/ppolab"
            first = false;
        } else {
            out += ' ';
        }
        arg = printable(arg, 200);
        if (arg.empty() || arg.find_first_of(" '\"") != std::string::npos) arg = "'" + arg + "'";
        out += arg;
        if (out.size() > 1000) {
            out += " …";
            break;
        }
    }
    return out.empty() ? "unknown command" : out;
}

RunLock::RunLock(RunLock&& other) noexcept : key_(std::move(other.key_)) { other.key_.clear(); }

RunLock& RunLock::operator=(RunLock&& other) noexcept {
    if (this != &other) {
        if (held()) release(key_);
        key_ = std::move(other.key_);
        other.key_.clear();
    }
    return *this;
}

RunLock::~RunLock() {
    if (held()) release(key_);
}

RunLock lock_run_folder(const fs::path& run) {
    std::error_code ec;
    const fs::file_status st = fs::status(run, ec);  // through symlinks
    if (st.type() == fs::file_type::none) fail("cannot inspect the run folder '", run.string(), "': ", ec.message());
    if (st.type() == fs::file_type::not_found) fail("'", run.string(), "' does not exist; expected a run folder");
    if (!fs::is_directory(st)) fail("'", run.string(), "' is a file, not a run folder");
    const fs::path canonical = fs::canonical(run, ec);
    if (ec) fail("cannot resolve the run folder '", run.string(), "': ", ec.message());
    const std::string key = canonical.string();

    std::lock_guard guard(registry_mutex());
    auto it = registry().find(key);
    if (it != registry().end()) {
        if (it->second.pid == ::getpid()) {
            ++it->second.count;
            RunLock lock;
            lock.key_ = key;
            return lock;
        }
        // Inherited from the parent through fork(): the descriptor shares the
        // parent's lock, so it is not ours. Close the copy (this does not
        // unlock while the parent keeps its own) and lock for ourselves.
        ::close(it->second.fd);
        registry().erase(it);
    }

    const fs::path file = canonical / kRunLockFile;
    // O_NOFOLLOW: a lock file that is a symlink (pointing elsewhere) is refused.
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        const int e = errno;
        fail("cannot open the run folder's lock file '", (run / kRunLockFile).string(), "': ", std::strerror(e),
             e == ELOOP ? " (it is a symbolic link; a lock file must be a plain file)" : "");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        if (e != EWOULDBLOCK) {
            ::close(fd);
            fail("cannot lock '", (run / kRunLockFile).string(), "': ", std::strerror(e));
        }
        // Held by a live process (the kernel would have released a dead
        // one's). It writes its pid just after locking: wait a moment for it.
        std::string holder = holder_of(read_fd(fd));
        for (int i = 0; i < 20 && holder.empty(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            holder = holder_of(read_fd(fd));
        }
        ::close(fd);
        if (holder.empty()) holder = "another process (" + (run / kRunLockFile).string() + " does not say which)";
        if (holder.rfind("pid " + std::to_string(::getpid()) + " ", 0) == 0)
            holder += " — this process, through another path to the same folder";
        fail(run.string(), " is in use by ", holder, "; wait for it to finish or stop it");
    }
    // Ours. Note who holds it (information for the message above; not
    // fsync'd, not atomic: the flock, not this text, is the lock).
    const std::string note = "pid " + std::to_string(::getpid()) + "\ncommand " + this_command_line() + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, note.data(), note.size(), 0) != static_cast<ssize_t>(note.size())) {
        const int e = errno;
        ::close(fd);
        fail("cannot write the run folder's lock file '", (run / kRunLockFile).string(), "': ", std::strerror(e));
    }
    registry()[key] = Held{fd, 1, ::getpid()};
    RunLock lock;
    lock.key_ = key;
    return lock;
}

int run_lock_count(const fs::path& run) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(run, ec);
    if (ec) return 0;
    std::lock_guard guard(registry_mutex());
    auto it = registry().find(canonical.string());
    return it == registry().end() || it->second.pid != ::getpid() ? 0 : it->second.count;
}

}  // namespace ppolab
