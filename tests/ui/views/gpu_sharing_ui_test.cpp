// Tester38 #11: the Summary page and the Compare view say which ranks shared which GPU, as
// `embedscope stats` does ("2 ranks sharing 1 GPU (NVIDIA H200 (cuda:0))"); a cpu session says
// nothing of GPUs. Hand-made sessions: two ranks, one measured step of 1 ms each.
#include <gtest/gtest.h>

#include <QApplication>
#include <QLabel>
#include <QtTest/QtTest>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "jobs/analysis_job.h"
#include "views/compare_view.h"
#include "views/summary_view.h"
#include "embedscope/sessions/analysis/gpu_sharing.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// Two ranks on `devices[r]` ("NVIDIA H200 (cuda:0)", "cpu (thread)"), backend `backend`.
std::string gpu_sharing_session(const char* file, const char* backend, const std::vector<std::string>& devices) {
  const auto path = std::filesystem::temp_directory_path() / (std::to_string(getpid()) + file);
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", std::to_string(devices.size()));
  w.set_metadata("workload_name", "hand");
  w.set_metadata("backend", backend);
  for (int r = 0; r < static_cast<int>(devices.size()); ++r) {
    w.add_rank({r, "h", devices[static_cast<size_t>(r)], 1 << 30});
    w.add_lane({r, 0, "compute", "thread"});
    w.add_step({0, r, 0, 1'000'000, 0.5, 0, 0});
  }
  w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", 0, 100'000, 200'000, 0, 0}});
  w.close("complete");
  return path.string();
}

QString summary_text_of(const std::string& path) {
  SummaryView view(std::make_shared<sessions::SessionReader>(path));
  if (!wait_for_analyses(&view)) return "analysis did not end";
  auto* label = view.findChild<QLabel*>("summary_text");
  return label ? label->text() : QString("no summary_text label");
}
}  // namespace

TEST(GpuSharingUi, TheSummarySaysWhichRanksShareWhichGpu) {
  const std::string cuda = gpu_sharing_session("_share_cuda.db", "cuda", {"NVIDIA H200 (cuda:0)", "NVIDIA H200 (cuda:0)"});
  const QString t = summary_text_of(cuda);
  EXPECT_TRUE(t.contains("on 2 ranks sharing 1 GPU (NVIDIA H200 (cuda:0)), cuda,")) << t.toStdString();
  const std::string cpu = gpu_sharing_session("_share_cpu.db", "cpu", {"cpu (thread)", "cpu (thread)"});
  const QString c = summary_text_of(cpu);
  EXPECT_TRUE(c.contains("on 2 ranks, cpu,")) << c.toStdString();
  EXPECT_FALSE(c.contains("GPU")) << c.toStdString();
  std::filesystem::remove(cuda);
  std::filesystem::remove(cpu);
}

TEST(GpuSharingUi, TheCompareHeadSaysWhichRanksShareWhichGpu) {
  const std::string one = gpu_sharing_session("_cmp_one_gpu.db", "cuda", {"NVIDIA H200 (cuda:0)", "NVIDIA H200 (cuda:0)"});
  const std::string two = gpu_sharing_session("_cmp_two_gpus.db", "cuda", {"NVIDIA H200 (cuda:0)", "NVIDIA H200 (cuda:1)"});
  CompareView view({{"A", std::make_shared<sessions::SessionReader>(one)}, {"B", std::make_shared<sessions::SessionReader>(two)}});
  ASSERT_TRUE(wait_for_analyses(&view));
  auto* head = view.findChild<QLabel*>("compare_head");
  ASSERT_NE(head, nullptr);
  const QString t = head->text();
  EXPECT_TRUE(t.contains("complete on 2 ranks sharing 1 GPU (NVIDIA H200 (cuda:0)), cuda")) << t.toStdString();
  EXPECT_TRUE(t.contains("complete on 2 ranks on 2 GPUs (NVIDIA H200 (cuda:0), NVIDIA H200 (cuda:1)), cuda"))
      << t.toStdString();
  std::filesystem::remove(one);
  std::filesystem::remove(two);
}

// The one phrase all of them use (sessions::gpus_text), its four forms.
TEST(GpuSharingUi, GpusTextForms) {
  using sessions::RankInfo;
  const RankInfo a0{0, "h", "A (cuda:0)", 0}, a1{1, "h", "A (cuda:0)", 0}, a2{2, "h", "A (cuda:0)", 0},
      b3{3, "h", "B (cuda:1)", 0}, c{0, "h", "cpu (thread)", 0};
  EXPECT_EQ(sessions::gpus_text({a1, a0}), " sharing 1 GPU (A (cuda:0))");
  EXPECT_EQ(sessions::gpus_text({a0}), " on 1 GPU (A (cuda:0))");
  EXPECT_EQ(sessions::gpus_text({a0, b3}), " on 2 GPUs (A (cuda:0), B (cuda:1))");
  EXPECT_EQ(sessions::gpus_text({b3, a2, a0, a1}), " on 2 GPUs (ranks 0-2 sharing A (cuda:0); rank 3 on B (cuda:1))");
  EXPECT_EQ(sessions::gpus_text({c}), "");
  const auto gpus = sessions::rank_gpus({b3, a2, a0, a1});
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].device, "A (cuda:0)");
  EXPECT_EQ(gpus[0].ranks, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(gpus[1].ranks, (std::vector<int32_t>{3}));
}
