// The report of a session of many ranks stays bounded (at most kReportMaxRows rows a pane) and
// says on the image which rows it shows (the 1,024-rank report drew 1600 x 30000
// px images of one row per rank, cut at 30000 px without a word).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QImage>
#include <QHeaderView>
#include <QScrollBar>
#include <QStandardItemModel>
#include <QTableView>
#include <QVBoxLayout>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "shell/report_layout.h"
#include "timeline/timeline_widget.h"

using namespace embedscope;
using namespace embedscope::ui;

TEST(ReportBounds, ManyRanksGiveBoundedImagesThatSayWhichRowsTheyShow) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_report_bounds_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto path = dir / "many.db";
  constexpr int kRanks = 300;  // 600 timeline rows of 22 px: 13,200 px uncut
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", std::to_string(kRanks));
    w.set_metadata("samples_per_step", "8");
    w.set_metadata(sessions::meta::kSimulated, "1");
    for (int r = 0; r < kRanks; ++r) {
      w.add_lane({r, 0, "compute", "thread"});
      w.add_lane({r, 1, "comm", "thread"});
      w.add_step({0, r, 0, 1'000'000, 0.0, 0, 0});
      w.add_ops({{r, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", 0, 0, 400'000, 0, 0},
                 {r, sessions::Lane::comm, sessions::OpCategory::comm, "all_to_all", 0, 400'000, 900'000, 64, 1}});
    }
    w.close("complete");
  }
  const std::string cmd = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI) + " --report " + path.string() + " -o " +
                          (dir / "report").string() + " 2>" + (dir / "err.txt").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream err(dir / "err.txt");
  const std::string said((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  int heights[4] = {0, 0, 0, 0};
  for (int i = 0; const char* f : {"timeline.png", "summary.png", "load.png", "memory.png"}) {
    QImage image((dir / "report" / f).c_str());
    ASSERT_FALSE(image.isNull()) << f;
    EXPECT_LE(image.height(), 8000) << f;  // each pane at most kReportMaxRows rows
    heights[i++] = image.height();
  }
  EXPECT_LT(heights[3], 2000);  // the memory page is not held as tall as the Summary's held tables
  EXPECT_LE(heights[0], 4000);  // the timeline: 128 of its 600 rows at 22 px, the note, the window's bars
  EXPECT_GE(heights[0], TimelineWidget::kAxis + 128 * TimelineWidget::kRowHeight);  // all 128 on the image
  // the timeline's first rows are on the image, and the note says how many of the 600
  EXPECT_NE(said.find("note: Timeline: Rows left out of this image (a pane of the report shows at most 64 rows, the sharding plan 1,024, "
                      "the timeline 128)"), std::string::npos) << said;
  EXPECT_NE(said.find("timeline: rows 1-128 of 600 shown"), std::string::npos) << said;
  EXPECT_NE(said.find("table rank, compute, comm: rows 1-64 of 300 shown"), std::string::npos) << said;
  QImage timeline((dir / "report" / "timeline.png").c_str());
  EXPECT_EQ(timeline.pixelColor(2, 2), QColor(0xff, 0xf4, 0xc2));  // the note's strip on top
  std::filesystem::remove_all(dir);
}

TEST(ReportBounds, CutNoteNamesEachPane) {
  EXPECT_EQ(cut_note({}), "");
  const QString note = cut_note({{"timeline", 270, 2048, 5900, 45000}, {"pane", 0, 0, 700, 1200}});
  EXPECT_EQ(note.toStdString(),
            "Rows left out of this image (a pane of the report shows at most 64 rows, the sharding plan 1,024, the timeline "
            "128): timeline: rows 1-270 of 2,048 shown; pane: the first 700 of 1,200 px shown. Every row: open the session in "
            "embedscope-ui (its pane scrolls), `embedscope stats --top 0` (the critical path, collectives and ranks) or "
            "`embedscope export SESSION --format csv` (ranks.csv, load.csv: every rank's and table's figures).");
  QImage image(100, 50, QImage::Format_ARGB32_Premultiplied);
  image.fill(Qt::white);
  EXPECT_EQ(with_cut_note(image, "").height(), 50);
  const QImage noted = with_cut_note(image, note);
  EXPECT_GT(noted.height(), 50);
  EXPECT_EQ(noted.pixelColor(99, noted.height() - 1), QColor(Qt::white));  // the view below, uncovered
}

TEST(ReportBounds, ALongTableIsHeldToItsFirstRowsAndNamed) {
  QWidget window;
  auto* layout = new QVBoxLayout(&window);
  auto* table = new QTableView(&window);
  auto* model = new QStandardItemModel(300, 2, table);  // 300 rows: more than kReportMaxRows
  model->setHorizontalHeaderLabels({"rank", "compute"});
  for (int r = 0; r < 300; ++r) model->setItem(r, 0, new QStandardItem(QString("row %1").arg(r)));
  table->setModel(model);
  auto* small = new QTableView(&window);
  auto* few = new QStandardItemModel(40, 1, small);  // 40 rows: grown to show them all
  small->setModel(few);
  layout->addWidget(table, 1);
  layout->addWidget(small, 1);
  window.resize(800, 300);
  window.show();
  QApplication::processEvents();
  EXPECT_EQ(show_every_row(&window, &window), 0);  // nothing left but the held table's rows
  EXPECT_EQ(small->verticalScrollBar()->maximum(), 0);
  const int row = table->verticalHeader()->sectionSize(0);
  EXPECT_EQ(table->viewport()->height(), kReportMaxRows * row);
  const auto panes = cut_panes(&window);
  ASSERT_EQ(panes.size(), 1u);
  EXPECT_EQ(panes[0].name.toStdString(), "table rank, compute");
  EXPECT_EQ(panes[0].shown_rows, kReportMaxRows);
  EXPECT_EQ(panes[0].total_rows, 300);
  EXPECT_LT(window.height(), (kReportMaxRows + 40) * row + 400);  // not grown for the held rows
}
