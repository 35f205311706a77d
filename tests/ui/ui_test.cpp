// The workbench as a person uses it, offscreen: the timeline math, the folding, the item model
// (QAbstractItemModelTester), and the timeline widget rendered to an image with pixels checked
// where ops must and must not be.
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
#include "core/scenario.h"
#include "views/scenario_view.h"
#include "core/load_data.h"
#include "views/load_view.h"
#include "views/memory_view.h"
#include "shell/main_window.h"
#include "embedscope/engine/comm.h"
#include "embedscope/engine/sharding.h"
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

using namespace embedscope;
using namespace embedscope::ui;

namespace {
sessions::OpRecord op(int64_t s, int64_t e, sessions::OpCategory c = sessions::OpCategory::lookup) {
  sessions::OpRecord o;
  o.start_ns = s;
  o.end_ns = e;
  o.category = c;
  return o;
}

// Two ranks; rank 0 computes [100, 400) us and communicates [500, 900) us; rank 1 idles.
std::string fixture_session() {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.set_metadata("samples_per_step", "8");
  w.set_metadata("workload_name", "fixture");
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    w.add_step({0, r, 0, 1'000'000, 0.5, 0, 0});
  }
  w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", 0, 100'000, 400'000, 0, 0},
             {0, sessions::Lane::comm, sessions::OpCategory::comm, "output_dist/all_to_all", 0, 500'000, 900'000, 64, 3}});
  w.add_load({0, 0, 0, 0, 10, 5, 80, 256, 1000});
  w.close("complete");
  return path.string();
}

// Two ranks, two steps ([0, 500) and [500, 1000) us), ops in us:
//   row 0 rank 0 compute: lookup [100, 200), dense [300, 500), lookup [600, 700)
//   row 1 rank 0 comm:    output_dist/all_to_all [200, 300) 100 B seq 1, grad_dist/all_to_all [700, 800) 50 B seq 2
//   row 2 rank 1 compute: lookup [150, 250), dense [350, 450)
//   row 3 rank 1 comm:    output_dist/all_to_all [250, 320) 100 B seq 1
std::string busy_session() {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_busy_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  using sessions::Lane;
  using sessions::OpCategory;
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    w.add_step({0, r, 0, 500'000, 0.5, 0, 0});
    w.add_step({1, r, 500'000, 1'000'000, 0.4, 0, 0});
  }
  w.add_ops({{0, Lane::compute, OpCategory::lookup, "lookup", 0, 100'000, 200'000, 0, 0},
             {0, Lane::compute, OpCategory::dense, "dense", 0, 300'000, 500'000, 0, 0},
             {0, Lane::compute, OpCategory::lookup, "lookup", 1, 600'000, 700'000, 0, 0},
             {0, Lane::comm, OpCategory::comm, "output_dist/all_to_all", 0, 200'000, 300'000, 100, 1},
             {0, Lane::comm, OpCategory::comm, "grad_dist/all_to_all", 1, 700'000, 800'000, 50, 2},
             {1, Lane::compute, OpCategory::lookup, "lookup", 0, 150'000, 250'000, 0, 0},
             {1, Lane::compute, OpCategory::dense, "dense", 0, 350'000, 450'000, 0, 0},
             {1, Lane::comm, OpCategory::comm, "output_dist/all_to_all", 0, 250'000, 320'000, 100, 1}});
  sessions::CollectiveRecord c;
  c.rank = 0;
  c.op = "all_to_all";
  c.name = "output_dist/all_to_all";
  c.group = "world";
  c.sequence = 1;
  c.dtype = "float32";
  c.start_ns = 200'000;
  c.end_ns = 300'000;
  c.bytes_sent = 48;
  c.bytes_received = 52;
  c.peers = {0, 1};
  c.send_elements = {3, 12};
  c.recv_elements = {3, 13};
  w.add_collective(c);
  w.close("complete");
  return path.string();
}

// A widget of 1000 px of time showing [0, 1000) us: 1 px per us.
std::unique_ptr<TimelineWidget> busy_timeline() {
  auto w = std::make_unique<TimelineWidget>(std::make_shared<const sessions::SessionReader>(busy_session()));
  w->resize(TimelineWidget::kGutter + 1000, 200);
  w->scale().set_width(1000);  // the resize event of a hidden widget comes later
  w->scale().show(0, 1'000'000);
  return w;
}
QPoint at_us(const TimelineWidget& w, int us, size_t row) {
  return {TimelineWidget::kGutter + us, w.row_y(row) + TimelineWidget::kRowHeight / 2};
}
}  // namespace

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

TEST(RankStatsModel, PassesTheModelTesterAndShowsFigures) {
  sessions::SessionReader r(fixture_session());
  RankStatsModel m(sessions::analyze(r));
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_EQ(m.rowCount(), 2);
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::Compute), Qt::UserRole).toLongLong(), 300'000);
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::Comm), Qt::UserRole).toLongLong(), 400'000);
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::Compute)).toString(), "300.0 us");
  EXPECT_EQ(m.data(m.index(0, RankStatsModel::IdsLookedUp)).toLongLong(), 10);
  EXPECT_EQ(m.headerData(RankStatsModel::ExposedComm, Qt::Horizontal).toString(), "exposed comm");
}

// busy_session's critical paths by hand: step 0 runs rank 1's lookup [150, 250) us, the
// output all-to-all from rank 1's join at 250 to 300, rank 0's dense part [300, 500); step 1
// rank 0's lookup [600, 700) and its gradient all-to-all [700, 800). 550 us in all.
TEST(CriticalPathModel, PassesTheModelTesterAndShowsThePath) {
  sessions::SessionReader r(busy_session());
  const auto st = sessions::analyze(r);
  CriticalPathModel m(st, r);
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  std::map<QString, qlonglong> on_path;
  for (int i = 0; i < m.rowCount(); ++i)
    on_path[m.data(m.index(i, CriticalPathModel::Op)).toString()] = m.data(m.index(i, CriticalPathModel::OnPath), Qt::UserRole).toLongLong();
  EXPECT_EQ(on_path, (std::map<QString, qlonglong>{{"dense", 200'000}, {"lookup", 200'000},
                                                   {"output_dist/all_to_all", 50'000}, {"grad_dist/all_to_all", 100'000}}));
  for (int i = 0; i < m.rowCount(); ++i)
    if (m.data(m.index(i, CriticalPathModel::Op)).toString() == "dense") {
      EXPECT_EQ(m.data(m.index(i, CriticalPathModel::Share)).toString(), "36.4 %");
      EXPECT_EQ(m.data(m.index(i, CriticalPathModel::TopRank)).toInt(), 0);
      EXPECT_EQ(m.data(m.index(i, CriticalPathModel::StepsBounded)).toLongLong(), 1);
    }
  CollectiveTimesModel c(st, r);
  QAbstractItemModelTester ctester(&c, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_EQ(c.rowCount(), 2);
  // most exposed first: output_dist 100 + 70 us over 2 steps (rank 0 waited 50 us for rank 1)
  EXPECT_EQ(c.data(c.index(0, CollectiveTimesModel::Name)).toString(), "output_dist/all_to_all");
  EXPECT_EQ(c.data(c.index(0, CollectiveTimesModel::Exposed), Qt::UserRole).toLongLong(), 85'000);
  EXPECT_EQ(c.data(c.index(0, CollectiveTimesModel::Waiting), Qt::UserRole).toLongLong(), 25'000);
  EXPECT_EQ(c.data(c.index(0, CollectiveTimesModel::Count)).toString(), "1.0");  // 2 ops over 2 steps
  EXPECT_EQ(c.data(c.index(1, CollectiveTimesModel::Time)).toString(), "50.0 us");
}

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

TEST(TimelineView, SearchFieldShowsItsWholePlaceholder) {
  TimelineView view(std::make_shared<const sessions::SessionReader>(fixture_session()));
  view.resize(1280, 700);
  view.show();
  QApplication::processEvents();
  auto* search = view.findChild<QLineEdit*>();
  ASSERT_NE(search, nullptr);
  EXPECT_EQ(search->placeholderText(), "find op by name (Ctrl+F)");
  EXPECT_GE(search->width(), search->fontMetrics().horizontalAdvance(search->placeholderText()) + 30)
      << "'find op by name (...' clipped";
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
// (row 0); step 1 rank 0's lookup [600, 700) and its gradient all-to-all [700, 800).
TEST(TimelineWidget, DrawsTheCriticalPathUnderTheOpsOnIt) {
  auto w = busy_timeline();
  sessions::SessionReader r(busy_session());
  std::vector<sessions::PathSegment> path;
  for (const auto& step : sessions::analyze(r).critical_paths) path.insert(path.end(), step.segments.begin(), step.segments.end());
  ASSERT_EQ(path.size(), 5u);
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
  // the jump from rank 1's lookup (row 2) to the all-to-all (row 1) at 250 us
  EXPECT_EQ(img.pixelColor(TimelineWidget::kGutter + 250, w->row_y(2) + 8), critical_path_color());
  w->set_critical_path({});
  EXPECT_NE(w->grab().toImage().pixelColor(TimelineWidget::kGutter + 200, w->row_y(2) + TimelineWidget::kRowHeight - 3),
            critical_path_color());

  TimelineView view(std::make_shared<const sessions::SessionReader>(busy_session()));
  view.show_critical_path(true);
  QTRY_VERIFY(!view.critical_path_job()->busy());  // analysed off the GUI thread
  EXPECT_EQ(view.timeline()->critical_path().size(), 5u);
  view.show_critical_path(false);
  EXPECT_TRUE(view.timeline()->critical_path().empty());
  view.show_critical_path(true);  // from the analysis already made
  EXPECT_EQ(view.timeline()->critical_path().size(), 5u);
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

TEST(TimelineView, RangeTotalsEqualTheSumsByHand) {
  auto w = busy_timeline();
  // Shift+drag from 150 us to 650 us
  QTest::mousePress(w.get(), Qt::LeftButton, Qt::ShiftModifier, at_us(*w, 150, 0));
  QTest::mouseMove(w.get(), at_us(*w, 400, 0));
  QTest::mouseRelease(w.get(), Qt::LeftButton, Qt::ShiftModifier, at_us(*w, 650, 0));
  ASSERT_TRUE(w->range().has_value());
  EXPECT_EQ(*w->range(), (ViewRange{150'000, 650'000}));
  // clipped to [150, 650): lookup 50 + 50 (rank 0) + 100 (rank 1); dense 200 + 100;
  // output_dist 100 + 70 with 100 + 100 bytes; grad_dist is outside
  const auto all = w->totals(false);
  ASSERT_EQ(all.size(), 3u);
  const auto& names = std::vector<std::string>{"dense", "lookup", "output_dist/all_to_all"};
  const int64_t count[] = {2, 3, 2}, total[] = {300'000, 200'000, 170'000}, bytes[] = {0, 0, 200};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(all[i].rank, -1);
    EXPECT_EQ(all[i].count, count[i]) << names[i];
    EXPECT_EQ(all[i].total_ns, total[i]) << names[i];
    EXPECT_EQ(all[i].bytes, bytes[i]) << names[i];
  }
  // the drag along the axis selects a range too
  QTest::mousePress(w.get(), Qt::LeftButton, Qt::NoModifier, QPoint(TimelineWidget::kGutter + 600, 5));
  QTest::mouseMove(w.get(), QPoint(TimelineWidget::kGutter + 700, 5));
  QTest::mouseRelease(w.get(), Qt::LeftButton, Qt::NoModifier, QPoint(TimelineWidget::kGutter + 800, 5));
  EXPECT_EQ(*w->range(), (ViewRange{600'000, 800'000}));
  EXPECT_EQ(w->view(), (ViewRange{0, 1'000'000}));  // no pan

  // the page: the model under the tester, all ranks or per rank
  TimelineView view(std::make_shared<const sessions::SessionReader>(busy_session()));
  QAbstractItemModelTester tester(view.totals(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  EXPECT_EQ(view.totals()->rowCount(), 0);
  view.timeline()->set_range(ViewRange{150'000, 650'000});
  auto* m = view.totals();
  ASSERT_EQ(m->rowCount(), 3);
  EXPECT_EQ(m->data(m->index(0, RangeTotalsModel::Name)).toString(), "dense");
  EXPECT_EQ(m->data(m->index(0, RangeTotalsModel::Rank)).toString(), "all");
  EXPECT_EQ(m->data(m->index(1, RangeTotalsModel::Count)).toLongLong(), 3);
  EXPECT_EQ(m->data(m->index(1, RangeTotalsModel::Total), Qt::UserRole).toLongLong(), 200'000);
  EXPECT_DOUBLE_EQ(m->data(m->index(1, RangeTotalsModel::Mean), Qt::UserRole).toDouble(), 200'000.0 / 3);
  EXPECT_EQ(m->data(m->index(2, RangeTotalsModel::Bytes), Qt::UserRole).toLongLong(), 200);
  EXPECT_EQ(m->data(m->index(0, RangeTotalsModel::Total)).toString(), "300.0 us");
  view.set_per_rank(true);
  ASSERT_EQ(m->rowCount(), 6);
  EXPECT_EQ(m->data(m->index(0, RangeTotalsModel::Name)).toString(), "dense");  // rank 0: 200 us
  EXPECT_EQ(m->data(m->index(0, RangeTotalsModel::Rank), Qt::UserRole).toInt(), 0);
  EXPECT_EQ(m->data(m->index(0, RangeTotalsModel::Total), Qt::UserRole).toLongLong(), 200'000);
  EXPECT_EQ(m->data(m->index(5, RangeTotalsModel::Name)).toString(), "output_dist/all_to_all");  // rank 1: 70 us
  EXPECT_EQ(m->data(m->index(5, RangeTotalsModel::Total), Qt::UserRole).toLongLong(), 70'000);
  view.timeline()->set_range(std::nullopt);
  EXPECT_EQ(m->rowCount(), 0);
}

TEST(TimelineView, SearchNextAndPreviousInTimeOrderAndCentresTheMatch) {
  TimelineView view(std::make_shared<const sessions::SessionReader>(busy_session()));
  TimelineWidget& w = *view.timeline();
  w.resize(TimelineWidget::kGutter + 1000, 200);
  w.navigate({0, 100'000});  // a 100 us window
  view.search_box()->setText("ALL_TO_ALL");  // case-insensitive
  std::vector<OpRef> got;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(view.find_next(true));
    got.push_back(*w.selected());
  }
  // by start: rank 0 output_dist (200 us), rank 1 output_dist (250 us), rank 0 grad_dist (700 us), then around
  EXPECT_EQ(got, (std::vector<OpRef>{{1, 0}, {3, 0}, {1, 1}, {1, 0}}));
  ASSERT_TRUE(view.find_next(false));  // previous of the first wraps to the last
  EXPECT_EQ(*w.selected(), (OpRef{1, 1}));
  ASSERT_TRUE(view.find_next(false));
  EXPECT_EQ(*w.selected(), (OpRef{3, 0}));
  // grad_dist (100 us) was wider than 80 % of the 100 us view: shown with 10 % either side
  // (a 120 us span); this match is centred with that span kept: 285 us -+ 60 us
  EXPECT_EQ(w.view(), (ViewRange{225'000, 345'000}));
  EXPECT_TRUE(view.details()->text().contains("output_dist/all_to_all"));
  // Enter in the box is "next"; F3 / Shift+F3 are shortcuts of the page
  view.search_box()->setText("lookup");
  QTest::keyClick(view.search_box(), Qt::Key_Return);
  EXPECT_EQ(*w.selected(), (OpRef{0, 2}));  // after rank 1's output_dist (250 us): rank 0's lookup at 600 us
  // F3 / Shift+F3 and Ctrl+F are shortcuts of the page (its window must be active)
  view.show();
  view.activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&view));
  w.setFocus();
  QTest::keyClick(&w, Qt::Key_F3);
  EXPECT_EQ(*w.selected(), (OpRef{0, 0}));  // lookup at 100 us: wrapped around
  QTest::keyClick(&w, Qt::Key_F3, Qt::ShiftModifier);
  EXPECT_EQ(*w.selected(), (OpRef{0, 2}));
  QTest::keyClick(&w, Qt::Key_F, Qt::ControlModifier);
  EXPECT_TRUE(view.search_box()->hasFocus());
  view.search_box()->setText("nothing like this");
  EXPECT_FALSE(view.find_next(true));
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
  // fit a step: keys 1..9 and fit_step
  QTest::keyClick(w.get(), Qt::Key_2);
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

TEST(LoadView, RowHistogramWithShardBoundaries) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_rows_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.set_metadata("workload_json", R"({"tables": [{"name": "t_a", "num_embeddings": 1000}, {"name": "t_b", "num_embeddings": 10}]})");
    w.set_metadata("sharding_plan_json",
                   R"({"tables": [{"name": "t_a", "sharding_type": "row_wise", "shards": [)"
                   R"({"rank": 0, "row_offset": 0, "num_rows": 500}, {"rank": 1, "row_offset": 500, "num_rows": 500}]},)"
                   R"({"name": "t_b", "sharding_type": "table_wise", "shards": [{"rank": 1, "row_offset": 0, "num_rows": 10}]}]})");
    w.add_id_histogram({{0, 0, 0, 0, 4, 5}, {1, 0, 0, 0, 4, 2}, {1, 0, 255, 997, 1000, 4}, {0, 1, 3, 3, 4, 9}});
    w.close("complete");
  }
  sessions::SessionReader r(path.string());
  RowHistogram h = row_histogram(r, 0);
  EXPECT_EQ(h.table, "t_a");
  ASSERT_EQ(h.ids.size(), 256u);
  EXPECT_EQ(h.ids[0], 7);  // both ranks
  EXPECT_EQ(h.ids[1], 0);
  EXPECT_EQ(h.ids[255], 4);
  EXPECT_EQ(h.row_begin[1], 4);
  EXPECT_EQ(h.row_end[255], 1000);
  EXPECT_EQ(h.boundaries(), (std::vector<int64_t>{500}));
  RowHistogram b = row_histogram(r, 1);
  ASSERT_EQ(b.ids.size(), 10u);  // one bucket per row
  EXPECT_EQ(b.ids[3], 9);
  EXPECT_TRUE(b.boundaries().empty());  // table-wise: no boundary inside
  EXPECT_THROW(row_histogram(r, 2), std::out_of_range);

  LoadView view(std::make_shared<const sessions::SessionReader>(path.string()));
  view.resize(1000, 900);
  EXPECT_EQ(view.rows().ids[0], 7);
  EXPECT_TRUE(view.row_note()->text().contains("hottest bucket rows 0..3")) << view.row_note()->text().toStdString();
  view.set_table(1);
  EXPECT_EQ(view.rows().table, "t_b");
  // an older session without the table opens, and says so
  const std::string v2 = fixture_session();
  sqlite3* db = nullptr;
  sqlite3_open(v2.c_str(), &db);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE id_histogram; PRAGMA user_version = 2;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  LoadView old(std::make_shared<const sessions::SessionReader>(v2));
  EXPECT_TRUE(old.row_note()->text().contains("no row histogram")) << old.row_note()->text().toStdString();
  EXPECT_TRUE(old.rows().ids.empty());
}

TEST(LoadData, AggregatesPerShardPerStepAndImbalance) {
  // the aggregation itself: sessions/analysis/load_imbalance_test.cpp
  const std::string path = test_support::load_session();
  LoadView view(std::make_shared<const sessions::SessionReader>(path));
  view.resize(900, 600);
  view.set_metric(sessions::LoadMetric::unique_ids);
  EXPECT_DOUBLE_EQ(view.data().at_shard(0, 0), 5);
}

TEST(MemoryView, BlockMapAndTheOomSnapshotFirst) {
  // segment A (1000 B): [used 300 weights][free 200][used 500 kjt]; segment B (400 B): [free 400]
  std::vector<sessions::MemoryBlockRecord> blocks{{5000, 1000, 5000, 300, 290, true, "weights"},
                                                   {5000, 1000, 5300, 200, 0, false, ""},
                                                   {5000, 1000, 5500, 500, 500, true, "kjt"},
                                                   {9000, 400, 9000, 400, 0, false, ""}};
  auto map = layout_blocks(blocks);
  ASSERT_EQ(map.size(), 4u);
  EXPECT_EQ(map[2].row, 0);
  EXPECT_EQ(map[3].row, 1);
  EXPECT_DOUBLE_EQ(map[1].x0, 0.3);
  EXPECT_DOUBLE_EQ(map[1].x1, 0.5);
  EXPECT_DOUBLE_EQ(map[3].x1, 0.4);
  EXPECT_TRUE(map[3].largest_free);  // 400 > 200
  EXPECT_FALSE(map[1].largest_free);

  const auto path = std::filesystem::temp_directory_path() / ("es_ui_mem_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    for (int step = 0; step < 3; ++step) w.add_memory({step, 0, 100 * step, 1000, 300, 1000, 400, 0, 2, 0.3, 0.1});
    w.add_snapshot({0, 0, 0, 0, "step", {blocks[0]}});
    w.add_snapshot({0, 0, 2, 0, "oom", blocks});
    w.close("oom", "rank 0: out of memory");
  }
  MemoryView view(std::make_shared<const sessions::SessionReader>(path.string()));
  view.resize(900, 700);
  EXPECT_EQ(view.map()->layout().size(), 4u);  // opened on the OOM snapshot
  BlockMap& bm = *view.map();
  bm.resize(1016, 60);  // 1000 px of blocks
  const QImage img = bm.grab().toImage();
  EXPECT_EQ(img.pixelColor(BlockMap::kMargin + 100, BlockMap::kMargin + 9), BlockMap::color_of(blocks[0]));
  EXPECT_EQ(img.pixelColor(BlockMap::kMargin + 400, BlockMap::kMargin + 9), BlockMap::color_of(blocks[1]));  // free: grey
  EXPECT_EQ(img.pixelColor(BlockMap::kMargin + 700, BlockMap::kMargin + 9), BlockMap::color_of(blocks[2]));
}

// Ranks write their snapshots in any order (criteo's first is rank 1's); without an OOM the view
// opens on rank 0's earliest snapshot, and its chart on rank 0.
TEST(MemoryView, OpensOnTheLowestRankWithoutAnOom) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_mem_order_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    for (int r : {1, 0}) w.add_memory({0, r, 0, 1000, 300, 1000, 400, 0, 2, 0.3, 0.1});
    const sessions::MemoryBlockRecord block{0, 1 << 20, 0, 512, 512, true, "kjt"};
    w.add_snapshot({0, 1, 0, 10, "step", {block}});
    w.add_snapshot({0, 0, 1, 20, "step", {block}});
    w.add_snapshot({0, 0, 0, 5, "step", {block}});
    w.close("complete");
  }
  MemoryView view(std::make_shared<const sessions::SessionReader>(path.string()));
  const auto boxes = view.findChildren<QComboBox*>();
  ASSERT_EQ(boxes.size(), 2);  // rank, snapshot
  EXPECT_EQ(boxes[0]->currentText().toStdString(), "rank 0");
  EXPECT_EQ(boxes[1]->currentIndex(), 2);  // rank 0, step 0
}

TEST(MainWindow, OpensSessionsAndRefusesBadFiles) {
  MainWindow w;
  EXPECT_EQ(w.open_session(QString::fromStdString(fixture_session()), true), QString());
  EXPECT_EQ(w.tabs()->count(), 1);
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->widget(0));
  ASSERT_NE(views, nullptr);
  EXPECT_EQ(views->count(), 4);  // timeline, summary, load, memory
  EXPECT_EQ(views->tabText(2), "Load");
  const QString err = w.open_session("/nonexistent/x.db", true);
  EXPECT_TRUE(err.contains("/nonexistent/x.db: cannot open")) << err.toStdString();
  EXPECT_EQ(w.tabs()->count(), 1);
}

// The summary names the pipeline and comm precisions of the run, and says when nothing was measured.
TEST(MainWindow, SummarySaysThePipelineAndWhenNothingWasMeasured) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_warmup_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("workload_name", "tiny");
    w.set_metadata("world_size", "1");
    w.set_metadata("pipeline", "semi_sync");
    w.set_metadata("qcomms_forward_precision", "bf16");
    w.set_metadata("qcomms_backward_precision", "fp16");
    w.add_step({-1, 0, 0, 1000, 0.5, 0, 0});  // a warmup step only
    w.close("cancelled");
  }
  MainWindow w;
  ASSERT_EQ(w.open_session(QString::fromStdString(path.string()), true), QString());
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->widget(0));
  ASSERT_NE(views, nullptr);
  views->setCurrentIndex(1);  // Summary, built when first shown
  QString said;
  for (auto* label : views->widget(1)->findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_TRUE(said.contains("semi_sync pipeline (qcomms forward bf16, backward fp16)")) << said.toStdString();
  EXPECT_TRUE(said.contains("no measured steps: nothing to analyse")) << said.toStdString();
}

// A session whose writer was killed still says `running` in its metadata; its tab says
// `crashed`, as `embedscope stats` does (the writer's pid is gone on this host).
TEST(MainWindow, TabOfAKilledRunSaysCrashed) {
  const std::string path = fixture_session();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // reaped: its pid names no process
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string sql = "UPDATE metadata SET value = 'running' WHERE key = 'ended';"
                          "UPDATE metadata SET value = '" + std::to_string(child) + "' WHERE key = 'writer_pid';";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  MainWindow w;
  ASSERT_EQ(w.open_session(QString::fromStdString(path), true), QString());
  EXPECT_EQ(w.tabs()->tabText(0).toStdString(), std::filesystem::path(path).filename().string() + " [crashed]");
}

// The run labels of a built-in scenario are shown whole in a 1280 x 800 window (the side panel
// is at most 420 px wide): "1 Gb Ethernet (125 MB/s, 50 us)" is wider than its row.
TEST(ScenarioView, RunLabelsAreNotClipped) {
  for (const Scenario& sc : builtin_scenarios()) {
    if (sc.id != "communication_storm") continue;
    ScenarioView view(sc);
    view.resize(1280, 800);
    view.show();
    QApplication::processEvents();
    int checked = 0;
    for (auto* label : view.findChildren<QLabel*>()) {
      if (!label->text().contains("</b>") || !label->text().contains("&#9632;")) continue;  // a run's name
      ++checked;
      const bool whole = label->wordWrap() ? label->height() >= label->heightForWidth(label->width())
                                           : label->width() >= label->sizeHint().width();
      EXPECT_TRUE(whole) << label->text().toStdString() << ": " << label->width() << " x " << label->height();
    }
    EXPECT_EQ(checked, 2);
  }
}

TEST(Report, RendersEveryViewAndAPageWithoutADisplay) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_report_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const std::string cmd = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI) + " --report " + fixture_session() +
                          " -o " + dir.string() + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (const char* f : {"timeline.png", "summary.png", "load.png", "memory.png", "index.html"}) EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
  QImage timeline((dir / "timeline.png").c_str());
  EXPECT_GT(timeline.width(), 1000);
  std::ifstream html(dir / "index.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("<img src=\"timeline.png\""), std::string::npos);
  EXPECT_NE(page.find("<img src=\"summary.png\""), std::string::npos);
  const std::string bad = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI) + " --report /nonexistent.db -o " +
                          dir.string() + " 2>/dev/null";
  EXPECT_NE(std::system(bad.c_str()), 0);
  // an option where a value belongs is not taken as the value
  const std::string flag_as_value = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI) + " --screenshot --compare " +
                                    fixture_session() + " " + fixture_session() + " 2>/dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(flag_as_value.c_str())), 2);
  EXPECT_FALSE(std::filesystem::exists("--compare"));
}

TEST(MainWindow, RecentFilesAndExports) {
  MainWindow w;
  const QString session = QString::fromStdString(fixture_session());
  ASSERT_EQ(w.open_session(session, true), QString());
  EXPECT_EQ(MainWindow::recent_files().value(0), QFileInfo(session).absoluteFilePath());
  const auto dir = std::filesystem::temp_directory_path() / ("es_export_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_EQ(w.export_current("chrome", QString::fromStdString((dir / "t.json").string())), QString());
  std::ifstream trace(dir / "t.json");
  const std::string text((std::istreambuf_iterator<char>(trace)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"traceEvents\""), std::string::npos);
  EXPECT_EQ(w.export_current("csv", QString::fromStdString((dir / "csv").string())), QString());
  EXPECT_TRUE(std::filesystem::exists(dir / "csv" / "events.csv"));
  EXPECT_EQ(w.export_current("png", QString::fromStdString((dir / "view.png").string())), QString());
  EXPECT_FALSE(QImage(QString::fromStdString((dir / "view.png").string())).isNull());
  EXPECT_EQ(w.export_current("pdf", QString::fromStdString((dir / "view.pdf").string())), QString());
  EXPECT_GT(std::filesystem::file_size(dir / "view.pdf"), 1000u);
  EXPECT_EQ(w.export_current("svg", QString::fromStdString((dir / "view.svg").string())), QString());
  std::ifstream svg(dir / "view.svg");
  const std::string vector((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(vector.find("<svg"), std::string::npos);
  EXPECT_NE(vector.find("<rect"), std::string::npos);  // the ops are vector boxes, not a bitmap
  EXPECT_FALSE(w.export_current("bmp", "x.bmp").isEmpty());
  MainWindow empty;
  EXPECT_EQ(empty.export_current("png", "x.png"), "no session is open");
}


// ---- comparison and scenarios ------------------------------------------------------------------

namespace {
using test_support::step_session;
std::shared_ptr<const sessions::SessionReader> open_reader(const std::string& path) {
  return std::make_shared<const sessions::SessionReader>(path);
}
}  // namespace

TEST(Compare, AlignOffsetsPutStepKOfEverySessionAtZero) {
  // two real sessions: A starts at 1 ms with steps of 1 ms; B at 7 ms with steps of 2 ms
  auto sa = open_reader(step_session("es_align_a", 1'000'000, {1'000'000, 1'000'000}));
  auto sb = open_reader(step_session("es_align_b", 7'000'000, {2'000'000, 2'000'000}));
  TimelineStack stack({{"A", sa}, {"B", sb}}, 1);
  stack.resize(TimelineWidget::kGutter + 1000, 600);
  stack.show();
  QApplication::processEvents();
  EXPECT_EQ(stack.offset(0), 2'000'000);  // step 1 of A starts at 2 ms
  EXPECT_EQ(stack.offset(1), 9'000'000);  // step 1 of B at 9 ms
  auto x_of = [&](size_t i, int64_t t) { return stack.timeline(i)->scale().x(t); };
  EXPECT_DOUBLE_EQ(x_of(0, 2'000'000), x_of(1, 9'000'000));          // step 1 starts at one x
  EXPECT_DOUBLE_EQ(x_of(0, 2'400'000), x_of(1, 9'400'000));          // and 400 us into it too
  stack.align_to_step(0);
  EXPECT_DOUBLE_EQ(x_of(0, 1'000'000), x_of(1, 7'000'000));
  EXPECT_EQ(stack.view_t0(), stack.timeline(1)->scale().t0() - 7'000'000);
  // zooming one timeline (W) moves the other to the same aligned range
  stack.timeline(1)->setFocus();
  QTest::keyClick(stack.timeline(1), Qt::Key_W);
  EXPECT_EQ(stack.timeline(0)->scale().t0() - stack.offset(0), stack.timeline(1)->scale().t0() - stack.offset(1));
  EXPECT_EQ(stack.timeline(0)->scale().t1() - stack.offset(0), stack.timeline(1)->scale().t1() - stack.offset(1));
  QTest::keyClick(stack.timeline(0), Qt::Key_D);  // pan the other one
  EXPECT_EQ(stack.timeline(0)->scale().t0() - stack.offset(0), stack.timeline(1)->scale().t0() - stack.offset(1));
  EXPECT_DOUBLE_EQ(x_of(0, 1'300'000), x_of(1, 7'300'000));
}

TEST(Compare, ModelShowsAnalyzeFiguresAndDifferences) {
  auto sa = open_reader(step_session("es_cmp_a", 0, {1'000'000, 1'000'000}));
  auto sb = open_reader(step_session("es_cmp_b", 0, {2'000'000, 4'000'000}));
  const sessions::RunStats a = sessions::analyze(*sa), b = sessions::analyze(*sb);
  CompareModel m({"A", "B"}, {a, b});
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_EQ(m.rowCount(), CompareModel::FigureCount);
  ASSERT_EQ(m.columnCount(), 4);  // figure, A, B, B - A
  auto raw = [&](CompareModel::Figure f, int col) { return m.data(m.index(f, col), Qt::UserRole).toDouble(); };
  EXPECT_DOUBLE_EQ(raw(CompareModel::StepMean, 1), a.step_time_ns.mean);
  EXPECT_DOUBLE_EQ(raw(CompareModel::StepMean, 1), 1'000'000);
  EXPECT_DOUBLE_EQ(raw(CompareModel::StepMean, 2), 3'000'000);  // (2 + 4) / 2 ms
  EXPECT_DOUBLE_EQ(raw(CompareModel::StepP99, 2), static_cast<double>(b.step_time_ns.p99));
  EXPECT_DOUBLE_EQ(raw(CompareModel::StepMean, 3), 2'000'000);  // B - A
  EXPECT_DOUBLE_EQ(raw(CompareModel::Throughput, 1), a.samples_per_s);
  EXPECT_DOUBLE_EQ(raw(CompareModel::Throughput, 1), 8 / 1e-3);  // 8 samples per 1 ms
  EXPECT_DOUBLE_EQ(raw(CompareModel::ExposedComm, 2), static_cast<double>(b.exposed_comm_ns));
  EXPECT_DOUBLE_EQ(raw(CompareModel::Overlap, 1), a.overlap_pct);
  EXPECT_DOUBLE_EQ(raw(CompareModel::PeakAllocated, 2), static_cast<double>(b.peak_allocated_bytes));
  EXPECT_DOUBLE_EQ(raw(CompareModel::LookupImbalance, 1), a.lookups_max_over_mean);
  EXPECT_EQ(m.data(m.index(CompareModel::StepMean, 3)).toString(), "+2.00 ms (+200.0 %)");
  EXPECT_EQ(m.data(m.index(CompareModel::StepMean, 1)).toString(), "1.00 ms");
  EXPECT_EQ(m.headerData(3, Qt::Horizontal).toString(), "B - A");

  CompareView view({{"A", sa}, {"B", sb}});
  view.resize(1200, 800);
  EXPECT_EQ(view.pages()->count(), 3);
}

TEST(Compare, ARunThatEndedInsideAStepIsAlignedOnItsOpsAndHasNoStepFigures) {
  // out of memory in step 0 (step windows: sessions/analysis/step_windows_test.cpp)
  sessions::SessionReader oom(test_support::oom_in_step_session());
  auto ok = open_reader(step_session("es_cmp_ok", 0, {1'000'000}));
  CompareModel m({"oom", "ok"}, {sessions::analyze(oom), sessions::analyze(*ok)});
  EXPECT_EQ(m.data(m.index(CompareModel::StepMean, 1)).toString(), "-");
  EXPECT_FALSE(m.data(m.index(CompareModel::StepMean, 1), Qt::UserRole).isValid());
  EXPECT_EQ(m.data(m.index(CompareModel::StepMean, 3)).toString(), "-");
  EXPECT_EQ(m.data(m.index(CompareModel::StepMean, 2)).toString(), "1.00 ms");
  EXPECT_EQ(m.data(m.index(CompareModel::PeakAllocated, 1), Qt::UserRole).toDouble(), 0.0);  // memory: always shown
}

TEST(MemoryCompare, SnapshotsAtOneStepOnOneScale) {
  std::vector<sessions::MemorySnapshot> snaps{{1, 0, 0, 0, "step", {}}, {2, 0, 3, 0, "step", {}},
                                              {3, 0, 3, 0, "oom", {}},  {4, 1, 1, 0, "step", {}}};
  EXPECT_EQ(snapshot_at(snaps, 0, 2)->id, 1);  // the layout of step 0 still holds at step 2
  EXPECT_EQ(snapshot_at(snaps, 0, 3)->id, 3);  // the OOM snapshot of step 3
  EXPECT_EQ(snapshot_at(snaps, 1, 0), nullptr);
  auto sa = open_reader(step_session("es_mem_a", 0, {1'000'000, 1'000'000}, 4096));
  auto sb = open_reader(step_session("es_mem_b", 0, {1'000'000, 1'000'000}, 8192));
  MemoryCompare mc({{"A", sa}, {"B", sb}});
  mc.resize(1000, 700);
  mc.show(0, 1);
  EXPECT_EQ(mc.map_width_bytes(), 8192);
  ASSERT_EQ(mc.map(0)->layout().size(), 1u);
  EXPECT_DOUBLE_EQ(mc.map(0)->layout()[0].x1, 2000.0 / 8192);  // A's 2000 B block on B's scale
  EXPECT_DOUBLE_EQ(mc.map(1)->layout()[0].x1, 2000.0 / 8192);
}

TEST(Scenario, LoadsGoodFilesAndNamesTheProblemInBadOnes) {
  const nlohmann::json good = nlohmann::json::parse(R"({
    "id": "demo", "title": "Demo", "explanation": ["one", "two"],
    "runs": [{"label": "tw", "preset": "tiny", "overrides": {"steps": 3, "sharding": {"default": "row_wise"}}},
             {"label": "inline", "workload": {"tables": [{"name": "t", "num_embeddings": 10, "embedding_dim": 4,
              "feature_names": ["f"]}], "batch_size": 2, "steps": 2, "devices": {"count": 2, "memory_bytes": 16777216},
              "dense": null}}]})");
  const Scenario s = parse_scenario(good, "demo.json");
  EXPECT_EQ(s.paragraphs, (std::vector<std::string>{"one", "two"}));
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.runs[0].spec.steps, 3);
  EXPECT_EQ(s.runs[0].spec.sharding.default_type, engine::ShardingType::row_wise);
  EXPECT_EQ(s.runs[0].spec.tables.size(), engine::load_preset("tiny").tables.size());  // the rest from the preset
  EXPECT_EQ(s.runs[1].spec.devices.count, 2);
  EXPECT_EQ(session_file_name(s, 1), "demo-1.db");

  auto error_of = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    try {
      parse_scenario(j, "demo.json");
    } catch (const engine::SpecError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of([](auto& j) { j["runs"][0]["overrides"]["devices"] = {{"count", 0}}; }).rfind(
                "demo.json: /runs/0/overrides/devices/count: ", 0), 0u);
  EXPECT_EQ(error_of([](auto& j) { j["runs"][1]["workload"]["batch_size"] = -1; }).rfind(
                "demo.json: /runs/1/workload/batch_size: ", 0), 0u);
  EXPECT_EQ(error_of([](auto& j) { j["runs"][0]["overrides"]["colour"] = 1; }).rfind("demo.json: /runs/0/overrides/colour", 0),
            0u);
  EXPECT_EQ(error_of([](auto& j) { j["runs"].erase(1); }), "demo.json: /runs: must be an array of at least two runs");
  EXPECT_EQ(error_of([](auto& j) { j["runs"][1]["label"] = "tw"; }), "demo.json: /runs/1/label: \"tw\" is used by another run");
  EXPECT_EQ(error_of([](auto& j) { j["id"] = "Bad Id"; }).rfind("demo.json: /id: must be lower-case", 0), 0u);
  EXPECT_EQ(error_of([](auto& j) { j["speed"] = 1; }), "demo.json: /speed: unknown key");
  EXPECT_EQ(error_of([](auto& j) { j["runs"][0]["preset"] = "nope"; }).rfind("demo.json: /runs/0/preset: ", 0), 0u);
  EXPECT_EQ(error_of([](auto& j) { j["runs"][1].erase("workload"); }),
            "demo.json: /runs/1: needs either \"preset\" (with optional \"overrides\") or \"workload\"");

  const auto path = std::filesystem::temp_directory_path() / ("es_scenario_" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << "{\"id\": \"x\",\n \"title\": }";
  try {
    load_scenario_file(path.string());
    ADD_FAILURE() << "a syntax error was accepted";
  } catch (const engine::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ": line 2"), std::string::npos) << e.what();
  }
  for (const Scenario& b : builtin_scenarios()) EXPECT_GE(b.runs.size(), 2u) << b.id;  // every shipped one loads
  EXPECT_FALSE(builtin_scenarios().empty());
}

TEST(Scenario, PlayOrderAndWhatEachOpWaitsFor) {
  // the play order itself: sessions/analysis/scenario_order_test.cpp
  // the view: opens the runs' sessions from a folder by name, plays, asks for runs
  const auto dir = std::filesystem::temp_directory_path() / ("es_scen_dir_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  Scenario sc = parse_scenario(nlohmann::json::parse(R"({"id": "demo", "title": "Demo", "explanation": "text",
      "align_step": 1, "runs": [{"label": "a", "preset": "tiny"}, {"label": "b", "preset": "tiny"}]})"), "demo.json");
  std::filesystem::copy_file(step_session("es_scen_a", 0, {1'000'000, 1'000'000}), dir / "demo-0.db",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(step_session("es_scen_b", 5'000'000, {2'000'000, 2'000'000}), dir / "demo-1.db",
                             std::filesystem::copy_options::overwrite_existing);
  ScenarioView view(sc);
  view.resize(1400, 800);
  view.show();
  EXPECT_EQ(view.compare(), nullptr);
  EXPECT_EQ(view.open_folder(QString::fromStdString(dir.string())), 2);
  ASSERT_NE(view.compare(), nullptr);
  EXPECT_EQ(view.compare()->timelines()->size(), 2u);
  EXPECT_EQ(view.compare()->timelines()->offset(1), 7'000'000);  // step 1 of run b
  ASSERT_EQ(view.play_steps().size(), 4u);
  view.set_play_position(2);
  EXPECT_TRUE(view.play_text().contains("output_dist/all_to_all")) << view.play_text().toStdString();
  EXPECT_TRUE(view.play_text().contains("starts at 150.0 us")) << view.play_text().toStdString();
  EXPECT_TRUE(view.play_text().contains("rank 1 to join the collective")) << view.play_text().toStdString();
  {  // the played op is framed in its run's timeline: rank 0's all-to-all (row 1) from 150 us
    TimelineWidget* tl = view.compare()->timelines()->timeline(0);
    const QImage img = tl->grab().toImage();
    const int x0 = TimelineWidget::kGutter + static_cast<int>(tl->scale().x(1'150'000));
    const int y = tl->row_y(1) + TimelineWidget::kRowHeight / 2;
    int gold = 0;
    for (int x = x0 - 5; x <= x0; ++x) gold += img.pixelColor(x, y) == QColor(0xff, 0xd7, 0x00);
    EXPECT_GT(gold, 0) << "no frame left of the played op";
    gold = 0;
    const int y2 = tl->row_y(3) + TimelineWidget::kRowHeight / 2;  // rank 1's all-to-all is not framed
    const int x2 = TimelineWidget::kGutter + static_cast<int>(tl->scale().x(1'320'000));
    for (int x = x2 - 5; x <= x2; ++x) gold += img.pixelColor(x, y2) == QColor(0xff, 0xd7, 0x00);
    EXPECT_EQ(gold, 0);
  }
  QSignalSpy spy(&view, &ScenarioView::run_requested);
  QPushButton* run_b = nullptr;
  for (auto* b : view.findChildren<QPushButton*>())
    if (b->text() == "Run") run_b = b;  // the last one: run b
  ASSERT_NE(run_b, nullptr);
  run_b->click();
  ASSERT_EQ(spy.count(), 1);
  EXPECT_EQ(spy.at(0).at(0).toString(), "demo");
  EXPECT_EQ(spy.at(0).at(1).toInt(), 1);
  // the view runs it itself (tiny preset) into the folder it opened, then opens the new session
  EXPECT_EQ(run_b->text(), "Cancel");
  QTRY_COMPARE_WITH_TIMEOUT(run_b->text(), QString("Run"), 60000);
  EXPECT_EQ(view.run_directory(), QString::fromStdString(dir.string()));
  EXPECT_EQ(sessions::SessionReader((dir / "demo-1.db").string()).meta("workload_name"), "tiny");
  ASSERT_NE(view.compare(), nullptr);
  EXPECT_EQ(view.compare()->timelines()->size(), 2u);
  EXPECT_FALSE(view.open_run_session(0, "/nonexistent/x.db").isEmpty());
}

TEST(MainWindow, OpensComparisonsAndScenarios) {
  MainWindow w;
  const QString a = QString::fromStdString(step_session("es_mw_a", 0, {1'000'000}));
  const QString b = QString::fromStdString(step_session("es_mw_b", 0, {2'000'000}));
  EXPECT_EQ(w.open_compare({a}, true), "choose at least two sessions to compare");
  EXPECT_TRUE(w.open_compare({a, "/nonexistent/x.db"}, true).contains("/nonexistent/x.db"));
  EXPECT_EQ(w.tabs()->count(), 0);
  EXPECT_EQ(w.open_compare({a, b}, true), QString());
  ASSERT_EQ(w.tabs()->count(), 1);
  EXPECT_NE(qobject_cast<CompareView*>(w.tabs()->widget(0)), nullptr);
  const auto png = std::filesystem::temp_directory_path() / ("es_cmp_export_" + std::to_string(getpid()) + ".png");
  EXPECT_EQ(w.export_current("png", QString::fromStdString(png.string())), QString());  // the comparison as an image
  EXPECT_FALSE(QImage(QString::fromStdString(png.string())).isNull());
  EXPECT_TRUE(w.export_current("chrome", "x.json").startsWith("export chrome from a session's own tab"));
  EXPECT_EQ(w.open_scenario("row_wise_vs_table_wise", {}, true), QString());
  EXPECT_EQ(w.tabs()->count(), 2);
  EXPECT_TRUE(w.open_scenario("no_such_scenario", {}, true).startsWith("no scenario no_such_scenario (built in: "));

  // the command line: --compare and --scenario render without a display
  const auto shot = std::filesystem::temp_directory_path() / ("es_cmp_shot_" + std::to_string(getpid()) + ".png");
  std::filesystem::remove(shot);
  const std::string ui = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI);
  ASSERT_EQ(std::system((ui + " --compare " + a.toStdString() + " " + b.toStdString() + " --screenshot " + shot.string() +
                         " 2>/dev/null").c_str()), 0);
  EXPECT_FALSE(QImage(QString::fromStdString(shot.string())).isNull());
  EXPECT_NE(std::system((ui + " --compare " + a.toStdString() + " --screenshot " + shot.string() + " 2>/dev/null").c_str()), 0);
  EXPECT_NE(std::system((ui + " --scenario row_wise_vs_table_wise --scenario-sessions /nonexistent --screenshot " +
                         shot.string() + " 2>/dev/null").c_str()), 0);
}

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("es_ui_" + std::to_string(getpid()) + "_" + name);
}

TEST(WorkloadModel, PassesTheModelTesterAndPutsTheValidatorsMessageOnItsCell) {
  WorkloadModel m;
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  m.load_preset("tiny");
  ASSERT_EQ(m.rowCount(), 4);
  EXPECT_EQ(m.error(), QString());
  EXPECT_EQ(m.data(m.index(1, WorkloadModel::Name)).toString(), "t_a");
  EXPECT_EQ(m.data(m.index(3, WorkloadModel::NumEmbeddings)).toString(), "1000");
  EXPECT_EQ(m.data(m.index(1, WorkloadModel::Pooling)).toString(), "mean");
  EXPECT_EQ(m.data(m.index(2, WorkloadModel::PoolingFactor)).toString(), "mean 3, max 6");  // both features of t_b
  EXPECT_EQ(m.data(m.index(3, WorkloadModel::Ids)).toString(), "zipf 1.1");
  EXPECT_EQ(m.data(m.index(0, WorkloadModel::Sharding)).toString(), "default (table_wise)");
  EXPECT_EQ(m.data(m.index(3, WorkloadModel::Ranks)).toString(), "auto: 0");  // the planner's choice
  EXPECT_EQ(m.data(m.index(3, WorkloadModel::Ranks), Qt::EditRole).toString(), "");

  // embedding_dim 0: the engine's message, on that cell, in red
  ASSERT_TRUE(m.setData(m.index(0, WorkloadModel::EmbeddingDim), "0"));
  EXPECT_EQ(m.error_pointer(), "/tables/0/embedding_dim");
  EXPECT_EQ(m.error(), "/tables/0/embedding_dim: must be > 0, got 0");
  EXPECT_EQ(m.error_index(), m.index(0, WorkloadModel::EmbeddingDim));
  EXPECT_TRUE(m.data(m.index(0, WorkloadModel::EmbeddingDim), Qt::BackgroundRole).isValid());
  EXPECT_FALSE(m.data(m.index(0, WorkloadModel::Name), Qt::BackgroundRole).isValid());
  EXPECT_EQ(m.data(m.index(0, WorkloadModel::EmbeddingDim), Qt::ToolTipRole).toString(), m.error());
  EXPECT_FALSE(m.spec().has_value());
  EXPECT_TRUE(m.memory().empty());
  ASSERT_TRUE(m.setData(m.index(0, WorkloadModel::EmbeddingDim), "four"));  // kept as typed, judged by the engine
  EXPECT_TRUE(m.error().startsWith("/tables/0/embedding_dim: must be")) << m.error().toStdString();
  ASSERT_TRUE(m.setData(m.index(0, WorkloadModel::EmbeddingDim), "4"));
  EXPECT_EQ(m.error(), QString());
  EXPECT_TRUE(m.spec().has_value());

  // a feature's error lands on its table's row: t_b serves features 2 and 3
  ASSERT_TRUE(m.setData(m.index(2, WorkloadModel::PoolingFactor), "mean 7, max 6"));
  EXPECT_EQ(m.error_pointer(), "/features/2/pooling_factor/mean");
  EXPECT_EQ(m.error_index(), m.index(2, WorkloadModel::PoolingFactor));
  ASSERT_TRUE(m.setData(m.index(2, WorkloadModel::PoolingFactor), "2"));
  EXPECT_EQ(m.error(), QString());
  EXPECT_EQ(m.workload()["features"][3]["pooling_factor"], 2);
  ASSERT_TRUE(m.setData(m.index(0, WorkloadModel::Ids), "zipf 1.3"));
  EXPECT_EQ(m.workload()["features"][0]["ids"]["distribution"], "zipf");
  EXPECT_DOUBLE_EQ(m.workload()["features"][0]["ids"]["alpha"].get<double>(), 1.3);

  // a per-table override naming a rank the devices do not have: the ranks cell
  ASSERT_TRUE(m.setData(m.index(1, WorkloadModel::Sharding), "table_wise"));
  ASSERT_TRUE(m.setData(m.index(1, WorkloadModel::Ranks), "5"));
  EXPECT_TRUE(m.error_pointer().startsWith("/sharding/tables/t_a/ranks")) << m.error().toStdString();
  EXPECT_EQ(m.error_index(), m.index(1, WorkloadModel::Ranks));
  ASSERT_TRUE(m.setData(m.index(1, WorkloadModel::Ranks), "1"));
  EXPECT_EQ(m.error(), QString());
  EXPECT_EQ(m.data(m.index(1, WorkloadModel::Ranks)).toString(), "1");
  ASSERT_TRUE(m.setData(m.index(1, WorkloadModel::Name), "t_renamed"));  // the override follows the table
  EXPECT_EQ(m.workload()["sharding"]["tables"]["t_renamed"]["ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(m.error(), QString());

  EXPECT_EQ(m.add_table(), 4);
  EXPECT_EQ(m.data(m.index(4, WorkloadModel::Name)).toString(), "t4");
  EXPECT_EQ(m.error(), QString());
  m.remove_table(4);
  EXPECT_EQ(m.rowCount(), 4);
  EXPECT_EQ(m.workload()["features"].size(), 5u);
}

TEST(WorkloadModel, MemoryEstimateOfTheTinyPreset) {
  // tiny on 2 devices, table_wise, greedy largest first: t_c (1000 x 12) on rank 0; t_b (100 x 6),
  // t_a (10 x 8), t_small (1 x 4) on rank 1. fp32 weights: 48000 B and 2400 + 320 + 16 = 2736 B.
  WorkloadModel m;
  m.load_preset("tiny");
  ASSERT_EQ(m.memory().size(), 2u);
  EXPECT_EQ(m.memory()[0].weights, 48000);
  EXPECT_EQ(m.memory()[1].weights, 2736);
  EXPECT_EQ(m.memory()[0].optimizer_state, 0);  // sgd
  // rowwise_adagrad keeps one float per row (FBGEMM): 1000 x 4 and (100 + 10 + 1) x 4 bytes
  m.set_value("/optimizer/type", "rowwise_adagrad");
  EXPECT_EQ(m.memory()[0].optimizer_state, 4000);
  EXPECT_EQ(m.memory()[1].optimizer_state, 444);
  const auto est = engine::estimate_memory(*m.spec(), engine::plan_sharding(*m.spec()));
  EXPECT_EQ(m.memory()[0].total(), est[0].total());

  WorkloadDesigner d("tiny");
  d.model()->set_value("/optimizer/type", "rowwise_adagrad");
  QTableWidget* t = d.memory_table();
  ASSERT_EQ(t->rowCount(), 2);
  EXPECT_EQ(t->item(0, 1)->data(Qt::UserRole).toLongLong(), 48000);  // weights
  EXPECT_EQ(t->item(1, 2)->data(Qt::UserRole).toLongLong(), 444);    // optimizer state
  EXPECT_EQ(t->item(0, 6)->data(Qt::UserRole).toLongLong(), 64 << 20);  // capacity
}

TEST(WorkloadDesigner, ShowsTheMessageBesideTheFieldAndSavesJson) {
  WorkloadDesigner d("tiny");
  EXPECT_EQ(d.message_at("/tables"), QString());
  d.model()->setData(d.model()->index(0, WorkloadModel::EmbeddingDim), "0");
  EXPECT_EQ(d.message_at("/tables"), "/tables/0/embedding_dim: must be > 0, got 0");
  EXPECT_EQ(d.message_at("/devices/memory_bytes"), QString());
  EXPECT_FALSE(d.run().isEmpty());  // cannot run
  d.model()->setData(d.model()->index(0, WorkloadModel::EmbeddingDim), "4");
  EXPECT_EQ(d.message_at("/tables"), QString());
  // 1 MiB devices: smaller than one segment of the caching allocator (the planner's check)
  d.model()->set_value("/devices/memory_bytes", 1 << 20);
  EXPECT_TRUE(d.message_at("/devices/memory_bytes").startsWith("/devices/memory_bytes: 1.0 MiB is smaller than one"))
      << d.message_at("/devices/memory_bytes").toStdString();
  EXPECT_EQ(d.message_at("/tables"), QString());
  d.model()->set_value("/devices/memory_bytes", 64 << 20);
  EXPECT_EQ(d.message_at("/devices/memory_bytes"), QString());

  // pipeline, comm precision and an emulated network from the form
  for (auto* c : d.findChildren<QComboBox*>()) {
    if (c->findText("semi_sync") >= 0) c->setCurrentText("semi_sync");
    if (c->findText("bf16") >= 0) c->setCurrentText("bf16");
  }
  for (auto* b : d.findChildren<QDoubleSpinBox*>())
    if (b->suffix() == " MB/s") b->setValue(125);
  for (auto* l : d.findChildren<QSpinBox*>())
    if (l->suffix() == " us") l->setValue(50);
  EXPECT_EQ(d.model()->value("/pipeline"), "semi_sync");
  EXPECT_EQ(d.model()->value("/qcomms/backward_precision"), "bf16");
  EXPECT_EQ(d.model()->value("/network/inter_node/bandwidth_bytes_per_s"), 125'000'000);
  EXPECT_EQ(d.model()->value("/network/intra_node/latency_ns"), 50'000);
  EXPECT_EQ(d.model()->error(), QString());

  const auto path = scratch("workload.json");
  EXPECT_EQ(d.save(QString::fromStdString(path.string())), QString());
  const engine::WorkloadSpec saved = engine::load_workload_file(path.string());
  EXPECT_EQ(saved.name, "tiny");
  EXPECT_EQ(saved.tables.size(), 4u);
  EXPECT_EQ(saved.devices.memory_bytes, 64 << 20);
  EXPECT_EQ(saved.pipeline, engine::PipelineKind::semi_sync);
  EXPECT_EQ(saved.network.inter_node.bandwidth_bytes_per_s, 125'000'000);

  // a file that fails validation opens as written, its error shown; one that is not JSON is refused
  std::ofstream(scratch("bad.json")) << R"({"tables": [{"name": "t", "num_embeddings": 0, "embedding_dim": 4, "feature_names": ["f"]}], "batch_size": 4})";
  EXPECT_EQ(d.load_file(QString::fromStdString(scratch("bad.json").string()), true), QString());
  EXPECT_EQ(d.model()->error(), "/tables/0/num_embeddings: must be > 0, got 0");
  EXPECT_EQ(d.model()->error_index(), d.model()->index(0, WorkloadModel::NumEmbeddings));
  std::ofstream(scratch("not.json")) << "not json";
  const QString err = d.load_file(QString::fromStdString(scratch("not.json").string()), true);
  EXPECT_TRUE(err.contains("not.json")) << err.toStdString();
}

TEST(RunJob, FormatsTheTimeLeft) {
  EXPECT_EQ(format_eta(12.34), "12.3 s");
  EXPECT_EQ(format_eta(269.9), "4 min 29 s");
  EXPECT_EQ(format_eta(16149.6), "4 h 29 min");
}

TEST(RunJob, RunsOffTheGuiThreadToTheEnd) {
  engine::WorkloadSpec spec = engine::load_preset("tiny");
  spec.steps = 5;
  const auto path = scratch("run.db");
  std::filesystem::remove(path);
  RunJob job(spec, QString::fromStdString(path.string()));
  QSignalSpy progress(&job, &RunJob::progress), finished(&job, &RunJob::finished);
  int ticks_while_running = 0;  // the GUI thread's event loop keeps turning during the run
  QTimer timer;
  QObject::connect(&timer, &QTimer::timeout, [&] { ticks_while_running += job.running(); });
  timer.start(0);
  job.start();
  EXPECT_TRUE(job.running());
  ASSERT_TRUE(finished.wait(120'000));
  EXPECT_GT(ticks_while_running, 0);
  EXPECT_FALSE(job.running());
  EXPECT_EQ(finished[0][1].toString(), "complete");
  EXPECT_EQ(finished[0][0].toString(), QString::fromStdString(path.string()));
  ASSERT_GE(progress.size(), 1);
  EXPECT_EQ(progress.back()[0].toLongLong(), 5);  // the last measured step is always reported
  EXPECT_EQ(progress.back()[1].toLongLong(), 5);
  EXPECT_GT(progress.back()[2].toDouble(), 0.0);
  EXPECT_EQ(sessions::SessionReader(path.string()).meta("ended"), "complete");

  // the engine refusing the workload (the file exists) is a message, not a crash
  RunJob again(spec, QString::fromStdString(path.string()));
  QSignalSpy refused(&again, &RunJob::finished);
  again.start();
  ASSERT_TRUE(refused.wait(60'000));
  EXPECT_EQ(refused[0][1].toString(), "error");
  EXPECT_TRUE(refused[0][2].toString().contains(QString::fromStdString(path.string()))) << refused[0][2].toString().toStdString();
}

TEST(MainWindow, ACancelledRunFromTheDesignerOpensMarkedCancelled) {
  MainWindow w;
  WorkloadDesigner* d = w.new_workload("tiny");
  ASSERT_EQ(w.tabs()->count(), 1);
  EXPECT_EQ(w.tabs()->tabText(0), "Workload: tiny");
  d->model()->set_value("/steps", 1'000'000);
  const auto path = scratch("cancelled.db");
  std::filesystem::remove(path);
  ASSERT_EQ(d->run(QString::fromStdString(path.string())), QString());
  ASSERT_NE(d->job(), nullptr);
  QSignalSpy progress(d->job(), &RunJob::progress), written(d, &WorkloadDesigner::session_written);
  while (progress.isEmpty() || progress.back()[0].toLongLong() < 1) ASSERT_TRUE(progress.wait(60'000));
  EXPECT_EQ(d->progress_bar()->maximum(), 1'000'000);
  EXPECT_TRUE(d->progress_text().contains("samples/s")) << d->progress_text().toStdString();
  d->cancel();
  ASSERT_TRUE(written.wait(60'000));
  EXPECT_EQ(written[0][1].toString(), "cancelled");
  ASSERT_EQ(w.tabs()->count(), 2);
  EXPECT_EQ(w.tabs()->tabText(1), "es_ui_" + QString::number(getpid()) + "_cancelled.db [cancelled]");
  sessions::SessionReader r(path.string());
  EXPECT_EQ(r.meta("ended"), "cancelled");
  EXPECT_GE(sessions::analyze(r).steps, 1);
  EXPECT_LT(sessions::analyze(r).steps, 1'000'000);

  // the engine refuses the run (the session file exists): its message in a dialog, no new tab
  ASSERT_EQ(d->run(QString::fromStdString(path.string())), QString());
  QSignalSpy refused(d->job(), &RunJob::finished);
  ASSERT_TRUE(refused.wait(60'000));
  auto* box = d->findChild<QMessageBox*>();
  ASSERT_NE(box, nullptr);
  EXPECT_TRUE(box->text().contains(QString::fromStdString(path.string()))) << box->text().toStdString();
  EXPECT_EQ(w.tabs()->count(), 2);
  EXPECT_EQ(d->job(), nullptr);
}

TEST(ShardingPlanModel, PerRankShardsMemoryAndLoad) {
  const engine::WorkloadSpec spec = engine::load_preset("tiny");  // t_c on rank 0, the other three on rank 1
  const engine::ShardingPlan plan = engine::plan_sharding(spec);
  const auto path = scratch("plan.db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.set_metadata("workload_json", engine::to_json(spec).dump());
    w.set_metadata("sharding_plan_json", engine::to_json(spec, plan).dump());
    // t_c (table 3, shard 0) on rank 0: 10 ids in steps 0 and 1; the warmup step is not counted
    w.add_load({0, 0, 3, 0, 10, 5, 80, 480, 100});
    w.add_load({1, 0, 3, 0, 10, 5, 80, 480, 100});
    w.add_load({-1, 0, 3, 0, 99, 9, 99, 99, 99});
    w.add_load({0, 1, 1, 0, 4, 2, 32, 256, 50});  // t_a on rank 1
    w.add_memory({0, 0, 4000, 8000, 6000, 8000, 2000, 0, 1, 0.0, 0.0});
    w.close("complete");
  }
  sessions::SessionReader r(path.string());
  ShardingPlanModel m(r, sessions::analyze(r));
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_EQ(m.rowCount(), 2);
  const QModelIndex rank0 = m.index(0, 0), rank1 = m.index(1, 0);
  ASSERT_EQ(m.rowCount(rank0), 1);
  ASSERT_EQ(m.rowCount(rank1), 3);
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::Sharding)).toString(), "TW: 1");
  EXPECT_EQ(m.data(m.index(1, ShardingPlanModel::Sharding)).toString(), "TW: 3");
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::Name, rank0)).toString(), "t_c");
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::Size, rank0)).toString(), "1000 x 12 @ 0, 0");
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::Size), Qt::UserRole).toLongLong(), 48000);  // weights
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::IdsLookedUp)).toLongLong(), 20);
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::BytesIn), Qt::UserRole).toLongLong(), 160);
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::BytesOut, rank0), Qt::UserRole).toLongLong(), 960);
  EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::PeakMemory), Qt::UserRole).toLongLong(), 6000);
  EXPECT_FALSE(m.data(m.index(1, ShardingPlanModel::PeakMemory), Qt::UserRole).isValid());  // no counters
  const auto est = engine::estimate_memory(spec, plan);
  EXPECT_EQ(m.data(m.index(1, ShardingPlanModel::PlannedMemory), Qt::UserRole).toLongLong(), est[1].total());
  EXPECT_EQ(m.data(m.index(1, ShardingPlanModel::IdsLookedUp)).toLongLong(), 4);
  // a session without a plan: an empty model
  sessions::SessionReader bare(fixture_session());
  EXPECT_EQ(ShardingPlanModel(bare, sessions::analyze(bare)).rowCount(), 0);
}

TEST(Report, WithoutAnyDisplayTheSessionArgumentWritesTheReport) {
  const auto dir = scratch("nodisplay");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(fixture_session(), dir / "run.db");
  const std::string cmd = "cd " + dir.string() + " && env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM " +
                          std::string(EMBEDSCOPE_UI) + " run.db > out.txt 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(std::filesystem::exists(dir / "run-report" / "index.html"));
  EXPECT_TRUE(std::filesystem::exists(dir / "run-report" / "timeline.png"));
  std::ifstream out(dir / "out.txt");
  const std::string said((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_NE(said.find("run-report/index.html"), std::string::npos) << said;
  const std::string none = "cd " + dir.string() + " && env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM " +
                           std::string(EMBEDSCOPE_UI) + " 2>/dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(none.c_str())), 2);  // nothing to show and nowhere to show it
  // a comparison or a scenario has no report: a clear error, not the sessions' reports one by one
  std::filesystem::copy_file(fixture_session(), dir / "other.db");
  for (const std::string& args : {std::string("--compare run.db other.db"), std::string("--scenario communication_storm"),
                                  std::string("--scenario-sessions . run.db")}) {
    std::filesystem::remove_all(dir / "run-report");
    const std::string c = "cd " + dir.string() + " && env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM " +
                          std::string(EMBEDSCOPE_UI) + " " + args + " > out.txt 2> err.txt";
    EXPECT_EQ(WEXITSTATUS(std::system(c.c_str())), 2) << args;
    std::ifstream err(dir / "err.txt");
    const std::string e((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
    const std::string flag = args.substr(0, args.find(' '));
    EXPECT_NE(e.find(flag == "--scenario-sessions" ? "--scenario-sessions goes with --scenario" : flag + " needs a window"),
              std::string::npos) << args << ": " << e;
    EXPECT_FALSE(std::filesystem::exists(dir / "run-report")) << args;
  }
}

TEST(Palette, PlotsFollowADarkPalette) {
  LoadView view(std::make_shared<const sessions::SessionReader>(fixture_session()));
  view.resize(900, 600);
  QPalette dark = view.palette();
  dark.setColor(QPalette::Base, QColor(30, 30, 30));
  dark.setColor(QPalette::Text, QColor(230, 230, 230));
  view.setPalette(dark);  // as when the system switches to dark
  QCustomPlot* plot = view.shard_map();
  EXPECT_EQ(plot->grab().toImage().pixelColor(2, 2), QColor(30, 30, 30));
  EXPECT_EQ(plot->axisRects().value(0)->axis(QCPAxis::atBottom)->tickLabelColor(), QColor(230, 230, 230));
  view.set_metric(sessions::LoadMetric::bytes_in);  // rebuilt plots keep it
  EXPECT_EQ(view.shard_map()->axisRects().value(0)->axis(QCPAxis::atLeft)->labelColor(), QColor(230, 230, 230));
}

TEST(About, NamesTheVersions) {
  const QString text = about_text();
  EXPECT_TRUE(text.contains("Qt " + QString(qVersion()))) << text.toStdString();
  EXPECT_TRUE(text.contains("SQLite " + sqlite_version())) << text.toStdString();
  EXPECT_TRUE(text.contains("Gloo " + QString::fromStdString(engine::gloo_version()))) << text.toStdString();
#ifdef EMBEDSCOPE_WITH_CUDA  // NCCL 2.x, from the library itself
  EXPECT_TRUE(text.contains(QRegularExpression("CUDA toolkit \\d+\\.\\d+.*, NCCL 2\\.\\d+\\.\\d+"))) << text.toStdString();
#endif
}

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  // settings of the test run stay in a scratch folder
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope,
                     QString::fromStdString((std::filesystem::temp_directory_path() / "es_ui_settings").string()));
  QApplication::setOrganizationName("EmbedscopeTest");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
