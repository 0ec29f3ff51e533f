#include "util/fileio.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "util/error.h"

namespace ppolab {

static const char* file_type_name(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

int open_regular_file(const fs::path& path, std::string_view what) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) fail("cannot open ", what, " '", path.string(), "': ", std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        fail("cannot inspect ", what, " '", path.string(), "': ", std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(what, " '", path.string(), "' is ", file_type_name(st.st_mode), ", expected a regular file");
    }
    return fd;
}

void read_regular_file(const fs::path& path, std::string_view what,
                       const std::function<void(const char* bytes, size_t n)>& take) {
    const int fd = open_regular_file(path, what);
    std::vector<char> buf(size_t(1) << 20);
    while (true) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            fail("read error in ", what, " '", path.string(), "': ", std::strerror(err));
        }
        if (n == 0) break;
        take(buf.data(), static_cast<size_t>(n));
    }
    ::close(fd);
}

std::string read_file(const fs::path& path) {
    std::string bytes;
    read_regular_file(path, "file", [&](const char* b, size_t n) { bytes.append(b, n); });
    return bytes;
}

InputFile::InputFile(const fs::path& path, InputKind kind) : path_(path), kind_(kind) {
    const InputLimitInfo& info = input_limit_info(kind);
    limit_ = input_limit_bytes(kind);
    fd_ = open_regular_file(path, info.one);
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
        const int err = errno;
        ::close(fd_);
        fail("cannot inspect ", info.one, " '", path.string(), "': ", std::strerror(err));
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ > limit_) {
        ::close(fd_);
        fail(info.one, " '", path.string(), "' is ", size_, " bytes, over ", input_limit_text(kind));
    }
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

size_t InputFile::read_some(char* out, size_t capacity) {
    // Never ask for more than one byte past the limit: a growing file is
    // caught without reading (or holding) the rest of it.
    const uint64_t room = limit_ + 1 - read_;
    const size_t want = static_cast<size_t>(std::min<uint64_t>(capacity, room));
    while (true) {
        const ssize_t n = ::read(fd_, out, want);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            fail("read error in ", input_limit_info(kind_).one, " '", path_.string(), "': ", std::strerror(errno));
        read_ += static_cast<uint64_t>(n);
        if (read_ > limit_)
            fail(input_limit_info(kind_).one, " '", path_.string(), "' grew past ", input_limit_text(kind_),
                 " while it was read");
        return static_cast<size_t>(n);
    }
}

std::string read_input_file(const fs::path& path, InputKind kind) {
    InputFile in(path, kind);
    std::string bytes;
    bytes.resize(static_cast<size_t>(in.size()));
    size_t have = 0;
    while (true) {
        if (have == bytes.size())
            bytes.resize(have + std::max<size_t>(1 << 16, have / 2));  // grew: bounded by the limit
        const size_t n = in.read_some(bytes.data() + have, bytes.size() - have);
        if (n == 0) break;
        have += n;
    }
    bytes.resize(have);
    return bytes;
}

static void write_all(int fd, const char* data, size_t size, const fs::path& path, const fs::path& tmp) {
    while (size > 0) {
        ssize_t n = ::write(fd, data, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            fail("cannot write '", path.string(), "' (temporary '", tmp.filename().string(),
                 "', removed): ", std::strerror(err),
                 err == ENOSPC ? " (the disk is full; the previous version of the file, if any, is unchanged)" : "");
        }
        data += n;
        size -= static_cast<size_t>(n);
    }
}

void write_file_atomic(const fs::path& path, std::string_view bytes, Overwrite mode) {
    write_file_atomic(path, std::vector<std::string_view>{bytes}, mode);
}

void write_file_atomic(const fs::path& path, const std::vector<std::string_view>& pieces, Overwrite mode) {
    write_file_atomic(path, pieces, mode, {});
}

bool is_atomic_temporary(const std::string& name) {
    const size_t at = name.rfind(".tmp");
    if (name.size() < 2 || name[0] != '.' || at == std::string::npos || at < 2 || at + 4 == name.size()) return false;
    for (size_t i = at + 4; i < name.size(); ++i)
        if (name[i] < '0' || name[i] > '9') return false;
    return true;
}

void write_file_atomic(const fs::path& path, const std::vector<std::string_view>& pieces, Overwrite mode,
                       const std::function<void(const fs::path& temporary)>& before_publish) {
    if (mode == Overwrite::refuse && fs::exists(path))
        fail("refusing to overwrite existing file '", path.string(), "'");
    fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) fail("cannot create folder '", dir.string(), "': ", ec.message());
    std::random_device rd;
    fs::path tmp = dir / ("." + path.filename().string() + ".tmp" + std::to_string(rd()));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        fail("cannot write '", path.string(), "': cannot create its temporary '", tmp.string(),
             "': ", std::strerror(errno));
    for (std::string_view bytes : pieces) write_all(fd, bytes.data(), bytes.size(), path, tmp);
    if (::fsync(fd) != 0) {
        int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        fail("cannot flush '", path.string(), "' (temporary '", tmp.filename().string(),
             "', removed): ", std::strerror(err));
    }
    if (::close(fd) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        fail("cannot close '", path.string(), "' (temporary '", tmp.filename().string(),
             "', removed): ", std::strerror(err));
    }
    if (before_publish) {
        try {
            before_publish(tmp);
        } catch (...) {
            ::unlink(tmp.c_str());
            throw;
        }
    }
    if (mode == Overwrite::refuse) {
        // link() fails if the target exists: no window where a finished file is replaced.
        if (::link(tmp.c_str(), path.c_str()) != 0) {
            int err = errno;
            ::unlink(tmp.c_str());
            fail("cannot create '", path.string(), "': ", std::strerror(err));
        }
        ::unlink(tmp.c_str());
    } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        fail("cannot rename '", tmp.string(), "' to '", path.string(), "': ", std::strerror(err));
    }
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

void create_new_directory(const fs::path& path) {
    if (fs::exists(path)) fail("refusing to reuse existing folder '", path.string(), "'");
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) fail("cannot create folder '", path.string(), "': ", ec.message());
}

}  // namespace ppolab
