// The timeline's row labels on imported traces (tester34 D23) and the step an imported op
// outside every profiler step is said to be in (no "warm-up" for a trace).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QFontMetrics>
#include <QLabel>

#include <cstdlib>

#include <filesystem>
#include <set>
#include <string>

#include "core/lane_labels.h"
#include "core/timeline_math.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// The lanes of the data README's nccl_data.json.gz as `import` names them (rank 0), and
// trace_diff_test's two python3.8 threads.
const std::vector<std::string> kNcclLanes = {"thread -549452224 (pid 2910249)",
                                             "thread 2910249 (thread 2910249 (pt_main_thread))",
                                             "thread 2919752 (thread 2919752 (pt_autograd_0))",
                                             "annotations of stream 7 (device 0)",
                                             "annotations of stream 40 (device 0)",
                                             "stream 7 (cuda:0 NVIDIA A100-PG509-200)",
                                             "stream 40 (cuda:0 NVIDIA A100-PG509-200)"};
}  // namespace

TEST(LaneLabels, ShortUniqueLabelsOfAnImportedTrace) {
  std::vector<LaneLabelInput> rows;
  for (const auto& l : kNcclLanes) rows.push_back({0, l, false});
  rows.push_back({0, kNcclLanes[5], true});  // stream 7's overflow row
  rows.push_back({1, "thread 2568503 (thread 2568503 (python3.8))", false});
  rows.push_back({1, "thread 2575472 (thread 2575472 (python3.8))", false});
  rows.push_back({1, "compute", false});
  rows.push_back({1, "compute", false});  // two lanes of one name (no import makes them; still told apart)
  EXPECT_EQ(lane_labels(rows), (std::vector<std::string>{"rank 0 pid 2910249", "rank 0 pt_main_thread", "rank 0 pt_autograd_0",
                                                         "rank 0 annot. stream 7", "rank 0 annot. stream 40",
                                                         "rank 0 stream 7", "rank 0 stream 40", "rank 0 stream 7 (overlap)",
                                                         "rank 1 python3.8 2568503", "rank 1 python3.8 2575472",
                                                         "rank 1 compute #1", "rank 1 compute #2"}));
  EXPECT_EQ(short_lane_name("thread 30156 (test_matmul)"), "test_matmul");  // Nsight's form
  EXPECT_EQ(short_lane_name("comm"), "comm");
}

TEST(LaneLabels, TimelineRowsOfAnImportReadApartWhenElidedAndNameTheirLaneOnHover) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_lanelabels_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "1");
    w.set_metadata(sessions::meta::kImported, "1");
    for (size_t i = 0; i < kNcclLanes.size(); ++i)
      w.add_lane({0, static_cast<int32_t>(i), kNcclLanes[i], i < 3 ? "thread" : i < 5 ? "gpu_annotation" : "stream"});
    // an op before the first profiler step (step -1 in the session): no warm-up in a trace
    w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::other, "aten::empty", -1, 0, 10'000, 0, 0},
               {0, sessions::Lane::compute, sessions::OpCategory::other, "aten::mm", 0, 20'000, 30'000, 0, 0}});
    w.add_step({0, 0, 15'000, 40'000, 0.0, 0, 0});
    w.close("complete");
  }
  auto session = std::make_shared<const sessions::SessionReader>(path.string());
  TimelineWidget tw(session);
  ASSERT_EQ(tw.rows(), kNcclLanes.size());
  std::set<QString> drawn;
  const QFontMetrics fm(tw.font());
  for (size_t i = 0; i < tw.rows(); ++i) {  // what the gutter shows: whole (elided in the middle if need be), unique
    drawn.insert(fm.elidedText(tw.row_label(i), Qt::ElideMiddle, TimelineWidget::kGutter - 8));
    EXPECT_EQ(fm.elidedText(tw.row_label(i), Qt::ElideMiddle, TimelineWidget::kGutter - 8), tw.row_label(i));
  }
  EXPECT_EQ(drawn.size(), kNcclLanes.size());
  EXPECT_EQ(tw.row_label(3).toStdString(), "rank 0 annot. stream 7");
  EXPECT_EQ(tw.row_tooltip(5).toStdString(), "rank 0 stream 7\nrank 0 stream 7 (cuda:0 NVIDIA A100-PG509-200)");
  // tooltips of the op outside the profiler steps and of one in step 0
  ASSERT_EQ(tw.row_ops(0).size(), 2u);
  EXPECT_TRUE(tw.op_tooltip({0, 0}).endsWith("\noutside any profiler step")) << tw.op_tooltip({0, 0}).toStdString();
  EXPECT_TRUE(tw.details({0, 0}).contains("outside any profiler step"));
  EXPECT_TRUE(tw.op_tooltip({0, 1}).endsWith("\nstep 0"));
  // the view's details pane says it too (EMBEDSCOPE_UI_SHOTS=DIR: its image, to look at)
  TimelineView view(session);
  view.resize(1200, 400);
  view.timeline()->select(OpRef{0, 0});
  QString panes;
  for (auto* label : view.findChildren<QLabel*>()) panes += label->text() + "\n";
  EXPECT_TRUE(panes.contains("outside any profiler step")) << panes.toStdString();
  EXPECT_FALSE(panes.contains("warm-up")) << panes.toStdString();
  if (const char* dir = std::getenv("EMBEDSCOPE_UI_SHOTS")) view.grab().save(QString(dir) + "/imported_outside_step.png");
  // an engine run keeps its warm-up names
  EXPECT_EQ(step_name(-1, 2), "warm-up 2 of 2");
  EXPECT_EQ(step_name(-1, 0), "warm-up (step -1)");
  EXPECT_EQ(step_name(-1, 0, true), "outside any profiler step");
  std::filesystem::remove(path);
}
