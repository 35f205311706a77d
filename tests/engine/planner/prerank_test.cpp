// The planner search's pre-ranking estimate (planner/search.h "Pre-ranking estimate",
// pre_rank_estimate; plan41): latency per call and contention as the full estimate
// (planner/stats.h plan_stats) has them, the emulated network's floor under both, against
// numbers by hand; and a pair of plans the old pre-ranking (bytes over bandwidth, a kernel launch
// per shard) ordered the other way from plan_stats, now ordered as plan_stats orders them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "engine/planner/round_profile.h"

using namespace embedscope::engine;

namespace {

// Round numbers: HBM 1 B/ns at efficiency 1 (a fp32 row of 8 columns, 32 B, read in 32 ns),
// kernel launch 1 us, links of 1 B/ns with 10 us latency a call; `cores` > 0: cpu ranks on
// that many cores, 1 thread a rank, no other load (contention f(m) = max(1, m / cores)).
HardwareProfile prerank_profile(int cores = 0) {
  auto hw = planner_testing::round_profile("prerank_round");
  hw.cpu.cores = cores;
  hw.cpu.threads_per_rank = 1;
  return hw;
}

// `ranks` ranks on one node, batch 4, sgd; tables of 1000 rows x 8 (fp32, sum), each serving one
// feature of uniform ids with the given pooling factor.
WorkloadSpec prerank_spec(int ranks, const std::vector<double>& pooling_factors) {
  return planner_testing::round_workload(ranks, pooling_factors);
}

TablePlan prerank_tw(int table, int rank) { return {table, ShardingType::table_wise, -1, {{rank, 0, 1000, 0, 8}}}; }
TablePlan prerank_rw(int table, int ranks) {
  TablePlan tp{table, ShardingType::row_wise, -1, {}};
  for (int r = 0; r < ranks; ++r) tp.shards.push_back({r, r * 1000 / ranks, 1000 / ranks, 0, 8});
  return tp;
}

}  // namespace

// One table_wise table on rank 0 of 2 GPU ranks, pooling factor 1: 2 x 4 = 8 lookups a step.
//  fwd compute (plan42: the ops' bytes as the StepProgram counts them, a launch each): bucketize
//    of the rank's KJT 2 x 8 x (4 ids + 4 lengths) = 128 B; kjt_permute 2 x 8 x (8 ids + 8 bags
//    x 1 slot) = 256 B; lookup 8 ids x (32 + 8) + 8 bags x 32 B = 576 B: rank 0 128 + 256 + 576
//    + 3 launches = 3,960 ns (rank 1: 128 + 3,000)
//  bwd compute: the fused update, 8 bags x 32 + 8 ids x (8 + 2 x 32) = 832 B + 1 launch = 1,832 ns
//  fwd comms, each call the larger member's 10 us + bytes (rank 0 receives the ids, sends the rows):
//    splits 8 B, lengths 4 x 8 = 32 B, ids 4 x 8 = 32 B, pooled rows 4 samples x 8 x 4 B = 128 B
//    -> 10,008 + 10,032 + 10,032 + 10,128 = 40,200 ns; each of those all-to-alls' split check
//    (an all-gather of 2 x 2 int64 to the peer: 32 B) costs 0 on a GPU profile (sim50, cost_model.h
//    split_check_timed; before, 10,032 each: 80,328 ns); bwd comms: the gradients back, 10,128 ns
//    (their check 0; before 20,160 ns)
// (the old pre-ranking: 0.5 x (256 + 64) / 1 = 160 ns fwd comms, no latency, no checks).
TEST(PlannerPreRank, LatencyPerCallByHandAndAsPlanStats) {
  const WorkloadSpec spec = prerank_spec(2, {1.0});
  const ShardingPlan plan{2, 2, {prerank_tw(0, 0)}};
  const HardwareProfile hw = prerank_profile();
  const PreRankEstimate e = pre_rank_estimate(spec, plan, hw);
  EXPECT_DOUBLE_EQ(e.fwd_compute_ns, 3960.0);
  EXPECT_DOUBLE_EQ(e.bwd_compute_ns, 1832.0);
  EXPECT_DOUBLE_EQ(e.fwd_comms_ns, 40200.0);
  EXPECT_DOUBLE_EQ(e.bwd_comms_ns, 10128.0);
  EXPECT_DOUBLE_EQ(e.host_ns, 0.0);
  EXPECT_DOUBLE_EQ(e.critical_path_ns, 3960.0 + 40200 + 1832 + 10128);
  // the full estimate times the program's ops and calls to the same figures
  const PlanStats st = plan_stats(spec, plan, hw);
  EXPECT_EQ(st.ranks[0].fwd_compute_ns, 3960);
  EXPECT_EQ(st.ranks[1].fwd_compute_ns, 3128);
  EXPECT_EQ(st.ranks[0].bwd_compute_ns, 1832);
  EXPECT_EQ(st.critical_path_ns, 3960 + 40200 + 1832 + 10128);
  EXPECT_EQ(st.ranks[0].fwd_comms_ns, 40200);
  EXPECT_EQ(st.ranks[1].fwd_comms_ns, 40200);
  EXPECT_EQ(st.ranks[0].bwd_comms_ns, 10128);
}

// The same table on rank 0 of 4 cpu ranks sharing 2 cores (f(4) = 2, f(1) = 1): 16 lookups.
//  fwd compute (bucketize 128 + kjt_permute 2 x 8 x (16 + 16) + lookup 16 x 40 + 16 x 32 + 3
//  launches) x 2 = (128 + 512 + 1,152 + 3,000) x 2 = 9,584; bwd compute (16 x 32 + 16 x 72 +
//  1,000) x 2 = 5,328 ns
//  each call by processor sharing of its members' times: 3 members of 10 us + b, rank 0 of
//  10 us + 3b: (10,000 + b) x f(4) + 2b x f(1) = 20,000 + 4b:
//    splits b = 8: 20,032; lengths b = 32: 20,128; ids b = 32: 20,128; pooled rows b = 128: 20,512
//  and each one's split check, every member 3 x 64 B: (10,000 + 192) x f(4) = 20,384:
//  fwd comms 80,800 + 4 x 20,384 = 162,336 ns, bwd comms 20,512 + 20,384 = 40,896 ns.
TEST(PlannerPreRank, CpuRanksSharingCoresByHandAndAsPlanStats) {
  const WorkloadSpec spec = prerank_spec(4, {1.0});
  const ShardingPlan plan{4, 4, {prerank_tw(0, 0)}};
  const HardwareProfile hw = prerank_profile(2);
  const PreRankEstimate e = pre_rank_estimate(spec, plan, hw);
  EXPECT_DOUBLE_EQ(e.fwd_compute_ns, 9584.0);
  EXPECT_DOUBLE_EQ(e.bwd_compute_ns, 5328.0);
  EXPECT_DOUBLE_EQ(e.fwd_comms_ns, 162336.0);
  EXPECT_DOUBLE_EQ(e.bwd_comms_ns, 40896.0);
  const PlanStats st = plan_stats(spec, plan, hw);
  EXPECT_EQ(st.ranks[0].fwd_compute_ns, 9584);
  EXPECT_EQ(st.ranks[0].bwd_compute_ns, 5328);
  for (const RankStats& r : st.ranks) {
    EXPECT_EQ(r.fwd_comms_ns, 162336) << r.rank;
    EXPECT_EQ(r.bwd_comms_ns, 40896) << r.rank;
  }
}

// Latency decides (plan41 task 1): t0 serves 20 ids a bag (160 lookups a step), t1 and t2 one.
//  (compute as plan42 counts it: bucketize 2 x 8 x (88 ids + 12 lengths) = 1,600 B on every rank,
//  a slot of n ids: kjt_permute 16 (n + 8), lookup 40 n + 256, update 72 n + 256 B)
//  P1, all table_wise (t0 on rank 0, t1 and t2 on rank 1): fwd compute 1,600 + 2,688 + 6,656 + 3
//    launches = 13,944; bwd 256 + 11,520 + 1,000 = 12,776; fwd comms 4 calls: splits 10,016, lengths 10,064, ids 10,640,
//    pooled 10,256 = 40,976, and their 4 split checks 0 (GPU profile, sim50; before 10,032 each:
//    81,104); bwd 10,256 (its check 0) -> 77,952 ns (before 128,112 = 5 checks x 10,032 more).
//  P2, t0 row_wise (80 lookups a half), t1 on rank 0, t2 on rank 1: fwd compute 1,600 + 16 x
//    (88 + 16) + 3,456 + 576 + 3,000 = 10,296; bwd 6,016 + 832 + 1,000 = 7,848; fwd comms 5 calls: splits 10,016, lengths
//    10,064, ids 10,352, pooled 10,128, row-wise reduce-scatter 10,128 = 50,688 (5 checks 0;
//    before 100,848); bwd: all-to-all 10,128 + all-gather 10,128 = 20,256 (its check 0; before
//    30,288) -> 89,088 ns (before 149,280 = 6 checks x 10,032 more): one more call forward, one
//    more back, cost more than P2's balance saves.
// The old pre-ranking (bytes / bandwidth, a launch per shard, no latency) had P1 18,384 ns and
// P2 13,312 ns: the other order.
TEST(PlannerPreRank, ManySmallCallsRankedAsPlanStatsRanksThem) {
  const WorkloadSpec spec = prerank_spec(2, {20.0, 1.0, 1.0});
  const ShardingPlan p1{2, 2, {prerank_tw(0, 0), prerank_tw(1, 1), prerank_tw(2, 1)}};
  const ShardingPlan p2{2, 2, {prerank_rw(0, 2), prerank_tw(1, 0), prerank_tw(2, 1)}};
  const HardwareProfile hw = prerank_profile();
  const PreRankEstimate e1 = pre_rank_estimate(spec, p1, hw), e2 = pre_rank_estimate(spec, p2, hw);
  EXPECT_DOUBLE_EQ(e1.fwd_compute_ns, 13944.0);
  EXPECT_DOUBLE_EQ(e1.fwd_comms_ns, 40976.0);
  EXPECT_DOUBLE_EQ(e1.critical_path_ns, 77952.0);
  EXPECT_DOUBLE_EQ(e2.fwd_compute_ns, 10296.0);
  EXPECT_DOUBLE_EQ(e2.fwd_comms_ns, 50688.0);
  EXPECT_DOUBLE_EQ(e2.bwd_comms_ns, 20256.0);
  EXPECT_DOUBLE_EQ(e2.critical_path_ns, 89088.0);
  const PlanStats s1 = plan_stats(spec, p1, hw), s2 = plan_stats(spec, p2, hw);
  EXPECT_EQ(s1.critical_path_ns, 77952);
  EXPECT_EQ(s2.critical_path_ns, 89088);
  EXPECT_LT(s1.critical_path_ns, s2.critical_path_ns);
  EXPECT_LT(e1.critical_path_ns, e2.critical_path_ns);
  // the comms the two estimates share, call for call
  EXPECT_EQ(s1.ranks[0].fwd_comms_ns, 40976);
  EXPECT_EQ(s2.ranks[0].fwd_comms_ns, 50688);
  EXPECT_EQ(s2.ranks[1].bwd_comms_ns, 20256);
}

// An emulated network (plan41 task 2) under links the profile makes free (1e15 B/s, no latency):
// every paced call takes the emulated link's latency + ceil(bytes / bandwidth): 1 MB/s with 1 ms
// latency, the 2-rank table of LatencyPerCallByHand...: splits 8 B -> 1,008,000, lengths and ids
// 32 B -> 1,032,000 each, pooled rows 128 B -> 1,128,000: fwd comms 4,200,000 ns; bwd 1,128,000 ns,
// in the pre-ranking estimate and in plan_stats alike. The 4 split checks (32 B) are not paced by
// the emulation (fixc49; before, 1,032,000 ns each: 8,328,000 and 2,160,000 ns).
TEST(PlannerPreRank, EmulatedNetworkIsAFloorUnderEveryCall) {
  WorkloadSpec spec = prerank_spec(2, {1.0});
  spec.network.intra_node = {1'000'000, 1'000'000};
  spec.network.inter_node = spec.network.intra_node;
  const ShardingPlan plan{2, 2, {prerank_tw(0, 0)}};
  HardwareProfile hw = prerank_profile();
  hw.intra_node = {"free link", 1e15, 0};
  hw.inter_node = hw.intra_node;
  const PreRankEstimate e = pre_rank_estimate(spec, plan, hw);
  EXPECT_DOUBLE_EQ(e.fwd_comms_ns, 4'200'000.0);
  EXPECT_DOUBLE_EQ(e.bwd_comms_ns, 1'128'000.0);
  const PlanStats st = plan_stats(spec, plan, hw);
  EXPECT_EQ(st.ranks[0].fwd_comms_ns, 4'200'000);
  EXPECT_EQ(st.ranks[1].bwd_comms_ns, 1'128'000);
  // without the emulation the same calls cost (nearly) nothing
  spec.network = {};
  EXPECT_LT(pre_rank_estimate(spec, plan, hw).fwd_comms_ns, 10.0);
  EXPECT_LT(plan_stats(spec, plan, hw).ranks[0].fwd_comms_ns, 10);
}

// A data_parallel table (plan41; dp51: DDP's dense all-reduce, tester50 F9): no input or output
// dist, but its own 2 world all-reduces a step (sharding/data_parallel.cpp): the dense 1000 x 8
// fp32 gradient (32,000 B; a ring moves 2 (2-1)/2 of it each way: 32,000 B) and the 1,000 touched
// flags (4,000 B): 10,000 + 32,000 + 10,000 + 4,000 = 56,000 ns of bwd comms (the 3 all-gathers
// of the sparse rows before: 30,168 ns). bwd compute (program/data_parallel_bytes.h):
// backward_data_parallel 4 bags x 32 + 4 x 1000 x 9 + 4 ids x (8 + 64 + 4) = 128 + 36,000 + 304
// = 36,432 B; optimizer_data_parallel the scan 36,000 B + sgd's update of the rows both ranks'
// 8 ids touch, 1000 (1 - 0.999^8) = 7.97206 rows x (8 + 2 x 32) = 573.988 B; plus 3 launches
// (the fused backward of no slot, the table's two ops): 76,005.988 ns pre-ranked, 76,006 in
// plan_stats (36,432 + 1,000; llround(36,573.988) = 36,574 + 1,000; 1,000). fwd compute (plan42):
// bucketize 128 B, kjt_permute of no slot 0 B, the replica's lookup 4 x 40 + 4 bags x 32 = 288 B,
// 3 launches: 3,416 ns, as plan_stats.
TEST(PlannerPreRank, DataParallelTablesPayTwoAllReducesEach) {
  const WorkloadSpec spec = prerank_spec(2, {1.0});
  const ShardingPlan plan{2, 2, {{0, ShardingType::data_parallel, -1, {{0, 0, 1000, 0, 8}, {1, 0, 1000, 0, 8}}}}};
  const HardwareProfile hw = prerank_profile();
  const PreRankEstimate e = pre_rank_estimate(spec, plan, hw);
  EXPECT_DOUBLE_EQ(e.fwd_comms_ns, 0.0);
  EXPECT_DOUBLE_EQ(e.bwd_comms_ns, 56000.0);
  EXPECT_DOUBLE_EQ(e.fwd_compute_ns, 3416.0);
  EXPECT_NEAR(e.bwd_compute_ns, 76005.988, 1e-3);
  const PlanStats st = plan_stats(spec, plan, hw);
  EXPECT_EQ(st.ranks[0].fwd_comms_ns, 0);
  EXPECT_EQ(st.ranks[0].fwd_compute_ns, 3416);
  EXPECT_EQ(st.ranks[0].bwd_compute_ns, 76006);
  EXPECT_EQ(st.ranks[0].bwd_comms_ns, 56000);
  EXPECT_EQ(st.ranks[1].bwd_comms_ns, 56000);
}
