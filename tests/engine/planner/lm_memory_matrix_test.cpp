// The lm_embedding memory estimate (planner/lm_memory_estimate.h: the replay of each rank's
// buffers through its caching allocator) against the allocator's measured peak per rank, issue
// 15's goal of 2% as memory_matrix_test.cpp asserts it for the DLRM presets: the scaled Llama
// preset in every sharding that runs here, and a mid-sized workload (one 12.9 MB table on one
// rank, so blocks of 10 MiB or more with unsplit remainders, 1-10 MiB blocks from 20 MiB
// segments on 2 and 4 ranks) over sharding x sequence_parallel x ranks x {fp32 tied SGD, bf16
// untied Adam}. Before lm45 the estimate summed the requested bytes: the preset's ranks peaked
// 2.3 MiB (2.06%, vocab_parallel 4 ranks) above it, which the Summary showed in red.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::engine;

namespace {

std::string lm_matrix_mode(const LmWorkloadSpec& s) {
  return std::string(to_string(s.sharding)) + (s.sequence_parallel ? "+sp" : "") + " p" + std::to_string(s.world_size) +
         " " + to_string(s.data_type) + (s.tie_word_embeddings ? " tied" : " untied") +
         (s.optimizer == LmOptimizer::adam ? " adam" : " sgd");
}

// One run of `s` (its session in a temp file), each rank's estimate against the measured peaks:
// allocated within 2% (never more than one 512 B block below), and, as the replay is the run's
// buffers in the run's order, allocated, reserved (the session's memory counters) and requested
// equal. Returns the worst relative error of the allocated estimate.
double expect_lm_estimate_matches_run(const LmWorkloadSpec& s) {
  const std::string what = s.name + " " + lm_matrix_mode(s);
  const auto path = std::filesystem::temp_directory_path() / ("lm45_matrix_" + std::to_string(getpid()) + ".db");
  LmRunOptions opt;
  opt.session_path = path.string();
  opt.overwrite = true;
  const LmRunResult r = run_lm(s, opt);
  EXPECT_EQ(r.ended, RunEnd::complete) << what;
  const auto est = estimate_lm_memory(s);
  EXPECT_EQ(r.ranks.size(), est.size()) << what;
  std::vector<int64_t> reserved(est.size(), 0);
  {
    const embedscope::sessions::SessionReader session(path.string());
    for (const auto& c : session.memory_counters())
      if (c.rank >= 0 && static_cast<size_t>(c.rank) < reserved.size())
        reserved[static_cast<size_t>(c.rank)] = std::max(reserved[static_cast<size_t>(c.rank)], c.peak_reserved);
  }
  std::filesystem::remove(path);
  double worst = 0;
  for (size_t k = 0; k < std::min(est.size(), r.ranks.size()); ++k) {
    const int64_t peak = r.ranks[k].peak_allocated;
    const double err = static_cast<double>(est[k].peak_allocated_bytes) / static_cast<double>(peak) - 1;
    EXPECT_GE(est[k].peak_allocated_bytes, peak - 512) << what << " rank " << k;
    EXPECT_LE(std::abs(err), 0.02) << what << " rank " << k << ": estimate " << est[k].peak_allocated_bytes
                                   << " B, measured peak " << peak << " B";
    EXPECT_EQ(est[k].peak_allocated_bytes, peak) << what << " rank " << k;
    EXPECT_EQ(est[k].peak_reserved_bytes, reserved[k]) << what << " rank " << k;
    EXPECT_EQ(est[k].peak_requested_bytes, r.ranks[k].peak_requested) << what << " rank " << k;
    worst = std::max(worst, std::abs(err));
  }
  return worst;
}

LmWorkloadSpec preset_in(LmSharding sharding, bool sp, int world) {
  LmWorkloadSpec s = load_lm_preset("llama3_8b_embedding_scaled");
  s.sharding = sharding;
  s.sequence_parallel = sp;
  s.world_size = world;
  // one step: every rank's peak allocated, reserved and requested bytes were the same with 2 (all
  // four runs below); the steady state of later steps (no block kept or leaked from one step to
  // the next) is checked by the matrix's 2-step runs of every mode, bf16 untied Adam included
  s.steps = 1;
  return s;
}

}  // namespace

// The preset as `embedscope run --preset llama3_8b_embedding_scaled --devices 4 [--sequence-parallel |
// --sharding row_wise]` runs it (bf16, untied, 128,256 x 128, 256 tokens), 1 step (2 peak the same): rank 0 of
// vocab_parallel 4 peaks at 110,060,544 B (105.0 MiB; the sum of requested bytes, 108,160,000 B,
// is 1.73% under it; 110,056,448 / 108,155,904 B before the 256 token ids and 256 targets, two
// blocks of 2,048 B, were in the arena; 109,922,304 B before the read copy's fp32 conversion tile, 256 x 128 x 4 =
// 131,072 B, was a block of the arena, 110,053,376 B before the cross-entropy's three vectors of
// 256 floats, 3 x 1,024 B, were; the embedding output's and the pre-activation's gradients,
// 131,072 B each, add to the sum, not to the peak: they are never alive with the logits). Rank 0's 32,064 rows: the table, projection and their gradients 4 x
// 32,064 x 128 x 4 = 65,667,072 B, the bf16 read copy 32,064 x 128 x 2 = 8,208,384 B (with the
// fp32-sized copy of before, 116,099,072 and 118,491,136 B).
TEST(LmMemoryMatrix, ScaledLlamaPresetVocabParallelMatchesTheMeasuredPeak) {
  const LmWorkloadSpec s = preset_in(LmSharding::vocab_parallel, false, 4);
  EXPECT_EQ(estimate_lm_memory(s)[0].read_copy_bytes, 8'208'384);
  EXPECT_EQ(estimate_lm_memory(s)[0].peak_allocated_bytes, 110'060'544);
  EXPECT_EQ(estimate_lm_memory(s)[0].total(), 108'160'000);
  std::printf("vocab_parallel 4: worst %.4f%%\n", 100 * expect_lm_estimate_matches_run(s));
  std::printf("sequence_parallel 4: worst %.4f%%\n",
              100 * expect_lm_estimate_matches_run(preset_in(LmSharding::vocab_parallel, true, 4)));
}
TEST(LmMemoryMatrix, ScaledLlamaPresetRowWiseMatchesTheMeasuredPeak) {
  std::printf("row_wise 4: worst %.4f%%\n", 100 * expect_lm_estimate_matches_run(preset_in(LmSharding::row_wise, false, 4)));
}
TEST(LmMemoryMatrix, ScaledLlamaPresetDataParallelMatchesTheMeasuredPeak) {
  std::printf("data_parallel 2: worst %.4f%%\n",
              100 * expect_lm_estimate_matches_run(preset_in(LmSharding::data_parallel, false, 2)));
}

// 50,257 x 64 (GPT-2's vocabulary), 64 tokens, 2 body layers, 2 steps: every sharding type (and
// sequence parallel) x 1, 2, 4 ranks x {fp32 tied SGD, bf16 untied Adam}.
TEST(LmMemoryMatrix, EveryModeRankCountAndPrecisionMatchesTheMeasuredPeak) {
  struct Mode {
    LmSharding sharding;
    bool sp;
  };
  const Mode modes[] = {{LmSharding::vocab_parallel, false},
                        {LmSharding::vocab_parallel, true},
                        {LmSharding::data_parallel, false},
                        {LmSharding::row_wise, false}};
  double worst = 0;
  int runs = 0;
  for (const Mode& m : modes)
    for (const int world : {1, 2, 4})
      for (const bool half : {false, true}) {
        if (m.sp && world == 1) continue;  // nothing to scatter
        LmWorkloadSpec s;
        s.name = "lm45_matrix";
        s.vocab_size = 50257;
        s.hidden_size = 64;
        s.sequence_length = 64;
        s.micro_batch_size = 1;
        s.body_layers = 2;
        s.world_size = world;
        s.sharding = m.sharding;
        s.sequence_parallel = m.sp;
        s.data_type = half ? LmDataType::bf16 : LmDataType::fp32;
        s.tie_word_embeddings = !half;
        s.optimizer = half ? LmOptimizer::adam : LmOptimizer::sgd;
        s.learning_rate = half ? 0.01 : 0.1;
        // 2 steps: the first allocates the optimizer state and every step buffer, the second
        // runs on what the first left (a block kept or leaked from one step to the next raises
        // its peak); with 3 every rank's peak allocated, reserved and requested bytes of the 22
        // runs were the same (18.2 -> 13.9 s of CPU, docs/ci-time.md)
        s.steps = 2;
        worst = std::max(worst, expect_lm_estimate_matches_run(s));
        ++runs;
      }
  EXPECT_EQ(runs, 22);
  std::printf("lm45_matrix: %d runs, worst estimate vs measured peak %.4f%%\n", runs, 100 * worst);
}
