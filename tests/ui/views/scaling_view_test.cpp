// The scaling study page: a study the engine ran (tiny on the round-numbers profile), written
// as `embedscope scaling --json` writes it, opened by File > Open's path, plotted point by point.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>
#include <QTableWidget>
#include <qcustomplot.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/workload/presets.h"
#include "shell/main_window.h"
#include "views/scaling_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
std::string write_study(const std::string& name, const nlohmann::json& j) {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".json");
  std::ofstream(path) << j.dump(2);
  return path.string();
}
}  // namespace

TEST(ScalingView, PlotsEveryPointThatRanAndNamesTheOnesThatDidNot) {
  engine::WorkloadSpec spec = engine::load_preset("tiny");
  spec.steps = 2;
  engine::ScalingStudyOptions o;
  o.hardware = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";
  o.gpus = {1, 2, 4, 16};  // 16: more than the profile's cluster
  o.shardings = {engine::ShardingType::table_wise, engine::ShardingType::row_wise};
  const auto points = engine::run_scaling_study(spec, o);
  const engine::ScalingStudy study{spec.name, "round_numbers", 2, spec.batch_size, spec.steps, points};
  const std::string path = write_study("es_scaling", engine::to_json(study));
  ASSERT_TRUE(is_scaling_study_file(QString::fromStdString(path)));
  EXPECT_FALSE(is_scaling_study_file(QString(EMBEDSCOPE_TEST_DATA) + "/traces/raw_quotes.json"));  // a Kineto trace

  MainWindow w;
  ASSERT_EQ(w.open_path(QString::fromStdString(path), true), QString());
  auto* view = qobject_cast<ScalingView*>(w.tabs()->currentWidget());
  ASSERT_NE(view, nullptr);
  EXPECT_TRUE(w.tabs()->tabText(w.tabs()->currentIndex()).contains("simulated"));
  EXPECT_TRUE(view->caption()->text().contains("SIMULATED"));
  ASSERT_EQ(view->study().points.size(), 8u);
  for (int m = 0; m < 4; ++m) {
    QCustomPlot* plot = view->plot(m);
    ASSERT_EQ(plot->graphCount(), 2);  // table_wise, row_wise
    for (int t = 0; t < 2; ++t) {
      const auto* data = plot->graph(t)->data().data();
      ASSERT_EQ(data->size(), 3) << m;  // 1, 2, 4 GPUs; 16 did not fit the profile
      for (int k = 0; k < 3; ++k) {
        const engine::ScalingPoint& p = points[static_cast<size_t>(4 * t + k)];
        EXPECT_EQ(data->at(k)->key, p.gpus);
        const double want = m == 0   ? p.samples_per_s
                            : m == 1 ? 100 * p.scaling_efficiency
                            : m == 2 ? 100 * p.embedding_comm_share
                                     : static_cast<double>(p.memory_bytes_per_gpu) / 1024.0;  // KiB, below
        EXPECT_DOUBLE_EQ(data->at(k)->value, want) << m << " " << t << " " << k;
      }
    }
  }
  EXPECT_EQ(view->plot(1)->graph(0)->data()->at(0)->value, 100.0);  // the first size is the reference
  // tiny's shards take tens of KiB a GPU: the memory plot reads in KiB, not 1e-5 GiB
  for (const auto& p : points)
    if (p.error.empty()) {
      EXPECT_TRUE(p.memory_bytes_per_gpu >= 1024 && p.memory_bytes_per_gpu < 1024 * 1024) << p.memory_bytes_per_gpu;
    }
  EXPECT_EQ(view->plot(3)->yAxis->label(), "KiB");
  QTableWidget* table = view->table();
  ASSERT_EQ(table->rowCount(), 8);
  EXPECT_EQ(table->item(3, 1)->text(), "16");
  EXPECT_TRUE(table->item(3, ScalingView::kNoteColumn)->text().contains("16")) << table->item(3, ScalingView::kNoteColumn)->text().toStdString();
  // the whole refusal, on one line (tester33 D13: cut at its first line, before the ranks)
  EXPECT_EQ(table->item(3, ScalingView::kNoteColumn)->text(), QString::fromStdString(points[3].error).replace('\n', ' ').simplified());
  // the legends sit under the axes, not over the points
  for (int m = 0; m < 4; ++m) EXPECT_EQ(view->plot(m)->legend->layout(), view->plot(m)->plotLayout()) << m;
  EXPECT_EQ(table->item(3, 3), nullptr);  // no figures for a point that did not run
  // the note says how the planner placed the tables; the JSON carries it through
  ASSERT_EQ(view->study().points[1].placement, points[1].placement);
  ASSERT_FALSE(points[1].placement.empty());
  EXPECT_EQ(table->item(1, ScalingView::kNoteColumn)->text(), points[1].placement == "greedy" ? "placed by bytes" : "placed by time");
  EXPECT_EQ(table->item(1, 6)->text(),
            QString::number(100 * points[1].scaling_efficiency, 'f', 1) + " %");
  std::filesystem::remove(path);
}

TEST(ScalingView, ABadStudyFileNamesTheKey) {
  nlohmann::json j = {{"batch_size_per_gpu", 8}, {"gpus_per_node", 2}, {"hardware", "h"}, {"steps", 1},
                      {"workload", "w"},
                      {"points", {{{"sharding", "table_wise"}, {"gpus", 2}, {"nodes", 1}, {"step_time_ns", "fast"}}}}};
  const std::string path = write_study("es_scaling_bad", j);
  ASSERT_TRUE(is_scaling_study_file(QString::fromStdString(path)));
  MainWindow w;
  const QString error = w.open_path(QString::fromStdString(path), true);
  EXPECT_TRUE(error.contains("/points/0/step_time_ns: must be an integer")) << error.toStdString();
  j["points"][0] = {{"sharding", "diagonal"}, {"gpus", 2}, {"nodes", 1}, {"error", "x"}};
  std::ofstream(path) << j.dump();
  EXPECT_TRUE(w.open_path(QString::fromStdString(path), true).contains("/points/0/sharding"));
  std::filesystem::remove(path);
}

// The caption names the baseline every efficiency is relative to, as `embedscope scaling` prints it:
// table_wise 1 GPU 100 samples/s, column_wise refused at 1 GPU and 180 samples/s at 2 GPUs, so the
// baseline is table_wise at 1 GPU, 100 per GPU (column_wise at 2 GPUs reads 90 %).
TEST(ScalingView, TheCaptionNamesTheEfficiencyBaseline) {
  using T = engine::ShardingType;
  auto point = [](T type, int gpus, double samples_per_s, const std::string& error) {
    engine::ScalingPoint p;
    p.sharding = type;
    p.gpus = gpus;
    p.nodes = 1;
    p.samples_per_s = samples_per_s;
    p.error = error;
    p.memory_bytes_per_gpu = error.empty() ? 1536 * 1024 : 0;
    return p;
  };
  const engine::ScalingStudy study{"w", "p", 2, 8, 2,
                                   {point(T::table_wise, 1, 100, ""), point(T::column_wise, 1, 0, "refused"),
                                    point(T::column_wise, 2, 180, "")}};
  ScalingView view(study);
  // memory: 1.5 MiB at most reads in MiB
  EXPECT_EQ(view.plot(3)->yAxis->label(), "MiB");
  EXPECT_DOUBLE_EQ(view.plot(3)->graph(0)->data()->at(0)->value, 1.5);
  const QString caption = view.caption()->text();
  EXPECT_TRUE(caption.contains("the best at the smallest size any type ran: table_wise at 1 GPU, 100 samples/s per GPU"))
      << caption.toStdString();
  const engine::ScalingStudy none{"w", "p", 2, 8, 2, {point(T::table_wise, 1, 0, "refused")}};
  EXPECT_TRUE(ScalingView(none).caption()->text().contains("no point ran, so no baseline"));
}
