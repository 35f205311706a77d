// Tables in host memory on the cuda executor's device path (TrainerOptions::emulate_device: host
// memory standing in for the GPU, with the GPU's rules - the arena's buffers keep host copies
// apart from their device blocks, so a row read from the wrong one is wrong): placement host and
// host_cached (lru, lfu) move their rows through the device's copies and update them with its row
// optimizer (model/host_cache.h HostCacheDevice). Under table_wise, row_wise and column_wise and
// every optimizer the forward outputs, tables, dense parameters and loss equal the unsharded
// reference (parity_check.h), and the tables, losses and every transfer counter (cache hits and
// misses, rows fetched, bytes each way, prefetched rows) equal the cpu backend's run exactly:
// the same cache decisions on both backends.
//
// Low-rank tables (TableSpec::low_rank_dim, E = A B) on the device path too: A's rows looked up
// and (sum of A rows) x B, dA and dB, A's and B's updates on the device (RankDevice::
// low_rank_lookup / low_rank_backward / update); under table_wise, data_parallel and row_wise (B's
// gradient all-reduced on the host) the results equal the reference and the cpu backend's run.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "embedscope/engine/exec/run.h"
#include "engine/parity_check.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

struct DeviceHostCase {
  TablePlacement placement;
  CachePolicy policy;
};

// The cpu backend's run of `s` under `plan` (the counters to compare with).
RunResult host_tables_cpu_run(const WorkloadSpec& s, const ShardingPlan& plan) {
  TrainerOptions opt;
  opt.keep_tables = true;
  opt.trace = false;
  return run_training(s, plan, opt);
}

// Every table's transfer counters and storage bytes of the two runs are equal; t3 (50 x 16, Zipf
// ids, a cache of 0.3 of its rows) really missed, fetched and wrote back (and hit, when cached).
void expect_same_transfers(const RunResult& dev, const RunResult& cpu, TablePlacement placement) {
  ASSERT_EQ(dev.table_storage.size(), cpu.table_storage.size());
  for (size_t t = 0; t < dev.table_storage.size(); ++t) {
    SCOPED_TRACE(fmt::format("table {}", t));
    const auto &a = dev.table_storage[t], &b = cpu.table_storage[t];
    EXPECT_EQ(a.placement, placement);
    EXPECT_EQ(a.cache_hits, b.cache_hits);
    EXPECT_EQ(a.cache_misses, b.cache_misses);
    EXPECT_EQ(a.rows_fetched, b.rows_fetched);
    EXPECT_EQ(a.bytes_h2d, b.bytes_h2d);
    EXPECT_EQ(a.bytes_d2h, b.bytes_d2h);
    EXPECT_EQ(a.prefetched_rows, b.prefetched_rows);
    EXPECT_EQ(a.prefetch_bytes_h2d, b.prefetch_bytes_h2d);
    EXPECT_EQ(a.host_bytes, b.host_bytes);
    EXPECT_EQ(a.cache_bytes, b.cache_bytes);
  }
  const auto& t3 = dev.table_storage[3];
  EXPECT_GT(t3.cache_misses, 0);
  EXPECT_GT(t3.bytes_d2h, 0);
  if (placement == TablePlacement::host_cached) EXPECT_GT(t3.cache_hits, 0);
  else EXPECT_EQ(t3.cache_hits, 0);
}

using HostDeviceParam = std::tuple<ShardingType, OptimizerType>;
class HostPlacementOnDevice : public ::testing::TestWithParam<HostDeviceParam> {};

TEST_P(HostPlacementOnDevice, EqualsTheReferenceAndTheCpuBackendsTablesAndCounters) {
  const auto [type, opt] = GetParam();
  WorkloadSpec base = parity_spec(type, 3, Pooling::sum, opt);
  base.steps = 4;
  const ShardingPlan plan = plan_sharding(base);
  for (const DeviceHostCase hc : {DeviceHostCase{TablePlacement::host, CachePolicy::lru},
                                  DeviceHostCase{TablePlacement::host_cached, CachePolicy::lru},
                                  DeviceHostCase{TablePlacement::host_cached, CachePolicy::lfu}}) {
    SCOPED_TRACE(fmt::format("{} {}", to_string(hc.placement), to_string(hc.policy)));
    WorkloadSpec s = base;
    for (auto& t : s.tables) {
      t.placement = hc.placement;
      t.cache_policy = hc.policy;
      t.cache_load_factor = 0.3;
    }
    const RunResult dev = check_parity(s, {}, true, &plan);
    ASSERT_EQ(dev.ended, RunEnd::complete) << dev.error;
    const RunResult cpu = host_tables_cpu_run(s, plan);
    ASSERT_EQ(cpu.ended, RunEnd::complete) << cpu.error;
    ASSERT_EQ(dev.tables.size(), cpu.tables.size());
    for (size_t t = 0; t < dev.tables.size(); ++t) EXPECT_EQ(dev.tables[t], cpu.tables[t]) << "table " << t;
    EXPECT_EQ(dev.loss, cpu.loss);
    EXPECT_EQ(dev.dense_params, cpu.dense_params);
    expect_same_transfers(dev, cpu, hc.placement);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, HostPlacementOnDevice,
    ::testing::Combine(::testing::Values(ShardingType::table_wise, ShardingType::row_wise, ShardingType::column_wise),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<HostDeviceParam>& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

// The prefetch pipeline on the device path: under sparse_dist each batch's rows are fetched into
// the device cache a step ahead, as on the cpu backend (the same prefetched rows and bytes).
TEST(HostPlacementOnDevicePrefetch, PrefetchesTheSameRowsAsTheCpuBackend) {
  WorkloadSpec s = parity_spec(ShardingType::row_wise, 2, Pooling::mean, OptimizerType::rowwise_adagrad);
  s.pipeline = PipelineKind::sparse_dist;
  s.steps = 5;
  for (auto& t : s.tables) {
    t.placement = TablePlacement::host_cached;
    t.cache_load_factor = 0.5;
    t.prefetch_pipeline = true;
  }
  const ShardingPlan plan = plan_sharding(s);
  const RunResult dev = check_parity(s, {}, true, &plan);
  ASSERT_EQ(dev.ended, RunEnd::complete) << dev.error;
  const RunResult cpu = host_tables_cpu_run(s, plan);
  ASSERT_EQ(cpu.ended, RunEnd::complete) << cpu.error;
  for (size_t t = 0; t < dev.tables.size(); ++t) EXPECT_EQ(dev.tables[t], cpu.tables[t]) << "table " << t;
  EXPECT_EQ(dev.loss, cpu.loss);
  expect_same_transfers(dev, cpu, TablePlacement::host_cached);
  EXPECT_GT(dev.table_storage[3].prefetched_rows, 0);
}

// The cuda backend's memory estimate (planner/memory_replay.cpp) of host_cached tables: the cache
// slots on the device and the rows, state and row -> slot index in host memory, as on the cpu
// backend, and the update's staging of its gradient and row ids on the device on top.
TEST(HostPlacementOnDeviceEstimate, CountsTheCacheTheHostRowsAndTheUpdatesStaging) {
  WorkloadSpec cpu = parity_spec(ShardingType::table_wise, 1, Pooling::sum, OptimizerType::sgd);
  cpu.batch_size = 64;
  cpu.tables[3].num_embeddings = 5000;  // t3's fetched rows (up to its ids: 64 x 40) make the peak
  cpu.features[4].pooling_factor = {false, 20, 40};
  for (auto& t : cpu.tables) {
    t.placement = TablePlacement::host_cached;
    t.cache_load_factor = 0.3;
  }
  WorkloadSpec cuda = cpu;
  cuda.devices.backend = Backend::cuda;
  const ShardingPlan plan = plan_sharding(cpu);
  const auto a = estimate_memory(cpu, plan), b = estimate_memory(cuda, plan);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  // caches: ceil(0.3 rows) x dim x 4 each, in 512 B blocks: t0 3 x 6, t1 1 x 4, t2 1 x 5, t3 1500 x 16
  EXPECT_EQ(b[0].cache, 512 + 512 + 512 + 96256);  // 96,000 B of t3 rounded up to 188 x 512
  EXPECT_EQ(b[0].cache, a[0].cache);
  // host: the rows (sgd keeps no state) and 8 bytes a row of row -> slot index
  EXPECT_EQ(b[0].host, 4 * (10 * 6 + 1 * 4 + 3 * 5 + 5000 * 16) + 8 * (10 + 1 + 3 + 5000));
  EXPECT_EQ(b[0].host, a[0].host);
  EXPECT_EQ(b[0].weights, 0);  // no rows in device memory
  EXPECT_GT(b[0].buffers, a[0].buffers) << "the device's update staging is not counted";
}

using LowRankDeviceParam = std::tuple<ShardingType, OptimizerType>;
class LowRankOnDevice : public ::testing::TestWithParam<LowRankDeviceParam> {};

TEST_P(LowRankOnDevice, EqualsTheReferenceAndTheCpuBackendsRun) {
  const auto [type, opt] = GetParam();
  WorkloadSpec s = parity_spec(type, 3, Pooling::mean, opt);
  const int64_t r[] = {2, 1, 3, 4};  // t0 10 x 6, t1 1 x 4, t2 3 x 5, t3 50 x 16
  for (size_t t = 0; t < s.tables.size(); ++t) s.tables[t].low_rank_dim = r[t];
  const ShardingPlan plan = plan_sharding(s);
  const RunResult dev = check_parity(s, {}, true, &plan);
  ASSERT_EQ(dev.ended, RunEnd::complete) << dev.error;
  const RunResult cpu = host_tables_cpu_run(s, plan);
  ASSERT_EQ(cpu.ended, RunEnd::complete) << cpu.error;
  ASSERT_EQ(dev.tables.size(), cpu.tables.size());
  for (size_t t = 0; t < dev.tables.size(); ++t) EXPECT_EQ(dev.tables[t], cpu.tables[t]) << "table " << t;
  EXPECT_EQ(dev.loss, cpu.loss);
  EXPECT_EQ(dev.dense_params, cpu.dense_params);
  EXPECT_EQ(dev.table_storage[3].low_rank_dim, 4);
  EXPECT_EQ(dev.table_storage[3].total_weight_bytes(), cpu.table_storage[3].total_weight_bytes());
}

INSTANTIATE_TEST_SUITE_P(
    Types, LowRankOnDevice,
    ::testing::Combine(::testing::Values(ShardingType::table_wise, ShardingType::data_parallel, ShardingType::row_wise),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<LowRankDeviceParam>& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

}  // namespace
