// tester44 F5: a sharding-plan tree of 128 ranks, each expanded with its 26 shards, is held to
// 64 drawn rows in all (before: 64 ranks with their shards, 1,728 rows, a 27,460 px image, whose
// note said "rows 1-26 of 128"), and its note counts drawn rows as the image shows them.
// tester44 F2: `embedscope-ui --report study.json -o DIR` (and `embedscope-ui study.json` without
// a display) writes the scaling page (it failed: "the current tab has no pages to report", with an
// empty folder left).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QApplication>
#include <QImage>
#include <QScrollArea>
#include <QScrollBar>
#include <QStandardItemModel>
#include <QTreeView>
#include <QVBoxLayout>

#include <cstdio>
#include <filesystem>
#include <string>

#include "shell/report_layout.h"

namespace {
namespace fs = std::filesystem;

TEST(Ui44ReportTree, AnExpandedTreeIsHeldTo64DrawnRowsAndTheNoteCountsThem) {
  using namespace embedscope::ui;
  QWidget window;
  auto* layout = new QVBoxLayout(&window);
  auto* tree = new QTreeView(&window);
  auto* model = new QStandardItemModel(0, 2, tree);
  model->setHorizontalHeaderLabels({"rank / table", "shards"});
  for (int r = 0; r < 128; ++r) {
    auto* rank = new QStandardItem(QString("rank %1").arg(r));
    for (int t = 0; t < 26; ++t) rank->appendRow(new QStandardItem(QString("t_cat_%1").arg(t)));
    model->appendRow({rank, new QStandardItem("26")});
  }
  tree->setModel(model);
  tree->expandAll();
  layout->addWidget(tree);
  window.resize(1600, 900);
  window.show();
  QApplication::processEvents();
  EXPECT_EQ(show_every_row(&window, &window), 0);
  const int row = tree->visualRect(model->index(1, 0)).top() - tree->visualRect(model->index(0, 0)).top();
  ASSERT_EQ(row, 27 * tree->visualRect(model->index(0, 0)).height());  // rank 1 is 27 rows below rank 0
  const int pitch = tree->visualRect(model->index(0, 0)).height();
  EXPECT_EQ(tree->viewport()->height(), kReportMaxRows * pitch);  // 64 rows, not 64 ranks
  EXPECT_LT(window.height(), 900 + kReportMaxRows * pitch);
  const auto panes = cut_panes(&window);
  ASSERT_EQ(panes.size(), 1u);
  EXPECT_EQ(panes[0].shown_rows, 64);
  EXPECT_EQ(panes[0].total_rows, 128 * 27);  // 3,456 drawn rows
  EXPECT_NE(cut_note(panes).indexOf("table rank / table, shards: rows 1-64 of 3,456 shown"), -1)
      << cut_note(panes).toStdString();
  release_held_panes(&window);
}

struct Ui44Run {
  int code = -1;
  std::string out;
};
Ui44Run ui44_run(const std::string& cmd) {
  Ui44Run r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(Ui44ScalingReport, AScalingStudyIsWrittenAsItsPage) {
  const fs::path dir = fs::temp_directory_path() / ("es_ui44_scaling_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path study = dir / "study.json";
  const auto made = ui44_run("'" + std::string(EMBEDSCOPE_CLI) + "' scaling --preset tiny --simulate h100_sxm --gpus 8,16 --steps 1 --json > '" +
                             study.string() + "'");
  ASSERT_EQ(made.code, 0) << made.out;
  const std::string ui = "QT_QPA_PLATFORM=offscreen '" + std::string(EMBEDSCOPE_UI) + "' ";
  auto r = ui44_run(ui + "--report '" + study.string() + "' -o '" + (dir / "rep").string() + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  // a study opens on its page: nothing is imported (it said "importing study.json into study.db")
  EXPECT_EQ(r.out.find("importing"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "study.db"));
  const QImage page(QString::fromStdString((dir / "rep" / "scaling.png").string()));
  ASSERT_FALSE(page.isNull()) << r.out;
  EXPECT_EQ(page.width(), 1600);
  EXPECT_GE(page.height(), 900);
  // 900 px and the table's 6 rows added (1,102 px here): the plots keep their size rather than
  // take four fifths of the growth that shows the table (1,400 px a plot for 24 rows before)
  EXPECT_LT(page.height(), 1300);
  EXPECT_TRUE(fs::exists(dir / "rep" / "index.html"));
  // without a display: study-report/ beside it, said on stdout
  r = ui44_run("cd '" + dir.string() + "' && " + ui + "study.json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("the report of study.json is in study-report/index.html"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("importing"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "study-report" / "scaling.png"));
  fs::remove_all(dir);
}

}  // namespace

// A page that is itself a scroll area (compare's Figures page) grows the report window until it
// has nothing left to scroll: its own overflow counts, not only its children's (tester61a F8:
// figures.png was cut at 900 px, its two charts without their axes). Hand: a 2,000 px content
// in a 1600 x 900 window needs at least 2,000 px.
TEST(Ui44Report, APageThatIsAScrollAreaIsShownWhole) {
  using namespace embedscope::ui;
  QWidget window;
  auto* layout = new QVBoxLayout(&window);
  auto* page = new QScrollArea(&window);
  page->setWidgetResizable(true);
  auto* content = new QWidget;
  content->setMinimumHeight(2000);
  page->setWidget(content);
  layout->addWidget(page);
  window.resize(1600, 900);
  window.show();
  QApplication::processEvents();
  ASSERT_GT(page->verticalScrollBar()->maximum(), 0);  // scrolls in the window
  EXPECT_EQ(show_every_row(&window, page), 0);
  EXPECT_EQ(page->verticalScrollBar()->maximum(), 0);
  EXPECT_GE(window.height(), 2000);
  EXPECT_TRUE(cut_panes(page).empty());
}
