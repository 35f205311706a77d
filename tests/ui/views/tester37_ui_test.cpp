// tester37 #8 (a snapshot without a history on the Memory page) and #13 (unknown collective
// bytes on the Summary page).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QDoubleSpinBox>
#include <QLabel>
#include <QTableView>
#include <QTabWidget>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <qcustomplot.h>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "core/empty_pages.h"
#include "core/import_target.h"
#include "jobs/analysis_job.h"
#include "shell/main_window.h"
#include "views/compare_view.h"
#include "views/memory_view.h"
#include "views/summary_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
std::filesystem::path t37_ui_dir() {
  const auto d = std::filesystem::temp_directory_path() / ("es_t37ui_" + std::to_string(getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// The session `db` (in t37_ui_dir) of the Kineto trace file `trace`, imported; returns its path.
std::string t37_import_trace(const std::string& trace, const std::string& db) {
  const std::string path = (t37_ui_dir() / db).string();
  sessions::SessionWriter w(path, true);
  sessions::importers::import_kineto_json({trace}, w, {});
  w.close("complete");
  return path;
}

// The session `db` (in t37_ui_dir) of tests/data's training_p4.pickle, imported; returns its path.
std::string t37_import_training_p4(const std::string& db) {
  const std::string path = (t37_ui_dir() / db).string();
  sessions::SessionWriter w(path, true);
  sessions::torch_snapshot::import_torch_memory_snapshot(
      std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/training_p4.pickle", w);
  w.close("complete");
  return path;
}
}  // namespace

// onlyseg.pickle's content: one 2 MiB segment, no trace entry. The page says why it has no
// history and the Replay box offers the 2 MiB the dump reserves (it offered 1 MiB).
TEST(Tester37Ui, ASnapshotWithoutHistorySaysSoAndReplayOffersItsReservedBytes) {
  namespace ts = sessions::torch_snapshot;
  ts::MemorySnapshotFile s;
  s.stacks.push_back({});
  ts::Segment seg;
  seg.total_size = 2 << 20;
  seg.blocks = {{0, 2 << 20, 0, ts::BlockState::inactive, 0, {}}};
  s.segments.push_back(seg);
  s.device_traces = {{}};
  const std::string path = (t37_ui_dir() / "onlyseg.db").string();
  {
    sessions::SessionWriter w(path, true);
    ts::import_torch_memory_snapshots({{&s, "onlyseg.pickle"}}, w);
    w.close("complete");
  }
  MemoryView view(std::make_shared<const sessions::SessionReader>(path));
  ASSERT_TRUE(wait_for_analyses(&view));
  QString said;
  for (auto* label : view.findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_TRUE(said.contains("no trace entries: memory history was not recorded (call "
                            "torch.cuda.memory._record_memory_history() before the workload")) << said.toStdString();
  EXPECT_TRUE(said.contains("2.0 MiB reserved")) << said.toStdString();
  bool offered = false;
  for (auto* sp : view.findChildren<QDoubleSpinBox*>())
    if (sp->suffix() == " MiB" && sp->value() == 2) offered = true;
  EXPECT_TRUE(offered) << "the replay box offers the dump's 2 MiB";
}

// A Kineto trace whose NCCL kernel was launched from a record_param_comms without arguments:
// the Summary's per-rank bytes and the collectives' bytes sent / received per step read "unknown", not "0 B".
TEST(Tester37Ui, TheSummarySaysUnknownForBytesATraceDidNotRecord) {
  auto ev = [](const std::string& cat, const std::string& name, int pid, int tid, int64_t ts, int64_t dur,
               nlohmann::json args) {
    return nlohmann::json{{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", pid}, {"tid", tid},
                          {"ts", ts},  {"dur", dur}, {"args", args}};
  };
  const nlohmann::json j{{"schemaVersion", 1},
                         {"distributedInfo", {{"rank", 0}, {"world_size", 1}}},
                         {"traceEvents",
                          {ev("user_annotation", "ProfilerStep#1", 1, 1, 1000, 200, nlohmann::json::object()),
                           ev("cpu_op", "record_param_comms", 1, 1, 1010, 20, nlohmann::json::object()),
                           ev("cuda_runtime", "cudaLaunchKernel", 1, 1, 1015, 5, {{"correlation", 7}}),
                           ev("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 0, 7, 1050, 100,
                              {{"device", 0}, {"stream", 7}, {"correlation", 7}})}}};
  const std::string trace = (t37_ui_dir() / "noargs.json").string();
  std::ofstream(trace) << j.dump();
  const std::string path = t37_import_trace(trace, "noargs.db");
  SummaryView view(std::make_shared<const sessions::SessionReader>(path));
  ASSERT_TRUE(wait_for_analyses(&view));
  int unknown = 0, zero = 0;
  for (auto* table : view.findChildren<QTableView*>()) {
    auto* m = table->model();
    for (int r = 0; r < m->rowCount(); ++r)
      for (int c = 0; c < m->columnCount(); ++c) {
        const QString h = m->headerData(c, Qt::Horizontal).toString();
        if (!h.contains("bytes")) continue;
        const QString t = m->data(m->index(r, c)).toString();
        unknown += t == "unknown";
        zero += t == "0 B";
      }
  }
  EXPECT_EQ(unknown, 4);  // rank table: bytes sent, bytes received; the all-reduce's bytes sent / received per step
  EXPECT_EQ(zero, 0);
}

// #14: training_p4.pickle's Summary showed 30.5 % / 47.9 % (the dump's) in an unlabelled
// "fragmentation" column beside two peaks; it now shows the figure the Memory page and stats give
// at peak allocated (21.3 % / 42.9 %) and says so.
TEST(Tester37Ui, ASnapshotsSummaryFragmentationIsTheMemoryPagesAtPeak) {
  const std::string path = t37_import_training_p4("training_p4.db");
  SummaryView view(std::make_shared<const sessions::SessionReader>(path));
  ASSERT_TRUE(wait_for_analyses(&view));
  QStringList cells;
  for (auto* table : view.findChildren<QTableView*>()) {
    auto* m = table->model();
    for (int c = 0; c < m->columnCount(); ++c) {
      if (!m->headerData(c, Qt::Horizontal).toString().startsWith("fragmentation")) continue;
      cells << m->headerData(c, Qt::Horizontal).toString();
      for (int r = 0; r < m->rowCount(); ++r) cells << m->data(m->index(r, c)).toString();
    }
  }
  EXPECT_EQ(cells, (QStringList{"fragmentation at peak allocated", "21.3 %", "42.9 %"})) << cells.join(" | ").toStdString();
}

// #9: two imports whose profiler steps are #4..6 and #1009..1010 share the step axis by ordinal
// (0, 1, 2 and 0, 1), and B's only rank, rank 1, has its place on the per-rank axis.
TEST(Tester37Ui, CompareAlignsStepsByOrdinalAndShowsEveryRank) {
  auto write = [](const std::string& name, int rank, std::vector<int> steps) {
    nlohmann::json evs = nlohmann::json::array();
    int64_t ts = 1000;
    for (int n : steps) {
      evs.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#" + std::to_string(n)},
                     {"pid", 1}, {"tid", 1}, {"ts", ts}, {"dur", 100}});
      evs.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", 1}, {"tid", 1}, {"ts", ts + 1},
                     {"dur", 50}});
      ts += 100;
    }
    const nlohmann::json j{{"schemaVersion", 1},
                           {"distributedInfo", {{"rank", rank}, {"world_size", 2}}},
                           {"traceEvents", evs}};
    const std::string trace = (t37_ui_dir() / (name + ".json")).string();
    std::ofstream(trace) << j.dump();
    return std::make_shared<const sessions::SessionReader>(t37_import_trace(trace, name + ".db"));
  };
  CompareView view({{"A", write("cmp_a", 0, {4, 5, 6})}, {"B", write("cmp_b", 1, {1009, 1010})}});
  view.resize(1200, 800);
  ASSERT_TRUE(wait_for_analyses(&view));
  ASSERT_EQ(view.step_plot()->graphCount(), 2);
  auto keys = [&](int g) {
    std::vector<double> k;
    for (auto it = view.step_plot()->graph(g)->data()->begin(); it != view.step_plot()->graph(g)->data()->end(); ++it)
      k.push_back(it->key);
    return k;
  };
  EXPECT_EQ(keys(0), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(keys(1), (std::vector<double>{0, 1}));
  EXPECT_LE(view.step_plot()->xAxis->range().upper, 3);
  EXPECT_GE(view.exposed_plot()->xAxis->range().upper, 1.4);  // rank 1's bar is inside the axis
}

// #19: a read-only (mode 555) folder of traces is not written into, whoever runs the workbench
// (root passes access(W_OK) everywhere): the session goes to the cache folder.
TEST(Tester37Ui, AReadOnlyDataFolderIsNotWrittenIntoEvenByRoot) {
  const auto dir = t37_ui_dir() / "ro";
  std::filesystem::create_directories(dir / "data");
  const std::string src = (dir / "data" / "t.json").string();
  std::ofstream(src) << "{\"traceEvents\": []}";
  chmod((dir / "data").c_str(), 0555);
  const ImportTarget t = import_target({src}, (dir / "cache").string());
  chmod((dir / "data").c_str(), 0755);
  EXPECT_TRUE(t.in_cache);
  EXPECT_EQ(t.path, (dir / "cache" / "t.db").string());
}

// #20: Compare's header says a snapshot session is an imported memory snapshot (it read
// "training_p4.pickle, complete on 2 ranks, cuda", like a run).
TEST(Tester37Ui, CompareNamesASnapshotSessionAsOne) {
  const std::string path = t37_import_training_p4("cmp_snap.db");
  auto snap = std::make_shared<const sessions::SessionReader>(path);
  CompareView view({{"A", snap}, {"B", snap}});
  ASSERT_TRUE(wait_for_analyses(&view));
  QString head;
  for (const auto* l : view.findChildren<QLabel*>())
    if (l->text().contains("&#9632;")) head = l->text();
  EXPECT_TRUE(head.contains("cmp_snap.db: imported memory snapshot training_p4.pickle, complete on 2 ranks"))
      << head.toStdString();
}

// #20: a snapshot session's Timeline tab says it has no ops and where its history is (it was an
// empty axis "0 ns .. 800 ns"); a trace keeps its timeline.
TEST(Tester37Ui, ASnapshotsTimelineTabSaysItHasNoOps) {
  const std::string path = t37_import_training_p4("tl_snap.db");
  EXPECT_EQ(timeline_page_empty_reason(sessions::SessionReader(path)).rfind(
                "No ops: a PyTorch memory snapshot records the caching allocator's history", 0),
            0U);
  const std::string trace = (t37_ui_dir() / "tl_trace.json").string();
  std::ofstream(trace) << R"({"traceEvents": [{"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]})";
  const std::string db = t37_import_trace(trace, "tl_trace.db");
  EXPECT_EQ(timeline_page_empty_reason(sessions::SessionReader(db)), "");
}

// #20: comparing two snapshot sessions (no steps) shows a sentence, not two bare chart axes.
TEST(Tester37Ui, CompareOfSessionsWithoutStepsSaysWhyThereAreNoCharts) {
  const std::string path = t37_import_training_p4("cmp_nosteps.db");
  auto snap = std::make_shared<const sessions::SessionReader>(path);
  CompareView view({{"A", snap}, {"B", snap}});
  ASSERT_TRUE(wait_for_analyses(&view));
  const auto* note = view.findChild<QLabel*>("no_steps_note");
  ASSERT_NE(note, nullptr);
  EXPECT_TRUE(note->text().startsWith("No step-time or exposed-communication chart")) << note->text().toStdString();
  EXPECT_TRUE(view.step_plot()->isHidden());
  EXPECT_TRUE(view.exposed_plot()->isHidden());
}

// #20: a trace given to compare: the error says compare takes sessions and how to make one.
TEST(Tester37Ui, CompareOfATraceSaysToImportItFirst) {
  const std::string trace = (t37_ui_dir() / "cmp_trace.json").string();
  std::ofstream(trace) << R"({"traceEvents": [{"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]})";
  const std::string db = t37_import_trace(trace, "cmp_trace_ok.db");
  MainWindow w;
  const QString err = w.open_compare({QString::fromStdString(db), QString::fromStdString(trace)}, true);
  EXPECT_TRUE(err.contains("not an SQLite database")) << err.toStdString();
  EXPECT_TRUE(err.contains("compare takes sessions")) << err.toStdString();
  EXPECT_TRUE(err.contains("embedscope import FILE")) << err.toStdString();
}
