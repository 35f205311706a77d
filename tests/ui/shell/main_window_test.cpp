// The main window: opening sessions, reports, exports, About.
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
#include "embedscope/engine/workload/lm_spec.h"
#include "views/compare_view.h"
#include "models/critical_path_model.h"
#include "views/memory_compare.h"
#include "embedscope/engine/workload/scenario.h"
#include "views/scenario_view.h"
#include "core/load_data.h"
#include "views/load_view.h"
#include "views/memory_view.h"
#include "shell/main_window.h"
#include "embedscope/sessions/model/metadata_keys.h"
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
  ASSERT_TRUE(wait_for_analyses(views->widget(1)));  // analysed off the GUI thread
  QString said;
  for (auto* label : views->widget(1)->findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_TRUE(said.contains("semi_sync pipeline (qcomms forward bf16, backward fp16)")) << said.toStdString();
  EXPECT_TRUE(said.contains("no complete measured step (the run ended cancelled before its first measured step): no "
                            "step times, overlap or throughput")) << said.toStdString();
  EXPECT_FALSE(said.contains("nothing to analyse")) << said.toStdString();
}

// The text of every label on the Summary page of the session at `path`, opened in a window; ""
// (and a failure) when it does not open or its analyses do not finish.
QString summary_labels(const std::string& path) {
  MainWindow w;
  if (w.open_session(QString::fromStdString(path), true) != QString()) {
    ADD_FAILURE() << path << " did not open";
    return {};
  }
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->widget(0));
  views->setCurrentIndex(1);
  if (!wait_for_analyses(views->widget(1))) {
    ADD_FAILURE() << path << ": the Summary's analyses did not finish";
    return {};
  }
  QString said;
  for (auto* label : views->widget(1)->findChildren<QLabel*>()) said += label->text() + "\n";
  return said;
}

// An lm_embedding session's summary names its model and sharding, not a DLRM pipeline and
// qcomms it cannot have, and counts throughput in tokens (tester33 D15).
TEST(MainWindow, SummaryOfAnLmSessionNamesItsModelAndTokens) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_lm_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  engine::LmWorkloadSpec lm;
  lm.name = "lm_test";
  lm.vocab_size = 48;
  lm.hidden_size = 8;
  lm.sequence_length = 8;
  lm.micro_batch_size = 2;  // 16 tokens a step (vocab_parallel: every rank the same batch)
  lm.world_size = 2;
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata(sessions::meta::kWorkloadName, "lm_test");
    w.set_metadata(sessions::meta::kBackend, "cpu");
    w.set_metadata(sessions::meta::kWorkloadJson, engine::to_json(lm).dump());
    for (int r = 0; r < 2; ++r) {
      w.add_lane({r, 0, "compute", "thread"});
      w.add_step({0, r, 0, 4'000'000, 0.0, 0, 0});  // 4 ms: 16 tokens / 4 ms = 4,000 tokens/s
    }
    w.close("complete");
  }
  const QString said = summary_labels(path.string());
  EXPECT_TRUE(said.contains("<b>lm_test</b> on 2 ranks, cpu, lm_embedding 48 x 8 fp32, vocab_parallel")) << said.toStdString();
  EXPECT_FALSE(said.contains("pipeline (qcomms")) << said.toStdString();
  EXPECT_TRUE(said.contains("; 4000 tokens/s")) << said.toStdString();
}

// The Summary says what hot-row replication did, as `stats` (tester35 D11): 4 rows of t_c, 113
// hot ids over 10 measured steps, a 208-byte all-reduce a step.
TEST(MainWindow, SummaryListsTheHotRows) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_hot_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata(sessions::meta::kWorkloadName, "hot");
    w.set_metadata(sessions::meta::kTableStorageJson,
                   R"([{"table": "t_a", "hot_rows": 0}, {"table": "t_c", "hot_rows": 4, "hot_ids": 113, "hot_all_reduce_bytes": 208}])");
    w.add_lane({0, 0, "compute", "thread"});
    for (int step = 0; step < 10; ++step) w.add_step({step, 0, step * 1000, step * 1000 + 900, 0.5, 0, 0});
    w.close("complete");
  }
  const QString said = summary_labels(path.string());
  EXPECT_TRUE(said.contains("hot rows (replicated on every rank, trained data-parallel): t_c 4 rows, 11.3 ids a step kept "
                            "off the input all-to-all, 208 B all-reduced a step"))
      << said.toStdString();
  EXPECT_FALSE(said.contains("t_a 0 rows")) << said.toStdString();
}

TEST(MainWindow, SimulatedSessionsSaySoInTheirTitle) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_simulated_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata(sessions::meta::kSimulated, "1");
    w.add_step({0, 0, 0, 1000, 0.0, 0, 0});
    w.close("complete");
  }
  MainWindow w;
  ASSERT_EQ(w.open_session(QString::fromStdString(path.string()), true), QString());
  const QString name = QFileInfo(QString::fromStdString(path.string())).fileName();
  EXPECT_EQ(w.tabs()->tabText(0), name + " [SIMULATED]");
  EXPECT_EQ(w.windowTitle(), "Embedscope - " + name + " [SIMULATED]");
}

// An OOM in step 0 (no step row, ops recorded): the summary says which step the run ended in and
// that the critical path below is that of the ops recorded, never "nothing to analyse".
TEST(MainWindow, SummaryOfAnOomRunDoesNotSayNothingToAnalyse) {
  MainWindow w;
  ASSERT_EQ(w.open_session(QString::fromStdString(test_support::oom_in_step_session()), true), QString());
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->widget(0));
  views->setCurrentIndex(1);
  ASSERT_TRUE(wait_for_analyses(views->widget(1)));
  QString said;
  for (auto* label : views->widget(1)->findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_TRUE(said.contains("no complete measured step (the run ended oom in step 0)")) << said.toStdString();
  EXPECT_TRUE(said.contains("the critical path and collectives below are those of the ops recorded before the end"));
  EXPECT_FALSE(said.contains("nothing to analyse"));
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

// The report's title carries the session's mark as its tab does (tester33 D15: a simulated
// session's report said nothing of it).
TEST(Report, TitleCarriesTheSessionsMark) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_report_sim_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto path = dir / "sim.db";
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata(sessions::meta::kSimulated, "1");
    w.add_step({0, 0, 0, 1000, 0.0, 0, 0});
    w.close("complete");
  }
  const std::string cmd = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI) + " --report " + path.string() +
                          " -o " + (dir / "report").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream html(dir / "report" / "index.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("<title>Embedscope report: sim.db [SIMULATED]</title>"), std::string::npos) << page.substr(0, 300);
  EXPECT_NE(page.find("<h1>Embedscope report: sim.db [SIMULATED]</h1>"), std::string::npos);
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

// A session whose table the views read is corrupt (its root page overwritten): the report fails
// as `embedscope stats` fails for the same file, exit 2 with the reader's message (issue 20,
// defect 8: the report exited 0 with the views showing the error).
TEST(Report, FailsLikeTheCliForACorruptTable) {
  const std::string path = fixture_session();
  int64_t root = 0, page_size = 0;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_schema "
                                     "WHERE name = 'collectives'", -1, &st, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    root = sqlite3_column_int64(st, 0);
    page_size = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  ASSERT_GT(root, 1);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((root - 1) * page_size);
    const std::string garbage(64, '\xff');  // not a b-tree page header
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  const auto dir = std::filesystem::temp_directory_path() / ("es_report_corrupt_" + std::to_string(getpid()));
  const std::string out = dir.string() + ".err";
  const std::string cli = std::string(EMBEDSCOPE_CLI) + " stats " + path + " >/dev/null 2>" + out;
  const int cli_status = std::system(cli.c_str());
  std::string cli_err;
  {
    std::ifstream f(out);
    cli_err.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  ASSERT_EQ(WEXITSTATUS(cli_status), 2) << cli_err;
  const std::string ui = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI) + " --report " + path + " -o " +
                         dir.string() + " >/dev/null 2>" + out;
  const int ui_status = std::system(ui.c_str());
  std::string ui_err;
  {
    std::ifstream f(out);
    ui_err.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  EXPECT_EQ(WEXITSTATUS(ui_status), 2) << ui_err;
  EXPECT_NE(ui_err.find("error: " + path + ": the session file is truncated or corrupt"), std::string::npos) << ui_err;
  EXPECT_NE(cli_err.find("error: " + path + ": the session file is truncated or corrupt"), std::string::npos) << cli_err;
  std::filesystem::remove_all(dir);
  std::filesystem::remove(out);
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
  // the offscreen platform shows no window either (tester41 #12: it ran until killed, silent)
  std::filesystem::remove_all(dir / "run-report");
  const std::string offscreen = "cd " + dir.string() + " && QT_QPA_PLATFORM=offscreen timeout 120 " +
                                std::string(EMBEDSCOPE_UI) + " run.db > out.txt 2>/dev/null";
  ASSERT_EQ(std::system(offscreen.c_str()), 0);
  EXPECT_TRUE(std::filesystem::exists(dir / "run-report" / "index.html"));
  std::ifstream out2(dir / "out.txt");
  const std::string said2((std::istreambuf_iterator<char>(out2)), std::istreambuf_iterator<char>());
  EXPECT_NE(said2.find("QT_QPA_PLATFORM=offscreen shows no window: the report of run.db is in run-report/index.html"),
            std::string::npos) << said2;
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
    // what works there instead (docs55 D11: a comparison's report was not suggested)
    if (flag == "--compare") {
      EXPECT_NE(e.find("add --report -o DIR to write the comparison's report"), std::string::npos) << e;
    }
    if (flag == "--scenario") {
      EXPECT_NE(e.find("add --screenshot FILE.png to render it (with --scenario-sessions DIR"), std::string::npos) << e;
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "run-report")) << args;
  }
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
