// The workbench's leftovers of a user's review (tester60a):
//   F12: a semi_sync session's input-per-feature table and the Summary's sharding-plan caption
//        cover the counted steps, as stats (a simulated tiny run, 6 measured steps, 4 counted);
//   F9:  a schema-v1 session's input figures use its world size (2 ranks x batch 4 = 8 samples a
//        step, where the workload's default device count gave 4), and stats says "700 ns";
//   F3:  Compare > Memory draws the baseline wide and pale under the others, fragmentation in a
//        chart of its own;
//   F4:  a frozen live tab (a report's, a screenshot's) says "as of step N", no F5 and no "+N";
//   F6:  a .db that is not SQLite says what the workbench reads;
//   the Memory page's entry line "1 segment"; the Timeline's Range heading wraps at 1000x650.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QLabel>
#include <QTableView>

#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <qcustomplot.h>

#include "core/input_figures.h"
#include "embedscope/sessions/analysis/memory_history.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "shell/main_window.h"
#include "shell/session_tab.h"
#include "support/cli_run.h"
#include "support/live_session_wait.h"
#include "timeline/timeline_view.h"
#include "views/memory_compare.h"
#include "views/memory_entry_line.h"
#include "views/summary_view.h"

namespace {
namespace fs = std::filesystem;
using embedscope::sessions::SessionReader;
using embedscope::sessions::SessionWriter;
using embedscope::test_support::run_cli;
using embedscope::test_support::run_merged;

fs::path ui61_dir() {
  static const fs::path d = embedscope::test_support::fresh_scratch("ui61_windows");
  return d;
}

std::string ui61_run(const std::string& name, const std::string& args) {
  const fs::path p = ui61_dir() / name;
  fs::remove(p);
  const auto r = run_merged("'" + std::string(EMBEDSCOPE_CLI) + "' run " + args + " -o '" + p.string() + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  return p.string();
}

}  // namespace

// F12: tiny on 2 simulated ranks, 16 samples a step, semi_sync, 6 measured steps: 4-5 drain.
TEST(Ui61SemiSync, InputTableAndPlanCaptionCoverTheCountedSteps) {
  const std::string db = ui61_run("semi.db", "--preset tiny --pipeline semi_sync --steps 6 --simulate h100_sxm");
  const SessionReader s(db);
  const auto in = embedscope::ui::input_figures(s);
  ASSERT_EQ(in.unavailable, "");
  EXPECT_NE(in.source.find("of the 4 counted steps 0-3 (the drain steps 4-5 left out, as stats)"), std::string::npos)
      << in.source;
  EXPECT_EQ(in.inspection.samples, 4 * 16) << in.source;  // 4 counted steps of 16 samples, not 6
  EXPECT_NE(in.source.find(", 64 samples"), std::string::npos) << in.source;
  embedscope::ui::SummaryView view(std::make_shared<const SessionReader>(db));
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  auto* caption = view.findChild<QLabel*>("sharding_plan_caption");
  ASSERT_NE(caption, nullptr);
  EXPECT_TRUE(caption->text().contains("(the 4 counted steps 0-3; the drain steps 4-5 left out, as stats)"))
      << caption->text().toStdString();
  EXPECT_FALSE(caption->text().contains("measured steps")) << caption->text().toStdString();
  // a base run of the same: its measured steps, every one counted
  const std::string base = ui61_run("base.db", "--preset tiny --steps 6 --simulate h100_sxm");
  const auto base_in = embedscope::ui::input_figures(SessionReader(base));
  EXPECT_NE(base_in.source.find("of the 6 measured steps"), std::string::npos) << base_in.source;
  EXPECT_EQ(base_in.inspection.samples, 6 * 16);
}

// F9: tests/data/sessions/v1.db: world_size 2, batch_size 4, 1 measured step of 8 samples; its
// workload_json has no "devices" (the default count is 1).
TEST(Ui61SchemaV1, InputFiguresUseTheSessionsWorldSizeAndStatsSays700ns) {
  const std::string v1 = std::string(EMBEDSCOPE_TEST_DATA) + "/sessions/v1.db";
  const fs::path copy = ui61_dir() / "v1.db";
  fs::copy_file(v1, copy, fs::copy_options::overwrite_existing);
  const auto in = embedscope::ui::input_figures(SessionReader(copy.string()));
  ASSERT_EQ(in.unavailable, "");
  EXPECT_EQ(in.inspection.samples, 8) << in.source;
  EXPECT_NE(in.source.find("the 2 batches of the 1 measured steps"), std::string::npos) << in.source;
  const auto r = run_cli(EMBEDSCOPE_CLI, "stats '" + copy.string() + "'", ui61_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step time    mean 700 ns  p50 700 ns  p99 700 ns"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("mean 0.00 ms"), std::string::npos) << r.out;
}

// F3: A and C differ by 1 MiB; A (the baseline) is wide and translucent, drawn first; the
// fragmentation lines are on the chart under the bytes, not on the bytes' axes.
TEST(Ui61MemoryCompare, BaselineStaysVisibleAndFragmentationHasItsOwnChart) {
  auto session = [](const std::string& name, int64_t mib) {
    const fs::path p = ui61_dir() / name;
    fs::remove(p);
    SessionWriter w(p.string());
    w.set_metadata(embedscope::sessions::meta::kWorldSize, "1");
    for (int64_t s = 0; s < 3; ++s) {
      embedscope::sessions::MemoryCounter c;
      c.step = s;
      c.allocated = mib << 20;
      c.reserved = (mib + 4) << 20;
      c.segments = 1;
      c.external_fragmentation = 0.25;
      w.add_memory(c);
    }
    w.close("complete", "");
    return std::make_shared<const SessionReader>(p.string());
  };
  std::vector<embedscope::ui::LabelledSession> sessions = {{"A", session("mc_a.db", 28)}, {"B", session("mc_b.db", 29)}};
  embedscope::ui::MemoryCompare mc(sessions);
  mc.resize(1280, 800);
  mc.show(0, 2);
  QCustomPlot* plot = mc.plot();
  ASSERT_EQ(plot->graphCount(), 6);  // per session: allocated, reserved, fragmentation
  using MC = embedscope::ui::MemoryCompare;
  EXPECT_DOUBLE_EQ(plot->graph(0)->pen().widthF(), MC::kBaselineWidth);  // A allocated
  EXPECT_EQ(plot->graph(0)->pen().color().alpha(), MC::kBaselineAlpha);
  EXPECT_DOUBLE_EQ(plot->graph(3)->pen().widthF(), MC::kLineWidth);  // B allocated, on top
  EXPECT_EQ(plot->graph(3)->pen().color().alpha(), 255);
  ASSERT_NE(mc.fragmentation_rect(), nullptr);
  for (int g : {2, 5}) {
    EXPECT_EQ(plot->graph(g)->valueAxis(), mc.fragmentation_rect()->axis(QCPAxis::atLeft)) << g;
    EXPECT_NE(plot->graph(g)->valueAxis(), plot->yAxis) << g;
    EXPECT_DOUBLE_EQ(plot->graph(g)->data()->at(0)->value, 25.0);
  }
  for (int g : {0, 1, 3, 4}) EXPECT_EQ(plot->graph(g)->valueAxis(), plot->yAxis) << g;
  EXPECT_EQ(mc.fragmentation_rect()->axis(QCPAxis::atLeft)->label().toStdString(), "fragmentation %");
  // A's pixels show beside B's 1 MiB higher line: the chart holds A's translucent blue
  if (const char* dir = std::getenv("EMBEDSCOPE_UI61_PNG_DIR")) mc.grab().save(QString("%1/memory_compare.png").arg(dir));
}

// F4: a tab of a session its run still writes, frozen for an image: no F5, no "+N" however
// many steps the run writes after.
TEST(Ui61LiveImage, AFrozenTabSaysAsOfStepNAndNothingElse) {
  const std::string path = (ui61_dir() / "live.db").string();
  auto w = std::make_unique<SessionWriter>(path, true);
  w->set_metadata(embedscope::sessions::meta::kWorldSize, "1");
  w->add_lane({0, 0, "compute", "thread"});
  auto add = [&](int from, int to) {
    for (int s = from; s < to; ++s)
      w->add_step({s, 0, 1'000'000LL * s, 1'000'000LL * s + 800'000, 0.5, 64, 64});
  };
  auto wait = [](const std::function<bool()>& done) {
    return embedscope::test_support::wait_until(done, 30, [] { QApplication::processEvents(); });
  };
  add(0, 5);
  ASSERT_TRUE(wait([&] { return embedscope::test_support::committed_steps(path) == 5; }));
  embedscope::ui::MainWindow win;
  ASSERT_EQ(win.open_session(QString::fromStdString(path), true), "");
  auto* tab = qobject_cast<embedscope::ui::SessionTab*>(win.tabs()->currentWidget());
  ASSERT_NE(tab, nullptr);
  ASSERT_TRUE(wait([&] { return !tab->copying(); }));
  tab->freeze();
  add(5, 10);
  ASSERT_TRUE(wait([&] { return embedscope::test_support::committed_steps(path) == 10; }));
  for (int i = 0; i < 30; ++i) {  // 1.5 s: the watch looked each second before
    QApplication::processEvents();
    usleep(50'000);
  }
  tab->check_file();
  QApplication::processEvents();
  EXPECT_EQ(tab->banner()->text().toStdString(),
            "As of step 4 (5 measured steps): the run was still writing this session when this image was made.");
  EXPECT_EQ(win.tabs()->tabText(0).toStdString(), "live.db [running: as of step 4]");
  EXPECT_EQ(tab->latest().steps, 5);  // the watch stopped
  w->close("complete");
}

// F6: a .db of "hello": what the workbench opens and imports, as stats says what it reads.
TEST(Ui61NotASession, TheMessageSaysWhatTheWorkbenchReads) {
  const fs::path p = ui61_dir() / "notasession.db";
  std::ofstream(p) << "hello\n";
  embedscope::ui::MainWindow win;
  const QString err = win.open_path(QString::fromStdString(p.string()), true);
  EXPECT_TRUE(err.contains("not an SQLite database")) << err.toStdString();
  EXPECT_TRUE(err.contains("the workbench opens the sessions (.db) that embedscope run, import, merge and launch write"))
      << err.toStdString();
  EXPECT_TRUE(err.contains("PyTorch profiler traces, Nsight Systems exports")) << err.toStdString();
}

// The Timeline's side pane at 1000x650: its "Range (Shift+drag, ...)" heading wraps whole.
TEST(Ui61Timeline, RangeHeadingWrapsInANarrowSidePane) {
  const std::string db = ui61_run("tl.db", "--preset tiny --steps 2 --simulate h100_sxm");
  embedscope::ui::MainWindow win;
  ASSERT_EQ(win.open_session(QString::fromStdString(db), true), "");
  win.resize(1000, 650);
  win.show();
  QApplication::processEvents();
  auto* title = win.findChild<QLabel*>("range_title");
  ASSERT_NE(title, nullptr);
  EXPECT_TRUE(title->wordWrap());
  ASSERT_GT(title->width(), 0);
  // the text wrapped at its width fits its height: nothing cut
  EXPECT_LE(title->heightForWidth(title->width()), title->height()) << title->width() << "x" << title->height();
  EXPECT_GE(title->width(), title->fontMetrics().horizontalAdvance("Range (Shift+drag,"));
}

// The Memory page's entry line of a tiny run (one 2 MiB segment, as its Memory page shows):
// "1 segment", not "1 segments".
TEST(Ui61MemoryEntryLine, OneSegmentIsSingular) {
  const std::string db = ui61_run("mem.db", "--preset tiny --steps 2");
  const SessionReader s(db);
  const auto h = embedscope::sessions::MemoryHistory::load(s, 0);
  ASSERT_GT(h.size(), 20);
  const auto st = h.state_at(20);
  const auto f = h.figures(st);
  ASSERT_EQ(f.segments, 1);
  const QString line = embedscope::ui::memory_entry_line(h, 20, st, {});
  EXPECT_TRUE(line.startsWith(QString("entry 20 of %1: ").arg(h.size()))) << line.toStdString();
  EXPECT_TRUE(line.contains(", 1 segment, ")) << line.toStdString();
  EXPECT_TRUE(line.contains(" free in segments, largest free block ")) << line.toStdString();
  EXPECT_FALSE(line.contains("1 segments")) << line.toStdString();
}
