// The timeline math: time <-> x, folding sub-pixel ops, finding ops.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <sqlite3.h>
#include <unistd.h>
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QSpinBox>
#include <QDoubleSpinBox>
#include <QComboBox>
#include <QFileInfo>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>
#include <QTimer>
#include <qcustomplot.h>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include "charts/colors.h"
#include "views/compare_view.h"
#include "models/critical_path_model.h"
#include "views/memory_compare.h"
#include "embedscope/engine/workload/scenario.h"
#include "views/scenario_view.h"
#include "core/load_data.h"
#include "views/load_view.h"
#include "views/memory_view.h"
#include "shell/main_window.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/sharding/sharding.h"
#include "models/range_totals_model.h"
#include "models/rank_stats_model.h"
#include "jobs/analysis_job.h"
#include "jobs/run_job.h"
#include "models/sharding_plan_model.h"
#include "core/timeline_math.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"
#include "views/workload_designer.h"
#include "models/workload_model.h"
#include "support/step_sessions.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;
using namespace embedscope::ui::fixtures;

TEST(TimeScale, MapsZoomsAndPans) {
  TimeScale s(0, 1'000'000, 1000);  // 1 us per pixel
  EXPECT_DOUBLE_EQ(s.x(250'000), 250.0);
  EXPECT_EQ(s.t(500), 500'000);
  s.zoom_at(250, 2.0);  // the time under x = 250 stays there
  EXPECT_NEAR(s.x(250'000), 250.0, 1.0);
  EXPECT_EQ(s.t1() - s.t0(), 500'000);
  s.pan(100);  // 100 px = 50 us later
  EXPECT_EQ(s.t0(), 125'000 + 50'000);
  s.pan(-1e9);  // clamped to the extent
  EXPECT_EQ(s.t0(), 0);
  s.zoom_at(0, 1e9);  // never narrower than 1 us
  EXPECT_EQ(s.t1() - s.t0(), 1000);
  s.fit();
  EXPECT_EQ(s.t1(), 1'000'000);
  EXPECT_EQ(format_duration(1'500'000), "1.50 ms");
  EXPECT_EQ(format_duration(999), "999 ns");
}

// tester37: an import whose ranks were days apart labelled its axis "1000000.00 s ... 4000000.00 s".
TEST(AxisTicks, LongAxesTickAtClockStepsAndSayMinutesHoursDays) {
  EXPECT_EQ(axis_tick_ns(8'000, 8), 1'000);            // 1-2-5 below 10 minutes
  EXPECT_EQ(axis_tick_ns(8'800, 8), 2'000);
  EXPECT_EQ(axis_tick_ns(24e9, 8), 5'000'000'000);      // 3 s a tick -> 5 s
  EXPECT_EQ(axis_tick_ns(8 * 400e9, 8), 500'000'000'000);  // 400 s -> 500 s
  EXPECT_EQ(axis_tick_ns(8 * 700e9, 8), 900'000'000'000);  // 11.7 min -> 15 min
  EXPECT_EQ(axis_tick_ns(8 * 5000e9, 8), 7'200'000'000'000);  // 83 min -> 2 h
  EXPECT_EQ(axis_tick_ns(4.458677e15, 8), 10 * 86'400'000'000'000);  // 51.6 days / 8 -> 10 d
  EXPECT_EQ(axis_tick_ns(8 * 30 * 86400e9, 8), 50 * 86'400'000'000'000);  // 30 d -> 50 d (1-2-5 x 10 d)
  EXPECT_EQ(axis_tick_ns(0, 0), 1);
  EXPECT_EQ(format_duration(599'990'000'000), "599.99 s");
  EXPECT_EQ(format_duration(900'000'000'000), "15.0 min");
  EXPECT_EQ(format_duration(7'200'000'000'000), "2.00 h");
  EXPECT_EQ(format_duration(864'000'000'000'000), "10.00 d");
  EXPECT_EQ(format_duration(-900'000'000'000), "-15.0 min");
}

TEST(FoldLane, SubPixelRunsFoldIntoOneBoxWithACount) {
  TimeScale s(0, 1'000'000, 1000);  // 1 us per pixel
  std::vector<sessions::OpRecord> ops{op(0, 100),     op(200, 300),     op(400, 600),  // three ops in pixel 0
                                      op(10'000, 20'000),                               // 10 px wide
                                      op(2'000'000, 2'000'100)};                        // outside the view
  auto boxes = fold_lane(ops, s);
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_EQ(boxes[0].count, 3);
  EXPECT_EQ(boxes[0].first, 0u);
  EXPECT_EQ(boxes[1].count, 1);
  EXPECT_DOUBLE_EQ(boxes[1].x0, 10.0);
  EXPECT_DOUBLE_EQ(boxes[1].x1, 20.0);
  s.show(15'000, 40'000);  // the visible range starts inside the wide op: earlier ops skipped
  boxes = fold_lane(ops, s);
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_EQ(boxes[0].first, 3u);
  EXPECT_DOUBLE_EQ(boxes[0].x0, 0.0);
}

TEST(FoldLane, ARunOfSubPixelOpsOverManyPixelsIsOneBox) {
  TimeScale s(0, 1'000'000, 1000);  // 1 us per pixel
  std::vector<sessions::OpRecord> ops;
  for (int i = 0; i < 20; ++i) ops.push_back(op(100'000 + i * 700, 100'000 + i * 700 + 500));  // 0.5 px, 0.2 px gaps
  ops.push_back(op(200'000, 200'400));  // narrow, but 86.2 px after the run
  ops.push_back(op(200'900, 205'000));  // 4.1 px wide: its own box
  const auto boxes = fold_lane(ops, s);
  ASSERT_EQ(boxes.size(), 3u);
  EXPECT_EQ(boxes[0].count, 20);
  EXPECT_DOUBLE_EQ(boxes[0].x0, 100.0);
  EXPECT_DOUBLE_EQ(boxes[0].x1, 113.8);  // the last op ends at 100 + 19 * 0.7 + 0.5 us
  EXPECT_EQ(boxes[1].count, 1);
  EXPECT_EQ(boxes[1].first, 20u);
  EXPECT_EQ(boxes[2].count, 1);
  EXPECT_DOUBLE_EQ(boxes[2].x1, 205.0);
}

TEST(FindOp, OrderByStartThenRow) {
  std::vector<sessions::OpRecord> a{op(10, 20), op(30, 40)}, b{op(10, 15), op(25, 26)};
  a[0].name_id = 1;
  a[1].name_id = 1;
  b[0].name_id = 1;
  b[1].name_id = 0;  // not a match
  const std::vector<const std::vector<sessions::OpRecord>*> rows{&a, &b};
  const std::vector<bool> match{false, true};
  auto r = find_op(rows, match, std::nullopt, true);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (OpRef{0, 0}));  // start 10, row 0 before row 1
  r = find_op(rows, match, r, true);
  EXPECT_EQ(*r, (OpRef{1, 0}));
  r = find_op(rows, match, r, true);
  EXPECT_EQ(*r, (OpRef{0, 1}));  // 30 (b's 25 does not match)
  EXPECT_FALSE(find_op(rows, match, r, true));
  EXPECT_EQ(*find_op(rows, match, r, false), (OpRef{1, 0}));
  EXPECT_EQ(*find_op(rows, match, std::nullopt, false, 100), (OpRef{0, 1}));  // the last starting before 100
  EXPECT_EQ(*find_op(rows, match, std::nullopt, false, 30), (OpRef{1, 0}));   // before 30: b's 10 after a's 10
  EXPECT_EQ(*find_op(rows, match, std::nullopt, true, 10), (OpRef{0, 0}));    // at or after 10
  EXPECT_EQ(*find_op(rows, match, std::nullopt, true, 11), (OpRef{0, 1}));
}

// The docstring's example, and an op that overlaps an op nested in another (taken) while its
// parent still encloses it (kept rule: only the innermost open op counts).
TEST(TakePartialOverlaps, TakesOnlyTheSpansThatOverlapWithoutNesting) {
  auto op = [](int64_t s, int64_t e) {
    sessions::OpRecord o;
    o.start_ns = s;
    o.end_ns = e;
    return o;
  };
  auto starts = [](const std::vector<sessions::OpRecord>& v) {
    std::vector<int64_t> out;
    for (const auto& o : v) out.push_back(o.start_ns);
    return out;
  };
  std::vector<sessions::OpRecord> ops{op(0, 10), op(5, 15), op(6, 8), op(20, 30)};
  EXPECT_EQ(starts(take_partial_overlaps(ops)), (std::vector<int64_t>{5}));
  EXPECT_EQ(starts(ops), (std::vector<int64_t>{0, 6, 20}));
  // p [0, 100) holds q [10, 20); r [15, 30) overlaps q's end (inside p): taken; s [30, 40) nests in p
  std::vector<sessions::OpRecord> nested{op(0, 100), op(10, 20), op(15, 30), op(30, 40)};
  EXPECT_EQ(starts(take_partial_overlaps(nested)), (std::vector<int64_t>{15}));
  EXPECT_EQ(starts(nested), (std::vector<int64_t>{0, 10, 30}));
  std::vector<sessions::OpRecord> none;
  EXPECT_TRUE(take_partial_overlaps(none).empty());
}
