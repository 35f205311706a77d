// Issue 14, "asynchronous, overlapped, exact": the pieces that keep device-synchronizing
// allocations out of a step, tested on the host: the workspace's growth policy
// (kernels/workspace.h), the plan cache keyed by shard shape (exec/device/shard_plan_cache.h),
// the host stand-in's plans, and a whole run on the host stand-in (TrainerOptions::emulate_device)
// in which every shard's plan was prepared at setup, so no step built one. Hand-computed values.
#include <gtest/gtest.h>

#include <thread>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/kernels/workspace.h"
#include "embedscope/engine/workload/presets.h"
#include "exec/device/rank_device.h"
#include "exec/device/shard_plan_cache.h"

namespace es = embedscope::engine;
namespace esd = embedscope::engine::detail;

namespace {
// malloc / free counted, the sizes asked for recorded
struct CountingHeap {
  std::vector<size_t> sizes;
  int frees = 0;
  es::GrowOnlyWorkspace workspace() {
    return es::GrowOnlyWorkspace(
        [this](size_t b) {
          sizes.push_back(b);
          return std::malloc(b);
        },
        [this](void* p) {
          ++frees;
          std::free(p);
        });
  }
};
}  // namespace

TEST(DeviceWorkspace, GrowsByDoublingRoundedTo256AndIsReusedBelowItsCapacity) {
  CountingHeap heap;
  {
    es::GrowOnlyWorkspace w = heap.workspace();
    EXPECT_EQ(w.reserve(0), nullptr);  // nothing asked, nothing allocated
    EXPECT_EQ(w.allocs(), 0);
    void* a = w.reserve(1000);  // round_up(max(1000, 0)) = 1024
    EXPECT_EQ(w.capacity(), 1024u);
    EXPECT_EQ(w.reserve(1024), a);  // fits: the same block, no call
    EXPECT_EQ(w.reserve(1), a);
    w.reserve(1100);  // max(1100, 2 x 1024) = 2048
    EXPECT_EQ(w.capacity(), 2048u);
    w.reserve(5000);  // max(5000, 4096) = 5000 -> 5120
    EXPECT_EQ(w.capacity(), 5120u);
    for (int step = 0; step < 100; ++step) w.reserve(static_cast<size_t>(100 + 49 * step));  // <= 4951: reused
    EXPECT_EQ(w.allocs(), 3);
    EXPECT_EQ(w.frees(), 2);  // the 1024 and 2048 blocks, each before the larger one was allocated
    EXPECT_EQ(heap.sizes, (std::vector<size_t>{1024, 2048, 5120}));
  }
  EXPECT_EQ(heap.frees, 3);  // the destructor freed the last block
}

TEST(DeviceWorkspace, GrownCapacityAndScratchLayoutMatchTheKernelsPieces) {
  EXPECT_EQ(es::GrowOnlyWorkspace::grown_capacity(0, 1), 256u);
  EXPECT_EQ(es::GrowOnlyWorkspace::grown_capacity(256, 300), 512u);
  EXPECT_EQ(es::GrowOnlyWorkspace::grown_capacity(512, 2000), 2048u);
  EXPECT_EQ(es::GrowOnlyWorkspace::grown_capacity(1024, 1100), 2048u);  // doubles rather than grow by 76 B
  // tbe_backward_update's pieces for 100 ids and 3000 bytes of CUB storage: 3 x 800 B keys,
  // 5 x 400 B int32 arrays, 4 B num_runs, 3000 B temp, each rounded to 256:
  // 3 x 1024 + 5 x 512 + 256 + 3072 = 8960
  es::ScratchLayout sizing;
  for (int i = 0; i < 3; ++i) sizing.take(800);
  for (int i = 0; i < 5; ++i) sizing.take(400);
  sizing.take(4);
  sizing.take(3000);
  EXPECT_EQ(sizing.need(), 8960u);
  std::vector<char> block(8960);
  es::ScratchLayout placed(block.data());
  EXPECT_EQ(placed.take(800), block.data());
  EXPECT_EQ(placed.take(800), block.data() + 1024);
  EXPECT_EQ(placed.need(), 2048u);
  EXPECT_THROW(es::GrowOnlyWorkspace(nullptr, [](void*) {}), std::invalid_argument);
}

TEST(DeviceWorkspace, AFailedGrowthLeavesItEmptyAndTheNextReserveTriesAgain) {
  int calls = 0;
  es::GrowOnlyWorkspace w(
      [&](size_t b) -> void* {
        if (++calls == 2) throw std::bad_alloc();
        return std::malloc(b);
      },
      [](void* p) { std::free(p); });
  w.reserve(100);
  EXPECT_THROW(w.reserve(1000), std::bad_alloc);
  EXPECT_EQ(w.capacity(), 0u);
  EXPECT_NE(w.reserve(1000), nullptr);
  EXPECT_EQ(w.capacity(), 1024u);
}

TEST(DevicePlanCache, OnePlanPerShardShapeBuiltOnceAndMissesCounted) {
  int built = 0;
  esd::ShardPlanCache<std::vector<int64_t>> cache([&](const esd::ShardShape& s) {
    ++built;
    return std::make_unique<std::vector<int64_t>>(std::vector<int64_t>{s.rows, s.cols});
  });
  const auto& a = cache.prepare({1000, 16});
  EXPECT_EQ(&cache.prepare({1000, 16}), &a);  // prepared twice: built once
  cache.prepare({500, 16});
  EXPECT_EQ(cache.builds(), 2);
  EXPECT_EQ(cache.misses(), 0);
  for (int step = 0; step < 10; ++step) {
    EXPECT_EQ(&cache.get({1000, 16}), &a);  // the same plan every step, not rebuilt
    EXPECT_EQ(cache.get({500, 16}), (std::vector<int64_t>{500, 16}));
  }
  EXPECT_EQ(built, 2);
  EXPECT_EQ(cache.misses(), 0);
  cache.get({1000, 8});  // a shard setup did not prepare: built in the step, counted
  cache.get({1000, 8});
  EXPECT_EQ(cache.builds(), 3);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_THROW(cache.get({10, 0}), std::invalid_argument);
  EXPECT_EQ(cache.builds(), 3);
}

TEST(DevicePlanCache, HostStandInCountsPlansAStepHadToBuild) {
  const auto dev = esd::host_rank_device(0);
  dev->bind_thread();
  dev->prepare_shard(4, 2);
  std::vector<float> w{1, 2, 3, 4, 5, 6, 7, 8}, out(4, -1.0f);
  std::vector<int64_t> ids{0, 3, 1}, off{0, 2, 3};
  dev->lookup(w.data(), 4, 2, ids.data(), off.data(), 2, nullptr, out.data());
  EXPECT_EQ(out, (std::vector<float>{1 + 7, 2 + 8, 3, 4}));
  EXPECT_EQ(dev->sync_calls().total(), 0);
  dev->lookup(w.data(), 2, 4, ids.data(), off.data(), 0, nullptr, out.data());  // no bags: no plan asked for
  EXPECT_EQ(dev->sync_calls().total(), 0);
  std::vector<float> w2(8, 0.0f), o2(4);
  std::vector<int64_t> i2{1}, f2{0, 1};
  dev->lookup(w2.data(), 2, 4, i2.data(), f2.data(), 1, nullptr, o2.data());  // 2 x 4 was not prepared
  EXPECT_EQ(dev->sync_calls().plan_misses, 1);
}

// The stand-in's device is current per thread as a GPU's is (cudaSetDevice): an op from a thread
// that did not bind to it - the comm worker before Rank::setup bound it - is refused, naming the
// call; after bind_thread it runs, and binding another device makes this one refuse again.
TEST(DevicePlanCache, HostStandInRefusesOpsFromAThreadNotBoundToIt) {
  const auto dev0 = esd::host_rank_device(0), dev1 = esd::host_rank_device(1);
  std::vector<float> a{1, 2}, b(2, 0.0f);
  std::thread([&] {
    try {
      dev1->comm_add(b.data(), a.data(), 2);
      ADD_FAILURE() << "comm_add from an unbound thread ran";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("comm_add on emulated device 1 from a thread bound to no device"),
                std::string::npos)
          << e.what();
    }
    dev1->bind_thread();
    dev1->comm_add(b.data(), a.data(), 2);
    EXPECT_EQ(b, (std::vector<float>{1, 2}));
    dev0->bind_thread();  // the thread's current device is 0 now
    EXPECT_THROW(dev1->to_host(b.data(), a.data(), 8), std::logic_error);
    dev0->to_host(b.data(), a.data(), 8);
  }).join();
}

// A whole run on the host stand-in: every shard's (and hot replica's) plan is prepared at setup,
// so the steps built none - the count the GPU twin asserts for cudaMalloc / cudaFree.
TEST(DevicePlanCache, EmulatedDeviceRunBuildsNoPlanInAnyStep) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 2;
  s.steps = 3;
  s.warmup_steps = 1;
  es::TrainerOptions opt;
  opt.emulate_device = true;
  const esd::StepSyncCallTotals before = esd::step_sync_call_totals();
  const es::RunResult r = es::run_training(s, es::plan_sharding(s), opt);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
  const esd::StepSyncCallTotals after = esd::step_sync_call_totals();
  EXPECT_EQ(after.warmup - before.warmup, 0);
  EXPECT_EQ(after.measured - before.measured, 0);
}

// The same with hot-row replicas (a shard of its own on every rank, hot_rows x dim): prepared too.
TEST(DevicePlanCache, EmulatedDeviceRunWithHotRowReplicasBuildsNoPlanInAnyStep) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 2;
  s.steps = 2;
  s.warmup_steps = 1;
  const auto big = std::max_element(s.tables.begin(), s.tables.end(),
                                    [](const auto& a, const auto& b) { return a.rows() < b.rows(); });
  ASSERT_GE(big->rows(), 6);
  s.sharding.per_table[big->name].type = es::ShardingType::row_wise;
  s.sharding.per_table[big->name].hot_rows = {0, 3, 5};
  es::TrainerOptions opt;
  opt.emulate_device = true;
  const esd::StepSyncCallTotals before = esd::step_sync_call_totals();
  const es::RunResult r = es::run_training(s, es::plan_sharding(s), opt);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
  const esd::StepSyncCallTotals after = esd::step_sync_call_totals();
  EXPECT_EQ(after.warmup - before.warmup, 0);
  EXPECT_EQ(after.measured - before.measured, 0);
}

TEST(DevicePlanCache, StepSyncCallTotalsAddUp) {
  const esd::StepSyncCallTotals before = esd::step_sync_call_totals();
  esd::add_step_sync_calls(false, 3);
  esd::add_step_sync_calls(true, 2);
  const esd::StepSyncCallTotals after = esd::step_sync_call_totals();
  EXPECT_EQ(after.warmup - before.warmup, 3);
  EXPECT_EQ(after.measured - before.measured, 2);
  esd::add_step_sync_calls(false, -3);  // restore for the other tests of this process
  esd::add_step_sync_calls(true, -2);
}

// The host copy of a buffer on a device arena can be released after the upload and given back
// for the read-back (Rank::prepare_on_gpu, keep_tables); the device block and size stay.
TEST(DeviceBufferHostCopy, ReleasedAfterUploadAndRestoredForTheReadBack) {
  es::AllocatorConfig config{es::AllocatorKind::caching, 64 << 20, 0, true};
  es::DeviceArena arena(0, es::DeviceAllocator::create(config), /*device_memory=*/true);
  es::DeviceBuffer<float> b(&arena, "weights");
  b.assign(1000, 2.5f);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_NE(static_cast<void*>(b.data()), static_cast<void*>(b.device_data()));  // a host copy of its own
  float* block = b.device_data();
  b.release_host_copy();
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_EQ(b.device_data(), block);
  EXPECT_EQ(arena.in_use(), 4096);  // 4000 B rounded to the caching allocator's 512 B blocks
  b.restore_host_copy();
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b[999], 0.0f);
  // a buffer without a device arena keeps its memory: release does nothing
  es::DeviceBuffer<float> host;
  host.assign(3, 1.0f);
  host.release_host_copy();
  EXPECT_EQ(host[2], 1.0f);
}
