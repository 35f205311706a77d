// The cuda executor end to end on real GPUs (label `gpu`): every sharding type and optimizer
// against the unsharded reference with the cpu parity tests' tolerances (parity_check.h: the
// GPU lookup and row optimizer sum in fp32 in id order as the cpu kernels do, and the rest of
// the step is the same host code, so no looser bound is needed), a scaled criteo_kaggle into
// a session with GPU lanes, kernel names and collective records, an OOM on a small device,
// and the cuda_async allocator's figures. Skipped, with cudaGetDeviceCount's answer, where no
// device is present. World size: min(2, GPUs) (4 for the mixed plan).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "../engine/parity_check.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/profiler/device/cuda_device.h"
#include "embedscope/sessions/store/session.h"
#include "support/oom_snapshot.h"

using namespace embedscope;
using namespace embedscope::engine;
using namespace embedscope::engine::parity;

#define REQUIRE_GPUS(n)                                                                     \
  do {                                                                                      \
    if (auto why = profiler::cuda_unavailable_reason(n); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

namespace {
int world() { return std::min(2, profiler::cuda_devices().count); }

std::string temp_session(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("es_cuda_" + name + "_" + std::to_string(getpid()) + ".db")).string();
}

// criteo_kaggle with every table cut to at most 20,000 rows, 3 steps of 128 samples per rank.
WorkloadSpec scaled_criteo(int ranks) {
  WorkloadSpec s = load_preset("criteo_kaggle");
  for (auto& t : s.tables) t.num_embeddings = std::min<int64_t>(t.num_embeddings, 20000);
  s.devices.count = ranks;
  s.devices.backend = Backend::cuda;
  s.devices.memory_bytes = int64_t{2} << 30;
  s.batch_size = 128;
  s.steps = 3;
  s.warmup_steps = 1;
  s.sharding.per_table.clear();
  return s;
}
}  // namespace

using Param = std::tuple<ShardingType, OptimizerType>;
class CudaEqualsReference : public ::testing::TestWithParam<Param> {};

TEST_P(CudaEqualsReference, ForwardAndTablesAfterThreeSteps) {
  REQUIRE_GPUS(1);
  const auto [type, opt] = GetParam();
  for (Pooling pooling : {Pooling::sum, Pooling::mean}) {
    WorkloadSpec s = parity_spec(type, world(), pooling, opt);
    s.devices.backend = Backend::cuda;
    check_parity(s);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, CudaEqualsReference,
    ::testing::Combine(::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<Param>& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

TEST(CudaExecutor, MixedPlanOnFourGpus) {
  REQUIRE_GPUS(4);
  WorkloadSpec s = mixed_spec(OptimizerType::adam);
  s.devices.backend = Backend::cuda;
  check_parity(s);
}

// The same workload on the cpu and the cuda backend trains the same model.
TEST(CudaExecutor, TinyPresetMatchesTheCpuBackend) {
  REQUIRE_GPUS(1);
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = world();
  s.steps = 5;
  TrainerOptions opt;
  opt.keep_tables = true;
  opt.trace = false;
  const RunResult cpu = run_training(s, plan_sharding(s), opt);
  s.devices.backend = Backend::cuda;
  const RunResult gpu = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(gpu.ended, RunEnd::complete) << gpu.error;
  ASSERT_EQ(cpu.ended, RunEnd::complete) << cpu.error;
  for (size_t t = 0; t < cpu.tables.size(); ++t) expect_close(gpu.tables[t], cpu.tables[t], "table " + s.tables[t].name);
  expect_close(gpu.dense_params, cpu.dense_params, "dense parameters");
  ASSERT_EQ(gpu.loss.size(), cpu.loss.size());
  for (size_t i = 0; i < cpu.loss.size(); ++i) EXPECT_NEAR(gpu.loss[i], cpu.loss[i], 1e-5) << "step " << i;
}

TEST(CudaExecutor, ScaledCriteoWritesASessionWithGpuLanesKernelsAndCollectives) {
  REQUIRE_GPUS(1);
  const WorkloadSpec s = scaled_criteo(world());
  TrainerOptions opt;
  opt.session_path = temp_session("criteo");
  opt.session_overwrite = true;
  const RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  ASSERT_EQ(r.loss.size(), 3u);
  sessions::SessionReader session(opt.session_path);
  EXPECT_EQ(session.status(), "complete");
  EXPECT_EQ(session.meta("backend"), "cuda");
  EXPECT_EQ(session.meta("gpu_trace_error"), "");
  EXPECT_EQ(session.meta("cupti_dropped_records"), "0");
  EXPECT_NE(session.meta("nccl_version"), "not used (cpu backend)");
  std::set<std::string> lanes;
  for (const auto& l : session.lanes()) lanes.insert(l.name);
  EXPECT_TRUE(lanes.count("gpu_compute") && lanes.count("gpu_comm") && lanes.count("gpu_copy"));
  int64_t gpu_compute = 0, gpu_copy = 0, tbe = 0, measured = 0;
  for (const auto& op : session.all_ops()) {
    if (op.lane == static_cast<int32_t>(sessions::Lane::gpu_compute)) {
      ++gpu_compute;
      if (session.name(op.name_id).find("tbe") != std::string::npos) ++tbe;
    }
    if (op.lane == static_cast<int32_t>(sessions::Lane::gpu_copy)) ++gpu_copy;
    if (op.lane >= static_cast<int32_t>(sessions::Lane::gpu_compute) && op.step >= 0) ++measured;
  }
  EXPECT_GT(gpu_compute, 0);
  EXPECT_GT(tbe, 0) << "the lookup and update kernels are named";
  EXPECT_GT(gpu_copy, 0);
  EXPECT_GT(measured, 0) << "GPU ops take the step of their time window";
  EXPECT_FALSE(session.collectives().empty());
  std::filesystem::remove(opt.session_path);
}

// The plan fits, the device does not: the run ends oom with the layout at the failure. The
// cuda estimate is within 0.02% of the device path's peak bytes (CudaStagingEstimate.*), so the
// only runs it accepts that can still fail are those the caching allocator's fragmentation
// fails: semi_sync's three batches in flight, on devices from the smallest size the check
// accepts (the estimate's bytes or the allocator's minimum reservation, whichever is larger)
// upwards in 1 MiB steps. The first run that ends oom is checked; a size that completes says
// so, and none ending oom within 6 MiB fails the test.
TEST(CudaExecutor, SmallDeviceEndsOomWithTheSnapshot) {
  REQUIRE_GPUS(1);
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = 2;  // two ranks on the one GPU, each with its own arena
  s.devices.backend = Backend::cuda;
  s.pipeline = PipelineKind::semi_sync;
  s.steps = 3;
  s.warmup_steps = 1;
  s.batch_size = 8000;
  const ShardingPlan plan = plan_sharding(s);
  int64_t need = 0;
  for (const auto& e : estimate_memory(s, plan))
    need = std::max({need, e.total(), min_reservation(s.memory.allocator, e)});
  constexpr int64_t kMiB = 1 << 20;
  std::string tried;
  for (int64_t bytes = (need + kMiB - 1) / kMiB * kMiB; bytes <= need + 6 * kMiB; bytes += kMiB) {
    s.devices.memory_bytes = bytes;
    TrainerOptions opt;
    opt.session_path = temp_session("oom");
    opt.session_overwrite = true;
    const RunResult r = run_training(s, plan, opt);
    if (r.ended != RunEnd::oom) {
      ASSERT_EQ(r.ended, RunEnd::complete) << bytes << " B: " << r.error;
      tried += " " + std::to_string(bytes) + " B: complete, peak " + std::to_string(r.ranks[0].memory_bytes) + " / " +
               std::to_string(r.ranks[1].memory_bytes) + ";";
      continue;
    }
    EXPECT_NE(r.error.find("out of memory allocating"), std::string::npos) << r.error;
    sessions::SessionReader session(opt.session_path);
    EXPECT_EQ(session.status(), "oom");
    const auto snapshot_tags = embedscope::test_support::oom_snapshot_tags(session);
    ASSERT_TRUE(snapshot_tags) << "no snapshot taken for the OOM";
    const std::set<std::string>& tags = *snapshot_tags;
    EXPECT_TRUE(tags.count("weights"));
    for (const auto& rank : session.ranks()) EXPECT_EQ(rank.memory_capacity_bytes, bytes);  // each rank's arena
    std::filesystem::remove(opt.session_path);
    return;
  }
  FAIL() << "no device from " << need << " B (the check's minimum) to 6 MiB more ended oom:" << tried;
}

TEST(CudaExecutor, CudaAsyncAllocatorReportsItsPoolFigures) {
  REQUIRE_GPUS(1);
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = world();
  s.devices.backend = Backend::cuda;
  s.memory.allocator = AllocatorKind::cuda_async;
  s.steps = 3;
  TrainerOptions opt;
  opt.session_path = temp_session("async");
  opt.session_overwrite = true;
  opt.keep_tables = true;
  const RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  sessions::SessionReader session(opt.session_path);
  int64_t allocated = 0, reserved = 0;
  for (const auto& m : session.memory_counters()) {
    allocated = std::max(allocated, m.allocated);
    reserved = std::max(reserved, m.reserved);
  }
  EXPECT_GT(allocated, 0);
  EXPECT_GE(reserved, allocated);
  int64_t segments = 0;
  for (const auto& sn : session.memory_snapshots()) {
    std::set<int64_t> seg;
    for (const auto& b : session.memory_blocks(sn.id)) seg.insert(b.segment_address);
    segments = std::max<int64_t>(segments, static_cast<int64_t>(seg.size()));
  }
  EXPECT_EQ(segments, 1) << "one opaque segment per pool";
  for (const auto& rk : r.ranks) EXPECT_GT(rk.memory_bytes, 0);
  std::filesystem::remove(opt.session_path);
}

// ---- several ranks on one GPU (issue 14): 4 ranks on GPU 0, every group on the intra-device
// communicator (device-to-device copies and add_f32_cuda on each rank's comm stream) ----------

class CudaFourRanksOnOneGpuEqualReference : public ::testing::TestWithParam<Param> {};

TEST_P(CudaFourRanksOnOneGpuEqualReference, ForwardAndTablesAfterThreeSteps) {
  REQUIRE_GPUS(1);
  const auto [type, opt] = GetParam();
  for (Pooling pooling : {Pooling::sum, Pooling::mean}) {
    WorkloadSpec s = parity_spec(type, 4, pooling, opt);
    s.devices.backend = Backend::cuda;
    s.devices.ranks_per_gpu = 4;
    check_parity(s);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, CudaFourRanksOnOneGpuEqualReference,
    ::testing::Combine(::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<Param>& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

TEST(CudaExecutor, MixedPlanWithFourRanksOnOneGpu) {
  REQUIRE_GPUS(1);
  WorkloadSpec s = mixed_spec(OptimizerType::adam);
  s.devices.backend = Backend::cuda;
  s.devices.ranks_per_gpu = 4;
  check_parity(s);
}

// The session of 4 ranks on one GPU: every rank names GPU 0, the collectives are recorded, and
// the intra-device communicator's copies are on each rank's gpu_comm lane (CUPTI, comm stream).
TEST(CudaExecutor, FourRanksOnOneGpuSessionNamesTheGpuAndPutsCommCopiesOnGpuComm) {
  REQUIRE_GPUS(1);
  WorkloadSpec s = scaled_criteo(4);
  s.devices.ranks_per_gpu = 4;
  s.devices.memory_bytes = int64_t{1} << 30;
  TrainerOptions opt;
  opt.session_path = temp_session("four_on_one");
  opt.session_overwrite = true;
  const RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  sessions::SessionReader session(opt.session_path);
  ASSERT_EQ(session.ranks().size(), 4u);
  for (const auto& rank : session.ranks()) EXPECT_NE(rank.device.find("(cuda:0)"), std::string::npos) << rank.device;
  EXPECT_FALSE(session.collectives().empty());
  std::set<int> comm_ranks;
  for (const auto& op : session.all_ops())
    if (op.lane == static_cast<int32_t>(sessions::Lane::gpu_comm)) comm_ranks.insert(op.rank);
  EXPECT_EQ(comm_ranks, (std::set<int>{0, 1, 2, 3}));
  std::filesystem::remove(opt.session_path);
}

// Issue 14: CUPTI is drained into the session at every step end. While the run is still in its
// last step, the session file (read as another process would, the writer still open) already
// holds GPU ops of the first measured step; waits are on the gpu_sync lane (kind sync), never
// on the host compute lane; CUPTI's MEMORY2 records are memory events of the ranks.
TEST(CudaExecutor, GpuLanesReachTheSessionAtEveryStepEnd) {
  REQUIRE_GPUS(1);
  WorkloadSpec s = scaled_criteo(world());
  s.steps = 4;
  TrainerOptions opt;
  opt.session_path = temp_session("drain");
  opt.session_overwrite = true;
  int64_t gpu_ops_mid_run = -1;
  opt.on_step = [&](const StepProgress& p) {
    if (p.step != 3 || gpu_ops_mid_run >= 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // > the writer's 250 ms commit interval
    sessions::SessionReader mid(opt.session_path);
    gpu_ops_mid_run = 0;
    for (const auto& op : mid.all_ops())
      if (op.lane >= static_cast<int32_t>(sessions::Lane::gpu_compute) && op.step == 0) ++gpu_ops_mid_run;
  };
  const RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  EXPECT_GT(gpu_ops_mid_run, 0) << "step 0's GPU ops were in the file before the run ended";
  sessions::SessionReader session(opt.session_path);
  EXPECT_EQ(session.meta("gpu_trace_error"), "");
  EXPECT_EQ(session.meta("cupti_launches_dropped"), "0");
  bool sync_lane = false;
  for (const auto& l : session.lanes())
    if (l.name == "gpu_sync") sync_lane = l.kind == "sync" && l.lane == 5;
  EXPECT_TRUE(sync_lane);
  for (const auto& op : session.all_ops())
    if (op.lane == 0) {
      EXPECT_EQ(session.name(op.name_id).find("Synchronize"), std::string::npos) << session.name(op.name_id);
    }
  int64_t cupti_allocs = 0;
  for (const auto& e : session.memory_events())
    if (e.action == "cupti_alloc") ++cupti_allocs;
  EXPECT_GT(cupti_allocs, 0) << "the arenas' cudaMalloc at least";
  std::filesystem::remove(opt.session_path);
}

// ---- ranks on several GPUs with several per GPU (issue 14): 4 ranks at 2 per GPU on 2 GPUs, 6
// at 2 per GPU on 3; groups spread over GPUs on the hierarchical communicator (the intra-device
// communicator within a GPU, NCCL between one leader per GPU). Skipped with fewer GPUs ---------

class CudaTwoRanksPerGpuOnSeveralGpusEqualReference : public ::testing::TestWithParam<Param> {};

TEST_P(CudaTwoRanksPerGpuOnSeveralGpusEqualReference, ForwardAndTablesAfterThreeSteps) {
  REQUIRE_GPUS(2);
  const auto [type, opt] = GetParam();
  for (int ranks : {4, 6}) {
    if (ranks / 2 > profiler::cuda_devices().count) continue;  // 6 ranks at 2 per GPU need 3 GPUs
    for (Pooling pooling : {Pooling::sum, Pooling::mean}) {
      WorkloadSpec s = parity_spec(type, ranks, pooling, opt);
      s.devices.backend = Backend::cuda;
      s.devices.ranks_per_gpu = 2;
      check_parity(s);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, CudaTwoRanksPerGpuOnSeveralGpusEqualReference,
    ::testing::Combine(::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise),
                       ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam)),
    [](const ::testing::TestParamInfo<Param>& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

TEST(CudaExecutor, MixedPlanWithTwoRanksOnEachOfTwoGpus) {
  REQUIRE_GPUS(2);
  WorkloadSpec s = mixed_spec(OptimizerType::adam);
  s.devices.backend = Backend::cuda;
  s.devices.ranks_per_gpu = 2;
  check_parity(s);
}

// The session of 4 ranks at 2 per GPU: ranks 0-1 name GPU 0, 2-3 GPU 1; the group's collectives
// are recorded under "world" (never a part's group); every rank has intra-device copies on its
// gpu_comm lane.
TEST(CudaExecutor, TwoRanksOnEachOfTwoGpusSessionNamesTheGpusAndRecordsTheGroups) {
  REQUIRE_GPUS(2);
  WorkloadSpec s = scaled_criteo(4);
  s.devices.ranks_per_gpu = 2;
  s.devices.memory_bytes = int64_t{1} << 30;
  TrainerOptions opt;
  opt.session_path = temp_session("two_on_two");
  opt.session_overwrite = true;
  const RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  sessions::SessionReader session(opt.session_path);
  ASSERT_EQ(session.ranks().size(), 4u);
  for (const auto& rank : session.ranks())
    EXPECT_NE(rank.device.find(rank.rank < 2 ? "(cuda:0)" : "(cuda:1)"), std::string::npos) << rank.device;
  EXPECT_FALSE(session.collectives().empty());
  for (const auto& c : session.collectives()) EXPECT_EQ(c.group.find('/'), std::string::npos) << c.group;
  std::set<int> comm_ranks;
  for (const auto& op : session.all_ops())
    if (op.lane == static_cast<int32_t>(sessions::Lane::gpu_comm)) comm_ranks.insert(op.rank);
  EXPECT_EQ(comm_ranks, (std::set<int>{0, 1, 2, 3}));
  std::filesystem::remove(opt.session_path);
}

// ---- pipelines on the GPU (issue 14): sparse_dist and semi_sync, 4 ranks on GPU 0 -----------
// The next batch's input dist (and with semi_sync its lookup and output dist) under this
// batch's dense part: the comm worker's collectives (intra-device copies and add_f32_cuda on
// each rank's comm stream) while the rank's thread runs the compute stream. Every exchange of
// data between the two goes through host memory after the stream it came from has finished
// (to_host / comm_to_host synchronize their stream), so no event joins the streams; the
// lookups of the batch ahead and the updates of this batch share the compute stream, which
// orders them as the program issues them (semi_sync's lookup reads the tables before the update).
// Run on the host stand-in here (tests/engine/parity_test.cpp DevicePipelineEqualsReference);
// on a GPU: not run yet.
using PipelineParam = std::tuple<PipelineKind, ShardingType>;
class CudaPipelineFourRanksOnOneGpuEqualReference : public ::testing::TestWithParam<PipelineParam> {};

TEST_P(CudaPipelineFourRanksOnOneGpuEqualReference, ForwardAndTablesAfterThreeSteps) {
  REQUIRE_GPUS(1);
  const auto [pipeline, type] = GetParam();
  WorkloadSpec s = parity_spec(type, 4, Pooling::mean, OptimizerType::adam);
  s.devices.backend = Backend::cuda;
  s.devices.ranks_per_gpu = 4;
  s.pipeline = pipeline;
  check_parity(s);
}

INSTANTIATE_TEST_SUITE_P(
    SparseDistAndSemiSync, CudaPipelineFourRanksOnOneGpuEqualReference,
    ::testing::Combine(::testing::Values(PipelineKind::sparse_dist, PipelineKind::semi_sync),
                       ::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                         ShardingType::column_wise, ShardingType::table_row_wise)),
    [](const ::testing::TestParamInfo<PipelineParam>& p) {
      return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
    });

// semi_sync on 4 ranks on one GPU into a session: every rank has GPU ops on both streams in every
// measured step, and every collective of a measured step - the batch ahead's input and output
// dist included - ran inside the host window of the step its record names (the step that queued
// it), so the intra-device copies joined with it (which take its step) and the kernels placed by
// their start are in the same step as the host's comm span.
TEST(CudaExecutor, SemiSyncFourRanksOnOneGpuKeepsEveryCollectiveInsideItsStep) {
  REQUIRE_GPUS(1);
  WorkloadSpec s = scaled_criteo(4);
  s.devices.ranks_per_gpu = 4;
  s.devices.memory_bytes = int64_t{1} << 30;
  s.pipeline = PipelineKind::semi_sync;
  s.steps = 4;
  TrainerOptions opt;
  opt.session_path = temp_session("semi_sync_four_on_one");
  opt.session_overwrite = true;
  const RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  sessions::SessionReader session(opt.session_path);
  EXPECT_EQ(session.meta("gpu_trace_error"), "");
  std::map<std::pair<int32_t, int64_t>, std::pair<int64_t, int64_t>> window;  // (rank, step) -> [start, end)
  for (const auto& m : session.steps()) window[{m.rank, m.step}] = {m.start_ns, m.end_ns};
  int64_t checked = 0;
  for (const auto& c : session.collectives()) {
    const auto w = window.find({c.rank, c.step});
    if (w == window.end()) continue;  // set-up and warm-up
    ++checked;
    EXPECT_GE(c.start_ns, w->second.first) << c.name << " rank " << c.rank << " step " << c.step;
    EXPECT_LE(c.end_ns, w->second.second) << c.name << " rank " << c.rank << " step " << c.step;
  }
  EXPECT_GT(checked, 0);
  std::set<std::tuple<int32_t, int32_t, int64_t>> busy;  // (rank, lane, step) with a GPU op
  const auto compute = static_cast<int32_t>(sessions::Lane::gpu_compute), comm = static_cast<int32_t>(sessions::Lane::gpu_comm);
  for (const auto& op : session.all_ops())
    if (op.lane == compute || op.lane == comm) busy.insert({op.rank, op.lane, op.step});
  for (int32_t rank = 0; rank < 4; ++rank)
    for (int64_t step = 0; step < s.steps; ++step)
      for (int32_t lane : {compute, comm})
        EXPECT_TRUE(busy.count({rank, lane, step})) << "rank " << rank << " lane " << lane << " step " << step;
  std::filesystem::remove(opt.session_path);
}
