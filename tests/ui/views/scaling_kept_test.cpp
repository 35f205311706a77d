// The scaling page names the tables a point's plan kept in another type (plan45; the CLI has
// noted them under a row since tester44 F4) or, since fixf49, split into empty shards: tiny's t_small has 1 row, so a row split over 2 or 4
// ranks would leave empty shards, and the planner keeps it table_wise at those sizes (at 1 GPU
// one row is enough for one rank).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>
#include <QTableWidget>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <qcustomplot.h>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/workload/presets.h"
#include "shell/main_window.h"
#include "views/scaling_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// since fixf49 (tester49 F6) the point splits such a table into empty shards, as run does
constexpr const char* kKeptTinyRowWise =
    "Tables split into empty shards (too few rows for a block of ceil(rows / ranks) on every rank: the last ranks "
    "hold none), as `run --sharding TYPE` splits them: row_wise at 2, 4 GPUs: t_small (the planner would keep a table "
    "with fewer rows than ranks table_wise, which adds a pooled all-to-all to the step).";
}  // namespace

TEST(ScalingKeptTables, ThePageNamesTheTablesKeptTableWise) {
  engine::WorkloadSpec spec = engine::load_preset("tiny");
  spec.steps = 1;
  engine::ScalingStudyOptions o;
  o.hardware = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";
  o.gpus = {1, 2, 4};
  o.shardings = {engine::ShardingType::table_wise, engine::ShardingType::row_wise};
  const auto points = engine::run_scaling_study(spec, o);
  ASSERT_EQ(points.size(), 6u);
  // the premise, from the engine: row_wise at 2 and 4 GPUs splits t_small into empty shards, nothing else
  const std::vector<std::string> t_small = {"t_small"};
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(points[k].empty_shard_tables, k == 4 || k == 5 ? t_small : decltype(t_small){}) << k;
    EXPECT_TRUE(points[k].other_types.empty()) << k;
  }
  const engine::ScalingStudy study{spec.name, "round_numbers", 2, spec.batch_size, spec.steps, points};
  // through the file, as File > Open reads it (other_types in the JSON)
  const auto path = std::filesystem::temp_directory_path() / ("es_scaling_kept_" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << engine::to_json(study).dump(2);
  MainWindow w;
  ASSERT_EQ(w.open_path(QString::fromStdString(path.string()), true), QString());
  auto* view = qobject_cast<ScalingView*>(w.tabs()->currentWidget());
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->kept_note()->text().toStdString(), kKeptTinyRowWise);
  EXPECT_FALSE(view->kept_note()->isHidden());
  // and in the table's note column, beside how the planner placed the tables
  QTableWidget* table = view->table();
  for (int r : {4, 5}) {
    EXPECT_TRUE(table->item(r, ScalingView::kNoteColumn)->text().endsWith("empty shards: t_small")) << table->item(r, ScalingView::kNoteColumn)->text().toStdString();
  }
  for (int r : {0, 1, 2, 3})
    EXPECT_FALSE(table->item(r, ScalingView::kNoteColumn)->text().contains("empty")) << r << table->item(r, ScalingView::kNoteColumn)->text().toStdString();
  std::filesystem::remove(path);

  // a study where every point took its type: no note
  engine::ScalingStudy tw = study;
  tw.points.resize(3);
  ScalingView plain(tw);
  EXPECT_EQ(plain.kept_note()->text(), QString());
  EXPECT_TRUE(plain.kept_note()->isHidden());
}

// Hand-made points: groups by type and tables in the study's order, at most 8 names a group,
// and `run --sharding TYPE` when more than one type kept tables.
TEST(ScalingKeptTables, TextGroupsPointsAndCapsTheNames) {
  engine::ScalingStudy s;
  auto point = [](engine::ShardingType t, int gpus, int tables) {
    engine::ScalingPoint p;
    p.sharding = t;
    p.gpus = gpus;
    for (int i = 0; i < tables; ++i) {
      std::string name = "t";
      name += std::to_string(i);
      p.other_types.emplace_back(std::move(name), engine::ShardingType::table_wise);
    }
    return p;
  };
  s.points = {point(engine::ShardingType::row_wise, 8, 10), point(engine::ShardingType::row_wise, 16, 1),
              point(engine::ShardingType::row_wise, 32, 10), point(engine::ShardingType::table_row_wise, 8, 1)};
  EXPECT_EQ(kept_tables_text(s),
            "Tables not in the point's sharding type: row_wise at 8, 32 GPUs: t0 table_wise, t1 table_wise, t2 "
            "table_wise, t3 table_wise, t4 table_wise, t5 table_wise, t6 table_wise, t7 table_wise and 2 more; "
            "row_wise at 16 GPUs: t0 table_wise; table_row_wise at 8 GPUs: t0 table_wise (fewer rows than the ranks a "
            "row split needs; `run --sharding TYPE` splits them into empty shards instead).");
}

// tester45 F3: on one node row_wise and table_row_wise are the same plan, and the later line was
// drawn exactly over the earlier with nothing saying so. Hand-made points: table_row_wise equals
// row_wise at 1 and 8 GPUs, table_wise differs.
TEST(ScalingKeptTables, CoincidingTypesAreSaidAndDrawnDashed) {
  auto point = [](engine::ShardingType t, int gpus, int64_t step_ns) {
    engine::ScalingPoint p;
    p.sharding = t;
    p.gpus = gpus;
    p.nodes = 1;
    p.step_time_ns = step_ns;
    p.samples_per_s = 1e9 * gpus / static_cast<double>(step_ns);
    p.scaling_efficiency = 1;
    p.memory_bytes_per_gpu = 1 << 20;
    return p;
  };
  using T = engine::ShardingType;
  engine::ScalingStudy s{"hand", "round_numbers", 8, 1, 1,
                         {point(T::table_wise, 1, 100), point(T::table_wise, 8, 120), point(T::row_wise, 1, 90),
                          point(T::row_wise, 8, 130), point(T::table_row_wise, 1, 90), point(T::table_row_wise, 8, 130)}};
  const auto c = coinciding_types(s);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].type, T::table_row_wise);
  EXPECT_EQ(c[0].earlier, T::row_wise);
  EXPECT_EQ(c[0].gpus, (std::vector<int>{1, 8}));
  EXPECT_TRUE(c[0].every_size);
  ScalingView view(s);
  EXPECT_EQ(view.kept_note()->text().toStdString(),
            "table_row_wise's figures are within 0.5 % of row_wise's at every size (on one node the same plan): its "
            "line is drawn dashed over row_wise's.");
  EXPECT_FALSE(view.kept_note()->isHidden());
  for (int m = 0; m < 4; ++m) {
    ASSERT_EQ(view.plot(m)->graphCount(), 3);
    EXPECT_EQ(view.plot(m)->graph(0)->pen().style(), Qt::SolidLine);
    EXPECT_EQ(view.plot(m)->graph(1)->pen().style(), Qt::SolidLine);
    EXPECT_EQ(view.plot(m)->graph(2)->pen().style(), Qt::DashLine) << m;
  }
  // 0.3 % apart in memory (criteo_kaggle's 283.8 / 284.6 MiB at 8 GPUs) still one line; 1 % is two
  // there: the lines meet at 1 GPU only, no stretch of line hidden (every type is one plan on 1 GPU)
  s.points[5].memory_bytes_per_gpu = (1 << 20) + (1 << 20) * 3 / 1000;
  ASSERT_EQ(coinciding_types(s).size(), 1u);
  EXPECT_TRUE(coinciding_types(s)[0].every_size);
  s.points[5].memory_bytes_per_gpu = (1 << 20) + (1 << 20) / 100;
  EXPECT_TRUE(coinciding_types(s).empty());
}

// tester63a F8: criteo_kaggle on 4, 8 and 16 H100s, 8 a node: row_wise and table_row_wise are the
// same plan on one node (4 and 8 GPUs) and apart at 16; the later line is dashed and the note names
// the sizes where it covers the other.
TEST(ScalingKeptTables, LinesEqualOnOneNodeOnlyAreSaidAtThoseSizes) {
  auto point = [](engine::ShardingType t, int gpus, int64_t step_ns, int64_t bytes) {
    engine::ScalingPoint p;
    p.sharding = t;
    p.gpus = gpus;
    p.nodes = (gpus + 7) / 8;
    p.step_time_ns = step_ns;
    p.samples_per_s = 1e9 * gpus / static_cast<double>(step_ns);
    p.scaling_efficiency = 1;
    p.memory_bytes_per_gpu = bytes;
    return p;
  };
  using T = engine::ShardingType;
  engine::ScalingStudy s{"hand", "round_numbers", 8, 1, 1,
                         {point(T::row_wise, 4, 200, 538 << 20), point(T::row_wise, 8, 220, 285 << 20),
                          point(T::row_wise, 16, 400, 150 << 20), point(T::table_row_wise, 4, 200, 538 << 20),
                          point(T::table_row_wise, 8, 220, 285 << 20), point(T::table_row_wise, 16, 300, 160 << 20)}};
  const auto c = coinciding_types(s);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].type, T::table_row_wise);
  EXPECT_EQ(c[0].earlier, T::row_wise);
  EXPECT_EQ(c[0].gpus, (std::vector<int>{4, 8}));
  EXPECT_FALSE(c[0].every_size);
  ScalingView view(s);
  EXPECT_EQ(view.kept_note()->text().toStdString(),
            "table_row_wise's figures are within 0.5 % of row_wise's at 4 and 8 GPUs (on one node the same plan): its "
            "line is drawn dashed over row_wise's.");
  for (int m = 0; m < 4; ++m) {
    ASSERT_EQ(view.plot(m)->graphCount(), 2);
    EXPECT_EQ(view.plot(m)->graph(0)->pen().style(), Qt::SolidLine);
    EXPECT_EQ(view.plot(m)->graph(1)->pen().style(), Qt::DashLine) << m;
  }
}
