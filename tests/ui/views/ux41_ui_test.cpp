// ux41 #6, #12: a GPU run's Summary and Compare say how busy the GPU was and what its host
// threads waited in collectives beside its streams' exposed communication (the lines and
// figures of `embedscope stats` / `embedscope compare`, from the same sessions analyses); a
// session without GPU sync waits has no empty sync waits row. Hand-made sessions:
// support/gpu_run_session.h.
#include <gtest/gtest.h>

#include <QLabel>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "jobs/analysis_job.h"
#include "models/compare_model.h"
#include "models/rank_stats_model.h"
#include "support/gpu_run_session.h"
#include "timeline/timeline_widget.h"
#include "views/compare_view.h"
#include "views/summary_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
std::string ux41_ui_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("es_ux41_ui_" + name + "_" + std::to_string(getpid()) + ".db")).string();
}
}  // namespace

TEST(Ux41Ui, TheSummaryOfAGpuRunSaysGpuBusyAndTheHostThreadsWait) {
  const std::string path = test_support::gpu_run_session(ux41_ui_path("summary"));
  SummaryView view(std::make_shared<sessions::SessionReader>(path));
  ASSERT_TRUE(wait_for_analyses(&view));
  auto* label = view.findChild<QLabel*>("summary_text");
  ASSERT_NE(label, nullptr);
  const QString t = label->text();
  EXPECT_TRUE(t.contains("<br>GPU busy 30.0% of the measured steps, mean over ranks (a kernel or copy running on the "
                         "rank&#x27;s streams; least rank 0 20.0%, most rank 1 40.0%): host-bound") ||
              t.contains("<br>GPU busy 30.0% of the measured steps, mean over ranks (a kernel or copy running on the "
                         "rank's streams; least rank 0 20.0%, most rank 1 40.0%): host-bound"))
      << t.toStdString();
  EXPECT_TRUE(t.contains("<br>host the ranks")) << t.toStdString();
  EXPECT_TRUE(t.contains("threads waited in collectives 0.30 ms per rank (0.30 ms per step)")) << t.toStdString();
  std::filesystem::remove(path);
}

TEST(Ux41Ui, CompareShowsTheHostThreadsExposedCommunicationAndGpuBusy) {
  const std::string a = test_support::gpu_run_session(ux41_ui_path("cmp_a"));
  const std::string b = test_support::gpu_run_session(ux41_ui_path("cmp_b"), {800, 600, 600});
  CompareView view({{"A", std::make_shared<sessions::SessionReader>(a)}, {"B", std::make_shared<sessions::SessionReader>(b)}});
  ASSERT_TRUE(wait_for_analyses(&view));
  auto* model = view.findChild<CompareModel*>();
  ASSERT_NE(model, nullptr);
  auto text = [&](CompareModel::Figure f, int col) { return model->data(model->index(f, col)).toString().toStdString(); };
  EXPECT_EQ(text(CompareModel::HostExposedComm, 0), "exposed communication, host threads (per rank and step)");
  EXPECT_EQ(text(CompareModel::HostExposedComm, 1), "300.0 us");
  EXPECT_EQ(text(CompareModel::HostExposedComm, 2), "150.0 us");
  EXPECT_EQ(text(CompareModel::HostExposedComm, 3), "-150.0 us (-50.0 %)");
  EXPECT_EQ(text(CompareModel::ExposedComm, 1), "50.0 us");  // the streams', beside
  EXPECT_EQ(text(CompareModel::GpuBusy, 2), "40.0 %");
  EXPECT_EQ(text(CompareModel::GpuBusy, 3), "+10.0 points");
  EXPECT_DOUBLE_EQ(model->data(model->index(CompareModel::HostExposedComm, 3), Qt::UserRole).toDouble(), -150'000);
  auto* head = view.findChild<QLabel*>("compare_head");
  ASSERT_NE(head, nullptr);
  const QString h = head->text();
  EXPECT_TRUE(h.contains("<b>A</b>: GPU busy 30.0% of the measured steps")) << h.toStdString();
  EXPECT_TRUE(h.contains("<b>B</b>: host the ranks")) << h.toStdString();
  EXPECT_TRUE(h.contains("threads waited in collectives 0.15 ms per rank")) << h.toStdString();
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

// ux41 #12: a gpu_sync lane without a wait has no row (and no sync legend entry); one with a
// wait keeps it (gpu_lanes_test)
TEST(Ux41Ui, AGpuSyncLaneWithoutWaitsHasNoRow) {
  test_support::GpuRunShape shape;
  shape.sync_lane = true;
  const std::string path = test_support::gpu_run_session(ux41_ui_path("nosync"), shape);
  TimelineWidget tw(std::make_shared<const sessions::SessionReader>(path));
  EXPECT_EQ(tw.rows(), 8u);  // 4 lanes a rank, the empty gpu_sync lane left out
  for (size_t i = 0; i < tw.rows(); ++i) EXPECT_FALSE(tw.row_label(i).contains("sync")) << tw.row_label(i).toStdString();
  EXPECT_FALSE(tw.has_sync_rows());
  std::filesystem::remove(path);
}

// tester41 #17: a run killed before its first measured step read "peak allocated 0 B" and 0 ns
// everywhere in the Summary's per-rank table, as if measured; compare said "-". A memory
// snapshot (memory counters, no step) keeps its peaks.
TEST(Tester41Ui, TheRankTableSaysNotMeasuredInsteadOfZeros) {
  using embedscope::ui::RankStatsModel;
  embedscope::sessions::RunStats st;
  st.ranks.resize(2);
  st.ranks[1].rank = 1;
  RankStatsModel killed(st);
  EXPECT_EQ(killed.data(killed.index(1, RankStatsModel::Rank)).toInt(), 1);
  for (int c : {RankStatsModel::Compute, RankStatsModel::ExposedComm, RankStatsModel::PeakAllocated,
                RankStatsModel::Fragmentation}) {
    EXPECT_EQ(killed.data(killed.index(0, c)).toString(), "-") << c;
    EXPECT_FALSE(killed.data(killed.index(0, c), Qt::UserRole).isValid()) << c;
  }
  st.has_memory = true;  // a memory snapshot: peaks, no step
  st.ranks[0].peak_allocated_bytes = 2048;
  RankStatsModel snapshot(st);
  EXPECT_EQ(snapshot.data(snapshot.index(0, RankStatsModel::PeakAllocated)).toString(), "2.0 KiB");
  EXPECT_EQ(snapshot.data(snapshot.index(0, RankStatsModel::Compute)).toString(), "-");
  st.steps = 3;  // a run: every figure measured, zeros included
  RankStatsModel run(st);
  EXPECT_EQ(run.data(run.index(1, RankStatsModel::PeakAllocated)).toString(), "0 B");
  EXPECT_EQ(run.data(run.index(1, RankStatsModel::Compute)).toString(), "0 ns");
}
