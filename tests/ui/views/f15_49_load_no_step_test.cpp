// tester49 F15: the Load page of a session with no measured step (a run cancelled in its warm-up)
// drew empty heatmaps with 0..1 colour scales, an empty imbalance and per-rank chart, a "hottest
// bucket rows 0..0 (0.0 % of the ids)" of 0 ids, and the input statistics of the planned steps'
// batches, which were never trained on. It says "no measured step" everywhere now. A session with
// measured steps but no id histogram (a run SIGKILLed by an Embedscope before session 49) says
// that, and a table without ids gets no hottest bucket.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QImage>
#include <QLabel>
#include <QString>
#include <QTableView>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <qcustomplot.h>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "models/input_stats_model.h"
#include "views/load_view.h"

namespace {

namespace fs = std::filesystem;
using embedscope::sessions::SessionReader;
using embedscope::sessions::SessionWriter;
using embedscope::ui::LoadView;

// The tiny preset's session of 2 ranks that ended `ended`: a warm-up step (-1) on both ranks with
// its load (ids 7 + 5), then `measured` measured steps (step rows and load: rank r looks up
// 10 * (r + 1) ids of table 3 a step), and the id histogram buckets `histogram`.
std::string f1549_session(const std::string& name, const std::string& ended, int measured,
                          const std::vector<embedscope::sessions::IdHistogramBucket>& histogram = {}) {
  const fs::path path = fs::temp_directory_path() / ("es_f1549_" + name + "_" + std::to_string(getpid()) + ".db");
  fs::remove(path);
  SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.set_metadata(embedscope::sessions::meta::kWorkloadJson, embedscope::engine::preset_json("tiny"));
  for (int r = 0; r < 2; ++r) {
    w.add_step({-1, r, 0, 1'000'000, 0.7, 0, 0});
    w.add_load({-1, r, 3, 0, 7 - 2 * r, 3, 0, 0, 100});
  }
  for (int s = 0; s < measured; ++s)
    for (int r = 0; r < 2; ++r) {
      w.add_step({s, r, 1'000'000 * (s + 1), 1'000'000 * (s + 2), 0.6, 0, 0});
      w.add_load({s, r, 3, 0, 10 * (r + 1), 5, 0, 0, 100});
    }
  if (!histogram.empty()) w.add_id_histogram(histogram);
  w.close(ended, ended == "complete" ? "" : "stopped by the test");
  return path.string();
}

// The QCPItemText texts of `plot`.
std::vector<std::string> f1549_texts(QCustomPlot* plot) {
  std::vector<std::string> out;
  for (int i = 0; i < plot->itemCount(); ++i)
    if (auto* t = dynamic_cast<QCPItemText*>(plot->item(i))) out.push_back(t->text().toStdString());
  return out;
}

// The view drawn into an image (saved as NAME.png into $EMBEDSCOPE_F1549_PNG_DIR when set, to look at).
QImage f1549_grab(LoadView& view, const std::string& name) {
  view.show();
  for (auto* p : {view.shard_map(), view.step_map(), view.imbalance_plot(), view.rank_plot(), view.row_plot()}) p->replot();
  const QImage image = view.grab().toImage();
  if (const char* dir = std::getenv("EMBEDSCOPE_F1549_PNG_DIR")) image.save(QString("%1/%2.png").arg(dir, name.c_str()));
  view.hide();
  return image;
}

}  // namespace

TEST(F1549LoadNoStep, CancelledInWarmupSaysNoMeasuredStepEverywhere) {
  const std::string path = f1549_session("warmup", "cancelled", 0);
  const SessionReader reader(path);
  EXPECT_TRUE(LoadView::no_measured_step(reader));
  LoadView view(std::make_shared<const SessionReader>(path));
  view.resize(1200, 1100);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  const std::string said = "no measured step (the run ended cancelled before its first measured step)";
  // each chart says it, with nothing plotted (was: 4 empty charts, two 0..1 colour scales)
  for (QCustomPlot* plot : {view.shard_map(), view.step_map(), view.imbalance_plot(), view.rank_plot()}) {
    EXPECT_EQ(plot->plottableCount(), 0);
    EXPECT_EQ(f1549_texts(plot), std::vector<std::string>{"no measured step: no load recorded"});
  }
  EXPECT_TRUE(view.data().steps.empty());
  // the row histogram: no hottest bucket of 0 ids
  const std::string rows = view.row_note()->text().toStdString();
  EXPECT_EQ(rows, said + ": no ids were recorded");
  EXPECT_EQ(view.row_plot()->plottableCount(), 0);
  EXPECT_EQ(f1549_texts(view.row_plot()), std::vector<std::string>{"no measured step: no ids recorded"});
  // no input statistics of the tiny preset's planned steps, which never ran
  const std::string input = view.input_note()->text().toStdString();
  EXPECT_EQ(input, "input per feature: none - " + said + ": no batch of the workload's input was trained on");
  EXPECT_EQ(view.input_model()->rowCount(), 0);
  EXPECT_FALSE(view.input_job()->busy());
  // the metric row says it too (its label is the one after the metric box)
  bool status_said = false;
  for (QLabel* l : view.findChildren<QLabel*>())
    status_said = status_said || l->text().toStdString() == said + ": no load was recorded";
  EXPECT_TRUE(status_said);
  const QImage image = f1549_grab(view, "no_measured_step");
  EXPECT_FALSE(image.isNull());
  // switching the table or the metric keeps saying it
  view.set_table(2);
  EXPECT_EQ(view.row_note()->text().toStdString(), said + ": no ids were recorded");
  view.set_metric(embedscope::sessions::LoadMetric::bytes_in);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  EXPECT_EQ(f1549_texts(view.shard_map()), std::vector<std::string>{"no measured step: no load recorded"});
  fs::remove(path);
}

TEST(F1549LoadNoStep, MeasuredStepsWithoutHistogramSayNoHistogram) {
  // a run killed after 3 measured steps by an Embedscope that wrote the histogram only at a normal end
  const std::string path = f1549_session("nohist", "crashed", 3);
  const SessionReader reader(path);
  EXPECT_FALSE(LoadView::no_measured_step(reader));
  LoadView view(std::make_shared<const SessionReader>(path));
  view.resize(1200, 1100);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  // the load is charted: steps 0..2, rank 0 30 ids, rank 1 60 ids of table t_c (the warm-up left out)
  EXPECT_EQ(view.data().steps, (std::vector<int64_t>{0, 1, 2}));
  ASSERT_EQ(view.data().per_rank.size(), 2u);
  EXPECT_DOUBLE_EQ(view.data().per_rank[0], 30);
  EXPECT_DOUBLE_EQ(view.data().per_rank[1], 60);
  EXPECT_EQ(view.shard_map()->plottableCount(), 1);  // the colour map
  EXPECT_EQ(view.rank_plot()->plottableCount(), 1);  // the bars
  // the row histogram says there is none, not "0 ids; hottest bucket rows 0..0"
  const std::string rows = view.row_note()->text().toStdString();
  EXPECT_NE(rows.find("1 rows; no id histogram in this session although it holds 3 measured step(s)"), std::string::npos) << rows;
  EXPECT_EQ(rows.find("hottest"), std::string::npos) << rows;
  EXPECT_EQ(f1549_texts(view.row_plot()), std::vector<std::string>{"no id histogram recorded"});
  // the input is counted (the session has measured steps)
  const std::string input = view.input_note()->text().toStdString();
  EXPECT_NE(input.find("synthetic input (seed"), std::string::npos) << input;
  EXPECT_GT(view.input_model()->rowCount(), 0);
  EXPECT_FALSE(f1549_grab(view, "no_histogram").isNull());
  fs::remove(path);
}

TEST(F1549LoadNoStep, TableWithoutIdsGetsNoHottestBucket) {
  // t_c (1000 rows, 256 buckets) has ids in bucket 5 on rank 1; t_a (10 rows) none
  const std::string path = f1549_session("emptytable", "complete", 2, {{1, 3, 5, 20, 24, 12}});
  LoadView view(std::make_shared<const SessionReader>(path));
  view.resize(1200, 1100);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  view.set_table(3);
  EXPECT_NE(view.row_note()->text().toStdString().find("1000 rows in 256 buckets, 12 ids; hottest bucket rows 20..23 (100.0 % of the ids)"),
            std::string::npos)
      << view.row_note()->text().toStdString();
  view.set_table(1);
  const std::string rows = view.row_note()->text().toStdString();
  EXPECT_NE(rows.find("10 rows in 10 buckets, 0 ids recorded for this table"), std::string::npos) << rows;
  EXPECT_EQ(rows.find("hottest"), std::string::npos) << rows;
  fs::remove(path);
}
