// The timeline page after a user test: the step box names what the view shows from the start
// ("all measured steps", not "step 0"); a tooltip goes when the view moves under it; a search
// jump zooms in on a match narrower than a pixel and says "match N of M" (Enter / Shift+Enter);
// View > Go to Slowest Step fits the step `embedscope stats` names slowest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QAction>
#include <QApplication>
#include <QElapsedTimer>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QTabWidget>
#include <QTest>
#include <QToolTip>

#include <filesystem>
#include <memory>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "jobs/analysis_job.h"
#include "shell/main_window.h"
#include "timeline/step_box.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {

std::string ui57_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("es_ui57_" + std::to_string(getpid()) + "_" + name)).string();
}

// One rank, warm-up steps -2, -1 and measured steps 0..3, 100 us each from 0, one lookup in each.
std::string ui57_warmup_session() {
  const std::string path = ui57_path("warm.db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path);
  w.set_metadata("world_size", "1");
  w.add_lane({0, 0, "compute", "thread"});
  for (int s = -2; s < 4; ++s) {
    const int64_t t0 = 100'000LL * (s + 2);
    w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", s, t0 + 10'000, t0 + 60'000, 0, 0}});
    w.add_step({s, 0, t0, t0 + 100'000, 0.5, 0, 0});
  }
  w.close("complete");
  return path;
}

// One step [0, 1 ms): a lookup [0, 100) us, three 50 ns "tiny_kernel"s at 300, 600 and 900 us, a
// dense op [950, 1000) us.
std::string ui57_tiny_match_session() {
  const std::string path = ui57_path("tiny.db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path);
  w.set_metadata("world_size", "1");
  w.add_lane({0, 0, "compute", "thread"});
  using sessions::Lane;
  using sessions::OpCategory;
  w.add_ops({{0, Lane::compute, OpCategory::lookup, "lookup", 0, 0, 100'000, 0, 0},
             {0, Lane::compute, OpCategory::dense, "tiny_kernel", 0, 300'000, 300'050, 0, 0},
             {0, Lane::compute, OpCategory::dense, "tiny_kernel", 0, 600'000, 600'050, 0, 0},
             {0, Lane::compute, OpCategory::dense, "tiny_kernel", 0, 900'000, 900'050, 0, 0},
             {0, Lane::compute, OpCategory::dense, "dense", 0, 950'000, 1'000'000, 0, 0}});
  w.add_step({0, 0, 0, 1'000'000, 0.5, 0, 0});
  w.close("complete");
  return path;
}

// Two ranks, three steps (us): step 0 rank 0 [0, 100), rank 1 [0, 120); step 1 rank 0 [200, 500)
// (300), rank 1 [250, 520) (270): window 320; step 2 rank 0 [600, 910) (310), rank 1 [600, 905).
// `stats` calls step 2 slowest (its slowest rank took 310 us, step 1's 300 us), although step 1's
// window across the ranks is the widest (320 us).
std::string ui57_slowest_session() {
  const std::string path = ui57_path("slowest.db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path);
  w.set_metadata("world_size", "2");
  w.set_metadata("samples_per_step", "8");
  const int64_t us = 1000;
  const int64_t spans[3][2][2] = {{{0, 100}, {0, 120}}, {{200, 500}, {250, 520}}, {{600, 910}, {600, 905}}};
  for (int r = 0; r < 2; ++r) w.add_lane({r, 0, "compute", "thread"});
  for (int s = 0; s < 3; ++s)
    for (int r = 0; r < 2; ++r) {
      const int64_t a = spans[s][r][0] * us, b = spans[s][r][1] * us;
      w.add_ops({{r, sessions::Lane::compute, sessions::OpCategory::dense, "dense", s, a + us, b - us, 0, 0}});
      w.add_step({s, r, a, b, 0.5, 0, 0});
    }
  w.close("complete");
  return path;
}

void ui57_settle() {
  for (int i = 0; i < 5; ++i) QApplication::processEvents();
}

void ui57_hover(TimelineWidget* tl, QPoint at) {
  QMouseEvent move(QEvent::MouseMove, QPointF(at), QPointF(tl->mapToGlobal(at)), Qt::NoButton, Qt::NoButton,
                   Qt::NoModifier);
  QApplication::sendEvent(tl, &move);
}

// Whether the tooltip is gone within `ms` (QToolTip hides after a short fade timer).
bool ui57_tooltip_gone(int ms = 2000) {
  QElapsedTimer clock;
  clock.start();
  while (QToolTip::isVisible() && clock.elapsed() < ms) {
    QApplication::processEvents(QEventLoop::AllEvents, 20);
    QTest::qWait(20);
  }
  return !QToolTip::isVisible();
}

}  // namespace

// Before any navigation the box names the view (it read "step 0" over the whole run): the measured
// steps, everything, a range of steps, one step; as it does after each move.
TEST(Ui57Timeline, TheStepBoxNamesWhatTheFirstViewShows) {
  TimelineView busy(fixtures::open_reader(fixtures::busy_session()));
  EXPECT_EQ(busy.step_box()->text(), "all steps");  // steps 0 and 1, no warm-up
  EXPECT_EQ(busy.step_box()->value(), 1);            // the centre (500 us) is step 1's start

  TimelineView view(fixtures::open_reader(ui57_warmup_session()));
  view.resize(1200, 400);
  view.show();
  ui57_settle();
  TimelineWidget* tl = view.timeline();
  StepBox* box = view.step_box();
  ASSERT_EQ(tl->view(), (ViewRange{200'000, 600'000}));  // the measured steps 0..3
  EXPECT_EQ(box->text(), "all measured steps");
  tl->setFocus();
  QTest::keyClick(tl, Qt::Key_F, Qt::ShiftModifier);  // everything
  EXPECT_EQ(box->text(), "all steps");
  tl->navigate({200'000, 400'000});
  EXPECT_EQ(box->text(), "steps 0-1");
  tl->navigate({150'000, 250'000});  // halves of warm-up 2 and step 0: the centre's
  EXPECT_EQ(box->text(), "step 0");
  tl->navigate({0, 300'000});
  EXPECT_EQ(box->text(), "warm-up 1 of 2 - step 0");
  // Up from "steps 0-1" goes on from its centre step (1 at 300 us): step 2
  tl->navigate({200'000, 400'000});
  box->setFocus();
  QTest::keyClick(box, Qt::Key_Up);
  EXPECT_EQ(tl->view(), (ViewRange{400'000, 500'000}));
  EXPECT_EQ(box->text(), "step 2");
  // Enter on "all measured steps" fits its centre step, as Enter on a step does
  tl->setFocus();
  QTest::keyClick(tl, Qt::Key_F);
  ASSERT_EQ(box->text(), "all measured steps");
  box->setFocus();
  QTest::keyClick(box, Qt::Key_Return);
  EXPECT_EQ(tl->view(), tl->steps().at(2));  // the centre (400 us) is step 2's start
  EXPECT_EQ(box->text(), "step 2");
}

// An op's tooltip goes when the view moves under it: W (zoom), A / D (pan), Backspace (back), a
// resize; the next hover shows the op under the cursor then.
TEST(Ui57Timeline, ATooltipGoesWhenTheViewMoves) {
  auto tl = fixtures::busy_timeline();
  tl->show();
  ui57_settle();
  const QPoint lookup = fixtures::at_us(*tl, 150, 0);  // rank 0's lookup [100, 200) us
  for (int key : {Qt::Key_W, Qt::Key_A, Qt::Key_D, Qt::Key_Backspace}) {
    tl->scale().show(0, 1'000'000);  // 1 px a us: the lookup under the cursor
    ui57_hover(tl.get(), lookup);
    ASSERT_TRUE(QToolTip::isVisible()) << key;
    EXPECT_TRUE(QToolTip::text().startsWith("lookup\nrank 0")) << QToolTip::text().toStdString();
    EXPECT_TRUE(tl->tooltip_shown());
    QTest::keyClick(tl.get(), static_cast<Qt::Key>(key));
    EXPECT_FALSE(tl->tooltip_shown()) << key;
    EXPECT_TRUE(ui57_tooltip_gone()) << "the tooltip stayed after key " << key;
  }
  tl->scale().show(0, 1'000'000);
  ui57_hover(tl.get(), lookup);
  ASSERT_TRUE(QToolTip::isVisible());
  tl->resize(tl->width() - 100, tl->height());
  EXPECT_TRUE(ui57_tooltip_gone());
}

// A 50 ns match in a 1 ms view (0.05 px, folded into its neighbours' box) is zoomed to until it is
// at least kMatchMinPx wide; the bar says which match of how many; Enter next, Shift+Enter previous.
TEST(Ui57Timeline, ASearchZoomsToASubPixelMatchAndCountsTheMatches) {
  TimelineView view(fixtures::open_reader(ui57_tiny_match_session()));
  view.resize(1400, 400);
  view.show();
  ui57_settle();
  TimelineWidget* tl = view.timeline();
  ASSERT_EQ(tl->view(), (ViewRange{0, 1'000'000}));
  const double width = tl->scale().width();
  ASSERT_GT(width, 500);
  view.search_box()->setFocus();
  QTest::keyClicks(view.search_box(), "TINY");
  QTest::keyClick(view.search_box(), Qt::Key_Return);
  ASSERT_TRUE(tl->selected().has_value());
  const auto& first = tl->op(*tl->selected());
  EXPECT_EQ(first.start_ns, 300'000);
  auto px = [&](const sessions::OpRecord& o) { return tl->scale().x(o.end_ns) - tl->scale().x(o.start_ns); };
  EXPECT_GE(px(first), kMatchMinPx - 1e-6);  // 0.05 px before
  EXPECT_LE(px(first), kMatchMinPx + 0.5);
  EXPECT_NEAR(0.5 * static_cast<double>(tl->view().t0 + tl->view().t1), 300'025.0, 1.0);  // centred
  EXPECT_EQ(view.search_status()->text(), "match 1 of 3");
  QTest::keyClick(view.search_box(), Qt::Key_Return);
  EXPECT_EQ(tl->op(*tl->selected()).start_ns, 600'000);
  EXPECT_EQ(view.search_status()->text(), "match 2 of 3");
  EXPECT_GE(px(tl->op(*tl->selected())), kMatchMinPx - 1e-6);
  QTest::keyClick(view.search_box(), Qt::Key_Return, Qt::ShiftModifier);
  EXPECT_EQ(tl->op(*tl->selected()).start_ns, 300'000);
  EXPECT_EQ(view.search_status()->text(), "match 1 of 3");
  QTest::keyClick(view.search_box(), Qt::Key_Return, Qt::ShiftModifier);  // wraps to the last
  EXPECT_EQ(tl->op(*tl->selected()).start_ns, 900'000);
  EXPECT_EQ(view.search_status()->text(), "match 3 of 3");
  // a match wider than 80 % of the view: shown whole with a tenth either side, [-10, 110) us,
  // moved inside the session's extent
  view.search_box()->selectAll();
  QTest::keyClicks(view.search_box(), "lookup");
  EXPECT_EQ(view.search_status()->text(), "");  // the old text's count is gone while typing
  QTest::keyClick(view.search_box(), Qt::Key_Return);
  EXPECT_EQ(tl->view(), (ViewRange{0, 120'000}));
  EXPECT_EQ(view.search_status()->text(), "match 1 of 1");
  view.search_box()->selectAll();
  QTest::keyClicks(view.search_box(), "nothing like it");
  QTest::keyClick(view.search_box(), Qt::Key_Return);
  EXPECT_EQ(view.search_status()->text(), "no match");
}

// The step `stats` calls slowest (its slowest rank's own step time: step 2, 310 us), not the widest
// window (step 1): from the page, and from View > Go to Slowest Step (Ctrl+Shift+S) on another page.
TEST(Ui57Timeline, GoToSlowestStepFitsTheStepStatsNames) {
  const std::string path = ui57_slowest_session();
  const sessions::RunStats st = sessions::analyze_step_times(sessions::SessionReader(path));
  ASSERT_EQ(st.slowest_step, 2);  // the definition the page uses
  TimelineView view(fixtures::open_reader(path));
  view.go_to_slowest_step();
  ASSERT_TRUE(wait_for_analyses(&view));
  EXPECT_EQ(view.timeline()->view(), (ViewRange{600'000, 910'000}));
  EXPECT_EQ(view.step_box()->text(), "step 2");
  view.timeline()->fit();
  view.timeline()->navigate(view.timeline()->view());
  view.go_to_slowest_step();  // read once: at once the second time
  EXPECT_FALSE(view.slowest_job()->busy());
  EXPECT_EQ(view.step_box()->text(), "step 2");

  MainWindow win;
  ASSERT_EQ(win.open_session(QString::fromStdString(path), true), "");
  auto* tab = qobject_cast<QTabWidget*>(win.tabs()->currentWidget());
  ASSERT_NE(tab, nullptr);
  tab->setCurrentIndex(1);  // Summary
  auto* action = win.findChild<QAction*>("slowest_step_action");
  ASSERT_NE(action, nullptr);
  EXPECT_EQ(action->shortcut(), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_S));
  action->trigger();
  EXPECT_EQ(tab->currentIndex(), 0);
  auto* tv = qobject_cast<TimelineView*>(tab->widget(0));
  ASSERT_NE(tv, nullptr);
  ASSERT_TRUE(wait_for_analyses(tv));
  EXPECT_EQ(tv->timeline()->view(), tv->timeline()->steps().at(2));
  EXPECT_EQ(tv->step_box()->text(), "step 2");
  win.new_workload();  // a tab without a timeline
  EXPECT_EQ(win.go_to_slowest_step(), "go to slowest step: the current tab has no timeline");
}

// A session without a measured step has no slowest step: the note says so and the view stays.
TEST(Ui57Timeline, NoSlowestStepWithoutAMeasuredStep) {
  const std::string path = ui57_path("warm_only.db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path);
    w.set_metadata("world_size", "1");
    w.add_lane({0, 0, "compute", "thread"});
    w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", -1, 10'000, 60'000, 0, 0}});
    w.add_step({-1, 0, 0, 100'000, 0.5, 0, 0});
    w.close("cancelled");
  }
  TimelineView view(fixtures::open_reader(path));
  const ViewRange before = view.timeline()->view();
  view.go_to_slowest_step();
  ASSERT_TRUE(wait_for_analyses(&view));
  EXPECT_EQ(view.timeline()->view(), before);
  EXPECT_EQ(view.view_note()->text(), "no slowest step: no measured step was counted");
}
