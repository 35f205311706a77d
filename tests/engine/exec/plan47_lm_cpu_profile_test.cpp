// tester46 F23: an lm_embedding workload simulated on a cpu profile (what `calibrate` writes) was
// ~5x optimistic, and its SIMULATED lines spoke of CUDA cores, tensor cores and "not this
// machine". On a cpu profile the lines now speak of this machine's CPU and its emulated nodes,
// and `plan` / `run` warn that the profile's rates were fitted to DLRM step programs only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "support/cli_run.h"

namespace {

namespace fs = std::filesystem;

fs::path plan47_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_plan47_lm_cpu_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

embedscope::test_support::CliResult plan47_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, plan47_scratch());
}

// h100_sxm as a calibration writes a profile, with a "cpu" block: 2 cores, GEMMs at 0.1 TFLOP/s x 1
std::string plan47_cpu_profile() {
  namespace es = embedscope::engine;
  nlohmann::json j = es::to_json(es::load_hardware_profile("h100_sxm"));
  j["name"] = "cpu_test";
  j["gpu"]["dense_flops_per_s"] = 1e11;
  j["gpu"]["dense_efficiency"] = 1.0;
  j["gpu"].erase("dense_bf16_flops_per_s");
  j["gpu"].erase("dense_bf16_efficiency");
  j["cpu"] = {{"cores", 2}, {"threads_per_rank", 1.0}, {"background_threads", 0.0}};
  const fs::path f = plan47_scratch() / "cpu_test.json";
  std::ofstream(f) << j.dump(2);
  return f.string();
}

}  // namespace

TEST(Plan47LmCpuProfile, SimulatedLinesSpeakOfTheCpuAndWarn) {
  const std::string prof = plan47_cpu_profile();
  const std::string warning = "warning: " + prof +
                              " is a cpu profile: calibrate fits its rates to DLRM step programs only (lookups, "
                              "updates, MLPs, their collectives) and refuses lm_embedding sessions, so this workload's "
                              "ops - the output projection's GEMMs, the cross-entropy's element-wise exp, the gradient "
                              "all-reduces - are timed at rates not fitted for them: expect large errors";
  // gpt2_small_embedding: fp32, 4 ranks, one emulated node (the profile's 8 a node)
  auto r = plan47_cli("plan --preset gpt2_small_embedding --simulate " + prof);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("SIMULATED step on " + prof +
                       " (4 cpu ranks per emulated node of this machine; the step program timed by the cost model, "
                       "not measured; GEMMs timed at the profile's fp32 rate on CPU cores (0.1 TFLOP/s x 1)): "),
            std::string::npos)
      << r.out;
  for (const char* gpu_word : {"CUDA", "tensor cores", "not this machine", "GPU"})
    EXPECT_EQ(r.out.find(gpu_word), std::string::npos) << gpu_word << "\n" << r.out;
  EXPECT_NE(r.err.find(warning), std::string::npos) << r.err;
  r = plan47_cli("plan --preset gpt2_small_embedding --simulate " + prof + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("simulated_step").at("warning").get<std::string>().rfind(prof + " is a cpu profile: calibrate fits", 0),
            0u)
      << r.out;
  // the run: its SIMULATED line and the warning
  const std::string db = (plan47_scratch() / "lm_cpu.db").string();
  r = plan47_cli("run --preset gpt2_small_embedding --steps 1 --simulate " + prof + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("SIMULATED: 1 emulated node x 4 cpu ranks of hardware profile " + prof +
                       "; every time below is the cost model's, nothing is trained; GEMMs timed at the profile's fp32 "
                       "rate on CPU cores (0.1 TFLOP/s x 1)\n" + warning),
            std::string::npos)
      << r.err;
  // a GPU profile: its lines as before, no warning
  r = plan47_cli("plan --preset gpt2_small_embedding --simulate h100_sxm");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("SIMULATED step on h100_sxm (4 GPUs per node; the step program timed by the cost model, not this "
                       "machine; GEMMs timed as fp32 on CUDA cores (67 TFLOP/s x 0.5; no tensor cores, no TF32)): "),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.err.find("is a cpu profile"), std::string::npos) << r.err;
}
