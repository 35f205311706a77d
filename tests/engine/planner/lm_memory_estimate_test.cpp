// estimate_lm_memory on hand-computed buffers (planner/lm_memory_estimate.h).
#include <gtest/gtest.h>

#include "embedscope/engine/planner/lm_memory_estimate.h"

using namespace embedscope::engine;

namespace {
LmWorkloadSpec tiny() {
  LmWorkloadSpec s;
  s.vocab_size = 10;
  s.hidden_size = 4;
  s.sequence_length = 6;
  s.micro_batch_size = 1;
  s.world_size = 2;
  s.body_layers = 1;
  s.tie_word_embeddings = false;
  return s;
}
}  // namespace

TEST(LmMemoryEstimate, TheHeaderExample) {
  const auto est = estimate_lm_memory(tiny());
  ASSERT_EQ(est.size(), 2u);
  EXPECT_EQ(est[0].rows.end, 5);
  EXPECT_EQ(est[0].table_bytes, 80);
  EXPECT_EQ(est[0].output_projection_bytes, 80);
  EXPECT_EQ(est[0].gradient_bytes, 160);
  EXPECT_EQ(est[0].body_bytes, 160);
  EXPECT_EQ(est[0].logits_bytes, 120);
  // 288 (body) + 96 (partial sum) + 96 (projection input's gradient) + 72 (cross-entropy: 3 x 6
  // x 4) + 96 (embedding output's gradient) + 96 (the pre-activation's) + 96 (the token ids and
  // targets, 2 x 6 int64, blocks of the arena like the rest; 744 and 1,344 without them)
  EXPECT_EQ(est[0].activation_bytes, 840);
  EXPECT_EQ(est[0].total(), 1440);
}

// row_wise on 1 rank (every id its own): the ids it sends, receives and gathers are arena blocks
// too. Activations: 288 (body) + 192 (rows received and returned, 2 T H 4) + 96 (the gathered
// hidden states, p T H 4) + 96 (projection input's gradient) + 192 (the embedding output and the
// body output's gradient, buffers of their own) + 72 (cross-entropy) + 96 + 96 (the embedding
// output's and the pre-activation's gradients) = 1,128, + the ids: inputs and targets 2 x 6, each
// id's batch position and the ids sent 2 x 6, the 6 ids received, every rank's 6 targets: 36 x 8 =
// 288 B: 1,416.
TEST(LmMemoryEstimate, RowWiseTokenIdsAreCounted) {
  LmWorkloadSpec s = tiny();
  s.world_size = 1;
  s.sharding = LmSharding::row_wise;
  const auto est = estimate_lm_memory(s);
  ASSERT_EQ(est.size(), 1u);
  EXPECT_EQ(est[0].activation_bytes, 1416);
}

TEST(LmMemoryEstimate, VocabTermsScaleWithOneOverP) {
  LmWorkloadSpec s = tiny();
  s.vocab_size = 128256;
  s.hidden_size = 128;
  s.sequence_length = 512;
  s.data_type = LmDataType::bf16;
  s.world_size = 1;
  const LmMemoryEstimate one = estimate_lm_memory(s)[0];
  s.world_size = 4;
  const LmMemoryEstimate four = estimate_lm_memory(s)[0];
  EXPECT_EQ(one.table_bytes, 128256 * 128 * 4);
  EXPECT_EQ(four.table_bytes, 32064 * 128 * 4);  // V / 4 rows
  EXPECT_EQ(four.logits_bytes * 4, one.logits_bytes);
  EXPECT_EQ(four.read_copy_bytes, 32064 * 128 * 2);  // bf16 reads a rounded copy of O, 2 B an element
  // sequence_parallel: the body's activations shrink by p, the gathered projection input appears
  s.sequence_parallel = true;
  const LmMemoryEstimate sp = estimate_lm_memory(s)[0];
  // (2 L + 1) Tl H 4 with Tl = 512 / 4, + the partial sum, the gathered input and its gradient (512 H 4 each),
  // the reduce-scatters' outputs (embedding output, body output's gradient), the embedding output's and
  // the pre-activation's gradients (Tl H 4 each), the cross-entropy's 3 x 512 floats, the
  // batch's 512 token ids and 512 targets (int64)
  EXPECT_EQ(sp.activation_bytes, (3 * 128 + 3 * 512 + 4 * 128) * 128 * 4 + 3 * 512 * 4 + 2 * 512 * 8);
  // data_parallel keeps the whole vocabulary on every rank
  s.sequence_parallel = false;
  s.sharding = LmSharding::data_parallel;
  EXPECT_EQ(estimate_lm_memory(s)[3].table_bytes, one.table_bytes);
}
