// tester42 F19: a 1,024-rank session's report pages stay within 4,800 px and draw binned heatmaps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QImage>
#include <QLabel>
#include <QVBoxLayout>
#include <QWidget>

#include <filesystem>
#include <string>

#include <qcustomplot.h>

#include "core/heat_bins.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "shell/report_layout.h"
#include "ui/support/ui_fixtures.h"
#include "views/load_view.h"

using namespace embedscope;
using namespace embedscope::ui;

TEST(Ui42HeatBins, BinsRanksAndColumnsByTheLargestValue) {
  // 5 ranks x 3 columns into at most 2 rows and 2 columns: 3 ranks a row, 2 columns a cell
  const std::vector<std::string> cols = {"a", "b", "c"};
  const HeatGrid g = bin_heat_grid(5, cols, [](int r, int c) { return 10.0 * r + c; }, "shards", 2, 2);
  EXPECT_EQ(g.rows, 2);
  EXPECT_EQ(g.cols, 2);
  EXPECT_EQ(g.ranks_per_row, 3);
  EXPECT_EQ(g.columns_per_cell, 2);
  EXPECT_DOUBLE_EQ(g.at(0, 0), 21);  // ranks 0-2, columns a-b: rank 2, b
  EXPECT_DOUBLE_EQ(g.at(0, 1), 22);
  EXPECT_DOUBLE_EQ(g.at(1, 0), 41);  // ranks 3-4
  EXPECT_DOUBLE_EQ(g.at(1, 1), 42);
  EXPECT_EQ(g.names, (std::vector<std::string>{"a .. b", "c"}));
  EXPECT_EQ(g.note, "ranks 0-4 in 2 rows of 3, 3 shards in 2 columns of 2 (each cell the largest it stands for)");
  const HeatGrid small = bin_heat_grid(4, cols, [](int r, int c) { return r + c; }, "shards");
  EXPECT_EQ(small.rows, 4);
  EXPECT_EQ(small.note, "");
  EXPECT_EQ(bin_heat_grid(1024, {}, [](int, int) { return 0.0; }, "steps").rows, 64);
}

TEST(Ui42HeatBins, RankRanges) {
  EXPECT_EQ(rank_ranges({0, 1, 2, 5, 7, 8}), "0-2, 5, 7-8");
  EXPECT_EQ(rank_ranges({3, 1, 2, 2}), "1-3");
  EXPECT_EQ(rank_ranges({0, 2, 4, 6}, 2), "0, 2, ... (4 ranks)");
  EXPECT_EQ(rank_ranges({}), "");
}

TEST(Ui42ReportWidth, LabelsWrapAndImagesAreCapped) {
  QWidget page;
  auto* layout = new QVBoxLayout(&page);
  QString ranks;
  for (int r = 0; r < 1024; ++r) ranks += QString("%1, ").arg(r);
  auto* wide = new QLabel("on rank(s) " + ranks, &page);
  auto* narrow = new QLabel("rank 0", &page);
  layout->addWidget(wide);
  layout->addWidget(narrow);
  EXPECT_GT(page.minimumSizeHint().width(), kReportMaxWidth);
  EXPECT_EQ(wrap_wide_labels(&page), 1);
  EXPECT_TRUE(wide->wordWrap());
  EXPECT_FALSE(narrow->wordWrap());
  layout->invalidate();
  EXPECT_LE(page.minimumSizeHint().width(), kReportMaxWidth);
  QImage big(6000, 100, QImage::Format_ARGB32);
  big.fill(Qt::white);
  const QImage capped = capped_width(big);
  EXPECT_EQ(capped.width(), kReportMaxWidth);
  EXPECT_GT(capped.height(), 100);  // the strip that says so
  EXPECT_EQ(capped_width(QImage(1600, 10, QImage::Format_ARGB32)).width(), 1600);
}

// 1,024 ranks, one row_wise table of 1,024 shards: the rank x shard map draws 64 x 256 cells and
// says what it binned (before: 1,024 x 1,024 cells, rank ticks 800/1000 and nothing else).
TEST(Ui42LoadView, ThousandRanksAreBinnedAndSaidSo) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui42_big_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "1024");
    for (int r = 0; r < 1024; ++r) w.add_load({0, r, 0, r, r == 700 ? 5000 : 10, 5, 80, 256, 1000});
    w.close("complete");
  }
  LoadView view(fixtures::open_reader(path.string()));
  view.resize(1600, 900);
  ASSERT_TRUE(wait_for_analyses(&view));
  QCustomPlot* map = view.shard_map();
  QCPColorMap* cells = nullptr;
  for (int i = 0; i < map->plottableCount(); ++i)
    if (auto* m = qobject_cast<QCPColorMap*>(map->plottable(i))) cells = m;
  ASSERT_NE(cells, nullptr);
  EXPECT_EQ(cells->data()->valueSize(), 64);
  EXPECT_EQ(cells->data()->keySize(), 256);
  EXPECT_DOUBLE_EQ(cells->data()->cell(700 / 4, 700 / 16), 5000);  // the hot shard of rank 700 shows in its bin
  QString titles;
  for (auto* e : map->plotLayout()->elements(true))
    if (auto* t = qobject_cast<QCPTextElement*>(e)) titles += t->text().replace('\n', ' ');  // wrapped to the plot
  EXPECT_TRUE(titles.contains("ranks 0-1023 in 64 rows of 16, 1024 shards in 256 columns of 4")) << titles.toStdString();
  EXPECT_LE(view.minimumSizeHint().width(), kReportMaxWidth);
}

// The binned map of 1,024 ranks is at most 800 px tall (64 rows at 48 px were 3,222 px); a
// 4-rank map keeps its 342 px.
TEST(Ui42LoadView, BinnedHeatmapHeightIsBounded) {
  EXPECT_EQ(LoadView::binned_heatmap_max_height(1024), LoadView::kMaxBinnedHeatmapPx);
  EXPECT_EQ(LoadView::binned_heatmap_max_height(4), LoadView::heatmap_max_height(4));
  EXPECT_EQ(LoadView::binned_heatmap_max_height(4), 342);
}
