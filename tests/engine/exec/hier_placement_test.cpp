// Ranks on several (emulated) devices with several per device (issue 14, the hierarchical
// communicator comm/hier/ on the host stand-in): exactly the model of every rank on one device
// (the same reduction order), the same collective records as the flat communicators, and a
// rank that never arrives named in the group's error with the part it was missed in.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <unistd.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"

namespace es = embedscope::engine;

namespace {

// The tiny preset on `ranks` ranks over `devices` emulated devices (0: one per rank), with a
// session at `session` (empty: none).
es::RunResult hier_tiny_run(int ranks, int devices, int steps, const std::string& session = {}) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = ranks;
  s.steps = steps;
  es::TrainerOptions opt;
  opt.keep_tables = true;
  opt.trace = !session.empty();
  opt.session_path = session;
  opt.emulate_device = true;
  opt.emulated_devices = devices;
  return es::run_training(s, es::plan_sharding(s), opt);
}

std::string hier_session_path(const std::string& what) {
  return (std::filesystem::temp_directory_path() / ("es_hier_" + what + "_" + std::to_string(getpid()) + ".db")).string();
}

}  // namespace

// 4 ranks at 2 per device on 2 devices (the world group hierarchical) train bit for bit the
// model of 4 ranks on 1 device (LocalComm): the composition's all-reduce and reduce-scatter sum
// in member order as LocalComm does, its all-to-all and all-gather move the same bytes.
TEST(HierPlacement, TwoRanksOnEachOfTwoDevicesTrainExactlyTheOneDeviceModel) {
  const es::RunResult one = hier_tiny_run(4, 1, 5);
  const es::RunResult two = hier_tiny_run(4, 2, 5);
  ASSERT_EQ(one.ended, es::RunEnd::complete) << one.error;
  ASSERT_EQ(two.ended, es::RunEnd::complete) << two.error;
  ASSERT_FALSE(one.tables.empty());
  EXPECT_EQ(two.tables, one.tables);
  EXPECT_EQ(two.dense_params, one.dense_params);
  EXPECT_EQ(two.loss, one.loss);
  ASSERT_EQ(two.loss.size(), 5u);
}

// The session of 4 ranks on 2 devices holds the collective records of 4 ranks on 4 devices (flat
// Gloo): the same op, name, group, sequence, bytes and peers per rank - the parts record nothing.
TEST(HierPlacement, SessionRecordsTheFlatGroupsCollectives) {
  const std::string flat_path = hier_session_path("flat"), hier_path = hier_session_path("hier");
  const es::RunResult flat = hier_tiny_run(4, 0, 2, flat_path);
  const es::RunResult hier = hier_tiny_run(4, 2, 2, hier_path);
  ASSERT_EQ(flat.ended, es::RunEnd::complete) << flat.error;
  ASSERT_EQ(hier.ended, es::RunEnd::complete) << hier.error;
  using Key = std::tuple<int32_t, std::string, uint64_t>;
  auto records = [](const std::string& path) {
    std::map<Key, std::tuple<std::string, std::string, int64_t, int64_t, size_t>> out;
    embedscope::sessions::SessionReader session(path);
    for (const auto& c : session.collectives())
      out[{c.rank, c.group, c.sequence}] = {c.op, c.name, c.bytes_sent, c.bytes_received, c.peers.size()};
    return out;
  };
  const auto a = records(flat_path), b = records(hier_path);
  EXPECT_GT(a.size(), 20u);
  EXPECT_EQ(a, b);
  for (const auto& [k, v] : b) EXPECT_EQ(std::get<1>(k).find('/'), std::string::npos) << "a part's group recorded";
  std::filesystem::remove(flat_path);
  std::filesystem::remove(hier_path);
}

// Rank 3 (not its device's leader) stops arriving at the world group's 4th collective: the run
// ends hang; rank 2 (its device's leader) names it under the world group's sequence, with the
// intra-device part it was missed in; the waiting ranks' flight recorders keep world #4.
TEST(HierPlacement, ARankThatNeverArrivesIsNamedWithThePartItWasMissedIn) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 4;
  s.collective_timeout_ms = 800;
  es::TrainerOptions opt;
  opt.emulate_device = true;
  opt.emulated_devices = 2;
  opt.vanish = {3, 4};
  opt.session_path = hier_session_path("hang");
  const auto t0 = std::chrono::steady_clock::now();
  const es::RunResult r = es::run_training(s, es::plan_sharding(s), opt);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(r.ended, es::RunEnd::hang) << r.error;
  EXPECT_NE(r.error.find("(group world, sequence 4) did not finish within 800 ms: rank(s) 3 did not arrive (in its "
                         "intra-device part: "),
            std::string::npos)
      << r.error;
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    EXPECT_EQ(session.status(), "hang");
    std::map<int32_t, std::vector<uint64_t>> started;
    for (const auto& e : session.flight_records())
      if (e.group == "world" && e.state == "started") started[e.rank].push_back(e.sequence);
    for (int rank : {0, 1, 2}) EXPECT_EQ(started[rank], std::vector<uint64_t>{4}) << "rank " << rank;
    EXPECT_TRUE(started[3].empty());
  }
  std::filesystem::remove(opt.session_path);
}
