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
  for (auto* l : d.findChildren<QSpinBox*>())
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
