// guarded_fs.h — the one guarded opener of SPEC §7's leak guards.
//
// Each stage declares the roots it may read (folders or single files); every
// corpus or checkpoint read of that stage goes through its GuardedReader,
// which resolves the real path (symlinks and `..` included) and refuses
// anything outside those roots, with an error naming the stage, the path,
// what it resolves to and the allowed roots.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "util/input_limits.h"

namespace ppolab {

namespace fs = std::filesystem;

class GuardedReader {
public:
    // Roots are resolved now (they may not exist yet: a checkpoint folder
    // created later is still covered).
    GuardedReader(std::string stage, const std::vector<fs::path>& allowed_roots);

    const std::string& stage() const { return stage_; }
    const std::vector<fs::path>& roots() const { return roots_; }

    // True when `path` resolves inside one of the roots.
    bool allows(const fs::path& path) const;
    // Whole file; Error if outside the roots or unreadable.
    std::string read(const fs::path& path) const;
    // The same, bounded as an outside input of `kind` (util/input_limits.h):
    // a regular file within the kind's limit.
    std::string read(const fs::path& path, InputKind kind) const;
    // Error if outside the roots; then whether the file/folder exists.
    bool exists(const fs::path& path) const;
    // The resolved real path; Error if outside the roots.
    fs::path resolve(const fs::path& path) const;

private:
    std::string stage_;
    std::vector<fs::path> roots_;  // resolved
};

// The corpus part of each stage's roots (SPEC §7): learning stages read
// learn/ and the manifest, generation for evaluation reads eval/ and the
// manifest, scoring/exercise/report read the whole corpus.
enum class CorpusAccess { learn, eval, all };
std::vector<fs::path> corpus_read_roots(const fs::path& corpus_dir, CorpusAccess access);

}  // namespace ppolab
