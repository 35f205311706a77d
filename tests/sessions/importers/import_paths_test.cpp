// import_paths: one entry for every format (traces and memory snapshots), with the fraction
// of the work done and a cancel flag (the workbench's File > Open imports through it).
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;

TEST(ImportPaths, ReportsTheFractionDoneByFileSizeUpToOne) {
  // two rank files: after each one's parse, 0.8 x its share of the bytes on disk; then 1
  const std::string dir = trace_fixture("hta_small");
  const auto a = static_cast<double>(std::filesystem::file_size(dir + "/rank0.json"));
  const auto b = static_cast<double>(std::filesystem::file_size(dir + "/rank1.json"));
  std::vector<double> seen;
  importers::ImportOptions opt;
  opt.fraction = [&](double f) { seen.push_back(f); };
  SessionWriter w(scratch_db("paths_fraction.db"), true);
  const auto sum = importers::import_paths({dir}, w, opt);
  w.close("complete");
  EXPECT_EQ(sum.format, "kineto_json");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_DOUBLE_EQ(seen[0], 0.8 * a / (a + b));
  EXPECT_DOUBLE_EQ(seen[1], 0.8);
  EXPECT_DOUBLE_EQ(seen[2], 1.0);
}

TEST(ImportPaths, CancelStopsBeforeTheNextFileAndWritesNothingMore) {
  // cancelled after the first file was read: ImportCancelled, no ops written
  const std::string dir = trace_fixture("hta_small");
  int asked = 0;
  importers::ImportOptions opt;
  opt.cancelled = [&] { return ++asked >= 3; };  // 1: before expanding, 2: file 1, 3: file 2
  const std::string db = scratch_db("paths_cancel.db");
  {
    SessionWriter w(db, true);
    EXPECT_THROW(importers::import_paths({dir}, w, opt), importers::ImportCancelled);
    EXPECT_EQ(asked, 3);
    EXPECT_EQ(w.ops_received(), 0);
    w.close("cancelled");
  }
  const SessionReader r(db);
  EXPECT_EQ(r.status(), "cancelled");
  EXPECT_TRUE(r.lanes().empty());
  EXPECT_NE(r.meta("imported"), "1");  // never claimed as an import
}

TEST(ImportPaths, ImportsAMemorySnapshotAsTheCliDoes) {
  importers::ImportOptions opt;
  std::vector<double> seen;
  opt.fraction = [&](double f) { seen.push_back(f); };
  SessionWriter w(scratch_db("paths_snapshot.db"), true);
  const auto sum =
      importers::import_paths({std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/oom_p5.pickle"}, w, opt);
  w.close("complete");
  EXPECT_EQ(sum.format, "torch_memory_snapshot");
  EXPECT_FALSE(sum.ranks.empty());
  EXPECT_EQ(seen, (std::vector<double>{0.8, 1.0}));
  const SessionReader r(scratch_db("paths_snapshot.db"));
  EXPECT_EQ(r.meta("import_format"), "torch_memory_snapshot");
}

TEST(ImportPaths, RefusesASnapshotAmongTraces) {
  SessionWriter w(scratch_db("paths_mixed.db"), true);
  try {
    importers::import_paths({trace_fixture("epoch.json"), std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/oom_p5.pickle"},
                            w, {});
    FAIL() << "no error";
  } catch (const importers::ImportError& e) {
    EXPECT_NE(std::string(e.what()).find("epoch.json: not a PyTorch memory snapshot, among 2 files of which"), std::string::npos)
        << e.what();
  }
  w.close("crashed");
}

// tester34 D14: a directory of per-rank traces with a config.json beside them imports the traces
// and records the other file (skipped_not_a_trace, info, naming it and why); a directory in
// which nothing is a trace still fails on its first file, and a non-trace named on its own too.
TEST(ImportPaths, ADirectorysNonTraceJsonIsSkippedWithAProblem) {
  const auto dir = import_scratch() / "with_config";
  std::filesystem::create_directories(dir);
  for (const char* f : {"rank0.json", "rank1.json"})
    std::filesystem::copy_file(trace_fixture("hta_small/") + f, dir / f, std::filesystem::copy_options::overwrite_existing);
  { std::ofstream(dir / "config.json") << "{\"lr\": 0.1}\n"; }
  { std::ofstream(dir / "notes.json") << "[1, 2]\n"; }
  const auto sel = importers::select_inputs({dir.string()});
  EXPECT_EQ(sel.files, (std::vector<std::string>{(dir / "rank0.json").string(), (dir / "rank1.json").string()}));
  SessionWriter w(scratch_db("paths_config.db"), true);
  const auto sum = importers::import_paths({dir.string()}, w, {});
  w.close("complete");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0, 1}));
  const SessionReader r(scratch_db("paths_config.db"));
  const auto stored = r.import_stats();
  const ImportStat* p = problem(stored, "skipped_not_a_trace");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, "info");  // tester45 F12.6: left out, not damage
  EXPECT_EQ(p->count, 2);
  EXPECT_EQ(p->source, (dir / "config.json").string());
  EXPECT_EQ(p->example.rfind("not a format embedscope import reads", 0), 0u) << p->example;
  EXPECT_NE(problem(sum.problems, "skipped_not_a_trace"), nullptr);
  // nothing importable in the directory: its first file's error
  const auto only = import_scratch() / "only_config";
  std::filesystem::create_directories(only);
  { std::ofstream(only / "config.json") << "{\"lr\": 0.1}\n"; }
  try {
    importers::select_inputs({only.string()});
    ADD_FAILURE() << "a directory without traces was accepted";
  } catch (const importers::ImportError& e) {
    EXPECT_EQ(std::string(e.what()).rfind((only / "config.json").string() + ": not a format embedscope import reads", 0), 0u)
        << e.what();
  }
  // a file named on its own is kept (detect() refuses it when it is imported)
  EXPECT_EQ(importers::select_inputs({(dir / "config.json").string()}).files.size(), 1u);
}

// The workbench's File > Open of a trace with no event (tester35 D12): refused like the CLI, with
// the reason; an empty memory snapshot is a real state and would pass (refuse_empty_trace).
TEST(ImportPaths, ATraceWithNoEventIsRefusedWithTheReason) {
  const auto file = import_scratch() / "paths_no_event.json";
  { std::ofstream(file) << "{\"traceEvents\": [\n"; }
  SessionWriter w(scratch_db("paths_no_event.db"), true);
  try {
    importers::import_paths({file.string()}, w, {});
    ADD_FAILURE() << "a trace with no event was imported";
  } catch (const importers::ImportError& e) {
    EXPECT_EQ(std::string(e.what()), file.string() + ": no event imported (the text ends at line 2, column 1 inside the "
                                                      "trace (no closing ']' or '}'): truncated after 0 events); no "
                                                      "session written");
  }
  w.close("crashed");
  importers::ImportSummary snapshot;
  snapshot.format = "torch_memory_snapshot";
  snapshot.events = {{"segments", 0}};
  EXPECT_NO_THROW(importers::refuse_empty_trace(snapshot));
  importers::ImportSummary one_step;
  one_step.format = "nsys_sqlite";
  one_step.events = {{"kernels", 0}, {"steps", 1}};
  EXPECT_NO_THROW(importers::refuse_empty_trace(one_step));
}
