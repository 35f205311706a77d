// The plan over time (sessions/analysis/plan_over_time.h) from hand-written shards and plan
// changes: a table_wise move, a change to row_wise, a table that never moves, and the version 6
// rows (no types, num_rows -1).
#include <gtest/gtest.h>

#include "embedscope/sessions/analysis/plan_over_time.h"

using namespace embedscope::sessions;

namespace {

ShardRecord tw(int32_t table, const std::string& name, int32_t rank, int64_t rows) {
  ShardRecord s;
  s.table = table;
  s.table_name = name;
  s.sharding_type = "table_wise";
  s.rank = rank;
  s.num_rows = rows;
  s.num_cols = 4;
  return s;
}

std::string str(const PlanSpan& s) {
  return s.table_name + " " + s.sharding_type + " shard " + std::to_string(s.shard_index) + " rank " + std::to_string(s.rank) +
         " rows " + std::to_string(s.row_offset) + "+" + std::to_string(s.num_rows) + " steps " + std::to_string(s.first_step) +
         ".." + std::to_string(s.last_step);
}

}  // namespace

// Steps 0..5: t0 (10 rows) moves 0 -> 1 at step 2 and back to rank 0 at step 4; t1 (7 rows on
// rank 0) becomes row_wise over 2 ranks at step 2 ({4, 3} rows); t2 never moves.
TEST(PlanOverTime, MovesAndATypeChange) {
  const std::vector<ShardRecord> initial = {tw(0, "t0", 0, 10), tw(1, "t1", 0, 7), tw(2, "t2", 1, 3)};
  std::vector<PlanChangeRecord> changes = {
      {4, 0, "t0", 0, 1, 0, 40, "table_wise", "table_wise", 0, 10},
      {2, 1, "t1", 1, 0, 1, 12, "table_wise", "row_wise", 4, 3},  // out of order on purpose
      {2, 0, "t0", 0, 0, 1, 40, "table_wise", "table_wise", 0, 10},
      {2, 1, "t1", 0, 0, 0, 0, "table_wise", "row_wise", 0, 4},
  };
  const auto spans = plan_over_time(initial, changes, 5);
  std::vector<std::string> got;
  for (const PlanSpan& s : spans) got.push_back(str(s));
  EXPECT_EQ(got, (std::vector<std::string>{
                     "t0 table_wise shard 0 rank 0 rows 0+10 steps 0..1",
                     "t0 table_wise shard 0 rank 1 rows 0+10 steps 2..3",
                     "t0 table_wise shard 0 rank 0 rows 0+10 steps 4..5",
                     "t1 table_wise shard 0 rank 0 rows 0+7 steps 0..1",
                     "t1 row_wise shard 0 rank 0 rows 0+4 steps 2..5",
                     "t1 row_wise shard 1 rank 1 rows 4+3 steps 2..5",
                     "t2 table_wise shard 0 rank 1 rows 0+3 steps 0..5",
                 }));
}

// A version 6 row reads with the defaults (table_wise -> table_wise, num_rows -1): a move of the
// whole shard, its rows kept.
TEST(PlanOverTime, VersionSixRowsAreWholeMoves) {
  PlanChangeRecord c;
  c.step = 3;
  c.table = 0;
  c.table_name = "t0";
  c.from_rank = 0;
  c.to_rank = 2;
  const auto spans = plan_over_time({tw(0, "t0", 0, 10)}, {c}, 4);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(str(spans[0]), "t0 table_wise shard 0 rank 0 rows 0+10 steps 0..2");
  EXPECT_EQ(str(spans[1]), "t0 table_wise shard 0 rank 2 rows 0+10 steps 3..4");
  EXPECT_TRUE(plan_over_time({}, {}, 3).empty());
}
