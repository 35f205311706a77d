// The embedding backward's distinct-row counts on the device path (the load counters'
// unique_ids) read without a wait of their own (RankDevice::defer_to_host; Rank's
// DeferredCounts, exec/threaded/rank_records.cpp), on the host stand-in
// (TrainerOptions::emulate_device). Evidence: the stand-in's deferred copy is ready only after a
// later wait for the stream, as a GPU's (by hand); a run's measured steps make the waits counted
// by hand, one per rank and step fewer than their copies back; the session's load counters and
// the ranks' distinct rows equal the cpu backend's under the base, sparse_dist and semi_sync
// pipelines; a run that fails keeps the rows and counters of the steps that ended before it,
// the last of which had waited for its counts.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>
#include <tuple>
#include <unistd.h>

#include "embedscope/engine/exec/run.h"
#include "embedscope/sessions/store/session.h"
#include "engine/parity_check.h"
#include "exec/device/rank_device.h"
#include "support/device_dist_runs.h"

using namespace embedscope::engine;

namespace {

std::string count_read_session(const std::string& name) {
  return (std::filesystem::temp_directory_path() / fmt::format("es_count_read_{}_{}.db", name, getpid())).string();
}

// (step, rank, table, shard) -> {ids, unique_ids, bytes_in, bytes_out}: the load counters but
// their lookup time
using CountKey = std::tuple<int64_t, int32_t, int32_t, int32_t>;
using CountMap = std::map<CountKey, std::array<int64_t, 4>>;
CountMap count_read_load(const std::string& path) {
  CountMap out;
  for (const auto& c : embedscope::sessions::SessionReader(path).load())
    out[{c.step, c.rank, c.table, c.shard}] = {c.ids, c.unique_ids, c.bytes_in, c.bytes_out};
  return out;
}

// A run with the waits and copies back of its measured steps (detail::step_sync_call_totals,
// detail::step_copy_totals).
struct WaitedRun {
  RunResult result;
  int64_t waits = 0;
  int64_t copies_back = 0;
};
WaitedRun count_read_run(const WorkloadSpec& s, const TrainerOptions& o) {
  const detail::StepSyncCallTotals w0 = detail::step_sync_call_totals();
  const detail::CopyTotals c0 = detail::step_copy_totals();
  WaitedRun r;
  r.result = run_training(s, plan_sharding(s), o);
  r.waits = detail::step_sync_call_totals().measured_waits - w0.measured_waits;
  r.copies_back = detail::step_copy_totals().device_to_host - c0.device_to_host;
  return r;
}

// resident_cat_spec under table_wise on 2 ranks, sum pooling, sgd, one warm-up step (so that
// every measured step of a pipeline is a steady one): the device dists and the device input dist
WorkloadSpec count_read_spec(PipelineKind pipeline) {
  WorkloadSpec s = test_support::resident_cat_spec(ShardingType::table_wise, OptimizerType::sgd, 2, Pooling::sum);
  s.warmup_steps = 1;
  s.pipeline = pipeline;
  return s;
}

}  // namespace

// The stand-in copies at once (host memory) but keeps the GPU's contract: ready only once a wait
// for the stream began after the copy was queued; taking it before waits (counted).
TEST(DeviceCountRead, TheStandInsDeferredCopyIsReadyOnlyAfterALaterWait) {
  auto dev = detail::host_rank_device(0);
  dev->bind_thread();
  std::vector<int64_t> src{7, 8, 9}, got(3, -1);
  const int64_t waits0 = dev->sync_calls().waits;
  const detail::CopyTotals c0 = dev->copies();
  EXPECT_FALSE(dev->deferred_ready());  // none pending
  EXPECT_THROW(dev->take_deferred(got.data()), std::logic_error);
  dev->defer_to_host(src.data(), 24);
  EXPECT_EQ(dev->copies().device_to_host - c0.device_to_host, 1);  // one copy back, counted when queued
  EXPECT_EQ(dev->copies().device_to_host_bytes - c0.device_to_host_bytes, 24);
  EXPECT_FALSE(dev->deferred_ready());  // no wait since
  EXPECT_THROW(dev->defer_to_host(src.data(), 8), std::logic_error);  // one at a time
  int64_t x = 0;
  const int64_t y = 5;
  dev->to_host(&x, &y, 8);  // a wait for the stream: what was queued before it is done
  EXPECT_EQ(dev->sync_calls().waits - waits0, 1);
  EXPECT_TRUE(dev->deferred_ready());
  dev->take_deferred(got.data());
  EXPECT_EQ(got, (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(dev->sync_calls().waits - waits0, 1);  // taking it did not wait
  EXPECT_FALSE(dev->deferred_ready());
  // taken with no wait since: the take waits (the GPU's cudaStreamSynchronize)
  dev->defer_to_host(src.data() + 2, 8);
  dev->take_deferred(got.data());
  EXPECT_EQ(got[0], 9);
  EXPECT_EQ(dev->sync_calls().waits - waits0, 2);
  EXPECT_EQ(dev->sync_calls().total(), 0);  // waits are not device-wide synchronizations
  EXPECT_THROW(dev->defer_to_host(src.data(), -1), std::invalid_argument);
  // a thread not bound to the device is refused, as for every op
  std::thread([&] { EXPECT_THROW(dev->defer_to_host(src.data(), 8), std::logic_error); }).join();
}

// The waits of the 3 measured steps of count_read_spec, 2 ranks each on an emulated device of its
// own (Gloo: no intra-device staging, whose copies back wait for the comm stream, not this one),
// counted by hand per rank: each batch the steps start makes 2 (bucketize's count and the splits
// back), each batch they train 2 (the loss and the one DDP bucket's gradients back); the pooled
// embeddings and their gradients stay on the device, sum pooling needs no lengths, and every
// slot's ids stay there - t2, read by f2a and f2b, included. The copies back are those and the
// distinct-row counts, 1 a batch trained: the one copy back that does not wait (with the read in
// the step, waits = copies back). The measured steps train 3 batches and start 3 (base), 2
// (sparse_dist: the last step starts none) or 1 (semi_sync: the warm-up step started 3).
TEST(DeviceCountRead, MeasuredStepsWaitOnceLessPerBatchThanTheyCopyBackByHand) {
  const std::tuple<PipelineKind, int64_t> runs[] = {
      {PipelineKind::base, 3}, {PipelineKind::sparse_dist, 2}, {PipelineKind::semi_sync, 1}};
  for (const auto& [pipeline, started] : runs) {
    const WorkloadSpec s = count_read_spec(pipeline);
    const WaitedRun r = count_read_run(s, test_support::emulated_options(true, 0));
    ASSERT_EQ(r.result.ended, RunEnd::complete) << r.result.error;
    const int64_t ranks = 2, trained = s.steps;
    std::printf("%s: %lld measured steps of 2 ranks waited %lld times, copied back %lld times\n", to_string(pipeline),
                static_cast<long long>(s.steps), static_cast<long long>(r.waits), static_cast<long long>(r.copies_back));
    EXPECT_EQ(r.waits, ranks * (2 * started + 2 * trained)) << to_string(pipeline);
    EXPECT_EQ(r.copies_back, ranks * (2 * started + 3 * trained)) << to_string(pipeline);
  }
}

// The session's load counters (ids, distinct rows, bytes; not the time) and every step's row are
// the cpu backend's: the counts that came a step late went to the step they belong to.
TEST(DeviceCountRead, TheSessionsLoadCountersAreTheCpuBackends) {
  for (PipelineKind pipeline : {PipelineKind::base, PipelineKind::sparse_dist, PipelineKind::semi_sync}) {
    const WorkloadSpec s = count_read_spec(pipeline);
    TrainerOptions dev_opt = test_support::emulated_options(true, 1), cpu_opt = test_support::emulated_options(false, 0);
    dev_opt.session_path = count_read_session("dev");
    cpu_opt.session_path = count_read_session("cpu");
    dev_opt.session_overwrite = cpu_opt.session_overwrite = true;
    const RunResult dev = run_training(s, plan_sharding(s), dev_opt);
    const RunResult cpu = run_training(s, plan_sharding(s), cpu_opt);
    ASSERT_EQ(dev.ended, RunEnd::complete) << dev.error;
    ASSERT_EQ(cpu.ended, RunEnd::complete) << cpu.error;
    const CountMap got = count_read_load(dev_opt.session_path), want = count_read_load(cpu_opt.session_path);
    EXPECT_EQ(got, want) << to_string(pipeline);
    int64_t unique = 0;
    for (const auto& [key, v] : got) unique += v[1];
    EXPECT_GT(unique, 0) << to_string(pipeline);  // the counts are there, not zeros
    ASSERT_EQ(dev.ranks.size(), cpu.ranks.size());
    for (size_t r = 0; r < dev.ranks.size(); ++r) EXPECT_EQ(dev.ranks[r].unique_ids, cpu.ranks[r].unique_ids) << r;
    const auto rows = embedscope::sessions::SessionReader(dev_opt.session_path).steps();
    EXPECT_EQ(static_cast<int64_t>(rows.size()), (s.warmup_steps + s.steps) * 2) << to_string(pipeline);
    std::filesystem::remove(dev_opt.session_path);
    std::filesystem::remove(cpu_opt.session_path);
  }
}

// A run whose rank 1 fails in its third step's lookup (EMBEDSCOPE_INJECT_DEVICE_FAULT): both
// ranks' rows and load counters of the two steps that ended are in the session, equal to a clean
// run's - the second step's waited for its counts, which the failed ranks took at the failure.
TEST(DeviceCountRead, AFailedRunKeepsTheRowsOfTheStepsThatEnded) {
  WorkloadSpec s = count_read_spec(PipelineKind::base);
  s.steps = 4;
  s.collective_timeout_ms = 20'000;
  const ShardingPlan plan = plan_sharding(s);
  int64_t lookups = 0;  // per step on rank 1: one per slot (the features of its tables)
  for (const auto& tp : plan.tables)
    if (tp.shards[0].rank == 1)
      lookups += static_cast<int64_t>(s.tables[static_cast<size_t>(tp.table)].feature_names.size());
  ASSERT_GT(lookups, 0);
  TrainerOptions o = test_support::emulated_options(true, 1);
  o.session_path = count_read_session("clean");
  o.session_overwrite = true;
  const RunResult clean = run_training(s, plan, o);
  ASSERT_EQ(clean.ended, RunEnd::complete) << clean.error;
  const CountMap want_all = count_read_load(o.session_path);
  const std::string fault = fmt::format("1:lookup:{}", 2 * lookups + 1);
  ::setenv("EMBEDSCOPE_INJECT_DEVICE_FAULT", fault.c_str(), 1);
  o.session_path = count_read_session("failed");
  const RunResult failed = run_training(s, plan, o);
  ::unsetenv("EMBEDSCOPE_INJECT_DEVICE_FAULT");
  EXPECT_EQ(failed.ended, RunEnd::crashed) << failed.error;
  CountMap want;  // the steps before the third (steps -1 and 0)
  for (const auto& [key, v] : want_all)
    if (std::get<0>(key) < 1) want[key] = v;
  CountMap got = count_read_load(o.session_path);
  EXPECT_EQ(got, want);
  const auto rows = embedscope::sessions::SessionReader(o.session_path).steps();
  ASSERT_EQ(rows.size(), 4u);  // steps -1 and 0 of both ranks
  for (const auto& r : rows) EXPECT_LT(r.step, 1);
  std::filesystem::remove(o.session_path);
}
