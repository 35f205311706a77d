// The search never plans a row shard without rows (plan42: `plan --auto` gave criteo_kaggle's
// 3-row table a "3: 0x16" shard on 4 ranks), and it reports the runner-up the full estimate
// scored next to the best (planner/search.h PlanSearchResult::runner_up_*).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "engine/planner/round_profile.h"
#include "embedscope/engine/workload/spec_error.h"

using namespace embedscope::engine;

namespace {

// Round numbers (as prerank_test.cpp): HBM 1 B/ns, launch 1 us, links 1 B/ns + 10 us a call.
HardwareProfile rowshard_profile() {
  return planner_testing::round_profile("rowshard_round");
}

// `ranks` ranks, batch 4; table i has rows[i] rows x 8 and one feature of pooling factor pf[i].
WorkloadSpec rowshard_spec(int ranks, const std::vector<int64_t>& rows, const std::vector<double>& pf) {
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = ranks;
  s.batch_size = 4;
  s.tables.clear();
  s.features.clear();
  for (size_t i = 0; i < rows.size(); ++i) {
    TableSpec t;
    t.name = "t" + std::to_string(i);
    t.num_embeddings = rows[i];
    t.embedding_dim = 8;
    t.feature_names = {"f" + std::to_string(i)};
    s.tables.push_back(t);
    FeatureSpec f;
    f.name = t.feature_names[0];
    f.pooling_factor.mean = pf[i];
    f.pooling_factor.max = static_cast<int64_t>(pf[i]);
    s.features.push_back(f);
  }
  return s;
}

int empty_shards(const ShardingPlan& p) {
  int n = 0;
  for (const TablePlan& tp : p.tables)
    for (const Shard& s : tp.shards) n += s.num_rows == 0 || s.num_cols == 0 ? 1 : 0;
  return n;
}

}  // namespace

// criteo_kaggle on 4 ranks: tables of 3 and 4 rows among 24 larger ones; the best plan has
// no empty shard, and the same with the search held to row_wise and table_wise (the 3-row table
// then table_wise, the 4-row one may be row_wise: one row a rank).
TEST(PlannerRowShards, CriteoKaggleOnFourRanksHasNoEmptyShard) {
  WorkloadSpec spec = load_preset("criteo_kaggle");
  spec.devices.count = 4;
  const HardwareProfile hw = planning_profile(spec);
  const PlanSearchResult r = plan_search(spec, hw);
  EXPECT_EQ(empty_shards(r.plan), 0);
  PlanSearchOptions o;
  o.sharding_types = {ShardingType::row_wise, ShardingType::table_wise};
  const PlanSearchResult h = plan_search(spec, hw, o);
  EXPECT_EQ(empty_shards(h.plan), 0);
  for (const TablePlan& tp : h.plan.tables)
    if (spec.tables[static_cast<size_t>(tp.table)].rows() < 4) EXPECT_EQ(tp.type, ShardingType::table_wise) << tp.table;
}

// A hand-built workload where row_wise wins for the tables that can take it: 4 ranks, a heavy
// table of 3 rows (48 ids a step a rank, more than the mean time per rank: `balanced` and
// `uniform:row_wise` would split it) and one of 4 rows. Held to row_wise + table_wise: t0
// (3 rows) is table_wise, t1 (4 rows) keeps one row a rank if row_wise; no shard is empty.
// Held to row_wise alone: t0 keeps table_wise (whole on one rank), t1 and t2 are row_wise.
TEST(PlannerRowShards, TablesWithFewerRowsThanRanksAreNotRowSplit) {
  const WorkloadSpec spec = rowshard_spec(4, {3, 4, 1000}, {12.0, 1.0, 1.0});
  const HardwareProfile hw = rowshard_profile();
  PlanSearchOptions o;
  o.sharding_types = {ShardingType::row_wise, ShardingType::table_wise};
  const PlanSearchResult r = plan_search(spec, hw, o);
  EXPECT_EQ(empty_shards(r.plan), 0);
  EXPECT_EQ(r.plan.tables[0].type, ShardingType::table_wise);
  EXPECT_EQ(r.plan.tables[0].shards.size(), 1u);
  const PlanSearchResult any = plan_search(spec, hw);
  EXPECT_EQ(empty_shards(any.plan), 0);
  o.sharding_types = {ShardingType::row_wise};
  const PlanSearchResult only = plan_search(spec, hw, o);
  EXPECT_EQ(empty_shards(only.plan), 0);
  EXPECT_EQ(only.plan.tables[0].type, ShardingType::table_wise);
  EXPECT_EQ(only.plan.tables[1].type, ShardingType::row_wise);
  EXPECT_EQ(only.plan.tables[2].type, ShardingType::row_wise);
  // 4 rows on 4 ranks: row_wise is allowed (one row a rank)
  const WorkloadSpec four = rowshard_spec(4, {4}, {1.0});
  const PlanSearchResult f = plan_search(four, hw, o);
  EXPECT_EQ(f.plan.tables[0].type, ShardingType::row_wise);
  EXPECT_EQ(empty_shards(f.plan), 0);
}

// The runner-up: one table of 1000 rows on 2 ranks, held to table_wise and row_wise, gives two
// distinct plans (greedy, uniform:table_wise, balanced and grid all put it whole on one rank;
// greedy comes first). Both are scored with plan_stats: row_wise (a reduce-scatter instead of
// the pooled all-to-all, an all-gather back without a split check) is the best with plan_stats'
// figure of that plan, and table_wise the runner-up at 56,120 ns (prerank_test.cpp's
// LatencyPerCallByHand...: 3,960 + 40,200 + 1,832 + 10,128; its 5 split checks cost 0 on a GPU
// profile, sim50: before, 106,280 = 5 x 10,032 more).
TEST(PlannerRowShards, RunnerUpIsTheOtherScoredPlan) {
  const WorkloadSpec spec = rowshard_spec(2, {1000}, {1.0});
  const HardwareProfile hw = rowshard_profile();
  PlanSearchOptions o;
  o.sharding_types = {ShardingType::table_wise, ShardingType::row_wise};
  const PlanSearchResult r = plan_search(spec, hw, o);
  const ShardingPlan rw{2, 2, {{0, ShardingType::row_wise, -1, {{0, 0, 500, 0, 8}, {1, 500, 500, 0, 8}}}}};
  const int64_t rw_ns = plan_stats(spec, rw, hw).critical_path_ns;
  EXPECT_LT(rw_ns, 56120);
  EXPECT_EQ(r.plan.tables[0].type, ShardingType::row_wise);
  EXPECT_EQ(r.stats.critical_path_ns, rw_ns);
  EXPECT_EQ(r.runner_up_proposer, "greedy");
  EXPECT_EQ(r.runner_up_critical_path_ns, 56120);
  // held to one type: one distinct plan, no runner-up
  o.sharding_types = {ShardingType::table_wise};
  const PlanSearchResult one = plan_search(spec, hw, o);
  EXPECT_TRUE(one.runner_up_proposer.empty());
  EXPECT_EQ(one.runner_up_critical_path_ns, 0);
}
