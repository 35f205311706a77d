// An lm_embedding workload's token ids from a file (lm_spec.h "token_ids": {"file", "dtype"}):
// read in order, sequence by sequence, wrapping around; relative paths against the workload's
// directory; ids >= vocab_size named with file and offset.

#include <filesystem>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/input/token_file.h"
#include "embedscope/engine/model/lm_embedding.h"
#include "embedscope/engine/reference/lm_reference.h"
#include "embedscope/engine/workload/lm_spec.h"

namespace es = embedscope::engine;

namespace {
std::filesystem::path lm_token_dir() {
  const auto d = std::filesystem::temp_directory_path() / ("es_lm_tokens_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}
// ids 0..9 as uint16 in DIR/ids.bin and a workload DIR/w.json naming "ids.bin" (relative)
std::string write_lm_token_workload(const std::filesystem::path& dir, int64_t vocab, const std::string& sharding, int world) {
  es::write_token_bin((dir / "ids.bin").string(), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, es::TokenDtype::uint16);
  const nlohmann::json j = {{"model", "lm_embedding"}, {"vocab_size", vocab}, {"hidden_size", 4}, {"sequence_length", 4},
                            {"token_ids", {{"file", "ids.bin"}, {"dtype", "uint16"}}},
                            {"sharding", {{"type", sharding}}}, {"devices", {{"count", world}}}};
  const auto p = dir / "w.json";
  std::ofstream(p) << j.dump();
  return p.string();
}
}  // namespace

TEST(LmTokenFile, SequencesReadTheFileInOrderAndWrapAround) {
  const auto dir = lm_token_dir();
  const es::LmWorkloadSpec s = es::load_lm_workload_file(write_lm_token_workload(dir, 16, "vocab_parallel", 1));
  EXPECT_EQ(s.token_file, (dir / "ids.bin").lexically_normal().string());  // relative to the workload's folder
  // one sequence per step (B = 1, one tensor-parallel group); S + 1 = 5 ids from offset n x 4
  EXPECT_EQ(es::lm_sequence_tokens(s, 0, 0), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(es::lm_sequence_tokens(s, 1, 0), (std::vector<int64_t>{4, 5, 6, 7, 8}));
  EXPECT_EQ(es::lm_sequence_tokens(s, 2, 0), (std::vector<int64_t>{8, 9, 0, 1, 2}));  // wraps
}

TEST(LmTokenFile, DataParallelStepsTakeOneSequencePerRank) {
  const auto dir = lm_token_dir();
  const es::LmWorkloadSpec s = es::load_lm_workload_file(write_lm_token_workload(dir, 16, "data_parallel", 2));
  EXPECT_EQ(s.global_sequences_per_step(), 2);
  // step 1, sequence 1: n = 3, offset 12 mod 10 = 2
  EXPECT_EQ(es::lm_sequence_tokens(s, 1, 1), (std::vector<int64_t>{2, 3, 4, 5, 6}));
}

TEST(LmTokenFile, RoundTripsThroughToJson) {
  const auto dir = lm_token_dir();
  const es::LmWorkloadSpec s = es::load_lm_workload_file(write_lm_token_workload(dir, 16, "vocab_parallel", 1));
  const nlohmann::json j = es::to_json(s);
  EXPECT_EQ(j["token_ids"], (nlohmann::json{{"file", s.token_file}, {"dtype", "uint16"}}));
  const es::LmWorkloadSpec t = es::parse_lm_workload(j, "round trip");
  EXPECT_EQ(es::lm_sequence_tokens(t, 2, 0), (std::vector<int64_t>{8, 9, 0, 1, 2}));
}

TEST(LmTokenFile, IdAtOrAboveVocabSizeNamesFileAndOffset) {
  const auto dir = lm_token_dir();
  const std::string w = write_lm_token_workload(dir, 8, "vocab_parallel", 1);
  try {
    es::load_lm_workload_file(w);
    FAIL();
  } catch (const es::SpecError& e) {
    const std::string want = "/token_ids/file: " + (dir / "ids.bin").string() +
                             ": token id 8 at offset 8 (byte 16) is outside [0, vocab_size 8)";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(LmTokenFile, BadKeysAreNamed) {
  const nlohmann::json base = {{"model", "lm_embedding"}, {"vocab_size", 16}, {"hidden_size", 4}, {"sequence_length", 4}};
  nlohmann::json j = base;
  j["token_ids"] = {{"file", "x.bin"}, {"alpha", 1.0}};
  EXPECT_THROW(es::parse_lm_workload(j, "t"), es::SpecError);
  j["token_ids"] = {{"dtype", "uint16"}};
  EXPECT_THROW(es::parse_lm_workload(j, "t"), es::SpecError);
  j["token_ids"] = {{"file", (lm_token_dir() / "absent.bin").string()}, {"dtype", "uint16"}};
  try {
    es::parse_lm_workload(j, "t");
    FAIL();
  } catch (const es::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("t: /token_ids/file: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("absent.bin: cannot open the token file"), std::string::npos) << e.what();
  }
}

// Parity from a file: vocab_parallel on 3 ranks (uneven shards of 37 rows) and data_parallel on
// 2, untied, 3 steps of 2 sequences of 12 from 50 file ids (wrapping): losses and tables equal
// the double-precision reference within the parity suite's fp32 tolerance (2e-5).
TEST(LmTokenFile, ShardedRunsFromAFileMatchTheReference) {
  const auto dir = lm_token_dir();
  std::vector<int64_t> ids;
  for (int i = 0; i < 50; ++i) ids.push_back((i * 7 + i / 5) % 37);
  es::write_token_bin((dir / "parity.bin").string(), ids, es::TokenDtype::uint16);
  for (const char* sharding : {"vocab_parallel", "data_parallel"}) {
    const int world = std::string(sharding) == "vocab_parallel" ? 3 : 2;
    const nlohmann::json j = {{"model", "lm_embedding"}, {"vocab_size", 37}, {"hidden_size", 8}, {"sequence_length", 12},
                              {"micro_batch_size", 2}, {"tie_word_embeddings", false}, {"steps", 3}, {"seed", 7},
                              {"optimizer", {{"type", "sgd"}, {"learning_rate", 2.0}}},
                              {"token_ids", {{"file", "parity.bin"}, {"dtype", "uint16"}}},
                              {"sharding", {{"type", sharding}}}, {"devices", {{"count", world}}}};
    const es::LmWorkloadSpec s = es::parse_lm_workload(j, "parity", dir.string());
    SCOPED_TRACE(sharding);
    // the first sequence of step 1 is global sequence G = 2 (vocab_parallel) or 4: offset 24 or 48
    const int64_t first = world == 3 ? 24 : 48;
    EXPECT_EQ(es::lm_sequence_tokens(s, 1, 0)[0], ids[static_cast<size_t>(first)]);
    es::LmRunOptions opt;
    opt.keep_outputs = true;
    const es::LmRunResult run = es::run_lm(s, opt);
    es::LmReference ref(s);
    for (int64_t st = 0; st < s.steps; ++st) {
      const double loss = ref.step(st);
      EXPECT_NEAR(run.losses[static_cast<size_t>(st)], loss, 2e-5 * loss) << "step " << st;
    }
    double worst = 0;
    for (const es::LmRankResult& rr : run.ranks)
      for (int64_t row = rr.rows.begin; row < rr.rows.end; ++row)
        for (int64_t c = 0; c < 8; ++c)
          worst = std::max(worst, std::fabs(static_cast<double>(rr.table[static_cast<size_t>((row - rr.rows.begin) * 8 + c)]) -
                                            ref.table()[static_cast<size_t>(row * 8 + c)]));
    EXPECT_LE(worst, 2e-5);
  }
}
