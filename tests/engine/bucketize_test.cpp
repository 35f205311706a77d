#include <gtest/gtest.h>

#include <vector>

#include "embedscope/engine/input/bucketize.h"

using namespace embedscope::engine;

TEST(Bucketize, RowWiseSlotsKeepTheirRowRangeRebasedOthersEverything) {
  // 2 features x batch 2: feature 0 bags {5, 1, 7}, {}; feature 1 bags {3}, {0, 9}
  const std::vector<int64_t> values{5, 1, 7, 3, 0, 9}, offsets{0, 3, 3, 4, 6};
  const std::vector<BucketSlot> slots{
      {0, true, 0, 4},   // feature 0, rows [0, 4)
      {0, true, 4, 4},   // feature 0, rows [4, 8)
      {1, false, 0, 0},  // feature 1, whole table
      {0, true, 8, 2},   // feature 0, rows [8, 10): nothing
  };
  const BucketizedKjt r = bucketize_kjt(values, offsets, 2, slots);
  EXPECT_EQ(r.lengths, (std::vector<int64_t>{1, 0, 2, 0, 1, 2, 0, 0}));
  EXPECT_EQ(r.ids, (std::vector<int64_t>{1, 1, 3, 3, 0, 9}));  // 5 - 4 = 1, 7 - 4 = 3
  EXPECT_EQ(r.splits, (std::vector<int64_t>{1, 2, 3, 0}));
}

TEST(Bucketize, OffsetsNotStartingAtZeroAndEmptyBatch) {
  const std::vector<int64_t> values{99, 99, 2, 6}, offsets{2, 3, 4};  // batch 2, one feature: {2}, {6}
  const std::vector<BucketSlot> slots{{0, true, 0, 4}, {0, true, 4, 4}};
  const BucketizedKjt r = bucketize_kjt(values, offsets, 2, slots);
  EXPECT_EQ(r.lengths, (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(r.ids, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r.splits, (std::vector<int64_t>{1, 1}));
  const BucketizedKjt e = bucketize_kjt({}, std::vector<int64_t>{0}, 0, slots);
  EXPECT_TRUE(e.lengths.empty());
  EXPECT_EQ(e.splits, (std::vector<int64_t>{0, 0}));
}

TEST(Bucketize, BadInputIsRefused) {
  const std::vector<int64_t> values{1, 2}, offsets{0, 1, 2};
  const std::vector<BucketSlot> bad_feature{{1, false, 0, 0}};
  EXPECT_THROW(bucketize_kjt(values, offsets, 2, bad_feature), std::invalid_argument);
  const std::vector<BucketSlot> ok{{0, false, 0, 0}};
  EXPECT_THROW(bucketize_kjt(values, offsets, 3, ok), std::invalid_argument);           // 2 bags, batch 3
  EXPECT_THROW(bucketize_kjt(values, std::vector<int64_t>{0, 1, 3}, 2, ok), std::invalid_argument);  // past values
  EXPECT_THROW(bucketize_kjt(values, offsets, -1, ok), std::invalid_argument);
}
