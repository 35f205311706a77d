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
#include "charts/colors.h"
#include "views/compare_view.h"
#include "models/critical_path_model.h"
#include "views/memory_compare.h"
#include "core/scenario.h"
#include "views/scenario_view.h"
#include "core/load_data.h"
#include "views/load_view.h"
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

TEST(LoadData, AggregatesPerShardPerStepAndImbalance) {
  // the aggregation itself: sessions/analysis/load_imbalance_test.cpp
  const std::string path = test_support::load_session();
  LoadView view(std::make_shared<const sessions::SessionReader>(path));
  view.resize(900, 600);
  view.set_metric(sessions::LoadMetric::unique_ids);
  ASSERT_TRUE(wait_for_analyses(&view));  // aggregated off the GUI thread
  EXPECT_DOUBLE_EQ(view.data().at_shard(0, 0), 5);
}
