// dense49: the rate the cost model times the dense op's GEMMs at for each dense.precision
// (cost/dense_gemm_rate.h): the built-in profiles' TF32 rates and their sources, the fallback of a
// profile without a precision's rate, one layer's dense time by hand at each rate, the program's
// dense op carrying its precision, the text the commands print, and the CLI flag end to end.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/dense_gemm_rate.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"
#include "support/cli_run.h"

namespace {

namespace es = embedscope::engine;
namespace fs = std::filesystem;
using es::DensePrecision;

// A small valid profile without tensor-core rates; `gpu_extra` is spliced into "gpu".
std::string dense49_profile(const std::string& gpu_extra) {
  return R"({"name": "t", "gpu": {"name": "g", "memory_bytes": 1000, "hbm_bandwidth_bytes_per_s": 1e12,
    "dense_flops_per_s": 1e12, "dense_efficiency": 0.5, "tbe_forward_efficiency": 0.5, "tbe_backward_efficiency": 0.5,
    "memory_kernel_efficiency": 0.5, "kernel_launch_ns": 1000)" +
         gpu_extra + R"(},
    "cluster": {"gpus_per_node": 8, "max_nodes": 1},
    "intra_node": {"name": "nvl", "bus_bandwidth_bytes_per_s": 1e11, "latency_ns": 0},
    "inter_node": {"name": "ib", "bus_bandwidth_bytes_per_s": 1e10, "latency_ns": 0}})";
}

std::string dense49_profile_error(const std::string& text) {
  try {
    es::parse_hardware_profile(text, "my.json");
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Dense49Rate, BuiltInProfilesGiveEachPrecisionsDatasheetRate) {
  const es::HardwareProfile h100 = es::load_hardware_profile("h100_sxm");
  EXPECT_DOUBLE_EQ(h100.gpu.dense_tf32_flops_per_s, 494.7e12);  // 989 TFLOPS with sparsity / 2
  EXPECT_DOUBLE_EQ(h100.gpu.dense_tf32_efficiency, 0.6);
  EXPECT_NE(h100.sources.at("/gpu/dense_tf32_flops_per_s").find("494.7 TFLOPS dense"), std::string::npos);
  EXPECT_NE(h100.sources.at("/gpu/dense_tf32_efficiency").find("assumption"), std::string::npos);
  EXPECT_DOUBLE_EQ(es::load_hardware_profile("h200_sxm").gpu.dense_tf32_flops_per_s, 494.7e12);
  const es::HardwareProfile a100 = es::load_hardware_profile("a100_sxm_80gb");
  EXPECT_DOUBLE_EQ(a100.gpu.dense_tf32_flops_per_s, 156e12);
  EXPECT_NE(a100.sources.at("/gpu/dense_tf32_flops_per_s").find("156 TFLOPS"), std::string::npos);

  const auto rate = [&](DensePrecision p) { return es::dense_gemm_rate(h100.gpu, p); };
  EXPECT_DOUBLE_EQ(rate(DensePrecision::fp32).peak_flops_per_s, 67e12);
  EXPECT_DOUBLE_EQ(rate(DensePrecision::fp32).efficiency, 0.5);
  EXPECT_DOUBLE_EQ(rate(DensePrecision::tf32).flops_per_s(), 494.7e12 * 0.6);
  EXPECT_DOUBLE_EQ(rate(DensePrecision::bf16).flops_per_s(), 989.4e12 * 0.6);
  EXPECT_DOUBLE_EQ(rate(DensePrecision::fp16).flops_per_s(), 989.4e12 * 0.6);
  for (DensePrecision p : {DensePrecision::fp32, DensePrecision::tf32, DensePrecision::bf16, DensePrecision::fp16})
    EXPECT_FALSE(rate(p).fell_back);
  EXPECT_DOUBLE_EQ(es::dense_gemm_rate(a100.gpu, DensePrecision::bf16).peak_flops_per_s, 312e12);
}

TEST(Dense49Rate, AProfileWithoutTheRateFallsBackToFp32AndSaysSo) {
  const es::HardwareProfile p = es::parse_hardware_profile(dense49_profile(""), "my.json");
  for (DensePrecision d : {DensePrecision::tf32, DensePrecision::bf16, DensePrecision::fp16}) {
    const es::DenseGemmRate r = es::dense_gemm_rate(p.gpu, d);
    EXPECT_TRUE(r.fell_back);
    EXPECT_DOUBLE_EQ(r.flops_per_s(), 0.5e12);
  }
  EXPECT_FALSE(es::dense_gemm_rate(p.gpu, DensePrecision::fp32).fell_back);
  EXPECT_EQ(es::dense_precision_text(DensePrecision::bf16, &p),
            "bf16 (AMP: GEMM inputs rounded to bf16, fp32 accumulation and weights; GEMMs timed at the fp32 rate 1 "
            "TFLOP/s x 0.5: profile t gives no bf16 / fp16 rate)");
  EXPECT_EQ(es::dense_precision_text(DensePrecision::tf32, &p),
            "tf32 (AMP: GEMM inputs rounded to tf32, fp32 accumulation and weights; GEMMs timed at the fp32 rate 1 "
            "TFLOP/s x 0.5: profile t gives no tf32 rate)");
  const es::HardwareProfile h100 = es::load_hardware_profile("h100_sxm");
  EXPECT_EQ(es::dense_precision_text(DensePrecision::bf16, &h100),
            "bf16 (AMP: GEMM inputs rounded to bf16, fp32 accumulation and weights; GEMMs timed at h100_sxm's bf16 "
            "tensor-core rate 989.4 TFLOP/s x 0.6)");
  EXPECT_EQ(es::dense_precision_text(DensePrecision::fp32, &h100), "fp32 (GEMMs timed at 67 TFLOP/s x 0.5, fp32)");
  EXPECT_EQ(es::dense_precision_text(DensePrecision::fp32, nullptr), "fp32 (fp32 GEMMs)");
  EXPECT_EQ(es::dense_precision_text(DensePrecision::fp16, nullptr),
            "fp16 (AMP: GEMM inputs rounded to fp16, fp32 accumulation and weights; emulated on the CPU with fp32 sgemm)");
}

TEST(Dense49Rate, Tf32FieldsComeInPairsNamedByPointer) {
  EXPECT_EQ(dense49_profile_error(dense49_profile(R"(, "dense_tf32_flops_per_s": 1e14)")),
            "my.json: /gpu/dense_tf32_efficiency: missing (required with /gpu/dense_tf32_flops_per_s)");
  EXPECT_EQ(dense49_profile_error(dense49_profile(R"(, "dense_tf32_efficiency": 0.5)")),
            "my.json: /gpu/dense_tf32_efficiency: given without /gpu/dense_tf32_flops_per_s (the rate it is a fraction "
            "of)");
  const es::HardwareProfile p =
      es::parse_hardware_profile(dense49_profile(R"(, "dense_tf32_flops_per_s": 4e12, "dense_tf32_efficiency": 0.25)"), "my.json");
  EXPECT_DOUBLE_EQ(es::dense_gemm_rate(p.gpu, DensePrecision::tf32).flops_per_s(), 1e12);
}

TEST(Dense49Rate, OneLayersDenseTimeByHandAtEachPrecision) {
  // a 1024 -> 1024 linear layer at MLPerf's per-GPU batch 6,912, forward and backward:
  // 6 x 6,912 x 1,024 x 1,024 = 43,486,543,872 flops; h100_sxm, launch 5 us, no bytes
  const es::HardwareProfile h100 = es::load_hardware_profile("h100_sxm");
  es::ProgramOp op;
  op.category = embedscope::sessions::OpCategory::dense;
  op.flops = int64_t{6} * 6912 * 1024 * 1024;
  ASSERT_EQ(op.flops, 43'486'543'872);
  op.dense_precision = DensePrecision::fp32;
  EXPECT_EQ(es::compute_ns(op, h100), 5000 + 1'298'106);  // / (67e12 x 0.5) = 1.298106 ms
  op.dense_precision = DensePrecision::tf32;
  EXPECT_EQ(es::compute_ns(op, h100), 5000 + 146'508);  // / (494.7e12 x 0.6)
  op.dense_precision = DensePrecision::bf16;
  EXPECT_EQ(es::compute_ns(op, h100), 5000 + 73'254);  // / (989.4e12 x 0.6)
  op.dense_precision = DensePrecision::fp16;
  EXPECT_EQ(es::compute_ns(op, h100), 5000 + 73'254);
}

TEST(Dense49Rate, PartsProfileTimesTheGemmsAtThePrecisionsRate) {
  // GEMMs 1e9 flops, interaction 1e6 ops at 1e9/s, element-wise 4e6 at 2e9/s: fp32 1e9 / (1e12 x
  // 0.5) = 2 ms + 1 ms + 2 ms; bf16 at 2e12 x 0.5: 1 ms + 1 ms + 2 ms
  const es::HardwareProfile p = es::parse_hardware_profile(
      dense49_profile(R"(, "dense_interaction_ops_per_s": 1e9, "dense_elementwise_ops_per_s": 2e9,
                         "dense_bf16_flops_per_s": 2e12, "dense_bf16_efficiency": 0.5)"),
      "parts");
  es::ProgramOp op;
  op.category = embedscope::sessions::OpCategory::dense;
  op.flops = 2'000'000'000;
  op.dense_work = {1'000'000'000, 1'000'000, 4'000'000};
  EXPECT_DOUBLE_EQ(es::math_seconds(op, p.gpu), 5e-3);
  op.dense_precision = DensePrecision::bf16;
  EXPECT_DOUBLE_EQ(es::math_seconds(op, p.gpu), 4e-3);
  op.dense_precision = DensePrecision::tf32;  // no tf32 rate: fp32's
  EXPECT_DOUBLE_EQ(es::math_seconds(op, p.gpu), 5e-3);
}

TEST(Dense49Rate, TheProgramsDenseOpCarriesTheWorkloadsPrecision) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.dense->precision = DensePrecision::bf16;
  const es::StepProgram p = es::build_step_program(s, es::plan_sharding(s), 0, s.warmup_steps);
  int dense_ops = 0;
  for (const auto& op : p.ops) {
    if (op.name == "dense_forward_backward") {
      ++dense_ops;
      EXPECT_EQ(op.dense_precision, DensePrecision::bf16);
    } else {
      EXPECT_EQ(op.dense_precision, DensePrecision::fp32) << op.name;
    }
  }
  EXPECT_EQ(dense_ops, 1);
}

TEST(Dense49Rate, CliFlagSetsThePrecisionThatPlanRunAndStatsSay) {
  const fs::path dir = fs::temp_directory_path() / ("es_dense49_" + std::to_string(getpid()));
  fs::create_directories(dir);
  using embedscope::test_support::run_cli;
  const auto plan = run_cli(EMBEDSCOPE_CLI, "plan --preset tiny --dense-precision bf16", dir);
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find("\ndense        bf16 (AMP: GEMM inputs rounded to bf16, fp32 accumulation and weights; "
                          "emulated on the CPU with fp32 sgemm)\n"),
            std::string::npos)
      << plan.out;
  const auto sim = run_cli(EMBEDSCOPE_CLI,
                           "run --preset tiny --simulate h100_sxm --steps 2 --dense-precision bf16 --force-overwrite -o " +
                               (dir / "s.db").string(),
                           dir);
  ASSERT_EQ(sim.code, 0) << sim.err;
  const std::string line = "\ndense        bf16 (AMP: GEMM inputs rounded to bf16, fp32 accumulation and weights; GEMMs "
                           "timed at h100_sxm's bf16 tensor-core rate 989.4 TFLOP/s x 0.6)\n";
  EXPECT_NE(sim.out.find(line), std::string::npos) << sim.out;
  const auto stats = run_cli(EMBEDSCOPE_CLI, "stats " + (dir / "s.db").string(), dir);
  ASSERT_EQ(stats.code, 0) << stats.err;
  EXPECT_NE(stats.out.find(line), std::string::npos) << stats.out;
  const auto bad = run_cli(EMBEDSCOPE_CLI, "plan --preset tiny --dense-precision int8", dir);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE((bad.out + bad.err).find("--dense-precision"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

}  // namespace
