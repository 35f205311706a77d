// The MPI start and end of `mpirun ... embedscope run` (mpi_bootstrap.h). Built only with
// EMBEDSCOPE_WITH_MPI; mpi_absent.cpp stands in otherwise.
#include "embedscope/engine/exec/launch/mpi_bootstrap.h"

#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine::launch {

namespace {
bool g_finished = false;

// Sends `text` from rank `root` to every rank (its length first).
std::string broadcast(std::string text, int root = 0) {
  int n = static_cast<int>(text.size());
  MPI_Bcast(&n, 1, MPI_INT, root, MPI_COMM_WORLD);
  text.resize(static_cast<size_t>(n));
  if (n > 0) MPI_Bcast(text.data(), n, MPI_CHAR, root, MPI_COMM_WORLD);
  return text;
}

std::string random_id() {
  std::random_device rd;
  return fmt::format("mpi-{:08x}{:08x}", rd(), rd());
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

[[noreturn]] void refuse(const std::string& why) {
  MPI_Finalize();
  g_finished = true;
  throw SpecError(why);
}
}  // namespace

bool built_with_mpi() { return true; }

MpiBootstrap mpi_bootstrap(const std::string& run_id) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw std::logic_error("mpi_bootstrap: MPI is initialised already");
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MpiBootstrap b;
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.world_size);

  // the node of every rank: the shared-memory communicator, numbered by its lowest rank
  MPI_Comm node_comm;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, b.rank, MPI_INFO_NULL, &node_comm);
  MPI_Comm_rank(node_comm, &b.local_rank);
  MPI_Comm_size(node_comm, &b.local_world_size);
  const int leader = b.local_rank == 0 ? 1 : 0;
  int before = 0;  // node leaders with a lower rank than this node's leader
  MPI_Exscan(&leader, &before, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (b.rank == 0) before = 0;  // MPI_Exscan leaves rank 0's result undefined
  int node = leader ? before : 0;
  MPI_Bcast(&node, 1, MPI_INT, 0, node_comm);  // the leader is the node's rank 0
  b.node = node;
  MPI_Allreduce(&leader, &b.nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_free(&node_comm);

  std::string dir, error;
  if (b.rank == 0) {
    const char* base = std::getenv("EMBEDSCOPE_RENDEZVOUS_DIR");
    std::string from = "EMBEDSCOPE_RENDEZVOUS_DIR";
    if (!base || !*base) base = std::getenv("TMPDIR"), from = "TMPDIR";
    if (!base || !*base) base = "/tmp", from = "the default";
    std::string templ = std::string(base) + "/embedscope-rendezvous-XXXXXX";
    if (mkdtemp(templ.data()))
      dir = std::filesystem::absolute(templ).string();
    else
      error = fmt::format("rank 0 cannot make a rendezvous directory in {} ({}): {}", base, from, std::strerror(errno));
  }
  error = broadcast(error);
  if (!error.empty()) refuse(error);
  b.directory = broadcast(dir);
  b.rendezvous = "file://" + b.directory;
  b.run_id = broadcast(b.rank == 0 ? (run_id.empty() ? random_id() : run_id) : std::string());

  struct stat st{};
  const int sees = stat(b.directory.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? 1 : 0;
  // the lowest rank that does not see it (world size when every rank does)
  int blind = sees ? b.world_size : b.rank, first_blind = 0;
  MPI_Allreduce(&blind, &first_blind, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first_blind < b.world_size) {
    const std::string host = broadcast(hostname(), first_blind);
    if (b.rank == 0) rmdir(b.directory.c_str());
    refuse(fmt::format("rank {} (host {}) does not see the rendezvous directory {} that rank 0 made: the ranks run on "
                       "{} hosts that do not share it; set EMBEDSCOPE_RENDEZVOUS_DIR to a directory on a file system "
                       "every host mounts, or give --rendezvous redis://HOST:PORT (a Redis server every host reaches)",
                       first_blind, host, b.directory, b.nodes));
  }
  return b;
}

std::vector<MpiRankEnd> mpi_finish(const MpiBootstrap& b, int code, const std::string& session) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized || g_finished) throw std::logic_error("mpi_finish: MPI was not bootstrapped, or is finished already");
  std::vector<int> codes(static_cast<size_t>(b.rank == 0 ? b.world_size : 0));
  MPI_Gather(&code, 1, MPI_INT, codes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int n = static_cast<int>(session.size());
  std::vector<int> lengths(codes.size()), at(codes.size());
  MPI_Gather(&n, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (b.rank == 0) {
    int total = 0;
    for (size_t r = 0; r < lengths.size(); ++r) at[r] = total, total += lengths[r];
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(session.data(), n, MPI_CHAR, all.data(), lengths.data(), at.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<MpiRankEnd> ends;
  for (size_t r = 0; r < codes.size(); ++r)
    ends.push_back({static_cast<int>(r), codes[r], all.substr(static_cast<size_t>(at[r]), static_cast<size_t>(lengths[r]))});
  if (b.rank == 0) {
    std::error_code ec;
    std::filesystem::remove_all(b.directory, ec);
  }
  MPI_Finalize();
  g_finished = true;
  return ends;
}

}  // namespace embedscope::engine::launch
