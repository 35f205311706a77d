// Plots follow the palette (light or dark).
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
  ASSERT_TRUE(wait_for_analyses(&view));  // aggregated off the GUI thread
  EXPECT_EQ(view.shard_map()->axisRects().value(0)->axis(QCPAxis::atLeft)->labelColor(), QColor(230, 230, 230));
}
