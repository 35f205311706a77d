// The Kineto JSON importer on hand-written fixtures (tests/data/traces/), one rule each, with the
// counts each must give; and the two real traces of ../shared/data/traces against HTA's figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/model/did_not_end.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "import_test_support.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;

namespace {
std::map<std::string, OpRecord> ops_by_name(const SessionReader& r) {
  std::map<std::string, OpRecord> m;
  for (const auto& o : r.all_ops()) m[r.name(o.name_id)] = o;
  return m;
}
}  // namespace

TEST(KinetoImport, ToleranceFixtureImportsEveryValidEventAndCountsTheRest) {
  const auto sum = import_into({trace_fixture("tolerance.json")}, "tolerance.db");
  ASSERT_EQ(sum.ranks, (std::vector<int32_t>{2}));  // distributedInfo.rank
  EXPECT_EQ(sum.events.at("cpu_ops"), 9);
  EXPECT_EQ(sum.events.at("runtime_calls"), 2);
  EXPECT_EQ(sum.events.at("kernels"), 2);
  EXPECT_EQ(sum.events.at("gpu_annotations"), 1);
  EXPECT_EQ(sum.events.at("steps"), 1);
  EXPECT_EQ(sum.origin_ns, 1000000);  // ts 1000 us
  EXPECT_EQ(sum.start_ns, 2);         // 1000.0015 us -> 1000002 ns
  EXPECT_EQ(sum.end_ns, 95000);       // begin_end ends at 1095 us

  const auto& p = sum.problems;
  EXPECT_EQ(problem_count(p, "negative_duration"), 2);
  EXPECT_EQ(problem_count(p, "overlapping_spans"), 1);
  EXPECT_EQ(problem_count(p, "bad_event_json"), 3);  // invalid UTF-8, a raw control byte, "\q"
  ASSERT_NE(problem(p, "bad_event_json"), nullptr);
  EXPECT_NE(problem(p, "bad_event_json")->example.find("line 11, column 1"), std::string::npos)
      << problem(p, "bad_event_json")->example;
  EXPECT_EQ(problem(p, "bad_event_json")->severity, "data_loss");
  EXPECT_EQ(problem_count(p, "flow_events"), 2);
  EXPECT_EQ(problem_count(p, "unfinished_begin"), 1);
  EXPECT_EQ(problem_count(p, "not_stored_ph_i"), 1);
  EXPECT_EQ(problem_count(p, "bad_timestamp"), 1);
  EXPECT_EQ(problem_count(p, "event_without_ph"), 1);
  EXPECT_EQ(problem_count(p, "sub_ns_timestamp_digits"), 1);
  EXPECT_EQ(problem_count(p, "truncated"), 0);
  EXPECT_EQ(problem_count(p, "bad_top_level_value"), 0);

  const SessionReader r(scratch_db("tolerance.db"));
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  EXPECT_EQ(r.meta(meta::kImported), "1");
  EXPECT_EQ(r.meta(meta::kImportFormat), "kineto_json");
  EXPECT_EQ(r.meta(meta::kImportOriginNs), "1000000");
  EXPECT_NE(r.meta(meta::kImportProducer).find("schemaVersion 1"), std::string::npos);
  EXPECT_NE(r.meta(meta::kImportSources).find("tolerance.json"), std::string::npos);
  EXPECT_EQ(r.import_stats().size(), p.size());
  EXPECT_EQ(problem_count(r.import_stats(), "negative_duration"), 2);

  const auto ops = ops_by_name(r);
  EXPECT_EQ(r.op_count(), 17);  // 9 host ops, 2 launches, 2 kernels, 1 GPU annotation, 3 that did not end
  ASSERT_TRUE(ops.count("嵌入/запрос"));  // valid Unicode round-trips byte for byte
  EXPECT_EQ(ops.at("嵌入/запрос").start_ns, 2);
  EXPECT_EQ(ops.at("嵌入/запрос").end_ns, 2502);
  EXPECT_EQ(ops.at("嵌入/запрос").step, 7);
  ASSERT_TRUE(ops.count("say \"hi\" C:\\path"));  // escapes decoded; ts and dur given as strings
  EXPECT_EQ(ops.at("say \"hi\" C:\\path").start_ns, 10250);
  EXPECT_EQ(ops.at("say \"hi\" C:\\path").end_ns, 11250);
  EXPECT_EQ(ops.at("overlap_b").start_ns, 35000);  // kept, though it overlaps overlap_a
  EXPECT_EQ(ops.at("begin_end").start_ns, 90000);
  EXPECT_EQ(ops.at("begin_end").end_ns, 95000);
  // Events the profiler never saw end (dur -1 and -5.5, a "B" without its "E") are kept as
  // zero-length ops at their start, marked "(did not end)", outside the time range's ends: the
  // range above is the valid events' (never_ends at 1096 us starts after begin_end's 1095 us end).
  EXPECT_EQ(sum.events.at("did_not_end"), 3);
  EXPECT_FALSE(ops.count("negative"));
  EXPECT_FALSE(ops.count("never_ends"));
  for (const auto& [name, start] : std::map<std::string, int64_t>{
           {"negative (did not end)", 20000}, {"negative2 (did not end)", 21000}, {"never_ends (did not end)", 96000}}) {
    ASSERT_TRUE(ops.count(name)) << name;
    const OpRecord& o = ops.at(name);
    EXPECT_EQ(o.start_ns, start) << name;
    EXPECT_EQ(o.end_ns, start) << name;
    EXPECT_EQ(o.step, 7) << name;
    EXPECT_EQ(o.lane, 1) << name;  // thread 200, where they were recorded
    EXPECT_TRUE(did_not_end(o.start_ns, o.end_ns, r.name(o.name_id))) << name;
  }
  EXPECT_FALSE(did_not_end(ops.at("begin_end").start_ns, ops.at("begin_end").end_ns, r.name(ops.at("begin_end").name_id)));
  // Kernels join their launches by correlation ids above 2^53, kept distinct.
  EXPECT_EQ(ops.at("kernel_a").correlation, 9007199254740993u);
  EXPECT_EQ(ops.at("kernel_b").correlation, 9007199254740992u);
  EXPECT_EQ(ops.at("kernel_a").step, 7);
  EXPECT_EQ(ops.at("kernel_a").category, OpCategory::dense);

  // Lanes: 5 threads (a string pid/tid, and tids 2^53, 2^53 + 1, 2^64 - 1 distinct), the
  // annotations drawn on stream 7's track, stream 7.
  const auto lanes = r.lanes();
  ASSERT_EQ(lanes.size(), 7u);
  EXPECT_EQ(lanes[0].name, "thread worker (pid Spans)");
  EXPECT_EQ(lanes[1].name, "thread 200 (trainer)");
  EXPECT_EQ(lanes[2].name, "thread 9007199254740992 (pid 100)");
  EXPECT_EQ(lanes[3].name, "thread 9007199254740993 (pid 100)");
  EXPECT_EQ(lanes[4].name, "thread 18446744073709551615 (pid 100)");
  EXPECT_EQ(lanes[5].kind, "gpu_annotation");
  EXPECT_EQ(lanes[6].kind, "stream");
  EXPECT_EQ(lanes[6].name, "stream 7 (device 0)");
  EXPECT_EQ(ops.at("tid 2^53").lane, 2);
  EXPECT_EQ(ops.at("tid 2^53+1").lane, 3);
  EXPECT_EQ(ops.at("## forward:all2all_global_emb ##").lane, 5);
  EXPECT_EQ(ops.at("kernel_a").lane, 6);
  const auto steps = r.steps();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step, 7);
  EXPECT_EQ(steps[0].rank, 2);
  EXPECT_EQ(steps[0].start_ns, 0);
  EXPECT_EQ(steps[0].end_ns, 100000);
}

TEST(KinetoImport, EpochTimestampsKeepEveryNanosecond) {
  const auto sum = import_into({trace_fixture("epoch.json")}, "epoch.db");
  EXPECT_EQ(sum.origin_ns, 1700000000000000000);
  const SessionReader r(scratch_db("epoch.db"));
  const auto ops = ops_by_name(r);
  EXPECT_EQ(ops.at("epoch_a").start_ns, 1);
  EXPECT_EQ(ops.at("epoch_a").end_ns, 2);
  EXPECT_EQ(ops.at("epoch_b").start_ns, 2);
  EXPECT_EQ(ops.at("epoch_b").end_ns, 1001);
  EXPECT_EQ(ops.at("epoch_c").start_ns, 1000);
  EXPECT_EQ(ops.at("epoch_c").end_ns, 2000);
  EXPECT_EQ(problem_count(sum.problems, "no_rank"), 1);  // no distributedInfo: rank 0
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0}));
}

TEST(KinetoImport, MissingClosingBracketsKeepTheCompleteEvents) {
  const auto sum = import_into({trace_fixture("truncated.json")}, "truncated.db");
  EXPECT_EQ(sum.events.at("cpu_ops"), 3);
  const ImportStat* t = problem(sum.problems, "truncated");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->severity, "data_loss");
  EXPECT_NE(t->example.find("truncated after 3 events"), std::string::npos) << t->example;
  EXPECT_NE(t->example.find("line 5, column 1"), std::string::npos) << t->example;
}

// Issue 12's other truncation: the event array is closed but the document's "}" is missing (a
// writer killed after "]"); and an event ending at 0 (dur -25 at ts 25 us), which is counted as
// unfinished: kept as a zero-length op marked "(did not end)", out of the time range, taken from
// the valid events.
TEST(KinetoImport, AMissingClosingBraceKeepsEveryEventAndAnEndAtZeroIsUnfinished) {
  const auto sum = import_into({trace_fixture("missing_brace.json")}, "missing_brace.db");
  EXPECT_EQ(sum.events.at("cpu_ops"), 3);
  EXPECT_EQ(problem_count(sum.problems, "negative_duration"), 1);
  const ImportStat* t = problem(sum.problems, "truncated");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->severity, "data_loss");
  EXPECT_NE(t->example.find("truncated after 4 events"), std::string::npos) << t->example;
  EXPECT_EQ(sum.origin_ns, 10000);  // ts 10 us, the first valid event
  EXPECT_EQ(sum.start_ns, 0);
  EXPECT_EQ(sum.end_ns, 21000);  // "three" ends at 31 us
  EXPECT_EQ(sum.events.at("did_not_end"), 1);
  const SessionReader r(scratch_db("missing_brace.db"));
  EXPECT_EQ(r.op_count(), 4);  // the three, and "ends at 0" kept as a zero-length op at its start
  const auto ops = ops_by_name(r);
  ASSERT_TRUE(ops.count("ends at 0 (did not end)"));
  const OpRecord& unfinished = ops.at("ends at 0 (did not end)");
  EXPECT_EQ(unfinished.start_ns, 15000);  // ts 25 us - origin 10 us
  EXPECT_EQ(unfinished.end_ns, 15000);
  EXPECT_EQ(unfinished.category, OpCategory::other);
  EXPECT_TRUE(did_not_end(unfinished.start_ns, unfinished.end_ns, r.name(unfinished.name_id)));
  EXPECT_EQ(without_did_not_end(r.name(unfinished.name_id)), "ends at 0");
}

TEST(KinetoImport, GzipCutShortKeepsWhatWasDecoded) {
  const auto whole = import_into({trace_fixture("whole.json.gz")}, "whole.db");
  EXPECT_TRUE(whole.problems.empty() || problem_count(whole.problems, "gzip_cut_short") == 0);
  EXPECT_EQ(whole.events.at("kernels"), 5);
  const auto sum = import_into({trace_fixture("gzip_cut_short.json.gz")}, "cut.db");
  EXPECT_EQ(problem_count(sum.problems, "gzip_cut_short"), 1);
  EXPECT_EQ(problem_count(sum.problems, "truncated"), 1);
  // The 1333 bytes decoded hold the metadata, 3 steps, 2 launches, a kernel and a record_param_comms.
  // The cut fell among the runtime calls and kernels (written after the host ops), before the
  // steps' ends: all 3 are incomplete, out of the step figures (cut_lost_gpu_events).
  EXPECT_EQ(sum.events.at("steps"), 0);
  EXPECT_EQ(problem_count(sum.problems, "cut_lost_gpu_events"), 1);
  EXPECT_EQ(sum.events.at("runtime_calls"), 2);
  EXPECT_EQ(sum.events.at("kernels"), 1);
  EXPECT_EQ(sum.events.at("cpu_ops"), 1);
}

TEST(KinetoImport, TwoFilesClaimingOneRankAreAProblemNamingBoth) {
  const auto sum = import_into({trace_fixture("dup_rank")}, "dup.db");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0}));
  const ImportStat* d = problem(sum.problems, "duplicate_rank");
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->example.find("a.json"), std::string::npos);
  EXPECT_NE(d->example.find("b.json"), std::string::npos);
  EXPECT_EQ(sum.events.at("collectives"), 2);  // a.json's, the one imported
}

TEST(KinetoImport, RecordParamCommsBecomeCollectivesOfTheirNcclKernels) {
  const auto sum = import_into({trace_fixture("hta_small")}, "hta_small.db");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0, 1}));
  const SessionReader r(scratch_db("hta_small.db"));
  EXPECT_EQ(r.meta(meta::kWorldSize), "2");
  EXPECT_EQ(r.meta(meta::kWallAnchorUnixNs), "1700000000000000000");  // baseTimeNanoseconds + origin 0
  const auto c = r.collectives();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].rank, 0);
  EXPECT_EQ(c[0].op, "all_reduce");
  EXPECT_EQ(c[0].name, "allreduce");
  EXPECT_EQ(c[0].group, "0");
  EXPECT_EQ(c[0].sequence, 0u);
  EXPECT_EQ(c[0].dtype, "float32");
  EXPECT_EQ(c[0].step, 1);
  EXPECT_EQ(c[0].start_ns, 40000);  // the NCCL kernel's span
  EXPECT_EQ(c[0].end_ns, 90000);
  EXPECT_EQ(c[0].bytes_sent, 4000);  // 2 (n-1)/n x 1000 x 4 bytes
  EXPECT_EQ(c[0].peers, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(c[1].op, "all_to_all");
  EXPECT_EQ(c[1].dtype, "int64");
  EXPECT_EQ(c[1].sequence, 1u);
  EXPECT_EQ(c[1].step, 2);
  EXPECT_EQ(c[1].send_elements, (std::vector<int64_t>{20, 40}));
  EXPECT_EQ(c[1].recv_elements, (std::vector<int64_t>{30, 60}));
  EXPECT_EQ(c[1].bytes_sent, 320);      // 40 elements to rank 1, 8 bytes each
  EXPECT_EQ(c[1].bytes_received, 480);  // 60 from rank 1
  const auto ops = r.all_ops();
  std::map<std::string, OpCategory> cat;
  for (const auto& o : ops) cat[r.name(o.name_id)] = o.category;
  EXPECT_EQ(cat["ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"], OpCategory::comm);
  EXPECT_EQ(cat["Memcpy DtoD (Device -> Device)"], OpCategory::memcpy);
  EXPECT_EQ(cat["gemm_kernel"], OpCategory::dense);
  EXPECT_EQ(cat["record_param_comms"], OpCategory::comm);
  EXPECT_EQ(cat["cudaLaunchKernel"], OpCategory::other);
  // each NCCL kernel carries its collective's bytes (sent + received), as an engine run's comm
  // op does, so the collectives view and a range's bytes are not 0 B
  std::map<std::pair<int32_t, int64_t>, int64_t> kernel_bytes;  // (rank, start) -> bytes
  for (const auto& o : ops)
    if (r.name(o.name_id).rfind("nccl", 0) == 0) kernel_bytes[{o.rank, o.start_ns}] = o.bytes;
  for (const auto& col : c)
    if (col.rank == 0) {
      EXPECT_EQ(kernel_bytes.at({col.rank, col.start_ns}), col.bytes_sent + col.bytes_received) << col.name;
    }
  EXPECT_EQ(kernel_bytes.at({c[0].rank, c[0].start_ns}), 8000);
}

// The real traces (HTA's test data, ../shared/data/traces/README.md) against the figures HTA
// computes for them: overlap % to 0.01, idle / compute / non-compute to 1 us.
TEST(KinetoImport, SharedTracesGiveHtasNumbers) {
  const std::string dir = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces";
  if (!std::filesystem::exists(dir + "/nccl_data.json.gz")) GTEST_SKIP() << dir << " is absent (shared test data)";
  struct Case {
    const char* file;
    int32_t rank;
    double overlap_pct;
    int64_t idle_us, compute_us, non_compute_us;
  };
  for (const Case& k : {Case{"nccl_data.json.gz", 0, 14.31, 338781, 75169, 21636},
                        Case{"trace_diff_test.json.gz", 1, 68.80, 46910, 429216, 152245}}) {
    SCOPED_TRACE(k.file);
    const std::string db = std::string(k.file) + ".db";
    const auto sum = import_into({dir + "/" + k.file}, db);
    ASSERT_EQ(sum.ranks, (std::vector<int32_t>{k.rank}));
    const SessionReader r(scratch_db(db));
    const auto f = gpu_kernel_figures(r);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].rank, k.rank);
    EXPECT_TRUE(f[0].has_comm);
    EXPECT_NEAR(f[0].overlap_pct, k.overlap_pct, 0.005);
    EXPECT_NEAR(f[0].idle_ns / 1000.0, k.idle_us, 1.0);
    EXPECT_NEAR(f[0].compute_ns / 1000.0, k.compute_us, 1.0);
    EXPECT_NEAR(f[0].non_compute_ns / 1000.0, k.non_compute_us, 1.0);
    // each trace says world size 2 and holds one rank: the other is untraced, not a row of zeros
    const RunStats st = analyze(r);
    EXPECT_EQ(st.world_size, 2);
    ASSERT_EQ(st.ranks.size(), 1u);
    EXPECT_EQ(st.ranks[0].rank, k.rank);
    EXPECT_EQ(st.untraced_ranks, (std::vector<int32_t>{1 - k.rank}));
    // the collectives' exposed time is what the rank's streams' compute leaves uncovered, as the
    // rank's own figure (tester35 D5: every collective read 0 exposed, its host spans "hid" it);
    // nccl_data's communication kernels never overlap each other, so the two are the same sum
    int64_t exposed = 0;
    for (const auto& c : st.collectives) exposed += c.exposed_ns;
    EXPECT_GT(exposed, 0);
    if (std::string(k.file) == "nccl_data.json.gz") { EXPECT_EQ(exposed, st.ranks[0].exposed_comm_ns); }
  }
}

// Names with raw quotes and backslashes (tests/data/traces/raw_quotes.json, Kineto's layout of
// one event per block of lines): an unescaped quote pair costs that event; a trailing backslash
// that escapes the closing quote shifts every later quote pair, which the framing notices at the
// first line break inside a string and resumes at the next line starting an event. 4 bad events
// (lines 9, 17, 25 and 27), the 3 kept ones around them and the step are imported, and the
// document's closing keys are still read (not "truncated").
TEST(KinetoImport, RawQuotesAndBackslashesCostOnlyTheirEvent) {
  const auto sum = import_into({trace_fixture("raw_quotes.json")}, "raw_quotes.db");
  const auto& p = sum.problems;
  EXPECT_EQ(problem_count(p, "bad_event_json"), 4);
  EXPECT_EQ(problem_count(p, "truncated"), 0);
  ASSERT_NE(problem(p, "bad_event_json"), nullptr);
  EXPECT_NE(problem(p, "bad_event_json")->example.find("line 9, column 3"), std::string::npos)
      << problem(p, "bad_event_json")->example;
  EXPECT_EQ(sum.events.at("cpu_ops"), 3);
  EXPECT_EQ(sum.events.at("steps"), 1);
  const SessionReader r(scratch_db("raw_quotes.db"));
  const auto ops = ops_by_name(r);
  EXPECT_EQ(ops.size(), 3u);  // the three kept (the step annotation becomes the step)
  EXPECT_EQ(ops.at("kept_1").start_ns, 2000);
  EXPECT_EQ(ops.at("kept_2").start_ns, 4000);
  EXPECT_EQ(ops.at("kept_3 \"escaped\" C:\\ok\\").start_ns, 6000);
}

// A kernel and a host op that did not end (tests/data/traces/unfinished_kernel.json: gemm_kernel
// at 100 us with dur -1, aten::mm at 200 us ending at 0) are kept as zero-length ops marked
// "(did not end)", but count no time: the time range, the first-to-last-kernel span and HTA's
// figures are those of the two valid kernels, gemm [10, 20) us and the NCCL kernel [15, 25) us:
// comm 10 us, 5 of them under compute (50 %), span 15 us = union 15 us (idle 0), compute 10 us,
// non-compute 15 - 10 - 0 = 5 us. Counting the marker at 100 us would make the span 90 us and
// idle 75 us.
TEST(KinetoImport, EventsThatDidNotEndAreKeptButCountNoTime) {
  const auto sum = import_into({trace_fixture("unfinished_kernel.json")}, "unfinished_kernel.db");
  EXPECT_EQ(sum.events.at("kernels"), 2);
  EXPECT_EQ(sum.events.at("did_not_end"), 2);
  EXPECT_EQ(problem_count(sum.problems, "negative_duration"), 2);
  EXPECT_EQ(sum.origin_ns, 0);
  EXPECT_EQ(sum.start_ns, 0);
  EXPECT_EQ(sum.end_ns, 25000);  // the NCCL kernel's end, not aten::mm's start at 200 us
  const SessionReader r(scratch_db("unfinished_kernel.db"));
  const auto ops = ops_by_name(r);
  ASSERT_TRUE(ops.count("gemm_kernel (did not end)"));
  ASSERT_TRUE(ops.count("aten::mm (did not end)"));
  const OpRecord& k = ops.at("gemm_kernel (did not end)");
  EXPECT_EQ(k.start_ns, 100000);
  EXPECT_EQ(k.end_ns, 100000);
  EXPECT_EQ(k.lane, ops.at("gemm_kernel").lane);  // on its stream
  EXPECT_EQ(ops.at("aten::mm (did not end)").start_ns, 200000);
  EXPECT_EQ(ops.at("aten::mm (did not end)").end_ns, 200000);

  const auto f = gpu_kernel_figures(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].gpu_events, 2);
  EXPECT_TRUE(f[0].has_comm);
  EXPECT_EQ(f[0].comm_ns, 10000);
  EXPECT_EQ(f[0].overlap_ns, 5000);
  EXPECT_DOUBLE_EQ(f[0].overlap_pct, 50.0);
  EXPECT_EQ(f[0].kernel_time_ns, 15000);
  EXPECT_EQ(f[0].idle_ns, 0);
  EXPECT_EQ(f[0].compute_ns, 10000);
  EXPECT_EQ(f[0].non_compute_ns, 5000);
}

// The collectives view (RunStats::collectives: `stats`' table, the workbench's Collectives
// table) lists each collective of an imported trace once, as its NCCL kernel carrying the bytes
// of its record_param_comms, not also the record_param_comms host span (hta_small rank 0):
//   AllReduce [40, 90) us, 8000 B; compute under it: gemm [20, 60) -> exposed 50 - 20 = 30 us
//   SendRecv [140, 170) us, 800 B; elementwise [130, 150) -> exposed 30 - 10 = 20 us
// The thread-level figures still count the host spans as communication, as before:
//   comm: record_param_comms [11, 16) + AllReduce [40, 90) + record_param_comms [114, 118) +
//   SendRecv [140, 170) = 5 + 50 + 4 + 30 = 89 us; under compute (launches are host ops):
//   [11, 14) + [40, 60) + [115, 117) + [140, 150) = 3 + 20 + 2 + 10 = 35 us (39.3 %).
TEST(KinetoImport, TheCollectivesViewListsEachCollectiveOnceAsItsKernel) {
  import_into({trace_fixture("hta_small")}, "hta_small_collectives.db");
  const SessionReader r(scratch_db("hta_small_collectives.db"));
  const RunStats st = analyze(r);
  std::map<std::string, CollectiveTimes> by_name;
  for (const auto& c : st.collectives) by_name[r.name(c.name_id)] = c;
  EXPECT_EQ(by_name.count("record_param_comms"), 0u);
  ASSERT_EQ(st.collectives.size(), 2u);
  const auto& ar = by_name.at("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)");
  EXPECT_EQ(ar.count, 1);
  EXPECT_EQ(ar.bytes, 8000);
  EXPECT_EQ(ar.time_ns, 50000);
  EXPECT_EQ(ar.exposed_ns, 30000);
  const auto& sr = by_name.at("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)");
  EXPECT_EQ(sr.count, 1);
  EXPECT_EQ(sr.bytes, 800);
  EXPECT_EQ(sr.time_ns, 30000);
  EXPECT_EQ(sr.exposed_ns, 20000);
  ASSERT_EQ(st.ranks.size(), 2u);
  // rank 0's figures are its streams' (stream level): the two NCCL kernels, 50 + 30 us, of which
  // the gemm kernels cover 30 us: 37.5 %, HTA's figure for the rank (its host record_param_comms
  // spans, 9 us more of comm, are left out)
  EXPECT_EQ(st.ranks[0].comm_ns, 80000);
  EXPECT_EQ(st.ranks[0].overlap_ns, 30000);
  EXPECT_EQ(st.ranks[1].comm_ns, 0);
}
