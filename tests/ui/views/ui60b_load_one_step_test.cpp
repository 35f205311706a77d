// The Load page of a session with one measured step (or one rank): QCPColorMap draws a cell half
// the distance to its neighbour wide, so a per rank x step heatmap of one column drew its colour
// scale and axes but no cell, and the imbalance chart's one value (a line needs two) drew nothing.
// The session here is the tester's 26-table DLRM in small: 4 ranks, one measured step, ranks 0-2
// look up 1024 ids and rank 3 10240, so the imbalance (max / mean) is 10240 / ((3 x 1024 + 10240) / 4)
// = 10240 / 3328 = 3.0769 (what `embedscope run` printed as "ids looked up max/mean 3.08").
#include <gtest/gtest.h>
#include <unistd.h>

#include <QColor>
#include <QImage>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <qcustomplot.h>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "views/load_view.h"

namespace {

namespace fs = std::filesystem;
using embedscope::sessions::SessionReader;
using embedscope::sessions::SessionWriter;
using embedscope::ui::LoadView;

// A tiny-preset session of `ranks` ranks and `measured` measured steps; in each step rank r looks
// up ids(r) ids of table 3.
template <class Ids>
std::string ui60b_session(const std::string& name, int ranks, int measured, Ids ids) {
  const fs::path path = fs::temp_directory_path() / ("es_ui60b_" + name + "_" + std::to_string(getpid()) + ".db");
  fs::remove(path);
  SessionWriter w(path.string());
  w.set_metadata("world_size", std::to_string(ranks));
  w.set_metadata(embedscope::sessions::meta::kWorkloadJson, embedscope::engine::preset_json("tiny"));
  for (int s = 0; s < measured; ++s)
    for (int r = 0; r < ranks; ++r) {
      w.add_step({s, r, 1'000'000 * (s + 1), 1'000'000 * (s + 2), 0.6, 0, 0});
      w.add_load({s, r, 3, 0, ids(r), 5, 0, 0, 100});
    }
  w.close("complete", "");
  return path.string();
}

// The plot as drawn (saved as NAME.png into $EMBEDSCOPE_UI60B_PNG_DIR when set, to look at).
QImage ui60b_grab(QCustomPlot* plot, const std::string& name) {
  plot->replot();
  const QImage image = plot->grab().toImage();
  if (const char* dir = std::getenv("EMBEDSCOPE_UI60B_PNG_DIR")) image.save(QString("%1/%2.png").arg(dir, name.c_str()));
  return image;
}

// The colour drawn at plot coordinates (key, value) of `plot`'s first plottable's axes.
QColor ui60b_at(QCustomPlot* plot, const QImage& image, double key, double value) {
  QCPAbstractPlottable* p = plot->plottable(0);
  const int x = static_cast<int>(p->keyAxis()->coordToPixel(key)), y = static_cast<int>(p->valueAxis()->coordToPixel(value));
  return image.pixelColor(x, y);
}

bool ui60b_reddish(const QColor& c) { return c.red() > 180 && c.green() < 90 && c.blue() < 90; }
bool ui60b_white(const QColor& c) { return c.red() > 240 && c.green() > 240 && c.blue() > 240; }

}  // namespace

TEST(Ui60bLoadOneStep, OneMeasuredStepDrawsItsColumnAndItsImbalancePoint) {
  const std::string path = ui60b_session("one", 4, 1, [](int r) { return r == 3 ? 10240 : 1024; });
  LoadView view(std::make_shared<const SessionReader>(path));
  view.resize(1280, 1100);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  view.show();
  ASSERT_EQ(view.data().steps, (std::vector<int64_t>{0}));
  // the value the user reads: 3.0769 at step 0
  ASSERT_EQ(view.data().imbalance.size(), 1u);
  EXPECT_NEAR(view.data().imbalance[0], 10240.0 / 3328.0, 1e-9);
  // the heatmap: rank 3's cell is the scale's top (red), ranks 0-2 a tenth of it (dark), none white
  const QImage map = ui60b_grab(view.step_map(), "one_step_map");
  EXPECT_TRUE(ui60b_reddish(ui60b_at(view.step_map(), map, 0, 3))) << ui60b_at(view.step_map(), map, 0, 3).name().toStdString();
  for (int r = 0; r < 3; ++r) {
    const QColor c = ui60b_at(view.step_map(), map, 0, r);
    EXPECT_FALSE(ui60b_white(c)) << "rank " << r << " " << c.name().toStdString();
    EXPECT_FALSE(ui60b_reddish(c)) << "rank " << r << " " << c.name().toStdString();
  }
  // the cell fills the column's width: drawn also a third of a step either side of its centre
  EXPECT_TRUE(ui60b_reddish(ui60b_at(view.step_map(), map, -0.4, 3)));
  EXPECT_TRUE(ui60b_reddish(ui60b_at(view.step_map(), map, 0.4, 3)));
  // the imbalance chart: its one point is drawn (the graph's red) at (0, 3.0769), the step centred
  auto* graph = view.imbalance_plot()->graph(0);
  ASSERT_EQ(graph->data()->size(), 1);
  EXPECT_NEAR(graph->data()->begin()->value, 3.0769, 1e-4);
  EXPECT_DOUBLE_EQ(view.imbalance_plot()->xAxis->range().lower, -0.5);
  EXPECT_DOUBLE_EQ(view.imbalance_plot()->xAxis->range().upper, 0.5);
  const QImage chart = ui60b_grab(view.imbalance_plot(), "one_step_imbalance");
  EXPECT_TRUE(ui60b_reddish(ui60b_at(view.imbalance_plot(), chart, 0, 10240.0 / 3328.0)))
      << ui60b_at(view.imbalance_plot(), chart, 0, 10240.0 / 3328.0).name().toStdString();
  view.hide();
  fs::remove(path);
}

TEST(Ui60bLoadOneStep, OneRankDrawsItsRowOfCells) {
  // one rank, two steps: the rank x step heatmap is one row of two cells, both the maximum (20 ids)
  const std::string path = ui60b_session("onerank", 1, 2, [](int) { return 20; });
  LoadView view(std::make_shared<const SessionReader>(path));
  view.resize(1280, 1100);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  view.show();
  const QImage map = ui60b_grab(view.step_map(), "one_rank_map");
  for (double step : {0.0, 1.0})
    for (double at : {-0.4, 0.0, 0.4})
      EXPECT_TRUE(ui60b_reddish(ui60b_at(view.step_map(), map, step, at)))
          << step << " " << at << " " << ui60b_at(view.step_map(), map, step, at).name().toStdString();
  view.hide();
  fs::remove(path);
}
