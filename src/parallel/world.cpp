#include "parallel/world.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/error.h"

#if PPOLAB_MPI
#include <mpi.h>
#endif

namespace ppolab::parallel {

namespace {

World g_world;
bool g_initialised = false;

// Whether a launcher (Open MPI's mpirun, MPICH's Hydra, PMIx, Slurm's srun
// with PMI) started this process: only then does it join a job.
bool started_by_launcher() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
        if (std::getenv(v)) return true;
    return false;
}

#if PPOLAB_MPI
void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    std::fprintf(stderr, "ppolab rank %d: %s failed: %.*s\n", g_world.rank, what, length, text);
    MPI_Abort(MPI_COMM_WORLD, 3);
    std::abort();
}
#endif

}  // namespace

const World& world() { return g_world; }

void init(int* argc, char*** argv) {
    if (g_initialised) return;
    g_initialised = true;
    if (!started_by_launcher()) return;
#if PPOLAB_MPI
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_FUNNELED) {
        std::fprintf(stderr, "ppolab: the MPI library gives thread level %d; ppolab needs MPI_THREAD_FUNNELED\n",
                     provided);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    // A rank's failure is reported by the rank and ends the job (abort_job);
    // MPI's own errors come back as codes (check) rather than a silent abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
    g_world.mpi = true;
#else
    (void)argc;
    (void)argv;
    fail(
        "this ppolab was built without MPI (cmake -DPPOLAB_MPI=ON with libopenmpi-dev installed) "
        "but was started by an MPI launcher (OMPI_COMM_WORLD_SIZE/PMI_SIZE/PMIX_RANK is set)");
#endif
}

void finalize() {
#if PPOLAB_MPI
    if (g_world.mpi) {
        MPI_Finalize();
        g_world.mpi = false;
    }
#endif
}

void abort_job(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
#if PPOLAB_MPI
    if (g_world.mpi && g_world.size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    finalize();
    std::exit(code);
}

std::string describe() {
#if PPOLAB_MPI
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string library(version, static_cast<size_t>(length));
    library = library.substr(0, library.find_first_of(",\n"));
    if (!g_world.mpi) return "data-parallel: " + library + " (one process; `mpirun -np W ppolab ...` for W ranks)";
    return "data-parallel: " + library + ", rank " + std::to_string(g_world.rank) + " of " +
           std::to_string(g_world.size);
#else
    return "data-parallel: built without MPI (one process; cmake -DPPOLAB_MPI=ON with libopenmpi-dev)";
#endif
}

void barrier() {
#if PPOLAB_MPI
    if (g_world.mpi && g_world.size > 1) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

std::vector<std::string> all_gather(const std::string& mine) {
    if (g_world.size == 1) return {mine};
#if PPOLAB_MPI
    const int n = g_world.size;
    if (mine.size() > static_cast<size_t>(1) << 30) fail("a rank's message of ", mine.size(), " bytes is over 1 GiB");
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<size_t>(n)), offsets(static_cast<size_t>(n));
    check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    int64_t total = 0;
    for (int r = 0; r < n; ++r) {
        offsets[static_cast<size_t>(r)] = static_cast<int>(total);
        total += lengths[static_cast<size_t>(r)];
    }
    if (total > (int64_t{1} << 31) - 1) fail("the ranks' messages add up to ", total, " bytes, over 2 GiB");
    std::string all(static_cast<size_t>(total), '\0');
    check(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                         MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out;
    for (int r = 0; r < n; ++r)
        out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                                 static_cast<size_t>(lengths[static_cast<size_t>(r)])));
    return out;
#else
    return {mine};
#endif
}

void all_gather(const float* mine, size_t count, float* all) {
    if (g_world.size == 1) {
        std::memcpy(all, mine, count * sizeof(float));
        return;
    }
#if PPOLAB_MPI
    if (count > static_cast<size_t>(1) << 30) fail("a rank's ", count, " floats are over MPI's count limit");
    check(MPI_Allgather(mine, static_cast<int>(count), MPI_FLOAT, all, static_cast<int>(count), MPI_FLOAT,
                        MPI_COMM_WORLD),
          "MPI_Allgather");
#endif
}

namespace {
int g_solo = 0;  // live SoloScopes
}  // namespace

SoloScope::SoloScope() { ++g_solo; }
SoloScope::~SoloScope() { --g_solo; }
bool solo() { return g_solo > 0; }

void agree(const std::string& where, const std::vector<std::pair<std::string, std::string>>& fields) {
    if (g_world.size == 1 || solo()) return;
    std::string mine;  // name \x1f value \x1e …: no field holds those bytes' meaning
    for (const auto& [name, value] : fields) mine += name + '\x1f' + value + '\x1e';
    const std::vector<std::string> all = all_gather(mine);
    auto split = [](const std::string& s) {
        std::vector<std::pair<std::string, std::string>> out;
        size_t at = 0;
        while (at < s.size()) {
            const size_t unit = s.find('\x1f', at), end = s.find('\x1e', at);
            if (unit == std::string::npos || end == std::string::npos || unit > end) break;
            out.emplace_back(s.substr(at, unit - at), s.substr(unit + 1, end - unit - 1));
            at = end + 1;
        }
        return out;
    };
    const auto zero = split(all[0]);
    auto shown = [](const std::string& v) { return v.size() > 120 ? v.substr(0, 117) + "..." : v; };
    for (size_t r = 1; r < all.size(); ++r) {
        const auto other = split(all[r]);
        for (size_t i = 0; i < std::max(zero.size(), other.size()); ++i) {
            const std::string name = i < zero.size() ? zero[i].first : other[i].first;
            const std::string a = i < zero.size() ? zero[i].second : "(nothing)";
            const std::string b = i < other.size() ? other[i].second : "(nothing)";
            if (i < zero.size() && i < other.size() && zero[i] == other[i]) continue;
            fail("the ranks disagree ", where, ": rank ", r, " has ", name, " '", shown(b), "', rank 0 '", shown(a),
                 "'; every rank must run the same command on the same configuration, base and binary");
        }
    }
}

ChunkRange my_chunks(int64_t chunks) {
    const int64_t w = g_world.size;
    if (chunks < 1) fail("config: 'parallel.chunks' must be >= 1, got ", chunks);
    if (chunks % w != 0)
        fail("config: 'parallel.chunks' (", chunks, ") must be a multiple of the world size (", w,
             " ranks): each rank computes the same number of whole chunks; for a new run add `--set parallel.chunks=",
             w, "` (or any multiple of ", w, "; the numbers are the same at every world size dividing it)");
    return {g_world.rank * chunks / w, (g_world.rank + 1) * chunks / w};
}

void share_range(size_t a, size_t b, const std::function<void(size_t)>& compute,
                 const std::function<json(size_t)>& fields, const std::function<void(size_t, const json&)>& restore) {
    PPOLAB_ASSERT(a <= b);
    const size_t w = static_cast<size_t>(g_world.size), r = static_cast<size_t>(g_world.rank);
    if (w == 1) {
        for (size_t i = a; i < b; ++i) compute(i);
        return;
    }
    // Rank r's share: the first (b − a) % W ranks take one more.
    const size_t n = b - a, base = n / w, extra = n % w;
    const size_t lo = a + r * base + std::min(r, extra), hi = lo + base + (r < extra ? 1 : 0);
    json mine = json::array();
    for (size_t i = lo; i < hi; ++i) {
        compute(i);
        mine.push_back(fields(i));
    }
    size_t i = a;
    for (const std::string& bytes : all_gather(mine.dump()))
        for (const json& j : json::parse(bytes)) restore(i++, j);
    PPOLAB_ASSERT(i == b);
}

}  // namespace ppolab::parallel
