// snap54 (tester54 F9): the Compare Memory page's map caption gives the allocated figure of the
// chart, stats and expected.json (blocks whose free is pending said apart: training_p4 rank 0,
// 97.3 MiB, not 101.3 MiB), and the Memory page's Replay panel gives replay-memory's verdict
// (engine recorded_replay_verdict: the OOM and the dump compared too). Each failed before.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "embedscope/engine/memory/snapshot_replay.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "jobs/analysis_job.h"
#include "ui/support/ui_fixtures.h"
#include "views/memory_compare.h"
#include "views/memory_replay.h"
#include "views/memory_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
constexpr int64_t kSnap54MiB = int64_t{1} << 20;

std::shared_ptr<const sessions::SessionReader> snap54_imported(const std::string& fixture) {
  return fixtures::imported_snapshot(fixture, "snap54_ui");
}

sessions::MemoryBlockRecord snap54_block(int64_t seg, int64_t seg_size, int64_t at, int64_t size, bool allocated,
                                         bool pending) {
  sessions::MemoryBlockRecord b;
  b.segment_address = seg;
  b.segment_size = seg_size;
  b.address = seg + at;
  b.size = size;
  b.allocated = allocated;
  b.pending_free = pending;
  return b;
}
}  // namespace

// A 10 MiB segment: 4 MiB allocated, 2 MiB whose free is pending, 4 MiB free.
TEST(Snap54MemoryUi, MapFiguresCountPendingFreesApart) {
  const int64_t seg = 0x10000000;
  const MapFigures f = map_figures({snap54_block(seg, 10 * kSnap54MiB, 0, 4 * kSnap54MiB, true, false),
                                    snap54_block(seg, 10 * kSnap54MiB, 4 * kSnap54MiB, 2 * kSnap54MiB, true, true),
                                    snap54_block(seg, 10 * kSnap54MiB, 6 * kSnap54MiB, 4 * kSnap54MiB, false, false)});
  EXPECT_EQ(f.segments, 1);
  EXPECT_EQ(f.reserved, 10 * kSnap54MiB);
  EXPECT_EQ(f.allocated, 4 * kSnap54MiB);
  EXPECT_EQ(f.pending_free, 2 * kSnap54MiB);
  EXPECT_EQ(f.free, 4 * kSnap54MiB);
  EXPECT_EQ(f.largest_free, 4 * kSnap54MiB);
}

// training_p4 rank 0 at the dump (expected.json): 6 segments, 201326592 B reserved, allocated_at_dump
// 102021120 B (97.3 MiB); a 4 MiB all_gather block is pending (active_pending_free); 90.7 MiB free.
TEST(Snap54MemoryUi, TheCompareCaptionGivesTheChartsAllocatedFigure) {
  MemoryCompare mc({{"A", snap54_imported("training_p4.pickle")}});
  mc.resize(1400, 900);
  mc.show(0, 0);
  QString caption;
  for (const QLabel* l : mc.findChildren<QLabel*>())
    if (l->text().contains("6 segments, 192.0 MiB reserved")) caption = l->text();
  ASSERT_FALSE(caption.isEmpty());
  EXPECT_TRUE(caption.contains("192.0 MiB reserved, 97.3 MiB allocated (and 4.0 MiB in blocks whose free is pending); "
                               "90.7 MiB free in segments"))
      << caption.toStdString();
}

// The panel's sentence is replay-memory's: with the OOM and the dump of fragmented_oom_p4, and
// where the recorded OOM does not recur (real.pickle at its default capacity), not "reproduces".
TEST(Snap54MemoryUi, TheReplayPanelGivesReplayMemorysVerdict) {
  engine::ReplayResult own;
  own.label = "caching";
  own.config.capacity_bytes = 60 * kSnap54MiB;
  own.peak_reserved = 40 * kSnap54MiB;
  own.final_segments = 2;
  own.final_reserved = 80 * kSnap54MiB;
  const QString text = MemoryReplayPanel::recorded_comparison({own}, "caching", 1, 0.0, 40 * kSnap54MiB, 5, 1, 40 * kSnap54MiB);
  engine::RecordedMemory rec;
  rec.peak_reserved = 40 * kSnap54MiB;
  rec.fragmentation_at_peak_reserved = 0.0;
  rec.first_oom_entry = 5;
  rec.dump_segments = 1;
  rec.dump_reserved = 40 * kSnap54MiB;
  EXPECT_EQ(text.toStdString(), engine::recorded_replay_verdict(own, "caching", rec).text);
  EXPECT_TRUE(text.startsWith("The replay of the recorded settings (caching) does not reproduce the recording: the "
                              "recorded OOM (entry 5) did not recur"))
      << text.toStdString();

  MemoryView view(snap54_imported("fragmented_oom_p4.pickle"));
  view.resize(1400, 900);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  view.replay()->replay();
  ASSERT_TRUE(wait_for_analyses(&view));
  EXPECT_TRUE(view.replay()->note()->text().contains(
      "The replay of the recorded settings (caching) reproduces the recording: peak reserved 40.0 MiB, 0.0% at peak "
      "reserved, the OOM at entry 5, the dump's 1 segment (40.0 MiB reserved)."))
      << view.replay()->note()->text().toStdString();
}
