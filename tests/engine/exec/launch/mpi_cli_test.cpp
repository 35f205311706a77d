// One rank per process started by mpirun without --rendezvous (the store bootstrapped through
// MPI, exec/launch/mpi_bootstrap.h) against the threaded run of the same workload, an error that
// every rank reaches the end of, and "hosts" on loopback addresses of their own (127.0.0.2,
// 127.0.0.3) with the node and local rank from a launcher's environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>
#include <tuple>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace fs = std::filesystem;
using nlohmann::json;
using embedscope::sessions::SessionReader;

namespace {
fs::path mpi_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_mpi_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
using Result = embedscope::test_support::CliResult;
std::string mpi_path(const fs::path& p) { return p.string(); }
Result mpi_cli(const std::string& args) { return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, mpi_scratch()); }

std::string mpi_slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

// mpirun -n N on this machine (as root too), the rendezvous under `rv_dir`, at most 120 s; each
// rank's stdout into scratch/mpi_out.R (mpirun forwards the ranks' output in chunks that may
// interleave within a line), stderr through mpirun.
Result mpirun(int n, const std::string& rv_dir, const std::string& args) {
  return embedscope::test_support::run_cli(
      "EMBEDSCOPE_RENDEZVOUS_DIR=" + rv_dir + " timeout 120 mpirun --oversubscribe --allow-run-as-root -n " +
          std::to_string(n) + " sh -c 'exec " + EMBEDSCOPE_CLI + " " + args + " >" + mpi_path(mpi_scratch() / "mpi_out.") +
          "$OMPI_COMM_WORLD_RANK'",
      "", mpi_scratch());
}

std::map<std::pair<int64_t, int32_t>, double> losses(const SessionReader& x) {
  std::map<std::pair<int64_t, int32_t>, double> m;
  for (const auto& st : x.steps()) m[{st.step, st.rank}] = st.loss;
  return m;
}
std::map<std::tuple<int32_t, std::string, uint64_t>, std::pair<int64_t, int64_t>> bytes(const SessionReader& x) {
  std::map<std::tuple<int32_t, std::string, uint64_t>, std::pair<int64_t, int64_t>> m;
  for (const auto& c : x.collectives()) m[{c.rank, c.group, c.sequence}] = {c.bytes_sent, c.bytes_received};
  return m;
}
}  // namespace

// `mpirun -n 4 embedscope run ...` with no --rendezvous: MPI bootstraps the FileStore, the four
// processes give the four threads' losses and collectives, and rank 0 merges the four sessions.
TEST(MpiRun, FourRanksWithoutRendezvousGiveTheThreadsLossesAndOneMergedSession) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed (.ci/setup installs openmpi-bin)";
  const std::string args = "--preset tiny --sharding row_wise --steps 3 --warmup-steps 1";
  Result t = mpi_cli("run " + args + " --devices 4 --json -o " + mpi_path(mpi_scratch() / "threads.db"));
  ASSERT_EQ(t.code, 0) << t.err;
  const json tj = json::parse(t.out);
  const fs::path rv = mpi_scratch() / "rv";
  fs::create_directories(rv);
  Result m = mpirun(4, mpi_path(rv), "run " + args + " --json -o " + mpi_path(mpi_scratch() / "mpi.rank{rank}.db"));
  ASSERT_EQ(m.code, 0) << m.err;
  std::map<int, json> by_rank;
  for (int r = 0; r < 4; ++r) by_rank[r] = json::parse(mpi_slurp(mpi_scratch() / ("mpi_out." + std::to_string(r))));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(by_rank[r]["process_rank"], r);
    EXPECT_EQ(by_rank[r]["ended"], "complete");
    EXPECT_EQ(by_rank[r]["loss"], tj["loss"]) << "rank " << r;
    EXPECT_EQ(by_rank[r]["ranks"][0]["bytes_sent"], tj["ranks"][static_cast<size_t>(r)]["bytes_sent"]) << "rank " << r;
    EXPECT_NE(m.err.find("this process: rank " + std::to_string(r) + " of 4 (from Open MPI, store bootstrapped through MPI)"),
              std::string::npos) << m.err;
  }
  EXPECT_NE(m.err.find("embedscope run (rank 0): merged 4 of 4 rank sessions into " + mpi_path(mpi_scratch() / "mpi.db")),
            std::string::npos) << m.err;
  const SessionReader a(mpi_path(mpi_scratch() / "threads.db")), b(mpi_path(mpi_scratch() / "mpi.db"));
  EXPECT_EQ(b.status(), "complete");
  EXPECT_EQ(b.meta("world_size"), "4");
  EXPECT_EQ(losses(a), losses(b));
  EXPECT_EQ(losses(b).size(), 16u);  // (1 warmup + 3) steps x 4 ranks
  EXPECT_EQ(bytes(a), bytes(b));
  const std::string run_id = SessionReader(mpi_path(mpi_scratch() / "mpi.rank0.db")).meta("run_id");
  EXPECT_EQ(run_id.rfind("ompi-", 0), 0u) << run_id;  // the launcher's job id, rank 0's choice
  for (int r = 0; r < 4; ++r) {
    const SessionReader one(mpi_path(mpi_scratch() / ("mpi.rank" + std::to_string(r) + ".db")));
    EXPECT_EQ(one.meta("process_rank"), std::to_string(r));
    EXPECT_EQ(one.meta("run_id"), run_id);
    EXPECT_EQ(one.meta("rendezvous").rfind("file://" + mpi_path(rv) + "/embedscope-rendezvous-", 0), 0u) << one.meta("rendezvous");
    EXPECT_EQ(one.meta("launch_node"), "0/" + std::to_string(r));  // one node: MPI's shared-memory node
    EXPECT_NE(one.meta("gloo_device").find("addr=[127.0.0.1]"), std::string::npos) << one.meta("gloo_device");
  }
  EXPECT_TRUE(fs::is_empty(rv));  // rank 0 removed the store's directory at the end
}

// A bad -o on every rank after the bootstrap: each rank says so, every rank reaches the end
// (no rank is left waiting), the exit is non-zero, nothing is merged, the store is removed.
TEST(MpiRun, BadInputAfterTheBootstrapEndsEveryRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed (.ci/setup installs openmpi-bin)";
  const fs::path rv = mpi_scratch() / "rv_bad";
  fs::create_directories(rv);
  Result m = mpirun(2, mpi_path(rv), "run --preset tiny --steps 2 -o " + mpi_path(mpi_scratch() / "one.db"));
  EXPECT_NE(m.code, 0);
  EXPECT_NE(m.code, 124) << "timed out: a rank was left waiting\n" << m.err;  // timeout(1)'s code
  EXPECT_NE(m.err.find("error: -o " + mpi_path(mpi_scratch() / "one.db") + ": every rank writes its own session"), std::string::npos)
      << m.err;
  EXPECT_NE(m.err.find("embedscope run (rank 0): a rank refused its input; nothing merged"), std::string::npos) << m.err;
  EXPECT_FALSE(fs::exists(mpi_scratch() / "one.db"));
  EXPECT_TRUE(fs::is_empty(rv));
}

// Two "hosts" of two ranks each, every host on a loopback address of its own, rank, node and
// local rank from torchrun's variables: table_row_wise over 2 nodes gives the collectives and
// losses of 4 threads with --local-world-size 2; each session names its device's address.
TEST(LoopbackHosts, TwoHostsOfTwoRanksGiveTheThreadsCollectives) {
  const std::string args = "--preset tiny --sharding table_row_wise --steps 2 --warmup-steps 1";
  Result t = mpi_cli("run " + args + " --devices 4 --local-world-size 2 --json -o " + mpi_path(mpi_scratch() / "h_threads.db"));
  ASSERT_EQ(t.code, 0) << t.err;
  const fs::path dir = mpi_scratch() / "h_store";
  fs::create_directories(dir);
  // four processes at once, each with its environment; their exit codes in h<R>.rc
  std::string sh;
  for (int r = 0; r < 4; ++r)
    sh += "(RANK=" + std::to_string(r) + " WORLD_SIZE=4 LOCAL_RANK=" + std::to_string(r % 2) +
          " LOCAL_WORLD_SIZE=2 GROUP_RANK=" + std::to_string(r / 2) + " timeout 120 " + EMBEDSCOPE_CLI + " run " + args +
          " --host 127.0.0." + std::to_string(2 + r / 2) + " --rendezvous file://" + mpi_path(dir) + " --json -o " +
          mpi_path(mpi_scratch() / "h.rank{rank}.db") + " >" + mpi_path(mpi_scratch() / ("h" + std::to_string(r) + ".out")) + " 2>" +
          mpi_path(mpi_scratch() / ("h" + std::to_string(r) + ".err")) + "; echo $? >" + mpi_path(mpi_scratch() / ("h" + std::to_string(r) + ".rc")) +
          ") & ";
  ASSERT_EQ(std::system((sh + "wait").c_str()), 0);
  std::vector<std::string> files;
  for (int r = 0; r < 4; ++r) {
    const std::string rc = mpi_slurp(mpi_scratch() / ("h" + std::to_string(r) + ".rc")),
                      err = mpi_slurp(mpi_scratch() / ("h" + std::to_string(r) + ".err"));
    ASSERT_EQ(rc, "0\n") << "rank " << r << ": " << err;
    EXPECT_NE(err.find("this process: rank " + std::to_string(r) + " of 4 (from torchrun's environment)"),
              std::string::npos) << err;
    files.push_back(mpi_path(mpi_scratch() / ("h.rank" + std::to_string(r) + ".db")));
    const SessionReader x(files.back());
    EXPECT_NE(x.meta("gloo_device").find("addr=[127.0.0." + std::to_string(2 + r / 2) + "]"), std::string::npos)
        << x.meta("gloo_device");
    EXPECT_EQ(x.meta("launch_node"), std::to_string(r / 2) + "/" + std::to_string(r % 2));
  }
  embedscope::sessions::merge_sessions(files, mpi_path(mpi_scratch() / "h_merged.db"), {});
  const SessionReader a(mpi_path(mpi_scratch() / "h_threads.db")), b(mpi_path(mpi_scratch() / "h_merged.db"));
  EXPECT_EQ(losses(a), losses(b));
  EXPECT_EQ(bytes(a), bytes(b));
  EXPECT_FALSE(bytes(b).empty());
  // and not what one node of 4 gives: the local world size came from LOCAL_WORLD_SIZE
  Result one_node = mpi_cli("run " + args + " --devices 4 --json -o " + mpi_path(mpi_scratch() / "h_one_node.db"));
  ASSERT_EQ(one_node.code, 0) << one_node.err;
  EXPECT_NE(bytes(SessionReader(mpi_path(mpi_scratch() / "h_one_node.db"))), bytes(b));
}

// Ranks placed round robin over the nodes (rank 1 on node 1) cannot be table_row_wise's blocks.
TEST(LoopbackHosts, RanksNotInBlocksPerNodeAreRefused) {
  Result r = embedscope::test_support::run_cli(
      "RANK=1 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 " + std::string(EMBEDSCOPE_CLI),
      "run --preset tiny --rendezvous file://" + mpi_path(mpi_scratch()), mpi_scratch());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: rank 1 is local rank 0 of node 1 (torchrun's environment), but table_row_wise takes the "
                       "ranks of a node to be a block of 2 (node = rank / local world size)"),
            std::string::npos) << r.err;
}
