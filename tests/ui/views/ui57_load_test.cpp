// The Load page counts the steps `stats` counts, its row histogram included: a pipelined run's
// drain steps are left out of its charts and of the histogram (the run records the histogram
// of the batches its counted steps looked up), and the captions say which steps; a step in which
// no rank had any of the metric is "no ids" (a grey band with a legend entry), not a balanced 1.
// Set UI57_SHOTS=DIR to write the pages as PNGs there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QLabel>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <qcustomplot.h>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "support/cli_run.h"
#include "views/load_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {

std::filesystem::path ui57_load_dir() {
  static const auto d = [] {
    auto p = std::filesystem::temp_directory_path() / ("es_ui57_load_" + std::to_string(getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

// `embedscope run --preset tiny --pipeline PIPELINE --steps 6` (tiny: no warm-up steps, bags of
// varying lengths), once per pipeline.
std::string ui57_tiny_run(const std::string& pipeline) {
  static std::map<std::string, std::string> made;
  if (auto it = made.find(pipeline); it != made.end()) return it->second;
  const std::string path = (ui57_load_dir() / ("tiny_" + pipeline + ".db")).string();
  const auto r = test_support::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --steps 6 --pipeline " + pipeline + " -o " + path,
                                       ui57_load_dir());
  EXPECT_EQ(r.code, 0) << r.err;
  return made[pipeline] = path;
}

void ui57_shot(QWidget* w, const std::string& name) {
  if (const char* dir = std::getenv("UI57_SHOTS")) w->grab().save(QString("%1/%2.png").arg(dir).arg(QString::fromStdString(name)));
}

// ids per table of the load counters of steps [0, counted), summed over ranks and shards: what
// `stats` counts
std::map<std::string, int64_t> ui57_counted_ids(const sessions::SessionReader& s, int64_t counted) {
  const auto tables = sessions::workload_tables(s);
  std::map<std::string, int64_t> out;
  for (const auto& c : s.load())
    if (c.step >= 0 && c.step < counted) out[tables.at(static_cast<size_t>(c.table)).name] += c.ids;
  return out;
}
}  // namespace

// semi_sync (2 drain steps) and sparse_dist (1): the charts hold steps 0..3 (0..4), the row
// histogram of every table holds exactly the ids those steps looked up (before: all 6 steps'
// batches), and the captions name the steps.
TEST(Ui57Load, TheRowHistogramCountsTheCountedSteps) {
  for (const auto& [pipeline, drain] : std::map<std::string, int64_t>{{"semi_sync", 2}, {"sparse_dist", 1}}) {
    SCOPED_TRACE(pipeline);
    const auto session = std::make_shared<const sessions::SessionReader>(ui57_tiny_run(pipeline));
    ASSERT_EQ(sessions::analyze_step_times(*session).drain_steps, drain);
    EXPECT_EQ(session->meta(sessions::meta::kIdHistogramCounts, ""), "counted_lookups");
    LoadView view(session);
    view.resize(1280, 1400);
    view.show();
    ASSERT_TRUE(wait_for_analyses(&view));
    QApplication::processEvents();
    const int64_t counted = 6 - drain;
    std::vector<int64_t> steps;
    for (int64_t s = 0; s < counted; ++s) steps.push_back(s);
    EXPECT_EQ(view.data().steps, steps);
    EXPECT_EQ(view.data().drain_first, counted);
    EXPECT_EQ(view.data().drain_steps, drain);
    const auto want = ui57_counted_ids(*session, counted);
    ASSERT_EQ(want.size(), 4u);
    // the charts' totals per table: the counted steps' (the per-rank bars are their sums)
    std::map<std::string, int64_t> charts;
    for (size_t c = 0; c < view.data().shards.size(); ++c)
      for (int r = 0; r < view.data().ranks; ++r)
        charts[view.data().shard_tables[c]] += static_cast<int64_t>(view.data().at_shard(r, c));
    EXPECT_EQ(charts, want);
    // the row histogram of each table: the same ids
    const auto tables = sessions::workload_tables(*session);
    for (int t = 0; t < static_cast<int>(tables.size()); ++t) {
      view.set_table(t);
      int64_t total = 0;
      for (int64_t n : view.rows().ids) total += n;
      EXPECT_EQ(total, want.at(tables[static_cast<size_t>(t)].name)) << tables[static_cast<size_t>(t)].name;
    }
    const QString drain_steps = drain == 1 ? "step 5" : "steps 4-5";
    EXPECT_TRUE(view.row_note()->text().startsWith(
        QString("ids looked up in the %1 counted steps 0-%2 (the drain %3 left out, as in the charts above and stats): ")
            .arg(counted)
            .arg(counted - 1)
            .arg(drain_steps)))
        << view.row_note()->text().toStdString();
    EXPECT_EQ(view.counted_steps_text(), QString("counted steps 0-%1; the drain %2 left out, as stats").arg(counted - 1).arg(drain_steps));
    auto* title = qobject_cast<QCPTextElement*>(view.shard_map()->plotLayout()->element(0, 0));
    ASSERT_NE(title, nullptr);
    EXPECT_TRUE(title->property("unwrapped").toString().contains(view.counted_steps_text()));
    ui57_shot(&view, "load_" + pipeline);
  }
  // the base pipeline: every measured step
  LoadView base(std::make_shared<const sessions::SessionReader>(ui57_tiny_run("base")));
  ASSERT_TRUE(wait_for_analyses(&base));
  EXPECT_EQ(base.data().steps.size(), 6u);
  EXPECT_EQ(base.data().drain_steps, 0);
  EXPECT_TRUE(base.row_note()->text().startsWith("ids of the 6 measured steps: ")) << base.row_note()->text().toStdString();
}

// A semi_sync session written before the histogram left the drain steps out (no
// id_histogram_counts): the caption says the histogram holds every measured step's batch, and
// which steps the charts count.
TEST(Ui57Load, AnOlderPipelinedSessionSaysItsHistogramHoldsEveryStep) {
  const std::string path = (ui57_load_dir() / "older.db").string();
  {
    sessions::SessionWriter w(path, true);
    w.set_metadata(sessions::meta::kWorldSize, "1");
    w.set_metadata(sessions::meta::kPipeline, "semi_sync");
    w.set_metadata(sessions::meta::kWorkloadJson,
                   R"({"name":"old","steps":4,"pipeline":"semi_sync","tables":[{"name":"t","num_embeddings":100}]})");
    w.add_lane({0, 0, "compute", "thread"});
    for (int s = 0; s < 4; ++s) {
      w.add_step({s, 0, 1000LL * s, 1000LL * s + 900, 0.5, 0, 0});
      w.add_load({s, 0, 0, 0, s < 3 ? 10 : 0, 5, 80, 256, 100});
    }
    w.add_id_histogram({{0, 0, 0, 0, 1, 40}});
    w.close("complete");
  }
  LoadView view(std::make_shared<const sessions::SessionReader>(path));
  ASSERT_TRUE(wait_for_analyses(&view));
  EXPECT_EQ(view.data().steps, (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(view.row_note()->text().startsWith(
      "ids of every measured step's batch, 4 (this session's histogram was written before the drain steps 2-3 were "
      "left out of it: the charts above and stats count 2 steps): "))
      << view.row_note()->text().toStdString();
}

// Step 1 of three: every rank's counters hold 0 ids. Its imbalance is no ratio (NaN, a gap in the
// line), drawn as a grey band named in a legend; steps 0 and 2 keep their max / mean.
TEST(Ui57Load, AStepWithoutIdsIsNotDrawnBalanced) {
  const std::string path = (ui57_load_dir() / "noids.db").string();
  {
    sessions::SessionWriter w(path, true);
    w.set_metadata(sessions::meta::kWorldSize, "2");
    w.set_metadata(sessions::meta::kWorkloadJson, R"({"name":"n","steps":3,"tables":[{"name":"t","num_embeddings":100}]})");
    for (int r = 0; r < 2; ++r) w.add_lane({r, 0, "compute", "thread"});
    const int64_t ids[3][2] = {{30, 10}, {0, 0}, {20, 20}};
    for (int s = 0; s < 3; ++s)
      for (int r = 0; r < 2; ++r) {
        w.add_step({s, r, 1000LL * s, 1000LL * s + 900, 0.5, 0, 0});
        w.add_load({s, r, 0, r, ids[s][r], 0, 0, 0, 100});
      }
    w.close("complete");
  }
  LoadView view(std::make_shared<const sessions::SessionReader>(path));
  view.resize(1280, 900);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  QApplication::processEvents();
  ASSERT_EQ(view.data().imbalance.size(), 3u);
  EXPECT_DOUBLE_EQ(view.data().imbalance[0], 1.5);  // 30 / 20
  EXPECT_TRUE(std::isnan(view.data().imbalance[1])) << view.data().imbalance[1];
  EXPECT_DOUBLE_EQ(view.data().imbalance[2], 1.0);
  EXPECT_EQ(view.no_metric_steps(), (std::vector<double>{1.0}));
  QCustomPlot* plot = view.imbalance_plot();
  EXPECT_TRUE(plot->legend->visible());
  QCPBars* band = nullptr;
  for (int i = 0; i < plot->plottableCount(); ++i)
    if (auto* b = qobject_cast<QCPBars*>(plot->plottable(i))) band = b;
  ASSERT_NE(band, nullptr);
  EXPECT_EQ(band->name(), "no ids looked up in the step (0 of 0: no ratio)");
  ASSERT_EQ(band->data()->size(), 1);
  EXPECT_EQ(band->data()->begin()->key, 1.0);
  ASSERT_EQ(plot->graphCount(), 1);
  EXPECT_TRUE(std::isnan((plot->graph(0)->data()->begin() + 1)->value));  // a gap, not 1
  ui57_shot(&view, "load_no_ids");
  // a metric every step has: no band, no legend
  view.set_metric(sessions::LoadMetric::lookup_time);
  ASSERT_TRUE(wait_for_analyses(&view));
  EXPECT_TRUE(view.no_metric_steps().empty());
  EXPECT_FALSE(plot->legend->visible());
}
