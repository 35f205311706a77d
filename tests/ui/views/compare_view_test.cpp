// The comparison page and its figures model.
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
#include "embedscope/sessions/model/metadata_keys.h"
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
  EXPECT_DOUBLE_EQ(raw(CompareModel::ExposedComm, 2), static_cast<double>(b.exposed_comm_ns) / static_cast<double>(b.steps));
  EXPECT_DOUBLE_EQ(raw(CompareModel::Overlap, 1), a.overlap_pct);
  // a difference of percentages is in points, with no relative change after it
  const double d_overlap = b.overlap_pct - a.overlap_pct;
  EXPECT_EQ(m.data(m.index(CompareModel::Overlap, 3)).toString(),
            (d_overlap > 0 ? "+" : "") + QString::number(d_overlap, 'f', 1) + " points");
  EXPECT_TRUE(m.data(m.index(CompareModel::Overlap, 1)).toString().endsWith(" %"));
  EXPECT_DOUBLE_EQ(raw(CompareModel::PeakAllocated, 2), static_cast<double>(b.peak_allocated_bytes));
  // step_session records no load counters: no imbalance figure (not "1.00")
  EXPECT_FALSE(m.data(m.index(CompareModel::LookupImbalance, 1), Qt::UserRole).isValid());
  EXPECT_EQ(m.data(m.index(CompareModel::StepMean, 3)).toString(), "+2.00 ms (+200.0 %)");
  EXPECT_EQ(m.data(m.index(CompareModel::StepMean, 1)).toString(), "1.00 ms");
  EXPECT_EQ(m.headerData(3, Qt::Horizontal).toString(), "B - A");

  CompareView view({{"A", sa}, {"B", sb}});
  view.resize(1200, 800);
  EXPECT_EQ(view.pages()->count(), 3);
  // the figures arrive from the view's analysis job, off the GUI thread
  EXPECT_EQ(view.model(), nullptr);
  ASSERT_TRUE(wait_for_analyses(&view));
  ASSERT_NE(view.model(), nullptr);
  EXPECT_DOUBLE_EQ(view.model()->data(view.model()->index(CompareModel::StepMean, 2), Qt::UserRole).toDouble(), 3'000'000);
  EXPECT_EQ(view.model()->data(view.model()->index(CompareModel::StepMean, 3)).toString(), "+2.00 ms (+200.0 %)");
  ASSERT_NE(view.step_plot(), nullptr);
  EXPECT_EQ(view.step_plot()->graphCount(), 2);
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

// tester37: in a 3-session compare the legend (inside the axis rect, top right) covered the top of
// session C's bar. The legend now sits above the axis rect of both charts, beside nothing it hides.
TEST(Compare, TheLegendOfThreeSessionsSitsAboveTheChartsNotOnThem) {
  auto sa = open_reader(step_session("es_cmp_leg_a", 0, {1'000'000, 1'000'000}));
  auto sb = open_reader(step_session("es_cmp_leg_b", 0, {2'000'000, 4'000'000}));
  auto sc = open_reader(step_session("es_cmp_leg_c", 0, {3'000'000, 3'000'000}));
  CompareView view({{"session A with a long name", sa}, {"B", sb}, {"C", sc}});
  view.resize(1200, 800);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  QApplication::processEvents();
  for (QCustomPlot* plot : {view.step_plot(), view.exposed_plot()}) {
    ASSERT_NE(plot, nullptr);
    plot->replot();
    EXPECT_GE(plot->legend->itemCount(), 3);  // one per session (the step chart adds its own lines)
    const QRect legend = plot->legend->outerRect(), axes = plot->axisRect()->rect();
    EXPECT_GT(legend.height(), 0);
    EXPECT_FALSE(legend.intersects(axes)) << "legend " << legend.top() << ".." << legend.bottom() << ", axes from "
                                          << axes.top();
    EXPECT_LE(legend.bottom(), axes.top());
  }
  // the Timelines page names each session by its file's name, as the legend (tester39), the path on hover
  int headers = 0;
  for (const QLabel* l : view.findChildren<QLabel*>())
    if (l->text().startsWith("<b>") && l->text().contains("&nbsp;") && l->toolTip() == QString::fromStdString(sc->path())) {
      ++headers;
      EXPECT_TRUE(l->text().endsWith(QFileInfo(l->toolTip()).fileName())) << l->text().toStdString();
      EXPECT_FALSE(l->text().contains(QString::fromStdString(std::filesystem::path(sc->path()).parent_path().string())));
    }
  EXPECT_EQ(headers, 1);
}

// Two imported traces (no memory records) compared: the Memory page says why for each - an
// imported trace records no allocations - not "schema version 1" (tester62b F12); a run's session
// without memory records says just that.
TEST(Compare, MemoryPageSaysWhyImportedTracesHaveNoMemoryRecords) {
  auto make = [](const std::string& name, bool imported, const char* format) {
    const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".db");
    std::filesystem::remove(path);
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "1");
    if (imported) {
      w.set_metadata(sessions::meta::kImported, "1");
      w.set_metadata(sessions::meta::kImportFormat, format);
    }
    w.add_step({0, 0, 0, 1'000'000, 0, 0, 0});
    w.close("complete");
    return open_reader(path.string());
  };
  const std::vector<LabelledSession> s = {{"A", make("es_nomem_a", true, "kineto_json")},
                                          {"B", make("es_nomem_b", true, "nsys_sqlite")},
                                          {"C", make("es_nomem_c", false, "")}};
  const QString why = no_memory_records_text(s);
  EXPECT_EQ(why.toStdString(),
            "A: an imported PyTorch profiler (Kineto) trace, which records no allocations (import a PyTorch memory "
            "snapshot, or run the workload, for the allocator's history); B: an imported Nsight Systems trace, which records no allocations (import a "
            "PyTorch memory snapshot, or run the workload, for the allocator's history); C: no memory records");
  MemoryCompare page({s[0], s[1]});
  auto* none = page.findChild<QLabel*>("memory_compare_none");
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->text().toStdString().rfind("these sessions have no memory records: A: an imported PyTorch profiler (Kineto) trace", 0), 0u);
  EXPECT_EQ(none->text().toStdString().find("schema version"), std::string::npos);
}
