// The workbench as a person uses it, offscreen: the timeline math, the folding, the item model
// (QAbstractItemModelTester), and the timeline widget rendered to an image with pixels checked
// where ops must and must not be.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QFileInfo>
#include <QImage>
#include <QSettings>
#include <QLabel>
#include <QLineEdit>
#include <QTabWidget>
#include <QTest>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "colors.h"
#include "load_data.h"
#include "load_view.h"
#include "memory_view.h"
#include "main_window.h"
#include "range_totals_model.h"
#include "rank_stats_model.h"
#include "timeline_math.h"
#include "timeline_view.h"
#include "timeline_widget.h"

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
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_load_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.set_metadata("workload_json", R"({"tables": [{"name": "t_a"}, {"name": "t_b"}]})");
    // step 0: rank 0 looks up 30 ids in t_a #0, rank 1 10 ids in t_b #1; step 1: 20 and 20; warmup ignored
    w.add_load({0, 0, 0, 0, 30, 3, 0, 0, 100});
    w.add_load({0, 1, 1, 1, 10, 1, 0, 0, 50});
    w.add_load({1, 0, 0, 0, 20, 2, 0, 0, 100});
    w.add_load({1, 1, 1, 1, 20, 2, 0, 0, 50});
    w.add_load({-1, 0, 0, 0, 999, 9, 0, 0, 9});
    w.close("complete");
  }
  sessions::SessionReader r(path.string());
  LoadData d = load_data(r, LoadMetric::ids_looked_up);
  ASSERT_EQ(d.ranks, 2);
  ASSERT_EQ(d.shards, (std::vector<std::string>{"t_a #0", "t_b #1"}));
  EXPECT_DOUBLE_EQ(d.at_shard(0, 0), 50);
  EXPECT_DOUBLE_EQ(d.at_shard(1, 0), 0);
  EXPECT_DOUBLE_EQ(d.at_shard(1, 1), 30);
  ASSERT_EQ(d.steps, (std::vector<int64_t>{0, 1}));
  EXPECT_DOUBLE_EQ(d.imbalance[0], 30.0 / 20.0);
  EXPECT_DOUBLE_EQ(d.imbalance[1], 1.0);
  EXPECT_EQ(d.per_rank, (std::vector<double>{50, 30}));
  EXPECT_DOUBLE_EQ(load_data(r, LoadMetric::lookup_time).at_step(1, 0), 50);

  LoadView view(std::make_shared<const sessions::SessionReader>(path.string()));
  view.resize(900, 600);
  view.set_metric(LoadMetric::unique_ids);
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
