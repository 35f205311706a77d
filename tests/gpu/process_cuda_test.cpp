// The cuda backend with one rank per process on a device (label gpu): `embedscope launch -n 2 run
// --backend cuda` (two processes, each its own GPU from its local rank, rank 0's NCCL id through
// launch's FileStore, ncclCommInitRank) gives the losses and bytes of the threaded cuda run of the
// same workload; more local ranks than GPUs are refused naming the counts. NCCL cannot put one GPU
// in a communicator twice, so the two-process run needs 2 GPUs and skips, saying so, with fewer.
// The host twin (ids through a FileStore, the GPU choice) is tests/engine/exec/launch/nccl_setup_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/profiler/device/cuda_device.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace fs = std::filesystem;

namespace {
fs::path process_cuda_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("es_proccuda_" + std::to_string(getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
}  // namespace

TEST(ProcessCuda, TwoProcessesOnTwoGpusGiveTheThreadedCudaRun) {
  if (auto why = embedscope::profiler::cuda_unavailable_reason(1); !why.empty()) GTEST_SKIP() << why;
  if (const int n = embedscope::profiler::cuda_devices().count; n < 2)
    GTEST_SKIP() << "NCCL cannot put one GPU in a communicator twice: 2 processes need 2 GPUs, this machine has " << n;
  const auto dir = process_cuda_dir("two");
  const std::string args = "--preset tiny --backend cuda --steps 3 --warmup-steps 1 --json";
  const auto t = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run " + args + " --devices 2 -o " + (dir / "t.db").string(), dir);
  ASSERT_EQ(t.code, 0) << t.err;
  const auto tj = nlohmann::json::parse(t.out);
  const auto l = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "launch -n 2 run " + args + " -o " + (dir / "p.db").string(), dir);
  ASSERT_EQ(l.code, 0) << l.err;
  const auto lj = nlohmann::json::parse(l.out);
  ASSERT_EQ(lj["ranks"].size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const auto& rk = lj["ranks"][static_cast<size_t>(r)]["result"];
    ASSERT_EQ(rk["loss"].size(), tj["loss"].size()) << "rank " << r;
    for (size_t i = 0; i < rk["loss"].size(); ++i)  // NCCL's all-reduce order: equal or within float rounding
      EXPECT_NEAR(rk["loss"][i].get<double>(), tj["loss"][i].get<double>(), 1e-5 * std::abs(tj["loss"][i].get<double>()))
          << "rank " << r << " step " << i;
    EXPECT_EQ(rk["ranks"][0]["bytes_sent"], tj["ranks"][static_cast<size_t>(r)]["bytes_sent"]) << "rank " << r;
  }
  const embedscope::sessions::SessionReader merged((dir / "p.db").string());
  EXPECT_EQ(merged.status(), "complete");
  EXPECT_EQ(merged.meta("backend"), "cuda");
  for (int r = 0; r < 2; ++r) {  // each process on its own GPU, NCCL's version recorded
    const embedscope::sessions::SessionReader one((dir / ("p.rank" + std::to_string(r) + ".db")).string());
    EXPECT_NE(one.meta("nccl_version").find('.'), std::string::npos) << one.meta("nccl_version");
    EXPECT_FALSE(one.meta("gpu_names").empty());
  }
}

TEST(ProcessCuda, MoreLocalRanksThanGpusAreRefusedNamingTheCounts) {
  if (auto why = embedscope::profiler::cuda_unavailable_reason(1); !why.empty()) GTEST_SKIP() << why;
  const int n = embedscope::profiler::cuda_devices().count;
  const auto dir = process_cuda_dir("over");
  const auto l = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI,
      "launch -n " + std::to_string(n + 1) + " run --preset tiny --backend cuda --steps 1 -o " + (dir / "o.db").string(), dir);
  EXPECT_EQ(l.code, 2) << l.err;
  const std::string want = "rank " + std::to_string(n) + " is local rank " + std::to_string(n) +
                           " (embedscope launch), but this process sees " + std::to_string(n) + " GPU";
  EXPECT_NE(l.err.find(want), std::string::npos) << l.err;
  EXPECT_NE(l.err.find("NCCL cannot put one GPU in a communicator twice"), std::string::npos) << l.err;
}
