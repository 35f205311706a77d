// The LM scaling study's file (`embedscope scaling X --json`, exec/lm_scaling_study.h): it says
// what was studied (V, H) and on which device (its memory, also on every point, and a memory
// refusal's need), the reader takes files written before those keys, and a workload's
// sequence_parallel can be switched off for a study (--no-sequence-parallel).

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_scaling_study.h"
#include "embedscope/engine/workload/spec_error.h"
#include "support/cli_run.h"

namespace {

namespace es = embedscope::engine;
namespace ts = embedscope::test_support;
using nlohmann::json;

// V 1000, H 16, S 32, B 2, 1 body layer, tied, fp32, SGD, 4 ranks (lm59_scaling_test's vp4)
json study_workload(bool sequence_parallel, int64_t vocab_size = 1000) {
  json j = json::parse(R"({"model": "lm_embedding", "name": "vp4", "vocab_size": 1000, "hidden_size": 16,
    "sequence_length": 32, "micro_batch_size": 2, "data_type": "fp32", "tie_word_embeddings": true,
    "body_layers": 1, "token_ids": {"distribution": "zipf", "alpha": 1.0},
    "sharding": {"type": "vocab_parallel"}, "devices": {"count": 4},
    "optimizer": {"type": "sgd", "learning_rate": 2.0}, "steps": 3, "seed": 0})");
  j["sharding"]["sequence_parallel"] = sequence_parallel;
  j["vocab_size"] = vocab_size;
  return j;
}

// h100_sxm with a device of 3,000,000 B, named "Small GPU": of the vp4 workload with V 8,000, 1 GPU
// (23,068,672 B reserved) does not fit, 4 do (2,097,152 B reserved a GPU)
std::string small_profile(const std::filesystem::path& dir) {
  std::ifstream in(std::string(EMBEDSCOPE_SOURCE_DIR) + "/resources/hardware/h100_sxm.json");
  std::stringstream text;
  text << in.rdbuf();
  json p = json::parse(text.str());
  p["name"] = "small_gpu";
  p["gpu"]["name"] = "Small GPU";
  p["gpu"]["memory_bytes"] = 3000000;
  const std::string path = (dir / "small.json").string();
  std::ofstream(path) << p.dump();
  return path;
}

TEST(LmStudyJson, SaysTheModelAndTheDeviceMemoryOfAProfileFile) {
  const auto dir = ts::fresh_scratch("lm_study_json");
  std::ofstream((dir / "vp4.json").string()) << study_workload(false, 8000).dump();
  const std::string w = (dir / "vp4.json").string(), prof = small_profile(dir);
  const auto run = ts::run_cli(EMBEDSCOPE_CLI, "scaling " + w + " --simulate " + prof + " --gpus 1,4 --shardings vocab_parallel --json", dir);
  ASSERT_EQ(run.code, 0) << run.err;
  const json s = json::parse(run.out);
  EXPECT_EQ(s.at("vocab_size"), 8000);
  EXPECT_EQ(s.at("hidden_size"), 16);
  EXPECT_EQ(s.at("device_name"), "Small GPU");
  EXPECT_EQ(s.at("device_memory_bytes"), 3000000);
  ASSERT_EQ(s.at("points").size(), 2u);
  const json& one = s.at("points").at(0);
  const json& four = s.at("points").at(1);
  EXPECT_EQ(one.at("gpus"), 1);
  // judged on the peak reserved: the logits 64 x 8,000 x 4 = 2,048,000 B, a request between 1 and
  // 10 MiB, take a 20 MiB segment (PyTorch's large-buffer rule), the rest a 2 MiB small one:
  // 23,068,672 B = 22.0 MiB reserved, 3,094,016 B allocated (the cross-entropy's three vectors of
  // 64 floats and the 64 token ids and targets in the arena: 5 x 512 B blocks)
  EXPECT_EQ(one.at("error").get<std::string>().rfind("does not fit: rank 0 needs 22.0 MiB", 0), 0u) << one;
  EXPECT_EQ(one.at("memory_bytes_per_gpu"), 3094016);
  EXPECT_EQ(one.at("memory_reserved_bytes_per_gpu"), 23068672);
  EXPECT_EQ(one.at("device_memory_bytes"), 3000000);
  EXPECT_FALSE(four.contains("error")) << four;
  EXPECT_EQ(four.at("memory_bytes_per_gpu"), 790016);
  EXPECT_EQ(four.at("memory_reserved_bytes_per_gpu"), 2097152);  // one small segment
  EXPECT_EQ(four.at("device_memory_bytes"), 3000000);
  // read back, and a file written before these keys still read (0 / "")
  const es::LmScalingStudy st = es::lm_scaling_study_from_json(s, "study.json");
  EXPECT_EQ(st.vocab_size, 8000);
  EXPECT_EQ(st.hidden_size, 16);
  EXPECT_EQ(st.device_name, "Small GPU");
  EXPECT_EQ(st.device_memory_bytes, 3000000);
  EXPECT_EQ(st.points.at(0).memory_bytes_per_gpu, 3094016);
  EXPECT_EQ(st.points.at(0).memory_reserved_bytes_per_gpu, 23068672);
  EXPECT_EQ(st.points.at(0).device_memory_bytes, 3000000);
  EXPECT_EQ(st.points.at(1).device_memory_bytes, 3000000);
  EXPECT_EQ(es::to_json(st), s);
  json old = s;
  for (const char* k : {"vocab_size", "hidden_size", "device_name", "device_memory_bytes"}) old.erase(k);
  for (json& p : old["points"]) {
    p.erase("device_memory_bytes");
    p.erase("memory_reserved_bytes_per_gpu");
    if (p.contains("error")) p.erase("memory_bytes_per_gpu");
  }
  const es::LmScalingStudy before = es::lm_scaling_study_from_json(old, "old.json");
  EXPECT_EQ(before.vocab_size, 0);
  EXPECT_EQ(before.device_name, "");
  EXPECT_EQ(before.device_memory_bytes, 0);
  EXPECT_EQ(before.points.at(0).memory_bytes_per_gpu, 0);
  EXPECT_EQ(before.points.at(1).memory_bytes_per_gpu, 790016);
  EXPECT_EQ(before.points.at(1).memory_reserved_bytes_per_gpu, 0);
  // a mistyped new key is named
  json bad = s;
  bad["device_memory_bytes"] = "80 GB";
  EXPECT_THROW(
      {
        try {
          es::lm_scaling_study_from_json(bad, "bad.json");
        } catch (const es::SpecError& e) {
          EXPECT_STREQ(e.what(), "bad.json: /device_memory_bytes: must be an integer");
          throw;
        }
      },
      es::SpecError);
  // the table's header names the device and its memory
  const auto text = ts::run_cli(EMBEDSCOPE_CLI, "scaling " + w + " --simulate " + prof + " --gpus 4 --shardings vocab_parallel", dir);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("(8 GPUs per node, Small GPU of 2.9 MiB each)"), std::string::npos) << text.out;
}

TEST(LmStudyJson, NoSequenceParallelSwitchesTheWorkloadsOff) {
  // the workload says sequence_parallel: its vocab_parallel points at 4 GPUs move 942 B/token;
  // --no-sequence-parallel gives the all-reduce's 840 (4 x (2 x 6,144 + 3 x 384) / 64)
  const auto dir = ts::fresh_scratch("lm_study_no_sp");
  std::ofstream((dir / "sp4.json").string()) << study_workload(true).dump();
  const std::string w = (dir / "sp4.json").string();
  const std::string args = " --simulate h100_sxm --gpus 4 --shardings vocab_parallel --json";
  const auto with = ts::run_cli(EMBEDSCOPE_CLI, "scaling " + w + args, dir);
  ASSERT_EQ(with.code, 0) << with.err;
  const json with_j = json::parse(with.out);
  const json& sp = with_j.at("points").at(0);
  EXPECT_EQ(sp.at("sequence_parallel"), true);
  EXPECT_DOUBLE_EQ(sp.at("wire_bytes_per_token").get<double>(), 942.0);
  const auto without = ts::run_cli(EMBEDSCOPE_CLI, "scaling " + w + args + " --no-sequence-parallel", dir);
  ASSERT_EQ(without.code, 0) << without.err;
  const json without_j = json::parse(without.out);
  const json& vp = without_j.at("points").at(0);
  EXPECT_EQ(vp.at("sequence_parallel"), false);
  EXPECT_DOUBLE_EQ(vp.at("wire_bytes_per_token").get<double>(), 840.0);
  // plan takes it too
  for (const bool off : {false, true}) {
    const auto plan = ts::run_cli(EMBEDSCOPE_CLI, "plan " + w + (off ? " --no-sequence-parallel" : "") + " --json", dir);
    ASSERT_EQ(plan.code, 0) << plan.err;
    const json sharding = json::parse(plan.out).at("workload").at("sharding");
    EXPECT_EQ(sharding.value("sequence_parallel", false), !off) << sharding;
  }
}

}  // namespace
