// The workbench on a laptop's screen (tester60a F10): a scenario tab held the window at 1379x1042
// and a comparison at 1280x956 whatever size was asked (the Figures page's table, notes and charts,
// the Memory page's one-line key and check box, the Timelines page's one-line note), and a
// session's Timeline page at 1226 px wide (its view note in one line). At 1280x800 and 1366x768
// each tab now keeps the window at the size asked, its minimum inside it; a session's tab also at
// 1000x650. Set UI60B_SHOTS=DIR to write the windows as PNGs there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QImage>
#include <QScrollArea>
#include <QTabWidget>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "jobs/analysis_job.h"
#include "shell/main_window.h"
#include "shell/screenshot_options.h"
#include "support/cli_run.h"
#include "views/compare_view.h"
#include "views/scenario_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {

std::filesystem::path ui60b_dir() {
  static const auto d = [] {
    auto p = std::filesystem::temp_directory_path() / ("es_ui60b_sizes_" + std::to_string(getpid()));
    std::filesystem::create_directories(p / "sc");
    return p;
  }();
  return d;
}

// `embedscope run --preset tiny --steps 4 --warmup-steps 1 --sharding S -o DIR/NAME.db`, once a name.
std::string ui60b_run(const std::string& name, const std::string& sharding) {
  const std::string path = (ui60b_dir() / (name + ".db")).string();
  if (!std::filesystem::exists(path)) {
    const auto r = test_support::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --steps 4 --warmup-steps 1 --sharding " + sharding + " -o " + path,
                                         ui60b_dir());
    EXPECT_EQ(r.code, 0) << r.err;
  }
  return path;
}

void ui60b_settle(MainWindow& w) {
  for (int i = 0; i < 5; ++i) QCoreApplication::processEvents();
  wait_for_analyses(&w);
  for (int i = 0; i < 5; ++i) QCoreApplication::processEvents();
}

void ui60b_shot(QWidget* w, const std::string& name) {
  if (const char* dir = std::getenv("UI60B_SHOTS")) w->grab().save(QString("%1/%2.png").arg(dir, name.c_str()));
}

// Every page of the current tab's page widget shown once (a lazy page is built when shown), then `size`.
void ui60b_visit_pages(MainWindow& w, QTabWidget* pages) {
  for (int i = pages->count() - 1; i >= 0; --i) {
    pages->setCurrentIndex(i);
    ui60b_settle(w);
  }
}

// The window at `size` keeps it, and its minimum (every page's) fits inside it.
void ui60b_expect_fits(MainWindow& w, QSize size, const std::string& what) {
  w.resize(size);
  ui60b_settle(w);
  EXPECT_LE(w.minimumSizeHint().width(), size.width()) << what;
  EXPECT_LE(w.minimumSizeHint().height(), size.height()) << what;
  EXPECT_EQ(w.size(), size) << what;
  ui60b_shot(&w, what + "_" + std::to_string(size.width()) + "x" + std::to_string(size.height()));
}

}  // namespace

TEST(Ui60bLaptopSize, ACompareTabFits1280x800And1366x768) {
  MainWindow w;
  w.resize(1280, 800);
  w.show();
  ASSERT_EQ(w.open_compare({QString::fromStdString(ui60b_run("tw", "table_wise")),
                            QString::fromStdString(ui60b_run("rw", "row_wise"))},
                           true),
            QString());
  auto* view = qobject_cast<CompareView*>(w.tabs()->currentWidget());
  ASSERT_NE(view, nullptr);
  ui60b_visit_pages(w, view->pages());
  for (QSize size : {QSize(1280, 800), QSize(1366, 768)}) ui60b_expect_fits(w, size, "compare");
  // the Figures page scrolls inside its tab instead: its content is taller than the page there
  auto* figures = view->findChild<QScrollArea*>("compare_figures_scroll");
  ASSERT_NE(figures, nullptr);
  EXPECT_EQ(view->pages()->widget(0), figures);
}

TEST(Ui60bLaptopSize, AScenarioTabFits1280x800And1366x768) {
  // a scenario of two tiny runs (table-wise, row-wise) with their sessions in its folder
  const auto json = ui60b_dir() / "sc_tiny.json";
  std::ofstream(json) << R"({"id": "sc_tiny", "title": "tiny: table-wise vs row-wise", "explanation": ["Table-wise puts )"
                         R"(whole tables on a rank; row-wise splits every table over all ranks."], "align_step": 0, "runs": [)"
                         R"({"label": "table_wise", "preset": "tiny"}, {"label": "row_wise", "preset": "tiny"}]})";
  std::filesystem::copy_file(ui60b_run("tw", "table_wise"), ui60b_dir() / "sc" / "sc_tiny-0.db",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(ui60b_run("rw", "row_wise"), ui60b_dir() / "sc" / "sc_tiny-1.db",
                             std::filesystem::copy_options::overwrite_existing);
  MainWindow w;
  w.resize(1280, 800);
  w.show();
  ASSERT_EQ(w.open_scenario(QString::fromStdString(json.string()), QString::fromStdString((ui60b_dir() / "sc").string()), true),
            QString());
  auto* view = qobject_cast<ScenarioView*>(w.tabs()->currentWidget());
  ASSERT_NE(view, nullptr);
  ASSERT_NE(view->compare(), nullptr);  // the runs' sessions were found
  ui60b_visit_pages(w, view->compare()->pages());
  view->compare()->pages()->setCurrentIndex(1);  // the timelines, as the scenario opens
  for (QSize size : {QSize(1280, 800), QSize(1366, 768)}) ui60b_expect_fits(w, size, "scenario");
}

TEST(Ui60bLaptopSize, ASessionTabFits1000x650) {
  MainWindow w;
  w.resize(1280, 800);
  w.show();
  ASSERT_EQ(w.open_session(QString::fromStdString(ui60b_run("tw", "table_wise")), true), QString());
  auto* pages = qobject_cast<QTabWidget*>(w.tabs()->currentWidget());
  ASSERT_NE(pages, nullptr);
  ui60b_visit_pages(w, pages);  // ends on the Timeline page
  for (QSize size : {QSize(1280, 800), QSize(1366, 768), QSize(1000, 650)}) ui60b_expect_fits(w, size, "session");
}

// --screenshot's page and size (tester60a F2): the window was always 1280x800 on the tab's first page.
TEST(Ui60bLaptopSize, ScreenshotPageAndSize) {
  EXPECT_EQ(parse_window_size("1280x800"), QSize(1280, 800));
  EXPECT_EQ(parse_window_size("1366X768"), QSize(1366, 768));
  EXPECT_EQ(parse_window_size("1280"), std::nullopt);
  EXPECT_EQ(parse_window_size("1280x80"), std::nullopt);    // 80 px: under 200
  EXPECT_EQ(parse_window_size("20000x800"), std::nullopt);  // over 10000
  EXPECT_EQ(parse_window_size("-1x800"), std::nullopt);
  MainWindow w;
  ASSERT_EQ(w.open_session(QString::fromStdString(ui60b_run("tw", "table_wise")), true), QString());
  auto* pages = qobject_cast<QTabWidget*>(w.tabs()->currentWidget());
  ASSERT_NE(pages, nullptr);
  EXPECT_EQ(show_page(w, "load"), QString());
  EXPECT_EQ(pages->tabText(pages->currentIndex()), "Load");
  EXPECT_EQ(show_page(w, "Lod").toStdString(), "--page Lod: the tab has no such page (its pages: Timeline, Summary, Load, Memory)");
  EXPECT_EQ(pages->tabText(pages->currentIndex()), "Load");
  // the command line: the Memory page at 1000x650
  const std::string shot = (ui60b_dir() / "mem_1000x650.png").string(), db = ui60b_run("tw", "table_wise");
  auto r = test_support::run_cli(EMBEDSCOPE_UI, db + " --screenshot " + shot + " --page memory --size 1000x650", ui60b_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  const QImage image(QString::fromStdString(shot));
  EXPECT_EQ(image.size(), QSize(1000, 650));
  if (const char* dir = std::getenv("UI60B_SHOTS")) image.save(QString("%1/memory_page_1000x650.png").arg(dir));
  r = test_support::run_cli(EMBEDSCOPE_UI, db + " --screenshot " + shot + " --page Lod", ui60b_dir());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--page Lod: the tab has no such page (its pages: Timeline, Summary, Load, Memory)"), std::string::npos) << r.err;
  r = test_support::run_cli(EMBEDSCOPE_UI, db + " --screenshot " + shot + " --size 1280", ui60b_dir());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--size 1280: not a window size; give WIDTHxHEIGHT in px"), std::string::npos) << r.err;
  r = test_support::run_cli(EMBEDSCOPE_UI, "--report " + db + " -o " + (ui60b_dir() / "rep").string() + " --size 1280x800",
                            ui60b_dir());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--size goes with --screenshot FILE.png"), std::string::npos) << r.err;
}
