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
#include <string>
#include <string_view>
#include <vector>

namespace ppolab {

namespace fs = std::filesystem;

enum class Overwrite { refuse, replace };

std::string read_file(const fs::path& path);  // whole file as bytes; Error names the path
void write_file_atomic(const fs::path& path, std::string_view bytes,
                       Overwrite mode = Overwrite::refuse);
// The concatenation of `pieces` as one atomic file (large files without a joined copy).
void write_file_atomic(const fs::path& path, const std::vector<std::string_view>& pieces,
                       Overwrite mode = Overwrite::refuse);
// Creates a new directory (and its parents); refuses one that already exists.
void create_new_directory(const fs::path& path);

}  // namespace ppolab
