// Per-rank hash collisions from a session's table_storage_json (sessions/analysis/table_storage.h
// rank_hash_collisions): summed over the hashed tables, empty without hashing, unknown (nullopt)
// for files that hold only the tables' totals.
#include <gtest/gtest.h>

#include "embedscope/sessions/analysis/table_storage.h"

namespace ss = embedscope::sessions;

TEST(RankHashCollisions, SumsTheHashedTablesPerRank) {
  // ta: ranks 31 / 35 (66 in all); tb: 10 / 0; tc unhashed (its zeros are not needed)
  const auto c = ss::rank_hash_collisions(
      R"([{"table":"ta","hash_size":50,"hash_collisions":66,"hash_collisions_per_rank":[31,35]},)"
      R"({"table":"tb","hash_size":20,"hash_collisions":10,"hash_collisions_per_rank":[10,0]},)"
      R"({"table":"tc","hash_size":0,"hash_collisions":0}])");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, (std::vector<int64_t>{41, 35}));
}

TEST(RankHashCollisions, NoHashedTableHasNoneAndOlderFilesAreUnknown) {
  const auto none = ss::rank_hash_collisions(R"([{"table":"t0","hash_size":0,"hash_collisions":0}])");
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  // written before the per-rank figures were recorded: only the table's total
  EXPECT_FALSE(ss::rank_hash_collisions(R"([{"table":"t0","hash_size":50,"hash_collisions":66}])").has_value());
  // a simulated run's: null (nothing was hashed)
  EXPECT_FALSE(
      ss::rank_hash_collisions(R"([{"table":"t0","hash_size":50,"hash_collisions":null,"hash_collisions_per_rank":null}])")
          .has_value());
  EXPECT_FALSE(ss::rank_hash_collisions("not json").has_value());
  EXPECT_FALSE(ss::rank_hash_collisions("").has_value());
}
