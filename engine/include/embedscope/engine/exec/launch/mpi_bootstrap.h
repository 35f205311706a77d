#pragma once
// `mpirun -n N embedscope run ...` without --rendezvous: the run's store is bootstrapped through
// MPI itself. MPI only carries the start and the end; every collective of the run is Gloo's, over
// the store as with --rendezvous (a second protocol would be two things to keep in step).
//  - start (mpi_bootstrap): MPI_Init_thread (FUNNELED: only the main thread calls MPI), rank 0
//    makes a fresh directory (mkdtemp) under $EMBEDSCOPE_RENDEZVOUS_DIR, else $TMPDIR, else /tmp,
//    and picks the run id (the launcher's job id, else a random one), and MPI_Bcast sends both;
//    every rank then checks that it sees the directory (MPI_Allreduce): on several hosts that do
//    not share the directory the run is refused on every rank, naming the ranks and hosts.
//    The node id of every rank is the index of its shared-memory node
//    (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); nodes numbered by their lowest rank).
//  - end (mpi_finish): MPI_Gather of every rank's exit code and session path to rank 0, which
//    removes the directory; then MPI_Finalize. Every rank that bootstrapped must call it once,
//    on every path (a rank that skips it leaves the others waiting in the gather).
// Built only with MPI (CMake option EMBEDSCOPE_WITH_MPI, found by find_package(MPI)); otherwise
// the same functions say so. MPI_Init is never called unless mpi_bootstrap is, and the CLI calls it
// only under mpirun (OMPI_COMM_WORLD_RANK set) without --rendezvous.
//
// Limits: the directory must be on a file system every host sees (a single host: /tmp does); for
// several hosts set EMBEDSCOPE_RENDEZVOUS_DIR to a shared directory or give --rendezvous
// redis://HOST:PORT. MPI's own transports are never used for the run's data.

#include <string>
#include <vector>

namespace embedscope::engine::launch {

/// What MPI told this process, and the store rank 0 chose for everyone.
struct MpiBootstrap {
  int rank = -1;              ///< MPI_COMM_WORLD rank
  int world_size = 0;         ///< MPI_COMM_WORLD size
  int local_rank = -1;        ///< rank within this node (MPI_COMM_TYPE_SHARED)
  int local_world_size = 0;   ///< ranks on this node
  int node = -1;              ///< node index, 0.. in the order of the nodes' lowest ranks
  int nodes = 0;              ///< number of nodes
  std::string rendezvous;     ///< "file://DIR", DIR made by rank 0
  std::string directory;      ///< DIR
  std::string run_id;         ///< rank 0's choice, the same on every rank
};

/// True when this build has MPI (EMBEDSCOPE_WITH_MPI).
bool built_with_mpi();

/// Initialises MPI and agrees on the store (above). `run_id` is this rank's proposal (the
/// launcher's job id, "" for none): rank 0's (or a random id when it is "") is taken by all.
/// Throws SpecError: built without MPI ("this embedscope was built without MPI ..."), a directory
/// rank 0 cannot make (the path and errno's text), a directory some rank does not see (naming the
/// first such rank, its host, and the fix). MPI is finalised before a throw after MPI_Init, so the
/// process may exit; the caller must not call mpi_finish then.
MpiBootstrap mpi_bootstrap(const std::string& run_id);

/// One rank's end, as rank 0 gathers them.
struct MpiRankEnd {
  int rank = 0;
  int code = 0;          ///< the rank's exit code (0 ok, 1 failed, 2 bad input)
  std::string session;   ///< its session file ("" when it wrote none)
};

/// The end of a bootstrapped run (above). Returns, on rank 0, every rank's end (by rank); on the
/// other ranks an empty vector. Finalises MPI. Throws std::logic_error when called without a
/// bootstrap or twice.
std::vector<MpiRankEnd> mpi_finish(const MpiBootstrap& b, int code, const std::string& session);

}  // namespace embedscope::engine::launch
