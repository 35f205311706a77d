// The scaling study of an lm_embedding workload (exec/lm_scaling_study.h, `embedscope scaling`):
// its points are `plan --simulate P --devices N --sharding T`'s step, its bytes per token the
// hand-counted collectives, a type that does not fit is refused with the reason, and the
// workbench's reader of DLRM studies says it cannot draw an LM one.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/lm_scaling_study.h"
#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "support/cli_run.h"

namespace {

namespace es = embedscope::engine;
namespace ts = embedscope::test_support;
using nlohmann::json;

// The tester's vp4 workload (V 1000, H 16, S 32, B 2, 1 body layer, tied, fp32, SGD, 4 ranks),
// Zipf ids in place of their token file: no byte below depends on the ids.
json lm59_vp4() {
  return json::parse(R"({"model": "lm_embedding", "name": "vp4", "vocab_size": 1000, "hidden_size": 16,
    "sequence_length": 32, "micro_batch_size": 2, "data_type": "fp32", "tie_word_embeddings": true,
    "body_layers": 1, "token_ids": {"distribution": "zipf", "alpha": 1.0},
    "sharding": {"type": "vocab_parallel"}, "devices": {"count": 4},
    "optimizer": {"type": "sgd", "learning_rate": 2.0}, "steps": 3, "seed": 0})");
}

const es::LmScalingPoint& lm59_point(const std::vector<es::LmScalingPoint>& points, es::LmSharding t, int gpus) {
  const auto it = std::find_if(points.begin(), points.end(),
                               [&](const es::LmScalingPoint& p) { return p.sharding == t && p.gpus == gpus; });
  if (it == points.end()) throw std::runtime_error("no such point");
  return *it;
}

TEST(Lm59Scaling, BytesPerTokenAreTheHandCountedCollectives) {
  const es::LmWorkloadSpec spec = es::parse_lm_workload(lm59_vp4(), "vp4");
  es::LmScalingStudyOptions o;
  o.hardware = "h100_sxm";
  o.gpus = {4, 1};
  o.shardings = {es::LmSharding::vocab_parallel, es::LmSharding::data_parallel};
  const auto points = es::run_lm_scaling_study(spec, o);
  ASSERT_EQ(points.size(), 4u);
  for (const auto& p : points) ASSERT_EQ(p.error, "") << es::to_string(p.sharding) << " " << p.gpus;
  // vocab_parallel, 4 ranks: embedding/all_reduce and output_projection/grad_all_reduce of 64 x 16
  // x 4 = 4,096 B (1.5 x 4,096 = 6,144 B a rank), three cross-entropy all-reduces of 64 floats
  // (1.5 x 256 = 384 B): 4 x (2 x 6,144 + 3 x 384) = 53,760 B a step over 64 tokens = 840
  const auto& vp = lm59_point(points, es::LmSharding::vocab_parallel, 4);
  EXPECT_EQ(vp.tokens_per_step, 64);
  EXPECT_EQ(vp.wire_bytes_per_step, 53760);
  EXPECT_DOUBLE_EQ(vp.wire_bytes_per_token, 840.0);
  // data_parallel, 4 ranks: the table's gradient 64,000 B, the body's 1,088 B and the loss's 4 B
  // all-reduced: 4 x 1.5 x 65,092 = 390,552 B over 4 x 64 tokens = 1,525.59375
  const auto& dp = lm59_point(points, es::LmSharding::data_parallel, 4);
  EXPECT_EQ(dp.tokens_per_step, 256);
  EXPECT_EQ(dp.wire_bytes_per_step, 390552);
  EXPECT_DOUBLE_EQ(dp.wire_bytes_per_token, 390552.0 / 256);
  // one GPU sends nothing; the memory per GPU: 1 rank 396.5 KiB, vp on 4 ranks 116.0 KiB (the tester's plan
  // gave 394.0 and 113.5 KiB before the cross-entropy's three vectors of 64 floats were arena blocks,
  // 395.5 and 115.0 KiB before the 64 token ids and 64 targets, 512 B each, were)
  EXPECT_EQ(lm59_point(points, es::LmSharding::vocab_parallel, 1).wire_bytes_per_step, 0);
  EXPECT_EQ(lm59_point(points, es::LmSharding::data_parallel, 1).memory_bytes_per_gpu, 406016);  // 396.5 KiB
  EXPECT_EQ(vp.memory_bytes_per_gpu, 118784);                                                     // 116.0 KiB
  // type-major, sizes ascending; the efficiency is tokens/s per GPU over the best 1-GPU point's
  EXPECT_EQ(points[0].gpus, 1);
  EXPECT_EQ(points[1].gpus, 4);
  const double base = std::max(points[0].tokens_per_s, points[2].tokens_per_s);
  EXPECT_DOUBLE_EQ(dp.scaling_efficiency, dp.tokens_per_s / 4 / base);
  EXPECT_DOUBLE_EQ(vp.tokens_per_s, 64 * 1e9 / static_cast<double>(vp.step_time_ns));
}

TEST(Lm59Scaling, APointIsPlanSimulateAtThatSize) {
  const auto dir = ts::fresh_scratch("lm59_scaling_plan");
  std::ofstream((dir / "vp4.json").string()) << lm59_vp4().dump();
  const std::string w = (dir / "vp4.json").string();
  const auto study = ts::run_cli(EMBEDSCOPE_CLI, "scaling " + w + " --simulate h100_sxm --gpus 2,4 --json", dir);
  ASSERT_EQ(study.code, 0) << study.err;
  const json s = json::parse(study.out);
  EXPECT_EQ(s.at("model"), "lm_embedding");
  ASSERT_EQ(s.at("points").size(), 6u);  // vocab_parallel, data_parallel, row_wise x 2 sizes
  for (const auto& [type, gpus, k] : {std::tuple{"vocab_parallel", 2, 0}, std::tuple{"data_parallel", 4, 3}}) {
    const json& p = s.at("points").at(k);
    ASSERT_EQ(p.at("sharding"), type);
    ASSERT_EQ(p.at("gpus"), gpus);
    const auto plan = ts::run_cli(EMBEDSCOPE_CLI,
                                  "plan " + w + " --simulate h100_sxm --json --devices " + std::to_string(gpus) +
                                      " --sharding " + type,
                                  dir);
    ASSERT_EQ(plan.code, 0) << plan.err;
    const json j = json::parse(plan.out);
    const json& sim = j.at("simulated_step");
    EXPECT_EQ(p.at("step_time_ns").get<int64_t>(), sim.at("step_ns").get<int64_t>()) << type;
    EXPECT_EQ(p.at("comm_share").get<double>(), sim.at("comm_share").get<double>()) << type;
    EXPECT_EQ(p.at("embedding_comm_share").get<double>(), sim.at("embedding_comm_share").get<double>()) << type;
    EXPECT_EQ(p.at("wire_bytes_per_token").get<double>(), sim.at("bytes_on_the_wire_per_token").get<double>()) << type;
    int64_t peak = 0;
    for (const json& r : j.at("ranks")) peak = std::max(peak, r.at("peak_allocated_bytes").get<int64_t>());
    EXPECT_EQ(p.at("memory_bytes_per_gpu").get<int64_t>(), peak) << type;
  }
  EXPECT_DOUBLE_EQ(s.at("points").at(1).at("wire_bytes_per_token").get<double>(), 840.0);  // vp at 4
  EXPECT_DOUBLE_EQ(s.at("points").at(3).at("wire_bytes_per_token").get<double>(), 1525.59375);  // dp at 4
  // the table: --sequence-parallel applies to vocab_parallel (942 B/token on 4: the tester's figure)
  const auto sp = ts::run_cli(EMBEDSCOPE_CLI,
                              "scaling " + w + " --simulate h100_sxm --gpus 4 --shardings vocab_parallel,data_parallel "
                                               "--sequence-parallel",
                              dir);
  ASSERT_EQ(sp.code, 0) << sp.err;
  EXPECT_NE(sp.out.find("vocab_parallel+sp     4     1"), std::string::npos) << sp.out;
  EXPECT_NE(sp.out.find("942.0"), std::string::npos) << sp.out;
  EXPECT_NE(sp.out.find("data_parallel         4     1"), std::string::npos) << sp.out;
  EXPECT_NE(sp.out.find("1525.6"), std::string::npos) << sp.out;
  // a DLRM type for an LM workload is named with the LM ones
  const auto bad = ts::run_cli(EMBEDSCOPE_CLI, "scaling " + w + " --simulate h100_sxm --gpus 4 --shardings table_wise", dir);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--shardings: \"table_wise\" is not a sharding type of an lm_embedding workload; valid: "
                         "vocab_parallel, data_parallel, row_wise"),
            std::string::npos)
      << bad.err;
}

TEST(Lm59Scaling, ATypeThatDoesNotFitIsRefusedWithItsTerms) {
  // V 2,000,000 x H 8,192 fp32: the table alone 65.5 GB, its gradient as much: data_parallel
  // holds both on every GPU, past an H100's 80 GB; vocab_parallel on 8 holds 1/8 of them
  json j = lm59_vp4();
  j["vocab_size"] = 2000000;
  j["hidden_size"] = 8192;
  j["sequence_length"] = 16;
  j["micro_batch_size"] = 1;
  const es::LmWorkloadSpec spec = es::parse_lm_workload(j, "big");
  es::LmScalingStudyOptions o;
  o.hardware = "h100_sxm";
  o.gpus = {8};
  o.shardings = {es::LmSharding::data_parallel, es::LmSharding::vocab_parallel};
  const auto points = es::run_lm_scaling_study(spec, o);
  ASSERT_EQ(points.size(), 2u);
  const std::string& why = points[0].error;
  const es::HardwareProfile hw = es::load_hardware_profile("h100_sxm");
  EXPECT_EQ(why.rfind("does not fit: rank 0 needs ", 0), 0u) << why;
  // the largest terms first: table and gradients 2,000,000 x 8,192 x 4 = 61.0 GiB each, the body
  // (8,192^2 + 8,192) x 4 x 2 = 512.1 MiB, the logits 16 x 2,000,000 x 4 = 122.1 MiB
  EXPECT_NE(why.find("; planner/lm_memory_estimate.h: table 61.0 GiB, gradients 61.0 GiB, body 512.1 MiB, logits 122.1 "
                     "MiB, activations"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("but " + hw.gpu.name + " has"), std::string::npos) << why;
  EXPECT_NE(why.find("data_parallel keeps the whole table and the full-vocabulary logits on every GPU, so more GPUs do "
                     "not help"),
            std::string::npos)
      << why;
  EXPECT_EQ(points[0].step_time_ns, 0);
  EXPECT_EQ(points[1].error, "");
  EXPECT_GT(points[1].step_time_ns, 0);
  EXPECT_EQ(es::lm_gpu_memory_refusal(spec, 0, "x"), "");  // no device size: never refused
}

TEST(Lm59Scaling, TheDlrmStudyReaderNamesTheLmReader) {
  es::LmScalingStudy st{"vp4", "h100_sxm", 8, 2, 32, 3, {}};
  const json j = es::to_json(st);
  EXPECT_EQ(j.begin().key(), "batch_size_per_gpu");  // recognised as a study file (workload/json_kind.h)
  try {
    es::scaling_study_from_json(j, "lm.json");
    FAIL() << "read an lm_embedding study as a DLRM one";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("lm.json: /model: an lm_embedding scaling study", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a DLRM one: read it with lm_scaling_study_from_json"), std::string::npos);
  }
}

}  // namespace
