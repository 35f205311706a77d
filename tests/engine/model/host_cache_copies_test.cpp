// The copies a host_cached table makes on the cuda backend's device path (issue 16 / 14): its
// rows move in batches (model/host_cache.h: a fixed number of HostCacheDevice copies a call,
// counted process-wide by detail::host_cache_copy_calls), so the copies of a step do not grow
// with the rows it moves. Run on the host stand-in (TrainerOptions::emulate_device).

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "embedscope/engine/exec/run.h"
#include "engine/parity_check.h"
#include "exec/device/rank_device.h"

using namespace embedscope::engine;

namespace {

// One table of `rows` x 8, host_cached at load factor 1 (a slot for every row: no eviction), one
// feature of 4 uniform ids a sample, sgd, one rank, 4 steps of `batch` samples.
WorkloadSpec copies_spec(int64_t rows, int64_t batch) {
  WorkloadSpec s = parity::parity_spec(ShardingType::table_wise, 1, Pooling::sum, OptimizerType::sgd);
  s.tables = {{"t", rows, 8, Pooling::sum, {"f"}}};
  s.tables[0].placement = TablePlacement::host_cached;
  s.tables[0].cache_load_factor = 1.0;
  s.tables[0].cache_policy = CachePolicy::lru;
  FeatureSpec f;
  f.name = "f";
  f.pooling_factor = {true, 4, 4};
  s.features = {f};
  s.batch_size = batch;
  s.steps = 4;
  s.warmup_steps = 0;
  return s;
}

TEST(HostCacheCopies, AStepMakesTheSameCopiesWhateverItsRows) {
  // By hand (host_cache.h): step 1 misses every row (4 x batch uniform ids over `rows` rows: P(a
  // row unnamed) < rows (1 - 1/rows)^(4 batch) < 1e-13 here) and inserts them all: its gather is
  // 3 copies (the indices up, the gather, the insertions); steps 2-4 only hit: 2 copies each (the
  // indices, the gather). Each update (sgd: no state) is 4: the indices up, the gradient up, the
  // rows gathered, the rows written back. keep_tables' flush at the end writes the dirty rows back:
  // 2 (the indices, the copy). Total 3 + 3 x 2 + 4 x 4 + 2 = 27, for 8 rows or 64.
  for (const auto& [rows, batch] : {std::pair<int64_t, int64_t>{8, 64}, std::pair<int64_t, int64_t>{64, 1024}}) {
    SCOPED_TRACE(fmt::format("{} rows, batch {}", rows, batch));
    const WorkloadSpec s = copies_spec(rows, batch);
    TrainerOptions opt;
    opt.emulate_device = true;
    opt.keep_tables = true;
    opt.trace = false;
    const int64_t before = detail::host_cache_copy_calls();
    const RunResult r = run_training(s, plan_sharding(s), opt);
    ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
    EXPECT_EQ(detail::host_cache_copy_calls() - before, 27);
    // the premise: every row missed once (step 1) and fetched once, the rest hits
    ASSERT_EQ(r.table_storage.size(), 1u);
    EXPECT_EQ(r.table_storage[0].cache_misses, rows);
    EXPECT_EQ(r.table_storage[0].rows_fetched, rows);
    EXPECT_GT(r.table_storage[0].cache_hits, 3 * (rows - 1));
  }
}

}  // namespace
