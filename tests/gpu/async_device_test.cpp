// Issue 14, "asynchronous, overlapped, exact", on a device (label gpu; skipped with
// cudaGetDeviceCount's answer without one). NOT RUN where no GPU was lent: the host twins are
// tests/engine/exec/device_workspace_test.cpp and tests/engine/comm/completion_watchdog_test.cpp.
//  - CudaRankDevice's lookup and fused update against the host stand-in (the CPU reference:
//    pooled_lookup, apply_row_optimizer) step after step with changing bag counts, one plan per
//    shard prepared at setup, and no cudaMalloc / cudaFree (nor plan built) after the first step;
//  - a whole cuda run (4 ranks on one GPU): the measured steps made no device-synchronizing call;
//  - bucketize with no allocation once warm, and a deferred copy back that adds no wait;
//  - a run's measured steps wait as often on the GPU as on the stand-in (where
//    tests/engine/exec/device_count_read_test.cpp counts them by hand), with the same distinct rows.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/profiler/device/cuda_device.h"
#include "exec/device/cuda_rank_device.h"
#include "exec/device/rank_device.h"
#include "support/device_dist_runs.h"

namespace {
namespace en = embedscope::engine;
namespace ed = embedscope::engine::detail;

#define ASYNC_REQUIRE_GPUS(n)                                                                          \
  do {                                                                                                 \
    if (auto why = embedscope::profiler::cuda_unavailable_reason(n); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

// A device array of T with its upload / download (the test's own memory, not the rank's arena).
template <class T>
struct AsyncDevArray {
  T* p = nullptr;
  size_t n = 0;
  explicit AsyncDevArray(size_t count) : n(count) {
    if (cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess)
      throw std::runtime_error("cudaMalloc in the test");
  }
  ~AsyncDevArray() { cudaFree(p); }
  void put(const std::vector<T>& h) { cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

// |got - want| <= 1e-6 + 1e-5 |want| (gpu_kernels_test's backward tolerance: the warp reduction
// of rowwise_adagrad sums g^2 in another order); the forward is expected bit for bit.
int64_t async_mismatches(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::abs(static_cast<double>(got[i]) - want[i]) > 1e-6 + rel * std::abs(static_cast<double>(want[i]))) ++bad;
  return bad;
}
}  // namespace

TEST(CudaAsyncDevice, LookupAndUpdateEqualTheReferenceAndAllocateNothingAfterWarmUp) {
  ASYNC_REQUIRE_GPUS(1);
  constexpr int64_t rows = 1000, cols = 64;
  const auto host = ed::host_rank_device(0);
  ed::CudaRankDevice gpu(0);
  host->bind_thread();  // the host stand-in refuses calls from a thread bound to no device
  gpu.bind_thread();
  host->prepare_shard(rows, cols);
  gpu.prepare_shard(rows, cols);
  EXPECT_EQ(gpu.sync_calls().total(), 0);  // the plan was built by prepare_shard, not counted
  en::OptimizerSpec opt;
  opt.type = en::OptimizerType::rowwise_adagrad;
  opt.learning_rate = 0.05;
  std::vector<float> w(rows * cols), m1(rows, 0.0f);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  AsyncDevArray<float> dw(w.size()), dm1(m1.size());
  dw.put(w);
  dm1.put(m1);
  int64_t after_warmup = -1;
  const int64_t bags_per_step[] = {128, 40, 128, 7, 96, 1};  // the largest first: warm-up sees it
  for (int step = 0; step < 6; ++step) {
    const int64_t bags = bags_per_step[step];
    std::vector<int64_t> ids, off{0};
    for (int64_t b = 0; b < bags; ++b) {
      for (int64_t k = 0; k < 1 + (b + step) % 5; ++k) ids.push_back((b * 37 + k * 101 + step * 13) % rows);
      off.push_back(static_cast<int64_t>(ids.size()));
    }
    AsyncDevArray<int64_t> di(ids.size()), doff(off.size());
    di.put(ids);
    doff.put(off);
    AsyncDevArray<float> dout(static_cast<size_t>(bags * cols));
    std::vector<float> want(static_cast<size_t>(bags * cols));
    host->lookup(w.data(), rows, cols, ids.data(), off.data(), bags, nullptr, want.data());
    gpu.lookup(dw.p, rows, cols, di.p, doff.p, bags, nullptr, dout.p);
    cudaStreamSynchronize(gpu.stream());  // the lookup no longer waits: the test does
    EXPECT_EQ(async_mismatches(dout.get(), want, 0.0), 0) << "lookup, step " << step;
    // the update: distinct rows (every 3rd of the ids' rows), one bag each
    std::vector<int64_t> urows;
    for (int64_t r = step; r < rows; r += 3 + step) urows.push_back(r);
    if (step > 0) urows.resize(std::min<size_t>(urows.size(), static_cast<size_t>(bags)));
    const auto n = static_cast<int64_t>(urows.size());
    std::vector<int64_t> uoff(static_cast<size_t>(n + 1));
    for (int64_t i = 0; i <= n; ++i) uoff[static_cast<size_t>(i)] = i;
    std::vector<float> vals(static_cast<size_t>(n * cols));
    for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i + step)));
    AsyncDevArray<int64_t> dr(urows.size()), duo(uoff.size());
    AsyncDevArray<float> dv(vals.size());
    dr.put(urows);
    duo.put(uoff);
    dv.put(vals);
    host->update(opt, step + 1, w.data(), m1.data(), nullptr, rows, cols, urows.data(), uoff.data(), n, vals.data());
    gpu.update(opt, step + 1, dw.p, dm1.p, nullptr, rows, cols, dr.p, duo.p, n, dv.p);
    cudaStreamSynchronize(gpu.stream());
    EXPECT_EQ(async_mismatches(dw.get(), w, 1e-5), 0) << "weights after the update of step " << step;
    EXPECT_EQ(async_mismatches(dm1.get(), m1, 1e-5), 0) << "momentum after the update of step " << step;
    if (step == 0) after_warmup = gpu.sync_calls().total();
  }
  EXPECT_GE(after_warmup, 1);  // the workspace grew once in the first step
  EXPECT_EQ(gpu.sync_calls().total(), after_warmup) << "a later step allocated or built a plan";
  EXPECT_EQ(gpu.sync_calls().plan_misses, 0);
}

TEST(CudaAsyncDevice, FourRanksOnOneGpuMakeNoDeviceSynchronizingCallInMeasuredSteps) {
  ASYNC_REQUIRE_GPUS(1);
  en::WorkloadSpec s = en::load_preset("tiny");
  s.devices.backend = en::Backend::cuda;
  s.devices.count = 4;
  s.devices.ranks_per_gpu = 4;
  s.warmup_steps = 2;
  s.steps = 4;
  const ed::StepSyncCallTotals before = ed::step_sync_call_totals();
  const en::RunResult r = en::run_training(s, en::plan_sharding(s), en::TrainerOptions{});
  ASSERT_EQ(r.ended, en::RunEnd::complete) << r.error;
  const ed::StepSyncCallTotals after = ed::step_sync_call_totals();
  EXPECT_EQ(after.measured - before.measured, 0);
}

// The rank's device on a GPU: bucketize takes its scratch from the rank's grow-only workspace
// (its growth in the first call is the one allocation: sync_calls().allocs stays after it, and
// the device's stream-ordered pool sees no allocation - its high-water mark, reset before each
// call, stays 0) and counts the one wait it makes to read the count back. The deferred copy back
// is ready after a later wait (to_host), and taking it then waits for nothing; taken before
// any wait, it waits once.
TEST(CudaAsyncDevice, BucketizeAllocatesNothingOnceWarmAndADeferredCopyAddsNoWait) {
  ASYNC_REQUIRE_GPUS(1);
  ed::CudaRankDevice gpu(0);
  gpu.bind_thread();
  const int64_t F = 2, B = 64;
  std::vector<int64_t> values, offsets{0};
  for (int64_t bag = 0; bag < F * B; ++bag) {
    for (int64_t i = 0; i < 1 + bag % 5; ++i) values.push_back((bag * 31 + i * 7) % 100);
    offsets.push_back(static_cast<int64_t>(values.size()));
  }
  const std::vector<en::BucketSlot> slots{{0, true, 0, 50}, {0, true, 50, 50}, {1, false, 0, 0}};
  const en::BucketizedKjt ref = en::bucketize_kjt(values, offsets, B, slots);
  AsyncDevArray<int64_t> dv(values.size()), doff(offsets.size()), lengths(slots.size() * static_cast<size_t>(B)), ids(values.size()),
      splits(slots.size());
  dv.put(values);
  doff.put(offsets);
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  int64_t allocs_after_first = -1;
  for (int call = 0; call < 4; ++call) {
    uint64_t zero = 0, high = 0;
    ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
    const int64_t waits = gpu.sync_calls().waits;
    EXPECT_EQ(gpu.bucketize(dv.p, doff.p, F, B, slots, lengths.p, ids.p, static_cast<int64_t>(values.size()), splits.p),
              static_cast<int64_t>(ref.ids.size()));
    EXPECT_EQ(gpu.sync_calls().waits - waits, 1) << "call " << call;
    EXPECT_EQ(lengths.get(), ref.lengths) << "call " << call;
    ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high), cudaSuccess);
    EXPECT_EQ(high, 0u) << "call " << call << ": a stream-ordered allocation";
    if (call == 0) allocs_after_first = gpu.sync_calls().allocs;
  }
  EXPECT_EQ(gpu.sync_calls().allocs, allocs_after_first) << "a later bucketize grew the workspace";
  // the deferred copy back
  AsyncDevArray<int64_t> src(3);
  src.put({4, 5, 6});
  std::vector<int64_t> got(3, -1);
  gpu.defer_to_host(src.p, 24);
  int64_t x = 0;
  gpu.to_host(&x, src.p, 8);  // the next wait
  EXPECT_TRUE(gpu.deferred_ready());
  const int64_t waits = gpu.sync_calls().waits;
  gpu.take_deferred(got.data());
  EXPECT_EQ(got, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(gpu.sync_calls().waits, waits);  // taken without a wait
  gpu.defer_to_host(src.p + 1, 8);
  gpu.take_deferred(got.data());  // no wait since: it waits
  EXPECT_EQ(got[0], 5);
  EXPECT_EQ(gpu.sync_calls().waits, waits + 1);
}

// The same workload (the device dists, the device input dist, a table read by two features of a
// rank) with 2 ranks on one GPU and on one emulated device: the measured steps' waits for the
// compute stream are the stand-in's - device_count_read_test counts those by hand (4 a rank and
// step, the distinct-row counts read without one) - and the distinct rows are the same.
TEST(CudaAsyncDevice, StepsWaitAsOftenAsOnTheStandIn) {
  ASYNC_REQUIRE_GPUS(1);
  en::WorkloadSpec s = en::test_support::resident_cat_spec(en::ShardingType::table_wise, en::OptimizerType::sgd, 2,
                                                            en::Pooling::sum);
  s.warmup_steps = 1;
  const en::ShardingPlan plan = en::plan_sharding(s);
  auto waits_of = [&](bool on_gpu, en::RunResult& r) {
    en::WorkloadSpec run_spec = s;
    en::TrainerOptions o = en::test_support::emulated_options(!on_gpu, 1);
    if (on_gpu) {
      run_spec.devices.backend = en::Backend::cuda;
      run_spec.devices.ranks_per_gpu = 2;
    }
    const ed::StepSyncCallTotals before = ed::step_sync_call_totals();
    r = en::run_training(run_spec, plan, o);
    return ed::step_sync_call_totals().measured_waits - before.measured_waits;
  };
  en::RunResult gpu, stand_in;
  const int64_t gpu_waits = waits_of(true, gpu), stand_in_waits = waits_of(false, stand_in);
  ASSERT_EQ(gpu.ended, en::RunEnd::complete) << gpu.error;
  ASSERT_EQ(stand_in.ended, en::RunEnd::complete) << stand_in.error;
  EXPECT_EQ(gpu_waits, stand_in_waits);
  EXPECT_EQ(stand_in_waits, 4 * s.steps * 2);
  ASSERT_EQ(gpu.ranks.size(), stand_in.ranks.size());
  for (size_t r = 0; r < gpu.ranks.size(); ++r) EXPECT_EQ(gpu.ranks[r].unique_ids, stand_in.ranks[r].unique_ids) << r;
}
