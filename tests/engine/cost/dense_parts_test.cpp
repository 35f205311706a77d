// The dense op in parts (issue 15, dense44): DenseModel::work's counts of hand-made models
// against hand-computed sums; compute_ns with the GEMM, interaction and element-wise rates by
// hand; the profile's two optional rates (both or neither, named by their JSON pointer); the
// dense microbenchmark's output (its shape and identities, never its timing); calibrate on
// sessions timed with known rates gives them back.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/dense_microbench.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec_error.h"
#include "engine/cost/cost_sessions.h"

namespace es = embedscope::engine;

namespace {

const std::string kPartsRoundNumbers = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";

nlohmann::json parts_round_profile() {
  std::ifstream f(kPartsRoundNumbers);
  return nlohmann::json::parse(f);
}

// 4 dense features, bottom [8], one 8-wide feature, top [1]; DCN: 1 layer of rank 2
es::WorkloadSpec parts_small_spec(es::Interaction interaction) {
  es::WorkloadSpec s;
  s.dense = es::DenseSpec{4, {8}, interaction, 1, 2, {1}};
  return s;
}

}  // namespace

TEST(DenseParts, WorkOfASmallDotModelByHand) {
  const es::WorkloadSpec s = parts_small_spec(es::Interaction::dot);
  const es::DenseModel m(s, {8}, /*layout_only=*/true);
  const es::DenseWork w = m.work(2);  // B 2, F 1, d0 8, W 16, Wout 8 + 1 = 9, P 50
  EXPECT_EQ(m.num_params(), 50);
  // GEMMs (2,8,4), (2,1,9), (1,9,2), (2,9,1), (8,4,2): 128 + 36 + 36 + 36 + 128
  EXPECT_EQ(w.gemm_flops, 364);
  // dot: forward B d0 x 1 pair = 16; backward B x 2 entities x d0 x F 1 = 32
  EXPECT_EQ(w.interaction_ops, 48);
  // P 50 + 2B 4 + B x 4 features 8 = 62; bottom 4 -> 8 (ReLU, no dx): 2 x 16 + (8 + 16) + 16 = 72;
  // top 9 -> 1 (no ReLU, dx 18): 4 + 18 + 1 + 2 = 25; x0 2 x 32, r 18, dx0 32, split 32 + dz 16,
  // 3B 6: 168; dot: r written 18, dx0 written 32: 50. 62 + 72 + 25 + 168 + 50 = 377
  EXPECT_EQ(w.elementwise_ops, 377);
}

TEST(DenseParts, WorkOfASmallDcnModelByHand) {
  const es::WorkloadSpec s = parts_small_spec(es::Interaction::dcn);
  const es::DenseModel m(s, {8}, /*layout_only=*/true);
  const es::DenseWork w = m.work(2);  // W = Wout = 16, rank 2, 1 layer, P 137
  EXPECT_EQ(m.num_params(), 137);
  EXPECT_EQ(w.gemm_flops, 1216);
  EXPECT_EQ(w.interaction_ops, 0);
  // P 137 + 4 + 8 = 149; bottom 72; top 16 -> 1 (dx 32): 4 + 32 + 1 + 2 = 39; x0 64, r 32,
  // dx0 32, split 32 + 16, 6: 182; DCN 3 B W = 96, one layer 8 B W + 2 B r = 256 + 8 = 264
  EXPECT_EQ(w.elementwise_ops, 149 + 72 + 39 + 182 + 96 + 264);
  // no dense part: nothing
  EXPECT_TRUE(es::DenseModel(es::WorkloadSpec{}, {8}, true).work(2).empty());
}

TEST(DenseParts, TheProgramsDenseOpCarriesItsWork) {
  es::WorkloadSpec s = es::load_preset("criteo_kaggle");
  s.devices.count = 2;
  s.devices.memory_bytes = int64_t{8} << 30;
  const es::StepProgram p = es::build_step_program(s, es::plan_sharding(s), 0, s.warmup_steps);
  int dense_ops = 0;
  for (const auto& op : p.ops)
    if (op.name == "dense_forward_backward") {
      ++dense_ops;
      // B 512, F 26, d0 16: 512 x 16 x 351 + 512 x 27 x 16 x 26 = 2,875,392 + 5,750,784
      EXPECT_EQ(op.dense_work.interaction_ops, 8626176);
      EXPECT_EQ(op.dense_work, es::DenseModel(s, std::vector<int64_t>(26, 16), true).work(512));
      EXPECT_LT(op.dense_work.gemm_flops, op.flops);
    } else {
      EXPECT_TRUE(op.dense_work.empty()) << op.name;
    }
  EXPECT_EQ(dense_ops, 1);
}

TEST(DenseParts, ComputeNsTimesEachPartAtItsRate) {
  nlohmann::json j = parts_round_profile();  // dense 1e13 flop/s at efficiency 0.5, launch 1 us
  const es::HardwareProfile one_rate = es::parse_hardware_profile(j.dump(), "round");
  j["gpu"]["dense_interaction_ops_per_s"] = 1e9;
  j["gpu"]["dense_elementwise_ops_per_s"] = 2e9;
  const es::HardwareProfile parts = es::parse_hardware_profile(j.dump(), "round+parts");
  es::ProgramOp op;
  op.category = embedscope::sessions::OpCategory::dense;
  op.flops = 6'000'000'000;
  op.dense_work = {5'000'000'000, 1'000'000, 4'000'000};
  // 5e9 / 5e12 = 1 ms + 1e6 / 1e9 = 1 ms + 4e6 / 2e9 = 2 ms, + 1 us launch
  EXPECT_EQ(es::compute_ns(op, parts), 1'000 + 4'000'000);
  // without the rates: all 6e9 flops at 5e12: 1.2 ms
  EXPECT_EQ(es::compute_ns(op, one_rate), 1'000 + 1'200'000);
  // an op without dense work keeps op.flops at the GEMM rate
  op.dense_work = {};
  EXPECT_EQ(es::compute_ns(op, parts), 1'000 + 1'200'000);
}

TEST(DenseParts, ProfileRatesAreBothOrNeitherAndNamedByPointer) {
  auto error_of = [](const nlohmann::json& gpu_extra) -> std::string {
    nlohmann::json j = parts_round_profile();
    for (const auto& [k, v] : gpu_extra.items()) j["gpu"][k] = v;
    try {
      es::parse_hardware_profile(j.dump(), "p.json");
    } catch (const es::SpecError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(error_of({{"dense_interaction_ops_per_s", 1e9}}),
            "p.json: /gpu/dense_elementwise_ops_per_s: missing (given with /gpu/dense_interaction_ops_per_s: the dense "
            "op's work outside its GEMMs needs both rates)");
  EXPECT_EQ(error_of({{"dense_elementwise_ops_per_s", 1e9}}),
            "p.json: /gpu/dense_interaction_ops_per_s: missing (given with /gpu/dense_elementwise_ops_per_s: the dense "
            "op's work outside its GEMMs needs both rates)");
  EXPECT_EQ(error_of({{"dense_interaction_ops_per_s", -1}, {"dense_elementwise_ops_per_s", 1e9}}),
            "p.json: /gpu/dense_interaction_ops_per_s: must be in (0, 1e+18], got -1");
  EXPECT_EQ(error_of({{"dense_interaction_ops_per_s", 1e9}, {"dense_elementwise_ops_per_s", "fast"}}),
            "p.json: /gpu/dense_elementwise_ops_per_s: must be a number, got string");
  // absent: 0 (one rate, as before); given: kept and written back
  EXPECT_EQ(es::parse_hardware_profile(parts_round_profile().dump(), "r").gpu.dense_interaction_ops_per_s, 0.0);
  nlohmann::json j = parts_round_profile();
  j["gpu"]["dense_interaction_ops_per_s"] = 3e9;
  j["gpu"]["dense_elementwise_ops_per_s"] = 5e9;
  const es::HardwareProfile back = es::parse_hardware_profile(es::to_json(es::parse_hardware_profile(j.dump(), "a")).dump(), "b");
  EXPECT_EQ(back.gpu.dense_interaction_ops_per_s, 3e9);
  EXPECT_EQ(back.gpu.dense_elementwise_ops_per_s, 5e9);
  // the built-in GPU profiles have neither
  for (const auto& name : es::hardware_profile_names())
    EXPECT_EQ(es::load_hardware_profile(name).gpu.dense_elementwise_ops_per_s, 0.0) << name;
}

TEST(DenseParts, MicrobenchReportsEachPartOfTheDenseOp) {
  // a cat model with wide features and thin MLPs: its time is mostly element-wise copies, so the
  // residual Te is the bulk of T (the test checks the output's shape, not the timings)
  es::WorkloadSpec s;
  s.name = "wide_cat";
  s.batch_size = 256;
  s.dense = es::DenseSpec{2, {4}, es::Interaction::cat, 0, 0, {1}};
  for (int f = 0; f < 4; ++f) {
    es::TableSpec t;
    t.name = "t" + std::to_string(f);
    t.num_embeddings = 10;
    t.embedding_dim = 64;
    t.feature_names = {"f" + std::to_string(f)};
    s.tables.push_back(t);
    es::FeatureSpec fs;
    fs.name = "f" + std::to_string(f);
    s.features.push_back(fs);
  }
  const es::DenseMicrobench b = es::measure_dense_rates(s, 1);
  EXPECT_EQ(b.model, "wide_cat dense part, B 256");
  EXPECT_EQ(b.batch, 256);
  EXPECT_EQ(b.repetitions, 1);
  EXPECT_EQ(b.work, es::DenseModel(s, {64, 64, 64, 64}, true).work(256));
  // not a dot model: the dot kernels timed at (B 256, F 4, d0 16): 256 x 16 x 10 + 256 x 5 x 16 x 4
  EXPECT_EQ(b.interaction_ops_timed, 40960 + 81920);
  EXPECT_GT(b.gemm_s, 0);
  EXPECT_GT(b.interaction_s, 0);
  EXPECT_GT(b.elementwise_s, 0);
  EXPECT_NEAR(b.elementwise_s, b.forward_backward_s - b.gemm_s, 1e-12);  // cat: no interaction in T
  EXPECT_DOUBLE_EQ(b.gemm_flops_per_s, static_cast<double>(b.work.gemm_flops) / b.gemm_s);
  EXPECT_DOUBLE_EQ(b.interaction_ops_per_s, static_cast<double>(b.interaction_ops_timed) / b.interaction_s);
  EXPECT_DOUBLE_EQ(b.elementwise_ops_per_s, static_cast<double>(b.work.elementwise_ops) / b.elementwise_s);
  EXPECT_GT(b.wall_s, 0);
  es::WorkloadSpec none = s;
  none.dense.reset();
  try {
    es::measure_dense_rates(none, 1);
    ADD_FAILURE() << "a workload without a dense part was timed";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()),
              "dense microbenchmark: workload wide_cat has no dense part (\"dense\": null): nothing to time");
  }
}

TEST(DenseParts, CalibrateWeighsTheDenseOpsPartsByTheBench) {
  // round numbers (GEMMs at 1e13 x 0.5) with slow non-GEMM rates, so the parts are a large,
  // different share of the dense op; the bench reports the same ratios
  nlohmann::json j = parts_round_profile();
  j["gpu"]["dense_interaction_ops_per_s"] = 5e10;
  j["gpu"]["dense_elementwise_ops_per_s"] = 1e11;
  const auto dir = embedscope::test_support::cost_scratch_dir("dense_parts");
  const std::string profile = (dir / "parts.json").string();
  std::ofstream(profile) << j.dump();
  const std::string a = embedscope::test_support::criteo_as_measured(profile, (dir / "tw.db").string(), 2,
                                                                     es::ShardingType::table_wise, 3, "");
  const std::string b = embedscope::test_support::criteo_as_measured(profile, (dir / "rw.db").string(), 2,
                                                                     es::ShardingType::row_wise, 3, "");
  const es::DenseBench bench = [](const es::WorkloadSpec& spec) {
    es::DenseMicrobench m;
    m.model = spec.name;
    m.gemm_flops_per_s = 5e12 / 1000;  // only the ratios count
    m.interaction_ops_per_s = 5e10 / 1000;
    m.elementwise_ops_per_s = 1e11 / 1000;
    return m;
  };
  const es::Calibration cal = es::calibrate({a, b}, "parts", bench);
  EXPECT_TRUE(cal.dense_measured);
  EXPECT_EQ(cal.dense_bench.model, "criteo_kaggle");
  std::map<std::string, double> rate;
  for (const auto& f : cal.fits) rate[f.what] = f.rate;
  EXPECT_NEAR(rate["dense"] / 5e12, 1.0, 0.02);
  EXPECT_NEAR(cal.step_scale, 1.0, 0.02);
  EXPECT_NEAR(cal.profile.gpu.dense_interaction_ops_per_s / 5e10, 1.0, 0.02);
  EXPECT_NEAR(cal.profile.gpu.dense_elementwise_ops_per_s / 1e11, 1.0, 0.02);
  EXPECT_EQ(cal.profile.sources.count("/gpu/dense_elementwise_ops_per_s"), 1u);
  // a bench that cannot time the parts: one rate, and why
  const es::Calibration failed = es::calibrate({a, b}, "failed", [](const es::WorkloadSpec&) -> es::DenseMicrobench {
    throw es::SpecError("no element-wise time");
  });
  EXPECT_FALSE(failed.dense_measured);
  EXPECT_EQ(failed.dense_bench_error, "no element-wise time");
  EXPECT_EQ(failed.profile.gpu.dense_interaction_ops_per_s, 0.0);
  // without a bench: one rate, no non-GEMM rates in the profile
  const es::Calibration one = es::calibrate({a, b}, "one");
  EXPECT_FALSE(one.dense_measured);
  EXPECT_EQ(one.profile.gpu.dense_elementwise_ops_per_s, 0.0);
  EXPECT_EQ(one.profile.sources.count("/gpu/dense_elementwise_ops_per_s"), 0u);
}
