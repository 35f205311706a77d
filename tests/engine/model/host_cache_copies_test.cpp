// The copies a host_cached table makes on the cuda backend's device path (issue 16 / 14): its
// rows move in batches (model/host_cache.h: a fixed number of HostCacheDevice copies a call,
// counted process-wide by detail::host_cache_copy_calls), so the copies of a step do not grow
// with the rows it moves. Run on the host stand-in (TrainerOptions::emulate_device).

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/kernels/row_copy.h"
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

// copy_rows, the CPU reference of the batched moves (and what the host stand-in runs): rows
// from either base by index (-1 - k names row k of the _alt base), to either base, by hand.
TEST(HostRowCopy, CopiesRowsBetweenEitherBaseByIndex) {
  const std::vector<float> cache = {0, 1, 10, 11, 20, 21};  // 3 slots x 2
  const std::vector<float> host = {100, 101, 110, 111};     // 2 host rows x 2
  const std::vector<int64_t> src = {2, -1, -2, 0};          // slot 2, host row 0, host row 1, slot 0
  std::vector<float> out(8, -1.0f);
  copy_rows(4, 2, cache.data(), host.data(), src.data(), out.data(), nullptr, nullptr);
  EXPECT_EQ(out, (std::vector<float>{20, 21, 100, 101, 110, 111, 0, 1}));
  // scatter back: buffer rows 0..3 to host row 1, slot 1, host row 0, slot 0
  std::vector<float> c2 = cache, h2 = host;
  const std::vector<int64_t> dst = {-2, 1, -1, 0};
  copy_rows(4, 2, out.data(), nullptr, nullptr, c2.data(), h2.data(), dst.data());
  EXPECT_EQ(c2, (std::vector<float>{0, 1, 100, 101, 20, 21}));
  EXPECT_EQ(h2, (std::vector<float>{110, 111, 20, 21}));
  copy_rows(0, 2, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);  // nothing to copy
  EXPECT_THROW(copy_rows(1, 2, cache.data(), nullptr, src.data() + 1, out.data(), nullptr, nullptr),
               std::invalid_argument);  // host row with no host base
  EXPECT_THROW(copy_rows(-1, 2, cache.data(), nullptr, nullptr, out.data(), nullptr, nullptr), std::invalid_argument);
}

}  // namespace
