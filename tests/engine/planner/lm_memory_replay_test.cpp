// lm_memory_replay (planner/lm_memory_estimate.h) on hand-computed allocator blocks: the
// header's example and a workload whose large buffers get unsplit 2 MiB-rounded blocks.
#include <gtest/gtest.h>

#include <stdexcept>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"

using namespace embedscope::engine;

namespace {

// V 190,000 x H 16, 32 tokens, fp32, tied, 2 body layers, SGD, 1 rank, 1 step (tester43 F3's case).
LmWorkloadSpec lm45_large_blocks() {
  LmWorkloadSpec s;
  s.name = "lm45_large_blocks";
  s.vocab_size = 190000;
  s.hidden_size = 16;
  s.sequence_length = 32;
  s.micro_batch_size = 1;
  s.world_size = 1;
  s.steps = 1;
  return s;
}

}  // namespace

// estimate_lm_memory's example (V 10, H 4, S 6, p 2, vocab_parallel, untied, fp32, 1 layer): every
// buffer is under 512 B, so one 512 B block each; at output_projection/backward E, O, dE, dO, W, b,
// dW, db, the batch's token ids and targets (6 int64 each, 48 B), the activations, the logits, the
// cross-entropy's row max, target logit and sum of exps and the projection input's gradient are
// alive: 16 blocks (14 while the ids were outside the arena, 11 before the three vectors were in
// it). Requested: 480 (parameters) + 96 (ids) + 288 (activations) + 120 (logits) + 72 + 96.
TEST(Lm45MemoryReplay, TheHeaderExample) {
  LmWorkloadSpec s;
  s.vocab_size = 10;
  s.hidden_size = 4;
  s.sequence_length = 6;
  s.micro_batch_size = 1;
  s.world_size = 2;
  s.body_layers = 1;
  s.tie_word_embeddings = false;
  const LmReplayedMemory m = lm_memory_replay(s, 0);
  EXPECT_EQ(m.peak_allocated, 16 * 512);
  EXPECT_EQ(m.peak_reserved, 2 << 20);  // one small-pool segment
  EXPECT_EQ(m.peak_requested, 1152);
  const auto est = estimate_lm_memory(s);
  EXPECT_EQ(est[1].peak_allocated_bytes, m.peak_allocated);  // rank 1 holds 5 rows too
  EXPECT_THROW(lm_memory_replay(s, 2), std::out_of_range);
  EXPECT_THROW(lm_memory_replay(s, -1), std::out_of_range);
}

// E and dE: 190,000 x 16 x 4 = 12,160,000 B >= 10 MiB: a 12 MiB segment each, whose 422,912 B rest
// (under 1 MiB) is not split off: 12,582,912 B blocks. The logits 32 x 190,000 x 4 = 24,320,000 B:
// a 24 MiB block (845,824 B rest). The small pool: W, dW 1,024 B, b, db 64 -> 512 B per layer
// (x 2 layers: 6,144 B), the activations (2 x 2 + 1) x 32 x 16 x 4 = 10,240 B, the cross-entropy's
// three vectors of 32 floats (512 B each), the projection input's gradient 2,048 B and the
// batch's token ids and targets, 32 int64 = 256 B each (512 B blocks). Peak allocated
// 2 x 12,582,912 + 25,165,824 + 6,144 + 10,240 + 1,536 + 2,048 + 1,024 = 50,352,640 B; reserved
// 12 + 12 + 24 MiB + one 2 MiB small segment = 50 MiB; requested 2 x 12,160,000 + 24,320,000 +
// 4,352 (body) + 10,240 + 384 + 2,048 + 512 = 48,657,536 B. The sum of requested bytes (total(),
// the estimate before lm45) is 48,663,680 B (with the embedding output's and the pre-activation's
// gradients, 2,048 B each), 1,688,960 B under the run's peak. (The ids outside the arena: 1,024 B
// allocated and 512 B requested less.)
TEST(Lm45MemoryReplay, LargeBuffersGetTheirUnsplitSegmentsAsInTheRun) {
  const LmWorkloadSpec s = lm45_large_blocks();
  const LmMemoryEstimate e = estimate_lm_memory(s)[0];
  EXPECT_EQ(e.peak_allocated_bytes, 50'352'640);
  EXPECT_EQ(e.peak_reserved_bytes, 50 << 20);
  EXPECT_EQ(e.peak_requested_bytes, 48'657'536);
  EXPECT_EQ(e.total(), 48'663'680);
  const LmRunResult r = run_lm(s);
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_EQ(r.ranks[0].peak_allocated, 50'352'640);
  EXPECT_EQ(r.ranks[0].peak_requested, 48'657'536);
}

// The header example in bf16: the read copy (5 rows x 4 x 2 = 40 B) and the fp32 tile the
// projection's GEMMs convert it into (5 x 4 x 4 = 80 B) are arena blocks too, both alive at
// output_projection/backward beside the 16 of fp32: 18 x 512 = 9,216 B allocated (the tile
// outside the arena: 17 x 512 = 8,704), requested 1,152 + 40 + 80 = 1,272 B; the run's peaks equal
// the replay's.
TEST(Lm45MemoryReplay, TheReadCopysConversionTileIsInTheArena) {
  LmWorkloadSpec s;
  s.vocab_size = 10;
  s.hidden_size = 4;
  s.sequence_length = 6;
  s.micro_batch_size = 1;
  s.world_size = 2;
  s.body_layers = 1;
  s.tie_word_embeddings = false;
  s.data_type = LmDataType::bf16;
  s.steps = 1;
  const LmReplayedMemory m = lm_memory_replay(s, 0);
  EXPECT_EQ(m.peak_allocated, 18 * 512);
  EXPECT_EQ(m.peak_requested, 1152 + 40 + 80);
  const LmRunResult r = run_lm(s);
  ASSERT_EQ(r.ranks.size(), 2u);
  for (const auto& rank : r.ranks) {
    EXPECT_EQ(rank.peak_allocated, 18 * 512);
    EXPECT_EQ(rank.peak_requested, 1152 + 40 + 80);
  }
}
