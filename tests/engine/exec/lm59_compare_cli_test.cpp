// `embedscope compare` of two lm_embedding runs: the bytes sent per step (all ranks) and per
// token, against the hand-counted collectives of vocab_parallel and data_parallel on 4 ranks.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

namespace {

namespace ts = embedscope::test_support;
using nlohmann::json;

TEST(Lm59CompareCli, BytesOnTheWireOfVocabParallelAgainstDataParallel) {
  const auto dir = ts::fresh_scratch("lm59_compare_cli");
  // V 1000, H 16, S 32, B 2, 1 body layer, tied, fp32, SGD, 4 ranks, 3 steps
  std::ofstream((dir / "vp4.json").string())
      << R"({"model": "lm_embedding", "name": "vp4", "vocab_size": 1000, "hidden_size": 16, "sequence_length": 32,
             "micro_batch_size": 2, "data_type": "fp32", "tie_word_embeddings": true, "body_layers": 1,
             "token_ids": {"distribution": "zipf", "alpha": 1.0}, "sharding": {"type": "vocab_parallel"},
             "devices": {"count": 4}, "optimizer": {"type": "sgd", "learning_rate": 2.0}, "steps": 3, "seed": 0})";
  const std::string w = (dir / "vp4.json").string(), vp = (dir / "vp.db").string(), dp = (dir / "dp.db").string();
  ASSERT_EQ(ts::run_cli(EMBEDSCOPE_CLI, "run " + w + " -o " + vp, dir).code, 0);
  ASSERT_EQ(ts::run_cli(EMBEDSCOPE_CLI, "run " + w + " --sharding data_parallel -o " + dp, dir).code, 0);
  const auto r = ts::run_cli(EMBEDSCOPE_CLI, "compare " + vp + " " + dp + " --json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& a = j.at("sessions").at(0).at("figures");
  const json& b = j.at("sessions").at(1).at("figures");
  // vocab_parallel: 4 ranks x (2 x 1.5 x 4,096 + 3 x 1.5 x 256) = 53,760 B a step, 64 tokens: 840
  EXPECT_DOUBLE_EQ(a.at("wire_bytes_per_step").get<double>(), 53760.0);
  EXPECT_DOUBLE_EQ(a.at("wire_bytes_per_token").get<double>(), 840.0);
  // data_parallel: 4 x 1.5 x (64,000 + 1,088 + 4) = 390,552 B a step, 256 tokens: 1,525.59375
  EXPECT_DOUBLE_EQ(b.at("wire_bytes_per_step").get<double>(), 390552.0);
  EXPECT_DOUBLE_EQ(b.at("wire_bytes_per_token").get<double>(), 390552.0 / 256);
  EXPECT_EQ(j.at("sessions").at(0).at("collective_bytes_unknown"), false);
  EXPECT_DOUBLE_EQ(j.at("differences").at(0).at("figures").at("wire_bytes_per_token").at("difference").get<double>(),
                   390552.0 / 256 - 840.0);
  // the text table's rows
  const auto t = ts::run_cli(EMBEDSCOPE_CLI, "compare " + vp + " " + dp, dir);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("bytes sent per step (all ranks)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("840.0 B"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("1525.6 B"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("+685.6 B (+81.6 %)"), std::string::npos) << t.out;
}

}  // namespace
