// inspect-input on a hashed table (TableSpec::hash_size): the ids counted as the rows the table
// stores, and the collisions a run counts, against rows computed by hand with an independent
// XXH64 (a pure-python implementation checked on the published vectors for "", "a", "abc"):
// XXH64(id as 8 little-endian bytes, seed 0) % 10 for ids 0..11 is
// 9 9 0 5 5 5 1 7 2 6 8 9.
#include <gtest/gtest.h>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/input/input_stats.h"

using namespace embedscope::engine;

namespace {
WorkloadSpec two_tables() {
  WorkloadSpec s;
  s.features = {FeatureSpec{"fa", {}, {}}, FeatureSpec{"fb", {}, {}}};
  TableSpec ta;
  ta.name = "ta", ta.num_embeddings = 1000, ta.embedding_dim = 4, ta.feature_names = {"fa"}, ta.hash_size = 10;
  TableSpec tb;
  tb.name = "tb", tb.num_embeddings = 1000, tb.embedding_dim = 4, tb.feature_names = {"fb"};
  s.tables = {ta, tb};
  return s;
}

// two bags a feature; lengths feature-major
KJT batch(std::vector<int64_t> lengths, std::vector<int64_t> values) {
  KJT k;
  k.batch_size = 2;
  k.num_features = 2;
  k.lengths = std::move(lengths);
  k.values = std::move(values);
  return k;
}
}  // namespace

TEST(HashedInputStats, StoredRowsSkewAndCollisionsMatchTheHandRows) {
  const WorkloadSpec spec = two_tables();
  InputStats stats(spec);
  // batch 1: fa {0, 1, 2} {3, 4, 0} -> rows 9 9 0 | 5 5 9: distinct ids 0 1 2 3 4 on rows 9 9 0 5 5,
  // so 0, 1 (row 9) and 3, 4 (row 5) collide: 4; fb {1} {2} unhashed
  stats.add(batch({3, 3, 1, 1}, {0, 1, 2, 3, 4, 0, 1, 2}));
  // batch 2: fa {5, 6} {7, 11} -> rows 5 1 | 7 9: no two on one row; fb {} {5}
  stats.add(batch({2, 2, 0, 1}, {5, 6, 7, 11, 5}));
  const auto r = stats.result();
  ASSERT_EQ(r.size(), 2u);
  const FeatureInputStats& a = r[0];
  EXPECT_EQ(a.hash_size, 10);
  EXPECT_EQ(a.distinct_ids, 9);           // raw: 0 1 2 3 4 5 6 7 11
  EXPECT_EQ(a.distinct_stored_rows, 5);   // rows 9 0 5 1 7
  // lookups per stored row: 9: 4 (ids 0 1 0 11), 5: 3, 0 1 7: 1 each; 10 in all; ceil(1% / 10% of 10) = 1 row
  EXPECT_EQ(a.stored_hot_rows_1, 1);
  EXPECT_EQ(a.stored_hot_rows_10, 1);
  EXPECT_DOUBLE_EQ(a.stored_top1_share, 0.4);
  EXPECT_DOUBLE_EQ(a.stored_top10_share, 0.4);
  EXPECT_EQ(a.collisions, 4);
  EXPECT_DOUBLE_EQ(a.collisions_per_batch, 2.0);
  const FeatureInputStats& b = r[1];  // not hashed: no stored-row figures
  EXPECT_EQ(b.hash_size, 0);
  EXPECT_EQ(b.distinct_stored_rows, 0);
  EXPECT_EQ(b.collisions, 0);
  EXPECT_EQ(b.distinct_ids, 3);
}
