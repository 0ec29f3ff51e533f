#include "training/crash_checkpoints.h"

#include <cmath>
#include <csignal>
#include <cstdio>

#include "util/error.h"
#include "util/gzip.h"
#include "util/sha256.h"

namespace ppolab {

fs::path checkpoint_path(const fs::path& stage_dir, const std::string& mode) {
    return stage_dir / "checkpoints" / (mode + ".state.gz");
}

int remove_atomic_temporaries(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return 0;
    int removed = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
        if (!e.is_regular_file() || !is_atomic_temporary(e.path().filename().string())) continue;
        if (fs::remove(e.path(), ec)) ++removed;
        if (ec) fail("cannot remove the leftover temporary '", e.path().string(), "': ", ec.message());
    }
    return removed;
}

StateFileInfo write_checkpoint(const fs::path& path, const ResumeState& state, const std::string& what,
                               bool die_before_rename, int64_t write_number) {
    for (const auto& [group, tensors] : state.learned) check_finite_tensors(tensors, what + " learned '" + group + "'");
    for (const auto& [name, opt] : state.optimizers) {
        check_finite_tensors(opt.exp_avg, what + " optimiser '" + name + "' exp_avg");
        check_finite_tensors(opt.exp_avg_sq, what + " optimiser '" + name + "' exp_avg_sq");
    }
    const std::string raw = serialize_resume_state(state);
    const std::string packed = gzip_compress(raw, 1);
    write_file_atomic(path, {packed}, Overwrite::replace, [&](const fs::path& temporary) {
        if (!die_before_rename) return;
        std::fprintf(stderr,
                     "PPOLAB_TEST_KILL_IN_CHECKPOINT: SIGKILL in checkpoint write %lld (%s written, not renamed)\n",
                     static_cast<long long>(write_number), temporary.filename().c_str());
        std::fflush(stderr);
        std::raise(SIGKILL);
    });
    // No sha256 here (not needed for a checkpoint, and not free on a large state).
    return StateFileInfo{raw.size(), packed.size(), "", ""};
}

std::optional<ResumeState> load_checkpoint(const fs::path& path, const json& identity, const std::string& what) {
    const int stale = remove_atomic_temporaries(path.parent_path());
    if (stale > 0)
        std::fprintf(stderr, "%s: removed %d unfinished checkpoint write%s in %s\n", what.c_str(), stale,
                     stale == 1 ? "" : "s", path.parent_path().c_str());
    if (!fs::exists(path)) return std::nullopt;
    ResumeState st = load_resume_state(path);
    const std::string d = json_first_difference(st.identity, identity, "identity");
    if (!d.empty())
        fail(path.string(), ": this checkpoint belongs to a different ", what,
             " run (identity differs, checkpoint vs this run, at ", d,
             "); remove it to start the stage over, or run with the options it was written with");
    return st;
}

void remove_unfinished_outputs(const std::vector<fs::path>& outputs, const fs::path& report, const std::string& what) {
    for (const fs::path& p : outputs) {
        std::error_code ec;
        if (!fs::exists(fs::symlink_status(p, ec))) continue;
        std::fprintf(stderr, "%s: removing %s (left by an attempt that stopped before writing %s)\n", what.c_str(),
                     p.c_str(), report.filename().c_str());
        fs::remove_all(p, ec);
        if (ec) fail("cannot remove the unfinished output '", p.string(), "': ", ec.message());
    }
}

void remove_checkpoint(const fs::path& path) {
    std::error_code ec;
    fs::remove(path, ec);
    if (ec) fail("cannot remove the checkpoint '", path.string(), "': ", ec.message());
    remove_atomic_temporaries(path.parent_path());
    if (fs::is_directory(path.parent_path(), ec) && fs::is_empty(path.parent_path(), ec))
        fs::remove(path.parent_path(), ec);
}

template <typename T>
static void check_finite_values(std::span<const T> values, const std::string& where, const std::string& quantity) {
    for (size_t i = 0; i < values.size(); ++i)
        if (!std::isfinite(values[i]))
            fail(where, ": ", quantity, " is not finite (", values[i], " at index ", i, " of ", values.size(), ")");
}

void check_finite(std::span<const float> values, const std::string& where, const std::string& quantity) {
    check_finite_values(values, where, quantity);
}
void check_finite(std::span<const double> values, const std::string& where, const std::string& quantity) {
    check_finite_values(values, where, quantity);
}
void check_finite(double value, const std::string& where, const std::string& quantity) {
    if (!std::isfinite(value)) fail(where, ": ", quantity, " is not finite (", value, ")");
}

void check_finite_tensors(const std::vector<NamedTensor>& tensors, const std::string& where) {
    for (const NamedTensor& t : tensors)
        for (size_t i = 0; i < t.values.size(); ++i)
            if (!std::isfinite(t.values[i]))
                fail(where, ": tensor '", t.name, "' is not finite (", t.values[i], " at element ", i, " of shape ",
                     shape_string(t.shape), "); refusing to checkpoint it");
}

}  // namespace ppolab
