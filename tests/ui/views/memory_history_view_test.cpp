// The memory view on an imported PyTorch memory snapshot (issue 13, "Seeing it"): the active
// memory timeline, the block map scrubbed entry by entry, clicking a block, the fragmentation
// chart with the OOM's request vs largest free block, the top stacks, the replay; and the
// block map's byte scale, legend and the warm-up names of the snapshot picker (issue 20).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QComboBox>
#include <QLabel>
#include <QSlider>
#include <QTableWidget>
#include <QTest>

#include <filesystem>

#include <qcustomplot.h>

#include "charts/active_timeline.h"
#include "charts/block_map.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "jobs/analysis_job.h"
#include "ui/support/ui_fixtures.h"
#include "views/memory_replay.h"
#include "views/memory_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
constexpr int64_t MiB = int64_t{1} << 20;
std::shared_ptr<const sessions::SessionReader> history_imported(const std::string& fixture) {
  return fixtures::imported_snapshot(fixture, "ui_memhist");
}
}  // namespace

TEST(BlockMap, ByteScaleStepsAndLegend) {
  EXPECT_EQ(byte_tick_step(40 * MiB), 8 * MiB);  // 5 intervals; 4 MiB would be 10 (binary steps)
  EXPECT_EQ(byte_tick_step(1000), 256);
  EXPECT_EQ(byte_tick_step(2 * MiB), 512 * 1024);
  EXPECT_EQ(byte_tick_step(0), 1);
  BlockMap m;
  m.set_blocks({{0, 4096, 0, 1024, 1000, true, "weights"}, {0, 4096, 1024, 2048, 2000, true, "kjt"},
                {0, 4096, 3072, 1024, 0, false, ""}});
  EXPECT_EQ(m.legend(), (std::vector<std::string>{"kjt", "weights", "free"}));  // most bytes first
  EXPECT_EQ(m.width_bytes(), 4096);
  EXPECT_GE(m.minimumHeight(), 2 * BlockMap::kMargin + BlockMap::kRowHeight + BlockMap::kScaleHeight + BlockMap::kLegendRow);
  // a PyTorch tag (an innermost function) gets a stable colour of its own, never the free grey
  EXPECT_EQ(BlockMap::color_of_tag("forward"), BlockMap::color_of_tag("forward"));
  EXPECT_NE(BlockMap::color_of_tag("forward"), QColor(0xdd, 0xdd, 0xdd));
}

TEST(MemoryView, ScrubsTheImportedSnapshotEntryByEntry) {
  MemoryView view(history_imported("fragmented_oom_p4.pickle"));
  view.resize(1400, 900);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  // opened at the OOM (entry 5 of 6): the 2 MiB kjt block and the 38 MiB left free beside it
  EXPECT_EQ(view.slider()->maximum(), 5);
  EXPECT_EQ(view.slider()->value(), 5);
  ASSERT_EQ(view.map()->layout().size(), 2u);
  EXPECT_TRUE(view.map()->layout()[0].block.allocated);
  EXPECT_EQ(view.map()->layout()[0].block.size, 2 * MiB);
  EXPECT_EQ(view.map()->layout()[1].block.size, 38 * MiB);
  EXPECT_TRUE(view.map()->layout()[1].largest_free);
  EXPECT_EQ(view.map()->legend(), (std::vector<std::string>{"kjt", "free"}));
  // entry 1: the 40 MiB activations block fills the segment
  view.scrub_to(1);
  ASSERT_EQ(view.map()->layout().size(), 1u);
  EXPECT_EQ(view.map()->layout()[0].block.size, 40 * MiB);
  EXPECT_EQ(view.map()->layout()[0].block.tag, "activations");
  EXPECT_EQ(view.state().blocks.size(), 1u);
  // the keyboard: Left is entry 0 (the segment alone, free), End the last entry
  view.slider()->setFocus();
  QTest::keyClick(view.slider(), Qt::Key_Left);
  EXPECT_EQ(view.state().entry, 0);
  ASSERT_EQ(view.map()->layout().size(), 1u);
  EXPECT_FALSE(view.map()->layout()[0].block.allocated);
  QTest::keyClick(view.slider(), Qt::Key_End);
  EXPECT_EQ(view.state().entry, 5);
  // click the kjt block: its stack and the entry that made it
  BlockMap& map = *view.map();
  const QRect r = map.rect();
  const int x = BlockMap::kMargin + static_cast<int>(0.02 * (r.width() - 2 * BlockMap::kMargin));
  const int y = BlockMap::kMargin + BlockMap::kLegendRow + BlockMap::kScaleHeight + BlockMap::kRowHeight / 2;
  ASSERT_EQ(map.block_at(x, y), 0);
  QTest::mouseClick(&map, Qt::LeftButton, {}, QPoint(x, y));
  const QString details = view.details()->text();
  EXPECT_TRUE(details.contains("made by entry 4 (alloc)")) << details.toStdString();
  EXPECT_TRUE(details.contains("kjt: 2.0 MiB (requested 2.0 MiB)")) << details.toStdString();
  EXPECT_TRUE(details.contains("kjt (train.py:31)")) << details.toStdString();
  // the snapshot picker names the dump
  const auto boxes = view.findChildren<QComboBox*>();
  ASSERT_EQ(boxes.size(), 2);
  EXPECT_EQ(boxes[1]->itemText(0).toStdString(), "rank 0, at the dump");
}

TEST(MemoryView, TimelineFragmentationStacksAndReplay) {
  MemoryView view(history_imported("fragmented_oom_p4.pickle"));
  view.resize(1400, 900);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  ActiveTimeline& t = *view.timeline();
  ASSERT_EQ(t.columns().size(), 6u);
  EXPECT_EQ(t.top_bytes(), 40 * MiB);
  // column 1 (entry 1) is the 40 MiB band from the bottom to the top
  const QRectF pr = t.plot_rect();
  const double x1 = pr.left() + 1.5 * pr.width() / 6;
  EXPECT_EQ(t.allocation_at(x1, pr.bottom() - 2), 0);
  EXPECT_EQ(t.allocation_at(x1, pr.top() + 2), 0);
  EXPECT_TRUE(t.describe(0).contains("allocated at entry 1")) << t.describe(0).toStdString();
  EXPECT_TRUE(t.describe(0).contains("freed at entry 3")) << t.describe(0).toStdString();
  // column 4 (entry 4): the 2 MiB band low, nothing above it
  const double x4 = pr.left() + 4.5 * pr.width() / 6;
  EXPECT_EQ(t.allocation_at(x4, pr.bottom() - 1), 1);
  EXPECT_EQ(t.allocation_at(x4, pr.top() + 10), -1);
  // clicking a column scrubs the map there
  QTest::mouseClick(&t, Qt::LeftButton, {}, QPoint(static_cast<int>(x1), static_cast<int>(pr.center().y())));
  EXPECT_EQ(view.slider()->value(), 1);
  // the OOM on the fragmentation chart: 40 MiB asked against a 38 MiB largest free block
  QCustomPlot& p = *view.fragmentation_plot();
  ASSERT_EQ(p.graphCount(), 4);
  ASSERT_EQ(p.graph(2)->data()->size(), 1);
  EXPECT_DOUBLE_EQ(p.graph(2)->data()->begin()->key, 5);
  EXPECT_DOUBLE_EQ(p.graph(2)->data()->begin()->value, 40);
  EXPECT_DOUBLE_EQ(p.graph(3)->data()->begin()->value, 38);
  // top stacks: the activations at the peak, kjt at the OOM
  QTableWidget& s = *view.stacks_table();
  ASSERT_EQ(s.rowCount(), 2);
  EXPECT_EQ(s.item(0, 0)->text().toStdString(), "at the peak (entry 1)");
  EXPECT_EQ(s.item(0, 1)->text().toStdString(), "40.0 MiB");
  EXPECT_EQ(s.item(0, 3)->text().toStdString(), "activations (train.py:30)");
  EXPECT_EQ(s.item(1, 0)->text().toStdString(), "at the OOM (entry 5)");
  // the replay at the device's 60 MiB (make_fixtures.py; 48 MiB before alloc52): caching runs out
  // where the trace did, expandable does not - it reserves 60 MiB: the 40 MiB in two 20 MiB
  // pages, then the free 38 MiB after the 2 MiB and one more page for the second 40 MiB
  MemoryReplayPanel& rp = *view.replay();
  ASSERT_EQ(rp.settings().size(), 2u);
  EXPECT_EQ(rp.settings()[0].capacity_bytes, 60 * MiB);
  rp.replay();
  ASSERT_TRUE(wait_for_analyses(&view));
  ASSERT_EQ(rp.table()->rowCount(), 2);
  EXPECT_EQ(rp.table()->item(0, 0)->text().toStdString(), "caching");
  EXPECT_EQ(rp.table()->item(0, 3)->text().toStdString(), "OOM at entry 5");
  EXPECT_EQ(rp.table()->item(1, 0)->text().toStdString(), "expandable");
  EXPECT_EQ(rp.table()->item(1, 1)->text().toStdString(), "60.0 MiB");
  EXPECT_EQ(rp.table()->item(1, 3)->text().toStdString(), "ok");
}

// An engine run's snapshot picker says warm-up, not "step -2 (step)".
TEST(MemoryView, SnapshotPickerNamesWarmUpSteps) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_mem_warmup_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("warmup_steps", "2");
    const sessions::MemoryBlockRecord block{0, 1 << 20, 0, 512, 512, true, "kjt"};
    w.add_memory({-2, 0, 512, 1 << 20, 512, 1 << 20, 0, 0, 1, 0, 0});
    w.add_snapshot({0, 0, -2, 10, "step", {block}});
    w.add_snapshot({0, 0, 0, 20, "step", {block}});
    w.close("complete");
  }
  MemoryView view(std::make_shared<const sessions::SessionReader>(path.string()));
  const auto boxes = view.findChildren<QComboBox*>();
  ASSERT_EQ(boxes.size(), 2);
  EXPECT_EQ(boxes[1]->itemText(0).toStdString(), "rank 0, warm-up step 1 of 2, end of step");
  EXPECT_EQ(boxes[1]->itemText(1).toStdString(), "rank 0, step 0, end of step");
}

// tester34 D21: a capacity from the recorded OOM (free + reserved then: 22 MiB) below what the
// run held at once (40 MiB, shrunk_oom_p4.pickle) is not offered: the peak reserved is, said so.
TEST(MemoryView, ReplayOffersThePeakReservedWhenTheOomCapacityIsBelowIt) {
  MemoryView view(history_imported("shrunk_oom_p4.pickle"));
  ASSERT_TRUE(wait_for_analyses(&view));
  MemoryReplayPanel& rp = *view.replay();
  ASSERT_FALSE(rp.settings().empty());
  EXPECT_EQ(rp.settings()[0].capacity_bytes, 40 * MiB);
  EXPECT_TRUE(rp.note()->text().contains("the recorded peak reserved bytes, 40.0 MiB (free + reserved at the recorded "
                                         "OOM is only 22.0 MiB"))
      << rp.note()->text().toStdString();
}
