// Teaching scenarios: loading good files, naming the problem in bad ones.
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
#include "embedscope/engine/workload/presets.h"
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

TEST(Scenario, LoadsGoodFilesAndNamesTheProblemInBadOnes) {
  const nlohmann::json good = nlohmann::json::parse(R"({
    "id": "demo", "title": "Demo", "explanation": ["one", "two"],
    "runs": [{"label": "tw", "preset": "tiny", "overrides": {"steps": 3, "sharding": {"default": "row_wise"}}},
             {"label": "inline", "workload": {"tables": [{"name": "t", "num_embeddings": 10, "embedding_dim": 4,
              "feature_names": ["f"]}], "batch_size": 2, "steps": 2, "devices": {"count": 2, "memory_bytes": 16777216},
              "dense": null}}]})");
  const Scenario s = parse_scenario(good, "demo.json");
  EXPECT_EQ(s.paragraphs, (std::vector<std::string>{"one", "two"}));
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.runs[0].spec.steps, 3);
  EXPECT_EQ(s.runs[0].spec.sharding.default_type, engine::ShardingType::row_wise);
  EXPECT_EQ(s.runs[0].spec.tables.size(), engine::load_preset("tiny").tables.size());  // the rest from the preset
  EXPECT_EQ(s.runs[1].spec.devices.count, 2);
  EXPECT_EQ(session_file_name(s, 1), "demo-1.db");

  auto error_of = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    try {
      parse_scenario(j, "demo.json");
    } catch (const engine::SpecError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of([](auto& j) { j["runs"][0]["overrides"]["devices"] = {{"count", 0}}; }).rfind(
                "demo.json: /runs/0/overrides/devices/count: ", 0), 0u);
  EXPECT_EQ(error_of([](auto& j) { j["runs"][1]["workload"]["batch_size"] = -1; }).rfind(
                "demo.json: /runs/1/workload/batch_size: ", 0), 0u);
  EXPECT_EQ(error_of([](auto& j) { j["runs"][0]["overrides"]["colour"] = 1; }).rfind("demo.json: /runs/0/overrides/colour", 0),
            0u);
  EXPECT_EQ(error_of([](auto& j) { j["runs"].erase(1); }), "demo.json: /runs: must be an array of at least two runs");
  EXPECT_EQ(error_of([](auto& j) { j["runs"][1]["label"] = "tw"; }), "demo.json: /runs/1/label: \"tw\" is used by another run");
  EXPECT_EQ(error_of([](auto& j) { j["id"] = "Bad Id"; }).rfind("demo.json: /id: must be lower-case", 0), 0u);
  EXPECT_EQ(error_of([](auto& j) { j["speed"] = 1; }), "demo.json: /speed: unknown key");
  EXPECT_EQ(error_of([](auto& j) { j["runs"][0]["preset"] = "nope"; }).rfind("demo.json: /runs/0/preset: ", 0), 0u);
  EXPECT_EQ(error_of([](auto& j) { j["runs"][1].erase("workload"); }),
            "demo.json: /runs/1: needs either \"preset\" (with optional \"overrides\") or \"workload\"");

  const auto path = std::filesystem::temp_directory_path() / ("es_scenario_" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << "{\"id\": \"x\",\n \"title\": }";
  try {
    load_scenario_file(path.string());
    ADD_FAILURE() << "a syntax error was accepted";
  } catch (const engine::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ": line 2"), std::string::npos) << e.what();
  }
  for (const Scenario& b : builtin_scenarios()) EXPECT_GE(b.runs.size(), 2u) << b.id;  // every shipped one loads
  EXPECT_FALSE(builtin_scenarios().empty());
}
