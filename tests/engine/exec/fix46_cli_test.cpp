// tester46 F3: `--preset ''` listed the DLRM presets only, an unknown one all of them, and the
// help of scaling / inspect-input offered LM presets they refuse: one list now, marked.
// tester46 F4: `plan` of a DLRM workload on the cpu backend said nothing of this machine's memory
// (mlperf_dlrm_dcnv2: "fits": true), which `run` then refused (125.2 GiB on a 23.5 GiB machine).
// plan now gives the verdict run would (exec/host_memory_check.h), as a line and in --json,
// without refusing the plan itself (exit 0: planning a large workload is what plan is for).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path fix46_plan_dir() {
  static const fs::path d = [] {
    const auto p = fs::temp_directory_path() / ("es_fix46_plan_" + std::to_string(getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// The figures of `plan --json`: the ranks' host bytes (cpu: total + host of every rank) and the
// verdict against 90% of the memory available when it ran.
void fix46_expect_host_verdict(const nlohmann::json& plan) {
  int64_t need = 0;
  for (const auto& m : plan.at("memory")) need += m.at("total_bytes").get<int64_t>() + m.at("host_bytes").get<int64_t>();
  const nlohmann::json& j = plan.at("host_memory");
  EXPECT_EQ(j.at("needed_bytes").get<int64_t>(), need);
  const auto available = j.at("available_memory_bytes").get<int64_t>();
  EXPECT_GT(j.at("machine_memory_bytes").get<int64_t>(), 0);
  EXPECT_EQ(j.at("fits").get<bool>(), available <= 0 || static_cast<double>(need) <= 0.9 * static_cast<double>(available));
  EXPECT_EQ(j.contains("refusal"), !j.at("fits").get<bool>());
}
}  // namespace

TEST(Fix46PlanHostMemory, CpuPlansSayWhatRunWouldSayOfThisMachine) {
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan --preset mlperf_dlrm_dcnv2 --json", fix46_plan_dir());
  ASSERT_EQ(r.code, 0) << r.err;  // the plan is printed and not refused
  auto j = nlohmann::json::parse(r.out);
  fix46_expect_host_verdict(j);
  if (!j.at("host_memory").at("fits").get<bool>()) {
    EXPECT_NE(j.at("host_memory").at("refusal").get<std::string>().find("the cpu backend runs all 8 ranks in this process"),
              std::string::npos) << j.at("host_memory");
  }
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan --preset tiny --json", fix46_plan_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  fix46_expect_host_verdict(j);
  // the text: one line after the memory table
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan --preset tiny", fix46_plan_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto at = r.out.find("\nthis machine ");
  ASSERT_NE(at, std::string::npos) << r.out;
  // tiny's 2 ranks: 70.5 KiB + 29.0 KiB (the memory table's totals)
  const std::string want = "\nthis machine fits: a cpu run's 2 ranks keep 99.5 KiB in this process; this machine has ";
  EXPECT_EQ(r.out.compare(at, want.size(), want), 0) << r.out.substr(at);
  // a simulated plan is a cluster's: no line, no fields
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan --preset tiny --simulate h100_sxm --json", fix46_plan_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out).contains("host_memory"));
  // `plan --json` is still a plan file: run --plan reads it back (host_memory ignored)
  const std::string plan_file = (fix46_plan_dir() / "fix46_tiny_plan.json").string();
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan --preset tiny --json > " + plan_file + " && " +
                                                            std::string(EMBEDSCOPE_CLI) + " run --preset tiny --steps 1 --plan " +
                                                            plan_file + " --force-overwrite -o " +
                                                            (fix46_plan_dir() / "fix46_tiny.db").string(),
                                        fix46_plan_dir());
  EXPECT_EQ(r.code, 0) << r.err;
}

namespace {
constexpr const char* kFix46PresetList =
    "known presets: criteo_kaggle, criteo_terabyte_10m, mlperf_dlrm_dcnv2, mlperf_dlrm_dcnv2_scaled, tiny; lm_embedding "
    "(run, plan, program and scaling only): gpt2_small_embedding, llama3_8b_embedding, llama3_8b_embedding_scaled\n";
}  // namespace

TEST(Fix46PresetList, EmptyAndUnknownPresetsAndTheHelpGiveOneList) {
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run --preset ''", fix46_plan_dir());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, std::string("error: --preset: empty; ") + kFix46PresetList);
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "scaling --preset nope --simulate h100_sxm", fix46_plan_dir());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, std::string("error: --preset nope: unknown; ") + kFix46PresetList);
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "inspect-input --help", fix46_plan_dir());
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("lm_embedding (run, plan, program and scaling only)"), std::string::npos) << r.out;
}

// tester46 F11: `rebalance` of an lm_embedding session said "not a session Embedscope ran";
// F18: "1 GPUs per node", "8 nodes x 1 GPUs".
TEST(Fix46CliWording, RebalanceOfAnLmSessionAndOneGpuPerNode) {
  const std::string db = (fix46_plan_dir() / "fix46_lm_sim.db").string();
  auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run --preset gpt2_small_embedding --simulate h100_sxm --steps 1 --force-overwrite -o " + db,
      fix46_plan_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "rebalance " + db, fix46_plan_dir());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: " + db + ": an lm_embedding session: rebalance moves DLRM embedding tables between ranks; an "
                   "lm_embedding vocabulary has one shard a rank, given by its sharding mode\n");
  r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "plan --preset llama3_8b_embedding_scaled --devices 1 --simulate h100_sxm", fix46_plan_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("SIMULATED step on h100_sxm (1 GPU per node;"), std::string::npos) << r.out;
  r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "scaling --preset tiny --simulate h100_sxm --gpus 2 --gpus-per-node 1 --shardings table_wise --steps 1",
      fix46_plan_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(1 GPU per node)"), std::string::npos) << r.out;
}
