// The timeline widget rendered offscreen, pixels checked where ops must and must not be.
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
#include <tuple>
#include <vector>
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

TEST(TimelineWidget, DrawsOpsWhereTheyAreAndNothingElsewhere) {
  auto session = std::make_shared<const sessions::SessionReader>(fixture_session());
  TimelineWidget w(session);
  w.resize(TimelineWidget::kGutter + 1000, 200);  // 1 px per us
  w.scale().fit();
  ASSERT_EQ(w.rows(), 4u);
  const QImage img = w.grab().toImage();
  auto pixel = [&](int64_t t_ns, size_t row) {
    const int x = TimelineWidget::kGutter + static_cast<int>(w.scale().x(t_ns));
    return img.pixelColor(x, w.row_y(row) + TimelineWidget::kRowHeight / 2);
  };
  EXPECT_EQ(pixel(250'000, 0), category_color(sessions::OpCategory::lookup));  // rank 0 compute
  EXPECT_EQ(pixel(700'000, 1), category_color(sessions::OpCategory::comm));    // rank 0 comm
  EXPECT_NE(pixel(450'000, 0), category_color(sessions::OpCategory::lookup));  // gap between ops
  EXPECT_NE(pixel(250'000, 2), category_color(sessions::OpCategory::lookup));  // rank 1 is idle
  w.scale().show(500'000, 600'000);  // zoomed into the comm op: it fills the row
  const QImage zoomed = w.grab().toImage();
  EXPECT_EQ(zoomed.pixelColor(TimelineWidget::kGutter + 500, w.row_y(1) + 10), category_color(sessions::OpCategory::comm));
  EXPECT_NE(zoomed.pixelColor(TimelineWidget::kGutter + 500, w.row_y(0) + 10), category_color(sessions::OpCategory::lookup));
}

TEST(TimelineWidget, AxisLabelsAreWholeOrNotDrawn) {
  auto session = std::make_shared<const sessions::SessionReader>(fixture_session());
  TimelineWidget w(session);
  w.resize(TimelineWidget::kGutter + 1000, 200);
  (void)w.grab();  // laid out: the scale is 1000 px wide
  w.scale().show(0, 810'000);  // ticks every 200 us: the one at 800 us falls 12 px before the right edge
  ASSERT_NEAR(w.scale().x(800'000), 987.7, 0.5);
  const QImage img = w.grab().toImage();
  const QColor background = img.pixelColor(TimelineWidget::kGutter + 700, 2);  // between the 400 and 600 us labels
  int ink = 0;
  for (int x = TimelineWidget::kGutter + 991; x < img.width(); ++x)
    for (int y = 2; y < TimelineWidget::kAxis - 7; ++y) ink += img.pixelColor(x, y) != background;
  EXPECT_EQ(ink, 0) << "a clipped '800.00 us' label at the right edge";
  int left = 0;  // the label at 600 us is drawn
  const int x600 = TimelineWidget::kGutter + static_cast<int>(w.scale().x(600'000));
  for (int x = x600 + 3; x < x600 + 40; ++x)
    for (int y = 2; y < TimelineWidget::kAxis - 7; ++y) left += img.pixelColor(x, y) != background;
  EXPECT_GT(left, 0);
}

TEST(TimelineWidget, CommunicationUnderComputeIsShadedAsHidden) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_overlap_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.add_lane({0, 0, "compute", "thread"});
    w.add_lane({0, 1, "comm", "thread"});
    w.add_step({0, 0, 0, 1'000'000, 0.5, 0, 0});
    // compute [100, 400) us, communication [300, 600) us: [300, 400) hidden, [400, 600) exposed
    w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::dense, "dense", 0, 100'000, 400'000, 0, 0},
               {0, sessions::Lane::comm, sessions::OpCategory::comm, "a2a", 0, 300'000, 600'000, 8, 1}});
    w.close("complete");
  }
  TimelineWidget w(std::make_shared<const sessions::SessionReader>(path.string()));
  w.resize(TimelineWidget::kGutter + 1000, 120);
  w.scale().show(0, 1'000'000);
  const QImage img = w.grab().toImage();
  auto at = [&](int64_t t) {
    return img.pixelColor(TimelineWidget::kGutter + static_cast<int>(w.scale().x(t)), w.row_y(1) + 10);
  };
  EXPECT_EQ(at(350'000), hidden_comm_color());
  EXPECT_EQ(at(500'000), category_color(sessions::OpCategory::comm));
}

// busy_session's critical path (see CriticalPathModel's test): step 0 runs rank 1's lookup
// [150, 250) us (row 2), the all-to-all from 250 to 300 (row 1), rank 0's dense part to 500
// (row 0); step 1 rank 0's lookup [600, 700) and its gradient all-to-all [700, 800). Each step's
// path covers its window with untraced gaps at its edges: rank 1's [0, 150) before its lookup,
// rank 0's [500, 600) and [800, 1000): 8 segments, a gap drawn dotted on its rank's first row.
TEST(TimelineWidget, DrawsTheCriticalPathUnderTheOpsOnIt) {
  auto w = busy_timeline();
  sessions::SessionReader r(busy_session());
  std::vector<sessions::PathSegment> path;
  for (const auto& step : sessions::analyze(r).critical_paths) path.insert(path.end(), step.segments.begin(), step.segments.end());
  ASSERT_EQ(path.size(), 8u);
  using Kind = sessions::PathSegment::Kind;
  const std::vector<std::tuple<Kind, int32_t, int64_t, int64_t>> expected = {
      {Kind::gap, 1, 0, 150'000},       {Kind::op, 1, 150'000, 250'000}, {Kind::op, 0, 250'000, 300'000},
      {Kind::op, 0, 300'000, 500'000},  {Kind::gap, 0, 500'000, 600'000}, {Kind::op, 0, 600'000, 700'000},
      {Kind::op, 0, 700'000, 800'000},  {Kind::gap, 0, 800'000, 1'000'000}};
  for (size_t i = 0; i < path.size(); ++i)
    EXPECT_EQ(std::make_tuple(path[i].kind, path[i].rank, path[i].start_ns, path[i].end_ns), expected[i]) << "segment " << i;
  w->set_critical_path(path);
  const QImage img = w->grab().toImage();
  auto under = [&](int us, size_t row) {
    return img.pixelColor(TimelineWidget::kGutter + us, w->row_y(row) + TimelineWidget::kRowHeight - 3);
  };
  EXPECT_EQ(under(200, 2), critical_path_color());  // rank 1's lookup bounds step 0
  EXPECT_EQ(under(275, 1), critical_path_color());  // the all-to-all after rank 1 joined
  EXPECT_EQ(under(400, 0), critical_path_color());  // rank 0's dense part
  EXPECT_EQ(under(750, 1), critical_path_color());  // step 1's gradient all-to-all
  EXPECT_NE(under(150, 0), critical_path_color());  // rank 0's lookup of step 0 is not on the path
  EXPECT_NE(under(400, 2), critical_path_color());  // nor rank 1's dense part
  // the dotted gap after step 1's all-to-all, on rank 0's first row: some of its pixels are the
  // path's colour, none on the row of rank 1 there
  int dots = 0;
  for (int us = 810; us < 990; ++us) {
    dots += under(us, 0) == critical_path_color();
    EXPECT_NE(under(us, 2), critical_path_color()) << us;
  }
  EXPECT_GT(dots, 30);
  EXPECT_LT(dots, 180);  // dotted, not a solid bar
  // the jump from rank 1's lookup (row 2) to the all-to-all (row 1) at 250 us
  EXPECT_EQ(img.pixelColor(TimelineWidget::kGutter + 250, w->row_y(2) + 8), critical_path_color());
  w->set_critical_path({});
  EXPECT_NE(w->grab().toImage().pixelColor(TimelineWidget::kGutter + 200, w->row_y(2) + TimelineWidget::kRowHeight - 3),
            critical_path_color());

  TimelineView view(std::make_shared<const sessions::SessionReader>(busy_session()));
  view.show_critical_path(true);
  QTRY_VERIFY(!view.critical_path_job()->busy());  // analysed off the GUI thread
  EXPECT_EQ(view.timeline()->critical_path().size(), 8u);
  view.show_critical_path(false);
  EXPECT_TRUE(view.timeline()->critical_path().empty());
  view.show_critical_path(true);  // from the analysis already made
  EXPECT_EQ(view.timeline()->critical_path().size(), 8u);
}

TEST(TimelineWidget, ClickSelectsTheOpUnderThePixelAndShowsItsDetails) {
  auto w = busy_timeline();
  QTest::mouseClick(w.get(), Qt::LeftButton, Qt::NoModifier, at_us(*w, 650, 0));
  ASSERT_TRUE(w->selected().has_value());
  EXPECT_EQ(*w->selected(), (OpRef{0, 2}));  // rank 0's second lookup, [600, 700) us
  const QString d = w->details(*w->selected());
  EXPECT_TRUE(d.contains("<b>lookup</b>") && d.contains("rank 0, compute lane") && d.contains("step 1") &&
              d.contains("start 600.0 us") && d.contains("duration 100.0 us"))
      << d.toStdString();
  const QImage img = w->grab().toImage();  // outlined in the text colour, inside it the lookup colour
  EXPECT_EQ(img.pixelColor(TimelineWidget::kGutter + 650, w->row_y(0) + 1), w->palette().text().color());
  EXPECT_EQ(img.pixelColor(TimelineWidget::kGutter + 650, w->row_y(0) + 11), category_color(sessions::OpCategory::lookup));
  // the collective: its group, sequence, peers and splits from the collective records
  QTest::mouseClick(w.get(), Qt::LeftButton, Qt::NoModifier, at_us(*w, 250, 1));
  ASSERT_TRUE(w->selected().has_value());
  EXPECT_EQ(*w->selected(), (OpRef{1, 0}));
  const QString c = w->details(*w->selected());
  EXPECT_TRUE(c.contains("group world, sequence 1, float32") && c.contains("peers 0, 1") &&
              c.contains("elements sent to each peer: 3, 12") && c.contains("received from each: 3, 13") &&
              c.contains("(100 bytes)"))
      << c.toStdString();
  QTest::mouseClick(w.get(), Qt::LeftButton, Qt::NoModifier, at_us(*w, 550, 0));  // nothing there
  EXPECT_FALSE(w->selected().has_value());
}

TEST(TimelineWidget, ZoomHistoryBackAndForwardRestoreTheExactRanges) {
  auto w = busy_timeline();
  w->navigate({0, 1'000'000});
  const ViewRange first = w->view();
  w->navigate({100'000, 200'000});
  w->navigate({300'123, 400'456});
  QTest::keyClick(w.get(), Qt::Key_Backspace);
  EXPECT_EQ(w->view(), (ViewRange{100'000, 200'000}));
  QTest::keyClick(w.get(), Qt::Key_Left, Qt::AltModifier);
  EXPECT_EQ(w->view(), first);
  EXPECT_FALSE(w->history().can_back());
  QTest::keyClick(w.get(), Qt::Key_Backspace, Qt::ShiftModifier);
  EXPECT_EQ(w->view(), (ViewRange{100'000, 200'000}));
  QTest::keyClick(w.get(), Qt::Key_Right, Qt::AltModifier);
  EXPECT_EQ(w->view(), (ViewRange{300'123, 400'456}));
  EXPECT_FALSE(w->history().can_forward());
  // successive zoom steps are one entry; a new visit drops the forward entries
  w->back();
  QTest::keyClick(w.get(), Qt::Key_W);
  QTest::keyClick(w.get(), Qt::Key_W);
  const ViewRange zoomed = w->view();
  EXPECT_LT(zoomed.t1 - zoomed.t0, 100'000);
  EXPECT_FALSE(w->history().can_forward());
  w->back();
  EXPECT_EQ(w->view(), (ViewRange{100'000, 200'000}));
  w->forward();
  EXPECT_EQ(w->view(), zoomed);
  // fit a step: keys 0..9 (step n: tester56 F2) and fit_step
  QTest::keyClick(w.get(), Qt::Key_1);
  EXPECT_EQ(w->view(), (ViewRange{500'000, 1'000'000}));
  EXPECT_TRUE(w->fit_step(0));
  EXPECT_EQ(w->view(), (ViewRange{0, 500'000}));
  EXPECT_FALSE(w->fit_step(7));
  w->back();
  EXPECT_EQ(w->view(), (ViewRange{500'000, 1'000'000}));
  w->navigate({0, 1'000'000});
  QTest::mouseDClick(w.get(), Qt::LeftButton, Qt::NoModifier, at_us(*w, 550, 0));  // in step 1
  EXPECT_EQ(w->view(), (ViewRange{500'000, 1'000'000}));
}

// Issue 12: spans of one lane that overlap without nesting (imported traces) are kept and drawn on
// an overflow row under their lane, so neither hides the other; nested spans stay on the lane.
TEST(TimelineWidget, PartiallyOverlappingSpansGetAnOverflowRow) {
  using sessions::Lane;
  using sessions::OpCategory;
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_overlap_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "1");
    w.add_lane({0, 0, "trainer", "thread"});
    // a [0, 10) us, b [5, 15) overlaps a's end, c [6, 8) nests in a, d [20, 30) follows
    w.add_ops({{0, Lane::compute, OpCategory::dense, "a", 0, 0, 10'000, 0, 0},
               {0, Lane::compute, OpCategory::dense, "b", 0, 5'000, 15'000, 0, 0},
               {0, Lane::compute, OpCategory::lookup, "c", 0, 6'000, 8'000, 0, 0},
               {0, Lane::compute, OpCategory::dense, "d", 0, 20'000, 30'000, 0, 0}});
    w.close("complete");
  }
  auto session = std::make_shared<const sessions::SessionReader>(path.string());
  TimelineWidget tw(session);
  ASSERT_EQ(tw.rows(), 2u);
  EXPECT_EQ(tw.row_label(0).toStdString(), "rank 0 trainer");
  EXPECT_EQ(tw.row_label(1).toStdString(), "rank 0 trainer (overlap)");  // the lane name in the tooltip: "trainer (overlapping)"
  auto starts = [&](size_t row) {
    std::vector<int64_t> v;
    for (const auto& o : tw.row_ops(row)) v.push_back(o.start_ns);
    return v;
  };
  EXPECT_EQ(starts(0), (std::vector<int64_t>{0, 6'000, 20'000}));
  EXPECT_EQ(starts(1), (std::vector<int64_t>{5'000}));
  // the view spans every op: the last op by start (d) ends last here, b ends after a
  EXPECT_EQ(tw.scale().t1(), 30'000);
  std::filesystem::remove(path);
}
