// tester39 F11: `embedscope plan --backend auto` on a machine without a GPU planned for cpu ranks
// without a word; plan (text and JSON) and run now say what auto became and why.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "embedscope/profiler/device/cuda_device.h"
#include "support/cli_run.h"

namespace {
std::filesystem::path plan_auto_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_plan_backend_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult plan_auto_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, plan_auto_scratch());
}
}  // namespace

TEST(PlanBackendAuto, PlanAndRunSayWhatAutoBecame) {
  const auto& gpus = embedscope::profiler::cuda_devices();
  auto r = plan_auto_cli("plan --preset tiny --backend auto");
  ASSERT_EQ(r.code, 0) << r.err;
  if (gpus.count > 0) {  // a machine with a GPU: cuda, and which
    EXPECT_NE(r.out.find("backend cuda, GPUs: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(auto picked cuda: "), std::string::npos) << r.out;
  } else {
    ASSERT_FALSE(gpus.error.empty());
    EXPECT_NE(r.out.find("backend      cpu (auto picked cpu: no CUDA device here (" + gpus.error + "))\n"), std::string::npos)
        << r.out;
  }
  r = plan_auto_cli("plan --preset tiny --backend auto --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], gpus.count > 0 ? "cuda" : "cpu");
  EXPECT_EQ(j["backend_requested"], "auto");
  // asked for cpu: no note, and the JSON says cpu was asked for
  r = plan_auto_cli("plan --preset tiny --backend cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("auto picked"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(plan_auto_cli("plan --preset tiny --json").out)["backend_requested"], "cpu");
  // run says it on stderr beside its first line
  if (gpus.count == 0) {
    r = plan_auto_cli("run --preset tiny --steps 1 --backend auto -o " + (plan_auto_scratch() / "auto.db").string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("backend: auto picked cpu: no CUDA device here (" + gpus.error + ")\n"), std::string::npos) << r.err;
  }
}

// What `plan --json` prints runs with `run --plan` (the backend keys were "unknown key" there).
TEST(PlanBackendAuto, ThePlanJsonWithItsBackendRuns) {
  const auto plan = plan_auto_scratch() / "auto_plan.json";
  const std::string cmd = std::string(EMBEDSCOPE_CLI) + " plan --preset tiny --backend auto --json > " + plan.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto r = plan_auto_cli("run --preset tiny --steps 1 --plan " + plan.string() + " -o " +
                               (plan_auto_scratch() / "from_plan.db").string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("unknown key"), std::string::npos) << r.err;
}
