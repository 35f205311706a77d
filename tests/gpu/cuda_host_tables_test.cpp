// Tables in host memory and low-rank tables on real GPUs (label `gpu`, issue 16; the device
// path's logic is tested without a GPU in tests/engine/model/host_placement_device_test.cpp):
// placement host and host_cached (lru, lfu) and low_rank_dim on the cuda backend train the
// model of the unsharded reference (parity_check.h tolerances), and the host tables' transfer
// counters (cache hits and misses, rows fetched, bytes each way) equal the cpu backend's exactly:
// the cache decisions depend on the ids only. Skipped, with cudaGetDeviceCount's answer, where
// no device is present. World size: min(2, GPUs). In the device checks' cuda-executor row
// (tests/gpu/run_device_checks.sh: *CudaExecutor*).
#include <gtest/gtest.h>

#include <algorithm>

#include "../engine/parity_check.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/profiler/device/cuda_device.h"

using namespace embedscope;
using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

TEST(CudaExecutor, HostCachedHostAndLowRankTablesMatchTheReferenceAndTheCpuCounters) {
  const int n = profiler::cuda_devices().count;
  if (auto why = profiler::cuda_unavailable_reason(1); !why.empty()) GTEST_SKIP() << why;
  WorkloadSpec s = parity_spec(ShardingType::row_wise, std::min(2, n), Pooling::sum, OptimizerType::rowwise_adagrad);
  s.steps = 4;
  s.tables[0].placement = TablePlacement::host_cached;  // t0 10 x 6, lfu
  s.tables[0].cache_policy = CachePolicy::lfu;
  s.tables[0].cache_load_factor = 0.3;
  s.tables[1].placement = TablePlacement::host;  // t1 1 x 4
  s.tables[2].low_rank_dim = 2;                  // t2 3 x 5 as A 3 x 2, B 2 x 5
  s.tables[3].placement = TablePlacement::host_cached;  // t3 50 x 16, Zipf ids, lru
  s.tables[3].cache_load_factor = 0.3;
  const ShardingPlan plan = plan_sharding(s);
  WorkloadSpec on_cpu = s;
  s.devices.backend = Backend::cuda;
  const RunResult gpu = check_parity(s, {}, false, &plan);
  ASSERT_EQ(gpu.ended, RunEnd::complete) << gpu.error;
  TrainerOptions opt;
  opt.keep_tables = true;
  opt.trace = false;
  const RunResult cpu = run_training(on_cpu, plan, opt);
  ASSERT_EQ(cpu.ended, RunEnd::complete) << cpu.error;
  for (size_t t = 0; t < cpu.tables.size(); ++t) expect_close(gpu.tables[t], cpu.tables[t], "table " + s.tables[t].name);
  for (size_t t : {size_t{0}, size_t{1}, size_t{3}}) {
    const auto &a = gpu.table_storage[t], &b = cpu.table_storage[t];
    EXPECT_EQ(a.cache_hits, b.cache_hits) << t;
    EXPECT_EQ(a.cache_misses, b.cache_misses) << t;
    EXPECT_EQ(a.rows_fetched, b.rows_fetched) << t;
    EXPECT_EQ(a.bytes_h2d, b.bytes_h2d) << t;
    EXPECT_EQ(a.bytes_d2h, b.bytes_d2h) << t;
    EXPECT_EQ(a.cache_bytes, b.cache_bytes) << t;
  }
  EXPECT_GT(gpu.table_storage[3].cache_hits, 0);
  EXPECT_GT(gpu.table_storage[3].cache_misses, 0);
}

}  // namespace
