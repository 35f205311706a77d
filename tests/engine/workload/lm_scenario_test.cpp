// The teaching scenario vocab_parallel_vs_sequence_parallel (resources/scenarios/): the scenario
// loader reads its lm_embedding runs, and each run, shrunk to a tiny size, moves the bytes per
// token computed here by hand from the collectives' formulas (comm/collective_math.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "embedscope/engine/workload/scenario.h"
#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/model/lm_embedding.h"
#include "embedscope/engine/sharding/vocab_parallel.h"

using namespace embedscope;
using namespace embedscope::engine;

namespace {

const Scenario& scenario() {
  static const Scenario s = [] {
    for (const Scenario& b : builtin_scenarios())
      if (b.id == "vocab_parallel_vs_sequence_parallel") return b;
    throw std::runtime_error("scenario vocab_parallel_vs_sequence_parallel not built in");
  }();
  return s;
}

/// The run's workload at a tiny size: V = 64, H = 8, S = 8, B = 2 (T = 16 tokens per micro
/// batch), one step; everything else (mode, 4 ranks, bf16, untied, 2 body layers) as the scenario says.
engine::LmWorkloadSpec tiny(const ScenarioRun& run) {
  nlohmann::json j = run.workload;
  j.merge_patch({{"vocab_size", 64}, {"hidden_size", 8}, {"sequence_length", 8}, {"micro_batch_size", 2}, {"steps", 1}});
  return engine::parse_lm_workload(j, run.label);
}

struct Measured {
  double bytes_per_token = 0;  // every rank's bytes sent / the step's tokens
  int64_t embedding_bytes = 0; // rank 0's bytes sent by the embedding's own collectives
  int64_t peak_requested = 0;  // rank 0's
};

Measured measure(const engine::LmWorkloadSpec& s) {
  const engine::LmRunResult r = engine::run_lm(s);
  Measured m;
  int64_t sent = 0;
  for (const auto& rk : r.ranks) sent += rk.bytes_sent;
  const int64_t tokens = s.tokens_per_micro_batch() * (s.sharding == engine::LmSharding::vocab_parallel ? 1 : s.world_size);
  m.bytes_per_token = static_cast<double>(sent) / static_cast<double>(tokens);
  for (const auto& c : r.collectives)
    if (c.rank == 0 && (c.name.rfind("embedding/", 0) == 0 || c.name.rfind("input_dist/", 0) == 0 ||
                        c.name.rfind("output_dist/", 0) == 0 || c.name.rfind("grad_dist/", 0) == 0))
      m.embedding_bytes += c.bytes_sent;
  m.peak_requested = r.ranks[0].peak_requested;
  return m;
}

TEST(LmScenario, LoadsFourLmRunsOfTheScaledLlamaPreset) {
  const Scenario& s = scenario();
  ASSERT_EQ(s.runs.size(), 4u);
  std::vector<std::pair<engine::LmSharding, bool>> modes;
  for (const ScenarioRun& run : s.runs) {
    ASSERT_TRUE(run.lm.has_value()) << run.label;
    EXPECT_EQ(run.lm->vocab_size, 128256);
    EXPECT_EQ(run.lm->world_size, 4);
    EXPECT_EQ(run.steps(), 2);
    EXPECT_EQ(run.world_size(), 4);
    EXPECT_EQ(run.warmup_steps(), 0);
    modes.emplace_back(run.lm->sharding, run.lm->sequence_parallel);
  }
  EXPECT_EQ(modes, (std::vector<std::pair<engine::LmSharding, bool>>{{engine::LmSharding::vocab_parallel, false},
                                                                     {engine::LmSharding::vocab_parallel, true},
                                                                     {engine::LmSharding::data_parallel, false},
                                                                     {engine::LmSharding::row_wise, false}}));
}

TEST(LmScenario, RejectsABadLmOverrideNamingThePointer) {
  nlohmann::json j = {{"id", "x"}, {"title", "x"}, {"explanation", "x"},
                      {"runs", {{{"label", "a"}, {"preset", "llama3_8b_embedding_scaled"}},
                                {{"label", "b"}, {"preset", "llama3_8b_embedding_scaled"},
                                 {"overrides", {{"sequence_length", 0}}}}}}};
  try {
    parse_scenario(j, "x.json");
    FAIL() << "sequence_length 0 accepted";
  } catch (const engine::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: /runs/1/overrides/sequence_length"), std::string::npos) << e.what();
  }
}

// p = 4, T = 16, H = 8, V' = 64 (16 rows a rank), L = 2 layers of 8 x 8 + 8. Bytes a rank sends
// (collective_math.h): all-reduce of n elements of e bytes 2 (p-1) n e / p; all-gather (p-1) x its
// block; reduce-scatter and all-to-all the blocks for the others; every all-to-all and
// reduce-scatter preceded by its split check, an all-gather of 2p int64: 3 x 8 x 8 = 192 B. The
// preset is bf16: the activations' collectives and their gradients' move 2-byte elements, the
// cross-entropy's and the parameters' gradients' fp32 (program/lm_program.h, tester55 F2). These
// are the sessions' bytes, split checks included (the scenario's figures leave them out).
TEST(LmScenario, TinyRunsMoveTheHandComputedBytesPerToken) {
  const Scenario& s = scenario();
  std::map<std::string, Measured> m;
  const char* keys[] = {"vp", "sp", "dp", "rw"};
  for (size_t i = 0; i < 4; ++i) m[keys[i]] = measure(tiny(s.runs[i]));
  // vocab_parallel: embedding/all_reduce [16 x 8] bf16 384 B; cross_entropy max, predicted logit
  // and sum of exps of 16 floats 96 B each; output_projection/grad_all_reduce bf16 384 B: 1056 B
  // a rank, 4 ranks over 16 tokens (fp32 everywhere: 1824)
  EXPECT_DOUBLE_EQ(m["vp"].bytes_per_token, 4.0 * 1056 / 16);
  EXPECT_EQ(m["vp"].embedding_bytes, 384);
  // + sequence_parallel (4 tokens a rank, 32 bf16 values): embedding/reduce_scatter 192 + 3 x 64;
  // sequence_parallel/all_gather 192; the three cross-entropy all-reduces 288;
  // output_projection/grad_reduce_scatter 192 + 192; embedding/grad_all_gather 192;
  // body/grad_all_reduce of 144 floats 864 (the ranks' body gradients differ now): 2304 B
  EXPECT_DOUBLE_EQ(m["sp"].bytes_per_token, 4.0 * 2304 / 16);
  EXPECT_EQ(m["sp"].embedding_bytes, 384 + 192);
  // data_parallel (each rank its own 16 tokens: 64): loss/all_reduce of 1 float 6 B; the
  // gradients of E and O [64 x 8] 3072 B each; the body's 864 B: 7014 B
  EXPECT_DOUBLE_EQ(m["dp"].bytes_per_token, 4.0 * 7014 / 64);
  EXPECT_EQ(m["dp"].embedding_bytes, 3072);
  // row_wise (64 tokens): input_dist/splits 192 + 24; the split checks of input_dist/ids,
  // output_dist/rows and grad_dist/rows 3 x 192; output_projection/all_gather bf16 3 x 256 and
  // its targets 3 x 128; the cross-entropy all-reduces over 64 tokens 3 x 384; the gradient
  // reduce-scatter 192 + 3 x 256; body 864: 4920 B a rank. And per id whose row another rank
  // holds: its 8 B there, its row's 16 B back and its gradient's 16 B there again (bf16).
  int64_t remote = 0;
  const engine::LmWorkloadSpec rw = tiny(s.runs[3]);
  for (int r = 0; r < 4; ++r)
    for (int b = 0; b < 2; ++b) {
      const std::vector<int64_t> tok = engine::lm_sequence_tokens(rw, 0, r * 2 + b);
      for (int t = 0; t < 8; ++t) remote += engine::vocab_owner(tok[static_cast<size_t>(t)], 64, 4) != r ? 1 : 0;
    }
  EXPECT_GT(remote, 0);
  EXPECT_DOUBLE_EQ(m["rw"].bytes_per_token, (4.0 * 4920 + 40.0 * static_cast<double>(remote)) / 64);
  // The comparisons the scenario teaches: sequence parallelism moves more bytes than the
  // all-reduce (the body's gradient all-reduce and the split checks: reduce-scatter + all-gather
  // move the all-reduce's bytes; teach52_scenario_text_test.cpp) ...
  EXPECT_GT(m["sp"].bytes_per_token, m["vp"].bytes_per_token);
  // ... and keeps fewer activations; data_parallel holds the whole table on every rank
  EXPECT_LT(m["sp"].peak_requested, m["vp"].peak_requested);
  EXPECT_GT(m["dp"].peak_requested, 2 * m["vp"].peak_requested);
}

}  // namespace
