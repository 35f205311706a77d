// Row shards as TorchRec splits them (sharding.h row_wise_split: block = ceil(rows / ranks), the
// remainder next, then empty shards), end to end: the plan's row ranges by hand, a run on the cpu
// backend and on the device stand-in (TrainerOptions::emulate_device) against the unsharded
// reference, and the session's load counters and stats against the ids bucketed here by hand.
// The parity workload's tables with t0 cut to 9 rows, which TorchRec splits 3, 3, 3, 0 over 4
// ranks: an empty shard although the table has more rows than ranks (the balanced split gave
// 3, 2, 2, 2).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "embedscope/engine/input/input.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"
#include "engine/parity_check.h"

using namespace embedscope::engine;

namespace {

WorkloadSpec rw_split_spec(ShardingType type) {
  WorkloadSpec s = parity::parity_spec(type, 4, Pooling::sum, OptimizerType::rowwise_adagrad);
  s.tables[0].num_embeddings = 9;
  s.warmup_steps = 0;
  return s;
}

std::vector<std::pair<int64_t, int64_t>> rw_split_ranges(const TablePlan& tp) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Shard& s : tp.shards) out.emplace_back(s.row_offset, s.num_rows);
  return out;
}

}  // namespace

// By hand, 4 ranks: t0 9 rows -> block 3, 3 full blocks, the remainder 0; t1 1 row -> block 1,
// 1 full, the rest 0; t2 3 rows -> 1, 1, 1, 0; t3 50 rows -> block 13, 3 full (39), 11 left.
// table_row_wise over nodes of 2 ranks: t0 -> 5, 4; t1 -> 1, 0; t2 -> 2, 1; t3 -> 25, 25.
TEST(TorchRecRowSplit, PlanRowRangesByHand) {
  using R = std::vector<std::pair<int64_t, int64_t>>;
  const ShardingPlan rw = plan_sharding(rw_split_spec(ShardingType::row_wise));
  EXPECT_EQ(rw_split_ranges(rw.tables[0]), (R{{0, 3}, {3, 3}, {6, 3}, {9, 0}}));
  EXPECT_EQ(rw_split_ranges(rw.tables[1]), (R{{0, 1}, {1, 0}, {1, 0}, {1, 0}}));
  EXPECT_EQ(rw_split_ranges(rw.tables[2]), (R{{0, 1}, {1, 1}, {2, 1}, {3, 0}}));
  EXPECT_EQ(rw_split_ranges(rw.tables[3]), (R{{0, 13}, {13, 13}, {26, 13}, {39, 11}}));
  const ShardingPlan twrw = plan_sharding(rw_split_spec(ShardingType::table_row_wise));
  EXPECT_EQ(rw_split_ranges(twrw.tables[0]), (R{{0, 5}, {5, 4}}));
  EXPECT_EQ(rw_split_ranges(twrw.tables[1]), (R{{0, 1}, {1, 0}}));
  EXPECT_EQ(rw_split_ranges(twrw.tables[2]), (R{{0, 2}, {2, 1}}));
  EXPECT_EQ(rw_split_ranges(twrw.tables[3]), (R{{0, 25}, {25, 25}}));
}

// The empty shards train as the unsharded reference on the cpu backend and on the device stand-in.
TEST(TorchRecRowSplit, EmptyShardsMatchTheReferenceOnCpuAndDeviceStandIn) {
  for (ShardingType type : {ShardingType::row_wise, ShardingType::table_row_wise}) {
    SCOPED_TRACE(to_string(type));
    parity::check_parity(rw_split_spec(type));
    parity::check_parity(rw_split_spec(type), {}, true);
  }
}

// The session's load counters (per table and shard, summed over steps) are the ids that fall in
// each shard's rows, counted here from the batches themselves; the empty shard counts none, and
// stats' ids looked up per rank are their sums.
TEST(TorchRecRowSplit, SessionLoadAndStatsCountTheIdsOfEachShard) {
  const WorkloadSpec s = rw_split_spec(ShardingType::row_wise);
  const ShardingPlan plan = plan_sharding(s);
  const BatchGenerator gen(s);
  TrainerOptions opt;
  opt.trace = true;
  opt.session_path =
      (std::filesystem::temp_directory_path() / ("es_torchrec_split_" + std::to_string(getpid()) + ".db")).string();
  opt.session_overwrite = true;
  opt.batch_source = [&](int64_t it, int rank) -> std::optional<Batch> { return gen.make(it, rank); };
  const RunResult r = run_training(s, plan, opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;

  // features f0 -> t0, f1 -> t1, f2a and f2b -> t2, f3 -> t3; hand-coded shard bounds per table
  const std::vector<int> table_of = {0, 1, 2, 2, 3};
  const std::vector<std::vector<int64_t>> bounds = {{0, 3, 6, 9, 9}, {0, 1, 1, 1, 1}, {0, 1, 2, 3, 3}, {0, 13, 26, 39, 50}};
  std::map<std::pair<int, int>, int64_t> want;  // (table, shard) -> ids
  std::vector<int64_t> want_rank(4, 0);
  for (int64_t it = 0; it < s.steps; ++it)
    for (int rank = 0; rank < 4; ++rank) {
      const Batch b = gen.make(it, rank);
      for (int f = 0; f < b.kjt.num_features; ++f) {
        const int t = table_of[static_cast<size_t>(f)];
        const int64_t end = f + 1 < b.kjt.num_features ? b.kjt.feature_offset(f + 1) : static_cast<int64_t>(b.kjt.values.size());
        for (int64_t i = b.kjt.feature_offset(f); i < end; ++i) {
          const int64_t id = b.kjt.values[static_cast<size_t>(i)];
          int shard = 0;
          while (!(id >= bounds[static_cast<size_t>(t)][static_cast<size_t>(shard)] &&
                   id < bounds[static_cast<size_t>(t)][static_cast<size_t>(shard + 1)]))
            ++shard;
          ++want[{t, shard}];
          ++want_rank[static_cast<size_t>(shard)];  // row_wise: shard k on rank k
        }
      }
    }
  EXPECT_EQ(want.count({0, 3}), 0u);  // nothing falls in t0's empty shard

  const embedscope::sessions::SessionReader session(opt.session_path);
  std::map<std::pair<int, int>, int64_t> got;
  for (const auto& c : session.load())
    if (c.ids > 0) got[{c.table, c.shard}] += c.ids;
  EXPECT_EQ(got, want);
  const auto stats = embedscope::sessions::analyze(session);
  ASSERT_EQ(stats.ranks.size(), 4u);
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_EQ(stats.ranks[static_cast<size_t>(rank)].ids_looked_up, want_rank[static_cast<size_t>(rank)]) << rank;
  std::filesystem::remove(opt.session_path);
}
