// Ops that did not end (sessions/model/did_not_end.h: imported events the profiler never saw
// end, zero-length, named "... (did not end)") are marked on their row, drawn as a line with an
// open arrow, say "did not end" in their tooltip, and count as neither compute nor communication.
#include <gtest/gtest.h>

#include <QImage>
#include <QLabel>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "timeline/timeline_widget.h"
#include "views/summary_view.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// Rank 0: lane 0 (a thread) aten::add [0, 5) us and aten::mm that did not end at 200 us; lane 1
// (a stream) gemm [10, 20) us and gemm_kernel that did not end at 100 us; lane 2 (a stream) an
// NCCL kernel [15, 25) us.
std::string did_not_end_session() {
  const auto path = fixtures::scratch("did_not_end_timeline.db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  using sessions::Lane;
  using sessions::OpCategory;
  w.add_lane({0, 0, "thread 1 (pid 1)", "thread"});
  w.add_lane({0, 1, "stream 7 (device 0)", "stream"});
  w.add_lane({0, 2, "stream 9 (device 0)", "stream"});
  w.add_ops({{0, Lane::compute, OpCategory::other, "aten::add", -1, 0, 5'000, 0, 0},
             {0, Lane::compute, OpCategory::other, "aten::mm (did not end)", -1, 200'000, 200'000, 0, 0},
             {0, Lane::comm, OpCategory::dense, "gemm", -1, 10'000, 20'000, 0, 0},
             {0, Lane::comm, OpCategory::dense, "gemm_kernel (did not end)", -1, 100'000, 100'000, 0, 0},
             {0, Lane::gpu_compute, OpCategory::comm, "ncclDevKernel_AllReduce", -1, 15'000, 25'000, 64, 0}});
  w.close("complete");
  return path.string();
}
}  // namespace

TEST(TimelineDidNotEnd, MarkedDrawnAndToldApart) {
  auto reader = std::make_shared<const sessions::SessionReader>(did_not_end_session());
  TimelineWidget t(reader);
  t.resize(TimelineWidget::kGutter + 800, 200);
  ASSERT_EQ(t.rows(), 3u);
  ASSERT_EQ(t.row_did_not_end(0), (std::vector<size_t>{1}));  // aten::mm, after aten::add
  ASSERT_EQ(t.row_did_not_end(1), (std::vector<size_t>{1}));  // gemm_kernel, after gemm
  EXPECT_TRUE(t.row_did_not_end(2).empty());
  // the extent reaches the markers (one can pan to them): [0, 200] us
  t.scale().fit();
  EXPECT_EQ(t.view().t0, 0);
  EXPECT_EQ(t.view().t1, 200'000);
  // at 4 ns a pixel... show [90, 110) us: the gemm_kernel marker at 100 us is x = 400
  t.scale().show(90'000, 110'000);
  const int y1 = t.row_y(1) + TimelineWidget::kRowHeight / 2;
  const QPoint at(TimelineWidget::kGutter + 400, y1);
  const auto hit = t.did_not_end_at(at);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->row, 1u);
  EXPECT_EQ(hit->index, 1u);
  EXPECT_FALSE(t.did_not_end_at(QPoint(TimelineWidget::kGutter + 300, y1)).has_value());  // 95 us: nothing
  const QString tip = t.op_tooltip(*hit);
  EXPECT_TRUE(tip.startsWith("gemm_kernel\n")) << tip.toStdString();  // its own name, not the marked one
  EXPECT_TRUE(tip.contains("did not end")) << tip.toStdString();
  EXPECT_FALSE(tip.contains("duration 0")) << tip.toStdString();
  const QString plain = t.op_tooltip({1, 0});
  EXPECT_TRUE(plain.contains("duration 10")) << plain.toStdString();
  // drawn: the marker's line in near-black at x = 400, above its arrow (a zero-length op alone
  // is a 1 px box in its category's colour, from y + 3), nothing at 95 us
  QImage img(t.size(), QImage::Format_ARGB32);
  img.fill(Qt::white);
  t.render(&img);
  const QColor line = img.pixelColor(TimelineWidget::kGutter + 400, t.row_y(1) + 1);
  EXPECT_LT(line.red() + line.green() + line.blue(), 3 * 0x40) << line.name().toStdString();
  const QColor empty = img.pixelColor(TimelineWidget::kGutter + 300, t.row_y(1) + 4);
  EXPECT_GT(empty.red() + empty.green() + empty.blue(), 3 * 0xa0) << empty.name().toStdString();
}

// The summary of an imported session lists its import problems (import_stats), as `import` and
// `stats` do: tests/data/traces/unfinished_kernel.json has two events with a negative "dur",
// counted once as negative_duration (count 2) and kept as ops that did not end.
TEST(TimelineDidNotEnd, TheSummaryListsTheImportProblems) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_unfinished_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string(), true);
    sessions::importers::import_paths({std::string(EMBEDSCOPE_TEST_DATA) + "/traces/unfinished_kernel.json"}, w, {});
    w.close("complete");
  }
  SummaryView view(std::make_shared<const sessions::SessionReader>(path.string()));
  ASSERT_TRUE(wait_for_analyses(&view));
  auto* problems = view.findChild<QLabel*>("import_problems");
  ASSERT_NE(problems, nullptr);
  const QString t = problems->text();
  EXPECT_TRUE(t.contains("error &nbsp; 2 &times; <b>negative_duration</b>")) << t.toStdString();
  EXPECT_TRUE(t.contains("kept as a zero-length op marked")) << t.toStdString();
  std::filesystem::remove(path);
}
