// fixi50: the Designer's "Dense precision" box (dense.precision: fp32 / tf32 / bf16 / fp16; had
// no control) - shown as the workload has it, an edit writes /dense/precision alone, the cuda
// backend's refusal is shown beside it, disabled without a dense part; and the Summary's hot-row
// line of a simulated session (hot_ids null) reads the replicas' load counters (retest49 R4).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QComboBox>
#include <QLabel>
#include <QString>
#include <QTabWidget>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/hot_row_replica.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "models/workload_model.h"
#include "shell/main_window.h"
#include "views/workload_designer.h"

namespace {
namespace fs = std::filesystem;
using embedscope::ui::WorkloadDesigner;

QComboBox* fixi50_dense_box(WorkloadDesigner& d) {
  auto* box = d.findChild<QComboBox*>("/dense/precision");
  EXPECT_NE(box, nullptr);
  return box;
}

fs::path fixi50_file(const std::string& stem) {
  return fs::temp_directory_path() / ("es_fixi50_" + stem + "_" + std::to_string(::getpid()));
}
}  // namespace

TEST(Fixi50DesignerDense, ShowsTheWorkloadsPrecisionAndAnEditWritesOnlyDensePrecision) {
  nlohmann::json wl = embedscope::engine::to_json(embedscope::engine::load_preset("tiny"));
  wl["dense"]["precision"] = "fp16";
  wl["qcomms"] = {{"forward_precision", "bf16"}, {"backward_precision", "fp16"}};
  const fs::path path = fixi50_file("dense.json");
  std::ofstream(path) << wl.dump(2);
  WorkloadDesigner d("tiny");
  ASSERT_EQ(d.load_file(QString::fromStdString(path.string()), true), QString());
  fs::remove(path);
  ASSERT_EQ(d.model()->error(), QString()) << d.model()->error().toStdString();
  QComboBox* box = fixi50_dense_box(d);
  ASSERT_NE(box, nullptr);
  EXPECT_TRUE(box->isEnabled());
  EXPECT_EQ(box->currentText(), "fp16");
  QStringList items;
  for (int i = 0; i < box->count(); ++i) items << box->itemText(i);
  EXPECT_EQ(items, (QStringList{"fp32", "tf32", "bf16", "fp16"}));

  const nlohmann::json before = d.model()->workload();
  box->setCurrentText("bf16");
  nlohmann::json after = d.model()->workload();
  EXPECT_EQ(after["dense"]["precision"], "bf16");
  EXPECT_EQ(d.model()->error(), QString()) << d.model()->error().toStdString();
  // nothing else moved: the rest of the dense part, the comm precisions, the tables
  after["dense"]["precision"] = "fp16";
  EXPECT_EQ(after, before) << nlohmann::json::diff(before, after).dump();
  // and Save writes it
  const fs::path saved = fixi50_file("saved.json");
  ASSERT_EQ(d.save(QString::fromStdString(saved.string())), QString());
  std::ifstream in(saved);
  const nlohmann::json back = nlohmann::json::parse(in);
  fs::remove(saved);
  EXPECT_EQ(back["dense"]["precision"], "bf16");
  // the written workload parses to the precision (engine::parse_workload)
  EXPECT_EQ(embedscope::engine::parse_workload(back, "saved.json").dense->precision,
            embedscope::engine::DensePrecision::bf16);
}

// The cuda backend runs its dense GEMMs in fp32 only (engine/workload/validate.cpp): its refusal
// shows beside the Dense precision box, and goes when the box is set back to fp32.
TEST(Fixi50DesignerDense, TheCudaBackendsRefusalIsShownBesideTheBox) {
  WorkloadDesigner d("tiny");
  QComboBox* box = fixi50_dense_box(d);
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(box->currentText(), "fp32");  // the preset has no precision: fp32
  box->setCurrentText("tf32");
  ASSERT_EQ(d.model()->error(), QString()) << d.model()->error().toStdString();  // cpu ranks emulate it
  d.model()->set_value("/devices/backend", "cuda");
  EXPECT_EQ(d.model()->error_pointer(), "/dense/precision") << d.model()->error().toStdString();
  const QString said = d.message_at("/dense/precision");
  EXPECT_TRUE(said.contains("tf32 is not supported on the cuda backend yet")) << said.toStdString();
  EXPECT_EQ(d.message_at("/devices/backend"), QString());
  box->setCurrentText("fp32");
  EXPECT_EQ(d.message_at("/dense/precision"), QString()) << d.model()->error().toStdString();
  EXPECT_EQ(d.model()->value("/dense/precision"), "fp32");
}

// A workload without a dense part has no precision to set: the box is disabled, and nothing
// writes a dense object.
TEST(Fixi50DesignerDense, NoDensePartDisablesTheBox) {
  nlohmann::json wl = embedscope::engine::to_json(embedscope::engine::load_preset("tiny"));
  wl["dense"] = nullptr;
  const fs::path path = fixi50_file("nodense.json");
  std::ofstream(path) << wl.dump(2);
  WorkloadDesigner d("tiny");
  ASSERT_EQ(d.load_file(QString::fromStdString(path.string()), true), QString());
  fs::remove(path);
  QComboBox* box = fixi50_dense_box(d);
  ASSERT_NE(box, nullptr);
  EXPECT_FALSE(box->isEnabled());
  EXPECT_TRUE(d.model()->value("/dense").is_null());
  d.load_preset("tiny", true);
  EXPECT_TRUE(box->isEnabled());
}

// retest49 R4 in the Summary: a simulated session's table_storage_json has hot_ids null; the line
// reads the replicas' load counters (shard -1) of the measured steps: 2 ranks x 4 steps x 6 ids =
// 48 ids, 12.0 a step (the warm-up step -1's 6 + 6 and shard 0's 24 ids are not hot ids).
TEST(Fixi50SummaryHotRows, ASimulatedSessionsHotIdsComeFromTheReplicaCounters) {
  namespace ss = embedscope::sessions;
  const fs::path path = fixi50_file("hot.db");
  fs::remove(path);
  {
    ss::SessionWriter w(path.string());
    w.set_metadata(ss::meta::kWorkloadName, "hot");
    w.set_metadata(ss::meta::kSimulated, "1");
    w.set_metadata(ss::meta::kTableStorageJson,
                   R"([{"table": "tw", "hot_rows": 0}, {"table": "hr", "hot_rows": 10, "hot_ids": null, "hot_all_reduce_bytes": 200}])");
    w.add_lane({0, 0, "compute", "thread"});
    w.add_lane({1, 1, "compute", "thread"});
    for (int32_t r = 0; r < 2; ++r)
      for (int64_t step = -1; step < 4; ++step) {
        if (step >= 0) w.add_step({step, r, step * 1000, step * 1000 + 900, 0.5, 0, 0});
        ss::LoadCounter hot;
        hot.step = step;
        hot.rank = r;
        hot.table = 1;
        hot.shard = ss::kHotRowReplicaShard;
        hot.ids = 6;
        w.add_load(hot);
        ss::LoadCounter cold = hot;
        cold.shard = r;
        cold.ids = 12;
        w.add_load(cold);
      }
    w.close("complete");
  }
  embedscope::ui::MainWindow win;
  ASSERT_EQ(win.open_session(QString::fromStdString(path.string()), true), QString());
  auto* views = qobject_cast<QTabWidget*>(win.tabs()->widget(0));
  ASSERT_NE(views, nullptr);
  views->setCurrentIndex(1);  // Summary
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(views->widget(1)));
  QString said;
  for (auto* label : views->widget(1)->findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_TRUE(said.contains("hot rows (replicated on every rank, trained data-parallel): hr 10 rows, 12.0 ids a step "
                            "kept off the input all-to-all, 200 B all-reduced a step"))
      << said.toStdString();
  fs::remove(path);
}
