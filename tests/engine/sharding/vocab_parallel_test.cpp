// The vocabulary split (sharding/vocab_parallel.h) on hand-computed ranges.
#include <gtest/gtest.h>

#include "embedscope/engine/sharding/vocab_parallel.h"

using namespace embedscope::engine;

TEST(VocabParallel, RangesOwnersAndMasking) {
  // V = 10, p = 3: [0, 3), [3, 6), [6, 10)
  EXPECT_EQ(vocab_range(10, 3, 0).end, 3);
  EXPECT_EQ(vocab_range(10, 3, 1).begin, 3);
  EXPECT_EQ(vocab_range(10, 3, 1).end, 6);
  EXPECT_EQ(vocab_range(10, 3, 2).begin, 6);
  EXPECT_EQ(vocab_range(10, 3, 2).end, 10);
  const int owners[10] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 2};
  for (int id = 0; id < 10; ++id) EXPECT_EQ(vocab_owner(id, 10, 3), owners[id]) << id;
  // Llama 3: 128256 over 4 ranks: 32064 rows each.
  EXPECT_EQ(vocab_range(128256, 4, 3).begin, 96192);
  EXPECT_EQ(vocab_owner(96191, 128256, 4), 2);
  EXPECT_EQ(vocab_owner(96192, 128256, 4), 3);
  bool masked = false;
  EXPECT_EQ(vocab_local_row(7, vocab_range(10, 3, 1), masked), 0);
  EXPECT_TRUE(masked);
  EXPECT_EQ(vocab_local_row(5, vocab_range(10, 3, 1), masked), 2);
  EXPECT_FALSE(masked);
}
