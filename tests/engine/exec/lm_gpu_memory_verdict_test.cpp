// An LLM engineer's sizing of a Llama-3-70B-like vocab-parallel embedding (V 128,256, H 8,192,
// S 4,096, B 1, bf16, untied, Adam, 1 body layer, vocab_parallel + sequence_parallel, 8 ranks)
// against hand figures: `plan --simulate`, `run --simulate` and `scaling` give one GPU-memory
// verdict (planner/lm_memory_estimate.h lm_gpu_memory_verdict, on the replay's peak reserved);
// the stand-in body's share of the bytes is said apart; the vocabulary is padded by the
// tensor-parallel size only (Megatron's _vocab_size_with_padding); row_wise's refusal advises
// fewer GPUs; each type's own scaling efficiency; scaling's flag refusal names its own flags; one
// JSON name per figure across run / plan / scaling.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/lm_scaling_study.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "support/cli_run.h"

namespace {

namespace es = embedscope::engine;
namespace ts = embedscope::test_support;
using nlohmann::json;

json l70() {
  return json::parse(R"({"model": "lm_embedding", "name": "llama70b_emb", "vocab_size": 128256, "hidden_size": 8192,
    "sequence_length": 4096, "micro_batch_size": 1, "data_type": "bf16", "tie_word_embeddings": false,
    "padding_id": -1, "body_layers": 1, "token_ids": {"distribution": "zipf", "alpha": 1.0},
    "sharding": {"type": "vocab_parallel", "sequence_parallel": true, "make_vocab_size_divisible_by": 1},
    "devices": {"count": 8}, "optimizer": {"type": "adam", "learning_rate": 0.001}, "steps": 3, "seed": 0})");
}

std::string write(const std::filesystem::path& dir, const std::string& name, const json& j) {
  const std::string path = (dir / name).string();
  std::ofstream(path) << j.dump();
  return path;
}

// data_parallel on 8 H100s with micro batch 20: the logits alone B S V 4 = 20 x 4,096 x 128,256 x
// 4 = 42.0 GB = 39.1 GiB; with the table and projection 3.9 GiB each, gradients 7.8 GiB, Adam
// 16.2 GiB it needs 83.4 GiB allocated > the H100's 79.6 GiB. plan says so (exit 0), run
// --simulate refuses it (exit 2, no session), scaling refuses the point, all with one text.
TEST(LmGpuMemoryVerdict, PlanRunAndScalingGiveOneVerdictOnTheProfilesGpu) {
  const auto dir = ts::fresh_scratch("lm_gpu_verdict");
  json j = l70();
  j["micro_batch_size"] = 20;
  const std::string w = write(dir, "l70mb20.json", j);
  const std::string point = " --simulate h100_sxm --sharding data_parallel --devices 8";
  const auto plan = ts::run_cli(EMBEDSCOPE_CLI, "plan " + w + point + " --json", dir);
  ASSERT_EQ(plan.code, 0) << plan.err;
  const json pj = json::parse(plan.out);
  EXPECT_EQ(pj.at("fits"), false);
  const std::string refusal = pj.at("refusal").get<std::string>();
  EXPECT_EQ(refusal.rfind("does not fit: rank 0 needs ", 0), 0u) << refusal;
  EXPECT_NE(refusal.find("logits 39.1 GiB"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("but NVIDIA H100 80GB HBM3 has 79.6 GiB"), std::string::npos) << refusal;
  EXPECT_EQ(pj.at("device_memory_bytes"), es::load_hardware_profile("h100_sxm").gpu.memory_bytes);
  EXPECT_GE(pj.at("memory_reserved_bytes_per_gpu").get<int64_t>(), pj.at("memory_bytes_per_gpu").get<int64_t>());
  EXPECT_GT(pj.at("memory_bytes_per_gpu").get<double>(), 83.3 * (1 << 30));  // 83.4 GiB
  const auto text = ts::run_cli(EMBEDSCOPE_CLI, "plan " + w + point, dir);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("memory       DOES NOT FIT on h100_sxm: rank 0 needs "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("`run --simulate` and `scaling` refuse it"), std::string::npos) << text.out;

  const std::string db = (dir / "dp20.db").string();
  const auto run = ts::run_cli(EMBEDSCOPE_CLI, "run " + w + point + " --steps 1 -o " + db, dir);
  EXPECT_EQ(run.code, 2) << run.err;  // bad input, as a DLRM run whose plan does not fit its devices
  EXPECT_NE(run.err.find(refusal), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(db));

  const auto study = ts::run_cli(EMBEDSCOPE_CLI, "scaling " + w + " --simulate h100_sxm --gpus 8 --shardings data_parallel --json", dir);
  ASSERT_EQ(study.code, 0) << study.err;
  EXPECT_EQ(json::parse(study.out).at("points").at(0).at("error").get<std::string>(), refusal);
}

TEST(LmGpuMemoryVerdict, PlanSaysAPointThatFits) {
  const auto dir = ts::fresh_scratch("lm_gpu_verdict_fits");
  const std::string w = write(dir, "l70.json", l70());
  const auto plan = ts::run_cli(EMBEDSCOPE_CLI, "plan " + w + " --simulate h100_sxm --json", dir);
  ASSERT_EQ(plan.code, 0) << plan.err;
  const json pj = json::parse(plan.out);
  EXPECT_EQ(pj.at("fits"), true);
  EXPECT_FALSE(pj.contains("refusal"));
  // rows/rank 16,032: table = out proj = 16,032 x 8,192 x 4 = 501.0 MiB, total 5.8 GiB
  EXPECT_EQ(pj.at("ranks").at(0).at("table_bytes"), 525336576);
  const auto text = ts::run_cli(EMBEDSCOPE_CLI, "plan " + w + " --simulate h100_sxm", dir);
  EXPECT_NE(text.out.find("memory       fits on h100_sxm: rank "), std::string::npos) << text.out;
}

// The tester's S 75,520 data_parallel point: the replay's peak allocated 85,449,393,152 B (with the
// cross-entropy's three vectors of 75,520 floats, 906,240 B, and the 75,520 token ids and targets,
// 2 x 604,160 B, in the arena) is 71.4 MB under the H100's 85,520,809,984 B, its peak reserved
// 85,817,556,992 B (the ids' blocks, under 1 MiB, take one more 2 MiB small segment)
// 296,747,008 B (283.0 MiB) over it: refused on reserved, by plan and scaling alike.
TEST(LmGpuMemoryVerdict, APointIsJudgedOnItsPeakReserved) {
  json j = l70();
  j["sequence_length"] = 75520;
  j["sharding"]["type"] = "data_parallel";
  j["sharding"]["sequence_parallel"] = false;
  const es::LmWorkloadSpec spec = es::parse_lm_workload(j, "l70s75520");
  const std::vector<es::LmMemoryEstimate> est = es::estimate_lm_memory(spec);
  const int64_t device = es::load_hardware_profile("h100_sxm").gpu.memory_bytes;
  ASSERT_EQ(device, 85520809984);
  EXPECT_EQ(est.at(0).peak_allocated_bytes, 85449393152);
  EXPECT_EQ(est.at(0).peak_reserved_bytes, 85817556992);
  const es::LmGpuMemoryVerdict v =
      es::lm_gpu_memory_verdict(est, device, es::load_hardware_profile("h100_sxm").gpu.name, spec.sharding);
  EXPECT_FALSE(v.fits());
  EXPECT_EQ(v.peak_reserved_bytes, 85817556992);
  // allocated and the device both read 79.6 GiB: said to the byte
  EXPECT_NE(v.refusal.find("allocated 79.6 GiB (85,449,393,152 B)"), std::string::npos) << v.refusal;
  EXPECT_NE(v.refusal.find("has 79.6 GiB (85,520,809,984 B), 283.0 MiB short"), std::string::npos) << v.refusal;

  es::LmScalingStudyOptions o;
  o.hardware = "h100_sxm";
  o.gpus = {8};
  o.shardings = {es::LmSharding::data_parallel};
  const auto points = es::run_lm_scaling_study(spec, o);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].error, v.refusal);
  EXPECT_EQ(points[0].memory_bytes_per_gpu, 85449393152);
  EXPECT_EQ(points[0].memory_reserved_bytes_per_gpu, 85817556992);
}

// row_wise gathers every GPU's hidden states: [p T x H] grows with p, so its refusal advises fewer
// GPUs. V 1,000, H 64, S 64, B 1, fp32, tied, SGD, no body: at 8 ranks the two gathered buffers
// 2 x 8 x 64 x 64 x 4 = 262,144 B; at 16, 524,288 B.
TEST(LmGpuMemoryVerdict, RowWiseRefusalAdvisesFewerGpus) {
  json j = json::parse(R"({"model": "lm_embedding", "name": "rw", "vocab_size": 1000, "hidden_size": 64,
    "sequence_length": 64, "micro_batch_size": 1, "data_type": "fp32", "tie_word_embeddings": true,
    "body_layers": 0, "sharding": {"type": "row_wise"}, "devices": {"count": 8},
    "optimizer": {"type": "sgd", "learning_rate": 0.1}, "steps": 1, "seed": 0})");
  es::LmWorkloadSpec spec = es::parse_lm_workload(j, "rw");
  const auto est8 = es::estimate_lm_memory(spec);
  spec.world_size = 16;
  const auto est16 = es::estimate_lm_memory(spec);
  EXPECT_GT(est16.at(0).activation_bytes, est8.at(0).activation_bytes);  // grows with p
  const std::string why = es::lm_gpu_memory_refusal(est16, 1024, "tiny", es::LmSharding::row_wise);
  EXPECT_NE(why.find("its memory grows with the GPUs: use fewer GPUs, vocab_parallel"), std::string::npos) << why;
  EXPECT_EQ(why.find("more GPUs split"), std::string::npos) << why;
}

// Megatron pads to make_vocab_size_divisible_by x the tensor-parallel size: 128,256 = 1,002 x 128
// is not padded by data_parallel or row_wise at any width; vocab_parallel on 8 pads to 1,024 x 126
// = 129,024 (16,128 rows a rank).
TEST(LmGpuMemoryVerdict, VocabularyIsPaddedByTheTensorParallelSizeOnly) {
  json j = l70();
  j["sharding"]["make_vocab_size_divisible_by"] = 128;
  j["sharding"]["sequence_parallel"] = false;
  es::LmWorkloadSpec spec = es::parse_lm_workload(j, "l70p");
  EXPECT_EQ(spec.padded_vocab_size(), 129024);
  spec.world_size = 1024;
  spec.sharding = es::LmSharding::data_parallel;
  EXPECT_EQ(spec.tensor_parallel_size(), 1);
  EXPECT_EQ(spec.padded_vocab_size(), 128256);  // was 131,072 (128 x 1,024 ranks)
  spec.sharding = es::LmSharding::row_wise;
  EXPECT_EQ(spec.padded_vocab_size(), 128256);
  spec.vocab_size = 128257;
  EXPECT_EQ(spec.padded_vocab_size(), 128384);  // the next multiple of 128
}

// vp + SP at 8 ranks: 4 bf16 activation collectives 4 x 7 x 8,192 x 2 = 458,752 B/token + the
// cross-entropy's 168 = 458,920 (= the no-SP figure), plus the stand-in body's fp32 gradient
// all-reduce 2 x 7 x (8,192^2 + 8,192) x 4 / 4,096 = 917,616 B/token: 1,376,536 in all.
TEST(LmGpuMemoryVerdict, TheStandInBodysShareIsSaidApart) {
  const auto dir = ts::fresh_scratch("lm_body_share");
  const std::string w = write(dir, "l70.json", l70());
  const auto sp = ts::run_cli(EMBEDSCOPE_CLI, "plan " + w + " --simulate h100_sxm --json", dir);
  ASSERT_EQ(sp.code, 0) << sp.err;
  const json s = json::parse(sp.out).at("simulated_step");
  EXPECT_DOUBLE_EQ(s.at("wire_bytes_per_token").get<double>(), 1376536.0);
  EXPECT_DOUBLE_EQ(s.at("body_wire_bytes_per_token").get<double>(), 917616.0);
  EXPECT_GT(s.at("body_compute_ns").get<int64_t>(), 0);
  EXPECT_GT(s.at("body_comm_ns").get<int64_t>(), 0);
  const auto nosp = ts::run_cli(EMBEDSCOPE_CLI, "plan " + w + " --simulate h100_sxm --no-sequence-parallel --json", dir);
  const json n = json::parse(nosp.out).at("simulated_step");
  EXPECT_DOUBLE_EQ(n.at("wire_bytes_per_token").get<double>(), 458920.0);
  EXPECT_DOUBLE_EQ(n.at("body_wire_bytes_per_token").get<double>(), 0.0);
  const auto text = ts::run_cli(EMBEDSCOPE_CLI, "plan " + w + " --simulate h100_sxm", dir);
  EXPECT_NE(text.out.find("of which the stand-in body (1 replicated fp32 dense layer, body_layers;"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("its gradient all-reduce 917616 B/token"), std::string::npos) << text.out;

  const es::LmWorkloadSpec spec = es::parse_lm_workload(l70(), "l70");
  es::LmScalingStudyOptions o;
  o.hardware = "h100_sxm";
  o.gpus = {8};
  o.shardings = {es::LmSharding::vocab_parallel};
  o.sequence_parallel = true;
  const auto points = es::run_lm_scaling_study(spec, o);
  ASSERT_EQ(points.at(0).error, "");
  EXPECT_DOUBLE_EQ(points[0].wire_bytes_per_token, 1376536.0);
  EXPECT_DOUBLE_EQ(points[0].body_wire_bytes_per_token, 917616.0);
  EXPECT_EQ(points[0].body_compute_ns, s.at("body_compute_ns").get<int64_t>());
}

// vocab_parallel's own efficiency: its first size 100%, then T(p0) p0 / (T(p) p); scaling's
// figures under the names plan and run give them too.
TEST(LmGpuMemoryVerdict, OwnTypeEfficiencyAndOneJsonNamePerFigure) {
  const auto dir = ts::fresh_scratch("lm_own_eff");
  json j = l70();
  j["hidden_size"] = 1024;
  j["sequence_length"] = 512;
  const std::string w = write(dir, "small.json", j);
  const auto study = ts::run_cli(EMBEDSCOPE_CLI, "scaling " + w + " --simulate h100_sxm --gpus 8,16 --json", dir);
  ASSERT_EQ(study.code, 0) << study.err;
  const json pts = json::parse(study.out).at("points");
  const json* vp8 = nullptr;
  const json* vp16 = nullptr;
  for (const json& p : pts)
    if (p.at("sharding") == "vocab_parallel") (p.at("gpus") == 8 ? vp8 : vp16) = &p;
  ASSERT_TRUE(vp8 && vp16);
  EXPECT_DOUBLE_EQ(vp8->at("type_scaling_efficiency").get<double>(), 1.0);
  const double t8 = vp8->at("step_time_ns").get<double>(), t16 = vp16->at("step_time_ns").get<double>();
  EXPECT_NEAR(vp16->at("type_scaling_efficiency").get<double>(), t8 * 8 / (t16 * 16), 1e-12);

  const auto plan = ts::run_cli(EMBEDSCOPE_CLI, "plan " + w + " --simulate h100_sxm --devices 16 --json", dir);
  const json s = json::parse(plan.out).at("simulated_step");
  EXPECT_EQ(s.at("step_time_ns"), vp16->at("step_time_ns"));
  EXPECT_EQ(s.at("wire_bytes_per_token"), vp16->at("wire_bytes_per_token"));
  EXPECT_EQ(s.at("comm_share"), vp16->at("comm_share"));
  const auto text = ts::run_cli(EMBEDSCOPE_CLI, "plan " + w + " --simulate h100_sxm --devices 16", dir);
  EXPECT_NE(text.out.find("warning: vocab_parallel is one tensor-parallel group over all the GPUs, so above 8 GPUs"),
            std::string::npos)
      << text.out;

  const auto run = ts::run_cli(EMBEDSCOPE_CLI,
                               "run " + w + " --simulate h100_sxm --devices 16 --steps 1 --json -o " +
                                   (dir / "r.db").string(),
                               dir);
  ASSERT_EQ(run.code, 0) << run.err;
  const json r = json::parse(run.out);
  EXPECT_EQ(r.at("wire_bytes_per_token"), r.at("bytes_on_wire_per_token"));
  EXPECT_DOUBLE_EQ(r.at("wire_bytes_per_token").get<double>(), vp16->at("wire_bytes_per_token").get<double>());
  EXPECT_EQ(r.at("comm_share"), r.at("comm_share_rank0"));
  EXPECT_DOUBLE_EQ(r.at("body_wire_bytes_per_token").get<double>(), vp16->at("body_wire_bytes_per_token").get<double>());
}

TEST(LmGpuMemoryVerdict, ScalingRefusesARunFlagNamingItsOwnFlags) {
  const auto dir = ts::fresh_scratch("lm_scaling_flags");
  const std::string w = write(dir, "l70.json", l70());
  const auto bad = ts::run_cli(EMBEDSCOPE_CLI, "scaling " + w + " --simulate h100_sxm --gpus 8 --qcomms bf16", dir);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--qcomms: not for the scaling study of an lm_embedding workload"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("its flags: --gpus, --shardings, --gpus-per-node"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find("--devices"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find("threads of one process"), std::string::npos) << bad.err;
}

}  // namespace
