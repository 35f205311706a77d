// tester45 F10 (the part left after fix45's memory guard): a measured lm_embedding run whose
// steps take minutes says so before it starts, with the figures (planner/host_step_time.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/planner/host_step_time.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "support/cli_run.h"

namespace {
namespace es = embedscope::engine;
// llama3_8b_embedding, by hand from program/lm_program.h's flops: 8 ranks, vocab_parallel +
// sequence parallel, T = 8,192 tokens (Tl = 1,024 a rank, Tc = 8,192 projected), H 4,096,
// R = 128,256 / 8 = 16,032 rows, L = 2 body layers. A rank: body 2 L Tl H^2 + 4 L Tl H^2 =
// 206,158,430,208; projection 2 Tc R H + 4 Tc R H = 3,227,667,922,944.
constexpr int64_t kFix46Llama3StepFlops = 8 * (206'158'430'208LL + 3'227'667'922'944LL);  // 27,470,610,825,216
}  // namespace

TEST(Fix46HostStepTime, StepFlopsAreTheProgramsComputeOpsOfEveryRank) {
  const es::LmWorkloadSpec spec = es::load_lm_preset("llama3_8b_embedding");
  EXPECT_EQ(es::lm_step_flops(spec), kFix46Llama3StepFlops);
}

TEST(Fix46HostStepTime, TheBoundAndTheWarningText) {
  // 27.47 TFLOP at 50 GFLOP/s a core on 2 cores (8 ranks share them): 274.7 s
  EXPECT_DOUBLE_EQ(es::host_step_seconds(kFix46Llama3StepFlops, 50e9, 2, 8), 27'470'610'825'216.0 / 100e9);
  EXPECT_DOUBLE_EQ(es::host_step_seconds(1'000'000'000'000, 1e9, 16, 4), 250.0);  // 4 ranks use 4 of 16 cores
  EXPECT_EQ(es::host_step_seconds(1'000'000'000'000, 0.0, 2, 8), 0.0);             // rate unknown
  EXPECT_EQ(es::long_step_warning(kFix46Llama3StepFlops, 50e9, 2, 8, 2),
            "this run's steps take at least 4.6 min (27.5 TFLOP of GEMMs a step over all ranks at 50.0 GFLOP/s a "
            "core, measured now, on 2 cores) each on this machine: its 2 steps at least 9.2 min; `embedscope plan` "
            "and `--simulate PROFILE` give its figures without running it (Ctrl-C cancels after the current step)");
  EXPECT_EQ(es::long_step_warning(1'000'000'000'000, 50e9, 2, 8, 2), "");  // 10 s a step: nothing said
  EXPECT_EQ(es::long_step_warning(6'000'000'000'000, 50e9, 2, 8, 1).rfind("this run's steps take at least 1.0 min", 0), 0u);
  EXPECT_EQ(es::duration_text(42.4), "42 s");
  EXPECT_EQ(es::duration_text(7560), "2.1 h");
  EXPECT_GT(es::measure_gemm_flops_per_s(), 0.0);
  EXPECT_GE(es::host_cores(), 1);
}

// `plan --json` of the preset carries the step's flops and, measured, the bound (whether or not
// its memory fits this machine: exit 0, the verdict in the JSON).
TEST(Fix46HostStepTime, PlanJsonCarriesTheMeasuredStepBound) {
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan --preset llama3_8b_embedding --json",
                                                   std::filesystem::temp_directory_path());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("step_flops").get<int64_t>(), kFix46Llama3StepFlops);
  const double rate = j.at("gemm_flops_per_s_per_core").get<double>();
  ASSERT_GT(rate, 0.0);
  const int cores = es::host_cores();
  EXPECT_NEAR(j.at("host_step_seconds_at_least").get<double>(),
              es::host_step_seconds(kFix46Llama3StepFlops, rate, cores, 8), 1e-3);
}
