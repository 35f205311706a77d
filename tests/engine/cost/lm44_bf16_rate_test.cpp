// lm44 (tester43 F16): the tensor-core rate of bf16 / fp16 GEMMs in the GPU profiles
// (hardware_profile.h dense_bf16_flops_per_s, dense_bf16_efficiency), its parsing errors, the cost
// of a half-precision GEMM op (cost_model.h half_precision_gemm_ns) and the LM program's
// projection ops timed by it (program/lm_program.h), against hand-computed values.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/spec_error.h"
#include "support/cli_run.h"

namespace {

namespace es = embedscope::engine;

// A small valid profile; `gpu_extra` is spliced into its "gpu" object.
std::string lm44_profile(const std::string& gpu_extra) {
  return R"({"name": "t", "gpu": {"name": "g", "memory_bytes": 1000, "hbm_bandwidth_bytes_per_s": 1e12,
    "dense_flops_per_s": 1e13, "dense_efficiency": 0.5, "tbe_forward_efficiency": 0.5, "tbe_backward_efficiency": 0.5,
    "memory_kernel_efficiency": 0.5, "kernel_launch_ns": 1000)" +
         gpu_extra + R"(},
    "cluster": {"gpus_per_node": 8, "max_nodes": 1},
    "intra_node": {"name": "nvl", "bus_bandwidth_bytes_per_s": 1e11, "latency_ns": 0},
    "inter_node": {"name": "ib", "bus_bandwidth_bytes_per_s": 1e10, "latency_ns": 0}})";
}

std::string lm44_error(const std::string& text) {
  try {
    es::parse_hardware_profile(text, "my.json");
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Lm44Bf16Rate, BuiltInGpuProfilesGiveTheDatasheetsDenseRateWithItsSource) {
  const es::HardwareProfile h100 = es::load_hardware_profile("h100_sxm");
  EXPECT_DOUBLE_EQ(h100.gpu.dense_bf16_flops_per_s, 989.4e12);  // 1,979 TFLOPS with sparsity / 2
  EXPECT_DOUBLE_EQ(h100.gpu.dense_bf16_efficiency, 0.6);
  EXPECT_NE(h100.sources.at("/gpu/dense_bf16_flops_per_s").find("989.4 TFLOPS dense"), std::string::npos);
  EXPECT_NE(h100.sources.at("/gpu/dense_bf16_efficiency").find("assumption"), std::string::npos);
  EXPECT_DOUBLE_EQ(es::load_hardware_profile("h200_sxm").gpu.dense_bf16_flops_per_s, 989.4e12);
  const es::HardwareProfile a100 = es::load_hardware_profile("a100_sxm_80gb");
  EXPECT_DOUBLE_EQ(a100.gpu.dense_bf16_flops_per_s, 312e12);
  EXPECT_NE(a100.sources.at("/gpu/dense_bf16_flops_per_s").find("312 TFLOPS"), std::string::npos);
}

TEST(Lm44Bf16Rate, ProfileWithoutTheRateParsesAsZero) {
  const es::HardwareProfile p = es::parse_hardware_profile(lm44_profile(""), "my.json");
  EXPECT_EQ(p.gpu.dense_bf16_flops_per_s, 0.0);
  EXPECT_EQ(p.gpu.dense_bf16_efficiency, 0.0);
  const es::HardwareProfile q =
      es::parse_hardware_profile(lm44_profile(R"(, "dense_bf16_flops_per_s": 2e14, "dense_bf16_efficiency": 0.75)"), "my.json");
  EXPECT_DOUBLE_EQ(q.gpu.dense_bf16_flops_per_s, 2e14);
  EXPECT_DOUBLE_EQ(q.gpu.dense_bf16_efficiency, 0.75);
}

TEST(Lm44Bf16Rate, BadFieldsNameTheFileAndThePointer) {
  EXPECT_EQ(lm44_error(lm44_profile(R"(, "dense_bf16_flops_per_s": 2e14)")),
            "my.json: /gpu/dense_bf16_efficiency: missing (required with /gpu/dense_bf16_flops_per_s)");
  EXPECT_EQ(lm44_error(lm44_profile(R"(, "dense_bf16_efficiency": 0.6)")),
            "my.json: /gpu/dense_bf16_efficiency: given without /gpu/dense_bf16_flops_per_s (the rate it is a fraction of)");
  EXPECT_EQ(lm44_error(lm44_profile(R"(, "dense_bf16_flops_per_s": -1, "dense_bf16_efficiency": 0.6)")),
            "my.json: /gpu/dense_bf16_flops_per_s: must be in (0, 1e+18], got -1");
  EXPECT_EQ(lm44_error(lm44_profile(R"(, "dense_bf16_flops_per_s": 2e14, "dense_bf16_efficiency": 1.5)")),
            "my.json: /gpu/dense_bf16_efficiency: must be in (0, 1], got 1.5");
  EXPECT_EQ(lm44_error(lm44_profile(R"(, "dense_bf16_flops_per_s": "fast", "dense_bf16_efficiency": 0.6)")),
            "my.json: /gpu/dense_bf16_flops_per_s: must be a number, got string");
}

TEST(Lm44Bf16Rate, HalfPrecisionGemmUsesTheTensorCoreRateOrFallsBackToFp32) {
  es::ProgramOp op;
  op.flops = 1'000'000'000'000;  // 1e12 flops
  op.bytes = 1'000'000'000;      // 1 GB: 2 ms at 1e12 B/s x 0.5
  const es::HardwareProfile no_rate = es::parse_hardware_profile(lm44_profile(""), "my.json");
  // fp32: 1e12 / (1e13 x 0.5) = 200 ms, + 1 us launch
  EXPECT_EQ(es::compute_ns(op, no_rate), 200'001'000);
  EXPECT_EQ(es::half_precision_gemm_ns(op, no_rate), 200'001'000);  // no rate: what the engine computes, fp32
  const es::HardwareProfile rate =
      es::parse_hardware_profile(lm44_profile(R"(, "dense_bf16_flops_per_s": 2e14, "dense_bf16_efficiency": 0.5)"), "my.json");
  // 1e12 / (2e14 x 0.5) = 10 ms > the 2 ms of memory
  EXPECT_EQ(es::half_precision_gemm_ns(op, rate), 10'001'000);
  op.bytes = 10'000'000'000;  // memory-bound now: 10 GB / 5e11 B/s = 20 ms
  EXPECT_EQ(es::half_precision_gemm_ns(op, rate), 20'001'000);
}

// The Llama-3-8B preset (bf16, 8 ranks of 16,032 rows, 8,192 tokens, H 4,096) on h100_sxm: rank 0's
// logits op, 2 x 8,192 x 16,032 x 4,096 = 1.0759e12 flops, at 989.4 TFLOP/s x 0.6 = 1.8124 ms (memory:
// 922.2 MB at 1.675 TB/s, 0.551 ms) + 5 us; at the fp32 rate (67 TFLOP/s x 0.5) it was 32.121 ms.
// The body's layers stay fp32: body_forward 6.87e10 flops / 33.5 TFLOP/s + 5 us = 2.056 ms.
TEST(Lm44Bf16Rate, LlamaPresetTimesTheProjectionOnTensorCoresAndTheBodyInFp32) {
  es::LmWorkloadSpec spec = es::load_lm_preset("llama3_8b_embedding");
  ASSERT_EQ(spec.data_type, es::LmDataType::bf16);
  const es::HardwareProfile hw = es::load_hardware_profile("h100_sxm");
  auto dur = [](const es::LmSimulatedStep& s, const std::string& name) -> int64_t {
    for (size_t k = 0; k < s.program.ops.size(); ++k)
      if (s.program.ops[k].name == name) return s.end_ns[k] - s.start_ns[k];
    ADD_FAILURE() << "no op " << name;
    return -1;
  };
  const es::LmSimulatedStep bf16 = es::simulate_lm_step(spec, hw, 8);
  EXPECT_EQ(dur(bf16, "output_projection/logits"), 1'817'360);
  EXPECT_EQ(dur(bf16, "output_projection/backward"), 5'000 + 3'624'720);  // twice the flops, 1.8447 GB
  EXPECT_EQ(dur(bf16, "body_forward"), 2'056'328);
  for (const es::ProgramOp& op : bf16.program.ops)
    EXPECT_EQ(es::lm_op_gemm_in_half_precision(spec, op), op.name.rfind("output_projection/", 0) == 0 && op.flops > 0)
        << op.name;
  spec.data_type = es::LmDataType::fp32;  // the same program in fp32: CUDA cores
  const es::LmSimulatedStep fp32 = es::simulate_lm_step(spec, hw, 8);
  EXPECT_EQ(dur(fp32, "output_projection/logits"), 32'121'099);
  EXPECT_EQ(dur(fp32, "body_forward"), 2'056'328);
  EXPECT_GT(fp32.step_ns, bf16.step_ns + 80'000'000);  // 107.1 ms vs 16.2 ms
}

// tester43 F3: a run whose buffers of 10 MiB or more leave at most 1 MiB of their 2 MiB-rounded
// segment (V 190,000 x H 16 fp32 on 1 rank: the table and its gradient 11.6 MiB in 12 MiB blocks,
// the logits 32 x 190,000 x 4 B = 23.2 MiB in 24 MiB) peaked above the estimate (the sum of the
// requested bytes, 48,658,688 B then, 48,663,168 B with every per-step float vector in the arena,
// 48,663,680 B with the 32 token ids and 32 targets too) and `run` said why. Since lm45 the
// estimate replays the caching allocator: it is the run's peak, 50,352,640 B (50,351,616 B before
// the ids' two 512 B blocks; lm_memory_replay_test.cpp by hand), and no note.
TEST(Lm44PeakNote, RunsEstimateIsTheAllocatorsPeakAndNoNote) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("es_lm44_peak_" + std::to_string(getpid()));
  fs::create_directories(dir);
  es::LmWorkloadSpec s;
  s.name = "lm44_peak";
  s.vocab_size = 190000;
  s.hidden_size = 16;
  s.sequence_length = 32;
  s.micro_batch_size = 1;
  s.world_size = 1;
  s.steps = 1;
  const fs::path file = dir / "lm44_peak.json";
  std::ofstream(file) << es::to_json(s).dump();
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run " + file.string() + " --force-overwrite -o " + (dir / "p.db").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("peak allocated above the estimate"), std::string::npos) << r.out;
  // the rank row: rows, bytes sent and received (none on 1 rank), the estimate and the peak, both 48.0 MiB
  EXPECT_NE(r.out.find("\n0           [0, 190000)            0 B            0 B         48.0 MiB        48.0 MiB\n"),
            std::string::npos)
      << r.out;
  const auto j = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run " + file.string() + " --json --force-overwrite -o " + (dir / "q.db").string(), dir);
  ASSERT_EQ(j.code, 0) << j.err;
  const auto rank = nlohmann::json::parse(j.out).at("ranks").at(0);
  EXPECT_EQ(rank.at("memory_estimate_bytes").get<int64_t>(), 50'352'640);
  EXPECT_EQ(rank.at("peak_allocated_bytes").get<int64_t>(), 50'352'640);
  EXPECT_EQ(rank.at("memory_estimate_reserved_bytes").get<int64_t>(), 50 << 20);
  EXPECT_EQ(rank.at("memory_requested_sum_bytes").get<int64_t>(), 48'663'680);
  fs::remove_all(dir);
}

}  // namespace
