// The hashing trick's id -> row map and collision count (input/hashing.h), against XXH64 values
// computed independently (xxhsum-equivalent: XXH64 of the id's 8 little-endian bytes, seed 0):
//   id 0 -> 0x34c96acdcadb1bbb, 1 -> 0x9f29cb17a2a49995, 2 -> 0xeac73e4044e82db0,
//   3 -> 0x87b8166da7ec4841, 4 -> 0x2ba609fa0797d28b;  mod 10: 9, 9, 0, 5, 5.
#include <gtest/gtest.h>

#include "embedscope/engine/input/hashing.h"

using namespace embedscope::engine;

TEST(Hashing, RowIsXxh64ModuloHashSize) {
  EXPECT_EQ(hashed_row(0, 10), 9);
  EXPECT_EQ(hashed_row(1, 10), 9);
  EXPECT_EQ(hashed_row(2, 10), 0);
  EXPECT_EQ(hashed_row(3, 10), 5);
  EXPECT_EQ(hashed_row(4, 10), 5);
  EXPECT_EQ(hashed_row(0, 4), 3);  // 0x...1bbb % 4
  EXPECT_EQ(hashed_row(123456789, 1), 0);
  EXPECT_THROW(hashed_row(1, 0), std::invalid_argument);
}

TEST(Hashing, MapsHashedTablesAndCountsCollisionsPerBatch) {
  WorkloadSpec s;
  s.tables = {{"hashed", 100, 4, Pooling::sum, {"fa", "fb"}}, {"plain", 100, 4, Pooling::sum, {"fc"}}};
  s.tables[0].hash_size = 10;
  s.features.resize(3);
  s.features[0].name = "fa";
  s.features[1].name = "fb";
  s.features[2].name = "fc";
  KJT kjt;
  kjt.batch_size = 2;
  kjt.num_features = 3;
  // fa: bags {0, 1} {2}; fb: bags {3} {4, 0}; fc: bags {1} {}
  kjt.lengths = {2, 1, 1, 2, 1, 0};
  kjt.values = {0, 1, 2, 3, 4, 0, 1};
  const auto collisions = apply_hashing(s, kjt);
  // the table's distinct ids {0, 1, 2, 3, 4} over both features -> rows {9, 9, 0, 5, 5}: ids 0
  // and 1 share row 9, 3 and 4 share row 5 (id 0 twice is one id): 4 collisions
  ASSERT_EQ(collisions.size(), 2u);
  EXPECT_EQ(collisions[0], 4);
  EXPECT_EQ(collisions[1], 0);
  EXPECT_EQ(kjt.values, (std::vector<int64_t>{9, 9, 0, 5, 5, 9, 1}));  // fc's id 1 is untouched
  EXPECT_EQ(kjt.lengths, (std::vector<int64_t>{2, 1, 1, 2, 1, 0}));
}
