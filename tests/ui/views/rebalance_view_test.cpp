// Live rebalances in the workbench (issue 17): the timeline's markers (where, and what their
// tooltips say) and the load view's plan over time, on a session written here with one
// rebalance that moved t0 whole and changed t1 from table_wise to row_wise.
#include <gtest/gtest.h>

#include <QApplication>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>

#include <filesystem>

#include "core/rebalance_marks.h"
#include "timeline/timeline_widget.h"
#include "ui/support/ui_fixtures.h"
#include "views/load_view.h"

using namespace embedscope;
using namespace embedscope::ui;
using namespace embedscope::ui::fixtures;

namespace {

// Two ranks, four steps of 500 us ([0, 2000) us), a lookup per rank and step; t0 (10 rows) and
// t1 (8 rows) table_wise on rank 0. After step 1 a rebalance starting at 1000 us and taking
// 1.2 ms moved t0 to rank 1 (40 B) and split t1 row_wise, rows 0-3 staying on rank 0 and 4-7
// going to rank 1 (16 B): 56 B in all.
constexpr const char* kRebalancedWorkload =
    R"({"tables": [{"name": "t0", "num_embeddings": 10}, {"name": "t1", "num_embeddings": 8}]})";
std::string rebalanced_session(const char* workload_json = kRebalancedWorkload, const char* file = "rebalanced.db") {
  const auto path = scratch(file);
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  using sessions::Lane;
  using sessions::OpCategory;
  w.set_metadata("world_size", "2");
  w.set_metadata("workload_json", workload_json);
  std::vector<sessions::OpEvent> ops;
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    for (int s = 0; s < 4; ++s) {
      w.add_step({s, r, s * 500'000, (s + 1) * 500'000, 0.5, 0, 0});
      ops.push_back({r, Lane::compute, OpCategory::lookup, "lookup", s, s * 500'000 + 100'000, s * 500'000 + 200'000, 0, 0});
    }
  }
  w.add_ops(ops);
  sessions::ShardRecord a{0, "t0", "table_wise", -1, 0, 0, 0, 10, 0, 4, 160};
  sessions::ShardRecord b{1, "t1", "table_wise", -1, 0, 0, 0, 8, 0, 4, 128};
  w.add_shards({a, b});
  sessions::RebalanceRecord rb;
  rb.step = 1;
  rb.reason = "every 2 steps";
  rb.moves = 2;
  rb.bytes_moved = 56;
  rb.window_steps = 2;
  rb.imbalance_before = 2.0;
  rb.imbalance_predicted = 1.1;
  rb.imbalance_after = 1.25;
  rb.after_steps = 2;
  rb.start_ns = 1'000'000;
  rb.duration_ns = 1'200'000;
  w.add_rebalances({rb}, {{2, 0, "t0", 0, 0, 1, 40, "table_wise", "table_wise", 0, 10},
                          {2, 1, "t1", 0, 0, 0, 0, "table_wise", "row_wise", 0, 4},
                          {2, 1, "t1", 1, 0, 1, 16, "table_wise", "row_wise", 4, 4}});
  w.close("complete");
  return path.string();
}

}  // namespace

TEST(RebalanceView, TimelineMarksEachRebalanceWithItsText) {
  TimelineWidget w(open_reader(rebalanced_session()));
  w.resize(TimelineWidget::kGutter + 1000, 200);
  w.scale().set_width(1000);
  w.scale().show(0, 2'000'000);  // 0.5 px per us
  ASSERT_EQ(w.rebalance_marks().size(), 1u);
  const RebalanceMark& m = w.rebalance_marks()[0];
  EXPECT_EQ(m.step, 1);
  EXPECT_EQ(m.t_ns, 1'000'000);
  EXPECT_DOUBLE_EQ(w.mark_x(0), TimelineWidget::kGutter + 500.0);
  EXPECT_EQ(m.text,
            "rebalance after step 1: every 2 steps\n"
            "ids max/mean 2.00 before, 1.10 predicted, 1.25 observed after\n"
            "2 table(s) changed, 56 B moved in 1.20 ms\n"
            "t0: rank 0 -> rank 1\n"
            "t1: table_wise -> row_wise over ranks 0,1");
  // the label on the axis and the line across the rows find it; 10 px away nothing does
  EXPECT_EQ(w.mark_at({TimelineWidget::kGutter + 520, 5}), std::optional<size_t>(0));
  EXPECT_EQ(w.mark_at({TimelineWidget::kGutter + 501, w.row_y(1) + 5}), std::optional<size_t>(0));
  EXPECT_EQ(w.mark_at({TimelineWidget::kGutter + 510, w.row_y(1) + 5}), std::nullopt);
  // zoomed to step 0 the mark is out of view
  w.scale().show(0, 500'000);
  EXPECT_EQ(w.mark_at({TimelineWidget::kGutter + 999, 5}), std::nullopt);
  // it is painted: the marker's green at its x (zoomed back), its label over the axis right of
  // the line (the tick label "1.00 ms" at that x is not drawn under it)
  w.scale().show(0, 2'000'000);
  const auto boxes = w.rebalance_label_boxes(w.fontMetrics());
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_DOUBLE_EQ(boxes[0].left(), TimelineWidget::kGutter + 502.0);
  EXPECT_DOUBLE_EQ(boxes[0].top(), 1.0);
  EXPECT_LE(boxes[0].bottom(), TimelineWidget::kAxis);
  QImage img(w.size(), QImage::Format_ARGB32);
  w.render(&img);
  EXPECT_EQ(img.pixelColor(TimelineWidget::kGutter + 500, w.row_y(2) + 3), QColor(0x1a, 0x8a, 0x3a));
  // a session without rebalances has no marks
  TimelineWidget plain(open_reader(busy_session()));
  EXPECT_TRUE(plain.rebalance_marks().empty());
}

// With the workload's rebalance.balance "lookup_time" the figures are lookup ns, and say so.
TEST(RebalanceView, MarkNamesTheBalancedLoadOfTheWorkload) {
  const auto marks = rebalance_marks(*open_reader(rebalanced_session(
      R"({"tables": [{"name": "t0", "num_embeddings": 10}, {"name": "t1", "num_embeddings": 8}],
          "rebalance": {"every": 2, "balance": "lookup_time"}})",
      "rebalanced_lookup_time.db")));
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].text.substr(0, marks[0].text.find("\n2 table")),
            "rebalance after step 1: every 2 steps\n"
            "lookup ns max/mean 2.00 before, 1.10 predicted, 1.25 observed after");
}

TEST(RebalanceView, LoadViewShowsThePlanOverTime) {
  LoadView view(open_reader(rebalanced_session()));
  view.resize(1000, 1200);
  QTableWidget* t = view.plan_table();
  EXPECT_FALSE(t->isHidden());
  ASSERT_EQ(t->rowCount(), 5);
  ASSERT_EQ(t->columnCount(), 6);
  const char* want[5][6] = {{"t0", "table_wise", "0", "rank 0", "rows 0-9", "steps 0-1"},
                            {"t0", "table_wise", "0", "rank 1", "rows 0-9", "steps 2-3"},
                            {"t1", "table_wise", "0", "rank 0", "rows 0-7", "steps 0-1"},
                            {"t1", "row_wise", "0", "rank 0", "rows 0-3", "steps 2-3"},
                            {"t1", "row_wise", "1", "rank 1", "rows 4-7", "steps 2-3"}};
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 6; ++c) EXPECT_EQ(t->item(r, c)->text().toStdString(), want[r][c]) << r << "," << c;
  EXPECT_EQ(t->horizontalHeaderItem(5)->text(), "steps");
  // without plan changes the table stays hidden
  LoadView plain(open_reader(busy_session()));
  EXPECT_TRUE(plain.plan_table()->isHidden());
}
