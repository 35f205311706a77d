// The workload designer.
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
#include "shell/main_window.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/planner/search.h"
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

TEST(WorkloadDesigner, ShowsTheMessageBesideTheFieldAndSavesJson) {
  WorkloadDesigner d("tiny");
  EXPECT_EQ(d.message_at("/tables"), QString());
  d.model()->setData(d.model()->index(0, WorkloadModel::EmbeddingDim), "0");
  EXPECT_EQ(d.message_at("/tables"), "/tables/0/embedding_dim: must be > 0, got 0");
  EXPECT_EQ(d.message_at("/devices/memory_bytes"), QString());
  EXPECT_FALSE(d.run().isEmpty());  // cannot run
  d.model()->setData(d.model()->index(0, WorkloadModel::EmbeddingDim), "4");
  EXPECT_EQ(d.message_at("/tables"), QString());
  // 1 MiB devices: smaller than one segment of the caching allocator (the planner's check)
  d.model()->set_value("/devices/memory_bytes", 1 << 20);
  EXPECT_TRUE(d.message_at("/devices/memory_bytes").startsWith("/devices/memory_bytes: 1.0 MiB is smaller than one"))
      << d.message_at("/devices/memory_bytes").toStdString();
  EXPECT_EQ(d.message_at("/tables"), QString());
  d.model()->set_value("/devices/memory_bytes", 64 << 20);
  EXPECT_EQ(d.message_at("/devices/memory_bytes"), QString());

  // pipeline, comm precision and an emulated network from the form
  for (auto* c : d.findChildren<QComboBox*>()) {
    if (c->findText("semi_sync") >= 0) c->setCurrentText("semi_sync");
    if (c->findText("bf16") >= 0) c->setCurrentText("bf16");
  }
  for (auto* b : d.findChildren<QDoubleSpinBox*>())
    if (b->suffix() == " MB/s") b->setValue(125);
  for (auto* l : d.findChildren<QDoubleSpinBox*>())  // in a node and across nodes (fixf49)
    if (l->suffix() == " us") l->setValue(50);
  EXPECT_EQ(d.model()->value("/pipeline"), "semi_sync");
  EXPECT_EQ(d.model()->value("/qcomms/backward_precision"), "bf16");
  EXPECT_EQ(d.model()->value("/network/inter_node/bandwidth_bytes_per_s"), 125'000'000);
  EXPECT_EQ(d.model()->value("/network/intra_node/latency_ns"), 50'000);
  EXPECT_EQ(d.model()->error(), QString());

  const auto path = scratch("workload.json");
  EXPECT_EQ(d.save(QString::fromStdString(path.string())), QString());
  const engine::WorkloadSpec saved = engine::load_workload_file(path.string());
  EXPECT_EQ(saved.name, "tiny");
  EXPECT_EQ(saved.tables.size(), 4u);
  EXPECT_EQ(saved.devices.memory_bytes, 64 << 20);
  EXPECT_EQ(saved.pipeline, engine::PipelineKind::semi_sync);
  EXPECT_EQ(saved.network.inter_node.bandwidth_bytes_per_s, 125'000'000);

  // a file that fails validation opens as written, its error shown; one that is not JSON is refused
  std::ofstream(scratch("bad.json")) << R"({"tables": [{"name": "t", "num_embeddings": 0, "embedding_dim": 4, "feature_names": ["f"]}], "batch_size": 4})";
  EXPECT_EQ(d.load_file(QString::fromStdString(scratch("bad.json").string()), true), QString());
  EXPECT_EQ(d.model()->error(), "/tables/0/num_embeddings: must be > 0, got 0");
  EXPECT_EQ(d.model()->error_index(), d.model()->index(0, WorkloadModel::NumEmbeddings));
  std::ofstream(scratch("not.json")) << "not json";
  const QString err = d.load_file(QString::fromStdString(scratch("not.json").string()), true);
  EXPECT_TRUE(err.contains("not.json")) << err.toStdString();
}

// Plan automatically: criteo_kaggle on 4 ranks, whose greedy plan (largest tables onto the fewest
// bytes) gives one rank 3.38x the mean lookups. The search's plan is written into every table's
// override, plan_sharding of the edited workload is the searched plan shard for shard, its
// lookups are within 1.3x of the mean, and the label compares it with the greedy plan.
TEST(WorkloadDesigner, PlanAutomaticallyWritesTheSearchedPlanIntoTheTables) {
  WorkloadDesigner d("criteo_kaggle");
  ASSERT_TRUE(d.model()->error().isEmpty()) << d.model()->error().toStdString();
  const engine::WorkloadSpec before = *d.model()->spec();
  ASSERT_TRUE(before.sharding.per_table.empty());
  const auto max_over_mean = [](const std::vector<double>& v) {
    double sum = 0, most = 0;
    for (double x : v) sum += x, most = std::max(most, x);
    return most / (sum / static_cast<double>(v.size()));
  };
  EXPECT_GT(max_over_mean(engine::expected_lookups_per_rank(before, engine::plan_sharding(before))), 3.0);
  QSignalSpy done(d.auto_plan_job(), &AnalysisJob::finished);
  ASSERT_EQ(d.plan_automatically().toStdString(), "");
  ASSERT_TRUE(done.wait(120000)) << d.auto_plan_text().toStdString();
  ASSERT_TRUE(d.model()->error().isEmpty()) << d.model()->error().toStdString();
  const engine::WorkloadSpec& after = *d.model()->spec();
  EXPECT_EQ(after.sharding.per_table.size(), before.tables.size());
  const engine::ShardingPlan want = engine::plan_search(before, engine::planning_profile(before)).plan;
  const engine::ShardingPlan got = engine::plan_sharding(after);
  ASSERT_EQ(got.tables.size(), want.tables.size());
  for (size_t t = 0; t < got.tables.size(); ++t) {
    EXPECT_EQ(got.tables[t].type, want.tables[t].type) << before.tables[t].name;
    ASSERT_EQ(got.tables[t].shards.size(), want.tables[t].shards.size()) << before.tables[t].name;
    for (size_t k = 0; k < got.tables[t].shards.size(); ++k) {
      EXPECT_EQ(got.tables[t].shards[k].rank, want.tables[t].shards[k].rank) << before.tables[t].name;
      EXPECT_EQ(got.tables[t].shards[k].col_offset, want.tables[t].shards[k].col_offset) << before.tables[t].name;
      EXPECT_EQ(got.tables[t].shards[k].row_offset, want.tables[t].shards[k].row_offset) << before.tables[t].name;
    }
  }
  EXPECT_LE(max_over_mean(engine::expected_lookups_per_rank(after, got)), 1.3);
  const std::string text = d.auto_plan_text().toStdString();
  EXPECT_NE(text.find("Planned automatically on h100_sxm"), std::string::npos) << text;
  EXPECT_NE(text.find("for the greedy plan; lookups max/mean"), std::string::npos) << text;
  EXPECT_EQ(text.find("placed again"), std::string::npos) << text;  // every table pinned as searched
  // an invalid workload is not searched
  d.model()->set_value("/batch_size", 0);
  EXPECT_EQ(d.plan_automatically().left(30).toStdString(), "the workload cannot be planned");
}
