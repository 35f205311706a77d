// A session still being written is copied on a worker, not on the GUI thread (a multi-GB live
// session froze the window): the tab says "Copying a snapshot ..." until the copy is read; F5
// copies again the same way, keeping the pages until then; closing the tab or the window during
// the copy neither crashes nor leaves a copy behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QAction>
#include <QApplication>
#include <QLabel>
#include <QProgressBar>
#include <QThread>
#include <QThreadPool>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "support/live_session_wait.h"
#include "jobs/analysis_job.h"
#include "shell/main_window.h"
#include "shell/session_tab.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"

namespace {
namespace fs = std::filesystem;

// Waits (up to `seconds`, processing events) until `done`.
bool ui57_wait(const std::function<bool()>& done, int seconds = 30) {
  return embedscope::test_support::wait_until(done, seconds, [] { QApplication::processEvents(); });
}

using embedscope::sessions::SessionReader;
using embedscope::sessions::SessionWriter;
using embedscope::ui::MainWindow;
using embedscope::ui::SessionTab;

fs::path ui57_live_dir() {
  static const fs::path d = [] {
    const auto p = fs::temp_directory_path() / ("es_ui57_live_" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// Steps [from, to) of one rank, `ops` lookups each (1 us apart) in step s's [1000 s, 1000 s + 800) us.
void ui57_add_steps(SessionWriter& w, int from, int to, int ops = 1) {
  using embedscope::sessions::Lane;
  using embedscope::sessions::OpCategory;
  for (int s = from; s < to; ++s) {
    const int64_t t0 = 1'000'000LL * s;
    std::vector<embedscope::sessions::OpEvent> batch;
    for (int k = 0; k < ops; ++k)
      batch.push_back({0, Lane::compute, OpCategory::lookup, "lookup", s, t0 + 100'000 + 1000LL * k,
                       t0 + 100'500 + 1000LL * k, 0, 0});
    w.add_ops(batch);
    w.add_step({s, 0, t0, t0 + 800'000, 0.5, 64, 64});
  }
}

// A live session `name` (its writer returned) with `steps` committed steps of `ops` ops each.
std::unique_ptr<SessionWriter> ui57_live(const std::string& name, int steps, int ops = 1) {
  const std::string path = (ui57_live_dir() / name).string();
  auto w = std::make_unique<SessionWriter>(path, true);
  w->set_metadata(embedscope::sessions::meta::kWorldSize, "1");
  w->add_lane({0, 0, "compute", "thread"});
  ui57_add_steps(*w, 0, steps, ops);
  EXPECT_TRUE(ui57_wait([&] { return embedscope::test_support::committed_steps(path) == static_cast<size_t>(steps); }, 60));
  return w;
}
}  // namespace

// open_session returns with the copy still to come (no event was processed: it cannot have been
// read): one page that says so, no reader; then the pages of the snapshot.
TEST(Ui57LiveCopy, OpeningALiveSessionCopiesOffTheGuiThread) {
  auto w = ui57_live("open57.db", 5);
  const QString path = QString::fromStdString((ui57_live_dir() / "open57.db").string());
  MainWindow win;
  ASSERT_EQ(win.open_session(path, true), "");
  auto* tab = qobject_cast<SessionTab*>(win.tabs()->currentWidget());
  ASSERT_NE(tab, nullptr);
  EXPECT_TRUE(tab->copying());
  EXPECT_EQ(tab->session(), nullptr);
  ASSERT_EQ(tab->count(), 1);
  EXPECT_EQ(tab->tabText(0), "Copying snapshot");
  auto* status = tab->findChild<QLabel*>("snapshot_copy_status");
  ASSERT_NE(status, nullptr);
  EXPECT_TRUE(status->text().startsWith("Copying a snapshot of open57.db (")) << status->text().toStdString();
  EXPECT_NE(tab->findChild<QProgressBar*>("snapshot_copy_progress"), nullptr);
  EXPECT_EQ(win.tabs()->tabText(0), "open57.db [running: copying snapshot]");
  EXPECT_TRUE(tab->banner()->isHidden());
  // what needs the pages says it waits for them
  EXPECT_TRUE(win.export_current("csv", QString::fromStdString((ui57_live_dir() / "csv").string()))
                  .contains("still being copied"));
  EXPECT_EQ(win.go_to_slowest_step(), "the session's snapshot is still being copied");
  const QString folder = tab->snapshot_folder();
  EXPECT_TRUE(fs::is_directory(folder.toStdString()));

  ASSERT_TRUE(ui57_wait([&] { return !tab->copying(); }));
  EXPECT_EQ(tab->error(), "");
  ASSERT_EQ(tab->count(), 4);
  EXPECT_NE(qobject_cast<embedscope::ui::TimelineView*>(tab->widget(0)), nullptr);
  EXPECT_TRUE(tab->snapshot());
  EXPECT_EQ(tab->shown().steps, 5);
  EXPECT_EQ(win.tabs()->tabText(0), "open57.db [running: as of step 4]");
  EXPECT_EQ(win.windowTitle(), "Embedscope - open57.db [running: as of step 4]");
  EXPECT_FALSE(tab->banner()->isHidden());
  EXPECT_TRUE(QString::fromStdString(tab->session()->path()).startsWith(folder));
  w->close("complete");
}

// F5 while the run writes: a copy on a worker again; the pages (and the timeline's view) stay
// until it is read, the banner saying so; then the new snapshot on the same page.
TEST(Ui57LiveCopy, ReloadCopiesOffTheGuiThreadAndKeepsThePages) {
  auto w = ui57_live("reload57.db", 3);
  const std::string path = (ui57_live_dir() / "reload57.db").string();
  MainWindow win;
  ASSERT_EQ(win.open_session(QString::fromStdString(path), true), "");
  auto* tab = qobject_cast<SessionTab*>(win.tabs()->currentWidget());
  ASSERT_NE(tab, nullptr);
  ASSERT_TRUE(ui57_wait([&] { return !tab->copying(); }));
  ui57_add_steps(*w, 3, 6);
  ASSERT_TRUE(ui57_wait([&] { return embedscope::test_support::committed_steps(path) == 6; }));
  auto* before = tab->widget(0);
  tab->setCurrentIndex(1);
  ASSERT_EQ(win.reload_current(true), "");
  EXPECT_TRUE(tab->copying());
  EXPECT_EQ(tab->widget(0), before);  // the old pages, still usable
  EXPECT_EQ(tab->shown().steps, 3);
  EXPECT_TRUE(tab->banner()->text().startsWith("Reloading: copying a snapshot (")) << tab->banner()->text().toStdString();
  ASSERT_TRUE(ui57_wait([&] { return !tab->copying(); }));
  EXPECT_EQ(tab->shown().steps, 6);
  EXPECT_EQ(tab->currentIndex(), 1);
  EXPECT_NE(tab->widget(0), before);
  EXPECT_EQ(win.tabs()->tabText(0), "reload57.db [running: as of step 5]");
  EXPECT_FALSE(tab->banner()->text().startsWith("Reloading"));
  w->close("complete");
}

// Closing the tab, or the window, while its copy runs (here at once after opening a session of
// 12,000 ops): no crash, and once the workers are done no copy and no folder of copies is left.
TEST(Ui57LiveCopy, ClosingTheTabOrTheWindowDuringTheCopyLeavesNoCopy) {
  auto w = ui57_live("close57.db", 6, 2000);
  const QString path = QString::fromStdString((ui57_live_dir() / "close57.db").string());
  QString folder;
  {
    MainWindow win;
    ASSERT_EQ(win.open_session(path, true), "");
    auto* tab = qobject_cast<SessionTab*>(win.tabs()->currentWidget());
    ASSERT_NE(tab, nullptr);
    ASSERT_TRUE(tab->copying());
    folder = tab->snapshot_folder();
    ASSERT_FALSE(folder.isEmpty());
    QThread::msleep(5);  // the worker under way
    win.close_current_tab();
    EXPECT_EQ(win.tabs()->count(), 0);
  }
  ASSERT_TRUE(QThreadPool::globalInstance()->waitForDone(60000));
  QApplication::processEvents();
  EXPECT_FALSE(fs::exists(folder.toStdString())) << folder.toStdString();

  auto win = std::make_unique<MainWindow>();
  ASSERT_EQ(win->open_session(path, true), "");
  auto* tab = qobject_cast<SessionTab*>(win->tabs()->currentWidget());
  ASSERT_NE(tab, nullptr);
  folder = tab->snapshot_folder();
  win->close();
  win.reset();  // the window goes with its copy running
  ASSERT_TRUE(QThreadPool::globalInstance()->waitForDone(60000));
  QApplication::processEvents();
  EXPECT_FALSE(fs::exists(folder.toStdString())) << folder.toStdString();
  // the session itself is untouched, its writer still writing
  EXPECT_EQ(SessionReader(path.toStdString()).status(), "running");
  w->close("complete");
}
