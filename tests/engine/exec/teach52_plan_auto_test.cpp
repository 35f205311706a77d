// tester52 F3: `plan --auto` on a cpu workload printed the plan it chose with no word of this
// machine's memory (--json: "fits": true, no host_memory), which `run --plan auto` then refused.
// It now gives plain `plan`'s verdict (fix46_cli_test.cpp: exec/host_memory_check.h) for the
// chosen plan. The workload that does not fit is the tiny preset with one table of 10^12 rows
// of dim 12 (48e12 B of fp32 weights) on devices of 1 PiB, so the device check passes on any
// machine and this machine's memory (far below 48 TB) refuses it; nothing is allocated.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path teach52_plan_dir() {
  static const fs::path d = [] {
    const auto p = fs::temp_directory_path() / ("es_teach52_plan_" + std::to_string(getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

embedscope::test_support::CliResult teach52_plan_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, teach52_plan_dir());
}

constexpr int64_t kTeach52Rows = 1'000'000'000'000;  // t_c's rows: x 12 floats x 4 B = 48e12 B

std::string teach52_huge_workload() {
  const std::string path = (teach52_plan_dir() / "huge.json").string();
  // two of tiny's tables, t_c's rows raised, on devices of 1 PiB
  std::ofstream(path) << R"({"name": "huge", "tables": [
    {"name": "t_small", "num_embeddings": 1, "embedding_dim": 4, "pooling": "sum", "feature_names": ["f_small"]},
    {"name": "t_c", "num_embeddings": )" << kTeach52Rows << R"(, "embedding_dim": 12, "pooling": "sum", "feature_names": ["f_c"]}],
    "features": [{"name": "f_small", "pooling_factor": 1, "ids": "uniform"}, {"name": "f_c", "pooling_factor": 2, "ids": "uniform"}],
    "batch_size": 8, "steps": 2, "devices": {"count": 2, "backend": "cpu", "memory_bytes": 1125899906842624},
    "optimizer": {"type": "sgd", "learning_rate": 0.1},
    "dense": {"num_dense_features": 4, "bottom_mlp": [8], "interaction": "cat", "top_mlp": [16, 1]}})";
  return path;
}

// The host bytes of a plan document (cpu: every rank's total + host), as fix46_cli_test.cpp.
int64_t teach52_need(const json& plan) {
  int64_t need = 0;
  for (const auto& m : plan.at("memory")) need += m.at("total_bytes").get<int64_t>() + m.at("host_bytes").get<int64_t>();
  return need;
}

std::string teach52_verdict_line(const std::string& out) {
  const auto at = out.find("\nthis machine ");
  if (at == std::string::npos) return "";
  return out.substr(at + 1, out.find('\n', at + 1) - at - 1);
}

TEST(Teach52PlanAuto, AutoGivesPlansHostMemoryVerdictForTheChosenPlan) {
  const std::string file = teach52_huge_workload();
  auto r = teach52_plan_cli("plan " + file + " --auto --json");
  ASSERT_EQ(r.code, 0) << r.err;  // printed, not refused, as plain plan
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("backend"), "cpu");
  ASSERT_TRUE(j.contains("host_memory")) << r.out.substr(0, 2000);
  const json& h = j.at("host_memory");
  const int64_t need = teach52_need(j);
  EXPECT_GE(need, kTeach52Rows * 12 * 4);  // the table's weights, on one rank
  EXPECT_EQ(h.at("needed_bytes").get<int64_t>(), need);
  ASSERT_LT(h.at("machine_memory_bytes").get<int64_t>(), need) << "a machine of 48 TB: nothing to check";
  EXPECT_EQ(h.at("fits"), false);
  EXPECT_NE(h.at("refusal").get<std::string>().find("the cpu backend runs all 2 ranks in this process and they need 43.7 TiB"),
            std::string::npos)
      << h;
  // plain plan says the same of its plan (the same weights; its buffers may sit on another rank)
  const json plain = json::parse(teach52_plan_cli("plan " + file + " --json").out);
  EXPECT_EQ(plain.at("host_memory").at("fits"), false);
  // the text: the same line as plain plan's, after the memory table
  r = teach52_plan_cli("plan " + file + " --auto");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string line = teach52_verdict_line(r.out);
  EXPECT_EQ(line.rfind("this machine DOES NOT FIT: a cpu run's 2 ranks keep 43.7 TiB in this process; this machine has ", 0), 0u)
      << r.out;
  EXPECT_NE(line.find("`run` refuses it"), std::string::npos) << line;
  EXPECT_LT(r.out.find(line), r.out.find("planner search:")) << r.out;
  const std::string plain_line = teach52_verdict_line(teach52_plan_cli("plan " + file).out);
  EXPECT_EQ(line.substr(0, line.find("; this machine has")), plain_line.substr(0, plain_line.find("; this machine has")));
  // and run refuses the chosen plan, as the verdict says
  r = teach52_plan_cli("run " + file + " --plan auto --steps 1 -o " + (teach52_plan_dir() / "huge.db").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the cpu backend runs all 2 ranks in this process and they need 43.7 TiB"), std::string::npos) << r.err;
}

TEST(Teach52PlanAuto, AFittingPlanSaysSoAndASimulatedOneHasNoVerdict) {
  auto r = teach52_plan_cli("plan --preset tiny --auto --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_TRUE(j.contains("host_memory"));
  EXPECT_EQ(j.at("host_memory").at("needed_bytes").get<int64_t>(), teach52_need(j));
  const auto available = j.at("host_memory").at("available_memory_bytes").get<int64_t>();
  EXPECT_EQ(j.at("host_memory").at("fits").get<bool>(),
            available <= 0 || static_cast<double>(teach52_need(j)) <= 0.9 * static_cast<double>(available));
  r = teach52_plan_cli("plan --preset tiny --auto");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(teach52_verdict_line(r.out).rfind("this machine fits: a cpu run's 2 ranks keep ", 0), 0u) << r.out;
  // a simulated plan is a cluster's: no line, no key
  r = teach52_plan_cli("plan --preset tiny --simulate h100_sxm --auto --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_FALSE(j.contains("host_memory"));
  EXPECT_EQ(j.at("backend"), "simulated");
  r = teach52_plan_cli("plan --preset tiny --simulate h100_sxm --auto");
  EXPECT_EQ(teach52_verdict_line(r.out), "") << r.out;
}

}  // namespace
