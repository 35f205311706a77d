// core/empty_pages.h (tester34 D19): an imported trace's Load and Memory pages say why they are
// empty instead of drawing empty charts; a run session and a trace that holds the data draw them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>
#include <QTabWidget>
#include <QTableView>
#include <QTreeView>

#include <memory>

#include <filesystem>
#include <string>

#include "core/empty_pages.h"
#include "models/rank_stats_model.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "shell/main_window.h"
#include "views/load_view.h"
#include "views/memory_view.h"
#include "views/summary_view.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// One rank, one step; `imported` marks it as an imported kineto_json trace; with `load` one load
// counter, with `memory` one memory counter.
std::string empty_pages_session(const std::string& name, bool imported, bool load, bool memory,
                                const std::string& format = "kineto_json") {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  if (imported) {
    w.set_metadata(sessions::meta::kImported, "1");
    w.set_metadata(sessions::meta::kImportFormat, format);
  } else {
    w.set_metadata(sessions::meta::kWorkloadName, name);
  }
  w.add_lane({0, 0, "compute", "thread"});
  w.add_step({0, 0, 0, 1'000'000, 0.0, 0, 0});
  if (load) w.add_load({.step = 0, .rank = 0, .table = 0, .shard = 0, .ids = 12});
  if (memory) w.add_memory({.step = 0, .rank = 0, .allocated = 1 << 20, .reserved = 2 << 20});
  w.close("complete");
  return path.string();
}
}  // namespace

TEST(EmptyPages, AnImportedTraceWithoutCountersSaysWhyARunNeverDoes) {
  const sessions::SessionReader trace(empty_pages_session("es_empty_trace", true, false, false));
  EXPECT_EQ(load_page_empty_reason(trace).rfind("No load counters: an imported kineto_json trace records kernels", 0), 0u)
      << load_page_empty_reason(trace);
  EXPECT_EQ(memory_page_empty_reason(trace).rfind("No allocator history: this imported kineto_json trace", 0), 0u)
      << memory_page_empty_reason(trace);
  EXPECT_NE(memory_page_empty_reason(trace).find("PyTorch memory snapshot"), std::string::npos);

  const sessions::SessionReader with_data(empty_pages_session("es_empty_trace_data", true, true, true));
  EXPECT_EQ(load_page_empty_reason(with_data), "");
  EXPECT_EQ(memory_page_empty_reason(with_data), "");

  // a snapshot: its Load page says what a snapshot is; its Memory page has the allocator's history
  const sessions::SessionReader snap(empty_pages_session("es_empty_snap", true, false, true, "torch_memory_snapshot"));
  EXPECT_EQ(load_page_empty_reason(snap).rfind("No load counters: an imported PyTorch memory snapshot records the caching "
                                               "allocator's history (the Memory page), not the ids", 0),
            0u)
      << load_page_empty_reason(snap);
  EXPECT_EQ(memory_page_empty_reason(snap), "");

  // a run that recorded nothing yet still gets its own pages (and their own notes)
  const sessions::SessionReader run(empty_pages_session("es_empty_run", false, false, false));
  EXPECT_EQ(load_page_empty_reason(run), "");
  EXPECT_EQ(memory_page_empty_reason(run), "");
}

TEST(EmptyPages, TheWorkbenchShowsTheReasonInPlaceOfTheCharts) {
  for (const bool imported : {true, false}) {
    MainWindow w;
    ASSERT_EQ(w.open_path(QString::fromStdString(empty_pages_session(imported ? "es_empty_win_trace" : "es_empty_win_run",
                                                                     imported, false, false)),
                          true),
              "");
    auto* views = qobject_cast<QTabWidget*>(w.tabs()->currentWidget());
    ASSERT_NE(views, nullptr);
    for (int i = 0; i < views->count(); ++i) views->setCurrentIndex(i);  // builds the lazy pages
    auto* load_page = views->widget(2);
    auto* memory_page = views->widget(3);
    ASSERT_EQ(views->tabText(2), "Load");
    ASSERT_EQ(views->tabText(3), "Memory");
    const auto* load_reason = load_page->findChild<QLabel*>("empty_page_reason");
    const auto* memory_reason = memory_page->findChild<QLabel*>("empty_page_reason");
    if (imported) {
      ASSERT_NE(load_reason, nullptr);
      ASSERT_NE(memory_reason, nullptr);
      EXPECT_TRUE(load_reason->text().startsWith("No load counters")) << load_reason->text().toStdString();
      EXPECT_TRUE(memory_reason->text().startsWith("No allocator history")) << memory_reason->text().toStdString();
      EXPECT_EQ(load_page->findChild<LoadView*>(), nullptr);
      EXPECT_EQ(memory_page->findChild<MemoryView*>(), nullptr);
    } else {
      EXPECT_EQ(load_reason, nullptr);
      EXPECT_EQ(memory_reason, nullptr);
      EXPECT_NE(load_page->findChild<LoadView*>(), nullptr);
      EXPECT_NE(memory_page->findChild<MemoryView*>(), nullptr);
    }
    wait_for_analyses(&w);
  }
}

TEST(EmptyPages, TheSummaryOfATraceHasNoImbalanceFigureAndSaysItHasNoPlan) {
  auto trace = std::make_shared<const sessions::SessionReader>(empty_pages_session("es_empty_sum_trace", true, false, false));
  SummaryView view(trace);
  ASSERT_TRUE(wait_for_analyses(&view));
  QString all;
  for (const auto* l : view.findChildren<QLabel*>()) all += l->text() + "\n";
  EXPECT_TRUE(all.contains("load imbalance not measured (a trace has no load counters)")) << all.toStdString();
  EXPECT_FALSE(all.contains("imbalance (ids looked up max/mean) 1.00")) << all.toStdString();
  const auto* caption = view.findChild<QLabel*>("sharding_plan_caption");
  ASSERT_NE(caption, nullptr);
  EXPECT_EQ(caption->text(), "<b>Sharding plan</b>: none in this session (a trace records what ran, not the embedding "
                             "tables and where they were placed)");
  for (const auto* tree : view.findChildren<QTreeView*>()) EXPECT_TRUE(tree->isHidden());

  // a run keeps its figure (a step of 12 ids on its only rank: max / mean 1.00)
  auto run = std::make_shared<const sessions::SessionReader>(empty_pages_session("es_empty_sum_run", false, true, false));
  SummaryView run_view(run);
  ASSERT_TRUE(wait_for_analyses(&run_view));
  QString run_text;
  for (const auto* l : run_view.findChildren<QLabel*>()) run_text += l->text() + "\n";
  EXPECT_TRUE(run_text.contains("imbalance (ids looked up max/mean) 1.00")) << run_text.toStdString();
}

// tester37 #12: a trace without profiler steps had a row of zeros (overlap 0.0 %) under "no
// profiler steps in the trace". Its figures are now over the whole trace (RunStats::whole_trace):
// the rank's window is its one op [0, 1000) ns, all of it compute; no comm, so overlap n/a.
// A run keeps its table too.
TEST(EmptyPages, ATraceWithoutStepsHasNoRowOfZeros) {
  const auto path = std::filesystem::temp_directory_path() / ("es_empty_nosteps_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata(sessions::meta::kImported, "1");
    w.set_metadata(sessions::meta::kImportFormat, "nsys_sqlite");
    w.add_lane({0, 0, "compute", "thread"});
    const sessions::OpEvent op{.rank = 0, .lane = sessions::Lane::compute, .category = sessions::OpCategory::other,
                               .name = "kernel", .step = 0, .start_ns = 0, .end_ns = 1000};
    w.add_ops(&op, 1);
    w.close("complete");
  }
  SummaryView view(std::make_shared<const sessions::SessionReader>(path.string()));
  ASSERT_TRUE(wait_for_analyses(&view));
  QTableView* ranks = nullptr;
  for (auto* t : view.findChildren<QTableView*>())
    if (t->model() && t->model()->columnCount() > 5 && t->model()->headerData(1, Qt::Horizontal).toString() == "compute")
      ranks = t;
  ASSERT_NE(ranks, nullptr);
  EXPECT_FALSE(ranks->isHidden());
  const auto* m = ranks->model();
  ASSERT_EQ(m->rowCount(), 1);
  EXPECT_EQ(m->data(m->index(0, RankStatsModel::Compute), Qt::UserRole).toLongLong(), 1000);
  EXPECT_EQ(m->data(m->index(0, RankStatsModel::Idle), Qt::UserRole).toLongLong(), 0);
  EXPECT_EQ(m->data(m->index(0, RankStatsModel::Overlap)).toString(), "n/a");
  QString text;
  for (const auto* l : view.findChildren<QLabel*>()) text += l->text() + "\n";
  EXPECT_TRUE(text.contains("no profiler steps: figures over the whole trace")) << text.toStdString();

  auto run = std::make_shared<const sessions::SessionReader>(empty_pages_session("es_empty_steps_run", false, true, true));
  SummaryView run_view(run);
  ASSERT_TRUE(wait_for_analyses(&run_view));
  for (auto* t : run_view.findChildren<QTableView*>()) {
    if (t->model() && t->model()->columnCount() > 5 && t->model()->headerData(1, Qt::Horizontal).toString() == "compute") {
      EXPECT_FALSE(t->isHidden());
    }
  }
}

// tester37 #7: a snapshot that recorded an out-of-memory imports complete (the import did), but its
// Summary said nothing of the OOM; it says it in red, with the request and the stream.
TEST(EmptyPages, TheSummaryOfASnapshotSaysTheOutOfMemoryItRecorded) {
  const auto path = std::filesystem::temp_directory_path() / ("es_empty_snap_oom_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata(sessions::meta::kImported, "1");
    w.set_metadata(sessions::meta::kImportFormat, "torch_memory_snapshot");
    w.add_rank({0, "h", "cuda:0", 1 << 30});
    sessions::MemoryEvent oom;
    oom.rank = 0, oom.time_ns = 80'000, oom.action = "oom", oom.size = 30 << 20, oom.requested = 30 << 20, oom.stream = 7;
    w.add_memory_events({oom});
    w.close("complete");
  }
  SummaryView view(std::make_shared<const sessions::SessionReader>(path.string()));
  ASSERT_TRUE(wait_for_analyses(&view));
  QString all;
  for (const auto* l : view.findChildren<QLabel*>()) all += l->text() + "\n";
  EXPECT_TRUE(all.contains("<b>out of memory</b> recorded on rank 0: 30.0 MiB requested on stream 7 at 80.0 us"))
      << all.toStdString();
}
