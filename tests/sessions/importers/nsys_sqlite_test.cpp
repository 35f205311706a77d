// Nsight Systems SQLite exports: the real export of ../shared/data/nsys (counted with sqlite3,
// shared/data/README.md) and hand-made exports (nsys_fixture.h) for each rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"
#include "embedscope/sessions/model/did_not_end.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "import_test_support.h"
#include "nsys_fixture.h"
#include "support/cli_run.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;
namespace si = embedscope::sessions::importers;

namespace {
const std::string kFuser = std::string(EMBEDSCOPE_SHARED_DATA) + "/nsys/fuser_h200.sqlite";

si::ImportSummary import_nsys(const std::string& file, const std::string& db_name) {
  SessionWriter w(scratch_db(db_name), true);
  auto sum = si::import_nsys_sqlite({file}, w, {});
  w.close("complete");
  return sum;
}

std::string fixture(const std::string& name, const NsysFixture& f) {
  const std::string path = (import_scratch() / name).string();
  write_nsys_fixture(path, f);
  return path;
}

int64_t count(const si::ImportSummary& s, const std::string& kind) {
  auto it = s.events.find(kind);
  return it == s.events.end() ? 0 : it->second;
}

std::map<std::string, LaneInfo> lanes_by_name(const SessionReader& r) {
  std::map<std::string, LaneInfo> out;
  for (const auto& l : r.lanes()) out[l.name] = l;
  return out;
}
}  // namespace

TEST(NsysSqlite, RealFuserExportGivesTheCountedNumbers) {
  if (!std::filesystem::exists(kFuser)) GTEST_SKIP() << kFuser << " is absent (shared test data)";
  const auto sum = import_nsys(kFuser, "fuser.db");
  EXPECT_EQ(sum.format, "nsys_sqlite");
  EXPECT_EQ(sum.ranks, std::vector<int32_t>{0});
  EXPECT_EQ(count(sum, "kernels"), 19);
  EXPECT_EQ(count(sum, "memcpy"), 1);
  EXPECT_EQ(count(sum, "memset"), 1);
  EXPECT_EQ(count(sum, "synchronization"), 1);
  EXPECT_EQ(count(sum, "nvtx_ranges"), 652);
  EXPECT_EQ(count(sum, "runtime_calls"), 968);
  EXPECT_EQ(problem(sum.problems, "no_nvtx"), nullptr);
  EXPECT_EQ(problem(sum.problems, "unknown_schema_version"), nullptr);  // 3.16.1
  const SessionReader r(scratch_db("fuser.db"));
  EXPECT_EQ(r.meta(meta::kImportFormat), "nsys_sqlite");
  EXPECT_EQ(r.meta(meta::kImportProducer), "NVIDIA Nsight Systems 2024.6.2.25; EXPORT_SCHEMA_VERSION 3.16.1");
  // Session time 0 is the earliest event (a runtime call at export ns 630,846,976), in Unix ns:
  // utcEpochNs 1,733,877,925,987,393,218 + 630,846,976.
  EXPECT_EQ(r.meta(meta::kImportOriginNs), "1733877926618240194");
  EXPECT_EQ(r.meta(meta::kWallAnchorUnixNs), "1733877926618240194");
  const auto ranks = r.ranks();
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].device, "NVIDIA H200 (cuda:0)");
  EXPECT_EQ(ranks[0].memory_capacity_bytes, 150137864192);
  EXPECT_EQ(ranks[0].host, "e9ce1d13d1dc");
  const auto lanes = lanes_by_name(r);
  ASSERT_TRUE(lanes.count("thread 30156 (test_matmul)"));  // globalTid 281980910466508: pid 30156, tid 30156
  ASSERT_TRUE(lanes.count("stream 7 (cuda:0 NVIDIA H200)"));
  const int32_t stream = lanes.at("stream 7 (cuda:0 NVIDIA H200)").lane;
  int64_t kernel_ns = 0, kernels = 0, longest = 0, memcpy_bytes = 0, memset_bytes = 0;
  std::string longest_name, memcpy_name;
  std::map<uint64_t, int> host_correlations;
  for (const auto& o : r.all_ops())
    if (o.lane != stream && o.correlation) ++host_correlations[o.correlation];
  int64_t joined = 0;
  for (const auto& o : r.all_ops()) {
    if (o.lane != stream) continue;
    const std::string& n = r.name(o.name_id);
    if (n.rfind("Memcpy", 0) == 0) memcpy_bytes += o.bytes, memcpy_name = n;
    else if (n.rfind("Memset", 0) == 0) memset_bytes += o.bytes;
    else if (n.find("Sync") == std::string::npos && n.find("Wait") == std::string::npos) {
      ++kernels;
      kernel_ns += o.end_ns - o.start_ns;
      joined += host_correlations.count(o.correlation);
      if (o.end_ns - o.start_ns > longest) longest = o.end_ns - o.start_ns, longest_name = n;
    }
  }
  EXPECT_EQ(kernels, 19);
  EXPECT_EQ(kernel_ns, 393539);
  EXPECT_EQ(joined, 19);  // every kernel joins its launch by correlationId
  EXPECT_EQ(longest, 135137);
  EXPECT_EQ(longest_name.rfind("<unnamed>::nvfuser_none_f0_c0_r0_g0(", 0), 0u) << longest_name;  // demangledName
  EXPECT_EQ(memcpy_bytes, 1);
  // copyKind 2 is CUDA_MEMCPY_KIND_DTOH in the export's own ENUM_CUDA_MEMCPY_OPER (srcKind Device,
  // dstKind Pinned): the shared README's "HtoD (copyKind 1)" does not match the file.
  EXPECT_EQ(memcpy_name, "Memcpy DtoH (Device -> Pinned)");
  EXPECT_EQ(memset_bytes, 4);
  // HTA's kernel figures, exact ns (no microsecond rounding for Nsight's integer ns).
  const auto fig = gpu_kernel_figures(r);
  ASSERT_EQ(fig.size(), 1u);
  EXPECT_FALSE(fig[0].microsecond_rounding);
  EXPECT_FALSE(fig[0].has_comm);
  EXPECT_EQ(fig[0].compute_ns, 393539);  // the 19 kernels never overlap
  EXPECT_EQ(fig[0].gpu_events, 22);      // + memcpy, memset, sync record
}

TEST(NsysSqlite, HandMadeExportRanksLanesStepsAndJoins) {
  const std::string file = fixture("basic.sqlite", {});
  const auto sum = import_nsys(file, "basic.db");
  EXPECT_EQ(count(sum, "kernels"), 2);
  EXPECT_EQ(count(sum, "memcpy"), 1);
  EXPECT_EQ(count(sum, "runtime_calls"), 3);
  EXPECT_EQ(count(sum, "nvtx_ranges"), 3);  // step body, forward (textId), async region
  EXPECT_EQ(count(sum, "steps"), 1);        // ProfilerStep#3
  EXPECT_EQ(problem_count(sum.problems, "nvtx_marks_not_stored"), 1);
  EXPECT_EQ(problem_count(sum.problems, "unfinished_nvtx_range"), 1);
  EXPECT_EQ(count(sum, "did_not_end"), 1);  // 'never popped', kept as a zero-length op at 700 ns
  ASSERT_NE(problem(sum.problems, "no_memset"), nullptr);
  EXPECT_EQ(problem(sum.problems, "no_memset")->severity, "info");
  EXPECT_EQ(problem(sum.problems, "no_nvtx"), nullptr);
  const SessionReader r(scratch_db("basic.db"));
  EXPECT_EQ(r.meta(meta::kImportOriginNs), "1700000000000000000");  // the step starts at export ns 0
  const auto ranks = r.ranks();
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].device, "NVIDIA H100 80GB HBM3 (cuda:0)");
  EXPECT_EQ(ranks[0].memory_capacity_bytes, 85520809984);
  std::vector<std::pair<std::string, std::string>> lanes;
  for (const auto& l : r.lanes()) lanes.push_back({l.name, l.kind});
  const std::vector<std::pair<std::string, std::string>> want{
      {"thread 4242 (trainer)", "thread"},
      {"thread 4242 (trainer) NVTX", "annotation"},  // its push/pop ranges, under it (tester42 F24)
      {"thread 4250 (loader)", "thread"},
      {"NVTX start/end ranges (pid 4242 python train.py)", "annotation"},
      {"stream 7 (cuda:0 NVIDIA H100 80GB HBM3)", "stream"},
      {"stream 13 (cuda:0 NVIDIA H100 80GB HBM3)", "stream"}};
  EXPECT_EQ(lanes, want);
  const auto steps = r.steps();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step, 3);
  EXPECT_EQ(steps[0].end_ns, 10000);
  std::map<std::string, OpRecord> ops;
  for (const auto& o : r.all_ops()) ops[r.name(o.name_id)] = o;
  ASSERT_TRUE(ops.count("forward"));  // NVTX textId 7 -> StringIds
  EXPECT_EQ(ops["forward"].lane, 1);  // the trainer's NVTX lane, not its runtime calls' lane 0
  EXPECT_EQ(ops["async region"].lane, 3);
  const auto& k = ops["void fbgemm_gpu::embedding_forward_kernel<float>(float *)"];
  EXPECT_EQ(k.lane, 4);
  EXPECT_EQ(k.category, OpCategory::lookup);
  EXPECT_EQ(k.correlation, 7u);
  EXPECT_EQ(k.step, 3);  // the step of its launch at 1000
  EXPECT_EQ(ops["ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"].category, OpCategory::comm);
  EXPECT_EQ(ops["Memcpy HtoD (Pageable -> Device)"].bytes, 4096);
  EXPECT_EQ(ops["Memcpy HtoD (Pageable -> Device)"].category, OpCategory::memcpy);
  EXPECT_EQ(ops["cudaLaunchKernel_v7000"].lane, 0);
  EXPECT_EQ(ops["cudaMemcpyAsync_v3020"].lane, 2);
  ASSERT_TRUE(ops.count("never popped (did not end)"));  // the NVTX range without an end, kept
  EXPECT_EQ(ops["never popped (did not end)"].start_ns, 700);
  EXPECT_EQ(ops["never popped (did not end)"].end_ns, 700);
  EXPECT_EQ(ops["never popped (did not end)"].lane, 1);
  EXPECT_EQ(ops["never popped (did not end)"].step, 3);
  const auto fig = gpu_kernel_figures(r);
  ASSERT_EQ(fig.size(), 1u);
  EXPECT_TRUE(fig[0].has_comm);
  EXPECT_DOUBLE_EQ(fig[0].overlap_pct, 20.0);
  EXPECT_EQ(fig[0].kernel_time_ns, 7000);
  EXPECT_EQ(fig[0].idle_ns, 0);
  EXPECT_EQ(fig[0].compute_ns, 3000);
  EXPECT_EQ(fig[0].non_compute_ns, 4000);
  // The NCCL kernel is a collective record: operation and type from its name, no bytes.
  EXPECT_EQ(count(sum, "collectives"), 1);
  ASSERT_NE(problem(sum.problems, "collective_args_not_captured"), nullptr);
  EXPECT_EQ(problem(sum.problems, "collective_args_not_captured")->severity, "info");
  const auto colls = r.collectives();
  ASSERT_EQ(colls.size(), 1u);
  EXPECT_EQ(colls[0].op, "all_reduce");
  EXPECT_EQ(colls[0].dtype, "float32");
  EXPECT_EQ(colls[0].name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(colls[0].group, "cuda:0 stream 13");
  EXPECT_EQ(colls[0].start_ns, 4000);
  EXPECT_EQ(colls[0].end_ns, 9000);
  EXPECT_EQ(colls[0].step, 3);
  EXPECT_EQ(colls[0].bytes_sent, 0);
}

TEST(NsysSqlite, NoNvtxTableIsSaidNotFailed) {
  NsysFixture f;
  f.nvtx = false;
  const auto sum = import_nsys(fixture("no_nvtx.sqlite", f), "no_nvtx.db");
  const ImportStat* p = problem(sum.problems, "no_nvtx");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, "info");
  EXPECT_EQ(p->example, "no NVTX in capture (NVTX_EVENTS absent)");
  EXPECT_EQ(count(sum, "nvtx_ranges"), 0);
  EXPECT_EQ(count(sum, "kernels"), 2);
  EXPECT_EQ(count(sum, "steps"), 0);
}

TEST(NsysSqlite, UnknownSchemaVersionImportsWithAWarningNamingWhatIsMissing) {
  NsysFixture f;
  f.schema_version = "9.1.0";
  f.kernel_correlation = false;
  const auto sum = import_nsys(fixture("v9.sqlite", f), "v9.db");
  const ImportStat* p = problem(sum.problems, "unknown_schema_version");
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->example.find("EXPORT_SCHEMA_VERSION 9.1.0 is not 3.16.1"), std::string::npos) << p->example;
  EXPECT_NE(p->example.find("missing: CUPTI_ACTIVITY_KIND_KERNEL.correlationId"), std::string::npos) << p->example;
  EXPECT_EQ(count(sum, "kernels"), 2);
}

TEST(NsysSqlite, MissingColumnsAreCountedOptionalReadAsNullRequiredSkipTheTable) {
  NsysFixture f;
  f.kernel_correlation = false;  // optional: kernels imported without their launches
  f.runtime_name = false;        // required: the runtime table is skipped, its rows counted as lost
  const auto sum = import_nsys(fixture("cols.sqlite", f), "cols.db");
  EXPECT_EQ(count(sum, "kernels"), 2);
  EXPECT_EQ(count(sum, "runtime_calls"), 0);
  const ImportStat* lost = problem(sum.problems, "missing_required_column");
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->severity, "data_loss");
  EXPECT_EQ(lost->count, 3);
  EXPECT_EQ(lost->example, "CUPTI_ACTIVITY_KIND_RUNTIME has no column 'nameId': its 3 row(s) were not imported");
  const ImportStat* cols = problem(sum.problems, "missing_column");
  ASSERT_NE(cols, nullptr);
  EXPECT_EQ(cols->count, 2);
  EXPECT_NE(cols->example.find("CUPTI_ACTIVITY_KIND_KERNEL.correlationId, CUPTI_ACTIVITY_KIND_RUNTIME.nameId"),
            std::string::npos) << cols->example;
  EXPECT_EQ(problem(sum.problems, "unknown_schema_version"), nullptr);
  const SessionReader r(scratch_db("cols.db"));
  for (const auto& o : r.all_ops())
    if (r.name(o.name_id).find("embedding_forward") != std::string::npos) {
      EXPECT_EQ(o.step, -1);  // no launch to join
    }
}

TEST(NsysSqlite, NegativeDurationsAndOutOfRangeTimesAreCountedAndKeptOut) {
  NsysFixture f;
  f.negative_kernel = true;
  const std::string file = fixture("neg.sqlite", f);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  // 2^62 ns: epoch + time would overflow int64 further on
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (4611686018427387904, 4611686018427387905, 0, 7,"
                             " 0, 0, 3, 4)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  const auto sum = import_nsys(file, "neg.db");
  EXPECT_EQ(count(sum, "kernels"), 2);
  EXPECT_EQ(problem_count(sum.problems, "negative_duration"), 1);
  EXPECT_EQ(problem_count(sum.problems, "bad_timestamp"), 1);
  EXPECT_EQ(problem(sum.problems, "bad_timestamp")->severity, "data_loss");
  EXPECT_EQ(sum.end_ns, 9500);  // the time range from valid events ('step body'), not the bad row's 20000
  // the row that ended before it started is kept: a zero-length op at its start, marked (beside
  // the fixture's NVTX range without an end, at 700 ns)
  EXPECT_EQ(count(sum, "did_not_end"), 2);
  const SessionReader r(scratch_db("neg.db"));
  std::vector<int64_t> marked;
  for (const auto& o : r.all_ops())
    if (did_not_end(o.start_ns, o.end_ns, r.name(o.name_id))) {
      marked.push_back(o.start_ns);
      if (o.start_ns == 20000) { EXPECT_EQ(o.lane, 4) << "stream 7"; }
    }
  std::sort(marked.begin(), marked.end());
  EXPECT_EQ(marked, (std::vector<int64_t>{700, 20000}));
  // ... and counts no time: the kernel figures' span ends with the valid kernels, before 20 us
  const auto fig = gpu_kernel_figures(r);
  ASSERT_EQ(fig.size(), 1u);
  EXPECT_LT(fig[0].kernel_time_ns, 20000);
}

TEST(NsysSqlite, ProbeAndBufferEntryPoint) {
  const std::string file = fixture("probe.sqlite", {});
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  EXPECT_TRUE(si::probe_nsys_sqlite(file, bytes));
  EXPECT_EQ(&si::detect(file), &si::all_importers().at(1));
  const std::string session = std::string(EMBEDSCOPE_TEST_DATA) + "/sessions/v1.db";  // SQLite, not an export
  EXPECT_FALSE(si::probe_nsys_sqlite(session, si::read_head(session)));
  EXPECT_FALSE(si::probe_nsys_sqlite(file, "{\"traceEvents\": []}"));
  {
    SessionWriter w(scratch_db("buffer.db"), true);
    const auto sum = si::import_nsys_sqlite_buffer(bytes, "probe.sqlite", w, {});
    w.close("complete");
    EXPECT_EQ(count(sum, "kernels"), 2);
    EXPECT_EQ(count(sum, "nvtx_ranges"), 3);
    EXPECT_EQ(sum.files, std::vector<std::string>{"probe.sqlite"});
  }
  // A database cut short is an ImportError naming it, never a crash.
  SessionWriter w(scratch_db("cut.db"), true);
  EXPECT_THROW(si::import_nsys_sqlite_buffer(std::string_view(bytes).substr(0, 3000), "cut.sqlite", w, {}),
               si::ImportError);
  EXPECT_THROW(si::import_nsys_sqlite_buffer("not sqlite at all", "junk.sqlite", w, {}), si::ImportError);
  w.close("complete");
}

TEST(NsysSqlite, CliImportAndStatsShowTheKernelFigures) {
  if (!std::filesystem::exists(kFuser)) GTEST_SKIP() << kFuser << " is absent (shared test data)";
  const std::string db = scratch_db("fuser_cli.db");
  std::remove(db.c_str());
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "import " + kFuser + " -o " + db, import_scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("as nsys_sqlite (NVIDIA Nsight Systems 2024.6.2.25; EXPORT_SCHEMA_VERSION 3.16.1)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernels 19, memcpy 1, memset 1, nvtx_ranges 652, runtime_calls 968"), std::string::npos) << r.out;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db, import_scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("IMPORTED from nsys_sqlite"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Holistic Trace Analysis"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("393.539 us"), std::string::npos) << r.out;  // compute = the 19 kernels' 393,539 ns
  EXPECT_NE(r.out.find("no comm"), std::string::npos) << r.out;
  // a capture without profiler steps is said to be one, not a run that ended early, and HTA's
  // last-step rule is not claimed (tester34 D19); its figures are over the whole trace (the
  // rank's first op to its last)
  EXPECT_NE(r.out.find("no profiler steps: figures over the whole trace (no ProfilerStep#N spans"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("the run ended before its first measured step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every GPU event counted: HTA drops the last profiler step only when there are two"),
            std::string::npos) << r.out;
}

namespace {
/// A stand-in for nsys on PATH: `nsys export --type sqlite -o OUT FILE` records its arguments in
/// bin/args.txt and copies `fixture` to OUT (or, with `fail`, prints a message and exits 1).
std::string fake_nsys(const std::string& dir_name, const std::string& fixture_path, bool fail) {
  const auto bin = import_scratch() / dir_name;
  std::filesystem::create_directories(bin);
  std::ofstream s(bin / "nsys");
  s << "#!/bin/sh\n"
    << "echo \"$@\" > " << (bin / "args.txt").string() << "\n"
    << (fail ? "echo 'cannot open report: bad magic'; exit 1\n" : "")
    << "out=''\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=\"$2\"; shift; done\n"
    << "cp " << fixture_path << " \"$out\"\n";
  s.close();
  std::filesystem::permissions(bin / "nsys", std::filesystem::perms::owner_all);
  return bin.string();
}
std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST(NsysSqlite, NsysRepIsExportedThroughNsysOnPath) {
  const std::string rep = (import_scratch() / "report1.nsys-rep").string();
  std::ofstream(rep) << "not read by the fake nsys";
  const std::string bin = fake_nsys("bin_ok", fixture("for_rep.sqlite", {}), false);
  const std::string db = scratch_db("rep.db");
  std::remove(db.c_str());
  auto r = embedscope::test_support::run_cli("PATH=" + bin + ":$PATH " + std::string(EMBEDSCOPE_CLI),
                                             "import " + rep + " -o " + db, import_scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(rep + " (exported by nsys to SQLite)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernels 2"), std::string::npos) << r.out;
  // nsys was asked for exactly `export --type sqlite -o TMP/report1.sqlite REP`; TMP is gone after.
  const std::string args = slurp(bin + "/args.txt");
  ASSERT_EQ(args.rfind("export --type sqlite -o ", 0), 0u) << args;
  const std::string out = args.substr(24, args.find(' ', 24) - 24);
  EXPECT_EQ(out.substr(out.rfind('/') + 1), "report1.sqlite");
  EXPECT_EQ(args.substr(24 + out.size() + 1), rep + "\n");
  EXPECT_FALSE(std::filesystem::exists(out));
  const SessionReader s(db);
  EXPECT_NE(s.meta(meta::kImportSources).find("report1.nsys-rep (exported by nsys to SQLite)"), std::string::npos);
}

TEST(NsysSqlite, NsysRepWithoutNsysSaysTheCommandToRun) {
  const std::string rep = (import_scratch() / "report2.nsys-rep").string();
  std::ofstream(rep) << "x";
  auto r = embedscope::test_support::run_cli("PATH=/nonexistent " + std::string(EMBEDSCOPE_CLI),
                                             "import " + rep + " -o " + scratch_db("rep2.db"), import_scratch());
  EXPECT_EQ(r.code, 2);
  const std::string want = "which nsys (not on PATH) would export: if it is one, export it with `nsys export --type sqlite -o " +
                           (import_scratch() / "report2.sqlite").string() + " " + rep + "` and import " +
                           (import_scratch() / "report2.sqlite").string();
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  // nsys that fails: its status and what it printed.
  const std::string bin = fake_nsys("bin_fail", "/nonexistent", true);
  r = embedscope::test_support::run_cli("PATH=" + bin + ":$PATH " + std::string(EMBEDSCOPE_CLI),
                                        "import " + rep + " -o " + scratch_db("rep3.db"), import_scratch());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("exited with status 1; it printed:\n  cannot open report: bad magic"), std::string::npos) << r.err;
}

// tester34 D9: an export without TARGET_INFO_SESSION_START_TIME (times in its own ns) beside one
// with it (Unix ns) has no common time axis: the import is refused naming both files (it made a
// 55-year session); two exports without it import as before (each file's own ns, one minimum).
TEST(NsysSqlite, AnchoredAndUnanchoredExportsAreNotMixed) {
  NsysFixture loose;
  loose.epoch_ns = -1;  // written as -1: not a Unix time, read as absent
  loose.pid = 5151;
  const std::string a = fixture("anchored.sqlite", {}), b = fixture("unanchored.sqlite", loose);
  SessionWriter w(scratch_db("mixed_clocks.db"), true);
  try {
    si::import_nsys_sqlite({a, b}, w, {});
    ADD_FAILURE() << "mixing anchored and unanchored exports was not refused";
  } catch (const si::ImportError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(b + ": has no session start time (TARGET_INFO_SESSION_START_TIME.utcEpochNs)", 0),
              0u)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("while " + a + " has one (Unix ns)"), std::string::npos) << e.what();
  }
  w.close("failed");
  const std::string c = fixture("unanchored2.sqlite", loose);
  SessionWriter w2(scratch_db("two_loose.db"), true);
  const auto sum = si::import_nsys_sqlite({b, c}, w2, {});
  w2.close("complete");
  EXPECT_EQ(sum.ranks.size(), 2u);
  EXPECT_EQ(sum.origin_ns, 0);  // the step of both starts at export ns 0
  EXPECT_EQ(problem_count(sum.problems, "no_session_start_time"), 2);
}

// tester37 #11: a damaged export was "an SQLite database that is not an Nsight Systems export",
// which sends the user looking for another exporter; it says the file is damaged, in SQLite's
// words. An intact SQLite file that is no export keeps the old message.
TEST(NsysSqlite, ADamagedExportIsSaidToBeDamagedNotAnotherKindOfFile) {
  const std::string file = fixture("damaged_src.sqlite", {});
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  ASSERT_GT(bytes.size(), 4096u);
  for (size_t i = 100; i < 4096; ++i) bytes[i] = '\xff';  // the schema's page overwritten
  const std::string damaged = (import_scratch() / "damaged.sqlite").string();
  std::ofstream(damaged, std::ios::binary) << bytes;
  try {
    si::detect(damaged);
    FAIL() << "a damaged file was recognised";
  } catch (const si::ImportError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(damaged + ": the SQLite file is truncated or corrupt (", 0), 0u) << what;
    EXPECT_NE(what.find("malformed"), std::string::npos) << what;
  }
  EXPECT_EQ(si::sqlite_file_damage(file), "");
  const std::string session = std::string(EMBEDSCOPE_TEST_DATA) + "/sessions/v1.db";  // intact, not an export
  try {
    si::detect(session);
    FAIL() << "a session was taken for an export";
  } catch (const si::ImportError& e) {
    EXPECT_NE(std::string(e.what()).find("an SQLite database that is not an Nsight Systems export"), std::string::npos)
        << e.what();
  }
}
