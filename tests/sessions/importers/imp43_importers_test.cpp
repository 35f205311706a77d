// tester42's importer findings (imp43):
//  F9  the CLI's HTA table named its column of kernels + memcpy + memset + sync records "kernels"
//      (12515 beside `events ... kernels 9876`): now "GPU events", as the workbench and --json say;
//  F24 an Nsight export's NVTX ranges shared their thread's lane with its runtime calls (a 392.9 ms
//      range hid them): now a lane of kind `annotation` under the thread;
//  F28 `export --format chrome` then `import` gave one rank and 0 steps: the export writes
//      ProfilerStep#N spans and the importer takes processes named "rank N" as the ranks;
//  F12 `merge` of sessions whose time ranges do not overlap exited 0: refused as import refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"
#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using namespace embedscope::sessions;
using embedscope::sessions::testing::import_into;
using embedscope::sessions::testing::import_scratch;
using embedscope::sessions::testing::problem;
using embedscope::sessions::testing::scratch_db;

embedscope::test_support::CliResult imp43_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}

const std::string kImp43Traces = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces";
const std::string kImp43Fuser = std::string(EMBEDSCOPE_SHARED_DATA) + "/nsys/fuser_h200.sqlite";

// A session of `ranks` ranks, each with lanes "compute" and "comm", 3 steps of 1000 ns from
// 1000 ns (rank r's shifted by r ns) and in each step one dense op on compute and one comm op.
std::string imp43_session(const std::string& name, int ranks) {
  const std::string db = scratch_db(name);
  fs::remove(db);
  SessionWriter w(db, true);
  w.set_metadata("world_size", std::to_string(ranks));
  for (int r = 0; r < ranks; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.device = "cpu";
    w.add_rank(ri);
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    std::vector<OpEvent> ops;
    for (int s = 0; s < 3; ++s) {
      const int64_t t0 = 1000 + 1000 * s + r;
      StepMetric m;
      m.step = s;
      m.rank = r;
      m.start_ns = t0;
      m.end_ns = t0 + 1000;
      w.add_step(m);
      OpEvent d;
      d.rank = r;
      d.lane = Lane::compute;
      d.category = OpCategory::dense;
      d.name = "dense_fwd";
      d.step = s;
      d.start_ns = t0 + 100;
      d.end_ns = t0 + 400;
      ops.push_back(d);
      OpEvent c = d;
      c.lane = Lane::comm;
      c.category = OpCategory::comm;
      c.name = "output_dist/all_to_all";
      c.start_ns = t0 + 300;
      c.end_ns = t0 + 700;
      ops.push_back(c);
    }
    w.add_ops(ops);
  }
  w.close("complete");
  return db;
}
}  // namespace

// F9: the column counts every GPU event (HTA's figures take kernels, memcpy, memset and sync
// records); trace_diff_test: 9876 kernels + 4856 memcpy + 900 memset - 3117 of the last step =
// 12515 (tester42's arithmetic), named as the workbench and --json (gpu_events) name it.
TEST(Imp43GpuEventsColumn, TheImportTableSaysGpuEventsNotKernels) {
  const std::string trace = kImp43Traces + "/trace_diff_test.json.gz";
  if (!fs::exists(trace)) GTEST_SKIP() << trace << " is absent (shared test data)";
  const std::string db = scratch_db("imp43_f9.db");
  fs::remove(db);
  auto r = imp43_cli("import " + trace + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("kernels 9876, memcpy 4856, memset 900"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("non-compute GPU events last step no launch"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("non-compute   kernels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPU events   kernels, memcpy, memset and sync records"), std::string::npos) << r.out;
  // tester47 F6: of the 3117 left out, 2503 are the last step's and 614 have no launch (in no step)
  EXPECT_NE(r.out.find("     12515      2503       614\n"), std::string::npos) << r.out;
  // stats prints the same table
  r = imp43_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("non-compute GPU events last step no launch"), std::string::npos) << r.out;
  // tester47 F6: the last step kept, the column titled "last step" is 0; the 614 events with no
  // launch (in no profiler step: sqlite3 ... group by step -> -1|614) stay out, under their own name
  r = imp43_cli("stats " + db + " --keep-last-step");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("     15018         0       614\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  no launch    GPU events with no launching host op"), std::string::npos) << r.out;
  r = imp43_cli("stats " + db + " --keep-last-step --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto k = nlohmann::json::parse(r.out)["gpu_kernels"]["ranks"][0];
  EXPECT_EQ(k["gpu_events"], 15018);
  EXPECT_EQ(k["dropped_events"], 614);
  EXPECT_EQ(k["dropped_last_step_events"], 0);
  EXPECT_EQ(k["dropped_no_launch_events"], 614);
  // --json: the same count under gpu_events
  fs::remove(db);
  r = imp43_cli("import " + trace + " -o " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpu_kernels"]["ranks"][0]["gpu_events"], 12515);
  EXPECT_EQ(j["gpu_kernels"]["ranks"][0]["dropped_events"], 3117);
  EXPECT_EQ(j["gpu_kernels"]["ranks"][0]["dropped_last_step_events"], 2503);
  EXPECT_EQ(j["gpu_kernels"]["ranks"][0]["dropped_no_launch_events"], 614);
}

// F24: fuser_h200.sqlite holds 652 NvtxPushPopRange events and 968 runtime calls, all on thread
// 30156 (sqlite3: SELECT eventType, globalTid, count(*), max(end - start) FROM NVTX_EVENTS GROUP BY
// 1, 2 -> 59 | 281980910466508 | 652 | 392917494; CUPTI_ACTIVITY_KIND_RUNTIME: 968, same tid).
TEST(Imp43NvtxLanes, FuserNvtxRangesHaveALaneOfTheirOwnUnderTheThread) {
  if (!fs::exists(kImp43Fuser)) GTEST_SKIP() << kImp43Fuser << " is absent (shared test data)";
  const std::string db = scratch_db("imp43_fuser.db");
  {
    SessionWriter w(db, true);
    importers::import_nsys_sqlite({kImp43Fuser}, w, {});
    w.close("complete");
  }
  const SessionReader r(db);
  std::vector<std::pair<std::string, std::string>> lanes;
  for (const auto& l : r.lanes()) lanes.push_back({l.name, l.kind});
  ASSERT_EQ(lanes.size(), 3u);
  EXPECT_EQ(lanes[0], std::make_pair(std::string("thread 30156 (test_matmul)"), std::string("thread")));
  EXPECT_EQ(lanes[1], std::make_pair(std::string("thread 30156 (test_matmul) NVTX"), std::string("annotation")));
  EXPECT_EQ(lanes[2].second, "stream");
  const auto thread_ops = r.lane_ops(0, 0), nvtx_ops = r.lane_ops(0, 1);
  EXPECT_EQ(thread_ops.size(), 968u);
  EXPECT_EQ(nvtx_ops.size(), 652u);
  int64_t longest = 0;
  for (const auto& o : nvtx_ops) longest = std::max(longest, o.end_ns - o.start_ns);
  EXPECT_EQ(longest, 392917494);
  for (const auto& o : thread_ops) EXPECT_LE(o.end_ns - o.start_ns, 392917494 / 2) << r.name(o.name_id);
}

// F28: a two-rank session exported to Chrome JSON and imported back keeps its ranks, steps
// (windows to the ns), lanes and ops.
TEST(Imp43ChromeRoundTrip, ExportedRanksAndStepsComeBack) {
  const std::string db = imp43_session("imp43_rt_src.db", 2);
  const std::string json = (import_scratch() / "imp43_rt.json").string();
  {
    std::ofstream out(json);
    export_chrome_trace(SessionReader(db), out);
  }
  {  // the steps as Kineto writes them
    std::ifstream in(json);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    EXPECT_NE(text.find(R"({"ph":"X","pid":1,"tid":256,"name":"ProfilerStep#2","cat":"user_annotation","ts":3.001,"dur":1.000})"),
              std::string::npos);
  }
  const auto sum = import_into({json}, "imp43_rt.db");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(sum.files, std::vector<std::string>{json});
  EXPECT_EQ(sum.events.at("steps"), 6);
  const ImportStat* p = problem(sum.problems, "ranks_from_process_names");
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->example.find("2 processes named 'rank N'"), std::string::npos) << p->example;
  EXPECT_NE(p->example.find("imported as ranks 0, 1"), std::string::npos) << p->example;
  EXPECT_EQ(problem(sum.problems, "no_rank"), nullptr);
  const SessionReader back(scratch_db("imp43_rt.db"));
  const SessionReader src(db);
  EXPECT_EQ(back.meta("world_size"), "2");
  EXPECT_EQ(back.meta("steps"), "3");
  // time 0 is the earliest event (rank 0's step 0 at 1000 ns): every time 1000 ns earlier
  const int64_t shift = 1000;
  const auto a = src.steps(), b = back.steps();
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].rank, a[i].rank);
    EXPECT_EQ(b[i].step, a[i].step);
    EXPECT_EQ(b[i].start_ns, a[i].start_ns - shift);
    EXPECT_EQ(b[i].end_ns, a[i].end_ns - shift);
  }
  std::vector<std::tuple<int32_t, std::string>> lanes_a, lanes_b;
  // named as the session named them (the export's thread_name), not "thread TID (thread_name)"
  for (const auto& l : src.lanes()) lanes_a.push_back({l.rank, l.name});
  for (const auto& l : back.lanes()) lanes_b.push_back({l.rank, l.name});
  EXPECT_EQ(lanes_b, lanes_a);  // the step row is not a lane
  const auto ops = back.all_ops();
  ASSERT_EQ(ops.size(), 12u);
  for (const auto& o : ops) {
    EXPECT_GE(o.step, 0) << back.name(o.name_id);
    EXPECT_EQ(o.start_ns, 1000 * o.step + o.rank + (o.lane == 0 ? 100 : 300)) << back.name(o.name_id);
    // the categories the export's `cat` names ("output_dist/all_to_all" says nothing by its name)
    EXPECT_EQ(o.category, o.lane == 0 ? OpCategory::dense : OpCategory::comm) << back.name(o.name_id);
  }
}

// F28: the CLI round trip of tester42 (`export --format chrome` then `import`), four ranks.
TEST(Imp43ChromeRoundTrip, TheCliRoundTripKeepsFourRanks) {
  const std::string db = imp43_session("imp43_rt4_src.db", 4);
  const std::string json = (import_scratch() / "imp43_rt4.json").string();
  const std::string back = scratch_db("imp43_rt4.db");
  fs::remove(back);
  auto r = imp43_cli("export " + db + " --format chrome -o " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  r = imp43_cli("import " + json + " -o " + back + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ranks"], nlohmann::json::array({0, 1, 2, 3}));
  EXPECT_EQ(j["events"]["steps"], 12);
  EXPECT_EQ(j["files"].size(), 1u);
}

// A process named "rank N" in a Kineto trace with distributedInfo.rank, or one other process
// beside "rank N" ones: no split (the trace is one rank, as before).
TEST(Imp43ChromeRoundTrip, OnlyWholeRankProcessFilesAreSplit) {
  auto write = [](const std::string& name, const nlohmann::json& j) {
    const std::string p = (import_scratch() / name).string();
    std::ofstream(p) << j.dump();
    return p;
  };
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back({{"ph", "M"}, {"pid", 0}, {"name", "process_name"}, {"args", {{"name", "rank 0"}}}});
  ev.push_back({{"ph", "M"}, {"pid", 1}, {"name", "process_name"}, {"args", {{"name", "python"}}}});
  ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "a"}, {"pid", 0}, {"tid", 0}, {"ts", 1}, {"dur", 2}});
  ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "b"}, {"pid", 1}, {"tid", 0}, {"ts", 1}, {"dur", 2}});
  const auto mixed = import_into({write("imp43_mixed.json", {{"traceEvents", ev}})}, "imp43_mixed.db");
  EXPECT_EQ(mixed.ranks, std::vector<int32_t>{0});
  EXPECT_EQ(problem(mixed.problems, "ranks_from_process_names"), nullptr);
  ev[1]["args"]["name"] = "rank 1";
  const auto known = import_into({write("imp43_known.json", {{"distributedInfo", {{"rank", 5}}}, {"traceEvents", ev}})},
                                 "imp43_known.db");
  EXPECT_EQ(known.ranks, std::vector<int32_t>{5});
  const auto split = import_into({write("imp43_split.json", {{"traceEvents", ev}})}, "imp43_split.db");
  EXPECT_EQ(split.ranks, (std::vector<int32_t>{0, 1}));
}

// F12: merging imported sessions whose time ranges do not overlap (11.6 days apart) is refused
// as `import` refuses their traces, naming both files; --allow-disjoint merges them.
TEST(Imp43DisjointMerge, MergeRefusesDisjointRanksUnlessAllowed) {
  auto trace = [](const std::string& name, int rank, int64_t ts_us) {
    nlohmann::json ev = nlohmann::json::array();
    ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#1"}, {"pid", 1}, {"tid", 1},
                  {"ts", ts_us}, {"dur", 100}});
    ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", 1}, {"tid", 1}, {"ts", ts_us + 1}, {"dur", 2}});
    const std::string p = (import_scratch() / name).string();
    std::ofstream(p) << nlohmann::json{{"distributedInfo", {{"rank", rank}, {"world_size", 2}}}, {"traceEvents", ev}}.dump();
    return p;
  };
  import_into({trace("imp43_mg_a.json", 0, 1000)}, "imp43_mg_a.db");
  import_into({trace("imp43_mg_c.json", 1, 1'000'000'001'000)}, "imp43_mg_c.db");
  const std::string a = scratch_db("imp43_mg_a.db"), c = scratch_db("imp43_mg_c.db"), out = scratch_db("imp43_mg.db");
  fs::remove(out);
  try {
    merge_sessions({a, c}, out, {});
    FAIL() << "merged ranks 11.6 days apart";
  } catch (const SessionError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(a), std::string::npos) << m;
    EXPECT_NE(m.find(c + ": refused: rank 1 (" + c + ")"), std::string::npos) << m;
    EXPECT_NE(m.find("(11.6 days apart)"), std::string::npos) << m;
    EXPECT_NE(m.find("--allow-disjoint to merge them anyway"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(out));
  auto r = imp43_cli("merge " + a + " " + c + " -o " + out);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("(11.6 days apart)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  r = imp43_cli("merge " + a + " " + c + " -o " + out + " --allow-disjoint");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(SessionReader(out).ranks().size(), 2u);
  // --align collectives finds no collective in common: the ranks stay 11.6 days apart and are
  // refused as without it (tester45 F13; it merged them), unless --allow-disjoint
  fs::remove(out);
  r = imp43_cli("merge " + a + " " + c + " -o " + out + " --align collectives");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("on the clocks aligned by collectives: they do not overlap (11.6 days apart)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
  r = imp43_cli("merge " + a + " " + c + " -o " + out + " --align collectives --allow-disjoint");
  EXPECT_EQ(r.code, 0) << r.err;
}

// F24: a lane of kind `annotation` (NVTX ranges) encloses work: not busy time. One step [0, 1000)
// ns on a rank without streams: a runtime call [100, 200) on the thread, an NVTX range [0, 1000)
// on its NVTX lane -> compute 100 ns, idle 900 ns (the range counted as compute gave 1000 / 0).
TEST(Imp43NvtxLanes, AnnotationLanesAreNotBusyTime) {
  const std::string db = scratch_db("imp43_annot.db");
  {
    SessionWriter w(db, true);
    RankInfo ri;
    ri.rank = 0;
    w.add_rank(ri);
    w.add_lane({0, 0, "thread 1 (main)", "thread"});
    w.add_lane({0, 1, "thread 1 (main) NVTX", "annotation"});
    StepMetric m;
    m.step = 0;
    m.end_ns = 1000;
    w.add_step(m);
    OpEvent call;
    call.lane = static_cast<Lane>(0);
    call.name = "cudaLaunchKernel";
    call.start_ns = 100;
    call.end_ns = 200;
    OpEvent range = call;
    range.lane = static_cast<Lane>(1);
    range.name = "forward";
    range.start_ns = 0;
    range.end_ns = 1000;
    w.add_ops({call, range});
    w.close("complete");
  }
  const RunStats s = analyze(SessionReader(db));
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].compute_ns, 100);
  EXPECT_EQ(s.ranks[0].idle_ns, 900);
}

// The rank sessions of one run (the same run_id: what `launch` merges) are one job: ranks whose
// recorded ranges do not overlap (a clock anchor off by more than the run) are merged, the problem
// kept, not refused.
TEST(Imp43DisjointMerge, RankSessionsOfOneRunAreMergedWithTheProblem) {
  auto write = [](const std::string& name, int32_t rank, int64_t t0) {
    const std::string db = scratch_db(name);
    SessionWriter w(db, true);
    w.set_metadata("run_id", "run-42");
    w.add_rank({rank, "h", "cpu (thread)", 0});
    w.add_lane({rank, 0, "compute", "thread"});
    w.add_step({0, rank, t0, t0 + 1000, 0.5, 0, 0});
    w.close("complete");
    return db;
  };
  const std::string a = write("imp43_run_a.db", 0, 1000), b = write("imp43_run_b.db", 1, 1'000'000'000);
  const std::string out = scratch_db("imp43_run.db");
  fs::remove(out);
  merge_sessions({a, b}, out, {});
  EXPECT_NE(problem(SessionReader(out).import_stats(), "disjoint_time_ranges"), nullptr);
}
