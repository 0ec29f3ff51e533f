#include "data/guarded_fs.h"

#include "util/error.h"
#include "util/fileio.h"

namespace ppolab {

namespace {

fs::path real_path(const fs::path& p) {
    std::error_code ec;
    fs::path abs = fs::absolute(p, ec);
    if (ec) fail("cannot make '", p.string(), "' absolute: ", ec.message());
    fs::path r = fs::weakly_canonical(abs, ec);  // follows every symlink of the existing prefix
    if (ec) fail("cannot resolve '", p.string(), "': ", ec.message());
    return r.lexically_normal();
}

bool is_within(const fs::path& path, const fs::path& root) {
    auto p = path.begin();
    for (auto r = root.begin(); r != root.end(); ++r, ++p) {
        if (r->empty()) continue;  // trailing separator of a folder root
        if (p == path.end() || *p != *r) return false;
    }
    return true;
}

std::string roots_text(const std::vector<fs::path>& roots) {
    std::string out = "[";
    for (size_t i = 0; i < roots.size(); ++i) out += (i ? ", " : "") + roots[i].string();
    return out + "]";
}

}  // namespace

GuardedReader::GuardedReader(std::string stage, const std::vector<fs::path>& allowed_roots) : stage_(std::move(stage)) {
    for (const auto& r : allowed_roots) {
        if (r.empty()) fail("stage '", stage_, "': an allowed root is an empty path");
        roots_.push_back(real_path(r));
    }
}

bool GuardedReader::allows(const fs::path& path) const {
    fs::path real = real_path(path);
    for (const auto& r : roots_)
        if (is_within(real, r)) return true;
    return false;
}

fs::path GuardedReader::resolve(const fs::path& path) const {
    fs::path real = real_path(path);
    for (const auto& r : roots_)
        if (is_within(real, r)) return real;
    fail("leak guard: stage '", stage_, "' may not read '", path.string(), "' (resolves to '", real.string(),
         "'); its allowed roots are ", roots_text(roots_));
}

std::string GuardedReader::read(const fs::path& path) const {
    fs::path real = resolve(path);
    std::error_code ec;
    if (fs::is_directory(real, ec)) fail("stage '", stage_, "': '", path.string(), "' is a folder, not a file");
    return read_file(real);  // the resolved path: no symlink is followed after the check
}

std::string GuardedReader::read(const fs::path& path, InputKind kind) const {
    return read_input_file(resolve(path), kind);  // the resolved path: no symlink is followed after the check
}

bool GuardedReader::exists(const fs::path& path) const {
    std::error_code ec;
    return fs::exists(resolve(path), ec);
}

std::vector<fs::path> corpus_read_roots(const fs::path& dir, CorpusAccess access) {
    switch (access) {
        case CorpusAccess::learn: return {dir / "learn", dir / "manifest.json"};
        case CorpusAccess::eval: return {dir / "eval", dir / "manifest.json"};
        case CorpusAccess::all: return {dir};
    }
    PPOLAB_ASSERT(false);
    return {};
}

}  // namespace ppolab
