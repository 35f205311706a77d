// Tables in host memory train exactly as on the device (TableSpec::placement host, host_cached
// with lru and lfu): under table_wise, row_wise and column_wise, every optimizer and every
// pipeline, the forward outputs, tables, dense parameters and loss equal the unsharded reference
// (parity_check.h), and the tables and losses equal the device placement's bit for bit. The
// load counters show that the cache really hit and missed (a cache of 0.3 of the rows), and the
// session's load_counters add up to the run's totals.

#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/sessions/analysis/load_imbalance.h"
#include "embedscope/sessions/store/session.h"
#include "engine/parity_check.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

struct HostCase {
  TablePlacement placement;
  CachePolicy policy;
};

using HostParityParam = std::tuple<ShardingType, OptimizerType, PipelineKind>;

class HostPlacementParity : public ::testing::TestWithParam<HostParityParam> {};

RunResult device_run(const WorkloadSpec& s, const ShardingPlan& plan) {
  TrainerOptions opt;
  opt.keep_tables = true;
  opt.trace = false;
  return run_training(s, plan, opt);
}

TEST_P(HostPlacementParity, EqualsTheReferenceAndTheDevicePlacementExactly) {
  const auto [type, opt, pipeline] = GetParam();
  WorkloadSpec dev = parity_spec(type, 3, Pooling::sum, opt);
  dev.pipeline = pipeline;
  dev.steps = 4;
  const ShardingPlan plan = plan_sharding(dev);
  const RunResult on_device = device_run(dev, plan);
  ASSERT_EQ(on_device.ended, RunEnd::complete) << on_device.error;
  for (const HostCase hc : {HostCase{TablePlacement::host, CachePolicy::lru}, HostCase{TablePlacement::host_cached, CachePolicy::lru},
                            HostCase{TablePlacement::host_cached, CachePolicy::lfu}}) {
    SCOPED_TRACE(fmt::format("{} {}", to_string(hc.placement), to_string(hc.policy)));
    WorkloadSpec s = dev;
    for (auto& t : s.tables) {
      t.placement = hc.placement;
      t.cache_policy = hc.policy;
      t.cache_load_factor = 0.3;
    }
    const RunResult run = check_parity(s, {}, false, &plan);
    ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
    ASSERT_EQ(run.tables.size(), on_device.tables.size());
    for (size_t t = 0; t < run.tables.size(); ++t) EXPECT_EQ(run.tables[t], on_device.tables[t]) << "table " << t;
    EXPECT_EQ(run.loss, on_device.loss);
    EXPECT_EQ(run.dense_params, on_device.dense_params);
    // t3: 50 rows x 16 with Zipf ids, cache of 0.3 x its shard's rows
    const auto& t3 = run.table_storage[3];
    EXPECT_EQ(t3.placement, hc.placement);
    EXPECT_GT(t3.cache_misses, 0);
    EXPECT_GT(t3.rows_fetched, 0);
    EXPECT_GT(t3.bytes_h2d, 0);
    EXPECT_GT(t3.bytes_d2h, 0);
    int64_t host = 0, cache = 0, weights = 0;
    for (size_t r = 0; r < t3.host_bytes.size(); ++r) {
      host += t3.host_bytes[r];
      cache += t3.cache_bytes[r];
      weights += t3.weight_bytes[r];
    }
    EXPECT_EQ(weights, 50 * 16 * 4);
    EXPECT_GE(host, weights);
    if (hc.placement == TablePlacement::host) {
      EXPECT_EQ(t3.cache_hits, 0);
      EXPECT_EQ(cache, 0);
    } else {
      EXPECT_GT(t3.cache_hits, 0);
      // each shard's cache: its slots' rows in a 512 B-rounded block (cache_device_bytes)
      int64_t blocks = 0;
      for (const Shard& sh : run.plan.tables[3].shards)
        blocks += (cache_slots(0.3, sh.num_rows) * sh.num_cols * 4 + 511) / 512 * 512;
      EXPECT_EQ(cache, blocks);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, HostPlacementParity,
    ::testing::Combine(::testing::Values(ShardingType::table_wise, ShardingType::row_wise, ShardingType::column_wise),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam),
                       ::testing::Values(PipelineKind::base, PipelineKind::sparse_dist, PipelineKind::semi_sync)),
    [](const ::testing::TestParamInfo<HostParityParam>& p) {
      return fmt::format("{}_{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)),
                         to_string(std::get<2>(p.param)));
    });

// The session's load counters carry the transfers: summed over the measured steps they are the
// run's totals, and each step's hits + misses are the distinct rows of that step's lookups.
TEST(HostPlacementSession, LoadCountersAddUpToTheRunsTotals) {
  WorkloadSpec s = parity_spec(ShardingType::row_wise, 2, Pooling::mean, OptimizerType::rowwise_adagrad);
  s.warmup_steps = 1;
  for (auto& t : s.tables) {
    t.placement = TablePlacement::host_cached;
    t.cache_load_factor = 0.5;
  }
  const auto path = std::filesystem::temp_directory_path() / fmt::format("host_placement_{}.embedscope", ::getpid());
  TrainerOptions opt;
  opt.session_path = path.string();
  opt.session_overwrite = true;
  opt.trace = false;
  const RunResult run = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(run.ended, RunEnd::complete) << run.error;
  embedscope::sessions::SessionReader reader(path.string());
  std::vector<int64_t> hits(s.tables.size()), misses(s.tables.size()), h2d(s.tables.size());
  for (const auto& c : reader.load()) {
    if (c.step < 0) continue;  // warmup
    hits[static_cast<size_t>(c.table)] += c.cache_hits;
    misses[static_cast<size_t>(c.table)] += c.cache_misses;
    h2d[static_cast<size_t>(c.table)] += c.bytes_h2d;
    EXPECT_LE(c.cache_hits + c.cache_misses, c.ids) << "distinct rows are at most the ids";
  }
  int64_t any_hits = 0;
  for (size_t t = 0; t < s.tables.size(); ++t) {
    EXPECT_EQ(hits[t], run.table_storage[t].cache_hits) << t;
    EXPECT_EQ(misses[t], run.table_storage[t].cache_misses) << t;
    EXPECT_EQ(h2d[t], run.table_storage[t].bytes_h2d) << t;
    any_hits += hits[t];
  }
  EXPECT_GT(any_hits, 0);
  // the load view's metrics (sessions/analysis/load_imbalance.h) read the same counters
  namespace ss = embedscope::sessions;
  double view_hits = 0, view_h2d = 0;
  for (double v : ss::load_data(reader, ss::LoadMetric::cache_hits).per_rank) view_hits += v;
  for (double v : ss::load_data(reader, ss::LoadMetric::bytes_h2d).per_rank) view_h2d += v;
  int64_t run_h2d = 0;
  for (const auto& t : run.table_storage) run_h2d += t.bytes_h2d;
  EXPECT_EQ(view_hits, static_cast<double>(any_hits));
  EXPECT_EQ(view_h2d, static_cast<double>(run_h2d));
  EXPECT_STREQ(ss::to_string(ss::LoadMetric::bytes_d2h), "bytes device to host");
  std::filesystem::remove(path);
}

}  // namespace
