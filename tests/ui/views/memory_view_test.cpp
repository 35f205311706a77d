// The memory view and the memory comparison.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <sqlite3.h>
#include <unistd.h>
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QSpinBox>
#include <QDoubleSpinBox>
#include <QComboBox>
#include <QFileInfo>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>
#include <QTimer>
#include <qcustomplot.h>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include "charts/colors.h"
#include "views/compare_view.h"
#include "models/critical_path_model.h"
#include "views/memory_compare.h"
#include "embedscope/engine/workload/scenario.h"
#include "views/scenario_view.h"
#include "core/load_data.h"
#include "views/load_view.h"
#include "views/memory_view.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "shell/main_window.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/sharding/sharding.h"
#include "models/range_totals_model.h"
#include "models/rank_stats_model.h"
#include "jobs/analysis_job.h"
#include "jobs/run_job.h"
#include "models/sharding_plan_model.h"
#include "core/timeline_math.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"
#include "views/workload_designer.h"
#include "models/workload_model.h"
#include "support/step_sessions.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;
using namespace embedscope::ui::fixtures;

TEST(MemoryView, BlockMapAndTheOomSnapshotFirst) {
  // segment A (1000 B): [used 300 weights][free 200][used 500 kjt]; segment B (400 B): [free 400]
  std::vector<sessions::MemoryBlockRecord> blocks{{5000, 1000, 5000, 300, 290, true, "weights"},
                                                   {5000, 1000, 5300, 200, 0, false, ""},
                                                   {5000, 1000, 5500, 500, 500, true, "kjt"},
                                                   {9000, 400, 9000, 400, 0, false, ""}};
  auto map = layout_blocks(blocks);
  ASSERT_EQ(map.size(), 4u);
  EXPECT_EQ(map[2].row, 0);
  EXPECT_EQ(map[3].row, 1);
  EXPECT_DOUBLE_EQ(map[1].x0, 0.3);
  EXPECT_DOUBLE_EQ(map[1].x1, 0.5);
  EXPECT_DOUBLE_EQ(map[3].x1, 0.4);
  EXPECT_TRUE(map[3].largest_free);  // 400 > 200
  EXPECT_FALSE(map[1].largest_free);

  const auto path = std::filesystem::temp_directory_path() / ("es_ui_mem_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    for (int step = 0; step < 3; ++step) w.add_memory({step, 0, 100 * step, 1000, 300, 1000, 400, 0, 2, 0.3, 0.1});
    w.add_snapshot({0, 0, 0, 0, "step", {blocks[0]}});
    w.add_snapshot({0, 0, 2, 0, "oom", blocks});
    w.close("oom", "rank 0: out of memory");
  }
  MemoryView view(std::make_shared<const sessions::SessionReader>(path.string()));
  view.resize(900, 700);
  EXPECT_EQ(view.map()->layout().size(), 4u);  // opened on the OOM snapshot
  BlockMap bm;  // the map drawn at 1000 px of blocks (the view's sits in a scroll area beside the details)
  bm.set_blocks(blocks);
  bm.resize(1016, 60);
  const QImage img = bm.grab().toImage();
  // the first row is under the legend (one line: weights, kjt, free) and the byte scale
  const int row0 = BlockMap::kMargin + BlockMap::kLegendRow + BlockMap::kScaleHeight + 9;
  EXPECT_EQ(img.pixelColor(BlockMap::kMargin + 100, row0), BlockMap::color_of(blocks[0]));
  EXPECT_EQ(img.pixelColor(BlockMap::kMargin + 400, row0), BlockMap::color_of(blocks[1]));  // free: grey
  EXPECT_EQ(img.pixelColor(BlockMap::kMargin + 700, row0), BlockMap::color_of(blocks[2]));
  EXPECT_EQ(bm.block_at(BlockMap::kMargin + 700, row0), 2);
}

// Ranks write their snapshots in any order (criteo's first is rank 1's); without an OOM the view
// opens on rank 0's earliest snapshot, and its chart on rank 0.
TEST(MemoryView, OpensOnTheLowestRankWithoutAnOom) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_mem_order_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    for (int r : {1, 0}) w.add_memory({0, r, 0, 1000, 300, 1000, 400, 0, 2, 0.3, 0.1});
    const sessions::MemoryBlockRecord block{0, 1 << 20, 0, 512, 512, true, "kjt"};
    w.add_snapshot({0, 1, 0, 10, "step", {block}});
    w.add_snapshot({0, 0, 1, 20, "step", {block}});
    w.add_snapshot({0, 0, 0, 5, "step", {block}});
    w.close("complete");
  }
  MemoryView view(std::make_shared<const sessions::SessionReader>(path.string()));
  const auto boxes = view.findChildren<QComboBox*>();
  ASSERT_EQ(boxes.size(), 2);  // rank, snapshot
  EXPECT_EQ(boxes[0]->currentText().toStdString(), "rank 0");
  EXPECT_EQ(boxes[1]->currentIndex(), 2);  // rank 0, step 0
}

// A simulated session has the planner's estimate per step and no allocator history (tester33
// D15): the view says so, and the replay box offers the simulated device's capacity, not 1 MiB.
TEST(MemoryView, SimulatedSessionSaysWhatItShowsAndOffersTheDevicesCapacity) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_mem_sim_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata(sessions::meta::kSimulated, "1");
    w.add_rank({0, "node0 (simulated)", "H100 (simulated)", int64_t{80} << 30});
    for (int step = 0; step < 3; ++step) w.add_memory({step, 0, 5000, 5000, 5000, 5000, 0, 0, 0, 0.0, 0.0});
    w.close("complete");
  }
  MemoryView view(std::make_shared<const sessions::SessionReader>(path.string()));
  ASSERT_TRUE(wait_for_analyses(&view));
  QString said;
  for (auto* label : view.findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_TRUE(said.contains("simulated: the memory estimate of each step")) << said.toStdString();
  // a DLRM session's counters are the replay's allocator at each step end (tester51 F7), not allocated = reserved
  EXPECT_TRUE(said.contains("(planner/memory_replay.h), its allocator's figures at each step end;")) << said.toStdString();
  EXPECT_FALSE(said.contains("the recorded snapshots below")) << said.toStdString();
  const auto spins = view.findChildren<QDoubleSpinBox*>();
  bool found = false;
  for (auto* sp : spins)
    if (sp->suffix() == " MiB" && sp->value() == 80 * 1024) found = true;
  EXPECT_TRUE(found) << "the replay box offers the device's 81,920 MiB";
}

TEST(MemoryCompare, SnapshotsAtOneStepOnOneScale) {
  std::vector<sessions::MemorySnapshot> snaps{{1, 0, 0, 0, "step", {}}, {2, 0, 3, 0, "step", {}},
                                              {3, 0, 3, 0, "oom", {}},  {4, 1, 1, 0, "step", {}}};
  EXPECT_EQ(snapshot_at(snaps, 0, 2)->id, 1);  // the layout of step 0 still holds at step 2
  EXPECT_EQ(snapshot_at(snaps, 0, 3)->id, 3);  // the OOM snapshot of step 3
  EXPECT_EQ(snapshot_at(snaps, 1, 0), nullptr);
  auto sa = open_reader(step_session("es_mem_a", 0, {1'000'000, 1'000'000}, 4096));
  auto sb = open_reader(step_session("es_mem_b", 0, {1'000'000, 1'000'000}, 8192));
  MemoryCompare mc({{"A", sa}, {"B", sb}});
  mc.resize(1000, 700);
  mc.show(0, 1);
  EXPECT_EQ(mc.map_width_bytes(), 8192);
  ASSERT_EQ(mc.map(0)->layout().size(), 1u);
  EXPECT_DOUBLE_EQ(mc.map(0)->layout()[0].x1, 2000.0 / 8192);  // A's 2000 B block on B's scale
  EXPECT_DOUBLE_EQ(mc.map(1)->layout()[0].x1, 2000.0 / 8192);
}
