// misc53 (tester53 F9): a workload file the engine refuses ("bogus": 1 beside a valid 1-table
// workload) was kept as written, so the designer's "Memory per device" read 1 MiB (the box's
// minimum) where the same file without the bad key reads 8 GiB, and the ranks column was empty.
// The designer now fills the defaults the valid file gets (from the workload without the refused
// keys) and shows that workload's planned ranks; fixing the error and saving keeps the defaults.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QSpinBox>
#include <QString>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/spec.h"
#include "models/workload_model.h"
#include "views/workload_designer.h"

namespace {
namespace fs = std::filesystem;
using embedscope::ui::WorkloadDesigner;
using embedscope::ui::WorkloadModel;

// the tester's file: 1 table of 10 x 4, batch 4, 2 steps, 2 cpu devices, no memory_bytes
nlohmann::json misc53_unk() {
  return nlohmann::json::parse(R"({"name":"x",
    "tables": [{"name":"t","num_embeddings":10,"embedding_dim":4,"feature_names":["f"]}],
    "batch_size": 4, "steps": 2, "devices": {"count": 2, "backend":"cpu"}})");
}

fs::path misc53_write(const std::string& stem, const nlohmann::json& j) {
  const fs::path p = fs::temp_directory_path() / ("es_misc53_" + stem + "_" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << j.dump(1);
  return p;
}

int misc53_memory_box(WorkloadDesigner& d) {
  auto* box = d.findChild<QSpinBox*>("/devices/memory_bytes");
  EXPECT_NE(box, nullptr);
  return box ? box->value() : -1;
}
}  // namespace

TEST(Misc53DesignerDefaults, AFileWithAnUnknownKeyGetsTheDefaultsOfTheValidFile) {
  const fs::path good_path = misc53_write("good", misc53_unk());
  nlohmann::json bad = misc53_unk();
  bad["bogus"] = 1;
  const fs::path bad_path = misc53_write("bad", bad);

  WorkloadDesigner good("tiny");
  ASSERT_EQ(good.load_file(QString::fromStdString(good_path.string()), true), QString());
  ASSERT_EQ(good.model()->error(), QString()) << good.model()->error().toStdString();
  WorkloadDesigner d("tiny");
  ASSERT_EQ(d.load_file(QString::fromStdString(bad_path.string()), true), QString());
  fs::remove(good_path);
  fs::remove(bad_path);
  EXPECT_EQ(d.model()->error(), "/bogus: unknown key");

  // 8 GiB = 8192 MiB, as the valid file shows (before: 1, the box's minimum, and no key)
  EXPECT_EQ(d.model()->value("/devices/memory_bytes"), nlohmann::json(int64_t{8} << 30));
  EXPECT_EQ(misc53_memory_box(d), 8192);
  EXPECT_EQ(misc53_memory_box(good), 8192);
  // every default the valid file is given, and nothing else: the two documents differ by the bad key
  nlohmann::json without = d.model()->workload();
  EXPECT_EQ(without["bogus"], 1);
  without.erase("bogus");
  EXPECT_EQ(without, good.model()->workload()) << nlohmann::json::diff(good.model()->workload(), without).dump();
  EXPECT_EQ(without["tables"][0]["pooling"], "sum");  // a table entry's defaults too

  // the planner's ranks (table_wise on 2 ranks: rank 0), in grey as for the valid file (before: empty)
  const QModelIndex ranks = d.model()->index(0, WorkloadModel::Ranks);
  EXPECT_EQ(ranks.data().toString(), "auto: 0");
  EXPECT_EQ(ranks.data().toString(), good.model()->index(0, WorkloadModel::Ranks).data().toString());

  // fixing the error keeps them, and Save writes them
  d.model()->set_value("/bogus", nullptr);
  EXPECT_EQ(d.model()->error(), QString()) << d.model()->error().toStdString();
  EXPECT_EQ(misc53_memory_box(d), 8192);
  const fs::path saved = fs::temp_directory_path() / ("es_misc53_saved_" + std::to_string(::getpid()) + ".json");
  ASSERT_EQ(d.save(QString::fromStdString(saved.string())), QString());
  std::ifstream in(saved);
  const nlohmann::json back = nlohmann::json::parse(in);
  fs::remove(saved);
  EXPECT_EQ(back["devices"]["memory_bytes"], int64_t{8} << 30);
  EXPECT_EQ(embedscope::engine::parse_workload(back, "saved.json").devices.memory_bytes, int64_t{8} << 30);
}

TEST(Misc53DesignerDefaults, AFileValueTheEngineRefusesIsKeptAsWrittenBesideTheDefaults) {
  // a bad value inside /devices: shown as written with its error; the keys the file leaves out
  // (memory_bytes) get their defaults all the same
  nlohmann::json bad = misc53_unk();
  bad["devices"]["backend"] = "gpu";
  const fs::path path = misc53_write("backend", bad);
  WorkloadModel m;
  m.load_file(path.string());
  fs::remove(path);
  EXPECT_TRUE(m.error().startsWith("/devices/backend: ")) << m.error().toStdString();
  EXPECT_EQ(m.value("/devices/backend"), "gpu");
  EXPECT_EQ(m.value("/devices/count"), 2);
  EXPECT_EQ(m.value("/devices/memory_bytes"), nlohmann::json(int64_t{8} << 30));

  // a table missing a required key: no workload without the refused keys, so none is guessed
  nlohmann::json broken = misc53_unk();
  broken["tables"][0].erase("embedding_dim");
  const fs::path path2 = misc53_write("broken", broken);
  WorkloadModel m2;
  m2.load_file(path2.string());
  fs::remove(path2);
  EXPECT_EQ(m2.error(), "/tables/0/embedding_dim: required");
  EXPECT_TRUE(m2.value("/devices/memory_bytes").is_null());
  EXPECT_EQ(m2.index(0, WorkloadModel::Ranks).data().toString(), QString());
}
