// The teaching scenario view: play control, runs, labels.
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
  ASSERT_TRUE(wait_for_analyses(view.play_job()));  // the play order, found off the GUI thread
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

// A scenario of lm_embedding runs (inline workloads here; the built-in
// vocab_parallel_vs_sequence_parallel uses the scaled Llama preset): the view lists them with
// their steps and ranks, runs one itself (RunJob over run_lm) and opens its session.
TEST(ScenarioView, RunsAnLmRunAndOpensItsSession) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_scen_lm_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  Scenario sc = parse_scenario(nlohmann::json::parse(R"({"id": "lm_demo", "title": "LM", "explanation": "text",
      "runs": [{"label": "all-reduce", "workload": {"model": "lm_embedding", "vocab_size": 64, "hidden_size": 8,
                "sequence_length": 8, "micro_batch_size": 2, "devices": {"count": 2}, "steps": 2}},
               {"label": "sequence parallel", "workload": {"model": "lm_embedding", "vocab_size": 64, "hidden_size": 8,
                "sequence_length": 8, "micro_batch_size": 2, "devices": {"count": 2}, "steps": 2,
                "sharding": {"sequence_parallel": true}}}]})"), "lm_demo.json");
  ASSERT_TRUE(sc.runs[1].lm.has_value());
  EXPECT_TRUE(sc.runs[1].lm->sequence_parallel);
  ScenarioView view(sc);
  view.resize(1400, 800);
  view.show();
  EXPECT_EQ(view.open_folder(QString::fromStdString(dir.string())), 0);  // makes it the run directory
  QPushButton* run_b = nullptr;
  for (auto* b : view.findChildren<QPushButton*>())
    if (b->text() == "Run") run_b = b;  // the last one: run b
  ASSERT_NE(run_b, nullptr);
  EXPECT_EQ(run_b->toolTip(), "run this workload (2 steps on 2 ranks)");
  run_b->click();
  // the run's row shows each step as it ends (the first and the last step are always reported);
  // the job's progress reaches the view's slot first, so the row is updated when this one runs
  auto* job = view.findChild<RunJob*>();
  ASSERT_NE(job, nullptr);
  QStringList shown;
  QObject::connect(job, &RunJob::progress, [&] {
    for (auto* label : view.findChildren<QLabel*>())
      if (label->text().startsWith("running:")) shown << label->text();
  });
  QTRY_COMPARE_WITH_TIMEOUT(run_b->text(), QString("Run"), 60000);
  ASSERT_EQ(shown.size(), 2) << shown.join(" | ").toStdString();
  EXPECT_TRUE(shown[0].startsWith("running: step 1/2, ")) << shown[0].toStdString();
  EXPECT_TRUE(shown[0].contains(" sequences/s, ")) << shown[0].toStdString();
  EXPECT_TRUE(shown[1].startsWith("running: step 2/2, ")) << shown[1].toStdString();
  EXPECT_TRUE(shown[1].endsWith(", 0.0 s left")) << shown[1].toStdString();
  const sessions::SessionReader s((dir / "lm_demo-1.db").string());
  EXPECT_EQ(s.status(), "complete");
  int reduce_scatters = 0;
  for (const auto& c : s.collectives()) reduce_scatters += c.name == "embedding/reduce_scatter" ? 1 : 0;
  EXPECT_EQ(reduce_scatters, 2 * 2);  // 2 ranks x 2 steps
  ASSERT_NE(view.compare(), nullptr);
  EXPECT_EQ(view.compare()->timelines()->size(), 1u);
  std::filesystem::remove_all(dir);
}
