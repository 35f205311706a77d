// `embedscope launch --hosts-file` (issue 18): the hosts file's parser and the placement of ranks
// in blocks on its hosts (exec/launch/hosts_file.h), and a launch of 4 processes on two loopback
// "hosts" that gives table_row_wise the collectives of 4 threads with 2 ranks per node.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "embedscope/engine/exec/launch/hosts_file.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

using namespace embedscope::engine;
using launch::parse_hosts;
using launch::place_ranks;
namespace fs = std::filesystem;

namespace {
// The SpecError text of f(), "" when it does not throw.
template <class F>
std::string hosts_error(F&& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(HostsFile, ParsesAddressesSlotsAndComments) {
  const auto h = parse_hosts("# two hosts\n127.0.0.2 slots=2\n\n  127.0.0.3   slots=2 # the second\n::1\nlocalhost slots=4\n",
                             "hosts");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].address, "127.0.0.2");
  EXPECT_EQ(h[0].slots, 2);
  EXPECT_EQ(h[0].line, 2);
  EXPECT_EQ(h[1].address, "127.0.0.3");
  EXPECT_EQ(h[1].line, 4);
  EXPECT_EQ(h[2].address, "::1");
  EXPECT_EQ(h[2].slots, 1);
  EXPECT_EQ(h[3].slots, 4);
}

TEST(HostsFile, BadLinesAreNamedWithTheirLine) {
  EXPECT_EQ(hosts_error([] { parse_hosts("127.0.0.2\n10.0.0.7 slots=2\n", "h.txt"); }),
            "h.txt:2: 10.0.0.7 is not a loopback address (127.0.0.0/8, ::1, localhost): launch runs every rank on this "
            "machine; for several machines use mpirun or srun");
  EXPECT_EQ(hosts_error([] { parse_hosts("127.0.0.2 cpus=2\n", "h.txt"); }),
            "h.txt:1: 'cpus=2': expected slots=N after the address");
  EXPECT_EQ(hosts_error([] { parse_hosts("127.0.0.2 slots=0\n", "h.txt"); }),
            "h.txt:1: slots=0: give a whole number from 1 to 1024");
  EXPECT_EQ(hosts_error([] { parse_hosts("127.0.0.2 slots=2x\n", "h.txt"); }),
            "h.txt:1: slots=2x: give a whole number from 1 to 1024");
  EXPECT_EQ(hosts_error([] { parse_hosts("127.0.0.2\n127.0.0.2\n", "h.txt"); }),
            "h.txt:2: 127.0.0.2 is given twice; give each host once, with its slots");
  EXPECT_EQ(hosts_error([] { parse_hosts("# nothing\n\n", "h.txt"); }),
            "h.txt: no host in it (one per line: ADDRESS [slots=N])");
  EXPECT_EQ(hosts_error([] { launch::read_hosts_file("/nonexistent/hosts"); }),
            "/nonexistent/hosts: cannot open the hosts file: No such file or directory");
  EXPECT_EQ(hosts_error([] { launch::read_hosts_file("/tmp"); }), "/tmp: is a directory, not a hosts file");
}

TEST(HostsFile, RanksFillTheHostsInBlocksOfOneSize) {
  const auto hosts = parse_hosts("127.0.0.2 slots=2\n127.0.0.3 slots=2\n127.0.0.4 slots=3\n", "h");
  const auto p = place_ranks(hosts, 4, "h");
  EXPECT_EQ(p.host_of_rank, (std::vector<std::string>{"127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"}));
  EXPECT_EQ(p.local_world_size, 2);
  EXPECT_EQ(p.hosts_used, 2);
  EXPECT_EQ(place_ranks(hosts, 2, "h").hosts_used, 1);
  EXPECT_EQ(hosts_error([&] { place_ranks(hosts, 3, "h"); }),
            "h:2: 3 ranks leave 127.0.0.3 with 1 of its 2 slots: the nodes are blocks of one size; launch a multiple of "
            "2 ranks");
  EXPECT_EQ(hosts_error([&] { place_ranks(hosts, 6, "h"); }),
            "h:3: 127.0.0.4 has 3 slots, 127.0.0.2 has 2: the hosts a run uses are its nodes, blocks of one size "
            "(table_row_wise's local world size); give every host the same slots");
  EXPECT_EQ(hosts_error([&] { place_ranks(hosts, 8, "h"); }), "h: 7 slots on 3 hosts for 8 ranks; give more slots (ADDRESS slots=N)");
}

// launch -n 4 on two loopback hosts of 2 slots: each rank's Gloo device on its host's address,
// and table_row_wise's node groups of 2 ranks: the losses and per-collective bytes of 4 threads
// with --local-world-size 2.
TEST(HostsFile, LaunchOnTwoLoopbackHostsGivesTheThreadsOfTwoNodes) {
  const fs::path dir = fs::temp_directory_path() / ("es_hosts_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "hosts") << "127.0.0.2 slots=2\n127.0.0.3 slots=2\n";
  const std::string args = "--preset tiny --sharding table_row_wise --steps 2 --warmup-steps 1";
  auto cli = [&](const std::string& a) { return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, a, dir); };
  auto t = cli("run " + args + " --devices 4 --local-world-size 2 --json -o " + (dir / "threads.db").string());
  ASSERT_EQ(t.code, 0) << t.err;
  auto l = cli("launch -n 4 --hosts-file " + (dir / "hosts").string() + " run " + args + " --json -o " +
               (dir / "hosts.db").string());
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_NE(l.err.find("embedscope launch: node 1 on 127.0.0.3: ranks 2-3"), std::string::npos) << l.err;
  for (int r = 0; r < 4; ++r) {
    const embedscope::sessions::SessionReader one((dir / ("hosts.rank" + std::to_string(r) + ".db")).string());
    EXPECT_NE(one.meta("gloo_device").find("addr=[127.0.0." + std::to_string(2 + r / 2) + "]"), std::string::npos)
        << one.meta("gloo_device");
  }
  auto collectives = [](const std::string& path) {
    std::map<std::tuple<int32_t, std::string, uint64_t>, std::pair<int64_t, int64_t>> m;
    for (const auto& c : embedscope::sessions::SessionReader(path).collectives())
      m[{c.rank, c.group, c.sequence}] = {c.bytes_sent, c.bytes_received};
    return m;
  };
  auto losses = [](const std::string& path) {
    std::map<std::pair<int64_t, int32_t>, double> m;
    for (const auto& s : embedscope::sessions::SessionReader(path).steps()) m[{s.step, s.rank}] = s.loss;
    return m;
  };
  const auto a = collectives((dir / "threads.db").string()), b = collectives((dir / "hosts.db").string());
  EXPECT_EQ(a, b);
  EXPECT_EQ(b.count({2, "node1", 1}), 1u);  // rank 2's first collective in its node's group
  EXPECT_EQ(losses((dir / "threads.db").string()), losses((dir / "hosts.db").string()));
  // the hosts file sets --host and --local-world-size itself
  auto bad = cli("launch -n 4 --hosts-file " + (dir / "hosts").string() + " run " + args + " --local-world-size 4");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--local-world-size is set by the hosts file for every rank; leave it out"), std::string::npos)
      << bad.err;
  fs::remove_all(dir);
}
