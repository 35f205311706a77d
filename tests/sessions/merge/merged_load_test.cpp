// The load of a run of several processes in its merged session (sessions/merge/merged_load.h):
// the rule by hand, and merge_sessions writing the run's load (not the first process's, which
// counts the sibling rank processes as other load).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/merge/merged_load.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {

fs::path load_dir() {
  static const fs::path p = [] {
    const fs::path d = fs::temp_directory_path() / ("es_merged_load_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return p;
}

// one process's rank session of a launch run (run id "run-1"): rank `rank` on `host`, one step,
// its measured load keys
std::string rank_session(int rank, const std::string& host, const std::string& self, const std::string& other,
                         const std::string& own_runnable, const std::string& other_runnable) {
  const std::string path = (load_dir() / ("r" + std::to_string(rank) + "_" + host + ".db")).string();
  SessionWriter w(path, true);
  w.set_metadata(meta::kRunId, "run-1");
  w.set_metadata(meta::kRunDigest, "digest-1");
  w.set_metadata(meta::kHost, host);
  w.set_metadata(meta::kWorldSize, "4");
  w.set_metadata(meta::kCpuSelfCores, self);
  w.set_metadata(meta::kCpuOtherCores, other);
  if (!own_runnable.empty()) w.set_metadata(meta::kCpuOwnRunnable, own_runnable);
  if (!other_runnable.empty()) w.set_metadata(meta::kCpuOtherRunnable, other_runnable);
  w.add_rank({rank, host, "cpu (thread)", 1 << 30});
  StepMetric s;
  s.rank = rank;
  s.step = 0;
  s.start_ns = 1000;
  s.end_ns = 2000000;
  w.add_step(s);
  w.close("complete", "");
  return path;
}

}  // namespace

TEST(MergedLoad, RuleByHand) {
  // 4 processes on one host of 2 busy cores: each saw itself at 0.25 and the rest at 1.75 cores
  std::vector<ProcessLoad> p(4, ProcessLoad{"vm", 0.25, 1.75, 2.0, 13.0});
  MergedLoad m = merge_process_load(p);
  EXPECT_DOUBLE_EQ(m.self_cores, 1.0);          // 4 x 0.25
  EXPECT_DOUBLE_EQ(m.other_cores, 2.0 - 1.0);   // the host's 2 busy cores less the run's 1
  EXPECT_DOUBLE_EQ(*m.own_runnable, 8.0);       // 4 x 2
  EXPECT_DOUBLE_EQ(*m.other_runnable, 15.0 - 8.0);
  EXPECT_EQ(m.processes, 4);
  EXPECT_EQ(m.hosts, 1);
  // the tester's rw4 launch (rank sessions rw4.rank0..3.db): self 0.238, 0.243, 0.236, 0.221;
  // other 1.756, 1.751, 1.756, 1.771: self 0.938; busy (1.994 + 1.994 + 1.992 + 1.992) / 4 = 1.993;
  // other 1.055: G 1.125 (each process alone: 1.756 / 0.238 = 7.38)
  m = merge_process_load({{"vm", 0.238, 1.756, {}, {}},
                          {"vm", 0.243, 1.751, {}, {}},
                          {"vm", 0.236, 1.756, {}, {}},
                          {"vm", 0.221, 1.771, {}, {}}});
  EXPECT_NEAR(m.self_cores, 0.938, 1e-12);
  EXPECT_NEAR(m.other_cores, 1.055, 1e-12);
  EXPECT_FALSE(m.own_runnable.has_value());  // no process sampled its threads
  // two hosts: each host's rule, summed; a host whose processes' busy cores are all the run's: 0 other
  m = merge_process_load({{"a", 1.0, 2.0, {}, {}}, {"a", 1.0, 2.0, {}, {}}, {"b", 0.5, 0.25, {}, {}}});
  EXPECT_DOUBLE_EQ(m.self_cores, 2.5);
  EXPECT_DOUBLE_EQ(m.other_cores, (3.0 - 2.0) + (0.75 - 0.5));
  EXPECT_EQ(m.hosts, 2);
  m = merge_process_load({{"a", 1.0, 0.5, {}, {}}, {"a", 1.0, 0.5, {}, {}}});
  EXPECT_DOUBLE_EQ(m.other_cores, 0.0);  // max(0, 1.5 - 2)
  EXPECT_THROW(merge_process_load({}), std::invalid_argument);
  EXPECT_THROW(merge_process_load({{"a", -1.0, 0.5, {}, {}}}), std::invalid_argument);
}

TEST(MergedLoad, MergeWritesTheRunsLoad) {
  const std::vector<std::string> ranks = {
      rank_session(0, "vm", "0.250", "1.750", "2.000", "13.000"), rank_session(1, "vm", "0.300", "1.700", "2.500", "12.500"),
      rank_session(2, "vm", "0.200", "1.800", "1.500", "13.500"), rank_session(3, "vm", "0.250", "1.750", "2.000", "13.000")};
  const std::string out = (load_dir() / "merged.db").string();
  merge_sessions(ranks, out, {"none", true});
  const SessionReader m(out);
  // self: 0.25 + 0.3 + 0.2 + 0.25 = 1.0; every process saw 2.0 busy cores: other 1.0
  EXPECT_EQ(m.meta(meta::kCpuSelfCores), "1.000");
  EXPECT_EQ(m.meta(meta::kCpuOtherCores), "1.000");
  // own threads 2 + 2.5 + 1.5 + 2 = 8; every process saw 15 runnable: other 7
  EXPECT_EQ(m.meta(meta::kCpuOwnRunnable), "8.000");
  EXPECT_EQ(m.meta(meta::kCpuOtherRunnable), "7.000");
  const auto how = nlohmann::json::parse(m.meta(meta::kCpuLoadMerged));
  EXPECT_EQ(how["processes"], 4);
  EXPECT_EQ(how["hosts"], 1);
  // a process without its load: the run's load is not known (no load keys, not the first's)
  const std::vector<std::string> partial = {rank_session(0, "vm2", "0.250", "1.750", "", ""),
                                            rank_session(1, "vm2", "", "", "", "")};
  const std::string out2 = (load_dir() / "merged_partial.db").string();
  merge_sessions(partial, out2, {"none", true});
  const SessionReader p(out2);
  EXPECT_EQ(p.meta(meta::kCpuSelfCores), "");
  EXPECT_EQ(p.meta(meta::kCpuOtherCores), "");
  EXPECT_EQ(p.meta(meta::kCpuLoadMerged), "");
}
