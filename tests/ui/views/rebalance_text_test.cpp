// The workbench's words for the changes of type a live rebalance makes (issue 17,
// core/rebalance_marks.h): a table split into column blocks names its ranks and columns, a
// table joined back to table_wise names its rank, and the plan-over-time rows give a column
// shard's columns beside its rows.
#include <gtest/gtest.h>

#include "core/rebalance_marks.h"
#include "embedscope/sessions/analysis/plan_over_time.h"

using namespace embedscope;

TEST(RebalanceText, ColumnBlocksAndAChangeBack) {
  sessions::RebalanceRecord r;
  r.step = 3;
  r.reason = "every 2 steps";
  r.moves = 2;
  r.bytes_moved = 2000;
  r.imbalance_before = 2.0;
  r.imbalance_predicted = 1.0;
  r.imbalance_after = -1;
  r.duration_ns = 1'000'000;
  // t3 (50 rows x 16) from rank 0 into blocks of 8 columns on ranks 0 and 1; t0 back from
  // row_wise to table_wise on rank 1 (one row, from_rank -1)
  const std::vector<sessions::PlanChangeRecord> changes = {
      {4, 0, "t0", 0, -1, 1, 200, "row_wise", "table_wise", 0, 10, 0, 4},
      {4, 3, "t3", 0, 0, 0, 0, "table_wise", "column_wise", 0, 50, 0, 8},
      {4, 3, "t3", 1, 0, 1, 1800, "table_wise", "column_wise", 0, 50, 8, 8}};
  EXPECT_EQ(ui::rebalance_text(r, changes, false),
            "rebalance after step 3: every 2 steps\n"
            "ids max/mean 2.00 before, 1.00 predicted, not observed after\n"
            "2 table(s) changed, 2.0 KiB moved in 1.00 ms\n"
            "t0: row_wise -> table_wise on rank 1\n"
            "t3: table_wise -> column_wise over ranks 0,1 (columns 0-7, 8-15)");
  std::vector<sessions::ShardRecord> initial = {{3, "t3", "table_wise", -1, 0, 0, 0, 50, 0, 16, -1}};
  const auto spans = sessions::plan_over_time(initial, {changes[1], changes[2]}, 5);
  const auto rows = ui::plan_rows(spans);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].rows, "rows 0-49");  // table_wise, steps 0-3
  EXPECT_EQ(rows[0].steps, "steps 0-3");
  EXPECT_EQ(rows[1].sharding_type, "column_wise");
  EXPECT_EQ(rows[1].rows, "rows 0-49, columns 0-7");
  EXPECT_EQ(rows[2].rank, "rank 1");
  EXPECT_EQ(rows[2].rows, "rows 0-49, columns 8-15");
  EXPECT_EQ(rows[2].steps, "steps 4-5");
}
