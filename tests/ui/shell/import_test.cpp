// File > Open and drag and drop of traces: the import runs in the background (ImportJob) with
// progress and Cancel, then the session opens marked imported; the report shows every row of
// its scrolling panes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QHeaderView>
#include <QLabel>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QTableView>
#include <QTest>
#include <QUrl>
#include <QVBoxLayout>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "jobs/import_job.h"
#include "models/gpu_kernels_model.h"
#include "shell/main_window.h"
#include "shell/report_layout.h"
#include "timeline/timeline_widget.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
std::filesystem::path scratch_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("es_ui_import_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}
// A copy of the two-rank fixture trace in its own folder (the import writes beside it).
std::string trace_copy(const std::string& name) {
  const auto d = scratch_dir(name);
  for (const char* f : {"rank0.json", "rank1.json"})
    std::filesystem::copy_file(std::string(EMBEDSCOPE_TEST_DATA) + "/traces/hta_small/" + f, d / f);
  return d.string();
}
bool wait_until(const std::function<bool()>& done, int ms = 60000) {
  QElapsedTimer t;
  t.start();
  while (!done() && t.elapsed() < ms) QTest::qWait(20);
  return done();
}
}  // namespace

TEST(ImportJob, ImportsInTheBackgroundWithProgress) {
  const std::string dir = trace_copy("job");
  const QString target = QString::fromStdString(dir + "/hta_small.db");
  ImportJob job({QString::fromStdString(dir)}, target);
  QSignalSpy progress(&job, &ImportJob::progress), finished(&job, &ImportJob::finished);
  job.start();
  EXPECT_TRUE(job.running());
  ASSERT_TRUE(finished.wait(60000));
  EXPECT_EQ(finished.at(0).at(0).toString(), "complete") << finished.at(0).at(1).toString().toStdString();
  ASSERT_FALSE(progress.isEmpty());
  EXPECT_DOUBLE_EQ(progress.last().at(0).toDouble(), 1.0);
  const sessions::SessionReader r(target.toStdString());
  EXPECT_EQ(r.status(), "complete");
  EXPECT_EQ(r.meta("imported"), "1");
  EXPECT_EQ(r.meta("import_format"), "kineto_json");
}

TEST(ImportJob, CancelLeavesNothingBehind) {
  const std::string dir = trace_copy("cancel");
  const QString target = QString::fromStdString(dir + "/cancelled.db");
  ImportJob job({QString::fromStdString(dir)}, target);
  QSignalSpy finished(&job, &ImportJob::finished);
  job.cancel();  // before the first file: nothing is read
  job.start();
  ASSERT_TRUE(finished.wait(60000));
  EXPECT_EQ(finished.at(0).at(0).toString(), "cancelled");
  for (const char* suffix : {"", "-wal", "-shm"})
    EXPECT_FALSE(std::filesystem::exists(target.toStdString() + suffix)) << suffix;
  // a file that is no trace: an error naming it, and no session left
  const auto bad = scratch_dir("bad") / "notes.json";
  { std::ofstream(bad) << "hello"; }
  ImportJob failing({QString::fromStdString(bad.string())}, QString::fromStdString((bad.parent_path() / "notes.db").string()));
  QSignalSpy failed(&failing, &ImportJob::finished);
  failing.start();
  ASSERT_TRUE(failed.wait(60000));
  EXPECT_EQ(failed.at(0).at(0).toString(), "error");
  EXPECT_TRUE(failed.at(0).at(1).toString().contains("notes.json")) << failed.at(0).at(1).toString().toStdString();
  EXPECT_FALSE(std::filesystem::exists(bad.parent_path() / "notes.db"));
}

TEST(MainWindow, DroppedTraceIsImportedThenOpenedMarkedImported) {
  const std::string dir = trace_copy("drop");
  struct Window : MainWindow {  // the drop handler itself (QApplication routes real drops by position)
    using MainWindow::dropEvent;
  } w;
  QSignalSpy done(&w, &MainWindow::import_finished);
  QMimeData mime;
  mime.setUrls({QUrl::fromLocalFile(QString::fromStdString(dir + "/rank0.json"))});
  QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  ASSERT_TRUE(w.acceptDrops());
  w.dropEvent(&drop);
  // meanwhile: a tab with a progress bar and Cancel
  ASSERT_EQ(w.tabs()->count(), 1);
  EXPECT_TRUE(w.tabs()->tabText(0).startsWith("importing rank0.json"));
  EXPECT_NE(w.tabs()->widget(0)->findChild<QProgressBar*>(), nullptr);
  EXPECT_NE(w.tabs()->widget(0)->findChild<QPushButton*>("import_cancel"), nullptr);
  ASSERT_TRUE(done.wait(60000));
  EXPECT_EQ(done.at(0).at(1).toString(), "complete") << done.at(0).at(2).toString().toStdString();
  EXPECT_EQ(done.at(0).at(0).toString().toStdString(), dir + "/rank0.db");  // beside the source
  ASSERT_TRUE(wait_until([&] { return w.tabs()->count() == 1 && !w.tabs()->tabText(0).startsWith("importing"); }));
  EXPECT_EQ(w.tabs()->tabText(0), "rank0.db [imported: kineto_json]");
  EXPECT_EQ(w.windowTitle(), "Embedscope - rank0.db [imported: kineto_json]");
  // the summary says where it came from
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->widget(0));
  ASSERT_NE(views, nullptr);
  views->setCurrentIndex(1);
  ASSERT_TRUE(wait_for_analyses(views->widget(1)));
  QString said;
  for (auto* label : views->widget(1)->findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_TRUE(said.contains("<b>IMPORTED</b> from kineto_json")) << said.toStdString();
  EXPECT_TRUE(said.contains("rank0.json")) << said.toStdString();
  // opening it again reuses the import (same file, same size): no second import
  EXPECT_EQ(w.open_path(QString::fromStdString(dir + "/rank0.json"), true), QString());
  EXPECT_EQ(w.tabs()->count(), 2);
  EXPECT_EQ(w.tabs()->tabText(1), "rank0.db [imported: kineto_json]");
  EXPECT_FALSE(std::filesystem::exists(dir + "/rank0-2.db"));
  // a session opens as a session
  EXPECT_EQ(w.open_path(QString::fromStdString(dir + "/rank0.db"), true), QString());
  EXPECT_EQ(w.tabs()->count(), 3);
}

// A dropped `.json.gz` (tests/data/traces/whole.json.gz: rank 0 of the hta_small fixture,
// gzipped) is imported and opened: its GPU streams are timeline rows holding the kernels, an
// NCCL kernel's details list its collective records, and the summary shows HTA's figures
// (hand-computed in GpuKernels.ImportedFixtureDropsTheLastStepAsHtaDoes: overlap 37.50 %, idle
// 30 us, compute 60 us, non-compute 60 us).
TEST(MainWindow, DroppedJsonGzShowsStreamsKernelsCollectivesAndHtaFigures) {
  const auto dir = scratch_dir("drop_gz");
  const std::string gz = (dir / "rank0.pt.trace.json.gz").string();
  std::filesystem::copy_file(std::string(EMBEDSCOPE_TEST_DATA) + "/traces/whole.json.gz", gz);
  struct Window : MainWindow {
    using MainWindow::dropEvent;
  } w;
  QSignalSpy done(&w, &MainWindow::import_finished);
  QMimeData mime;
  mime.setUrls({QUrl::fromLocalFile(QString::fromStdString(gz))});
  QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  w.dropEvent(&drop);
  ASSERT_TRUE(done.wait(60000));
  ASSERT_EQ(done.at(0).at(1).toString(), "complete") << done.at(0).at(2).toString().toStdString();
  const std::string db = done.at(0).at(0).toString().toStdString();
  ASSERT_TRUE(wait_until([&] { return w.tabs()->count() == 1 && !w.tabs()->tabText(0).startsWith("importing"); }));
  EXPECT_TRUE(w.tabs()->tabText(0).endsWith("[imported: kineto_json]")) << w.tabs()->tabText(0).toStdString();
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->widget(0));
  ASSERT_NE(views, nullptr);
  auto* timeline = views->findChild<TimelineWidget*>();
  ASSERT_NE(timeline, nullptr);
  const sessions::SessionReader r(db);
  int streams = 0;
  std::vector<std::string> kernels;
  std::optional<OpRef> sendrecv;
  for (const auto& lane : r.lanes()) {
    if (lane.kind != "stream") continue;
    ++streams;
    const size_t row = timeline->row_of(lane.rank, lane.lane);
    ASSERT_LT(row, timeline->rows()) << lane.name;
    for (size_t i = 0; i < timeline->row_ops(row).size(); ++i) {
      kernels.push_back(r.name(timeline->row_ops(row)[i].name_id));
      if (kernels.back().rfind("ncclDevKernel_SendRecv", 0) == 0) sendrecv = OpRef{row, i};
    }
  }
  EXPECT_EQ(streams, 2);  // streams 7 and 13
  std::sort(kernels.begin(), kernels.end());
  EXPECT_EQ(kernels, (std::vector<std::string>{"Memcpy DtoD (Device -> Device)", "elementwise_kernel", "gemm_kernel",
                                               "gemm_kernel", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
                                               "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)"}));
  ASSERT_TRUE(sendrecv.has_value());
  const QString details = timeline->details(*sendrecv);
  EXPECT_TRUE(details.contains("elements sent to each peer: 20, 40<br>received from each: 30, 60")) << details.toStdString();
  views->setCurrentIndex(1);
  ASSERT_TRUE(wait_for_analyses(views->widget(1)));
  QString said;  // the overlap of the rank's streams is named for what it is, beside HTA's (tester34 D2)
  for (auto* label : views->widget(1)->findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_TRUE(said.contains("overlap 37.5 % (stream level: GPU kernels and copies of compute vs comm per rank with GPU "
                            "streams (its host spans left out), clipped to step windows)"))
      << said.toStdString();
  EXPECT_FALSE(said.contains("samples/s")) << "a trace has no samples: " << said.toStdString();
  EXPECT_TRUE(said.contains("Holistic Trace Analysis' definitions")) << said.toStdString();
  // the caption wraps: one line of it made every report page of a trace 1,796 px wide (tester45 F12.8)
  auto* kernels_caption = views->widget(1)->findChild<QLabel*>("gpu_kernels_caption");
  ASSERT_NE(kernels_caption, nullptr);
  EXPECT_TRUE(kernels_caption->wordWrap());
  const GpuKernelsModel* hta = nullptr;
  for (auto* table : views->widget(1)->findChildren<QTableView*>())
    if (auto* m = qobject_cast<const GpuKernelsModel*>(table->model())) hta = m;
  ASSERT_NE(hta, nullptr);
  ASSERT_EQ(hta->rowCount(), 1);
  EXPECT_EQ(hta->data(hta->index(0, GpuKernelsModel::Overlap)).toString(), "37.50 %");
  EXPECT_EQ(hta->data(hta->index(0, GpuKernelsModel::Idle), Qt::UserRole).toLongLong(), 30'000);
  EXPECT_EQ(hta->data(hta->index(0, GpuKernelsModel::Compute), Qt::UserRole).toLongLong(), 60'000);
  EXPECT_EQ(hta->data(hta->index(0, GpuKernelsModel::NonCompute), Qt::UserRole).toLongLong(), 60'000);
}

TEST(MainWindow, CancelledImportSaysSoAndKeepsNoSession) {
  const std::string dir = trace_copy("cancel_tab");
  MainWindow w;
  QSignalSpy done(&w, &MainWindow::import_finished);
  ImportJob* job = w.import_trace({QString::fromStdString(dir)}, true);
  ASSERT_NE(job, nullptr);
  job->cancel();
  ASSERT_TRUE(done.wait(60000));
  const QString ended = done.at(0).at(1).toString();
  if (ended == "complete") GTEST_SKIP() << "the import finished before the cancel reached it";
  EXPECT_EQ(ended, "cancelled");
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir).parent_path() /
                                       (std::filesystem::path(dir).filename().string() + ".db")));
  QString said;
  for (auto* label : w.tabs()->widget(0)->findChildren<QLabel*>()) said += label->text();
  EXPECT_TRUE(said.contains("import cancelled; nothing was kept")) << said.toStdString();
}

TEST(Report, ShowEveryRowGrowsTheWindowUntilNothingScrolls) {
  QWidget window;
  auto* layout = new QVBoxLayout(&window);
  auto* table = new QTableView(&window);
  auto* model = new QStandardItemModel(60, 2, table);  // 60 rows: far more than 300 px hold
  for (int r = 0; r < 60; ++r) model->setItem(r, 0, new QStandardItem(QString("row %1").arg(r)));
  table->setModel(model);
  layout->addWidget(new QLabel("above", &window));
  layout->addWidget(table, 1);
  window.resize(800, 300);
  window.show();
  QApplication::processEvents();
  ASSERT_GT(table->verticalScrollBar()->maximum(), 0);  // it scrolls
  EXPECT_EQ(show_every_row(&window, &window), 0);
  EXPECT_EQ(table->verticalScrollBar()->maximum(), 0);
  EXPECT_GT(window.height(), 60 * table->verticalHeader()->defaultSectionSize());
  EXPECT_EQ(window.width(), 800);
  // a cap: what did not fit is returned
  window.resize(800, 300);
  QApplication::processEvents();
  EXPECT_GT(show_every_row(&window, &window, 400), 0);
  EXPECT_LE(window.height(), 400);
}

// `--report TRACE` imports the trace first, as `--screenshot` and opening it do (tester34 D13);
// a damaged .db fails both ways with the CLI's words.
TEST(Report, OfATraceImportsItFirst) {
  const std::string dir = trace_copy("report_trace");
  const std::string cmd = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI) + " --report " + dir + "/rank0.json -o " +
                          dir + "/report 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/rank0.db"));
  std::ifstream html(dir + "/report/index.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("<title>Embedscope report: rank0.db [imported: kineto_json]</title>"), std::string::npos)
      << page.substr(0, 300);
  std::ofstream(dir + "/junk.db") << "not a session";
  for (const std::string& args : {" --report " + dir + "/junk.db -o " + dir + "/r2", " " + dir + "/junk.db --screenshot " + dir + "/x.png"}) {
    const std::string bad = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI) + args + " 2>" + dir + "/err.txt";
    EXPECT_EQ(WEXITSTATUS(std::system(bad.c_str())), 2) << args;
    std::ifstream err(dir + "/err.txt");
    const std::string said((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
    EXPECT_NE(said.find("junk.db: not an SQLite database"), std::string::npos) << args << ": " << said;
  }
}

// The summary of an imported trace names its serious import problems beside "complete" (tester34
// D10: a truncated trace read as a whole one), and counts the info notes.
TEST(MainWindow, SummaryOfAnImportListsItsDataLoss) {
  const auto dir = scratch_dir("problems");
  std::filesystem::copy_file(std::string(EMBEDSCOPE_TEST_DATA) + "/traces/truncated.json", dir / "truncated.json");
  MainWindow w;
  QSignalSpy done(&w, &MainWindow::import_finished);
  ASSERT_EQ(w.open_path(QString::fromStdString((dir / "truncated.json").string()), true), QString());
  ASSERT_TRUE(done.wait(60000));
  ASSERT_TRUE(wait_until([&] { return w.tabs()->count() == 1 && !w.tabs()->tabText(0).startsWith("importing"); }));
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->widget(0));
  ASSERT_NE(views, nullptr);
  views->setCurrentIndex(1);
  ASSERT_TRUE(wait_for_analyses(views->widget(1)));
  auto* problems = views->widget(1)->findChild<QLabel*>("import_problems");
  ASSERT_NE(problems, nullptr);
  const QString said = problems->text();
  EXPECT_TRUE(said.contains("data_loss &nbsp; 1 &times; <b>truncated</b>: ")) << said.toStdString();
  EXPECT_TRUE(said.contains("the text ends at line 5, column 1 inside the trace")) << said.toStdString();
  EXPECT_TRUE(said.contains("info &nbsp; 1 &times; <b>no_rank</b>")) << said.toStdString();
}
