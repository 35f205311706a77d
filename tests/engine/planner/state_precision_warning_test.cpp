// fp16 optimizer state warns at plan (and run) time: rowwise_adagrad's state, a row's sum of
// mean g^2, and adam's momentum2 fall under fp16's smallest normal (workload/state_precision.h).
// The thresholds by hand: fp16's smallest normal 2^-14 = 6.104e-5 = g^2 for g = 7.81e-3; half its
// smallest subnormal, 2^-25 = 2.98e-8, = g^2 for g = 1.73e-4; adam 0.001 g^2 = 6.104e-5 for
// g = 0.247.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/spec.h"
#include "embedscope/engine/workload/state_precision.h"
#include "support/build_paths.h"
#include "support/cli_run.h"

using namespace embedscope::engine;

namespace {
WorkloadSpec straggler() {
  return load_workload_file(std::string(EMBEDSCOPE_TEST_DATA) + "/specs/small_hot_table_straggler.json");
}
}  // namespace

TEST(StatePrecisionWarning, ThresholdsInTheTextByHand) {
  EXPECT_NEAR(std::sqrt(std::ldexp(1.0, -14)), 7.8e-3, 0.05e-3);
  EXPECT_NEAR(std::sqrt(std::ldexp(1.0, -25)), 1.7e-4, 0.05e-4);
  EXPECT_NEAR(std::sqrt(std::ldexp(1.0, -14) / 0.001), 0.25, 0.005);
}

TEST(StatePrecisionWarning, RowwiseAdagradFp16NamesTheTables) {
  WorkloadSpec s = straggler();
  ASSERT_EQ(s.optimizer.type, OptimizerType::rowwise_adagrad);
  EXPECT_TRUE(state_precision_warnings(s).empty());  // fp32 state
  s.tables[1].optimizer_state_type = OptimizerStateType::fp16;
  s.tables[4].optimizer_state_type = OptimizerStateType::fp16;
  s.tables[5].optimizer_state_type = OptimizerStateType::bf16;  // fp32's range: no warning
  const auto w = state_precision_warnings(s);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "/tables/1/optimizer_state_type: fp16 (tables \"cold_1\", \"hot_1\") with /optimizer/type rowwise_adagrad: "
            "the state, a row's running sum of mean g^2, falls under fp16's smallest normal (6.1e-5) for g below "
            "~7.8e-3 and rounds to 0 for g below ~1.7e-4 (gradients of a batch-mean loss are ~1e-4..1e-3), so a row "
            "loses its adagrad history and steps by about the learning rate again; bf16 keeps fp32's range");
}

TEST(StatePrecisionWarning, AdamFp16AndBf16) {
  WorkloadSpec s = straggler();
  s.optimizer.type = OptimizerType::adam;
  s.tables[3].optimizer_state_type = OptimizerStateType::fp16;
  const auto w = state_precision_warnings(s);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "/tables/3/optimizer_state_type: fp16 (table \"hot_0\") with /optimizer/type adam: momentum2 = "
                  "0.001 g^2 falls under fp16's smallest normal (6.1e-5) for g below ~0.25 and loses precision; bf16 "
                  "keeps fp32's range");
  s.tables[3].optimizer_state_type = OptimizerStateType::bf16;
  EXPECT_TRUE(state_precision_warnings(s).empty());
}

// `plan` prints it on stderr, once, with the file's name; the plan itself is unchanged (exit 0).
TEST(StatePrecisionWarning, PlanPrintsIt) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_state_warn_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  WorkloadSpec s = straggler();
  for (auto& t : s.tables) t.optimizer_state_type = OptimizerStateType::fp16;
  const std::string file = (dir / "st16.json").string();
  std::ofstream(file) << to_json(s).dump(1);
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan " + file, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string want = "warning: " + file + ": /tables/0/optimizer_state_type: fp16 (tables \"cold_0\", \"cold_1\", "
                           "\"cold_2\", \"hot_0\", \"hot_1\", \"hot_2\") with /optimizer/type rowwise_adagrad: the state";
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("warning:"), r.err.rfind("warning:")) << r.err;
}
