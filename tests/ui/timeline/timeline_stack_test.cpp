// Timelines of several sessions aligned on a step, zooming and panning together.
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

TEST(Compare, ARunThatEndedInsideAStepIsAlignedOnceItsWindowsArrive) {
  // the out-of-memory run has no step row: its step 0 window ([3.0, 3.5) ms, from its ops) is
  // computed off the GUI thread, then the stack re-aligns on it
  auto oom = open_reader(test_support::oom_in_step_session());
  auto ok = open_reader(step_session("es_stack_ok", 1'000'000, {1'000'000}));
  TimelineStack stack({{"oom", oom}, {"ok", ok}}, 0);
  stack.resize(TimelineWidget::kGutter + 1000, 600);
  EXPECT_EQ(stack.offset(0), 0);  // aligned on what its steps table says (nothing) until then
  ASSERT_TRUE(wait_for_analyses(&stack));
  EXPECT_EQ(stack.offset(0), 3'000'000);
  EXPECT_EQ(stack.offset(1), 1'000'000);
  EXPECT_DOUBLE_EQ(stack.timeline(0)->scale().x(3'000'000), stack.timeline(1)->scale().x(1'000'000));
}
