// Analyses off the GUI thread with a request id (jobs/analysis_job.h): a stale result is
// dropped, and the event loop keeps running while a big analysis does.
#include <gtest/gtest.h>

#include <QApplication>
#include <QSignalSpy>
#include <QTest>
#include <QThread>
#include <QTimer>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "jobs/analysis_job.h"

using namespace embedscope;
using namespace embedscope::ui;

TEST(AnalysisJob, AStaleResultIsDroppedAndTheLatestApplied) {
  AnalysisJob job;
  QSignalSpy dropped(&job, &AnalysisJob::dropped);
  QSignalSpy finished(&job, &AnalysisJob::finished);
  std::vector<int> applied;
  // the first request's result arrives late, after the second's
  const quint64 first = job.start<int>(
      [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return 1;
      },
      [&](int& v) { applied.push_back(v); });
  const quint64 second = job.start<int>([] { return 2; }, [&](int& v) { applied.push_back(v); });
  EXPECT_NE(first, second);
  EXPECT_EQ(job.current(), second);
  EXPECT_TRUE(job.busy());
  QTRY_VERIFY(!job.busy());
  EXPECT_EQ(applied, (std::vector<int>{2}));
  QTRY_COMPARE_WITH_TIMEOUT(dropped.count(), 1, 10000);  // the late one arrives, and is not applied
  EXPECT_EQ(dropped.at(0).at(0).toULongLong(), first);
  EXPECT_EQ(applied, (std::vector<int>{2}));
  ASSERT_EQ(finished.count(), 1);
  EXPECT_EQ(finished.at(0).at(0).toULongLong(), second);

  // a cancelled request's result is dropped too; a failure goes to `failed`
  job.start<int>([] { return 3; }, [&](int& v) { applied.push_back(v); });
  job.cancel();
  EXPECT_FALSE(job.busy());
  QTRY_COMPARE_WITH_TIMEOUT(dropped.count(), 2, 10000);
  EXPECT_EQ(applied, (std::vector<int>{2}));
  QString error;
  job.start<int>([]() -> int { throw std::runtime_error("x.db: not a session"); }, [&](int& v) { applied.push_back(v); },
                 [&](const QString& e) { error = e; });
  QTRY_VERIFY(!job.busy());
  EXPECT_EQ(error, "x.db: not a session");
  EXPECT_EQ(applied, (std::vector<int>{2}));
}

TEST(AnalysisJob, AResultAfterItsViewClosedIsDropped) {
  auto applied = std::make_shared<std::atomic<bool>>(false);
  auto ran = std::make_shared<std::atomic<bool>>(false);
  {
    auto view = std::make_unique<QObject>();
    auto* job = new AnalysisJob(view.get());
    job->start<int>(
        [ran] {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          *ran = true;
          return 1;
        },
        [applied](int&) { *applied = true; });
  }  // the tab closes while the analysis runs
  QTRY_VERIFY_WITH_TIMEOUT(ran->load(), 10000);
  QTest::qWait(100);  // time for a (wrongly) posted result to arrive
  EXPECT_FALSE(applied->load());
}

// 10M ops generated in memory on the worker (no session file to write), analysed there by
// sessions::rank_step_times; a 10 ms timer on the GUI thread keeps firing meanwhile. The comm ops
// sit on a lane of their own (a comm thread's), so the compute of lane 0 hides them: the overlap
// counts only comm beside compute of another lane (a same-lane enclosing span waits in it).
TEST(AnalysisJob, TheEventLoopKeepsRunningWhileA10MOpAnalysisRuns) {
  constexpr int64_t kOps = 10'000'000;
  AnalysisJob job;
  QThread* worker = nullptr;
  std::atomic<bool> running{false};
  int ticks_during = 0;
  QTimer timer;
  timer.setInterval(10);
  QObject::connect(&timer, &QTimer::timeout, [&] { ticks_during += running.load(); });
  timer.start();
  sessions::RankStepTimes result;
  job.start<sessions::RankStepTimes>(
      [&] {
        running = true;
        worker = QThread::currentThread();
        std::vector<sessions::OpRecord> ops(static_cast<size_t>(kOps));
        // pair k = i / 2: compute [20k, 20k + 6) on lane 0, comm [20k + 4, 20k + 9) on lane 1
        for (int64_t i = 0; i < kOps; ++i) {
          auto& o = ops[static_cast<size_t>(i)];
          const bool comm = i % 2 == 1;
          o.category = comm ? sessions::OpCategory::comm : sessions::OpCategory::lookup;
          o.lane = comm ? 1 : 0;
          o.start_ns = 10 * (i / 2) * 2 + (comm ? 4 : 0);
          o.end_ns = o.start_ns + (comm ? 5 : 6);
        }
        auto times = sessions::rank_step_times(ops, 0, 10 * kOps);
        running = false;
        return times;
      },
      [&](sessions::RankStepTimes& t) { result = t; });
  QTRY_VERIFY_WITH_TIMEOUT(!job.busy(), 120000);
  EXPECT_NE(worker, QApplication::instance()->thread());
  EXPECT_GT(ticks_during, 0) << "the GUI thread's timer never fired while the analysis ran";
  // 5M pairs, all inside the window [0, 100 ms): per pair 6 ns compute, 5 ns comm, 2 ns of
  // comm ([20k + 4, 20k + 6)) under compute, 3 ns exposed
  constexpr int64_t kPairs = kOps / 2;
  EXPECT_EQ(result.compute_ns, 6 * kPairs);
  EXPECT_EQ(result.comm_ns, 5 * kPairs);
  EXPECT_EQ(result.overlap_ns, 2 * kPairs);
  EXPECT_EQ(result.exposed_comm_ns, 3 * kPairs);
}
