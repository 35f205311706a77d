// The planner's statistics (planner/stats.h): TorchRec's imbalance measures and the Zipf share
// of a row range against hand-computed numbers; the critical path as the sum of per-phase maxima.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <random>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/workload/presets.h"

#include <nlohmann/json.hpp>

using namespace embedscope::engine;

TEST(PlannerStats, TorchRecImbalanceMeasuresMatchHandComputedNumbers) {
  // x = {1, 1, 2}: p = {1/4, 1/4, 1/2}, k = 3, |p - 1/3| = {1/12, 1/12, 1/6}
  const Imbalance im = imbalance({1, 1, 2});
  EXPECT_NEAR(im.max_over_mean, 1.5, 1e-12);              // 2 / (4/3)
  EXPECT_NEAR(im.total_variation, 1.0 / 6, 1e-12);        // max
  EXPECT_NEAR(im.total_distance, 1.0 / 3, 1e-12);         // sum
  EXPECT_NEAR(im.chi_divergence, 1.0 / 3, 1e-12);         // alpha 1: the sum again
  // KL: 2 x 1/4 ln(3/4) + 1/2 ln(3/2) = 0.0588915...
  EXPECT_NEAR(im.kl_divergence, 0.5 * std::log(0.75) + 0.5 * std::log(1.5), 1e-12);
  EXPECT_NEAR(im.kl_divergence, 0.0588915, 1e-7);
  // chi, alpha 2: 3 x (1/144 + 1/144 + 1/36) = 0.125
  EXPECT_NEAR(chi_divergence({0.25, 0.25, 0.5}, 2.0), 0.125, 1e-12);
  // bounds for 4 ranks: (4-1)^1 / 4 + 3/4 = 1.5; ln 4
  EXPECT_NEAR(max_chi_divergence(4), 1.5, 1e-12);
  EXPECT_NEAR(max_kl_divergence(4), 1.3862944, 1e-7);
  // balanced: all zero; one rank holding everything reaches the bounds
  const Imbalance flat = imbalance({5, 5, 5, 5});
  EXPECT_DOUBLE_EQ(flat.max_over_mean, 1.0);
  EXPECT_DOUBLE_EQ(flat.total_distance, 0.0);
  EXPECT_DOUBLE_EQ(flat.kl_divergence, 0.0);
  const Imbalance one = imbalance({0, 0, 0, 8});
  EXPECT_DOUBLE_EQ(one.max_over_mean, 4.0);
  EXPECT_NEAR(one.chi_divergence, max_chi_divergence(4), 1e-12);
  EXPECT_NEAR(one.kl_divergence, max_kl_divergence(4), 1e-12);
  EXPECT_DOUBLE_EQ(total_variation({}), -1.0);  // TorchRec's answer for no ranks
}

TEST(PlannerStats, ZipfMassAndRowRangeShare) {
  EXPECT_NEAR(zipf_mass(3, 1.0), 1.0 + 0.5 + 1.0 / 3, 1e-12);
  EXPECT_NEAR(zipf_mass(10000, 1.0), 9.787606036044, 1e-8);  // H_10000 (the integral tail is used past 4096)
  EXPECT_DOUBLE_EQ(zipf_mass(0, 1.15), 0.0);
  FeatureSpec f;
  f.ids.kind = IdDistributionKind::zipf;
  f.ids.alpha = 1.0;
  f.ids.permute = false;  // the hottest row is row 0
  // rows [0, 2) of 4: (1 + 1/2) / (1 + 1/2 + 1/3 + 1/4) = 1.5 / 2.08333 = 0.72
  EXPECT_NEAR(row_range_share(f, 4, 0, 2), 0.72, 1e-12);
  EXPECT_NEAR(row_range_share(f, 4, 2, 2), 0.28, 1e-12);
  f.ids.permute = true;  // hot rows spread: the range's share of the rows
  EXPECT_DOUBLE_EQ(row_range_share(f, 4, 0, 2), 0.5);
  f.ids.kind = IdDistributionKind::uniform;
  EXPECT_DOUBLE_EQ(row_range_share(f, 10, 0, 3), 0.3);
}

// The share the planner assumes is the share the input module draws: ZipfSampler (input.h) over
// 100,000 rows, alpha 1.15, 400,000 draws; the first quarter of the rows (row 0 hottest).
TEST(PlannerStats, RowRangeShareMatchesTheInputModulesZipfSampler) {
  const int64_t n = 100000;
  const ZipfSampler zipf(n, 1.15);
  std::mt19937_64 rng(7);
  const int draws = 400000;
  int first_quarter = 0, last_half = 0;
  for (int i = 0; i < draws; ++i) {
    const int64_t k = zipf(rng);
    first_quarter += k < n / 4;
    last_half += k >= n / 2;
  }
  FeatureSpec f;
  f.ids.kind = IdDistributionKind::zipf;
  f.ids.alpha = 1.15;
  f.ids.permute = false;
  // binomial standard error at p ~ 0.9 over 400k draws: 0.0005; 0.003 is six of them
  EXPECT_NEAR(static_cast<double>(first_quarter) / draws, row_range_share(f, n, 0, n / 4), 0.003);
  EXPECT_NEAR(static_cast<double>(last_half) / draws, row_range_share(f, n, n / 2, n / 2), 0.003);
  EXPECT_GT(row_range_share(f, n, 0, n / 4), 0.85);  // the hot rows: row_wise's rank 0 does most lookups
}

TEST(PlannerStats, LookupsPerRankCountTheZipfHotRowsOfRowWiseShards) {
  WorkloadSpec spec = load_preset("tiny");
  spec.devices.count = 2;
  spec.sharding.default_type = ShardingType::row_wise;
  spec.sharding.per_table.clear();
  for (auto& f : spec.features) {
    f.ids.kind = IdDistributionKind::zipf;
    f.ids.permute = false;
  }
  const ShardingPlan plan = plan_sharding(spec);
  const auto look = expected_lookups_per_rank(spec, plan);
  ASSERT_EQ(look.size(), 2u);
  double total = 0;
  for (const auto& f : spec.features) total += static_cast<double>(spec.batch_size) * 2 * f.pooling_factor.mean;
  EXPECT_NEAR(look[0] + look[1], total, 1e-6 * total);
  EXPECT_GT(look[0], 1.5 * look[1]);  // row 0's shard holds the hot rows
}

TEST(PlannerStats, CriticalPathIsTheSumOfPerPhaseMaxima) {
  WorkloadSpec spec = load_preset("criteo_kaggle");
  const ShardingPlan plan = plan_sharding(spec);
  const PlanStats st = plan_stats(spec, plan, load_hardware_profile("h100_sxm"));
  ASSERT_EQ(st.ranks.size(), 4u);
  int64_t m[4] = {0, 0, 0, 0};
  for (const auto& r : st.ranks) {
    m[0] = std::max(m[0], r.fwd_compute_ns);
    m[1] = std::max(m[1], r.fwd_comms_ns);
    m[2] = std::max(m[2], r.bwd_compute_ns);
    m[3] = std::max(m[3], r.bwd_comms_ns);
    EXPECT_GT(r.fwd_compute_ns, 0);
    EXPECT_GT(r.fwd_comms_ns, 0);
    EXPECT_EQ(r.ddr_bytes, 0);
    int shards = 0;
    for (int n : r.shards) shards += n;
    EXPECT_EQ(shards, r.shards[static_cast<size_t>(ShardingType::table_wise)]);
  }
  EXPECT_EQ(st.critical_path_ns, m[0] + m[1] + m[2] + m[3]);
  EXPECT_GE(st.critical_path_ns, st.max_rank_total_ns);
  EXPECT_TRUE(st.fits);
  // the greedy-by-bytes plan's lookup imbalance (docs/output.md: 3.38x): every table serves 512 x 4 ids
  EXPECT_GT(st.lookups.max_over_mean, 3.0);
}

// A hashed table's rows are xxHash64 buckets: on average over hash functions (shard_id_share) a
// row range's share of the ids is its share of hash_size, even for Zipf ids with the hottest id
// at row 0 (permute = false), whose unhashed share of the first quarter of 1,000 rows is far
// above 1/4. (Under the run's fixed hash each hot id sits in one bucket: realized_id_share,
// hashed_share_test.cpp.)
TEST(PlannerStats, HashedTablesShareTheIdsByStoredRows) {
  FeatureSpec f;
  f.ids.kind = IdDistributionKind::zipf;
  f.ids.alpha = 1.1;
  f.ids.permute = false;
  TableSpec t{"t", 1000, 8, Pooling::sum, {"f"}};
  EXPECT_GT(shard_id_share(t, f, 0, 250), 0.5);
  EXPECT_DOUBLE_EQ(shard_id_share(t, f, 0, 250), row_range_share(f, 1000, 0, 250));
  t.hash_size = 100;
  EXPECT_DOUBLE_EQ(shard_id_share(t, f, 0, 25), 0.25);
  EXPECT_DOUBLE_EQ(shard_id_share(t, f, 25, 75), 0.75);
  EXPECT_DOUBLE_EQ(shard_id_share(t, f, 0, 0), 0.0);
}

// Every sharding type has its own count in the stats table (tester33 D10: grid_shard and
// table_column_wise shards went uncounted, written past the end of a 5-slot array): tiny on 4
// ranks in nodes of 2, each table grid_shard (its columns split over the 2 nodes, each block
// row-wise over a node's 2 ranks: 2 shards a rank per table) or table_column_wise.
TEST(PlannerStats, GridAndTableColumnWiseShardsAreCountedAndNamed) {
  for (ShardingType type : {ShardingType::grid_shard, ShardingType::table_column_wise}) {
    WorkloadSpec s = load_preset("tiny");
    s.devices.count = 4;
    s.sharding.default_type = type;
    s.sharding.per_table.clear();
    s.sharding.local_world_size = 2;
    const ShardingPlan plan = plan_sharding(s);
    const PlanStats st = plan_stats(s, plan, load_hardware_profile("h100_sxm"));
    std::vector<int> expected(4, 0);
    for (const TablePlan& tp : plan.tables) {
      ASSERT_EQ(tp.type, type);
      for (const Shard& sh : tp.shards) ++expected[static_cast<size_t>(sh.rank)];
    }
    int total = 0;
    for (const RankStats& r : st.ranks) {
      EXPECT_EQ(r.shards[static_cast<size_t>(type)], expected[static_cast<size_t>(r.rank)]) << enum_name(type);
      int all = 0;
      for (int n : r.shards) all += n;
      EXPECT_EQ(all, r.shards[static_cast<size_t>(type)]) << "only " << enum_name(type) << " shards";
      total += all;
    }
    EXPECT_GT(total, 0);
    const auto j = to_json(st);
    EXPECT_EQ(j["ranks"][0]["shards"].size(), 1u) << j["ranks"][0]["shards"].dump();
    EXPECT_EQ(j["ranks"][0]["shards"].value(enum_name(type), 0), expected[0]);
    const std::string text = to_text(st);
    EXPECT_NE(text.find(type == ShardingType::grid_shard ? "GS " : "TWCW "), std::string::npos) << text;
  }
}
