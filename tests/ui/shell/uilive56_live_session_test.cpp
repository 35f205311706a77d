// tester56 F3/F3b: a session opened while its run writes it shows one snapshot on every page ("as
// of step N"), a banner and the tab title say when the run has written more steps or ended, and
// File > Reload (F5) re-reads it in place. F15: an incomplete workload JSON opens in the designer;
// a failed import's tab says "failed" and closes. F7, F14: File > Open's filter, Ctrl+W, F5.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QAction>
#include <QApplication>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "embedscope/sessions/store/snapshot_copy.h"
#include "support/live_session_wait.h"
#include "jobs/analysis_job.h"
#include "models/workload_model.h"
#include "shell/main_window.h"
#include "shell/session_tab.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"
#include "views/summary_view.h"
#include "views/workload_designer.h"

namespace {
namespace fs = std::filesystem;
using embedscope::sessions::SessionReader;
using embedscope::sessions::SessionWriter;
using embedscope::ui::MainWindow;
using embedscope::ui::SessionTab;

fs::path uilive56_dir() {
  static const fs::path d = [] {
    const auto p = fs::temp_directory_path() / ("es_uilive56_" + std::to_string(getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// Steps [from, to) of one rank: step s spans [1000 s, 1000 s + 800) us with one lookup op inside.
void uilive56_add_steps(SessionWriter& w, int from, int to) {
  using embedscope::sessions::Lane;
  using embedscope::sessions::OpCategory;
  for (int s = from; s < to; ++s) {
    const int64_t t0 = 1'000'000LL * s;
    w.add_ops({{0, Lane::compute, OpCategory::lookup, "lookup", s, t0 + 100'000, t0 + 700'000, 0, 0}});
    w.add_step({s, 0, t0, t0 + 800'000, 0.5, 64, 64});
  }
}

// Waits (up to 30 s, processing events) until `done`; the writer commits within its interval.
bool uilive56_wait(const std::function<bool()>& done) {
  return embedscope::test_support::wait_until(done, 30, [] { QApplication::processEvents(); });
}

size_t uilive56_committed_steps(const std::string& path) { return embedscope::test_support::committed_steps(path); }

// Every label text under `root`, joined (what a page says).
QString uilive56_texts(QWidget* root) {
  QString all;
  for (auto* l : root->findChildren<QLabel*>()) all += l->text() + "\n";
  return all;
}

QString uilive56_write(const std::string& name, const std::string& text) {
  const fs::path p = uilive56_dir() / name;
  std::ofstream(p) << text;
  return QString::fromStdString(p.string());
}
}  // namespace

// A copy taken while the writer runs holds what was committed, reads "running" (not "crashed": no
// writer holds the copy), and stays as it was while the writer commits more.
TEST(UiLive56, ASnapshotCopyHoldsTheCommittedStepsAndStaysRunning) {
  const std::string path = (uilive56_dir() / "copy_live.db").string(), copy = (uilive56_dir() / "copy.db").string();
  SessionWriter w(path, true);
  w.set_metadata(embedscope::sessions::meta::kWorldSize, "1");
  w.add_lane({0, 0, "compute", "thread"});
  uilive56_add_steps(w, 0, 3);
  ASSERT_TRUE(uilive56_wait([&] { return uilive56_committed_steps(path) == 3; }));
  embedscope::sessions::copy_session_snapshot(path, copy);
  uilive56_add_steps(w, 3, 7);
  ASSERT_TRUE(uilive56_wait([&] { return uilive56_committed_steps(path) == 7; }));
  const SessionReader r(copy);
  EXPECT_EQ(r.status(), "running");
  EXPECT_EQ(r.steps().size(), 3u);
  EXPECT_EQ(r.all_ops().size(), 3u);
  EXPECT_FALSE(fs::exists(copy + "-wal"));  // one self-contained file
  EXPECT_EQ(SessionReader(path).status(), "running");  // the original's writer is untouched
  w.close("complete");
  EXPECT_EQ(SessionReader(path).steps().size(), 7u);
  EXPECT_THROW(embedscope::sessions::copy_session_snapshot((uilive56_dir() / "absent.db").string(), copy),
               embedscope::sessions::SessionError);
}

// The tester's walk (F3, F3b) with a writer in the test: open at 5 steps, the run writes 5 more,
// the pages still show 5 and the banner says 5 more; F5 shows 10 on the same page with the same
// view; the run ends: "the run has ended"; F5 again: the complete file, no banner.
TEST(UiLive56, EveryPageShowsOneSnapshotAndReloadReadsTheRest) {
  const std::string path = (uilive56_dir() / "live.db").string();
  auto w = std::make_unique<SessionWriter>(path, true);
  w->set_metadata(embedscope::sessions::meta::kWorldSize, "1");
  w->set_metadata(embedscope::sessions::meta::kSamplesPerStep, "8");
  w->add_lane({0, 0, "compute", "thread"});
  uilive56_add_steps(*w, 0, 5);
  ASSERT_TRUE(uilive56_wait([&] { return uilive56_committed_steps(path) == 5; }));

  MainWindow win;
  win.resize(1400, 800);
  ASSERT_EQ(win.open_session(QString::fromStdString(path), true), "");
  auto* tab = qobject_cast<SessionTab*>(win.tabs()->currentWidget());
  ASSERT_NE(tab, nullptr);
  ASSERT_TRUE(uilive56_wait([&] { return !tab->copying(); }));  // the snapshot is copied on a worker
  EXPECT_TRUE(tab->snapshot());
  EXPECT_EQ(tab->shown().steps, 5);
  EXPECT_EQ(tab->shown().last_step, 4);
  EXPECT_EQ(win.tabs()->tabText(0), "live.db [running: as of step 4]");
  EXPECT_FALSE(tab->banner()->isHidden());
  EXPECT_EQ(tab->banner()->text(), "As of step 4 (5 measured steps): the run was still writing this session. F5 reloads it.");
  EXPECT_NE(tab->session()->path(), path);  // the pages read the copy

  // the run writes five more steps; nothing moves under the user's feet
  uilive56_add_steps(*w, 5, 10);
  ASSERT_TRUE(uilive56_wait([&] { return uilive56_committed_steps(path) == 10; }));
  auto* timeline = qobject_cast<embedscope::ui::TimelineView*>(tab->widget(0));
  ASSERT_NE(timeline, nullptr);
  EXPECT_EQ(timeline->timeline()->steps().size(), 5u);
  tab->setCurrentIndex(1);  // Summary, first shown after the run wrote more: the same 5 steps
  auto* summary = tab->widget(1)->findChild<embedscope::ui::SummaryView*>();
  ASSERT_NE(summary, nullptr);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(summary));
  EXPECT_TRUE(uilive56_texts(summary).contains("5 measured steps")) << uilive56_texts(summary).toStdString();
  EXPECT_EQ(SessionReader(tab->session()->path()).steps().size(), 5u);  // what the analyses open by path

  // the watch notices
  ASSERT_TRUE(uilive56_wait([&] { return tab->latest().steps == 10; }));
  EXPECT_EQ(tab->banner()->text(), "As of step 4: 5 more steps written since. F5 reloads them.");
  EXPECT_EQ(win.tabs()->tabText(0), "live.db [running: as of step 4, +5: F5]");
  EXPECT_EQ(win.windowTitle(), "Embedscope - live.db [running: as of step 4, +5: F5]");
  EXPECT_EQ(tab->shown().steps, 5);

  // F5 on the Summary page, with the timeline at [1.5, 3.5) ms and a range selected
  timeline->timeline()->navigate({1'500'000, 3'500'000});
  timeline->timeline()->set_range(embedscope::ui::ViewRange{2'000'000, 2'500'000});
  const QString old_copy = QString::fromStdString(tab->session()->path());
  auto* reload = win.findChild<QAction*>("reload_action");
  ASSERT_NE(reload, nullptr);
  EXPECT_EQ(reload->shortcut(), QKeySequence(Qt::Key_F5));
  reload->trigger();
  ASSERT_TRUE(uilive56_wait([&] { return !tab->copying(); }));  // the new snapshot, copied on a worker
  EXPECT_EQ(win.tabs()->count(), 1);
  EXPECT_EQ(win.tabs()->currentWidget(), tab);  // in place
  EXPECT_EQ(tab->currentIndex(), 1);             // same page
  EXPECT_EQ(tab->shown().steps, 10);
  EXPECT_EQ(win.tabs()->tabText(0), "live.db [running: as of step 9]");
  EXPECT_FALSE(fs::exists(old_copy.toStdString()));  // the old copy went
  timeline = qobject_cast<embedscope::ui::TimelineView*>(tab->widget(0));
  ASSERT_NE(timeline, nullptr);
  EXPECT_EQ(timeline->timeline()->steps().size(), 10u);
  EXPECT_EQ(timeline->timeline()->view().t0, 1'500'000);
  EXPECT_EQ(timeline->timeline()->view().t1, 3'500'000);
  ASSERT_TRUE(timeline->timeline()->range().has_value());
  EXPECT_EQ(timeline->timeline()->range()->t0, 2'000'000);
  summary = tab->widget(1)->findChild<embedscope::ui::SummaryView*>();
  ASSERT_NE(summary, nullptr);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(summary));
  EXPECT_TRUE(uilive56_texts(summary).contains("10 measured steps")) << uilive56_texts(summary).toStdString();

  // the run ends
  w->close("complete");
  w.reset();
  ASSERT_TRUE(uilive56_wait([&] { return tab->latest().status == "complete"; }));
  EXPECT_EQ(tab->banner()->text(), "As of step 9: the run has ended (complete, 10 measured steps). F5 reloads it.");
  EXPECT_EQ(win.tabs()->tabText(0), "live.db [as of step 9; run ended: F5]");
  EXPECT_EQ(win.reload_current(true), "");
  EXPECT_FALSE(tab->snapshot());
  EXPECT_TRUE(tab->banner()->isHidden());
  EXPECT_EQ(win.tabs()->tabText(0), "live.db");
  EXPECT_EQ(tab->session()->path(), path);
  EXPECT_EQ(tab->currentIndex(), 1);
}

// A session that is not being written opens as before: no snapshot, no banner, no watch; Reload
// of a file that went away keeps the pages and says why.
TEST(UiLive56, AClosedSessionHasNoBannerAndAFailedReloadKeepsThePages) {
  const std::string path = (uilive56_dir() / "done.db").string();
  {
    SessionWriter w(path, true);
    w.set_metadata(embedscope::sessions::meta::kWorldSize, "1");
    w.add_lane({0, 0, "compute", "thread"});
    uilive56_add_steps(w, 0, 3);
    w.close("cancelled");
  }
  MainWindow win;
  ASSERT_EQ(win.open_session(QString::fromStdString(path), true), "");
  auto* tab = qobject_cast<SessionTab*>(win.tabs()->currentWidget());
  ASSERT_NE(tab, nullptr);
  EXPECT_FALSE(tab->snapshot());
  EXPECT_TRUE(tab->banner()->isHidden());
  EXPECT_EQ(win.tabs()->tabText(0), "done.db [cancelled]");
  EXPECT_EQ(tab->session()->path(), path);
  fs::rename(path, path + ".moved");
  const QString err = win.reload_current(true);
  EXPECT_TRUE(err.startsWith(QString::fromStdString(path) + ": cannot open")) << err.toStdString();
  EXPECT_EQ(tab->count(), 4);  // Timeline, Summary, Load, Memory still there
  EXPECT_NE(qobject_cast<embedscope::ui::TimelineView*>(tab->widget(0)), nullptr);
}

// F15: hand-written, incomplete workloads open in the designer with the engine's error, not in the
// importers; a JSON object the importers refuse leaves a tab that says "failed" and closes.
TEST(UiLive56, AnIncompleteWorkloadOpensInTheDesignerAndAFailedImportSaysSo) {
  const QString minimal = uilive56_write(
      "minwl.json", R"({"name":"w","tables":[{"name":"t","num_embeddings":100,"embedding_dim":4,"feature_names":["f"]}]})");
  const QString bogus = uilive56_write(
      "badwl.json", R"({"name":"w","bogus":1,"tables":[{"name":"t","num_embeddings":-5,"embedding_dim":4}]})");
  EXPECT_TRUE(embedscope::ui::is_workload_file(minimal));
  EXPECT_TRUE(embedscope::ui::is_workload_file(bogus));
  // a Kineto trace that happens to have a "tables" key is still a trace
  EXPECT_FALSE(embedscope::ui::is_workload_file(uilive56_write("trace_tables.json", R"({"traceEvents":[],"tables":[]})")));
  MainWindow win;
  ASSERT_EQ(win.open_path(minimal, true), "");
  auto* designer = qobject_cast<embedscope::ui::WorkloadDesigner*>(win.tabs()->currentWidget());
  ASSERT_NE(designer, nullptr);
  EXPECT_EQ(win.tabs()->tabText(0), "Workload: w");
  EXPECT_TRUE(designer->model()->error().contains("/batch_size")) << designer->model()->error().toStdString();
  ASSERT_EQ(win.open_path(bogus, true), "");
  designer = qobject_cast<embedscope::ui::WorkloadDesigner*>(win.tabs()->currentWidget());
  ASSERT_NE(designer, nullptr);
  EXPECT_TRUE(designer->model()->error().contains("/bogus: unknown key")) << designer->model()->error().toStdString();

  const QString other = uilive56_write("notatrace.json", R"({"foo":1})");
  QSignalSpy finished(&win, &MainWindow::import_finished);
  win.open_path(other, true);
  ASSERT_TRUE(finished.count() > 0 || finished.wait(30000));
  EXPECT_EQ(finished.at(0).at(1).toString(), "error");
  const int at = win.tabs()->count() - 1;
  EXPECT_EQ(win.tabs()->tabText(at), "import failed: notatrace.json");
  QWidget* page = win.tabs()->widget(at);
  EXPECT_TRUE(page->findChild<QProgressBar*>()->isHidden());
  QLabel* reason = nullptr;
  for (auto* l : page->findChildren<QLabel*>())
    if (l->text().startsWith("Import failed: ")) reason = l;
  ASSERT_NE(reason, nullptr);
  EXPECT_TRUE(reason->wordWrap());
  EXPECT_TRUE(reason->text().contains("not a format embedscope import reads")) << reason->text().toStdString();
  auto* close = page->findChild<QPushButton*>("import_cancel");
  ASSERT_NE(close, nullptr);
  EXPECT_EQ(close->text(), "Close");
  EXPECT_TRUE(close->isEnabled());
  close->click();
  ASSERT_TRUE(uilive56_wait([&] { return win.tabs()->count() == at; }));
}

// F7, F14: the Open filter names Nsight Systems exports; Ctrl+W closes the current tab.
TEST(UiLive56, OpenFilterNamesNsightAndCtrlWClosesTheTab) {
  const QString filter = MainWindow::open_filter();
  EXPECT_TRUE(filter.startsWith("Sessions and traces (*.db *.json *.json.gz *.pickle *.pickle.gz *.pkl *.sqlite *.nsys-rep);;"));
  EXPECT_TRUE(filter.contains(";;Nsight Systems (*.sqlite *.nsys-rep);;"));
  MainWindow win;
  win.new_workload();
  win.new_workload();
  ASSERT_EQ(win.tabs()->count(), 2);
  auto* close = win.findChild<QAction*>("close_tab_action");
  ASSERT_NE(close, nullptr);
  EXPECT_EQ(close->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_W));
  win.tabs()->setCurrentIndex(0);
  QWidget* second = win.tabs()->widget(1);
  close->trigger();
  ASSERT_EQ(win.tabs()->count(), 1);
  EXPECT_EQ(win.tabs()->widget(0), second);
  // Reload on a tab that is not a session's says so
  EXPECT_EQ(win.reload_current(true), "reload: the current tab is not a session's");
}
