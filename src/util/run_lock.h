// run_lock.h — one writing process per run folder.
//
// Every command that writes into a run folder holds RUN/.ppolab.lock for
// as long as it runs: an exclusive flock(2) taken without waiting. A second
// writer, in another process, fails at once with
//   RUN is in use by pid 1234 (ppolab run --resume RUN); wait for it to finish or stop it
// instead of writing the same checkpoints as the first.
//
// * Re-entrant within a process: `ppolab run` executes its steps in its own
//   process, each step taking the lock of the folder the run already holds.
//   A flock belongs to the open file description, so a second open + flock
//   of the same file in the same process would conflict with the first; a
//   process-wide registry (keyed by the folder's canonical path) counts the
//   holders instead and closes the file when the last one goes.
// * Stale locks need no cleaning: the kernel releases a flock when the
//   holding process dies (kill -9 and power cuts included), so the next
//   command simply gets it. The file's content — "pid N" and "command …",
//   written by the holder after it has the lock — is information for the
//   refusal message only; it is never used to decide who holds the lock, and
//   a dead holder's leftover content is overwritten by the next holder.
// * The lock file is never renamed over or removed (removing a flock'd file
//   lets two processes lock two different files of the same name); atomic
//   writes of the run's artefacts rename other files and are unaffected.
//   The descriptor is close-on-exec and a forked child does not inherit the
//   registry's count: a child that asks for the lock opens its own
//   descriptor and is refused while its parent holds it.
#pragma once
#include <filesystem>
#include <string>

namespace ppolab {

inline constexpr const char* kRunLockFile = ".ppolab.lock";

// A hold on a run folder's lock; released when the last RunLock of the
// folder in this process is destroyed. Default-constructed: holds nothing.
class RunLock {
public:
    RunLock() = default;
    RunLock(RunLock&& other) noexcept;
    RunLock& operator=(RunLock&& other) noexcept;
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;
    ~RunLock();

    bool held() const { return !key_.empty(); }
    // The canonical path of the folder held (empty when nothing is held).
    const std::string& folder() const { return key_; }

private:
    friend RunLock lock_run_folder(const std::filesystem::path& run);
    std::string key_;
};

// Takes the lock of `run`, an existing folder, for this process: Error
// naming the holder (pid and command line) when another process holds it;
// Error when `run` is not a folder or the lock file cannot be opened.
RunLock lock_run_folder(const std::filesystem::path& run);

// How many RunLocks of this process hold the folder `run` (0: not held by
// this process). For tests.
int run_lock_count(const std::filesystem::path& run);

// This process's command line as the lock file records it: the program's
// file name, then its arguments ("ppolab run --resume runs/a"), control
// characters replaced, arguments with spaces quoted.
std::string this_command_line();

}  // namespace ppolab
