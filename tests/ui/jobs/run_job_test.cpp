// Runs off the GUI thread.
#include <gtest/gtest.h>
#include <sys/stat.h>
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
#include "embedscope/engine/workload/presets.h"
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

TEST(RunJob, FormatsTheTimeLeft) {
  EXPECT_EQ(format_eta(12.34), "12.3 s");
  EXPECT_EQ(format_eta(269.9), "4 min 29 s");
  EXPECT_EQ(format_eta(16149.6), "4 h 29 min");
}

TEST(RunJob, RunsOffTheGuiThreadToTheEnd) {
  engine::WorkloadSpec spec = engine::load_preset("tiny");
  spec.steps = 5;
  const auto path = scratch("run.db");
  std::filesystem::remove(path);
  RunJob job(spec, QString::fromStdString(path.string()));
  QSignalSpy progress(&job, &RunJob::progress), finished(&job, &RunJob::finished);
  int ticks_while_running = 0;  // the GUI thread's event loop keeps turning during the run
  QTimer timer;
  QObject::connect(&timer, &QTimer::timeout, [&] { ticks_while_running += job.running(); });
  timer.start(0);
  job.start();
  EXPECT_TRUE(job.running());
  ASSERT_TRUE(finished.wait(120'000));
  EXPECT_GT(ticks_while_running, 0);
  EXPECT_FALSE(job.running());
  EXPECT_EQ(finished[0][1].toString(), "complete");
  EXPECT_EQ(finished[0][0].toString(), QString::fromStdString(path.string()));
  ASSERT_GE(progress.size(), 1);
  EXPECT_EQ(progress.back()[0].toLongLong(), 5);  // the last measured step is always reported
  EXPECT_EQ(progress.back()[1].toLongLong(), 5);
  EXPECT_GT(progress.back()[2].toDouble(), 0.0);
  EXPECT_EQ(sessions::SessionReader(path.string()).meta("ended"), "complete");

  // the engine refusing the workload (the file exists) is a message, not a crash
  RunJob again(spec, QString::fromStdString(path.string()));
  QSignalSpy refused(&again, &RunJob::finished);
  again.start();
  ASSERT_TRUE(refused.wait(60'000));
  EXPECT_EQ(refused[0][1].toString(), "error");
  EXPECT_TRUE(refused[0][2].toString().contains(QString::fromStdString(path.string()))) << refused[0][2].toString().toStdString();
}

// An lm_embedding run reports progress after every step, as a DLRM run does (issue 19: it
// reported none until it ended): a tiny vocab_parallel run of 4 steps on 2 ranks, every step
// reported (progress interval 0), in order, before finished().
TEST(RunJob, LmRunReportsProgressAfterEveryStep) {
  engine::LmWorkloadSpec spec = engine::load_lm_preset("llama3_8b_embedding_scaled");
  spec.vocab_size = 64;
  spec.hidden_size = 8;
  spec.sequence_length = 8;
  spec.micro_batch_size = 2;
  spec.world_size = 2;
  spec.steps = 4;
  const auto path = scratch("lm_progress.db");
  std::filesystem::remove(path);
  RunJob job(spec, QString::fromStdString(path.string()));
  job.set_progress_interval(std::chrono::milliseconds(0));
  std::vector<qint64> steps, totals;
  std::vector<double> rates, etas;
  int progress_at_finish = -1;
  QObject::connect(&job, &RunJob::progress, [&](qint64 step, qint64 total, double samples_per_s, double eta_s) {
    steps.push_back(step);
    totals.push_back(total);
    rates.push_back(samples_per_s);
    etas.push_back(eta_s);
  });
  QSignalSpy finished(&job, &RunJob::finished);
  QObject::connect(&job, &RunJob::finished, [&] { progress_at_finish = static_cast<int>(steps.size()); });
  job.start();
  ASSERT_TRUE(finished.wait(120'000));
  EXPECT_EQ(finished[0][1].toString(), "complete") << finished[0][2].toString().toStdString();
  EXPECT_EQ(steps, (std::vector<qint64>{1, 2, 3, 4}));
  EXPECT_EQ(totals, (std::vector<qint64>{4, 4, 4, 4}));
  EXPECT_EQ(progress_at_finish, 4);  // every step's progress came before finished()
  for (double r : rates) EXPECT_GT(r, 0.0);  // vocab_parallel: 2 sequences a step over its time
  ASSERT_EQ(etas.size(), 4u);
  EXPECT_EQ(etas.back(), 0.0);  // nothing left after the last step
  EXPECT_GT(etas.front(), 0.0);
  // the session has the 4 steps of both ranks
  const auto recorded = sessions::SessionReader(path.string()).steps();
  EXPECT_EQ(recorded.size(), 8u);
}

// The workbench opening the session its own run is still writing (File > Open of the run's file)
// leaves the run's SQLite lock on it in place: before, the header read and the reader's probes
// closed descriptors of the file, which drops every POSIX lock of the process on it, and another
// process's read-write connection closing last then deleted the live run's -wal
// (sessions/store/held_files.h; HeldFiles56.* in sessions_test show the whole failure).
TEST(RunJob, OpeningTheLiveSessionOfItsOwnRunKeepsTheRunsSqliteLock) {
  engine::WorkloadSpec spec = engine::load_preset("tiny");
  spec.steps = 100000;  // cancelled below
  const auto path = scratch("held56_live.db");
  std::filesystem::remove(path);
  RunJob job(spec, QString::fromStdString(path.string()));
  QSignalSpy finished(&job, &RunJob::finished);
  job.start();
  auto posix_lock_held = [&] {
    struct stat sb {};
    if (::stat(path.c_str(), &sb) != 0) return false;
    const std::string inode = ":" + std::to_string(sb.st_ino) + " ", pid = " " + std::to_string(getpid()) + " ";
    std::ifstream locks("/proc/locks");
    for (std::string line; std::getline(locks, line);)
      if (line.find("POSIX") != std::string::npos && line.find(pid) != std::string::npos &&
          line.find(inode) != std::string::npos)
        return true;
    return false;
  };
  // the run's connection holds its lock once the file is made
  for (int i = 0; i < 600 && !posix_lock_held(); ++i) QTest::qWait(50);
  ASSERT_TRUE(posix_lock_held()) << "the run's SQLite lock never appeared";
  for (int i = 0; i < 600; ++i) {  // wait for committed steps: the tab then has something to show
    try {
      if (!sessions::SessionReader(path.string()).steps().empty()) break;
    } catch (const sessions::SessionError&) {
    }
    QTest::qWait(50);
  }
  {
    MainWindow w;
    EXPECT_EQ(w.open_path(QString::fromStdString(path.string()), true), QString());
    QTest::qWait(200);
    EXPECT_TRUE(job.running());
    EXPECT_TRUE(posix_lock_held()) << "opening the live session dropped the run's SQLite lock";
  }
  job.cancel();
  ASSERT_TRUE(finished.wait(120'000));
  EXPECT_EQ(finished[0][1].toString(), "cancelled") << finished[0][2].toString().toStdString();
  EXPECT_FALSE(posix_lock_held());
}
