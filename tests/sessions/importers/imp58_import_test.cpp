// Importer round trips and what a failed profile leaves: a gloo trace's unknown collective bytes
// stay unknown through `export --format kineto` and back; every cut window of one process has its
// cut step made incomplete (not only the last window's); a last iteration aborted before its
// backward pass and optimizer step is incomplete, a whole one stays a step; `stats` / `compare`
// given an Nsight Systems export say to import it. Fixtures: tests/data/traces/torch113
// (make_torch113.py: cycles_cut/, dlrm_crash / dlrm_whole), nsys_fixture.h; the expected numbers
// were worked out from the fixtures' JSON (Python's json module on the complete events).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/exporters/kineto_export.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"
#include "import_test_support.h"
#include "nsys_fixture.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace i58 = embedscope::sessions;
namespace i58t = embedscope::sessions::testing;

std::string i58_fixture(const std::string& name) { return i58t::trace_fixture("torch113/" + name); }

i58::importers::ImportSummary i58_import(const std::vector<std::string>& paths, const std::string& name) {
  i58::SessionWriter w(i58t::scratch_db(name), true);
  i58::importers::ImportOptions opt;
  opt.align = "none";
  auto sum = i58::importers::import_kineto_json(i58::importers::expand_inputs(paths), w, opt);
  w.close("complete");
  return sum;
}

std::string i58_example(const std::vector<i58::ImportStat>& p, const std::string& name) {
  const auto* s = i58t::problem(p, name);
  return s ? s->example : std::string();
}

std::vector<std::tuple<int64_t, int64_t, int64_t>> i58_steps(const std::string& db) {
  const i58::SessionReader r(i58t::scratch_db(db));
  std::vector<std::tuple<int64_t, int64_t, int64_t>> steps;  // step, start, end (session ns)
  for (const auto& s : r.steps()) steps.emplace_back(s.step, s.start_ns, s.end_ns);
  return steps;
}

fs::path i58_scratch() {
  static const fs::path dir = embedscope::test_support::fresh_scratch("es_imp58i_" + std::to_string(getpid()));
  return dir;
}
}  // namespace

// The 2-rank gloo trace (legacy profiler: its gloo:* calls are the collectives, bytes unknown)
// exported to Kineto and imported back: before, the export wrote "In msg nelems": 0 on every
// record_param_comms span, so the round trip read 0 B moved (stats: bytes_sent 0) and dropped
// collective_args_not_captured. The spans now carry no counts and come back unknown.
TEST(Imp58Import, AGlooTracesUnknownBytesStayUnknownThroughAKinetoRoundTrip) {
  i58_import({i58_fixture("dist2")}, "i58_dist2.db");
  const fs::path dir = i58_scratch() / "dist2_kineto";
  fs::remove_all(dir);
  {
    const i58::SessionReader r(i58t::scratch_db("i58_dist2.db"));
    ASSERT_EQ(r.collectives().size(), 12u);
    i58::export_kineto_traces(r, dir.string());
  }
  std::ifstream in(dir / "rank_0.json");
  const auto j = nlohmann::json::parse(in);
  int spans = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("name", "") != "record_param_comms") continue;
    ++spans;
    EXPECT_FALSE(e["args"].contains("In msg nelems")) << e.dump();
    EXPECT_FALSE(e["args"].contains("Out msg nelems")) << e.dump();
    EXPECT_FALSE(e["args"].contains("dtype")) << e.dump();  // "unknown" is no dtype
    EXPECT_TRUE(e["args"].contains("Collective name")) << e.dump();
  }
  EXPECT_EQ(spans, 6);  // rank 0's 3 all_to_all + 3 all_reduce
  const auto back = i58_import({dir.string()}, "i58_dist2_back.db");
  EXPECT_EQ(i58t::problem_count(back.problems, "collective_args_not_captured"), 2);  // once per rank
  EXPECT_NE(i58_example(back.problems, "collective_args_not_captured")
                .find("rank 0: 6 collective(s) (first: gloo:all_to_all) have record_param_comms spans without "
                      "element counts"),
            std::string::npos)
      << i58_example(back.problems, "collective_args_not_captured");
  const i58::SessionReader b(i58t::scratch_db("i58_dist2_back.db"));
  ASSERT_EQ(b.collectives().size(), 12u);
  for (const auto& c : b.collectives()) {
    EXPECT_EQ(c.bytes_sent, 0) << c.name;
    EXPECT_EQ(c.bytes_received, 0) << c.name;
    EXPECT_EQ(c.dtype, "unknown") << c.name;
  }
  const auto s = embedscope::test_support::run_cli(std::string(EMBEDSCOPE_CLI),
                                                   "stats --json '" + i58t::scratch_db("i58_dist2_back.db") + "'", i58_scratch());
  ASSERT_EQ(s.code, 0) << s.err;
  const auto st = nlohmann::json::parse(s.out);
  int gloo_rows = 0;
  for (const auto& c : st["collectives"])
    if (c["name"].get<std::string>().rfind("gloo:", 0) == 0) {
      ++gloo_rows;
      EXPECT_TRUE(c["bytes_sent"].is_null()) << c.dump();
    }
  EXPECT_EQ(gloo_rows, 2);  // gloo:all_to_all, gloo:all_reduce
}

// Every Nsight export's collectives have unknown bytes (their sizes are not in it): the NCCL
// all-reduce kernel of nsys_fixture.h is exported without "bytes" and without element counts.
// Before, it carried "In msg nelems": 0 / "Out msg nelems": 0: 0 B moved for any reader of the export.
TEST(Imp58Import, AnNsightExportsUnknownBytesStayUnknownThroughAKinetoRoundTrip) {
  const std::string cap = (i58_scratch() / "round.sqlite").string();
  fs::remove(cap);
  i58t::write_nsys_fixture(cap, {});
  {
    i58::SessionWriter w(i58t::scratch_db("i58_nsys.db"), true);
    i58::importers::import_nsys_sqlite({cap}, w, {});
    w.close("complete");
  }
  const fs::path dir = i58_scratch() / "nsys_kineto";
  fs::remove_all(dir);
  {
    const i58::SessionReader r(i58t::scratch_db("i58_nsys.db"));
    ASSERT_EQ(r.collectives().size(), 1u);
    i58::export_kineto_traces(r, dir.string());
  }
  std::ifstream in(dir / "rank_0.json");
  const auto j = nlohmann::json::parse(in);
  int kernels = 0;
  for (const auto& e : j["traceEvents"])
    if (e.value("cat", "") == "kernel" && e.value("name", "").find("AllReduce") != std::string::npos) {
      ++kernels;
      EXPECT_FALSE(e["args"].contains("bytes")) << e.dump();
      EXPECT_FALSE(e["args"].contains("In msg nelems")) << e.dump();
    }
  EXPECT_EQ(kernels, 1);
  // its bytes are still unknown on the way back (the collective's record itself is not made
  // again: the export places its record_param_comms span on a thread of its own, not around the
  // trace's launch, so the kernel reads as launched from no span with arguments)
  const auto back = i58_import({dir.string()}, "i58_nsys_back.db");
  EXPECT_EQ(i58t::problem_count(back.problems, "collective_args_not_captured"), 1);
}

// A run whose bytes are known keeps them: the same rule leaves a measured 0 B alone (the export
// writes counts wherever the session is no import that said its bytes unknown).
TEST(Imp58Import, KnownBytesKeepTheirCountsInTheExport) {
  const fs::path db = i58_scratch() / "tiny.db";
  auto r = embedscope::test_support::run_cli(std::string(EMBEDSCOPE_CLI), "run --preset tiny --steps 2 -o " + db.string(),
                                             i58_scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  const fs::path dir = i58_scratch() / "tiny_kineto";
  fs::remove_all(dir);
  i58::export_kineto_traces(i58::SessionReader(db.string()), dir.string());
  std::ifstream in(dir / "rank_0.json");
  const auto j = nlohmann::json::parse(in);
  int spans = 0;
  for (const auto& e : j["traceEvents"])
    if (e.value("name", "") == "record_param_comms") {
      ++spans;
      EXPECT_TRUE(e["args"].contains("In msg nelems")) << e.dump();
    }
  EXPECT_GT(spans, 0);
}

// torch.profiler's schedule(wait=1, warmup=1, active=2, repeat=3) writes one file per active
// window (steps 1-2, 5-6, 9-10); each file here is cut inside its last step's ops. Every cut step
// is incomplete (2, 6 and 10: no window, out of the step figures); before, only the last window's
// (10) was, and steps 2 and 6 counted with 3 and 4 of their ops. The windows are placed as the
// whole ones (each file's last event, its last step's end, at its stamp): window 2 +3,058 us,
// window 3 +7,195 us, session 0 at the first event, 136 us.
TEST(Imp58Import, EveryCutWindowOfOneProcessHasItsCutStepIncomplete) {
  const auto sum = i58_import({i58_fixture("cycles_cut")}, "i58_cycles_cut.db");
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0}));
  EXPECT_EQ(i58t::problem_count(sum.problems, "truncated"), 3);
  EXPECT_EQ(i58_steps("i58_cycles_cut.db"), (std::vector<std::tuple<int64_t, int64_t, int64_t>>{
                                                {1, 47'000, 228'000},
                                                {5, 148'000 + 3'058'000 - 136'000, 321'000 + 3'058'000 - 136'000},
                                                {9, 66'000 + 7'195'000 - 136'000, 199'000 + 7'195'000 - 136'000}}));
  EXPECT_EQ(i58t::problem_count(sum.problems, "last_step_cut"), 3);
  const std::string said = i58_example(sum.problems, "last_step_cut");
  EXPECT_NE(said.find("rank 0: the cut fell inside ProfilerStep#2 on its thread: its events after the cut are lost, so "
                      "step 2 is incomplete and out of the step figures (its 3 events kept)"),
            std::string::npos)
      << said;
  // the cut steps' events keep their numbers: 3 of step 2, 4 of step 6, 3 of step 10
  const i58::SessionReader r(i58t::scratch_db("i58_cycles_cut.db"));
  std::map<int64_t, int> per_step;
  for (const auto& o : r.all_ops()) ++per_step[o.step];
  EXPECT_EQ(per_step[2], 3);
  EXPECT_EQ(per_step[6], 4);
  EXPECT_EQ(per_step[10], 3);
  EXPECT_EQ(per_step[3] + per_step[7] + per_step[11], 0);  // nothing after a cut: no lost step's events
}

// gen_odd.py's crash (an exception mid-iteration, the profiler stopped in `finally`) on the DLRM
// loop: step 3 stops in its forward pass, holding none of the backward pass and optimizer step
// that steps 1 and 2 hold, and the trace ends with it: incomplete (its 12 events keep step 3),
// info aborted_last_step. Before: a step of 121 us beside steps of 10,259 and 3,459 us.
TEST(Imp58Import, ALastIterationAbortedBeforeItsBackwardPassIsIncomplete) {
  const auto sum = i58_import({i58_fixture("dlrm_crash.pt.trace.json")}, "i58_crash.db");
  EXPECT_EQ(i58_steps("i58_crash.db"),
            (std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 68'000, 10'327'000}, {2, 10'377'000, 13'836'000}}));
  const auto* p = i58t::problem(sum.problems, "aborted_last_step");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, "info");
  EXPECT_EQ(p->example,
            "rank 0: ProfilerStep#3, the trace's last step, holds no event of the backward pass "
            "(autograd::engine::evaluate_function / *Backward ops) and the optimizer step (Optimizer.step#*), which "
            "each of the 2 earlier steps holds, and the trace ends with it: its iteration stopped before it finished "
            "(an exception, then the profiler stopped), so step 3 is incomplete and out of the step figures (its 12 "
            "events kept)");
  const i58::SessionReader r(i58t::scratch_db("i58_crash.db"));
  int in_step3 = 0;
  for (const auto& o : r.all_ops()) in_step3 += o.step == 3 ? 1 : 0;
  EXPECT_EQ(in_step3, 12);
}

// The same loop whole: its last step holds both phases (and the trace ends with it, as every
// window's last step does): three steps, no aborted_last_step.
TEST(Imp58Import, AWholeLastIterationStaysAStep) {
  const auto sum = i58_import({i58_fixture("dlrm_whole.pt.trace.json")}, "i58_whole.db");
  EXPECT_EQ(i58_steps("i58_whole.db"), (std::vector<std::tuple<int64_t, int64_t, int64_t>>{
                                           {1, 68'000, 10'327'000}, {2, 10'377'000, 13'836'000}, {3, 13'871'000, 17'505'000}}));
  EXPECT_EQ(i58t::problem(sum.problems, "aborted_last_step"), nullptr);
  // a trace whose steps hold neither phase (the real crash file's matmul loop, the cycles
  // windows) has nothing to tell an aborted step by: its last step stays a step
  const auto cycles = i58_import({i58_fixture("cycles")}, "i58_cycles.db");
  EXPECT_EQ(i58_steps("i58_cycles.db").size(), 6u);
  EXPECT_EQ(i58t::problem(cycles.problems, "aborted_last_step"), nullptr);
}

// stats and compare given an Nsight Systems SQLite export (nsys_fixture.h's) said SQLite's "an
// SQLite database, but not an Embedscope session (no metadata table; ...)"; now what it is and the
// import that makes a session of it, as for a Kineto trace.
TEST(Imp58Import, StatsAndCompareSayAnNsightExportIsImportedFirst) {
  const std::string f = (i58_scratch() / "capture.sqlite").string();
  fs::remove(f);
  i58t::write_nsys_fixture(f, {});
  for (const std::string cmd : {"stats", "compare"}) {
    const auto r = embedscope::test_support::run_cli(std::string(EMBEDSCOPE_CLI),
                                                     cmd == "stats" ? "stats " + f : "compare " + f + " " + f, i58_scratch());
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find(f + ": an SQLite database but not a session: its content is Nsight Systems SQLite exports "
                             "(nsys export --type sqlite); " + cmd + " reads sessions (.db): import it first: "
                             "embedscope import " + f),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("no metadata table"), std::string::npos) << r.err;
  }
}
