// ux42 (tester41 #7): every fragmentation figure says when it was taken - the Summary's worst
// step end, the Memory page's at peak allocated and at peak reserved, the Replay panel's at peak
// reserved - and the Replay panel compares the replay of the recorded settings with the
// recording at the same moment, saying why they differ where they do.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>
#include <QTableWidget>

#include <qcustomplot.h>

#include <cmath>

#include <filesystem>
#include <memory>
#include <string>

#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include <nlohmann/json.hpp>

#include "core/input_figures.h"
#include "embedscope/engine/input/source.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "jobs/analysis_job.h"
#include "models/rank_stats_model.h"
#include "ui/support/ui_fixtures.h"
#include "views/load_view.h"
#include "views/memory_replay.h"
#include "views/memory_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
constexpr int64_t kUx42MiB = int64_t{1} << 20;
std::shared_ptr<const sessions::SessionReader> ux42_imported(const std::string& fixture) {
  return fixtures::imported_snapshot(fixture, "ux42_ui");
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
  // (snap54: the sentence is engine recorded_replay_verdict's, which replay-memory prints too)
  EXPECT_TRUE(other.startsWith("The replay of the recorded settings (expandable) does not reproduce the recording: it "
                               "gives 14.1% at peak reserved, the recording 25.0%: the same peak, reached with blocks "
                               "placed differently"))
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
                                         "peak reserved 40.0 MiB, 0.0% at peak reserved, the OOM at entry 5, the dump's "
                                         "1 segment (40.0 MiB reserved)."))
      << rp.note()->text().toStdString();
}

// tester41 #18: the shard heatmap tells "no shard on this rank" (NaN, grey, said in the title)
// from "0 ids"; both heatmaps' colour scales start at 0; many shards get their tables' names.
// Two measured steps: rank 0 holds table 0 shard 0 (10 ids a step); rank 1 holds table 0 shard
// 1 (no id reached it) and table 1 shard 0 (8 ids a step).
TEST(Ux42Ui, TheLoadHeatmapsDrawNoShardGreyAndStartTheirScaleAtZero) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ux42_ui_load_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    for (int64_t step : {0, 1}) {
      sessions::LoadCounter a{}, b{}, c{};
      a.step = b.step = c.step = step;
      a.rank = 0, a.table = 0, a.shard = 0, a.ids = 10;
      b.rank = 1, b.table = 0, b.shard = 1, b.ids = 0;
      c.rank = 1, c.table = 1, c.shard = 0, c.ids = 8;
      for (const auto& x : {a, b, c}) w.add_load(x);
    }
    w.close("complete");
  }
  LoadView view(std::make_shared<const sessions::SessionReader>(path.string()));
  view.resize(1200, 900);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  const sessions::LoadData& d = view.data();
  ASSERT_EQ(d.shards, (std::vector<std::string>{"table 0 #0", "table 0 #1", "table 1 #0"}));
  EXPECT_EQ(d.shard_tables, (std::vector<std::string>{"table 0", "table 0", "table 1"}));
  EXPECT_EQ(d.held, (std::vector<uint8_t>{1, 0, 0, 0, 1, 1}));
  auto* shard_map = qobject_cast<QCPColorMap*>(view.shard_map()->plottable(0));
  ASSERT_NE(shard_map, nullptr);
  EXPECT_DOUBLE_EQ(shard_map->data()->cell(0, 0), 20);       // rank 0's shard: 2 x 10 ids
  EXPECT_TRUE(std::isnan(shard_map->data()->cell(0, 1)));  // rank 1 holds no table 0 #0
  EXPECT_DOUBLE_EQ(shard_map->data()->cell(1, 1), 0);        // rank 1 holds table 0 #1: 0 ids
  EXPECT_TRUE(std::isnan(shard_map->data()->cell(1, 0)));
  EXPECT_EQ(shard_map->gradient().nanHandling(), QCPColorGradient::nhNanColor);
  EXPECT_EQ(shard_map->gradient().nanColor(), kNoShardColor);
  EXPECT_DOUBLE_EQ(shard_map->dataRange().lower, 0);
  EXPECT_DOUBLE_EQ(shard_map->dataRange().upper, 20);
  auto* shard_title = qobject_cast<QCPTextElement*>(view.shard_map()->plotLayout()->element(0, 0));
  ASSERT_NE(shard_title, nullptr);
  EXPECT_EQ(shard_title->text().replace('\n', ' ').toStdString(),  // wrapped to the plot (tester56 F8)
            "per rank x table shard (measured steps; colour from 0; grey: no such shard on the rank)");
  // per rank x step: 10 and 8 ids a step; the scale 0..10, not 8..10
  auto* step_map = qobject_cast<QCPColorMap*>(view.step_map()->plottable(0));
  ASSERT_NE(step_map, nullptr);
  EXPECT_DOUBLE_EQ(step_map->data()->cell(0, 1), 8);
  EXPECT_DOUBLE_EQ(step_map->dataRange().lower, 0);
  EXPECT_DOUBLE_EQ(step_map->dataRange().upper, 10);
}

TEST(Ux42Ui, ManyShardsAreTickedByTheirTables) {
  QStringList few{"a #0", "a #1", "b #0"};
  EXPECT_EQ(heatmap_column_ticks(few, {"a", "a", "b"}),
            (std::vector<std::pair<int, QString>>{{0, "a #0"}, {1, "a #1"}, {2, "b #0"}}));
  // 41 shards: a 20, b 1, c 20 -> a tick at each table's first shard
  QStringList many, tables;
  for (int i = 0; i < 41; ++i) {
    const QString t = i < 20 ? "a" : i == 20 ? "b" : "c";
    tables << t;
    many << t + " #" + QString::number(i);
  }
  EXPECT_EQ(heatmap_column_ticks(many, tables), (std::vector<std::pair<int, QString>>{{0, "a"}, {20, "b"}, {21, "c"}}));
  EXPECT_TRUE(heatmap_column_ticks(many, {}).empty());  // no table names: integer indices
  QStringList distinct;
  for (int i = 0; i < 41; ++i) distinct << QString("t%1").arg(i);
  EXPECT_TRUE(heatmap_column_ticks(distinct, distinct).empty());  // 41 tables, more than 40 names: indices
}

// tester41 #24: the Load page's input per feature counts the measured steps' batches, the window
// of the heatmaps and the row histogram, not the warm-up's too. tiny, 2 warm-up + 3 measured
// steps: the ids of each feature against the generator's measured batches counted here.
TEST(Ux42Ui, TheInputPerFeatureIsOverTheMeasuredSteps) {
  engine::WorkloadSpec spec = engine::parse_workload(nlohmann::json::parse(engine::preset_json("tiny")), "tiny");
  spec.warmup_steps = 2;
  spec.steps = 3;
  const auto path = std::filesystem::temp_directory_path() / ("es_ux42_ui_input_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("workload_json", engine::to_json(spec).dump());
    w.close("complete");
  }
  const InputFigures f = input_figures(sessions::SessionReader(path.string()));
  ASSERT_TRUE(f.unavailable.empty()) << f.unavailable;
  const int64_t ranks = spec.devices.count;
  EXPECT_EQ(f.inspection.batches, 3 * ranks);
  EXPECT_EQ(f.inspection.warmup_batches_left_out, 2 * ranks);
  EXPECT_NE(f.source.find(": the " + std::to_string(3 * ranks) +
                          " batches of the 3 measured steps (the 2 warm-up steps are left out, as above), " +
                          std::to_string(3 * ranks * spec.batch_size) + " samples"),
            std::string::npos)
      << f.source;
  const auto source = engine::make_batch_source(spec);
  std::vector<int64_t> measured(spec.features.size(), 0), all(spec.features.size(), 0);
  for (int64_t it = 0; it < 5; ++it)
    for (int r = 0; r < ranks; ++r) {
      const engine::KJT kjt = source->make(it, r).kjt;
      for (int fe = 0; fe < kjt.num_features; ++fe) {
        const int64_t end = fe + 1 < kjt.num_features ? kjt.feature_offset(fe + 1) : static_cast<int64_t>(kjt.values.size());
        const int64_t ids = end - kjt.feature_offset(fe);
        all[static_cast<size_t>(fe)] += ids;
        if (it >= 2) measured[static_cast<size_t>(fe)] += ids;
      }
    }
  ASSERT_EQ(f.inspection.features.size(), measured.size());
  for (size_t fe = 0; fe < measured.size(); ++fe) EXPECT_EQ(f.inspection.features[fe].ids, measured[fe]) << fe;
  EXPECT_NE(measured, all);  // the warm-up's batches hold ids: the two windows differ
}
