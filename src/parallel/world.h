// world.h — the ranks of a data-parallel job (SPEC §13 "past one machine").
//
// ppolab runs on MPI, the distributed engine C++ programs use (Open MPI or
// MPICH), never a home-made one. A process started by `mpirun` (or srun)
// joins the job in init() — MPI_Init_thread(FUNNELED): OpenMP threads
// inside each rank, only the main thread talks to the others; a process
// started without a launcher is a world of one and never touches MPI, so the
// product without `mpirun` (or built without PPOLAB_MPI) is unchanged.
//
// The collectives here move bytes, never add them: every sum that decides a
// number is made by the caller in a fixed order (training/chunked_update.h),
// which is why any world size gives the same bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "util/json.h"

namespace ppolab::parallel {

struct World {
    int rank = 0;
    int size = 1;
    bool mpi = false;  // joined an MPI job (size may still be 1)
    // Rank 0 writes every file of the run; the other ranks compute only.
    bool writer() const { return rank == 0; }
};

// The process's world (a world of one before init()).
const World& world();

// Joins the MPI job when a launcher started this process (its environment
// says so: OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK); an Error if the binary
// was built without MPI but was started by one. Idempotent.
void init(int* argc, char*** argv);
// Leaves the job (MPI_Finalize); nothing after it may talk to other ranks.
void finalize();
// Ends the whole job at once with `code` (MPI_Abort; a world of one: exit):
// a rank that fails must not leave the others waiting in a collective.
[[noreturn]] void abort_job(int code);

// One line for `ppolab version`: the MPI library this binary was built with
// (or none) and this process's world.
std::string describe();

// Every rank waits for every other.
void barrier();
// Every rank's `mine` (any length), to every rank, in rank order.
std::vector<std::string> all_gather(const std::string& mine);
// Every rank's `count` floats, to every rank, in rank order: `all` holds size × count.
void all_gather(const float* mine, size_t count, float* all);

// Every rank must run the same thing: each rank's `fields` (name, value) are
// gathered (a collective safe for any lengths) and compared with rank 0's,
// and on any difference every rank fails with the same Error naming the
// first field that differs, its rank and both values ("the ranks disagree
// before sft: rank 1 has config_sha256 '9f…', rank 0 '3c…'"). Called before a
// command's first collective (the command and its arguments) and when a
// stage opens (the configuration, base and binary), so ranks that differ
// stop by name instead of corrupting a collective. A world of one: nothing.
// Skipped while one rank works alone (SoloScope).
void agree(const std::string& where, const std::vector<std::pair<std::string, std::string>>& fields);

// While it lives, this rank runs a step alone (`ppolab run` under mpirun:
// the exercise, findings, the report… run on rank 0 while the others wait
// at a barrier), so no collective may run: agree() does nothing and solo()
// is true.
class SoloScope {
public:
    SoloScope();
    ~SoloScope();
    SoloScope(const SoloScope&) = delete;
    SoloScope& operator=(const SoloScope&) = delete;
};
bool solo();

// The chunks [begin, end) of a fixed count that this rank computes: rank r
// of W takes chunks [r·C/W, (r+1)·C/W). An Error naming parallel.chunks
// unless W divides C (each rank's share, and so the gathered order, is fixed).
struct ChunkRange {
    int64_t begin = 0, end = 0;
};
ChunkRange my_chunks(int64_t chunks);

// Independent items [a, b) — evaluation's rows, or fixed batches of rows —
// split across the ranks in contiguous shares: `compute(i)` runs for this
// rank's, then what it set (`fields(i)` → JSON, `restore(i, ·)` ← JSON:
// floats and doubles come back exactly) is gathered so that every rank
// holds every item. An item must be its own computation (one row per
// forward, or a batch whose rows do not depend on W), so it does not depend
// on which rank ran it. A world of one computes them in order.
void share_range(size_t a, size_t b, const std::function<void(size_t)>& compute,
                 const std::function<json(size_t)>& fields, const std::function<void(size_t, const json&)>& restore);

}  // namespace ppolab::parallel
