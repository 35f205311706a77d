// tester43's workbench findings (ux44): F6 two memory stacks in one colour, F24 the step box after
// keys 1..9 / a double click, F14 a snapshot opening on an empty Timeline, F10 a corrupt
// session's report and Memory page, F15 a live Summary mixing two moments, F19 a live session
// "ended running". Hand-made sessions and the repo's snapshot fixtures; values by hand.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <QApplication>
#include <QLabel>
#include <QSet>
#include <QTabWidget>
#include <QTableWidget>
#include <QtTest/QtTest>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <qcustomplot.h>

#include "charts/active_timeline.h"
#include "charts/block_map.h"
#include "charts/segment_timeline_chart.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "jobs/analysis_job.h"
#include "models/sharding_plan_model.h"
#include "shell/main_window.h"
#include "shell/report_layout.h"
#include "support/cli_run.h"
#include "timeline/step_box.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"
#include "views/memory_compare.h"
#include "views/memory_replay.h"
#include "views/memory_view.h"
#include "views/scenario_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
namespace fs = std::filesystem;

fs::path ux44_tmp(const std::string& name) {
  return fs::temp_directory_path() / ("es_ux44_" + std::to_string(getpid()) + "_" + name);
}

// The snapshot fixture imported into a session file (as `embedscope import` does).
std::string ux44_snapshot_session(const std::string& fixture) {
  const fs::path path = ux44_tmp(fixture + ".db");
  fs::remove(path);
  sessions::SessionWriter w(path.string(), true);
  sessions::torch_snapshot::import_torch_memory_snapshot(std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + fixture, w);
  w.close("complete");
  return path.string();
}

// Overwrites the root page of `table` with bytes that are no b-tree page: reading it fails with
// SQLite's "database disk image is malformed".
void ux44_corrupt_table(const std::string& path, const std::string& table) {
  int64_t root = 0, page_size = 0;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  const std::string sql = "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_schema WHERE name = '" + table + "'";
  ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  root = sqlite3_column_int64(st, 0);
  page_size = sqlite3_column_int64(st, 1);
  sqlite3_finalize(st);
  sqlite3_close(db);
  ASSERT_GT(root, 1);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp((root - 1) * page_size);
  const std::string garbage(64, '\xff');
  f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
}

// Two ranks, measured steps 0..3 of 100 us each ([0, 400) us), a lookup on each rank per step.
std::string ux44_steps_session() {
  const fs::path path = ux44_tmp("steps.db");
  fs::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  for (int r = 0; r < 2; ++r) w.add_lane({r, 0, "compute", "thread"});
  for (int64_t step = 0; step < 4; ++step)
    for (int r = 0; r < 2; ++r) {
      const int64_t s = step * 100'000;
      w.add_step({step, r, s, s + 100'000, 0.5, 0, 0});
      w.add_ops({{r, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", step, s + 10'000, s + 60'000, 0, 0}});
    }
  w.close("complete");
  return path.string();
}
}  // namespace

// F6: training_p4's rank 0 holds blocks of `forward (train.py:23)` and `all_to_all
// (train.py:40)`, whose names hashed to the same of the ten colours (the table's swatches and
// the block map agreed on one green). Opened in the Memory view, every stack of the table has a
// colour of its own, and the map's blocks of the two tags differ.
TEST(Ux44TagColors, EveryStackOfASnapshotHasItsOwnColour) {
  MemoryView view(std::make_shared<const sessions::SessionReader>(ux44_snapshot_session("training_p4.pickle.gz")));
  view.resize(1400, 900);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  QApplication::processEvents();
  QMap<QString, QColor> colour;  // innermost function -> swatch
  for (int row = 0; row < view.stacks_table()->rowCount(); ++row) {
    const QTableWidgetItem* item = view.stacks_table()->item(row, 3);
    ASSERT_NE(item, nullptr);
    colour[item->text().section(" (", 0, 0)] = item->data(Qt::DecorationRole).value<QColor>();
  }
  ASSERT_TRUE(colour.contains("forward")) << colour.keys().join(", ").toStdString();
  ASSERT_TRUE(colour.contains("all_to_all")) << colour.keys().join(", ").toStdString();
  EXPECT_NE(colour["forward"], colour["all_to_all"]);
  QSet<QRgb> distinct;
  for (const QColor& c : colour) distinct.insert(c.rgb());
  EXPECT_EQ(distinct.size(), colour.size());  // one colour a stack (fewer than ten of them)
  EXPECT_EQ(BlockMap::color_of_tag("forward"), colour["forward"]);  // the map paints what the table shows
  EXPECT_EQ(BlockMap::color_of_tag("all_to_all"), colour["all_to_all"]);
}

// F6, the rule itself: a set of tags gets distinct colours (up to ten), a tag keeps its colour
// when nothing in a later set collides with it, the engine's tags keep theirs.
TEST(Ux44TagColors, DistinctWithinASetAndStableAfterwards) {
  const std::vector<std::string> tags{"init_weights", "forward", "all_to_all", "backward", "optimizer_step", "all_gather"};
  BlockMap::use_tag_colors(tags);
  QSet<QRgb> seen;
  for (const auto& t : tags) seen.insert(BlockMap::color_of_tag(t).rgb());
  EXPECT_EQ(seen.size(), static_cast<int>(tags.size()));
  const QColor forward = BlockMap::color_of_tag("forward");
  EXPECT_EQ(BlockMap::use_tag_colors({"forward"}), 0);  // alone, it collides with nothing: kept
  EXPECT_EQ(BlockMap::color_of_tag("forward"), forward);
  EXPECT_EQ(BlockMap::use_tag_colors(tags), 0);  // the same set again: nothing moves
  EXPECT_EQ(BlockMap::color_of_tag("weights"), QColor(0x1f, 0x77, 0xb4));
  BlockMap::use_tag_colors({"weights", "kjt"});
  EXPECT_EQ(BlockMap::color_of_tag("weights"), QColor(0x1f, 0x77, 0xb4));
}

// F24: keys 0..9 and a double click fit a step; the toolbar's step box follows, so "Fit step"
// shows the same step again (it said "step 0" and jumped back).
TEST(Ux44StepBox, FollowsTheStepFittedByKeysAndDoubleClick) {
  TimelineView v(std::make_shared<const sessions::SessionReader>(ux44_steps_session()));
  v.resize(1400, 500);
  v.show();
  QApplication::processEvents();
  EXPECT_EQ(v.step_box()->text(), "all steps");  // the first view: steps 0..3
  EXPECT_EQ(v.step_box()->value(), 2);           // its centre (200 us)
  QTest::keyClick(v.timeline(), Qt::Key_2);  // step 2 (keys 0..9 are the step numbers: tester56 F2)
  EXPECT_EQ(v.timeline()->view(), (ViewRange{200'000, 300'000}));
  EXPECT_EQ(v.step_box()->value(), 2);
  EXPECT_EQ(v.step_box()->text(), "step 2");
  // show everything, then double-click in step 3's window ([300, 400) us)
  v.timeline()->scale().show(0, 400'000);
  const double x = TimelineWidget::kGutter + v.timeline()->scale().x(350'000);
  QTest::mouseDClick(v.timeline(), Qt::LeftButton, Qt::NoModifier, QPoint(static_cast<int>(x), 40));
  EXPECT_EQ(v.timeline()->view(), (ViewRange{300'000, 400'000}));
  EXPECT_EQ(v.step_box()->value(), 3);
  // an unknown step (key 9: step 9) changes neither the view nor the box
  QTest::keyClick(v.timeline(), Qt::Key_9);
  EXPECT_EQ(v.step_box()->value(), 3);
}

// F14: a PyTorch memory snapshot has no ops; it opens on its Memory page, not on the Timeline's
// sentence. A run still opens on its Timeline.
TEST(Ux44OpenPage, ASnapshotOpensOnItsMemoryPage) {
  MainWindow w;
  ASSERT_EQ(w.open_session(QString::fromStdString(ux44_snapshot_session("oom_p5.pickle")), true), QString());
  auto* page = qobject_cast<QTabWidget*>(w.tabs()->currentWidget());
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(page->tabText(page->currentIndex()), "Memory");
  ASSERT_TRUE(wait_for_analyses(page->currentWidget()));
  EXPECT_NE(page->currentWidget()->findChild<MemoryView*>(), nullptr);  // built, not the lazy tab's empty holder
  EXPECT_EQ(page->tabText(0), "Timeline");                               // the tab and its sentence stay
  ASSERT_EQ(w.open_session(QString::fromStdString(ux44_steps_session()), true), QString());
  page = qobject_cast<QTabWidget*>(w.tabs()->currentWidget());
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(page->tabText(page->currentIndex()), "Timeline");
}

// F10: a session whose allocator history is corrupt: the Memory page says so in place of the
// timelines ("computing..." forever) and of the replay box (a 1 MiB device).
TEST(Ux44Corrupt, TheMemoryPageShowsTheErrorNotComputing) {
  const std::string path = ux44_snapshot_session("training_p4.pickle.gz");
  ux44_corrupt_table(path, "memory_events");
  MemoryView view(std::make_shared<const sessions::SessionReader>(path));
  view.resize(1400, 900);
  view.show();
  wait_for_analyses(&view);
  QApplication::processEvents();
  EXPECT_TRUE(view.summary()->text().startsWith("the allocator history is unreadable: ")) << view.summary()->text().toStdString();
  EXPECT_TRUE(view.summary()->text().contains("malformed")) << view.summary()->text().toStdString();
  EXPECT_FALSE(view.timeline()->isVisible());
  EXPECT_FALSE(view.segment_timeline()->isVisible());
  EXPECT_FALSE(view.replay()->isVisible());
}

// F10: the report of a corrupt session keeps its pages, lists what could not be read in
// index.html, and does not say "wrote" before the errors and exit 2.
TEST(Ux44Corrupt, TheReportSaysItIsIncompleteNotWrote) {
  const std::string path = ux44_snapshot_session("training_p4.pickle.gz");
  ux44_corrupt_table(path, "memory_events");
  const fs::path dir = ux44_tmp("corrupt_report");
  fs::remove_all(dir);
  const auto r = test_support::run_cli(EMBEDSCOPE_UI, "--report " + path + " -o " + dir.string(), fs::temp_directory_path());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err.find("wrote "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error: the report " + dir.string() + "/index.html is incomplete: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the session file is truncated or corrupt"), std::string::npos) << r.err;
  std::ifstream f(dir / "index.html");
  const std::string html((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("Parts of this session could not be read:"), std::string::npos) << html;
  EXPECT_NE(html.find("truncated or corrupt"), std::string::npos) << html;
  EXPECT_TRUE(fs::exists(dir / "memory.png"));
  fs::remove_all(dir);
}

// F15: a live session with measured steps 0 and 1 whose step 2 is in progress: rank 0's load
// counters of step 2 are committed, rank 1's and the step's windows not yet. The rank table
// (analyze) and the sharding-plan table count the same two steps: rank 0 2 x 100 ids, rank 1
// 2 x 50 (they read 300 / 100 on the plan table before).
TEST(Ux44LiveSummary, RankAndPlanTablesCountTheSameMeasuredSteps) {
  const fs::path path = ux44_tmp("live.db");
  fs::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.add_shards({{0, "t0", "table_wise", -1, 0, 0, 0, 100, 0, 8, -1}, {1, "t1", "table_wise", -1, 0, 1, 0, 100, 0, 8, -1}});
    for (int r = 0; r < 2; ++r) w.add_lane({r, 0, "compute", "thread"});
    for (int64_t step = 0; step < 2; ++step)
      for (int r = 0; r < 2; ++r) {
        w.add_step({step, r, step * 1000, step * 1000 + 1000, 0.5, 0, 0});
        w.add_load({step, r, r, 0, r == 0 ? 100 : 50, 0, 10, 20, 0});
      }
    w.add_load({2, 0, 0, 0, 100, 0, 10, 20, 0});  // step 2 in progress: rank 0's counters only
    w.close("complete");
  }
  const sessions::SessionReader s(path.string());
  const sessions::RunStats st = sessions::analyze(s);
  EXPECT_EQ(st.steps, 2);
  ASSERT_EQ(st.ranks.size(), 2u);
  EXPECT_EQ(st.ranks[0].ids_looked_up, 200);
  EXPECT_EQ(st.ranks[1].ids_looked_up, 100);
  const ShardingPlanModel plan(s, st);
  ASSERT_EQ(plan.ranks().size(), 2u);
  EXPECT_EQ(plan.ranks()[0].ids, 200);
  EXPECT_EQ(plan.ranks()[0].bytes_in, 20);
  EXPECT_EQ(plan.ranks()[0].bytes_out, 40);
  ASSERT_EQ(plan.ranks()[0].shards.size(), 1u);
  EXPECT_EQ(plan.ranks()[0].shards[0].ids, 200);
  EXPECT_EQ(plan.ranks()[1].ids, 100);
}

// F19: a live session still in its warm-up has not "ended running before its first measured
// step": the Summary says the run is still in its warm-up.
TEST(Ux44LiveSummary, ALiveSessionInItsWarmUpIsNotSaidToHaveEnded) {
  const fs::path path = ux44_tmp("warmup_live.db");
  fs::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "1");
    w.add_step({-1, 0, 0, 1000, 0.5, 0, 0});
    w.close("complete");
  }
  {  // as a writer that is still running (this process) left it
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const std::string sql = "UPDATE metadata SET value = 'running' WHERE key = 'ended';"
                            "UPDATE metadata SET value = '" + std::to_string(getpid()) + "' WHERE key = 'writer_pid';";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  // and holds its writer lock, as a live writer does (robust55: where flock works, a running
  // session whose lock is free is a crashed run, whatever its pid); released after the window
  struct WriterLock {
    int fd;
    ~WriterLock() { ::close(fd); }
  } lock{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  ASSERT_GE(lock.fd, 0);
  ASSERT_EQ(flock(lock.fd, LOCK_EX | LOCK_NB), 0);
  MainWindow w;
  ASSERT_EQ(w.open_session(QString::fromStdString(path.string()), true), QString());
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->widget(0));
  ASSERT_NE(views, nullptr);
  ASSERT_TRUE(wait_for_analyses(views));  // a running session's snapshot is copied on a worker first
  ASSERT_EQ(views->count(), 4);
  views->setCurrentIndex(1);
  ASSERT_TRUE(wait_for_analyses(views->widget(1)));
  QString said;
  for (auto* label : views->widget(1)->findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_TRUE(said.contains("no complete measured step yet (the run is still in its warm-up)")) << said.toStdString();
  EXPECT_FALSE(said.contains("ended running")) << said.toStdString();
}

// F9: the Runs pane (at most 420 px) of vocab_parallel_vs_sequence_parallel in a 1280 px window
// cut "vocab_parallel + sequence_parallel" to "sequence_paral": a word-wrapped label cannot break
// inside an identifier. breakable() lets it break after '_', so the longest unbreakable piece
// of every run's label fits its row.
TEST(Ux44ScenarioRuns, LongIdentifiersWrapInsteadOfBeingCut) {
  EXPECT_EQ(breakable("a_b.db"), QString("a_") + QChar(0x200B) + "b." + QChar(0x200B) + "db");
  EXPECT_EQ(breakable("plain words"), "plain words");
  bool found = false;
  for (const Scenario& sc : builtin_scenarios()) {
    if (sc.id != "vocab_parallel_vs_sequence_parallel") continue;
    found = true;
    ScenarioView view(sc);
    view.resize(1280, 800);
    view.show();
    QApplication::processEvents();
    int checked = 0;
    for (auto* label : view.findChildren<QLabel*>()) {
      if (!label->text().contains("&#9632;")) continue;  // a run's name
      ++checked;
      EXPECT_LE(label->minimumSizeHint().width(), label->width()) << label->text().toStdString();
    }
    EXPECT_GE(checked, 2);
  }
  EXPECT_TRUE(found);
}

// F13 (compare Memory page): two warm-up steps put the axis at -2, where "-1: the warm-up" said
// too little; and the map's caption ended in "unchanged since" with nothing after it.
TEST(Ux44MemoryCompare, TwoWarmUpStepsAndTheCaptionSaysUpToWhichStep) {
  const fs::path path = ux44_tmp("warm2.db");
  fs::remove(path);
  {
    sessions::SessionWriter w(path.string());
    for (int64_t step = -2; step <= 1; ++step)
      w.add_memory({step, 0, 4 << 20, 8 << 20, 4 << 20, 8 << 20, 4 << 20, 0, 1, 0.25, 0.1});
    const sessions::MemoryBlockRecord block{0, 8 << 20, 0, 4 << 20, 4 << 20, true, "weights"};
    w.add_snapshot({0, 0, -2, 10, "step", {block}});
    w.close("complete");
  }
  MemoryCompare mc({{"A", std::make_shared<const sessions::SessionReader>(path.string())}});
  mc.show(0, 1);
  EXPECT_EQ(mc.plot()->xAxis->label().toStdString(), "step (-2..-1: the warm-up steps, before measured step 0)");
  QString text;
  for (auto* l : mc.findChildren<QLabel*>()) text += l->text() + "\n";
  EXPECT_TRUE(text.contains("the layout of the warm-up (before measured step 0), unchanged up to step 1: 1 segment,"))
      << text.toStdString();
}

// F19: the Memory page of a simulated lm_embedding session names the LM estimate, and shows no
// empty block map, held table, scrubber or replay box (it has neither events nor snapshots).
TEST(Ux44MemoryPage, ASimulatedLmSessionShowsItsEstimateOnly) {
  const fs::path path = ux44_tmp("sim_lm.db");
  fs::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata(sessions::meta::kSimulated, "1");
    w.set_metadata(sessions::meta::kWorkloadJson, R"({"model": "lm_embedding"})");
    w.set_metadata("world_size", "1");
    for (int64_t step = 0; step < 2; ++step) w.add_memory({step, 0, 8 << 20, 8 << 20, 8 << 20, 8 << 20, 0, 0, 1, 0, 0});
    w.close("complete");
  }
  MemoryView view(std::make_shared<const sessions::SessionReader>(path.string()));
  view.resize(1400, 900);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  QApplication::processEvents();
  EXPECT_EQ(view.summary()->text().toStdString(),
            "simulated: the memory estimate of each step (planner/lm_memory_estimate.h), its allocator replay's peak "
            "allocated and reserved; no allocator events or snapshots");
  EXPECT_FALSE(view.stacks_table()->isVisible());
  EXPECT_FALSE(view.replay()->isVisible());
  EXPECT_FALSE(view.map()->isVisible());
  ASSERT_NE(view.findChild<QWidget*>("memory_state_controls"), nullptr);
  EXPECT_FALSE(view.findChild<QWidget*>("memory_state_controls")->isVisible());
}

// F8: the report shows a fitted step with the critical path drawn (keys 1..9 and P had no
// headless way): the slowest measured step, as a second timeline image.
TEST(Ux44Report, TheSlowestStepWithItsCriticalPath) {
  // the step `stats` calls slowest (RunStats::slowest_step; misc54_report_step_test.cpp), where the
  // timeline has its window
  sessions::RunStats st;
  st.slowest_step = 1;
  EXPECT_EQ(report_step(st, {{0, {0, 100}}, {1, {100, 250}}, {2, {250, 400}}}), 1);
  EXPECT_EQ(report_step(st, {{-1, {0, 100}}}), std::nullopt);  // no window for it
  EXPECT_EQ(report_step(sessions::RunStats{}, {{0, {0, 100}}}), std::nullopt);  // no measured step
  const fs::path dir = ux44_tmp("steps_report");
  fs::remove_all(dir);
  const auto r = test_support::run_cli(EMBEDSCOPE_UI, "--report " + ux44_steps_session() + " -o " + dir.string(),
                                       fs::temp_directory_path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + dir.string() + "/index.html"), std::string::npos) << r.err;
  EXPECT_FALSE(QImage(QString::fromStdString((dir / "timeline-step.png").string())).isNull());
  std::ifstream f(dir / "index.html");
  const std::string html((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("<h2>Timeline: step 0 (the slowest measured step), critical path in magenta</h2>"), std::string::npos) << html;
  fs::remove_all(dir);
}

// F13 (the rest): the segment timeline starts above the part of the oldest segment that stays
// active for the whole trace, as the active timeline starts above the blocks live throughout.
TEST(Ux44SegmentBaseline, TheOldestSegmentsActivePartUnderTheWholeTrace) {
  using Band = sessions::SegmentColumn::Band;
  sessions::SegmentTimeline t;
  t.columns.resize(4);
  t.columns[1].bands = {Band{0, 0, 1000, 700}};
  t.columns[2].bands = {Band{0, 0, 1000, 650}, Band{1, 1000, 100, 50}};
  t.columns[3].bands = {Band{0, 0, 1000, 690}};
  t.peak_reserved = 1100;
  EXPECT_EQ(segment_baseline(t, 600), 600);  // column 0 (before the weights) is cut
  EXPECT_EQ(segment_baseline(t, 680), 650);  // never more than the bottom band's least active part
  EXPECT_EQ(segment_baseline(t, 0), 0);
  EXPECT_EQ(segment_baseline(t, 800), 0);    // no column holds that much in its bottom band
  auto other = t;
  other.columns[3].bands = {Band{1, 0, 1000, 690}};  // another segment at the bottom: no baseline
  EXPECT_EQ(segment_baseline(other, 600), 0);
  SegmentTimelineChart chart;
  chart.set_data(nullptr, t, {}, {}, 680);
  EXPECT_EQ(chart.baseline_bytes(), 650);
  EXPECT_TRUE(chart.baseline_enabled());
}

// F19: one session given to --compare is "needs two sessions", not "needs a window".
TEST(Ux44CompareFlag, OneSessionIsNoComparison) {
  const std::string one = ux44_steps_session();
  const auto r = test_support::run_cli(EMBEDSCOPE_UI, "--compare " + one, fs::temp_directory_path());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: --compare needs two or more session files; given only " + one), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("needs a window"), std::string::npos) << r.err;
}
