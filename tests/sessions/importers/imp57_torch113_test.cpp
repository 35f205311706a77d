// The Kineto importer on real torch 1.13.1 traces (testerB's findings F2, F3, F5, F7, F8, F9,
// F12): Debian's torch has no Kineto, so torch.profiler writes the legacy profiler's bare array of
// "X" events (pid "CPU functions", ts from the profiler's own start, no distributedInfo). The
// fixtures in tests/data/traces/torch113 are those traces trimmed by make_torch113.py there (every
// step span and gloo:* / c10d:: span kept with its real times, a few ops per step). Every expected
// number below was worked out by hand from the fixtures' JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/analysis/gpu_run.h"
#include "embedscope/sessions/exporters/kineto_export.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "import_test_support.h"
#include "importers/kineto_json/process_windows.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace i57 = embedscope::sessions;
namespace i57t = embedscope::sessions::testing;

std::string i57_fixture(const std::string& name) { return i57t::trace_fixture("torch113/" + name); }

/// Imports `paths` into scratch/NAME with `align` ("none" or "collectives").
i57::importers::ImportSummary i57_import(const std::vector<std::string>& paths, const std::string& name,
                                         const std::string& align = "none") {
  i57::SessionWriter w(i57t::scratch_db(name), true);
  i57::importers::ImportOptions opt;
  opt.align = align;
  auto sum = i57::importers::import_kineto_json(i57::importers::expand_inputs(paths), w, opt);
  w.close("complete");
  return sum;
}

std::string i57_example(const std::vector<i57::ImportStat>& p, const std::string& name) {
  const auto* s = i57t::problem(p, name);
  return s ? s->example : std::string();
}
}  // namespace

// F2: three windows of one process (worker "trainer", schedule repeat=3) are one rank, in order,
// each placed by its file name's ms stamp with its last event there: window 2 (ts 128 .. 479 us)
// is shifted by 3 ms + (537 - 479) us = 3,058 us, window 3 (58 .. 342 us) by 7 ms + 195 us =
// 7,195 us; session 0 is the first event, 136 us. Before: "ranks 0, 1, 2", overlaid from t = 0.
TEST(Imp57Torch113, OneProcesssWindowsAreOneRankInTimeOrder) {
  const auto sum = i57_import({i57_fixture("cycles")}, "cycles.db");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0}));
  EXPECT_EQ(sum.files.size(), 3u);
  const i57::SessionReader r(i57t::scratch_db("cycles.db"));
  std::vector<std::tuple<int64_t, int64_t, int64_t>> steps;  // step, start, end (session ns)
  for (const auto& s : r.steps()) steps.emplace_back(s.step, s.start_ns, s.end_ns);
  EXPECT_EQ(steps, (std::vector<std::tuple<int64_t, int64_t, int64_t>>{
                       {1, 47'000, 228'000},
                       {2, 249'000, 401'000},
                       {5, 148'000 + 3'058'000 - 136'000, 321'000 + 3'058'000 - 136'000},
                       {6, 343'000 + 3'058'000 - 136'000, 479'000 + 3'058'000 - 136'000},
                       {9, 66'000 + 7'195'000 - 136'000, 199'000 + 7'195'000 - 136'000},
                       {10, 212'000 + 7'195'000 - 136'000, 342'000 + 7'195'000 - 136'000}}));
  EXPECT_EQ(r.meta(i57::meta::kWorldSize), "1");
  const std::string joined = i57_example(sum.problems, "windows_of_one_process");
  EXPECT_NE(joined.find("(worker \"trainer\", no distributedInfo.rank) are 3 successive profiling windows of one "
                        "process: imported as one rank"),
            std::string::npos)
      << joined;
  EXPECT_NE(joined.find("placed by the time stamp in its file name"), std::string::npos) << joined;
  EXPECT_NE(joined.find("3.000 ms, 4.000 ms after the previous window's"), std::string::npos) << joined;
  auto sources = nlohmann::json::parse(r.meta(i57::meta::kImportSources));
  ASSERT_EQ(sources.size(), 3u);
  for (const auto& s : sources) EXPECT_EQ(s["rank"], 0);
}

// F2 + F8: the uneven run's main window and the 519-byte stub window the profiler wrote when it
// stopped after the loop (ProfilerStep#5, 17 us, nothing in it but aten::empty) are one rank; the
// stub's span is no step. torch 1.13 labels the first two steps ProfilerStep#0 (schedule wait=0):
// 204 .. 866 us and 900 .. 5501 us do not overlap, so both are steps, the second and the later
// ones numbered one higher: steps 0..5 lasting 662, 4601, 249, 11618, 50179 and 850 us. Before:
// rank 1 of one 17 us step, and the 4.6 ms step dropped as duplicate_step (its ops in no step).
TEST(Imp57Torch113, TheStubWindowIsNoRankNorStepAndARepeatedStepZeroIsTheNextStep) {
  const auto sum = i57_import({i57_fixture("uneven")}, "uneven.db");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0}));
  const i57::SessionReader r(i57t::scratch_db("uneven.db"));
  std::vector<std::pair<int64_t, int64_t>> steps;  // step, duration ns
  for (const auto& s : r.steps()) steps.emplace_back(s.step, s.end_ns - s.start_ns);
  EXPECT_EQ(steps, (std::vector<std::pair<int64_t, int64_t>>{
                       {0, 662'000}, {1, 4'601'000}, {2, 249'000}, {3, 11'618'000}, {4, 50'179'000}, {5, 850'000}}));
  EXPECT_EQ(i57t::problem_count(sum.problems, "duplicate_step"), 0);
  EXPECT_EQ(i57t::problem_count(sum.problems, "repeated_step_number"), 1);
  EXPECT_NE(i57_example(sum.problems, "repeated_step_number")
                .find("ProfilerStep#0 appears twice, one right after the other (204 .. 866 us and 900 .. 5501 us)"),
            std::string::npos);
  EXPECT_NE(i57_example(sum.problems, "stub_window").find("holds only ProfilerStep#5 (17.000 us) with no op in it but "
                                                          "aten::empty"),
            std::string::npos)
      << i57_example(sum.problems, "stub_window");
  // the second ProfilerStep#0's 6 ops are step 1's; in no step: the 3 ops (aten::zeros, empty,
  // zero_) before each of the 6 steps and the stub's 4 events (placed 2 ms + 68,555 us later)
  std::map<int64_t, int> ops_of_step;
  int64_t last_start = 0;
  for (const auto& o : r.all_ops()) {
    ++ops_of_step[o.step];
    last_start = std::max(last_start, o.start_ns);
  }
  EXPECT_EQ(ops_of_step[1], 6);
  EXPECT_EQ(ops_of_step[-1], 6 * 3 + 4);
  EXPECT_EQ(last_start, 151'000 + 70'555'000 - 135'000);  // the stub's aten::empty
}

// F3: a DLRM trace cut inside ProfilerStep#2's ops (12 of them survived): step 2 is incomplete,
// with no window (its events keep step 2), so the step figures are step 1's alone; the trace cut
// line fits a CPU trace. Before: 2 steps, step 2's figures from its first 12 ops.
TEST(Imp57Torch113, TheStepTheCutFellInIsIncompleteAndOutOfTheFigures) {
  const std::string cut = i57_fixture("dlrm_cut.pt.trace.json");
  const auto sum = i57_import({cut}, "dlrm_cut.db");
  EXPECT_EQ(i57t::problem_count(sum.problems, "truncated"), 1);
  const i57::SessionReader r(i57t::scratch_db("dlrm_cut.db"));
  const auto steps = r.steps();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step, 1);
  int in_step2 = 0;
  for (const auto& o : r.all_ops()) in_step2 += o.step == 2 ? 1 : 0;
  EXPECT_EQ(in_step2, 12);
  const std::string lost = "rank 0: the cut fell inside ProfilerStep#2 on its thread: its events after the cut are "
                           "lost, so step 2 is incomplete and out of the step figures (its 12 events kept)";
  EXPECT_EQ(i57_example(sum.problems, "last_step_cut"), lost);
  const i57::RunStats st = i57::analyze(r);
  EXPECT_EQ(st.steps, 1);
  EXPECT_EQ(i57::gpu_run_text(r, st),
            "trace cut    " + cut +
                " was cut short (import problem truncated, data_loss): its events after the cut are missing, not idle; "
                "the figures count only the host-thread events written before the cut (a CPU trace: it had no GPU "
                "events)\ntrace cut    " + lost + "\n");
}

// F7: a gloo rank's collectives are its gloo:* calls, one record each (3 all_to_all, 3
// all_reduce on rank 0), timed by the worker thread's call, numbered per operation in start
// order; the c10d::allreduce_ calls that issued them are no second collective; the trace holds
// no size: bytes unknown (collective_args_not_captured, stats --json null). Before: no record
// at all, stats listing c10d::allreduce_ beside gloo:all_reduce with 0 B.
TEST(Imp57Torch113, GlooCallsAreTheCollectivesAndTheirBytesAreUnknown) {
  const auto sum = i57_import({i57_fixture("dist2")}, "dist2.db");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0, 1}));
  const i57::SessionReader r(i57t::scratch_db("dist2.db"));
  const int64_t origin = std::stoll(r.meta(i57::meta::kImportOriginNs));
  EXPECT_EQ(origin, 212'000);  // rank 1's first event
  std::vector<std::tuple<std::string, std::string, uint64_t, int64_t, int64_t, int64_t>> rank0;
  for (const auto& c : r.collectives())
    if (c.rank == 0) rank0.emplace_back(c.op, c.name, c.sequence, c.step, c.start_ns + origin, c.end_ns + origin);
  std::sort(rank0.begin(), rank0.end(), [](const auto& a, const auto& b) { return std::get<4>(a) < std::get<4>(b); });
  using C = std::tuple<std::string, std::string, uint64_t, int64_t, int64_t, int64_t>;
  EXPECT_EQ(rank0, (std::vector<C>{{"all_to_all", "gloo:all_to_all", 1, 1, 4'783'000, 8'922'000},
                                   {"all_reduce", "gloo:all_reduce", 1, 1, 11'576'000, 12'025'000},
                                   {"all_to_all", "gloo:all_to_all", 2, 2, 19'194'000, 19'391'000},
                                   {"all_reduce", "gloo:all_reduce", 2, 2, 22'942'000, 23'389'000},
                                   {"all_to_all", "gloo:all_to_all", 3, 3, 27'557'000, 27'557'000 + 2'027'000},
                                   {"all_reduce", "gloo:all_reduce", 3, 3, 30'935'000, 31'352'000}}));
  EXPECT_EQ(r.collectives().size(), 12u);
  EXPECT_EQ(i57t::problem_count(sum.problems, "collective_args_not_captured"), 2);  // once per rank
  // the gloo call carries its sequence (an engine run's comm op does): one instance on both ranks
  for (const auto& o : r.all_ops()) {
    const std::string& n = r.name(o.name_id);
    if (n.rfind("gloo:", 0) == 0) {
      EXPECT_GE(o.correlation, 1u) << n;
    }
    if (n.rfind("c10d::", 0) == 0) {
      EXPECT_EQ(o.correlation, 0u) << n;
    }
  }
  const auto dir = embedscope::test_support::fresh_scratch("i57_cli");
  const auto s = embedscope::test_support::run_cli(std::string(EMBEDSCOPE_CLI), "stats --json '" + i57t::scratch_db("dist2.db") + "'", dir);
  ASSERT_EQ(s.code, 0) << s.err;
  const auto j = nlohmann::json::parse(s.out);
  ASSERT_FALSE(j["collectives"].empty());
  for (const auto& c : j["collectives"]) EXPECT_TRUE(c["bytes_sent"].is_null()) << c.dump();
}

// F5: per-rank files without an epoch (ts from each process's profiler start) are not put on one
// axis silently (unrelated_clocks); --align collectives matches the gloo calls by name and order:
// rank 1's n-th collective ends minus rank 0's are -5804, +242, -3199, -3117, -5012, -3204 us, whose
// median (-3204 + -3199) / 2 = -3201.5 us is its offset. Before: no problem, and --align
// collectives found "no collective in common".
TEST(Imp57Torch113, RanksWithoutAnEpochAreSaidAndAlignOnTheirNthCollective) {
  const auto none = i57_import({i57_fixture("dist2")}, "dist2_none.db");
  const std::string said = i57_example(none.problems, "unrelated_clocks");
  EXPECT_NE(said.find("count their ts from each one's own profiler start (no baseTimeNanoseconds, no absolute ts): the "
                      "ranks' clocks are unrelated"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("rank 1 -3.20"), std::string::npos) << said;
  EXPECT_NE(said.find("matched by name and order"), std::string::npos) << said;
  EXPECT_EQ(i57t::problem_count(none.problems, "clock_disagreement"), 0);
  const auto aligned = i57_import({i57_fixture("dist2")}, "dist2_aligned.db", "collectives");
  const auto a = nlohmann::json::parse(aligned.alignment_json);
  EXPECT_EQ(a["offsets_ns"]["1"], -3'201'500);
  EXPECT_EQ(a["matches"]["1"], 6);
  EXPECT_TRUE(a["unaligned_ranks"].empty());
  EXPECT_NE(aligned.alignment_text.find("collectives matched by name and order"), std::string::npos);
  EXPECT_EQ(i57t::problem_count(aligned.problems, "unrelated_clocks"), 0);
}

// F9: torch's own export of a profile that recorded nothing, "[]", says what {"traceEvents": []}
// says. Before: "not a format embedscope import reads".
TEST(Imp57Torch113, AnEmptyArrayIsATraceWithNoEvents) {
  const std::string empty = i57_fixture("real_empty.json");
  EXPECT_STREQ(i57::importers::detect(empty).format, "kineto_json");
  i57::SessionWriter w(i57t::scratch_db("empty.db"), true);
  try {
    i57::importers::import_paths({empty}, w, {});
    ADD_FAILURE() << "imported";
  } catch (const i57::importers::ImportError& e) {
    EXPECT_EQ(std::string(e.what()), empty + ": no event imported (the trace has no events); no session written");
  }
  w.close("failed");
}

// F12: the Kineto export of a gloo import says backend gloo (inferred from its gloo:* calls), and
// of an import whose backend nothing names, none (before: "nccl" for both); its gloo calls stay
// host ops (not launches); compare calls the legacy trace what it is.
TEST(Imp57Torch113, TheKinetoExportCarriesTheBackendAndCompareNamesTheLegacyProfiler) {
  i57_import({i57_fixture("dist2")}, "dist2_export.db");
  const i57::SessionReader r(i57t::scratch_db("dist2_export.db"));
  EXPECT_EQ(r.meta(i57::meta::kImportBackend), "gloo");
  std::ostringstream out;
  i57::export_kineto_rank(r, 0, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("\"distributedInfo\": {\"backend\": \"gloo\", \"rank\": 0"), std::string::npos)
      << text.substr(0, 200);
  EXPECT_EQ(text.find("cuda_runtime"), std::string::npos);
  EXPECT_EQ(i57::what_it_ran(r), "imported PyTorch profiler trace (legacy, no Kineto)");
  EXPECT_EQ(r.meta(i57::meta::kImportProducer), "PyTorch profiler trace (legacy, no Kineto)");

  i57_import({i57_fixture("cycles")}, "cycles_export.db");
  const i57::SessionReader c(i57t::scratch_db("cycles_export.db"));
  EXPECT_EQ(c.meta(i57::meta::kImportBackend, "absent"), "absent");
  std::ostringstream out2;
  i57::export_kineto_rank(c, 0, out2);
  EXPECT_NE(out2.str().find("\"distributedInfo\": {\"rank\": 0"), std::string::npos) << out2.str().substr(0, 200);
}

// F2's file names: "{worker}.{stamp}.pt.trace.json[.gz]", the stamp ms (torch 1.x) or ns (2.x).
TEST(Imp57Torch113, TheTraceHandlersFileNamesGiveWorkerAndStamp) {
  namespace k = embedscope::sessions::importers::kineto;
  auto n = k::handler_file_name("/t/trainer.1796601585049.pt.trace.json");
  EXPECT_TRUE(n.ok);
  EXPECT_EQ(n.dir, "/t");
  EXPECT_EQ(n.worker, "trainer");
  EXPECT_EQ(n.stamp_ns, 1'796'601'585'049'000'000);
  n = k::handler_file_name("host_12.a.1733500000123456789.pt.trace.json.gz");  // torch 2.x time.time_ns()
  EXPECT_TRUE(n.ok);
  EXPECT_EQ(n.worker, "host_12.a");
  EXPECT_EQ(n.stamp_ns, 1'733'500'000'123'456'789);
  EXPECT_FALSE(k::handler_file_name("rank0.json").ok);
  EXPECT_FALSE(k::handler_file_name("hosta_1001.pt.trace.json").ok);  // no stamp
  EXPECT_FALSE(k::handler_file_name("w.12x.pt.trace.json").ok);
  EXPECT_FALSE(k::handler_file_name("w.99999999999999999999.pt.trace.json").ok);  // 20 digits
  EXPECT_FALSE(k::handler_file_name(".1796601585049.pt.trace.json").ok);          // no worker
}

// F2 with Kineto's epoch: windows of one worker with baseTimeNanoseconds 1 ms apart are one rank on
// that clock (the second's ts 100 us -> 1,100 us); windows that overlap on it ran at the same
// time, processes sharing a worker name, and stay two ranks.
TEST(Imp57Torch113, WindowsWithAnEpochArePlacedOnItAndConcurrentOnesStayApart) {
  const auto dir = embedscope::test_support::fresh_scratch("i57_epoch");
  auto window = [&](const std::string& name, int64_t base, int step) {
    std::ofstream(dir / name) << "{\"schemaVersion\": 1, \"baseTimeNanoseconds\": " << base
                              << ", \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": "
                                 "\"ProfilerStep#"
                              << step << "\", \"pid\": 7, \"tid\": 7, \"ts\": 100, \"dur\": 100}, {\"ph\": \"X\", "
                                         "\"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 7, \"tid\": 7, \"ts\": "
                                         "110, \"dur\": 50}]}";
  };
  const int64_t base = 1'733'500'000'000'000'000;
  window("w.1733500000001.pt.trace.json", base, 1);
  window("w.1733500000002.pt.trace.json", base + 1'000'000, 2);
  const auto one = i57_import({dir.string()}, "epoch_one.db");
  EXPECT_EQ(one.ranks, (std::vector<int32_t>{0}));
  const i57::SessionReader r(i57t::scratch_db("epoch_one.db"));
  std::vector<std::pair<int64_t, int64_t>> steps;
  for (const auto& s : r.steps()) steps.emplace_back(s.step, s.start_ns);
  EXPECT_EQ(steps, (std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {2, 1'000'000}}));
  EXPECT_NE(i57_example(one.problems, "windows_of_one_process").find("baseTimeNanoseconds"), std::string::npos);
  window("w.1733500000002.pt.trace.json", base + 50'000, 2);  // 50 us later: inside the first window
  const auto two = i57_import({dir.string()}, "epoch_two.db");
  EXPECT_EQ(two.ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(i57t::problem_count(two.problems, "windows_of_one_process"), 0);
}
