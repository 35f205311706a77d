// The Memory page's Replay panel honours garbage_collection_threshold: a recorded threshold is
// offered (sessions::allocator_settings names it) and replayed as a caching row with it. The hand
// case of the allocator's test (tests/engine/memory/mem61_gc_threshold_test.cpp, recorded by
// make_mem61.py as mem61_gc.pickle): at 100 MiB with threshold 0.5 reserved peaks at 74 MiB
// (A 12 MiB released before Y, then B, C and Y before Z), without it at 86 MiB.
#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QTableWidget>

#include <memory>

#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/analysis/memory_history.h"
#include "ui/support/ui_fixtures.h"
#include "views/memory_replay.h"

using namespace embedscope;
using namespace embedscope::ui;

TEST(GcReplayPanel, TheRecordedThresholdIsReplayedAsTheRunCollected) {
  constexpr int64_t MiB = int64_t{1} << 20;
  const auto session = fixtures::imported_snapshot("mem61_gc.pickle", "gc_replay_panel");
  const std::string recorded = sessions::allocator_settings(*session).recorded;
  EXPECT_EQ(recorded, "caching, garbage_collection_threshold 0.5");
  auto history = std::make_shared<const sessions::MemoryHistory>(sessions::MemoryHistory::load(*session, 0));
  MemoryReplayPanel rp;
  rp.set_history(history, 100 * MiB, 74 * MiB, recorded);
  const auto settings = rp.settings();
  ASSERT_EQ(settings.size(), 3u);  // caching, expandable, caching with the recorded threshold
  EXPECT_DOUBLE_EQ(settings[0].garbage_collection_threshold, 0);
  EXPECT_EQ(settings[2].kind, engine::AllocatorKind::caching);
  EXPECT_DOUBLE_EQ(settings[2].garbage_collection_threshold, 0.5);
  EXPECT_EQ(settings[2].capacity_bytes, 100 * MiB);
  QSignalSpy done(&rp, &MemoryReplayPanel::replayed);
  rp.replay();
  ASSERT_TRUE(done.wait(60000));
  ASSERT_EQ(rp.table()->rowCount(), 3);
  EXPECT_EQ(rp.table()->item(0, 0)->text().toStdString(), "caching");
  EXPECT_EQ(rp.table()->item(0, 1)->text().toStdString(), "86.0 MiB");
  EXPECT_EQ(rp.table()->item(2, 0)->text().toStdString(), "caching, garbage_collection_threshold 0.5");
  EXPECT_EQ(rp.table()->item(2, 1)->text().toStdString(), "74.0 MiB");
  EXPECT_EQ(rp.table()->item(2, 3)->text().toStdString(), "ok");
  // none recorded: the threshold is off, as before
  rp.set_history(history, 100 * MiB, 74 * MiB, "caching");
  EXPECT_EQ(rp.settings().size(), 2u);
}
