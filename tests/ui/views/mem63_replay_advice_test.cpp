// The Replay panel advises an OOM as `embedscope replay-memory` does for the same snapshot
// (tester63c F1: it kept the allocator's generic "try the expandable allocator ..., a
// max_split_size" beside rows showing both run out). tester59_mine.pickle (make_tester59.py):
// capacity 26 MiB (4 MiB free + 22 MiB reserved at the OOM); the 6 MiB request needs a new 20 MiB
// segment or page (22 + 20 > 26): caching and expandable run out at entry 11; direct holds
// 8 MiB + 1 KiB + 6 MiB and completes (peak reserved 16.0 MiB, replay-memory's direct row).
#include <gtest/gtest.h>

#include <QLabel>
#include <QSignalSpy>
#include <QTableWidget>

#include <memory>

#include "embedscope/engine/memory/snapshot_replay.h"
#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/analysis/memory_history.h"
#include "ui/support/ui_fixtures.h"
#include "views/memory_replay.h"

using namespace embedscope;
using namespace embedscope::ui;

TEST(Mem63ReplayAdvice, ThePanelAdvisesAsReplayMemory) {
  constexpr int64_t MiB = int64_t{1} << 20;
  const auto session = fixtures::imported_snapshot("tester59_mine.pickle", "mem63_replay_advice");
  const std::string recorded = sessions::allocator_settings(*session).recorded;
  EXPECT_EQ(recorded, "caching");
  auto history = std::make_shared<const sessions::MemoryHistory>(sessions::MemoryHistory::load(*session, 0));
  const int64_t capacity = engine::history_capacity(*history);
  EXPECT_EQ(capacity, 26 * MiB);
  MemoryReplayPanel rp;
  rp.set_history(history, capacity, 22 * MiB, recorded);
  QSignalSpy done(&rp, &MemoryReplayPanel::replayed);
  rp.replay();
  ASSERT_TRUE(done.wait(60000));
  ASSERT_EQ(rp.results().size(), 2u);  // caching, expandable
  for (const auto& r : rp.results()) {
    ASSERT_TRUE(r.oom) << r.label;
    EXPECT_EQ(r.oom_action, 11);
    EXPECT_EQ(r.oom_advice.find("try the expandable allocator"), std::string::npos) << r.oom_advice;
    EXPECT_EQ(r.oom_advice.find("try a max_split_size"), std::string::npos) << r.oom_advice;
  }
  // the caching row: direct (not a row of the panel) completes, expandable does not
  EXPECT_NE(rp.results()[0].oom_advice.find("of the other settings replayed on the device's trace, only direct (peak "
                                            "reserved 16.0 MiB; one segment per allocation, no cache: "
                                            "PYTORCH_NO_CUDA_MEMORY_CACHING=1) completes them: use it; "
                                            "expandable_segments does not (OOM at action 11)"),
            std::string::npos)
      << rp.results()[0].oom_advice;
  // word for word what replay-memory gives the same row (engine advise_snapshot_rows on the file)
  const auto snap = sessions::torch_snapshot::load_snapshot(std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/tester59_mine.pickle");
  const engine::AllocatorConfig rec = engine::recorded_config(snap, capacity);
  engine::SnapshotReplay cli = engine::replay_snapshot(
      snap, 0, {rec, {engine::AllocatorKind::caching, capacity, 0, false}, {engine::AllocatorKind::expandable, capacity, 0, false},
                {engine::AllocatorKind::direct, capacity, 0, false}},
      "mine");
  engine::advise_snapshot_rows(cli.results, &rec, [&](const engine::AllocatorConfig& c) {
    return engine::replay_snapshot(snap, 0, {c}, "mine").results.front();
  });
  EXPECT_EQ(rp.results()[0].oom_advice, cli.results[1].oom_advice);
  EXPECT_EQ(rp.results()[1].oom_advice, cli.results[2].oom_advice);
  EXPECT_TRUE(rp.verdicts()->isVisible() || !rp.verdicts()->text().isEmpty());
  EXPECT_NE(rp.verdicts()->text().toStdString().find("only direct"), std::string::npos);
}
