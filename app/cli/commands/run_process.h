#pragma once
// `embedscope run` as one rank of a run of one rank per process (issue 18): where the rank, the
// world size and the store come from (flags, a launcher's environment, or MPI itself under
// mpirun without --rendezvous), each rank's session name, and the end of an MPI-bootstrapped run
// (rank 0 merges the rank sessions into one, as `embedscope launch` does).

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "embedscope/engine/exec/launch/mpi_bootstrap.h"
#include "workload_args.h"

namespace embedscope::cli {

/// One version of a file as lstat(2) sees it: device, inode, size in bytes, and the modification
/// and status-change times (ns since the epoch). A file written, replaced or re-created after it
/// was taken differs in at least its times (a new session file also in its inode or size).
struct FileVersion {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileVersion&) const = default;
};

/// The version of `path` now (lstat: a symbolic link is itself); nullopt when nothing is there.
std::optional<FileVersion> file_version(const std::string& path);

/// Whether `path` holds a file that is not `before`: it was not there then, or it was written,
/// replaced or re-created since. A rank session left by an earlier run and not touched by this one
/// (its rank refused before writing: tester53 F1) is false.
bool written_since(const std::string& path, const std::optional<FileVersion>& before);

/// The flags of one rank per process (run --rank, --world-size, --rendezvous, --run-id, --host)
/// and what resolve_process made of them.
struct ProcessArgs {
  int rank = -1, world_size = 0;
  std::string rendezvous, run_id = "default", host = "127.0.0.1";
  CLI::Option *rank_opt = nullptr, *world_opt = nullptr, *rendezvous_opt = nullptr, *run_id_opt = nullptr,
              *host_opt = nullptr;
  int node = -1, local_rank = -1;  ///< the launcher's node and local rank (-1: not said)
  std::optional<engine::launch::MpiBootstrap> mpi;  ///< set when MPI bootstrapped the store
  std::string output_pattern;  ///< -o as given (with {rank}), set by rank_output
  std::string session;         ///< this rank's session file, set by rank_output
  /// the file at `session` when rank_output named it (nullopt: none), so that finish_mpi_run
  /// never reports an earlier run's file as this rank's session (written_since)
  std::optional<FileVersion> session_before;
};

/// Adds --rank, --world-size, --rendezvous, --run-id, --host to `run`, bound to `p`.
void add_process_options(CLI::App* run, ProcessArgs& p);

/// Fills p.rank / p.world_size / p.run_id / p.rendezvous from the flags, the environment
/// (rank_env.h) or, under Open MPI without --rendezvous, MPI (mpi_bootstrap.h; p.mpi set), and
/// a.world_size (devices.count) and a.local_world_size (table_row_wise's ranks per node) when
/// --local-world-size is absent and the launcher says how many ranks share this node. Returns
/// where the rank came from ("" for a run of threads). Throws SpecError for a half-given pair, a
/// rank not below the world size, no --rendezvous (outside mpirun), and mpi_bootstrap's errors.
std::string resolve_process(ProcessArgs& p, WorkloadArgs& a);

/// -o of one rank: {rank} replaced; without -o NAME.rank{R}.db (NAME from the run id when there
/// is one, else the time). Sets p.output_pattern, p.session and p.session_before. Throws SpecError for an -o
/// without {rank} when the world has more than one rank.
std::string rank_output(std::string output, ProcessArgs& p);

/// One rank's session name of a rank pattern: every "{rank}" replaced by `rank`
/// ("run.rank{rank}.db", 2 -> "run.rank2.db"). Used by rank_output and by `launch`, so that
/// launch, mpirun and by-hand ranks name their files the same way.
std::string rank_session(const std::string& pattern, int rank);

/// The merged session's name for a rank pattern: "run.rank{rank}.db" -> "run.db", "r{rank}.db"
/// -> "rall.db" ({rank} -> "all" where there is no ".rank{rank}").
std::string merged_output(const std::string& pattern);

/// The end of an MPI-bootstrapped run, on every rank (mpi_finish): rank 0 merges the sessions of
/// the ranks that wrote one (written_since: not a file an earlier run left where a refusing rank's
/// session would be) into merged_output(p.output_pattern) (sessions::merge_sessions,
/// `overwrite` as -force-overwrite) and prints it on stderr. Returns the exit code of this
/// process: on rank 0 2 when any rank said bad input, else 1 when any failed or the merge did,
/// else 0; on the others `code`.
int finish_mpi_run(ProcessArgs& p, int code, bool overwrite);

}  // namespace embedscope::cli
