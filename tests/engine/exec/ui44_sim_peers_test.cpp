// tester44 F15: a simulated session above 64 ranks keeps the member list (and the per-peer
// splits) of every collective whose group has at most 64 members - a node's 8 GPUs, the 16
// cross-node peers of a 128-GPU cluster - and leaves them out only for a larger group (the world
// of 128 ranks: 128 records of 128 numbers a call). Before, every record of a 128-rank session
// had empty peers.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"

namespace {

TEST(Ui44SimulatedPeers, GroupsOfAtMost64KeepTheirMembersAt128Ranks) {
  namespace es = embedscope::engine;
  const auto dir = std::filesystem::temp_directory_path() / "embedscope_ui44_peers";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.backend = es::Backend::simulated;
  s.devices.hardware = "h100_sxm";  // 8 GPUs a node: 16 nodes
  s.devices.count = 128;
  s.sharding.default_type = es::ShardingType::table_row_wise;
  s.steps = 1;
  s.warmup_steps = 0;
  s = es::with_resolved_backend(s, "test");
  es::TrainerOptions o;
  o.session_path = (dir / "s.db").string();
  ASSERT_EQ(es::run_training(s, es::plan_sharding(s), o).ended, es::RunEnd::complete);
  embedscope::sessions::SessionReader reader(o.session_path);
  std::map<std::string, int> records;  // by kind of group: node, cross, world
  for (const auto& c : reader.collectives()) {
    SCOPED_TRACE(c.name + " in " + c.group + " on rank " + std::to_string(c.rank));
    if (c.group.starts_with("node")) {
      // node n: ranks 8n .. 8n+7, in order, this rank among them
      const int n = std::stoi(c.group.substr(4));
      ASSERT_EQ(c.peers.size(), 8u);
      for (int i = 0; i < 8; ++i) EXPECT_EQ(c.peers[static_cast<size_t>(i)], 8 * n + i);
      EXPECT_EQ(c.rank / 8, n);
      EXPECT_EQ(c.send_elements.size(), 8u);
      ++records["node"];
    } else if (c.group.starts_with("cross")) {
      // cross l: local rank l of each of the 16 nodes
      const int l = std::stoi(c.group.substr(5));
      ASSERT_EQ(c.peers.size(), 16u);
      for (int i = 0; i < 16; ++i) EXPECT_EQ(c.peers[static_cast<size_t>(i)], 8 * i + l);
      EXPECT_EQ(c.rank % 8, l);
      ++records["cross"];
    } else {
      EXPECT_EQ(c.group, "world");
      EXPECT_TRUE(c.peers.empty());  // 128 members: left out
      EXPECT_TRUE(c.send_elements.empty());
      ++records["world"];
    }
  }
  EXPECT_GT(records["node"], 0);
  EXPECT_GT(records["cross"], 0);
  EXPECT_GT(records["world"], 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
