// Tester38 #13: a GPU rank's timeline rows say which are host threads and which CUDA streams,
// and the host's waits for the GPU (the gpu_sync lane, stored as category `other`) have their
// own colour and legend entry instead of other's olive.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QImage>

#include <algorithm>
#include <filesystem>
#include <string>

#include "charts/colors.h"
#include "charts/legend.h"
#include "core/lane_labels.h"
#include "embedscope/sessions/store/session.h"
#include "timeline/timeline_stack.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// Rank 0 a cuda rank (host compute/comm, gpu_compute, gpu_sync), rank 1 a CPU rank; one step
// [0, 1000): the wait cudaStreamSynchronize [400, 900) on rank 0's gpu_sync.
std::string gpu_lanes_session() {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_gpulanes_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.add_lane({0, 0, "compute", "thread"});
  w.add_lane({0, 1, "comm", "thread"});
  w.add_lane({0, 2, "gpu_compute", "stream"});
  w.add_lane({0, 5, "gpu_sync", "sync"});
  w.add_lane({1, 0, "compute", "thread"});
  w.add_lane({1, 1, "comm", "thread"});
  using sessions::Lane;
  using sessions::OpCategory;
  w.add_ops({sessions::OpEvent{0, Lane::compute, OpCategory::dense, "dense", 0, 0, 400, 0, 0},
             sessions::OpEvent{0, Lane::comm, OpCategory::comm, "a2a", 0, 0, 300, 0, 0},
             sessions::OpEvent{0, Lane::gpu_compute, OpCategory::dense, "gemm_kernel", 0, 0, 400, 0, 0},
             sessions::OpEvent{0, static_cast<Lane>(5), OpCategory::other, "cudaStreamSynchronize", 0, 400, 900, 0, 0},
             sessions::OpEvent{1, Lane::compute, OpCategory::dense, "dense", 0, 0, 400, 0, 0}});
  w.add_step({0, 0, 0, 1000, 0.5, 0, 0});
  w.add_step({0, 1, 0, 1000, 0.5, 0, 0});
  w.close("complete");
  return path.string();
}
}  // namespace

TEST(GpuLanes, HostThreadsAndGpuStreamsAreLabelledApart) {
  const std::vector<LaneLabelInput> rows = {{0, "compute", false}, {0, "comm", false},      {0, "gpu_compute", false},
                                            {0, "gpu_comm", false}, {0, "gpu_copy", false}, {0, "gpu_sync", false},
                                            {0, "gpu_sync", true},  {1, "compute", false},  {1, "comm", false}};
  EXPECT_EQ(lane_labels(rows),
            (std::vector<std::string>{"rank 0 host compute", "rank 0 host comm", "rank 0 GPU compute stream",
                                      "rank 0 GPU comm stream", "rank 0 GPU copy stream", "rank 0 GPU sync waits",
                                      "rank 0 GPU sync waits (overlap)", "rank 1 compute", "rank 1 comm"}));
  EXPECT_TRUE(is_gpu_lane("gpu_sync"));
  EXPECT_FALSE(is_gpu_lane("compute"));
}

TEST(GpuLanes, SyncWaitsHaveTheirOwnColourAndLegendEntry) {
  const std::string path = gpu_lanes_session();
  auto session = std::make_shared<const sessions::SessionReader>(path);
  TimelineWidget tw(session);
  ASSERT_EQ(tw.rows(), 6u);
  EXPECT_EQ(tw.row_label(0).toStdString(), "rank 0 host compute");
  EXPECT_EQ(tw.row_label(3).toStdString(), "rank 0 GPU sync waits");
  EXPECT_EQ(tw.row_label(4).toStdString(), "rank 1 compute");
  EXPECT_TRUE(tw.row_tooltip(3).contains("waiting for the GPU")) << tw.row_tooltip(3).toStdString();
  EXPECT_TRUE(tw.row_tooltip(2).contains("CUDA stream")) << tw.row_tooltip(2).toStdString();
  EXPECT_TRUE(tw.has_sync_rows());
  // the wait [400, 900) painted in gpu_sync_color (not other's olive); the kernel in dense blue
  tw.resize(TimelineWidget::kGutter + 1000, 300);
  tw.scale().show(0, 1000);
  QImage img(tw.size(), QImage::Format_ARGB32);
  tw.render(&img);
  const int mid = TimelineWidget::kRowHeight / 2;
  EXPECT_EQ(img.pixelColor(TimelineWidget::kGutter + 650, tw.row_y(3) + mid), gpu_sync_color());
  EXPECT_NE(gpu_sync_color(), category_color(sessions::OpCategory::other));
  EXPECT_EQ(img.pixelColor(TimelineWidget::kGutter + 200, tw.row_y(2) + mid), category_color(sessions::OpCategory::dense));
  // the legend: "GPU sync wait" after memcpy, only for a session with a gpu_sync lane
  TimelineView view(session);
  const auto& entries = view.legend()->entries();
  auto it = std::find_if(entries.begin(), entries.end(), [](const LegendEntry& e) { return e.label == "GPU sync wait"; });
  ASSERT_NE(it, entries.end());
  EXPECT_EQ(it->color, gpu_sync_color());
  EXPECT_EQ((it - 1)->label, "memcpy");
  const auto cpu = timeline_legend();  // a session without a gpu_sync lane
  EXPECT_EQ(cpu.size() + 1, entries.size());
  EXPECT_EQ(std::count_if(cpu.begin(), cpu.end(), [](const LegendEntry& e) { return e.label == "GPU sync wait"; }), 0);
  // the compare Timelines page shows the same legend, with the sync entry for a GPU session, but
  // without the critical path's line, which its timelines do not draw (tester61a F9)
  TimelineStack stack({{"A", session}}, 0);
  const auto& stacked = stack.legend()->entries();
  auto without_path = entries;
  std::erase_if(without_path, [](const LegendEntry& e) { return e.label == "critical path"; });
  EXPECT_EQ(without_path.size() + 1, entries.size());
  EXPECT_EQ(stacked, without_path);
  std::filesystem::remove(path);
}

// Issue 14: the comm stream of ranks that share a GPU holds the intra-device communicator's
// device-to-device copies and reduction kernels, not NCCL: its row says "(shared GPU)" and its
// hover text what ran there. Ranks 0-1 share cuda:0, rank 2 has cuda:1 to itself (its comm
// stream stays plain), rank 3 is a CPU rank.
TEST(GpuLanes, TheCommStreamOfRanksSharingAGpuSaysSo) {
  const std::vector<LaneLabelInput> rows = {{0, "gpu_comm", false, true}, {0, "gpu_comm", true, true},
                                            {0, "gpu_compute", false, true}, {2, "gpu_comm", false, false}};
  EXPECT_EQ(lane_labels(rows),
            (std::vector<std::string>{"rank 0 GPU comm stream (shared GPU)", "rank 0 GPU comm stream (shared GPU) (overlap)",
                                      "rank 0 GPU compute stream", "rank 2 GPU comm stream"}));
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_sharedgpu_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "4");
    const char* device[] = {"NVIDIA H200 (cuda:0)", "NVIDIA H200 (cuda:0)", "NVIDIA H200 (cuda:1)", "cpu (thread)"};
    for (int32_t r = 0; r < 4; ++r) {
      w.add_rank({r, "host", device[r], 1 << 30});
      w.add_lane({r, 0, "compute", "thread"});
      if (r < 3) w.add_lane({r, 3, "gpu_comm", "stream"});
      w.add_step({0, r, 0, 1000, 0.5, 0, 0});
    }
    w.add_ops({sessions::OpEvent{0, sessions::Lane::gpu_comm, sessions::OpCategory::comm, "memcpy_dtod", 0, 100, 300, 0, 0}});
    w.close("complete");
  }
  TimelineWidget tw(std::make_shared<const sessions::SessionReader>(path.string()));
  ASSERT_EQ(tw.rows(), 7u);  // compute + gpu_comm of ranks 0-2, compute of rank 3
  EXPECT_EQ(tw.row_label(1).toStdString(), "rank 0 GPU comm stream (shared GPU)");
  EXPECT_EQ(tw.row_label(3).toStdString(), "rank 1 GPU comm stream (shared GPU)");
  EXPECT_EQ(tw.row_label(5).toStdString(), "rank 2 GPU comm stream");
  EXPECT_TRUE(tw.row_tooltip(1).contains("ranks 0, 1 share NVIDIA H200 (cuda:0): their collectives among themselves ran on "
                                         "this stream as device-to-device copies (memcpy_dtod, copy-engine speed)"))
      << tw.row_tooltip(1).toStdString();
  EXPECT_TRUE(tw.row_tooltip(1).contains("ranks on other GPUs are reached through NCCL by each GPU's first rank"))
      << tw.row_tooltip(1).toStdString();
  EXPECT_FALSE(tw.row_tooltip(5).contains("share")) << tw.row_tooltip(5).toStdString();
  EXPECT_FALSE(tw.row_tooltip(0).contains("share")) << tw.row_tooltip(0).toStdString();  // its host thread
  std::filesystem::remove(path);
}
