// `embedscope stats` and `export --format csv` on imported CPU traces: collective bytes a trace
// does not record read "unknown" / null and the per-collective table reaches the CSV export; no
// communication is "n/a", no load counters and no sample count null; a trace without profiler
// steps gets figures over the whole trace; a slow step mid-run is a stall, not a cold start.
// Hand-made sessions (imported = 1), figures computed by hand in the comments.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace ss = embedscope::sessions;

embedscope::test_support::CliResult trace_stats_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, ss::testing::import_scratch());
}

void trace_stats_imported(ss::SessionWriter& w) {
  w.set_metadata(ss::meta::kWorldSize, "1");
  w.set_metadata(ss::meta::kImported, "1");
  w.set_metadata(ss::meta::kImportFormat, "kineto_json");
  w.add_lane({0, 0, "thread 1 (pid 1)", "thread"});
  w.add_lane({0, 1, "thread 2 (pid 1)", "thread"});
}

// Two steps [0, 1) ms and [1, 2) ms of a Gloo trace: per step aten::mm [0, 0.4) ms on the main
// thread and gloo:all_reduce [0.2, 0.6) ms on a worker thread; no collective record (the trace
// records no size). Per step the all-reduce's time 0.40 ms, exposed [0.4, 0.6) = 0.20 ms.
std::string gloo_trace_session() {
  const std::string db = ss::testing::scratch_db("trace_stats_gloo.db");
  std::remove(db.c_str());
  ss::SessionWriter w(db);
  trace_stats_imported(w);
  for (int st = 0; st < 2; ++st) {
    const int64_t t = st * 1'000'000;
    w.add_ops({ss::OpEvent{0, static_cast<ss::Lane>(0), ss::OpCategory::other, "aten::mm", st, t, t + 400'000, 0, 0},
               ss::OpEvent{0, static_cast<ss::Lane>(1), ss::OpCategory::comm, "gloo:all_reduce", st, t + 200'000,
                           t + 600'000, 0, 0}});
    w.add_step({st, 0, t, t + 1'000'000, 0, 0, 0});
  }
  w.close("complete");
  return db;
}
}  // namespace

TEST(TraceStatsCli, UnknownCollectiveBytesAndTheCollectiveTableInTheCsvExport) {
  const std::string db = gloo_trace_session();
  auto r = trace_stats_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  // rank table: bytes sent / received unknown, not 0 B
  EXPECT_NE(r.out.find("      unknown        unknown\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" 0 B"), std::string::npos) << r.out;
  r = trace_stats_cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["collectives"].size(), 1u);
  EXPECT_EQ(j["collectives"][0]["name"], "gloo:all_reduce");
  EXPECT_TRUE(j["collectives"][0]["bytes_sent"].is_null()) << j["collectives"];
  EXPECT_TRUE(j["ranks"][0]["bytes_sent"].is_null()) << j["ranks"];
  EXPECT_EQ(j["collectives"][0]["time_ns"], 800'000);
  EXPECT_EQ(j["collectives"][0]["exposed_ns"], 400'000);
  // the csv export: collective_times.csv holds stats' row; collectives.csv none, and it says why
  const auto dir = ss::testing::import_scratch() / "trace_stats_csv";
  std::filesystem::remove_all(dir);
  r = trace_stats_cli("export " + db + " --format csv -o " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("collectives.csv holds no row: the session has no collective records"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the 1 collective `stats` lists are in collective_times.csv"), std::string::npos) << r.err;
  std::ifstream f(dir / "collective_times.csv");
  std::stringstream csv;
  csv << f.rdbuf();
  EXPECT_EQ(csv.str(),
            "name,counted_steps,count,bytes_sent,bytes_received,time_ns,exposed_ns,wait_ns\n"
            "gloo:all_reduce,2,2,,,800000,400000,0\n");
}

TEST(TraceStatsCli, NoCommunicationIsNotApplicableAndUnmeasuredFiguresAreNull) {
  // one step [0, 1) ms with aten::mm [0, 0.5) ms: no comm, no load counters, no samples per step
  const std::string db = ss::testing::scratch_db("trace_stats_nocomm.db");
  std::remove(db.c_str());
  {
    ss::SessionWriter w(db);
    trace_stats_imported(w);
    w.add_ops({ss::OpEvent{0, static_cast<ss::Lane>(0), ss::OpCategory::other, "aten::mm", 0, 0, 500'000, 0, 0}});
    w.add_step({0, 0, 0, 1'000'000, 0, 0, 0});
    w.close("complete");
  }
  auto r = trace_stats_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("overlap      n/a (no communication; thread level"), std::string::npos) << r.out;
  // the rank's row: overlap n/a, not 0.0 %; bytes 0 B, known (it has no collective to lack them)
  EXPECT_NE(r.out.find("\n0         0.50 ms     0.00 ms       0.00 ms     0.50 ms       n/a              0          0 B"
                       "            0 B\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("unknown"), std::string::npos) << r.out;
  r = trace_stats_cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["overlap_pct"].is_null()) << j["overlap_pct"];
  EXPECT_TRUE(j["ranks"][0]["overlap_pct"].is_null());
  EXPECT_TRUE(j["imbalance"]["lookups_max_over_mean"].is_null()) << j["imbalance"];
  EXPECT_TRUE(j["samples_per_s"].is_null()) << j["samples_per_s"];
  EXPECT_EQ(j["ranks"][0]["compute_ns"], 500'000);
  EXPECT_EQ(j["ranks"][0]["bytes_sent"], 0);
  EXPECT_EQ(j["ranks"][0]["bytes_received"], 0);
}

TEST(TraceStatsCli, ATraceWithoutProfilerStepsGetsWholeTraceFigures) {
  // no ProfilerStep: main thread aten::linear [0, 0.8) ms around aten::mm [0.1, 0.7) ms; another
  // thread aten::add [0.9, 1.0) ms. The window: [0, 1) ms; compute 0.9 ms, idle 0.1 ms; self
  // time mm 0.6, linear 0.2, add 0.1 ms (share of 0.9: 66.7 %, 22.2 %, 11.1 %); the critical
  // path linear, mm, linear, a gap [0.8, 0.9), add = 1.0 ms
  const std::string db = ss::testing::scratch_db("trace_stats_nostep.db");
  std::remove(db.c_str());
  {
    ss::SessionWriter w(db);
    trace_stats_imported(w);
    w.add_ops({ss::OpEvent{0, static_cast<ss::Lane>(0), ss::OpCategory::other, "aten::linear", -1, 0, 800'000, 0, 0},
               ss::OpEvent{0, static_cast<ss::Lane>(0), ss::OpCategory::other, "aten::mm", -1, 100'000, 700'000, 0, 0},
               ss::OpEvent{0, static_cast<ss::Lane>(1), ss::OpCategory::other, "aten::add", -1, 900'000, 1'000'000, 0, 0}});
    w.close("complete");
  }
  auto r = trace_stats_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("no profiler steps: figures over the whole trace"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trace span   rank 0 1.00 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0         0.90 ms     0.00 ms       0.00 ms     0.10 ms       n/a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  other           0.90 ms "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  aten::mm                                 other          0.60 ms   66.7%        1\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("critical path: what bounded the whole trace (dependencies inferred), 1.00 ms"), std::string::npos)
      << r.out;
  // no step windows to clip to: the overlap's definition says what it is over
  EXPECT_NE(r.out.find("overlap      n/a (no communication; thread level: host spans of compute vs comm ops per rank, "
                       "over the whole trace (no profiler steps))\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("clipped to step windows"), std::string::npos) << r.out;
  r = trace_stats_cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["whole_trace"], true);
  EXPECT_EQ(j["steps"], 0);
  EXPECT_TRUE(j["step_time_ns"].is_null());
  ASSERT_EQ(j["ranks"].size(), 1u);
  EXPECT_EQ(j["ranks"][0]["window_ns"], 1'000'000);
  EXPECT_EQ(j["ranks"][0]["compute_ns"], 900'000);
  EXPECT_EQ(j["ranks"][0]["idle_ns"], 100'000);
  ASSERT_EQ(j["top_ops"].size(), 3u);
  EXPECT_EQ(j["top_ops"][0]["name"], "aten::mm");
  EXPECT_EQ(j["top_ops"][0]["self_ns"], 600'000);
  EXPECT_EQ(j["top_ops"][1]["name"], "aten::linear");
  EXPECT_EQ(j["top_ops"][1]["self_ns"], 200'000);
  EXPECT_EQ(j["top_ops"][2]["self_ns"], 100'000);
  EXPECT_EQ(j["critical_path"]["total_ns"], 1'000'000);
  EXPECT_EQ(j["overlap_definition"],
            "thread level: host spans of compute vs comm ops per rank, over the whole trace (no profiler steps)");
}

TEST(TraceStatsCli, ASlowStepMidRunIsAStallNotAColdStart) {
  // steps of 1, 1, 1 ms (aten::mm over each), then step 3 of 10 ms with one 0.1 ms op at its
  // start and nothing after (a time.sleep): median 1 ms, 10.0x; 9.90 ms of it untraced
  const std::string db = ss::testing::scratch_db("trace_stats_stall.db");
  std::remove(db.c_str());
  {
    ss::SessionWriter w(db);
    trace_stats_imported(w);
    int64_t t = 0;
    for (int st = 0; st < 4; ++st) {
      const int64_t d = st == 3 ? 10'000'000 : 1'000'000;
      w.add_ops({ss::OpEvent{0, static_cast<ss::Lane>(0), ss::OpCategory::other, "aten::mm", st, t,
                             t + (st == 3 ? 100'000 : d), 0, 0}});
      w.add_step({st, 0, t, t + d, 0, 0, 0});
      t += d;
    }
    w.close("complete");
  }
  const auto r = trace_stats_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step 3 took 10.00 ms, 10.0x the median, after 3 steps near the median: a stall mid-run, not a "
                       "cold start (9.90 ms of it untraced"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("warmup_steps is ?"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("cold start)"), std::string::npos) << r.out;
}

TEST(TraceStatsCli, AColdFirstStepOfATraceSaysItsWarmUpIsUnknown) {
  // 10 ms, then 1, 1, 1 ms: the first measured step; a trace records no warmup_steps
  const std::string db = ss::testing::scratch_db("trace_stats_cold.db");
  std::remove(db.c_str());
  {
    ss::SessionWriter w(db);
    trace_stats_imported(w);
    int64_t t = 0;
    for (int st = 0; st < 4; ++st) {
      const int64_t d = st == 0 ? 10'000'000 : 1'000'000;
      w.add_ops({ss::OpEvent{0, static_cast<ss::Lane>(0), ss::OpCategory::other, "aten::mm", st, t, t + d, 0, 0}});
      w.add_step({st, 0, t, t + d, 0, 0, 0});
      t += d;
    }
    w.close("complete");
  }
  const auto r = trace_stats_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step 0 took 10.00 ms, 10.0x the median (the first measured step: a cold start); the warm-up "
                       "before the trace is unknown"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("?"), std::string::npos) << r.out;
}

// The torch 1.13 Gloo fixture (tests/data/traces/torch113/dist2, 2 ranks, 3 steps): a rank's
// collectives are its gloo:* calls, which the importer records (no record_param_comms), not the
// c10d::allreduce_ calls that issued them on the main thread (correlation 0). Counted from the
// session's ops with sqlite3: 6 gloo:all_reduce calls, 12.054 ms; 6 gloo:all_to_all, 12.673 ms.
// Exposed and waiting as before the change (the compute that hides a collective does not depend
// on which comm ops are listed): all_reduce 12.054 ms exposed, 10.05 ms waiting; all_to_all 0
// exposed (under pooled_a2a, an op in a legacy trace), 6.31 ms waiting. Before: a third row
// c10d::allreduce_ (6 ops, 12.694 ms).
TEST(TraceStatsCli, AGlooTracesCollectivesAreItsGlooCallsNotTheC10dCallsThatIssuedThem) {
  const std::string db = ss::testing::scratch_db("trace_stats_dist2.db");
  std::remove(db.c_str());
  auto r = trace_stats_cli("import " + ss::testing::trace_fixture("torch113/dist2") + " -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  r = trace_stats_cli("stats --json " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, std::vector<int64_t>> rows;  // name -> count, time, exposed, waiting
  for (const auto& c : j["collectives"])
    rows[c["name"].get<std::string>()] = {c["count"].get<int64_t>(), c["time_ns"].get<int64_t>(),
                                          c["exposed_ns"].get<int64_t>(), c["wait_ns"].get<int64_t>()};
  EXPECT_EQ(rows, (std::map<std::string, std::vector<int64_t>>{
                      {"gloo:all_reduce", {6, 12'054'000, 12'054'000, 10'050'000}},
                      {"gloo:all_to_all", {6, 12'673'000, 0, 6'310'000}}}));
  r = trace_stats_cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto table = r.out.find("\ncollectives, per step");  // (c10d::allreduce_ stays on the critical path)
  ASSERT_NE(table, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("c10d::allreduce_", table), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  gloo:all_reduce                  2.0", table), std::string::npos) << r.out;
}
