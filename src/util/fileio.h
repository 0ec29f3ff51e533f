// fileio.h — reading whole files and writing them atomically.
//
// Every artefact ppolab writes goes through write_file_atomic: the bytes go
// to a temporary file in the same folder, are flushed to disk, and only then
// renamed over the final name. A crash leaves either the old file or the
// new one, never half of one. Finished artefacts are never overwritten
// unless the caller says so (resume checkpoints, for instance).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "util/input_limits.h"

namespace ppolab {

namespace fs = std::filesystem;

enum class Overwrite { refuse, replace };

std::string read_file(const fs::path& path);  // whole file as bytes; Error names the path

// Opens `path` for reading and returns its descriptor (the caller closes
// it), or refuses, naming `what` and the path, anything that is not a regular
// file: a folder, a device, a socket, or a FIFO, which is neither waited on
// nor read ("model file 'm/model.safetensors' is a FIFO (named pipe),
// expected a regular file"). Every read of a file ppolab did not just write
// goes through it or through InputFile below.
int open_regular_file(const fs::path& path, std::string_view what);
// The whole of such a file, handed to `take` a block at a time.
void read_regular_file(const fs::path& path, std::string_view what,
                       const std::function<void(const char* bytes, size_t n)>& take);

// An outside input opened for reading (util/input_limits.h): refused, naming
// the file, unless it is a regular file ("'x' is a directory, expected a
// regular file"; FIFOs and devices alike, checked before anything is read,
// without blocking on a FIFO) of at most the kind's limit. Reads stay
// bounded if the file grows while it is read.
class InputFile {
public:
    InputFile(const fs::path& path, InputKind kind);
    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;
    uint64_t size() const { return size_; }  // when opened
    // Up to `capacity` bytes into `out`; 0 at the end of the file. Error once
    // more than the kind's limit has been read.
    size_t read_some(char* out, size_t capacity);
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
    InputKind kind_;
    uint64_t limit_ = 0, size_ = 0, read_ = 0;
    int fd_ = -1;
};
// The whole of such a file.
std::string read_input_file(const fs::path& path, InputKind kind);
void write_file_atomic(const fs::path& path, std::string_view bytes, Overwrite mode = Overwrite::refuse);
// The concatenation of `pieces` as one atomic file (large files without a joined copy).
void write_file_atomic(const fs::path& path, const std::vector<std::string_view>& pieces,
                       Overwrite mode = Overwrite::refuse);
// The same, calling `before_publish(temporary)` once the temporary file is
// complete and flushed, just before it takes the final name (crash tests
// kill the process there). Errors name the final file and the temporary;
// on any error the temporary is removed and `path` is left as it was (a
// full disk: "No space left on device").
void write_file_atomic(const fs::path& path, const std::vector<std::string_view>& pieces, Overwrite mode,
                       const std::function<void(const fs::path& temporary)>& before_publish);
// True for the name of a temporary file write_file_atomic(dir / name, …)
// creates (".<name>.tmp<digits>"): a leftover of a killed write, never a
// complete artefact.
bool is_atomic_temporary(const std::string& filename);
// Creates a new directory (and its parents); refuses one that already exists.
void create_new_directory(const fs::path& path);

}  // namespace ppolab
