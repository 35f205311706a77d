// The load view: row histograms with shard boundaries, metrics.
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
#include <map>
#include "charts/colors.h"
#include "views/compare_view.h"
#include "models/critical_path_model.h"
#include "views/memory_compare.h"
#include "embedscope/engine/workload/scenario.h"
#include "views/scenario_view.h"
#include "core/load_data.h"
#include "views/load_view.h"
#include "models/input_stats_model.h"
#include "engine/input/criteo_support.h"
#include "embedscope/engine/workload/spec.h"
#include "views/memory_view.h"
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

TEST(LoadView, RowHistogramWithShardBoundaries) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_rows_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.set_metadata("workload_json", R"({"tables": [{"name": "t_a", "num_embeddings": 1000}, {"name": "t_b", "num_embeddings": 10}]})");
    w.set_metadata("sharding_plan_json",
                   R"({"tables": [{"name": "t_a", "sharding_type": "row_wise", "shards": [)"
                   R"({"rank": 0, "row_offset": 0, "num_rows": 500}, {"rank": 1, "row_offset": 500, "num_rows": 500}]},)"
                   R"({"name": "t_b", "sharding_type": "table_wise", "shards": [{"rank": 1, "row_offset": 0, "num_rows": 10}]}]})");
    w.add_id_histogram({{0, 0, 0, 0, 4, 5}, {1, 0, 0, 0, 4, 2}, {1, 0, 255, 997, 1000, 4}, {0, 1, 3, 3, 4, 9}});
    w.close("complete");
  }
  sessions::SessionReader r(path.string());
  RowHistogram h = row_histogram(r, 0);
  EXPECT_EQ(h.table, "t_a");
  ASSERT_EQ(h.ids.size(), 256u);
  EXPECT_EQ(h.ids[0], 7);  // both ranks
  EXPECT_EQ(h.ids[1], 0);
  EXPECT_EQ(h.ids[255], 4);
  EXPECT_EQ(h.row_begin[1], 4);
  EXPECT_EQ(h.row_end[255], 1000);
  EXPECT_EQ(h.boundaries(), (std::vector<int64_t>{500}));
  RowHistogram b = row_histogram(r, 1);
  ASSERT_EQ(b.ids.size(), 10u);  // one bucket per row
  EXPECT_EQ(b.ids[3], 9);
  EXPECT_TRUE(b.boundaries().empty());  // table-wise: no boundary inside
  RowHistogram v;  // an LM vocabulary split unevenly over 3 ranks (vocab_parallel): rows 4 | 3 | 3
  v.sharding_type = "vocab_parallel";
  v.num_rows = 10;
  v.shards = {{0, 0, 4}, {1, 4, 3}, {2, 7, 3}};
  EXPECT_EQ(v.boundaries(), (std::vector<int64_t>{4, 7}));
  EXPECT_THROW(row_histogram(r, 2), std::out_of_range);

  LoadView view(std::make_shared<const sessions::SessionReader>(path.string()));
  view.resize(1000, 900);
  EXPECT_EQ(view.rows().ids[0], 7);
  EXPECT_TRUE(view.row_note()->text().contains("hottest bucket rows 0..3")) << view.row_note()->text().toStdString();
  view.set_table(1);
  EXPECT_EQ(view.rows().table, "t_b");
  // an older session without the table opens, and says so
  const std::string v2 = fixture_session();
  sqlite3* db = nullptr;
  sqlite3_open(v2.c_str(), &db);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE id_histogram; PRAGMA user_version = 2;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  LoadView old(std::make_shared<const sessions::SessionReader>(v2));
  EXPECT_TRUE(old.row_note()->text().contains("no row histogram")) << old.row_note()->text().toStdString();
  EXPECT_TRUE(old.rows().ids.empty());
}

// A table a live rebalance split row_wise after step 2: the histogram's shards are the plan at the
// run's end (rows 0..499 on rank 0, 500..999 on rank 1, a boundary at 500), and the note says how
// it started (it read "table_wise on rank(s) 0" with no row ranges).
TEST(LoadView, RowHistogramOfATableSplitLiveShowsThePlanAtTheEnd) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_rows_live_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.set_metadata("workload_json", R"({"tables": [{"name": "t_a", "num_embeddings": 1000}]})");
    w.set_metadata("sharding_plan_json",
                   R"({"tables": [{"name": "t_a", "sharding_type": "table_wise", "shards": [)"
                   R"({"rank": 0, "row_offset": 0, "num_rows": 1000}]}]})");
    sessions::PlanChangeRecord a, b;
    a.step = b.step = 3;
    a.table_name = b.table_name = "t_a";
    a.from_type = b.from_type = "table_wise";
    a.to_type = b.to_type = "row_wise";
    a.shard_index = 0, a.from_rank = 0, a.to_rank = 0, a.row_offset = 0, a.num_rows = 500;
    b.shard_index = 1, b.from_rank = 0, b.to_rank = 1, b.row_offset = 500, b.num_rows = 500, b.bytes = 32000;
    sessions::RebalanceRecord rec;
    rec.step = 2;
    rec.moves = 1;
    w.add_rebalances({rec}, {a, b});
    w.add_id_histogram({{0, 0, 0, 0, 4, 5}});
    w.close("complete");
  }
  sessions::SessionReader r(path.string());
  const RowHistogram h = row_histogram(r, 0);
  EXPECT_EQ(h.sharding_type, "row_wise");
  ASSERT_EQ(h.shards.size(), 2u);
  EXPECT_EQ(h.shards[1].rank, 1);
  EXPECT_EQ(h.shards[1].row_offset, 500);
  EXPECT_EQ(h.boundaries(), (std::vector<int64_t>{500}));
  EXPECT_EQ(h.plan_note, "from step 3 (a live rebalance); table_wise on rank(s) 0 before");
}

TEST(LoadData, AggregatesPerShardPerStepAndImbalance) {
  // the aggregation itself: sessions/analysis/load_imbalance_test.cpp
  const std::string path = test_support::load_session();
  LoadView view(std::make_shared<const sessions::SessionReader>(path));
  view.resize(900, 600);
  view.set_metric(sessions::LoadMetric::unique_ids);
  ASSERT_TRUE(wait_for_analyses(&view));  // aggregated off the GUI thread
  EXPECT_DOUBLE_EQ(view.data().at_shard(0, 0), 5);
}

// The load view's "input per feature" table counts the session's workload input again: a Criteo
// file (figures checked against the generator's records, not the reader), and says why there is
// nothing for a session without workload, an LM run, or a file that is gone.
TEST(LoadView, InputPerFeatureCountsTheRunsCriteoFile) {
  engine::criteo_test::Scratch dir("ui_input");
  test_support::CriteoFixtureOptions o;
  o.lines = 3 * 2 * 50;  // 3 steps x 2 ranks x 50 samples
  o.alpha = 1.1;
  o.distinct = 500;
  o.empty_share = 0.2;
  const auto records = test_support::write_criteo_fixture(dir / "day.tsv", o);
  const engine::WorkloadSpec spec = engine::criteo_test::criteo_spec({dir / "day.tsv"}, 2, 50, 300);
  auto session = [&](const std::string& name, const std::string& workload) {
    const std::string path = dir / name;
    sessions::SessionWriter w(path);
    w.set_metadata("world_size", "2");
    if (!workload.empty()) w.set_metadata("workload_json", workload);
    w.close("complete");
    return path;
  };
  const std::string good = session("good.db", engine::to_json(spec).dump());
  LoadView view(std::make_shared<const sessions::SessionReader>(good));
  view.resize(1200, 1000);
  ASSERT_TRUE(wait_for_analyses(view.input_job()));
  const InputStatsModel& m = *view.input_model();
  ASSERT_EQ(m.rowCount(), 26) << view.input_note()->text().toStdString();
  EXPECT_TRUE(view.input_note()->text().contains("criteo_tsv")) << view.input_note()->text().toStdString();
  EXPECT_TRUE(view.input_note()->text().contains("the 6 batches of the 3 measured steps, 300 samples")) << view.input_note()->text().toStdString();
  for (int f = 0; f < 26; ++f) {
    const int64_t n = spec.tables[static_cast<size_t>(f)].num_embeddings;  // criteo_kaggle: table f serves feature f
    std::map<int64_t, int64_t> rows;
    int64_t present = 0;
    for (const auto& r : records)
      if (const auto& c = r.cat[static_cast<size_t>(f)]) ++rows[static_cast<int64_t>(*c % static_cast<uint64_t>(n))], ++present;
    std::vector<int64_t> counts;
    for (const auto& [row, k] : rows) counts.push_back(k);
    std::sort(counts.rbegin(), counts.rend());
    const int64_t hot = (n + 99) / 100;  // ceil(1% of the rows)
    int64_t top = 0;
    for (size_t i = 0; i < counts.size() && static_cast<int64_t>(i) < hot; ++i) top += counts[i];
    auto cell = [&](int column) { return m.data(m.index(f, column), Qt::UserRole); };
    EXPECT_EQ(m.data(m.index(f, InputStatsModel::Feature)).toString().toStdString(), spec.features[static_cast<size_t>(f)].name);
    EXPECT_EQ(cell(InputStatsModel::Rows).toLongLong(), n);
    EXPECT_NEAR(cell(InputStatsModel::IdsPerBag).toDouble(), static_cast<double>(present) / 300.0, 1e-12) << f;
    EXPECT_EQ(cell(InputStatsModel::Max).toLongLong(), present > 0 ? 1 : 0);
    EXPECT_EQ(cell(InputStatsModel::Distinct).toLongLong(), static_cast<int64_t>(rows.size())) << f;
    EXPECT_NEAR(cell(InputStatsModel::Top1).toDouble(), present ? static_cast<double>(top) / static_cast<double>(present) : 0.0, 1e-12) << f;
    EXPECT_EQ(cell(InputStatsModel::OutOfRange).toLongLong(), 0);
  }
  EXPECT_EQ(m.data(m.index(0, InputStatsModel::Top1)).toString().right(1), "%");
  // clicking a feature's row shows its table's rows
  const QRect cell = view.input_table()->visualRect(m.index(5, 0));
  view.show();
  QTest::mouseClick(view.input_table()->viewport(), Qt::LeftButton, {}, cell.center());
  EXPECT_EQ(view.rows().table, spec.tables[5].name);
  view.hide();

  // the file is gone: the view names it instead of figures
  std::filesystem::remove(dir / "day.tsv");
  LoadView gone(std::make_shared<const sessions::SessionReader>(good));
  ASSERT_TRUE(wait_for_analyses(gone.input_job()));
  EXPECT_EQ(gone.input_model()->rowCount(), 0);
  EXPECT_TRUE(gone.input_note()->text().contains("can no longer be read")) << gone.input_note()->text().toStdString();
  EXPECT_TRUE(gone.input_note()->text().contains("day.tsv")) << gone.input_note()->text().toStdString();
  EXPECT_TRUE(analysis_errors(&gone).isEmpty());  // information, not a failure of the report
  // an imported trace has no workload; an LM run counts tokens, not bags
  LoadView imported(std::make_shared<const sessions::SessionReader>(session("imported.db", "")));
  ASSERT_TRUE(wait_for_analyses(imported.input_job()));
  EXPECT_TRUE(imported.input_note()->text().contains("no workload")) << imported.input_note()->text().toStdString();
  LoadView lm(std::make_shared<const sessions::SessionReader>(session("lm.db", R"({"model": "lm_embedding"})")));
  ASSERT_TRUE(wait_for_analyses(lm.input_job()));
  EXPECT_TRUE(lm.input_note()->text().contains("lm_embedding run")) << lm.input_note()->text().toStdString();
}
