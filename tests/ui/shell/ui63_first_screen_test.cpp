// The workbench for a first-time user (tester63a F1, F3):
//   - with no tab open the window shows a start page (open, new workload, compare, every built-in
//     scenario, the recent files), whose buttons open what they name; closing the last tab brings
//     it back; `--help` lists every page and the screenshot form without a session;
//   - without a display, `embedscope-ui FILE` writes no report into a folder that is not the
//     user's: a snapshot in a mode-555 folder -> beside its imported session in the cache folder,
//     named after it (not FILE.json-report); a session in a mode-555 folder -> the current folder;
//     each time saying where.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QApplication>
#include <QCommandLinkButton>
#include <QFileInfo>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QStackedWidget>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "embedscope/engine/workload/scenario.h"
#include "shell/main_window.h"
#include "shell/start_page.h"
#include "support/cli_run.h"
#include "ui/support/ui_fixtures.h"

namespace {
namespace fs = std::filesystem;

std::string ui63_slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// the entries of `dir`, by name
std::set<std::string> ui63_entries(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}
}  // namespace

TEST(Ui63StartPage, ShownWithoutTabsAndItsButtonsOpenWhatTheyName) {
  embedscope::ui::MainWindow w;
  w.resize(1280, 800);
  w.show();
  QApplication::processEvents();
  auto* start = w.start_page();
  ASSERT_NE(start, nullptr);
  EXPECT_TRUE(start->isVisible());
  EXPECT_FALSE(w.tabs()->isVisible());
  for (const char* name : {"start_open", "start_open_folder", "start_new_workload", "start_compare"}) {
    auto* b = start->findChild<QCommandLinkButton*>(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_TRUE(b->isVisible()) << name;
  }
  // every built-in scenario, by its title
  const auto scenarios = embedscope::engine::builtin_scenarios();
  ASSERT_EQ(start->scenario_ids().size(), static_cast<qsizetype>(scenarios.size()));
  for (const auto& sc : scenarios) {
    auto* b = start->findChild<QLabel*>(QString::fromStdString("start_scenario_" + sc.id));
    ASSERT_NE(b, nullptr) << sc.id;
    EXPECT_TRUE(b->text().contains(">" + QString::fromStdString(sc.title).toHtmlEscaped() + "</a>")) << b->text().toStdString();
    EXPECT_TRUE(b->isVisible()) << sc.id;
  }
  // at a laptop size nothing widens the page past the window (long scenario titles wrap)
  w.resize(1000, 650);
  QApplication::processEvents();
  auto* scroll = start->findChild<QScrollArea*>();
  ASSERT_NE(scroll, nullptr);
  EXPECT_EQ(scroll->horizontalScrollBar()->maximum(), 0);
  // a scenario's link opens its tab; the page gives way to the tabs, and comes back with none
  auto* scenario = start->findChild<QLabel*>("start_scenario_row_wise_vs_table_wise");
  ASSERT_NE(scenario, nullptr);
  emit scenario->linkActivated("row_wise_vs_table_wise");
  QApplication::processEvents();
  ASSERT_EQ(w.tabs()->count(), 1);
  EXPECT_TRUE(w.tabs()->tabText(0).startsWith("scenario: ")) << w.tabs()->tabText(0).toStdString();
  EXPECT_TRUE(w.tabs()->isVisible());
  EXPECT_FALSE(start->isVisible());
  w.close_current_tab();
  QApplication::processEvents();
  EXPECT_EQ(w.tabs()->count(), 0);
  EXPECT_TRUE(start->isVisible());
  // New workload opens a designer
  start->findChild<QCommandLinkButton*>("start_new_workload")->click();
  QApplication::processEvents();
  ASSERT_EQ(w.tabs()->count(), 1);
  EXPECT_TRUE(w.tabs()->tabText(0).startsWith("Workload: ")) << w.tabs()->tabText(0).toStdString();
  w.close_current_tab();
  // a session opened goes to the page's recent files; its button opens it again
  const std::string session = embedscope::ui::fixtures::fixture_session();
  ASSERT_EQ(w.open_session(QString::fromStdString(session), true), QString());
  w.close_current_tab();
  QApplication::processEvents();
  QLabel* recent = nullptr;
  for (auto* b : start->findChildren<QLabel*>("start_recent"))
    if (b->toolTip() == QFileInfo(QString::fromStdString(session)).absoluteFilePath() && b->isVisible()) recent = b;
  ASSERT_NE(recent, nullptr);
  // the link is the path, percent-encoded
  const QString href = recent->text().section("href=\"", 1).section('"', 0, 0);
  emit recent->linkActivated(href);
  QApplication::processEvents();
  ASSERT_EQ(w.tabs()->count(), 1);
  EXPECT_EQ(w.tabs()->tabToolTip(0), QFileInfo(QString::fromStdString(session)).absoluteFilePath());
}

TEST(Ui63StartPage, HelpListsEveryPageAndTheScreenshotWithoutASession) {
  const auto dir = embedscope::test_support::fresh_scratch("ui63_help");
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_UI, "--help", dir);
  ASSERT_EQ(r.code, 0);
  for (const char* s : {"Timeline, Summary, Load, Memory", "Figures,", "Timelines, Memory", "Trade-offs",
                        "[SESSION.db...] --screenshot FILE.png", "no session: the start", "teaching scenarios"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(Ui63HeadlessReport, NothingIsWrittenIntoAReadOnlyDataFolder) {
  const auto dir = embedscope::test_support::fresh_scratch("ui63_readonly");
  const fs::path data = dir / "data", work = dir / "work", home = dir / "home";
  fs::create_directories(data);
  fs::create_directories(work);
  fs::create_directories(home);
  fs::copy_file(fs::path(EMBEDSCOPE_TEST_DATA) / "memory_snapshots" / "training_p4.pickle", data / "training_p4.pickle");
  fs::copy_file(embedscope::ui::fixtures::fixture_session(), data / "run.db");
  ASSERT_EQ(::chmod(data.c_str(), 0555), 0);  // a shared data set (root writes there unless the mode is heeded)
  const auto before = ui63_entries(data);
  auto ui = [&](const std::string& input) {
    const std::string cmd = "cd '" + work.string() + "' && env -u XDG_CACHE_HOME HOME='" + home.string() +
                            "' QT_QPA_PLATFORM=offscreen timeout 120 '" + std::string(EMBEDSCOPE_UI) + "' '" + input +
                            "' >out.txt 2>err.txt";
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  // a snapshot: imported into the cache folder; its report beside that session, named after it
  ASSERT_EQ(ui((data / "training_p4.pickle").string()), 0) << ui63_slurp(work / "err.txt");
  const std::string said = ui63_slurp(work / "out.txt");
  EXPECT_EQ(ui63_entries(data), before) << said;
  // in the cache folder (~/.cache/Embedscope/Embedscope/imports)
  fs::path report;
  for (const auto& e : fs::recursive_directory_iterator(home))
    if (e.path().filename() == "training_p4-report") report = e.path();
  ASSERT_FALSE(report.empty()) << said << ui63_slurp(work / "err.txt");
  EXPECT_TRUE(fs::is_regular_file(report / "index.html"));
  EXPECT_TRUE(fs::is_regular_file(report.parent_path() / "training_p4.db"));  // beside its session
  EXPECT_EQ(report.parent_path().filename().string(), "imports");
  EXPECT_NE(said.find("the report of " + (data / "training_p4.pickle").string() + " is in " + report.string() +
                      "/index.html"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("beside the imported session: " + data.string() + " is not writable"), std::string::npos) << said;
  // a session: its report in the current folder
  ASSERT_EQ(ui((data / "run.db").string()), 0) << ui63_slurp(work / "err.txt");
  const std::string said2 = ui63_slurp(work / "out.txt");
  EXPECT_EQ(ui63_entries(data), before) << said2;
  EXPECT_TRUE(fs::is_regular_file(work / "run-report" / "index.html")) << said2;
  EXPECT_NE(said2.find("is in run-report/index.html (open it in a browser); in the current folder: " + data.string() +
                       " is not writable"),
            std::string::npos)
      << said2;
  ::chmod(data.c_str(), 0755);
}
