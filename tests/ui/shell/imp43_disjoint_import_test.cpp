// tester42 F12 in the workbench: File > Open of the traces of two different jobs (their time
// ranges 11.6 days apart) is refused as `embedscope import` refuses it, with the same text, no
// session left; the dialog offers Import Anyway, which imports them as `--allow-disjoint` does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QAbstractButton>
#include <QApplication>
#include <QMessageBox>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTimer>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "core/lane_labels.h"
#include "jobs/import_job.h"
#include "shell/main_window.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// Two Kineto traces, ranks 0 and 1 of a world of 2, each one ProfilerStep of 100 us with an
// aten::mm inside; rank 1's 11.6 days after rank 0's; returns the folder.
std::filesystem::path imp43_disjoint_traces(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("es_ui_imp43_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  auto write = [&](const char* file, int rank, int64_t ts_us) {
    nlohmann::json ev = nlohmann::json::array();
    ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#1"}, {"pid", 1}, {"tid", 1},
                  {"ts", ts_us}, {"dur", 100}});
    ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", 1}, {"tid", 1}, {"ts", ts_us + 1}, {"dur", 2}});
    std::ofstream(d / file) << nlohmann::json{{"distributedInfo", {{"rank", rank}, {"world_size", 2}}}, {"traceEvents", ev}}.dump();
  };
  write("a.json", 0, 1000);
  write("c.json", 1, 1'000'000'001'000);
  return d;
}
}  // namespace

TEST(Imp43DisjointImport, TheJobRefusesDisjointRanksUnlessAllowed) {
  const auto d = imp43_disjoint_traces("job");
  const QStringList sources{QString::fromStdString((d / "a.json").string()), QString::fromStdString((d / "c.json").string())};
  const QString target = QString::fromStdString((d / "both.db").string());
  ImportJob job(sources, target);
  QSignalSpy finished(&job, &ImportJob::finished);
  job.start();
  ASSERT_TRUE(finished.wait(60000));
  EXPECT_EQ(finished.at(0).at(0).toString(), "disjoint");
  const std::string msg = finished.at(0).at(1).toString().toStdString();
  EXPECT_NE(msg.find((d / "c.json").string() + ": refused: rank 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(11.6 days apart)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Import Anyway"), std::string::npos) << msg;
  for (const char* suffix : {"", "-wal", "-shm"}) EXPECT_FALSE(std::filesystem::exists(target.toStdString() + suffix)) << suffix;
  ImportJob anyway(sources, target, nullptr, true);
  QSignalSpy done(&anyway, &ImportJob::finished);
  anyway.start();
  ASSERT_TRUE(done.wait(60000));
  EXPECT_EQ(done.at(0).at(0).toString(), "complete") << done.at(0).at(1).toString().toStdString();
  EXPECT_EQ(sessions::SessionReader(target.toStdString()).ranks().size(), 2u);
}

TEST(Imp43DisjointImport, TheWindowShowsTheRefusalAndImportsAnywayOnRequest) {
  const auto d = imp43_disjoint_traces("window");
  MainWindow w;
  QSignalSpy done(&w, &MainWindow::import_finished);
  // the dialog: its text, then Import Anyway
  QString said;
  bool clicked = false;
  QTimer poll;
  QObject::connect(&poll, &QTimer::timeout, [&] {
    auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
    if (!box || box->objectName() != "disjoint_import") return;
    said = box->text();
    auto* anyway = box->findChild<QAbstractButton*>("import_anyway");
    if (!anyway) return;
    clicked = true;
    anyway->click();
  });
  poll.start(20);
  ASSERT_NE(w.import_trace({QString::fromStdString((d / "a.json").string()), QString::fromStdString((d / "c.json").string())}),
            nullptr);
  ASSERT_TRUE(done.wait(60000));
  EXPECT_EQ(done.at(0).at(1).toString(), "disjoint");
  EXPECT_TRUE(done.at(0).at(0).toString().isEmpty());
  if (done.size() < 2) {
    ASSERT_TRUE(done.wait(60000));  // the import anyway
  }
  poll.stop();
  EXPECT_TRUE(clicked);
  EXPECT_TRUE(said.contains("refused: rank 1")) << said.toStdString();
  EXPECT_TRUE(said.contains("11.6 days apart")) << said.toStdString();
  ASSERT_EQ(done.size(), 2);
  EXPECT_EQ(done.at(1).at(1).toString(), "complete") << done.at(1).at(2).toString().toStdString();
  const std::string session = done.at(1).at(0).toString().toStdString();
  ASSERT_FALSE(session.empty());
  EXPECT_EQ(sessions::SessionReader(session).ranks().size(), 2u);
  // the refused import's tab went; the session's tab is there
  EXPECT_EQ(w.tabs()->count(), 1);
}

// tester42 F24: an Nsight export's NVTX row is labelled as its thread's, with NVTX (it read
// "rank 0 test_matmul 30156 #1" and "#2" beside the thread's row).
TEST(Imp43NvtxRowLabel, TheNvtxRowSaysNvtx) {
  EXPECT_EQ(short_lane_name("thread 30156 (test_matmul) NVTX"), "test_matmul NVTX");
  const auto labels = lane_labels({{0, "thread 30156 (test_matmul)"}, {0, "thread 30156 (test_matmul) NVTX"}, {0, "stream 7 (cuda:0 NVIDIA H200)"}});
  EXPECT_EQ(labels, (std::vector<std::string>{"rank 0 test_matmul", "rank 0 test_matmul NVTX", "rank 0 stream 7"}));
}
