// ux42 (tester41 #7): every fragmentation figure says when it was taken - the Summary's worst
// step end, the Memory page's at peak allocated and at peak reserved, the Replay panel's at peak
// reserved - and the Replay panel compares the replay of the recorded settings with the
// recording at the same moment, saying why they differ where they do.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>
#include <QTableWidget>

#include <filesystem>
#include <memory>
#include <string>

#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "jobs/analysis_job.h"
#include "models/rank_stats_model.h"
#include "views/memory_replay.h"
#include "views/memory_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
constexpr int64_t kUx42MiB = int64_t{1} << 20;
std::shared_ptr<const sessions::SessionReader> ux42_imported(const std::string& fixture) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ux42_ui_" + std::to_string(getpid()) + fixture + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string(), true);
    sessions::torch_snapshot::import_torch_memory_snapshot(
        std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + fixture, w);
    w.close("complete");
  }
  return std::make_shared<const sessions::SessionReader>(path.string());
}
engine::ReplayResult ux42_result(const std::string& label, int64_t peak_reserved, double frag) {
  engine::ReplayResult r;
  r.label = label;
  r.peak_reserved = peak_reserved;
  r.fragmentation_at_peak = frag;
  return r;
}
}  // namespace

TEST(Ux42Ui, TheSummarysFragmentationColumnNamesItsMoment) {
  RankStatsModel m(sessions::RunStats{});
  EXPECT_EQ(m.headerData(RankStatsModel::Fragmentation, Qt::Horizontal).toString().toStdString(),
            "fragmentation, worst step end");
  EXPECT_TRUE(m.headerData(RankStatsModel::Fragmentation, Qt::Horizontal, Qt::ToolTipRole)
                  .toString()
                  .contains("1 - largest free block / free bytes in the reserved segments"));
  m.set_fragmentation_label("fragmentation at peak allocated");  // a memory snapshot's Summary
  EXPECT_EQ(m.headerData(RankStatsModel::Fragmentation, Qt::Horizontal).toString().toStdString(),
            "fragmentation at peak allocated");
}

TEST(Ux42Ui, TheReplayOfTheRecordedSettingsIsComparedAtPeakReserved) {
  const std::vector<engine::ReplayResult> same{ux42_result("caching", 644 * kUx42MiB, 0.181),
                                               ux42_result("expandable", 638 * kUx42MiB, 0.141)};
  EXPECT_EQ(MemoryReplayPanel::recorded_comparison(same, "caching", 95, 0.181, 644 * kUx42MiB).toStdString(),
            "The replay of the recorded settings (caching) reproduces the recording: peak reserved 644.0 MiB, 18.1% at "
            "peak reserved.");
  // PyTorch's name for the recorded expandable setting is matched to the replay's row
  const QString other = MemoryReplayPanel::recorded_comparison(same, "expandable_segments", 7, 0.25, 638 * kUx42MiB);
  EXPECT_TRUE(other.startsWith("The replay of the recorded settings (expandable) gives 14.1% at peak reserved, the "
                               "recording 25.0%: the same peak, reached with blocks placed differently"))
      << other.toStdString();
  const QString peak = MemoryReplayPanel::recorded_comparison(same, "caching", 95, 0.181, 640 * kUx42MiB);
  EXPECT_TRUE(peak.contains("the replay reserved a different peak (644.0 MiB vs 640.0 MiB)")) << peak.toStdString();
  auto oom = same;
  oom[0].oom = true;
  oom[0].oom_action = 12;
  oom[0].peak_reserved = 600 * kUx42MiB;
  EXPECT_TRUE(MemoryReplayPanel::recorded_comparison(oom, "caching", 95, 0.181, 644 * kUx42MiB)
                  .contains("ran out of memory at entry 12, before it reached the recorded peak"));
  // no row of the recorded settings, or no recorded figure: nothing said
  EXPECT_TRUE(MemoryReplayPanel::recorded_comparison(same, "unknown", 95, 0.181, 644 * kUx42MiB).isEmpty());
  EXPECT_TRUE(MemoryReplayPanel::recorded_comparison(same, "caching", -1, 0.181, 644 * kUx42MiB).isEmpty());
}

// fragmented_oom_p4.pickle (make_fixtures.py): one 40 MiB segment; activations fill it at entry
// 1 (the peak allocated and the peak reserved: nothing free, 0%), later a 2 MiB kjt block and
// 38 MiB free beside it, then the OOM.
TEST(Ux42Ui, TheMemoryPageNamesBothPeaksAndTheReplayReproducesTheRecording) {
  MemoryView view(ux42_imported("fragmented_oom_p4.pickle"));
  view.resize(1400, 900);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  const QString sum = view.summary()->text();
  EXPECT_TRUE(sum.contains("peak allocated 40.0 MiB at entry 1 (reserved 40.0 MiB): fragmentation at peak allocated 0.0%"))
      << sum.toStdString();
  EXPECT_TRUE(sum.contains("peak reserved 40.0 MiB at entry 1: fragmentation at peak reserved 0.0%")) << sum.toStdString();
  MemoryReplayPanel& rp = *view.replay();
  EXPECT_EQ(rp.table()->horizontalHeaderItem(2)->text().toStdString(), "frag. at peak reserved");
  EXPECT_TRUE(rp.note()->text().contains("Recorded at peak reserved (40.0 MiB after entry 1): fragmentation 0.0%."))
      << rp.note()->text().toStdString();
  rp.replay();
  ASSERT_TRUE(wait_for_analyses(&view));
  EXPECT_TRUE(rp.note()->text().contains("The replay of the recorded settings (caching) reproduces the recording: "
                                         "peak reserved 40.0 MiB, 0.0% at peak reserved."))
      << rp.note()->text().toStdString();
}
