// The pre-ranking estimate's terms added in plan42 (planner/search.h "Pre-ranking estimate"):
// bucketize and kjt_permute, the lookup and fused update's bytes as the StepProgram's ops count
// them (program/input_op_bytes.h, program_sink.h lookup_bytes / update_bytes), a factorized
// row_wise table's B all-reduce and hot-row replication's all-reduce, each against numbers by
// hand and against plan_stats' figure for the same plan; and a pair of plans the pre-ranking
// before plan42 ordered the other way from plan_stats.
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

// HBM 1 B/ns at efficiency 1, kernel launch 1 us, links of 1 B/ns with `latency` ns a call
// (0: a call costs its bytes only).
HardwareProfile terms_profile(int64_t latency = 10000) {
  return planner_testing::round_profile("prerank_terms", latency);
}

// 2 ranks on one node, batch 4, sgd; tables of 1000 rows x 8 fp32, one feature each of uniform
// ids with the given mean pooling factor (fixed).
WorkloadSpec terms_spec(const std::vector<double>& pooling_factors) {
  return planner_testing::round_workload(2, pooling_factors);
}

TablePlan terms_tw(int table, int rank) { return {table, ShardingType::table_wise, -1, {{rank, 0, 1000, 0, 8}}}; }
TablePlan terms_rw(int table) { return {table, ShardingType::row_wise, -1, {{0, 0, 500, 0, 8}, {1, 500, 500, 0, 8}}}; }

}  // namespace

// Two tables of pooling factor 2 and 1 (16 and 8 ids a step), links free of latency (the calls'
// few bytes: the same order under both plans, checked against plan_stats below).
// Bucketize on every rank: 2 x 8 x (4 x 3 ids + 4 x 2 lengths) = 320 B. A slot of n ids from
// 8 bags: kjt_permute 16 (n + 8 x slots) for the rank's slots together, lookup 40 n + 256,
// update 72 n + 256 B.
//  P1 (t0 on rank 0, t1 on rank 1): rank 0 fwd 320 + 16 x 24 + 896 + 3 launches = 4,600 ns;
//    bwd 256 + 1,152 + 1 launch = 2,408 ns.
//  P2 (both row_wise, 8 + 4 ids a rank): fwd 320 + 16 x (12 + 16) + 576 + 416 + 3,000 = 4,760;
//    bwd 832 + 544 + 1,000 = 2,376 ns.
// Compute alone P1 7,008 < P2 7,136 ns: P2's extra slot a rank (a permute of 8 more bags, and
// the lookup's and update's 8 bags of gradients and pooled rows) costs more than its balance
// saves. Before plan42 the pre-ranking counted only the rows read (32 B an id) and one launch:
// P1 (512 + 1,000) + (1,024 + 1,000) = 3,536 vs P2 (384 + 1,000) + (768 + 1,000) = 3,152: the
// other order.
TEST(PlannerPreRankTerms, PermuteAndBagsOfEverySlotRankedAsPlanStats) {
  const WorkloadSpec spec = terms_spec({2.0, 1.0});
  const ShardingPlan p1{2, 2, {terms_tw(0, 0), terms_tw(1, 1)}};
  const ShardingPlan p2{2, 2, {terms_rw(0), terms_rw(1)}};
  const HardwareProfile hw = terms_profile(0);
  const PreRankEstimate e1 = pre_rank_estimate(spec, p1, hw), e2 = pre_rank_estimate(spec, p2, hw);
  EXPECT_DOUBLE_EQ(e1.fwd_compute_ns, 4600.0);
  EXPECT_DOUBLE_EQ(e1.bwd_compute_ns, 2408.0);
  EXPECT_DOUBLE_EQ(e2.fwd_compute_ns, 4760.0);
  EXPECT_DOUBLE_EQ(e2.bwd_compute_ns, 2376.0);
  const PlanStats s1 = plan_stats(spec, p1, hw), s2 = plan_stats(spec, p2, hw);
  EXPECT_EQ(s1.ranks[0].fwd_compute_ns, 4600);
  EXPECT_EQ(s1.ranks[1].fwd_compute_ns, 320 + 16 * 16 + 576 + 3000);
  EXPECT_EQ(s1.ranks[0].bwd_compute_ns, 2408);
  EXPECT_EQ(s2.ranks[0].fwd_compute_ns, 4760);
  EXPECT_EQ(s2.ranks[1].fwd_compute_ns, 4760);
  EXPECT_EQ(s2.ranks[1].bwd_compute_ns, 2376);
  // both estimates put P1 first, with the same critical path
  EXPECT_DOUBLE_EQ(e1.critical_path_ns, static_cast<double>(s1.critical_path_ns));
  EXPECT_DOUBLE_EQ(e2.critical_path_ns, static_cast<double>(s2.critical_path_ns));
  EXPECT_LT(s1.critical_path_ns, s2.critical_path_ns);
  EXPECT_LT(e1.critical_path_ns, e2.critical_path_ns);
}

// A factorized table (low_rank_dim 2, dim 8) row_wise on 2 ranks, links 1 B/ns + 10 us a call:
// backward comms = the row-wise gradient all-gather (4 samples x 8 fp32 = 128 B to the peer):
// 10,128 ns, and B's all-reduce of 2 x 8 + 1 = 17 fp32 (68 B; a ring's chunks are whole elements,
// 9 and 8: rank 0 sends 2 x (17 - 9) = 16 fp32, rank 1 2 x (17 - 8) = 18 fp32 = 72 B, and the call
// ends with its slower member): 10,072 ns -> 20,200 ns, in the pre-ranking and in plan_stats.
TEST(PlannerPreRankTerms, FactorizedRowWiseTablePaysItsBAllReduce) {
  WorkloadSpec spec = terms_spec({1.0});
  spec.tables[0].low_rank_dim = 2;
  const ShardingPlan plan{2, 2, {terms_rw(0)}};
  const HardwareProfile hw = terms_profile();
  const PreRankEstimate e = pre_rank_estimate(spec, plan, hw);
  EXPECT_DOUBLE_EQ(e.bwd_comms_ns, 20200.0);
  const PlanStats st = plan_stats(spec, plan, hw);
  EXPECT_EQ(st.ranks[0].bwd_comms_ns, 20200);
  EXPECT_EQ(st.ranks[1].bwd_comms_ns, 20200);
  // table_wise: no B all-reduce (the pooled rows back, 10,128; their split check costs 0 on a GPU
  // profile, sim50: before, 10,128 + 10,032 = 20,160)
  const ShardingPlan tw{2, 2, {terms_tw(0, 1)}};
  EXPECT_DOUBLE_EQ(pre_rank_estimate(spec, tw, hw).bwd_comms_ns, 10128.0);
  EXPECT_EQ(plan_stats(spec, tw, hw).ranks[0].bwd_comms_ns, 10128);
}

// Hot-row replication of rows 0 and 1 of t0, one of two row_wise tables (sharding.tables
// override): one fused all-reduce a step of 2 x (8 + 1) = 18 fp32 (72 B): 10,072 ns, after the
// row-wise gradient all-gather (4 samples x 16 fp32 = 256 B: 10,256 ns): bwd comms 20,328 ns, in
// the pre-ranking and in plan_stats. Both tables hot: still one call, 4 x 9 fp32 = 144 B,
// 10,144 ns: 20,400 ns.
TEST(PlannerPreRankTerms, HotRowsAllReduceOnceAStep) {
  WorkloadSpec spec = terms_spec({125.0, 125.0});
  TableSharding hot;
  hot.type = ShardingType::row_wise;
  hot.hot_rows = {0, 1};
  spec.sharding.per_table["t0"] = hot;
  const ShardingPlan one{2, 2, {terms_rw(0), terms_rw(1)}};
  const HardwareProfile hw = terms_profile();
  const PreRankEstimate e = pre_rank_estimate(spec, one, hw);
  const PlanStats st = plan_stats(spec, one, hw);
  EXPECT_DOUBLE_EQ(e.bwd_comms_ns, 20328.0);
  EXPECT_EQ(st.ranks[0].bwd_comms_ns, 20328);
  EXPECT_EQ(st.ranks[1].bwd_comms_ns, 20328);
  spec.sharding.per_table["t1"] = hot;
  EXPECT_DOUBLE_EQ(pre_rank_estimate(spec, one, hw).bwd_comms_ns, 20400.0);
  EXPECT_EQ(plan_stats(spec, one, hw).ranks[1].bwd_comms_ns, 20400);
}
// The B all-reduce decides a pair: t0 factorized (low_rank_dim 2, pooling factor 40: 320 ids a
// step), t1 a plain table (8 ids a step), links 1 B/ns + 10 us a call.
// Compute (bucketize 2 x 8 x (4 x 41 + 4 x 2) = 2,752 B; t0's slot of n ids: lookup 16 n + 64
// (B read) + 256, update 24 n + 256 + 128 (B read and written); t1's: 40 n + 256, 72 n + 256):
//  P1 (t0 row_wise, t1 on rank 1): rank 1 fwd 2,752 + 16 x (168 + 16) + 2,880 + 576 + 3,000 =
//    12,152; bwd 4,224 + 832 + 1,000 = 6,056 ns.
//  P2 (t0 on rank 0, t1 row_wise): rank 0 fwd 2,752 + 16 x (324 + 16) + 5,440 + 416 + 3,000 =
//    17,048; bwd 8,064 + 544 + 1,000 = 9,608 ns.
// Comms: the same calls (input dist, pooled all-to-all, row-wise reduce-scatter; back:
// all-to-all, all-gather) of a few bytes more or less, their split checks 0 on a GPU profile
// (sim50; before, 5 forward and 1 back at 10,032 each): fwd 51,008 / 51,632 (before 101,168 /
// 101,792), bwd 20,256 both (before 30,288), and P1's B all-reduce (17 fp32: its larger member
// sends 18 fp32 = 72 B, 10,072 ns): P1 99,544 > P2 98,544 ns in both estimates. Without the
// all-reduce P1 would be 89,472: first. The pre-ranking before plan42 (32 B an id of
// t1 and 4 r = 8 B of t0 read, twice that back, one launch each way, no all-reduce) had, with
// today's comms, P1 2,536 + 51,008 + 4,072 + 20,256 = 77,872 and P2 3,688 + 51,632 + 6,376 +
// 20,256 = 81,952: the other order.
TEST(PlannerPreRankTerms, BAllReduceRanksAFactorizedPairAsPlanStats) {
  WorkloadSpec spec = terms_spec({40.0, 1.0});
  spec.tables[0].low_rank_dim = 2;
  const ShardingPlan p1{2, 2, {terms_rw(0), terms_tw(1, 1)}};
  const ShardingPlan p2{2, 2, {terms_tw(0, 0), terms_rw(1)}};
  const HardwareProfile hw = terms_profile();
  const PreRankEstimate e1 = pre_rank_estimate(spec, p1, hw), e2 = pre_rank_estimate(spec, p2, hw);
  EXPECT_DOUBLE_EQ(e1.fwd_compute_ns, 12152.0);
  EXPECT_DOUBLE_EQ(e1.bwd_compute_ns, 6056.0);
  EXPECT_DOUBLE_EQ(e1.bwd_comms_ns, 20256.0 + 10072.0);
  EXPECT_DOUBLE_EQ(e2.fwd_compute_ns, 17048.0);
  EXPECT_DOUBLE_EQ(e2.bwd_compute_ns, 9608.0);
  EXPECT_DOUBLE_EQ(e2.bwd_comms_ns, 20256.0);
  EXPECT_DOUBLE_EQ(e1.critical_path_ns, 99544.0);
  EXPECT_DOUBLE_EQ(e2.critical_path_ns, 98544.0);
  const PlanStats s1 = plan_stats(spec, p1, hw), s2 = plan_stats(spec, p2, hw);
  EXPECT_EQ(s1.critical_path_ns, 99544);
  EXPECT_EQ(s2.critical_path_ns, 98544);
  EXPECT_EQ(s1.ranks[0].fwd_comms_ns, 51008);
  EXPECT_EQ(s2.ranks[0].fwd_comms_ns, 51632);
  EXPECT_GT(e1.critical_path_ns, e2.critical_path_ns);
}
