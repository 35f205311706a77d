// tester37's import defects (#13, #15, #17) on small fixtures written here, with the counts and
// messages each rule must give.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"
#include "import_test_support.h"
#include "nsys_fixture.h"
#include "support/cli_run.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;
namespace fs = std::filesystem;

namespace {
/// A Kineto trace of `rank` with ProfilerStep spans (name, ts us, dur us) and one aten::mm per
/// step, written to scratch/<name>; returns the path.
std::string t37_trace(const std::string& name, int rank, const std::vector<std::tuple<std::string, int64_t, int64_t>>& steps) {
  nlohmann::json ev = nlohmann::json::array();
  for (const auto& [n, ts, dur] : steps) {
    ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", n}, {"pid", 1}, {"tid", 1}, {"ts", ts}, {"dur", dur}});
    ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}, {"pid", 1}, {"tid", 1}, {"ts", ts + 1}, {"dur", 2}});
  }
  const nlohmann::json j{{"schemaVersion", 1},
                         {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
                         {"traceEvents", ev}};
  const std::string p = (import_scratch() / name).string();
  std::ofstream(p) << j.dump();
  return p;
}
}  // namespace

// #15: rank 1 recorded 1e12 us (11.6 days) after rank 0's trace ended: traces of two runs; a
// second file of rank 0 is dropped and not listed among the files imported.
TEST(Tester37Import, RanksOfDifferentRunsAreFlaggedAndADroppedFileIsNotListedAsImported) {
  const auto a = t37_trace("t37_mix_a.json", 0, {{"ProfilerStep#1", 1000, 100}});
  const auto b = t37_trace("t37_mix_b.json", 0, {{"ProfilerStep#1", 1000, 100}});
  const auto c = t37_trace("t37_mix_c.json", 1, {{"ProfilerStep#1", 1'000'000'001'000, 100}});
  const auto sum = import_into({a, b, c}, "t37_mix.db");
  EXPECT_EQ(sum.files, (std::vector<std::string>{a, c}));
  EXPECT_EQ(problem_count(sum.problems, "duplicate_rank"), 1);
  const ImportStat* d = problem(sum.problems, "disjoint_time_ranges");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->count, 1);
  EXPECT_EQ(d->severity, "error");
  EXPECT_NE(d->example.find("rank 1 (" + c + ") spans 1000000.000000 .. 1000000.000100 s and rank 0 (" + a +
                            ") 0.000000 .. 0.000100 s"), std::string::npos) << d->example;
  EXPECT_NE(d->example.find("(11.6 days apart)"), std::string::npos) << d->example;
  // the ranks of one job overlap: no such problem
  const auto x = t37_trace("t37_one_a.json", 0, {{"ProfilerStep#1", 1000, 100}});
  const auto y = t37_trace("t37_one_b.json", 1, {{"ProfilerStep#1", 1050, 100}});
  const auto one = import_into({x, y}, "t37_one.db");
  EXPECT_EQ(problem_count(one.problems, "disjoint_time_ranges"), 0);
  EXPECT_EQ(one.files.size(), 2U);
}

TEST(Tester37Import, OneTraceNamedTwiceIsRefused) {
  const auto a = t37_trace("t37_twice.json", 0, {{"ProfilerStep#1", 1000, 100}});
  try {
    import_into({a, a}, "t37_twice.db");
    FAIL() << "imported one file twice";
  } catch (const importers::ImportError& e) {
    EXPECT_NE(std::string(e.what()).find(a + ": given twice"), std::string::npos) << e.what();
  }
}

// #15: the same two runs as separate sessions, merged on their recorded clocks.
TEST(Tester37Import, MergingRanksOfDifferentRunsIsFlagged) {
  const auto a = t37_trace("t37_mg_a.json", 0, {{"ProfilerStep#1", 1000, 100}});
  const auto c = t37_trace("t37_mg_c.json", 1, {{"ProfilerStep#1", 1'000'000'001'000, 100}});
  import_into({a}, "t37_mg_a.db");
  import_into({c}, "t37_mg_c.db");
  merge_sessions({scratch_db("t37_mg_a.db"), scratch_db("t37_mg_c.db")}, scratch_db("t37_mg.db"),
                 {.align = "none", .overwrite = true, .allow_disjoint = true});  // refused without (imp43)
  EXPECT_EQ(problem_count(SessionReader(scratch_db("t37_mg.db")).import_stats(), "disjoint_time_ranges"), 1);
}

// #17: ProfilerStep#1 at 1000 us for 800 us, #2 at 1500 us for 500 us (300 us in both); and
// ProfilerStep#1 twice, overlapping: the first span is the step, the second is said and dropped
// (two that do not overlap are two steps: imp57_torch113_test, torch 1.13's repeated #0).
TEST(Tester37Import, OverlappingAndDuplicatedProfilerStepsAreProblems) {
  const auto ov = t37_trace("t37_overlap.json", 0, {{"ProfilerStep#1", 1000, 800}, {"ProfilerStep#2", 1500, 500}});
  const auto s1 = import_into({ov}, "t37_overlap.db");
  const ImportStat* o = problem(s1.problems, "overlapping_steps");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->severity, "error");
  EXPECT_NE(o->example.find("ProfilerStep#2 (1500 .. 2000 us) starts 300 us before ProfilerStep#1 (1000 .. 1800 us) ends"),
            std::string::npos) << o->example;
  EXPECT_EQ(problem_count(s1.problems, "duplicate_step"), 0);
  const auto same = t37_trace("t37_same.json", 0, {{"ProfilerStep#1", 1000, 400}, {"ProfilerStep#1", 1300, 500}});
  const auto s2 = import_into({same}, "t37_same.db");
  const ImportStat* d = problem(s2.problems, "duplicate_step");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, "data_loss");
  EXPECT_NE(d->example.find("ProfilerStep#1 appears twice (1000 .. 1400 us and 1300 .. 1800 us)"), std::string::npos)
      << d->example;
  EXPECT_EQ(s2.events.at("steps"), 1);  // what the import says is what the session holds
  const SessionReader r(scratch_db("t37_same.db"));
  ASSERT_EQ(r.steps().size(), 1U);
  EXPECT_EQ(r.steps()[0].end_ns - r.steps()[0].start_ns, 400'000);  // the first span
  EXPECT_EQ(r.meta("steps"), "1");
  EXPECT_EQ(problem_count(s2.problems, "overlapping_steps"), 0);
  // consecutive steps that touch (end == next start) are no problem
  const auto ok = t37_trace("t37_steps_ok.json", 0, {{"ProfilerStep#1", 1000, 500}, {"ProfilerStep#2", 1500, 500}});
  const auto s3 = import_into({ok}, "t37_steps_ok.db");
  EXPECT_EQ(problem_count(s3.problems, "overlapping_steps") + problem_count(s3.problems, "duplicate_step"), 0);
}

// #16: "## forward ##" (a record_function range, cat user_annotation) encloses aten::linear,
// which encloses aten::mm; the step's critical path is the ops' own time: aten::linear 10 + 10 us
// around aten::mm's 60 us, not the annotation's 100 us (nor aten::linear's 80 us); the step's
// window before and after aten::linear, which no op covers, is untraced: 10 + 10 us of gap.
TEST(Tester37Import, TheCriticalPathGoesThroughTheOpsInsideAnnotations) {
  auto span = [](const std::string& cat, const std::string& name, int64_t ts, int64_t dur) {
    return nlohmann::json{{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 1}, {"tid", 1}, {"ts", ts}, {"dur", dur}};
  };
  const nlohmann::json j{{"schemaVersion", 1},
                         {"distributedInfo", {{"rank", 0}, {"world_size", 1}}},
                         {"traceEvents",
                          {span("user_annotation", "ProfilerStep#1", 1000, 100),
                           span("user_annotation", "## forward ##", 1000, 100), span("cpu_op", "aten::linear", 1010, 80),
                           span("cpu_op", "aten::mm", 1020, 60)}}};
  const std::string p = (import_scratch() / "t37_annot.json").string();
  std::ofstream(p) << j.dump();
  import_into({p}, "t37_annot.db");
  const SessionReader r(scratch_db("t37_annot.db"));
  EXPECT_EQ(r.meta("import_annotation_names_json"), "[\"## forward ##\"]");
  const RunStats st = analyze(r);
  std::map<std::string, int64_t> on_path;
  for (const auto& e : st.critical_path) on_path[e.name_id < 0 ? "(gap)" : r.name(e.name_id)] = e.ns;
  EXPECT_EQ(on_path,
            (std::map<std::string, int64_t>{{"(gap)", 20'000}, {"aten::linear", 20'000}, {"aten::mm", 60'000}}));
  EXPECT_EQ(st.critical_path_ns, 100'000);  // the step's window
}

// #13: an NCCL all-reduce kernel launched from a record_param_comms span without arguments (as in
// trace_diff_test): its bytes are unknown - an import problem, "unknown" in stats (not 0 B) - and
// the chrome export of the import has no loss or memory counters (a trace records neither).
TEST(Tester37Import, UnknownCollectiveBytesAreSaidAndNoLossOrMemoryIsInvented) {
  auto ev = [](const std::string& cat, const std::string& name, int pid, int tid, int64_t ts, int64_t dur,
               nlohmann::json args) {
    return nlohmann::json{{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", pid}, {"tid", tid},
                          {"ts", ts},  {"dur", dur}, {"args", args}};
  };
  const nlohmann::json j{
      {"schemaVersion", 1},
      {"distributedInfo", {{"backend", "nccl"}, {"rank", 0}, {"world_size", 1}}},
      {"traceEvents",
       {ev("user_annotation", "ProfilerStep#1", 1, 1, 1000, 200, nlohmann::json::object()),
        ev("cpu_op", "record_param_comms", 1, 1, 1010, 20, nlohmann::json::object()),
        ev("cuda_runtime", "cudaLaunchKernel", 1, 1, 1015, 5, {{"correlation", 7}}),
        ev("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 0, 7, 1050, 100,
           {{"device", 0}, {"stream", 7}, {"correlation", 7}})}}};
  const std::string p = (import_scratch() / "t37_noargs.json").string();
  std::ofstream(p) << j.dump();
  const std::string db = scratch_db("t37_noargs.db");
  const auto sum = import_into({p}, "t37_noargs.db");
  const ImportStat* a = problem(sum.problems, "collective_args_not_captured");
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a->example.find("rank 0: 1 communication kernel(s) (first: ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem))"),
            std::string::npos) << a->example;
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db, import_scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("      unknown        unknown\n"), std::string::npos) << r.out;  // bytes sent / received
  // (the short kernel name, tester38 #8)
  EXPECT_NE(r.out.find("ncclKernel_AllReduce_RING_LL_Sum_float     1.0      unknown"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" 0 B"), std::string::npos) << r.out;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats --json " + db, import_scratch());
  const auto js = nlohmann::json::parse(r.out);
  EXPECT_TRUE(js["ranks"][0]["bytes_sent"].is_null());
  EXPECT_TRUE(js["collectives"][0]["bytes"].is_null());
  const std::string out = (import_scratch() / "t37_noargs_chrome.json").string();
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "export " + db + " --format chrome --force-overwrite -o " + out,
                                        import_scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(out);
  const auto trace = nlohmann::json::parse(in);
  int counters = 0, kernels = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "C") ++counters;
    if (e["ph"] == "X" && e["cat"] == "comm") ++kernels;
  }
  EXPECT_EQ(counters, 0);
  EXPECT_GE(kernels, 1);
}

// #6: the chrome export of two imported NCCL ranks (tests/data/traces/align): every flow arrow
// of a collective starts and ends inside an all-reduce kernel's slice on its stream (tid 2,
// "stream 13"), not on tid 1 (the compute stream, where Perfetto found no slice to bind to).
TEST(Tester37Import, ChromeFlowsOfAnImportSitInsideTheCollectiveKernels) {
  import_into({trace_fixture("align")}, "t37_align.db");
  const SessionReader r(scratch_db("t37_align.db"));
  std::stringstream out;
  export_chrome_trace(r, out);
  const auto j = nlohmann::json::parse(out.str());
  std::vector<nlohmann::json> slices, flows;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") slices.push_back(e);
    if (e["ph"] == "s" || e["ph"] == "f") flows.push_back(e);
  }
  ASSERT_EQ(flows.size(), 10U);
  for (const auto& f : flows) {
    EXPECT_EQ(f["tid"], 2) << f.dump();
    const double t = f["ts"].get<double>();
    // the kernel's slice holds it (and, inside the kernel, its collective's record_param_comms
    // span: tester52 F12)
    bool in_kernel = false;
    for (const auto& x : slices)
      if (x["pid"] == f["pid"] && x["tid"] == f["tid"] && x["ts"].get<double>() <= t &&
          t <= x["ts"].get<double>() + x["dur"].get<double>())
        in_kernel |= x["name"].get<std::string>().rfind("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0) == 0;
    EXPECT_TRUE(in_kernel) << f.dump();
  }
}

// #20: one session named twice is said so (was "rank 0 is also in x.db").
TEST(Tester37Import, MergingOneSessionTwiceIsSaidSo) {
  const auto a = t37_trace("t37_twice_mg.json", 0, {{"ProfilerStep#1", 1000, 100}});
  import_into({a}, "t37_twice_mg.db");
  const std::string db = scratch_db("t37_twice_mg.db");
  try {
    merge_sessions({db, db}, scratch_db("t37_twice_out.db"), {.align = "none", .overwrite = true});
    FAIL() << "merged one session twice";
  } catch (const SessionError& e) {
    EXPECT_EQ(std::string(e.what()), db + ": given twice (as " + db + " and " + db + "); name each session once");
  }
}

// #20: `stats` on a trace says how to make a session of it.
TEST(Tester37Import, StatsOnATraceSaysImportItFirst) {
  const auto a = t37_trace("t37_stats_trace.json", 0, {{"ProfilerStep#1", 1000, 100}});
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + a, import_scratch());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(a + ": not an SQLite database"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("its content is PyTorch profiler (Kineto) Chrome-trace JSON (.json, .json.gz): import it first: "
                       "embedscope import " + a),
            std::string::npos)
      << r.err;
}

// #20: two traces without distributedInfo imported one by one are both rank 0 (assigned): the
// merge's refusal says so and how to number them.
TEST(Tester37Import, MergingTwoAssignedRankZerosSaysToImportThemTogether) {
  for (const char* n : {"t37_nd0", "t37_nd1"}) {
    const std::string p = (import_scratch() / (std::string(n) + ".json")).string();
    std::ofstream(p) << R"({"traceEvents": [{"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]})";
    import_into({p}, std::string(n) + ".db");
  }
  try {
    merge_sessions({scratch_db("t37_nd0.db"), scratch_db("t37_nd1.db")}, scratch_db("t37_nd.db"),
                   {.align = "none", .overwrite = true});
    FAIL() << "merged two rank 0s";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 is also in " + scratch_db("t37_nd0.db") +
                                         "; each rank may come from one session only (the rank was assigned at import"),
              std::string::npos) << e.what();
  }
}

// #20: two copies of one Nsight export are one capture, not ranks 0 and 1.
TEST(Tester37Import, TwoCopiesOfOneNsightExportAreOneRank) {
  const std::string a = (import_scratch() / "t37_nsys_a.sqlite").string(), b = (import_scratch() / "t37_nsys_b.sqlite").string();
  write_nsys_fixture(a, {});
  std::filesystem::copy_file(a, b, std::filesystem::copy_options::overwrite_existing);
  SessionWriter w(scratch_db("t37_nsys_copies.db"), true);
  const auto sum = importers::import_nsys_sqlite({a, b}, w, {});
  w.close("complete");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0}));
  EXPECT_EQ(sum.files, (std::vector<std::string>{a}));
  const ImportStat* d = problem(sum.problems, "duplicate_capture");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->example, a + " and " + b + " hold the same capture (host, session start, processes and events); " + b +
                            " was not imported");
  // a second process's export (another pid) is a second rank
  const std::string c = (import_scratch() / "t37_nsys_c.sqlite").string();
  write_nsys_fixture(c, {.pid = 4343});
  SessionWriter w2(scratch_db("t37_nsys_two.db"), true);
  const auto two = importers::import_nsys_sqlite({a, c}, w2, {});
  w2.close("complete");
  EXPECT_EQ(two.ranks.size(), 2U);
  EXPECT_EQ(problem_count(two.problems, "duplicate_capture"), 0);
}

// #20: spans of one lane that overlap without nesting are kept and said, as info (nothing lost).
TEST(Tester37Import, OverlappingSpansAreInfoNotAnError) {
  const std::string p = (import_scratch() / "t37_ovspans.json").string();
  std::ofstream(p) << R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 10},
                                          {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 10}]})";
  const auto sum = import_into({p}, "t37_ovspans.db");
  const ImportStat* o = problem(sum.problems, "overlapping_spans");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->severity, "info");
  EXPECT_EQ(o->count, 1);
}
