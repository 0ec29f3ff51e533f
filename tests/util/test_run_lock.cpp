// The run folder's lock (util/run_lock.h): re-entrant within a process,
// refused to another process (a forked child included) with the holder's pid
// and command, released by the kernel when the holder dies.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "support/test_support.h"
#include "util/fileio.h"
#include "util/run_lock.h"

using namespace ppolab;
using ppolab::test::error_of;

namespace {

// An empty folder under the temporary directory, removed when the test ends
// (a forked child never returns into the test, so only the parent removes it).
struct FreshDir {
    explicit FreshDir(const std::string& name)
        : path(fs::temp_directory_path() / ("ppolab-run-lock-" + name + "-" + std::to_string(::getpid()))) {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~FreshDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    FreshDir(const FreshDir&) = delete;
    FreshDir& operator=(const FreshDir&) = delete;
    const fs::path path;
};

std::string lock_text(const fs::path& run) { return read_file(run / kRunLockFile); }

// Runs `child` in a forked process; returns what it wrote to `out` (the
// pipe) and its exit status. The child never returns into the test.
struct ChildResult {
    std::string said;
    int status = -1;
};

template <typename F>
ChildResult in_child(F child) {
    int fds[2];
    if (::pipe(fds) != 0) ADD_FAILURE() << "pipe: " << std::strerror(errno);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        int rc = 3;
        std::string said;
        try {
            rc = child(said);
        } catch (const Error& e) {
            said = std::string("error: ") + e.what();
            rc = 1;
        } catch (...) {
            said = "other exception";
        }
        if (::write(fds[1], said.data(), said.size()) < 0) rc = 4;
        ::_exit(rc);
    }
    ::close(fds[1]);
    ChildResult r;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) r.said.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

}  // namespace

TEST(RunLock, SameProcessTwiceIsReentrant) {
    const FreshDir fresh("reentrant");
    const fs::path& run = fresh.path;
    fs::create_directory_symlink(run, run.string() + "-link");
    {
        RunLock a = lock_run_folder(run);
        EXPECT_TRUE(a.held());
        EXPECT_EQ(run_lock_count(run), 1);
        const std::string note = lock_text(run);
        EXPECT_NE(note.find("pid " + std::to_string(::getpid()) + "\n"), std::string::npos) << note;
        EXPECT_NE(note.find("command test_run_lock"), std::string::npos) << note;
        {
            // The same folder again, through another spelling and a symlink:
            // the same lock, counted, not a second flock.
            RunLock b = lock_run_folder(run / ".");
            RunLock c = lock_run_folder(run.string() + "-link");
            EXPECT_EQ(run_lock_count(run), 3);
            RunLock moved = std::move(b);
            EXPECT_FALSE(b.held());
            EXPECT_EQ(run_lock_count(run), 3);
        }
        EXPECT_EQ(run_lock_count(run), 1);
        EXPECT_EQ(lock_text(run), note);  // still held: the note stays
    }
    EXPECT_EQ(run_lock_count(run), 0);
    EXPECT_EQ(lock_text(run), "");  // released: the note is cleared, the file stays
    // Free again: taken afresh.
    RunLock again = lock_run_folder(run);
    EXPECT_EQ(run_lock_count(run), 1);
    fs::remove(run.string() + "-link");
}

TEST(RunLock, AnotherProcessIsRefusedWithTheHoldersPidAndCommand) {
    const FreshDir fresh("other");
    const fs::path& run = fresh.path;
    RunLock held = lock_run_folder(run);
    const std::string before = lock_text(run);
    // The forked child inherits the descriptor and a copy of the registry; it
    // must not count itself as the holder.
    ChildResult r = in_child([&](std::string& said) {
        RunLock mine = lock_run_folder(run);
        said = "locked (count " + std::to_string(run_lock_count(run)) + ")";
        return 0;
    });
    EXPECT_EQ(r.status, 1) << r.said;
    const std::string want = run.string() + " is in use by pid " + std::to_string(::getpid()) + " (test_run_lock";
    EXPECT_NE(r.said.find(want), std::string::npos) << r.said;
    EXPECT_NE(r.said.find("); wait for it to finish or stop it"), std::string::npos) << r.said;
    // The refused child changed nothing, and the parent still holds the lock.
    EXPECT_EQ(lock_text(run), before);
    EXPECT_EQ(run_lock_count(run), 1);
    ChildResult again = in_child([&](std::string& said) {
        RunLock mine = lock_run_folder(run);
        said = "locked";
        return 0;
    });
    EXPECT_EQ(again.status, 1) << again.said;
}

TEST(RunLock, ReleasedWhenTheHolderDies) {
    const FreshDir fresh("dies");
    const fs::path& run = fresh.path;
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t holder = ::fork();
    if (holder == 0) {
        ::close(ready[0]);
        try {
            RunLock lock = lock_run_folder(run);
            if (::write(ready[1], "L", 1) != 1) ::_exit(2);
            for (;;) ::pause();  // holds it until killed
        } catch (...) {
            ::_exit(1);
        }
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the holder did not take the lock";
    ::close(ready[0]);
    const std::string m = error_of([&] { lock_run_folder(run); });
    EXPECT_NE(m.find("is in use by pid " + std::to_string(holder) + " (test_run_lock"), std::string::npos) << m;
    EXPECT_EQ(run_lock_count(run), 0);
    // kill -9: no cleanup runs; the kernel releases the flock and the note
    // of the dead holder is left behind (information only).
    ::kill(holder, SIGKILL);
    int status = 0;
    ::waitpid(holder, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    EXPECT_NE(lock_text(run).find("pid " + std::to_string(holder)), std::string::npos);
    RunLock mine = lock_run_folder(run);
    EXPECT_TRUE(mine.held());
    const std::string note = lock_text(run);
    EXPECT_NE(note.find("pid " + std::to_string(::getpid()) + "\n"), std::string::npos) << note;
    EXPECT_EQ(note.find("pid " + std::to_string(holder)), std::string::npos) << note;
}

TEST(RunLock, AStaleNoteOfADeadProcessDoesNotLock) {
    const FreshDir fresh("stale");
    const fs::path& run = fresh.path;
    write_file_atomic(run / kRunLockFile, "pid 999999999\ncommand ppolab run --resume somewhere\n");
    RunLock lock = lock_run_folder(run);
    EXPECT_TRUE(lock.held());
    EXPECT_NE(lock_text(run).find("pid " + std::to_string(::getpid())), std::string::npos);
}

TEST(RunLock, RefusesWhatIsNotARunFolder) {
    const FreshDir fresh("refuses");
    const fs::path& dir = fresh.path;
    write_file_atomic(dir / "afile.txt", "x");
    std::string m = error_of([&] { lock_run_folder(dir / "afile.txt"); });
    EXPECT_NE(m.find("afile.txt' is a file, not a run folder"), std::string::npos) << m;
    m = error_of([&] { lock_run_folder(dir / "missing"); });
    EXPECT_NE(m.find("missing' does not exist; expected a run folder"), std::string::npos) << m;
    EXPECT_FALSE(fs::exists(dir / "missing"));
    // A lock file that is a symlink (to anywhere) is not followed.
    fs::create_directories(dir / "run");
    fs::create_symlink(dir / "afile.txt", dir / "run" / kRunLockFile);
    m = error_of([&] { lock_run_folder(dir / "run"); });
    EXPECT_NE(m.find("symbolic link"), std::string::npos) << m;
    EXPECT_EQ(read_file(dir / "afile.txt"), "x");
}

TEST(RunLock, CommandLineIsRecordedReadably) {
    const std::string line = this_command_line();
    EXPECT_EQ(line.rfind("test_run_lock", 0), 0u) << line;  // the program's file name, not its path
}
