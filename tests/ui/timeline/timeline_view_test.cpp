// The timeline view: search, range totals, the critical path.
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
