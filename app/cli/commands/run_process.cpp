// `embedscope run` as one rank per process: flags, a launcher's environment or MPI (run_process.h).
#include "run_process.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "embedscope/engine/exec/launch/rank_env.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/merge/merge.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
namespace fs = std::filesystem;

std::optional<FileVersion> file_version(const std::string& path) {
  struct stat sb {};
  if (path.empty() || lstat(path.c_str(), &sb) != 0) return std::nullopt;
  FileVersion v;
  v.dev = sb.st_dev;
  v.ino = sb.st_ino;
  v.size = static_cast<int64_t>(sb.st_size);
  v.mtime_ns = static_cast<int64_t>(sb.st_mtim.tv_sec) * 1'000'000'000 + sb.st_mtim.tv_nsec;
  v.ctime_ns = static_cast<int64_t>(sb.st_ctim.tv_sec) * 1'000'000'000 + sb.st_ctim.tv_nsec;
  return v;
}

bool written_since(const std::string& path, const std::optional<FileVersion>& before) {
  const std::optional<FileVersion> now = file_version(path);
  return now && (!before || *now != *before);
}

void add_process_options(CLI::App* run, ProcessArgs& p) {
  p.rank_opt = run->add_option("--rank", p.rank,
                               "Run only this rank, one process per rank (with --world-size and --rendezvous; "
                               "default: from mpirun's, srun's or torchrun's environment)")
                   ->check(kInteger)
                   ->check(CLI::Range(0, 1'000'000));
  p.world_opt = run->add_option("--world-size", p.world_size, "The number of processes (ranks) of the run (sets --devices)")
                    ->check(kInteger)
                    ->check(CLI::Range(1, 1'000'000));
  p.rendezvous_opt = run->add_option("--rendezvous", p.rendezvous,
                  "Where the ranks find each other: file:///shared/dir (a directory every rank sees; Gloo's FileStore) "
                  "or redis://HOST:PORT[/PREFIX] (Gloo's RedisStore); under mpirun without it, MPI bootstraps a "
                  "FileStore in $EMBEDSCOPE_RENDEZVOUS_DIR (default $TMPDIR or /tmp)");
  p.run_id_opt = run->add_option("--run-id", p.run_id,
                                 "Namespace of this run's keys in the store (default: the launcher's job id, else "
                                 "\"default\"); a rank already claimed under it is refused");
  p.host_opt = run->add_option("--host", p.host,
                               "Address (or host name) this rank's Gloo device listens on and advertises (default "
                               "127.0.0.1; under mpirun on several nodes: the address of this host's name)");
}

std::string resolve_process(ProcessArgs& p, WorkloadArgs& a) {
  std::string from;
  const bool flags = p.rank_opt->count() > 0 || p.world_opt->count() > 0;
  std::optional<es::launch::LaunchEnv> env;
  if (flags) {
    if (p.rank_opt->count() == 0) throw es::SpecError("--world-size needs --rank (this process's rank)");
    if (p.world_opt->count() == 0) throw es::SpecError("--rank needs --world-size (the number of processes)");
    from = "--rank";
    a.world_size_from = "--world-size";
    // `launch` says where it placed the rank (its node, a --hosts-file host's block): launch_node
    if (const char* ln = std::getenv("EMBEDSCOPE_LAUNCH_NODE"); ln && *ln) {
      int node = -1, local = -1;
      char tail = 0;
      if (std::sscanf(ln, "%d/%d%c", &node, &local, &tail) != 2 || node < 0 || local < 0)
        throw es::SpecError(fmt::format("EMBEDSCOPE_LAUNCH_NODE={}: give NODE/LOCAL_RANK, two whole numbers >= 0 "
                                        "(set by embedscope launch)", ln));
      p.node = node;
      p.local_rank = local;
    }
  } else if ((env = es::launch::launch_from_environment(es::launch::launcher_environment()))) {
    if (env->launcher == "Open MPI" && p.rendezvous.empty()) {
      p.mpi = es::launch::mpi_bootstrap(p.run_id_opt->count() > 0 ? p.run_id : env->run_id);
      if (p.mpi->rank != env->rank || p.mpi->world_size != env->world_size)  // never seen; a wrong environment
        throw es::SpecError(fmt::format("MPI says rank {} of {} but OMPI_COMM_WORLD_RANK/SIZE say {} of {}", p.mpi->rank,
                                        p.mpi->world_size, env->rank, env->world_size));
      p.rendezvous = p.mpi->rendezvous;
      p.run_id = p.mpi->run_id;
      env->local_world_size = p.mpi->local_world_size;
      env->local_rank = p.mpi->local_rank;
      env->node = p.mpi->node;
      if (p.mpi->nodes > 1 && p.host_opt->count() == 0) p.host = "";  // Gloo: the address of gethostname()
      from = "Open MPI, store bootstrapped through MPI";
    } else {
      from = env->launcher + "'s environment";
      if (p.run_id_opt->count() == 0 && !env->run_id.empty()) p.run_id = env->run_id;
    }
    p.rank = env->rank;
    p.world_size = env->world_size;
    p.node = env->node;
    p.local_rank = env->local_rank;
    a.world_size_from = "the world size of " + env->launcher + "'s environment";
  } else {
    if (!p.rendezvous.empty()) throw es::SpecError("--rendezvous needs --rank and --world-size (or a launcher's environment)");
    return "";
  }
  if (p.rank >= p.world_size)
    throw es::SpecError(fmt::format("--rank {}: not below the world size {} (ranks are 0..{})", p.rank, p.world_size,
                                    p.world_size - 1));
  if (p.rendezvous.empty())
    throw es::SpecError(fmt::format("rank {} of {} (from {}): give --rendezvous file:///shared/dir, a directory every "
                                    "rank sees, for the ranks to find each other", p.rank, p.world_size, from));
  a.world_size = p.world_size;
  if (env && env->local_world_size > 0 && env->local_world_size < p.world_size && !a.was_given("--local-world-size")) {
    a.local_world_size = env->local_world_size;
    a.local_world_size_from = "the local world size of " + env->launcher + "'s environment";
    // table_row_wise takes node = rank / local world size (TorchRec's convention): say when the
    // launcher placed the ranks otherwise (round robin over the nodes)
    if (env->node >= 0 && env->local_rank >= 0 &&
        p.rank != env->node * env->local_world_size + env->local_rank)
      throw es::SpecError(fmt::format(
          "rank {} is local rank {} of node {} ({}), but table_row_wise takes the ranks of a node to be a block of "
          "{} (node = rank / local world size): place the ranks by node (mpirun --map-by slot, srun "
          "--distribution=block), or give --local-world-size", p.rank, env->local_rank, env->node, from,
          env->local_world_size));
  }
  return from;
}

std::string rank_output(std::string output, ProcessArgs& p) {
  if (output.empty()) {
    std::string base = default_session_name();
    base = p.run_id != "default" ? "embedscope-" + p.run_id : base.substr(0, base.size() - 3);
    output = base + ".rank{rank}.db";
  }
  p.output_pattern = output;
  const auto at = output.find("{rank}");
  if (at == std::string::npos && p.world_size > 1)
    throw es::SpecError(fmt::format("-o {}: every rank writes its own session; put {{rank}} in the name, e.g. "
                                    "run.rank{{rank}}.db", output));
  p.session = at == std::string::npos ? output : rank_session(output, p.rank);
  p.session_before = file_version(p.session);
  return p.session;
}

std::string rank_session(const std::string& pattern, int rank) {
  std::string out = pattern;
  for (auto pos = out.find("{rank}"); pos != std::string::npos; pos = out.find("{rank}"))
    out.replace(pos, 6, std::to_string(rank));
  return out;
}

std::string merged_output(const std::string& pattern) {
  std::string out = pattern;
  if (const auto at = out.find(".rank{rank}"); at != std::string::npos) out.erase(at, 11);
  for (auto pos = out.find("{rank}"); pos != std::string::npos; pos = out.find("{rank}")) out.replace(pos, 6, "all");
  return out;
}

int finish_mpi_run(ProcessArgs& p, int code, bool overwrite) {
  // not a file an earlier run left where this rank, refused before it wrote, would have written
  const std::string session = written_since(p.session, p.session_before) ? p.session : std::string();
  const auto ends = es::launch::mpi_finish(*p.mpi, code, session);
  if (p.mpi->rank != 0) return code;
  int worst = 0;
  std::vector<std::string> sessions;
  for (const auto& e : ends) {
    if (e.code != 0) worst = worst == 2 || e.code == 2 ? 2 : 1;
    if (!e.session.empty()) sessions.push_back(e.session);
  }
  if (ends.size() < 2) return worst;
  if (worst == 2 && sessions.size() < ends.size()) {  // bad input: nothing ran on some rank
    fmt::print(stderr, "embedscope run (rank 0): a rank refused its input; nothing merged\n");
    return worst;
  }
  const std::string merged = merged_output(p.output_pattern);
  try {
    sessions::MergeOptions mo;
    mo.overwrite = overwrite;
    sessions::merge_sessions(sessions, merged, mo);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: the rank sessions could not be merged into {}: {}\n", merged, e.what());
    return worst == 0 ? 1 : worst;
  }
  fmt::print(stderr, "embedscope run (rank 0): merged {} of {} rank sessions into {}\n", sessions.size(), ends.size(),
             merged);
  return worst;
}

}  // namespace embedscope::cli
