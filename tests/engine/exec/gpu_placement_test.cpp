// Several ranks on one GPU (issue 14, exec/gpu_placement.h): block placement, the refusals
// (exact text), the cuda backend's checks on a described machine (check_cuda_placement), the
// host stand-in's emulated devices (TrainerOptions::emulated_devices) and what the session says.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <functional>
#include <set>
#include <unistd.h>

#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/gpu_placement.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"

namespace es = embedscope::engine;
using embedscope::profiler::CudaDevices;

namespace {
std::string placement_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "";
}
CudaDevices h200s(int n, int64_t bytes) {
  CudaDevices d;
  d.count = n;
  d.names.assign(static_cast<size_t>(n), "NVIDIA H200");
  d.total_bytes.assign(static_cast<size_t>(n), bytes);
  return d;
}
es::WorkloadSpec cuda_tiny(int ranks, int ranks_per_gpu, int64_t memory_bytes) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.backend = es::Backend::cuda;
  s.devices.count = ranks;
  s.devices.ranks_per_gpu = ranks_per_gpu;
  s.devices.memory_bytes = memory_bytes;
  return s;
}
constexpr int64_t kGiB = int64_t{1} << 30;
}  // namespace

TEST(GpuPlacement, BlocksOfConsecutiveRanksAutomaticOrGiven) {
  const es::GpuPlacement four_on_one = es::place_ranks(4, 0, 1);
  EXPECT_EQ(four_on_one.ranks_per_gpu, 4);
  EXPECT_EQ(four_on_one.gpu_of_rank, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_TRUE(four_on_one.shared());
  EXPECT_EQ(four_on_one.devices_used(), 1);
  // automatic: ceil(8 / 3) = 3 per GPU, the last GPU holds the remaining 2
  const es::GpuPlacement eight_on_three = es::place_ranks(8, 0, 3);
  EXPECT_EQ(eight_on_three.ranks_per_gpu, 3);
  EXPECT_EQ(eight_on_three.gpu_of_rank, (std::vector<int>{0, 0, 0, 1, 1, 1, 2, 2}));
  EXPECT_EQ(eight_on_three.ranks_on(2), (std::vector<int>{6, 7}));
  EXPECT_EQ(es::describe_placement(eight_on_three, {"NVIDIA H200", "NVIDIA H200"}),
            "GPU 0 (NVIDIA H200): ranks 0-2; GPU 1 (NVIDIA H200): ranks 3-5; GPU 2: ranks 6-7");
  // given: 2 per GPU on 4 visible GPUs uses 2 of them
  const es::GpuPlacement two_each = es::place_ranks(4, 2, 4);
  EXPECT_EQ(two_each.gpu_of_rank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(two_each.devices_used(), 2);
  // one rank per GPU: not shared
  const es::GpuPlacement own = es::place_ranks(2, 0, 8);
  EXPECT_EQ(own.gpu_of_rank, (std::vector<int>{0, 1}));
  EXPECT_FALSE(own.shared());
  EXPECT_EQ(es::describe_placement(own, {}, "emulated device"), "emulated device 0: rank 0; emulated device 1: rank 1");
}

TEST(GpuPlacement, TooFewDevicesIsRefusedNamingTheField) {
  EXPECT_EQ(placement_error([] { es::place_ranks(4, 1, 2); }),
            "/devices/ranks_per_gpu: 4 ranks at 1 per GPU need 4 GPUs, but 2 are visible");
  EXPECT_EQ(placement_error([] { es::place_ranks(5, 2, 1, "emulated device"); }),
            "/devices/ranks_per_gpu: 5 ranks at 2 per emulated device need 3 emulated devices, but 1 is visible");
  EXPECT_EQ(placement_error([] { es::place_ranks(4, 0, 0); }), "/devices/ranks_per_gpu: 4 ranks need a GPU, but none is visible");
}

TEST(GpuPlacement, RanksThatDoNotFitTogetherAreRefusedWithThePerDeviceBreakdown) {
  const es::GpuPlacement p = es::place_ranks(6, 4, 2);  // GPU 0: ranks 0-3, GPU 1: ranks 4-5
  EXPECT_EQ(placement_error([&] { es::check_placement_memory(p, 3 * kGiB, {10 * kGiB, 10 * kGiB}, {"NVIDIA H200"}); }),
            "/devices/memory_bytes: the ranks on one GPU do not fit in its memory together (memory_bytes 3.0 GiB per "
            "rank): GPU 0 (NVIDIA H200): ranks 0-3 need 12.0 GiB of 10.0 GiB (does not fit); GPU 1: ranks 4-5 need "
            "6.0 GiB of 10.0 GiB");
  EXPECT_EQ(placement_error([&] { es::check_placement_memory(p, 2 * kGiB, {8 * kGiB, 8 * kGiB}, {}); }), "");  // 8 of 8 fits
  EXPECT_EQ(placement_error([&] { es::check_placement_memory(p, 100 * kGiB, {}, {}); }), "");  // unlimited
}

TEST(GpuPlacement, CudaBackendPlacesRanksSharingGpusAndRefusesWhatItCannotRun) {
  const es::GpuPlacement p = es::check_cuda_placement(cuda_tiny(4, 0, 8 * kGiB), h200s(1, 141 * kGiB));
  EXPECT_EQ(p.gpu_of_rank, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(es::check_cuda_placement(cuda_tiny(2, 0, 8 * kGiB), h200s(2, 141 * kGiB)).gpu_of_rank, (std::vector<int>{0, 1}));
  EXPECT_EQ(placement_error([] { es::check_cuda_placement(cuda_tiny(4, 0, 40 * kGiB), h200s(1, 141 * kGiB)); }),
            "/devices/memory_bytes: the ranks on one GPU do not fit in its memory together (memory_bytes 40.0 GiB per "
            "rank): GPU 0 (NVIDIA H200): ranks 0-3 need 160.0 GiB of 141.0 GiB (does not fit)");
  EXPECT_EQ(placement_error([] { es::check_cuda_placement(cuda_tiny(4, 1, kGiB), h200s(2, 141 * kGiB)); }),
            "/devices/ranks_per_gpu: 4 ranks at 1 per GPU need 4 GPUs, but 2 are visible");
  // several ranks per GPU on several GPUs: placed (the hierarchical communicator, comm/hier/), not refused
  EXPECT_EQ(es::check_cuda_placement(cuda_tiny(4, 2, kGiB), h200s(2, 141 * kGiB)).gpu_of_rank,
            (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(es::check_cuda_placement(cuda_tiny(6, 2, kGiB), h200s(3, 141 * kGiB)).gpu_of_rank,
            (std::vector<int>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(es::check_cuda_placement(cuda_tiny(5, 0, kGiB), h200s(2, 141 * kGiB)).gpu_of_rank,
            (std::vector<int>{0, 0, 0, 1, 1}));  // automatic: ceil(5 / 2) = 3 per GPU
}

// On this machine: auto with ranks_per_gpu and no GPU (skipped where a GPU is present).
TEST(GpuPlacement, RanksPerGpuWithoutAGpuIsRefused) {
  const auto& d = embedscope::profiler::cuda_devices();
  if (d.count > 0) GTEST_SKIP() << "a CUDA device is present: auto picks cuda";
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.backend = es::Backend::auto_;
  s.devices.count = 2;
  s.devices.ranks_per_gpu = 2;
#if EMBEDSCOPE_WITH_CUDA
  const std::string why = d.error.empty() ? "cudaGetDeviceCount reported 0 devices" : d.error;
#else
  const std::string why = "built without CUDA";  // the sanitizer and CPU-only builds
#endif
  EXPECT_EQ(placement_error([&] { es::with_resolved_backend(s, "w"); }),
            "/devices/ranks_per_gpu: 2 ranks per GPU need a GPU, but backend auto found none (" + why + ") and picked cpu");
}

TEST(GpuPlacement, FourRanksOnOneEmulatedDeviceRefusedWhenTheyDoNotFitTogether) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 4;
  s.devices.memory_bytes = 64 << 20;
  es::TrainerOptions opt;
  opt.emulate_device = true;
  opt.emulated_devices = 1;
  opt.emulated_device_bytes = 200 << 20;  // 4 x 64 MiB = 256 MiB do not fit
  EXPECT_EQ(placement_error([&] { es::run_training(s, es::plan_sharding(s), opt); }),
            "/devices/memory_bytes: the ranks on one emulated device do not fit in its memory together (memory_bytes "
            "64.0 MiB per rank): emulated device 0: ranks 0-3 need 256.0 MiB of 200.0 MiB (does not fit)");
  opt.emulated_devices = 3;  // ceil(4 / 3) = 2 per device: 128 MiB fit
  opt.emulated_device_bytes = 128 << 20;
  s.steps = 1;
  s.warmup_steps = 0;
  EXPECT_EQ(es::run_training(s, es::plan_sharding(s), opt).ended, es::RunEnd::complete);
}

// The session names each rank's device: 4 ranks, one emulated device.
TEST(GpuPlacement, SessionNamesTheSharedEmulatedDeviceOfEveryRank) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 4;
  s.steps = 2;
  s.warmup_steps = 0;
  es::TrainerOptions opt;
  opt.emulate_device = true;
  opt.emulated_devices = 1;
  opt.session_path =
      (std::filesystem::temp_directory_path() / ("es_placement_" + std::to_string(getpid()) + ".db")).string();
  const es::RunResult r = es::run_training(s, es::plan_sharding(s), opt);
  ASSERT_EQ(r.ended, es::RunEnd::complete) << r.error;
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    ASSERT_EQ(session.ranks().size(), 4u);
    for (const auto& rank : session.ranks()) EXPECT_EQ(rank.device, "host memory (emulated device 0)");
    // every collective ran on the intra-device communicator: group world, records on every rank
    std::set<int> ranks;
    for (const auto& c : session.collectives()) {
      EXPECT_EQ(c.group, "world");
      ranks.insert(c.rank);
    }
    EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  }
  std::filesystem::remove(opt.session_path);
}

// The GPU suite's TinyPresetMatchesTheCpuBackend on the host stand-in with 4 ranks on one
// emulated device: the same model as the cpu backend's 4 Gloo ranks (the all-reduce sums in
// rank order instead of Gloo's ring: equal within float rounding).
TEST(GpuPlacement, FourRanksOnOneEmulatedDeviceTrainTheCpuBackendsModel) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 4;
  s.steps = 5;
  es::TrainerOptions opt;
  opt.keep_tables = true;
  opt.trace = false;
  const es::RunResult cpu = es::run_training(s, es::plan_sharding(s), opt);
  opt.emulate_device = true;
  opt.emulated_devices = 1;
  const es::RunResult dev = es::run_training(s, es::plan_sharding(s), opt);
  ASSERT_EQ(cpu.ended, es::RunEnd::complete) << cpu.error;
  ASSERT_EQ(dev.ended, es::RunEnd::complete) << dev.error;
  ASSERT_EQ(dev.tables.size(), cpu.tables.size());
  for (size_t t = 0; t < cpu.tables.size(); ++t) {
    ASSERT_EQ(dev.tables[t].size(), cpu.tables[t].size());
    for (size_t i = 0; i < cpu.tables[t].size(); ++i)
      ASSERT_NEAR(dev.tables[t][i], cpu.tables[t][i], 1e-5) << "table " << t << " value " << i;
  }
  ASSERT_EQ(dev.dense_params.size(), cpu.dense_params.size());
  for (size_t i = 0; i < cpu.dense_params.size(); ++i) ASSERT_NEAR(dev.dense_params[i], cpu.dense_params[i], 1e-5) << i;
  ASSERT_EQ(dev.loss.size(), cpu.loss.size());
  for (size_t i = 0; i < cpu.loss.size(); ++i) EXPECT_NEAR(dev.loss[i], cpu.loss[i], 1e-5) << "step " << i;
}

// The GPU suite's SmallDeviceEndsOomWithTheSnapshot on the host stand-in, its 2 ranks on one
// emulated device (4 ranks of the tiny preset at this batch fit every size the estimate
// accepts): a rank's own arena runs out, the run ends oom with the layout.
TEST(GpuPlacement, TwoRanksOnOneEmulatedDeviceEndOomWithTheSnapshot) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 2;
  s.pipeline = es::PipelineKind::semi_sync;
  s.steps = 3;
  s.warmup_steps = 1;
  s.batch_size = 8000;
  s.devices.memory_bytes = 28 << 20;
  es::TrainerOptions opt;
  opt.emulate_device = true;
  opt.emulated_devices = 1;
  opt.session_path =
      (std::filesystem::temp_directory_path() / ("es_placement_oom_" + std::to_string(getpid()) + ".db")).string();
  const es::RunResult r = es::run_training(s, es::plan_sharding(s), opt);
  EXPECT_EQ(r.ended, es::RunEnd::oom) << r.error;
  EXPECT_NE(r.error.find("out of memory allocating"), std::string::npos) << r.error;
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    EXPECT_EQ(session.status(), "oom");
    bool oom_snapshot = false;
    for (const auto& sn : session.memory_snapshots()) oom_snapshot = oom_snapshot || sn.reason == "oom";
    EXPECT_TRUE(oom_snapshot);
    for (const auto& rank : session.ranks()) EXPECT_EQ(rank.memory_capacity_bytes, 28 << 20);  // each rank's arena
  }
  std::filesystem::remove(opt.session_path);
}

// The GPU suite's hang, on the intra-device communicator: 3 ranks on one emulated device, rank 2
// stops arriving at the world group's 4th collective; the run ends hang naming it, and every
// waiting rank's flight recorder keeps the collective it waited in.
TEST(GpuPlacement, ARankThatNeverArrivesOnASharedDeviceEndsTheRunAsHang) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.count = 3;
  s.collective_timeout_ms = 800;
  es::TrainerOptions opt;
  opt.emulate_device = true;
  opt.emulated_devices = 1;
  opt.vanish = {2, 4};
  opt.session_path =
      (std::filesystem::temp_directory_path() / ("es_placement_hang_" + std::to_string(getpid()) + ".db")).string();
  const auto t0 = std::chrono::steady_clock::now();
  const es::RunResult r = es::run_training(s, es::plan_sharding(s), opt);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(r.ended, es::RunEnd::hang) << r.error;
  EXPECT_NE(r.error.find("(group world, sequence 4) did not finish within 800 ms: rank(s) 2 did not arrive"),
            std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find("input_dist/lengths"), std::string::npos) << r.error;
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    EXPECT_EQ(session.status(), "hang");
    std::map<int32_t, std::vector<uint64_t>> started;  // per rank: the world collectives left started
    for (const auto& e : session.flight_records())
      if (e.group == "world" && e.state == "started") started[e.rank].push_back(e.sequence);
    EXPECT_EQ(started[0], std::vector<uint64_t>{4});
    EXPECT_EQ(started[1], std::vector<uint64_t>{4});
    EXPECT_TRUE(started[2].empty());
  }
  std::filesystem::remove(opt.session_path);
}
