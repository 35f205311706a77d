// Stragglers, the GPU kernel breakdown and the critical path's top rows in `embedscope stats`
// (tester60c F2, F6, F7). Figures computed by hand in the comments.
//   - add_peer_waits on hand-made collective instances of 3 ranks (ties, a member that ended
//     before the last one joined);
//   - the tester's straggler trace (tests/data/traces/straggler: tester60c's mk.py with rank 1's
//     gemm_kernel_a 300 us and its all-reduce at 1400-1500 us; rank 0's runs 1250-1500 us): one
//     all-reduce in 2 profiler steps, rank 0 waits 150 us for rank 1;
//   - a trace written here with an all-reduce in each of its 2 steps, rank 1 late by 150 us in both;
//   - an engine run's session (not imported): the straggler line beside its load imbalance.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/critical_path.h"
#include "embedscope/sessions/analysis/kernel_breakdown.h"
#include "embedscope/sessions/analysis/stragglers.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace ss = embedscope::sessions;
namespace fs = std::filesystem;
using nlohmann::json;

embedscope::test_support::CliResult ana60_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, ss::testing::import_scratch());
}

ss::OpRecord comm_op(int32_t rank, int64_t start, int64_t end, uint64_t seq) {
  ss::OpRecord o;
  o.rank = rank;
  o.lane = 1;
  o.name_id = 7;
  o.category = ss::OpCategory::comm;
  o.start_ns = start;
  o.end_ns = end;
  o.correlation = seq;
  return o;
}

bool contains(const std::string& out, const std::string& what) { return out.find(what) != std::string::npos; }

// The tester's mk.py with two steps that each hold an all-reduce: per step (us from the step's
// start) rank 0 gemm_kernel_a [100, 300), all-reduce [250, 500), gemm_kernel_b [550, 700); rank 1
// gemm_kernel_a [100, 400), all-reduce [400, 500), gemm_kernel_b [550, 700).
void write_two_step_trace(const fs::path& dir) {
  fs::create_directories(dir);
  for (int rank = 0; rank < 2; ++rank) {
    json ev = json::array();
    const auto x = [&](json e) {
      e["ph"] = "X";
      ev.push_back(std::move(e));
    };
    for (int s = 0; s < 2; ++s) {
      const int64_t t = 1000 + 1000 * s;
      x({{"cat", "cpu_op"}, {"name", "ProfilerStep#" + std::to_string(s + 1)}, {"pid", 1}, {"tid", 1}, {"ts", t}, {"dur", 1000}, {"args", json::object()}});
      x({{"cat", "cpu_op"}, {"name", "record_param_comms"}, {"pid", 1}, {"tid", 1}, {"ts", t + 55}, {"dur", 20},
         {"args", {{"Collective name", "allreduce"}, {"In msg nelems", 1024}, {"Out msg nelems", 1024}, {"dtype", "Float"},
                   {"Group size", 2}, {"Process Group Ranks", "[0, 1]"}}}});
      struct K {
        std::string name;
        int64_t ts, dur, stream, launch;
      };
      const std::vector<K> kernels = {
          {"gemm_kernel_a", t + 100, rank == 0 ? 200 : 300, 7, t + 50},
          {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", t + (rank == 0 ? 250 : 400),
           rank == 0 ? 250 : 100, 20, t + 60},
          {"gemm_kernel_b", t + 550, 150, 7, t + 70}};
      int64_t corr = 10 * (s + 1);
      for (const auto& k : kernels) {
        ++corr;
        x({{"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 1}, {"tid", 1}, {"ts", k.launch}, {"dur", 5},
           {"args", {{"correlation", corr}}}});
        x({{"cat", "kernel"}, {"name", k.name}, {"pid", 0}, {"tid", k.stream}, {"ts", k.ts}, {"dur", k.dur},
           {"args", {{"device", 0}, {"stream", k.stream}, {"correlation", corr}}}});
      }
    }
    const json trace{{"schemaVersion", 1},
                     {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
                     {"deviceProperties", json::array({{{"id", 0}, {"name", "FakeGPU"}}})},
                     {"traceEvents", ev},
                     {"baseTimeNanoseconds", 0}};
    std::ofstream(dir / ("rank" + std::to_string(rank) + ".json")) << trace.dump();
  }
}
}  // namespace

// Four instances on ranks 0-2 (ns):
//   seq 1: starts 0, 30, 60 (end 100)      latest 60: waits 60, 30, 0; rank 2 last, cost 90
//   seq 2: ranks 0, 1 start together at 10   no one last, no wait
//   seq 3: rank 0 [0, 20), rank 1 [50, 70)   rank 0 waits until its end: 20; rank 1 last, cost 20
//   seq 4: starts 0, 40, 40 (end 100)      ranks 1 and 2 tie last; rank 0's 40 split 20 / 20
// and seq 5 on rank 2 alone (no peer: in no count).
TEST(Ana60Stragglers, PeerWaitsOfHandMadeInstances) {
  const std::vector<ss::OpRecord> ops = {comm_op(0, 0, 100, 1),  comm_op(1, 30, 100, 1), comm_op(2, 60, 100, 1),
                                         comm_op(0, 10, 50, 2),  comm_op(1, 10, 50, 2),  comm_op(0, 0, 20, 3),
                                         comm_op(1, 50, 70, 3),  comm_op(0, 0, 100, 4),  comm_op(1, 40, 100, 4),
                                         comm_op(2, 40, 100, 4), comm_op(2, 200, 300, 5)};
  std::map<int32_t, ss::RankPeerWait> out;
  ss::add_peer_waits(ops, ss::collective_instances(ops, {}), out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], (ss::RankPeerWait{0, 4, 60 + 0 + 20 + 40, 0, 0}));
  EXPECT_EQ(out[1], (ss::RankPeerWait{1, 4, 30 + 0 + 0 + 0, 2, 20 + 20}));
  EXPECT_EQ(out[2], (ss::RankPeerWait{2, 2, 0, 2, 90 + 20}));
  std::vector<ss::RankPeerWait> ranks{out[0], out[1], out[2]};
  ASSERT_TRUE(ss::straggler(ranks));
  EXPECT_EQ(ss::straggler(ranks)->rank, 2);
  EXPECT_EQ(ss::straggler_text(ranks, 2),
            "rank 2: the last to arrive in 2 of its 2 collectives; its peers waited 110 ns for it (55 ns per step)");
  // nobody late: "none", not silence; no shared collective: nothing to say
  const std::vector<ss::RankPeerWait> together{{0, 3, 0, 0, 0}, {1, 3, 0, 0, 0}};
  EXPECT_FALSE(ss::straggler(together));
  EXPECT_EQ(ss::straggler_text(together, 1),
            "none: no rank kept its peers waiting in a collective (3 collectives on 2 ranks or more)");
  EXPECT_EQ(ss::straggler_text({{0, 0, 0, 0, 0}}, 1), "");
}

// The tester's trace: one all-reduce (step 1 of 2): rank 0's kernel starts at 1250 us, rank 1's
// at 1400: rank 0 waits 150 us, 75 us per step over the 2 steps; rank 1 the last to arrive.
TEST(Ana60Stragglers, TheTestersStragglerTraceNamesRankOne) {
  const std::string db = ss::testing::scratch_db("ana60_strag.db");
  std::remove(db.c_str());
  auto r = ana60_cli("import " + ss::testing::trace_fixture("straggler") + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = ana60_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(contains(r.out, "imbalance    none")) << r.out;
  EXPECT_TRUE(contains(r.out, "imbalance    not measured: a trace has no load counters (the ids each rank looked up); "
                              "the ranks' waits for each other: straggler below\n"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "straggler    rank 1: the last to arrive in 1 of its 1 collective; its peers waited "
                              "150.0 us for it (75.0 us per step)\n"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "  rank  collectives last to arrive  waited for peers  peers waited for it\n"
                              "  0               1              0           75.0 us                 0 ns\n"
                              "  1               1              1              0 ns              75.0 us\n"))
      << r.out;
  r = ana60_cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["imbalance"]["load_counters"], false);
  EXPECT_TRUE(j["imbalance"]["lookups_max_over_mean"].is_null());
  const json& w = j["peer_waits"];
  ASSERT_EQ(w["ranks"].size(), 2u);
  EXPECT_EQ(w["ranks"][0], (json{{"rank", 0}, {"collectives", 1}, {"last_arrivals", 0}, {"waited_ns", 150000}, {"caused_wait_ns", 0}}));
  EXPECT_EQ(w["ranks"][1], (json{{"rank", 1}, {"collectives", 1}, {"last_arrivals", 1}, {"waited_ns", 0}, {"caused_wait_ns", 150000}}));
  EXPECT_EQ(w["straggler"]["rank"], 1);
  EXPECT_EQ(w["straggler"]["caused_wait_per_step_ns"], 75000);
  // the collectives' waiting for peers is the ranks' summed
  ASSERT_EQ(j["collectives"].size(), 1u);
  EXPECT_EQ(j["collectives"][0]["wait_ns"], 150000);
}

// An all-reduce in each step, rank 1 late by 150 us in both: 150 us a step on rank 0, rank 1
// last to arrive in 2 of 2.
TEST(Ana60Stragglers, LateRankInEveryStepCostsItsPeer150UsAStep) {
  const fs::path dir = ss::testing::import_scratch() / "ana60_two_steps";
  write_two_step_trace(dir);
  const std::string db = ss::testing::scratch_db("ana60_two_steps.db");
  std::remove(db.c_str());
  auto r = ana60_cli("import " + dir.string() + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = ana60_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "straggler    rank 1: the last to arrive in 2 of its 2 collectives; its peers waited "
                              "300.0 us for it (150.0 us per step)\n"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "  0               2              0          150.0 us                 0 ns\n"
                              "  1               2              2              0 ns             150.0 us\n"))
      << r.out;
}

// An engine run (cpu ranks, not imported), one step [0, 1) ms: rank 0 computes [0, 600) us and
// joins dense_all_reduce (sequence 1) at 600, rank 1 computes [0, 900) and joins at 900; both end
// at 1000. Rank 0 waits 300 us for rank 1.
TEST(Ana60Stragglers, AnEngineRunGetsTheStragglerLineBesideItsImbalance) {
  const std::string db = ss::testing::scratch_db("ana60_run.db");
  std::remove(db.c_str());
  {
    ss::SessionWriter w(db);
    w.set_metadata("world_size", "2");
    w.set_metadata("backend", "gloo");
    w.set_metadata("workload_name", "hand");
    for (int r = 0; r < 2; ++r) {
      w.add_rank({r, "h", "", 0});
      w.add_lane({r, 0, "compute", "thread"});
      w.add_lane({r, 1, "comm", "thread"});
      w.add_step({0, r, 0, 1000000, 0.5, 0, 0});
    }
    using ss::Lane;
    using ss::OpCategory;
    w.add_ops({ss::OpEvent{0, Lane::compute, OpCategory::dense, "dense_forward_backward", 0, 0, 600000, 0, 0},
               ss::OpEvent{0, Lane::comm, OpCategory::comm, "dense_all_reduce", 0, 600000, 1000000, 64, 1},
               ss::OpEvent{1, Lane::compute, OpCategory::dense, "dense_forward_backward", 0, 0, 900000, 0, 0},
               ss::OpEvent{1, Lane::comm, OpCategory::comm, "dense_all_reduce", 0, 900000, 1000000, 64, 1}});
    w.close("complete");
  }
  auto r = ana60_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "imbalance    ids looked up max/mean")) << r.out;
  EXPECT_TRUE(contains(r.out, "straggler    rank 1: the last to arrive in 1 of its 1 collective; its peers waited "
                              "300.0 us for it (300.0 us per step)\n"))
      << r.out;
  r = ana60_cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["peer_waits"]["ranks"][0]["waited_ns"], 300000);
  EXPECT_EQ(j["peer_waits"]["straggler"]["rank"], 1);
}
