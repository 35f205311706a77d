// `embedscope merge`: per-rank sessions as one (sessions/merge/merge.h), against the directory
// import of the same traces, rank clashes, overwriting, and --align collectives.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "import_test_support.h"
#include "support/cli_run.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;
namespace si = embedscope::sessions::importers;

namespace {
std::string import_one(const std::string& file, const std::string& db_name) {
  import_into({file}, db_name);
  return scratch_db(db_name);
}
embedscope::test_support::CliResult merge_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}
/// stats --json without what names the files.
nlohmann::json stats_json(const std::string& db) {
  auto r = merge_cli("stats " + db + " --json");
  EXPECT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  j.erase("session");
  j["imported"].erase("sources");
  return j;
}
}  // namespace

TEST(Merge, TwoSingleRankImportsEqualTheDirectoryImport) {
  const std::string a = import_one(trace_fixture("hta_small/rank0.json"), "m_rank0.db");
  const std::string b = import_one(trace_fixture("hta_small/rank1.json"), "m_rank1.db");
  import_into({trace_fixture("hta_small")}, "m_dir.db");
  const std::string all = scratch_db("m_all.db");
  const MergeSummary sum = merge_sessions({a, b}, all, {"none", true});
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0, 1}));
  const SessionReader m(all), d(scratch_db("m_dir.db"));
  EXPECT_EQ(m.op_count(), d.op_count());
  EXPECT_EQ(m.meta(meta::kImportOriginNs), d.meta(meta::kImportOriginNs));
  EXPECT_EQ(m.meta(meta::kWorldSize), "2");
  const auto merged_from = nlohmann::json::parse(m.meta(meta::kMergedFromJson));
  ASSERT_EQ(merged_from.size(), 2u);
  EXPECT_EQ(merged_from[1]["ranks"], nlohmann::json::array({1}));
  const auto fm = gpu_kernel_figures(m), fd = gpu_kernel_figures(d);
  ASSERT_EQ(fm.size(), 2u);
  EXPECT_DOUBLE_EQ(fm[0].overlap_pct, 37.5);  // hta_small's rank 0 (import_cli_test)
  EXPECT_EQ(fm[0].idle_ns, fd[0].idle_ns);
  EXPECT_EQ(fm[1].compute_ns, fd[1].compute_ns);
  // stats: the same figures, every one of them
  EXPECT_EQ(stats_json(all), stats_json(scratch_db("m_dir.db")));
}

TEST(Merge, ClashesAndOverwritingAreRefusedNamingTheFiles) {
  const std::string a = import_one(trace_fixture("hta_small/rank0.json"), "c_rank0.db");
  const std::string a2 = import_one(trace_fixture("hta_small/rank0.json"), "c_rank0_again.db");
  try {
    merge_sessions({a, a2}, scratch_db("c_all.db"), {"none", true});
    FAIL() << "a clash was merged";
  } catch (const SessionError& e) {
    EXPECT_EQ(std::string(e.what()), a2 + ": rank 0 is also in " + a + "; each rank may come from one session only");
  }
  auto r = merge_cli("merge " + a + " " + a2 + " -o " + scratch_db("c_all.db"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(a2 + ": rank 0 is also in " + a), std::string::npos) << r.err;
  const std::string b = import_one(trace_fixture("hta_small/rank1.json"), "c_rank1.db");
  const std::string out = scratch_db("c_out.db");
  std::remove(out.c_str());
  r = merge_cli("merge " + a + " " + b + " -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ranks        0, 1 (2 ranks)"), std::string::npos) << r.out;
  r = merge_cli("merge " + a + " " + b + " -o " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  r = merge_cli("merge " + a + " " + b + " -o " + out + " --force-overwrite");
  EXPECT_EQ(r.code, 0) << r.err;
  r = merge_cli("merge " + a + " " + b + " -o " + a + " --force-overwrite");  // never over an input
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the output is one of the inputs"), std::string::npos) << r.err;
}

TEST(Merge, AlignCollectivesRecoversTheOffsetOfPerRankImports) {
  const std::string a = import_one(trace_fixture("align/rank0.json"), "al_rank0.db");
  const std::string b = import_one(trace_fixture("align/rank1.json"), "al_rank1.db");
  const std::string out = scratch_db("al_all.db");
  std::remove(out.c_str());
  auto r = merge_cli("merge " + a + " " + b + " -o " + out + " --align collectives --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["alignment"]["offsets_ns"]["1"], 400000);
  EXPECT_EQ(j["alignment"]["max_skew_ns"], 3000);
  const SessionReader m(out);
  EXPECT_EQ(m.meta(meta::kImportAlign), "collectives");
  std::map<std::pair<int32_t, uint64_t>, int64_t> end;
  for (const auto& c : m.collectives()) end[std::make_pair(c.rank, c.sequence)] = c.end_ns;
  EXPECT_EQ(end[std::make_pair(1, uint64_t{0})], end[std::make_pair(0, uint64_t{0})]);
}

// Sessions of Embedscope processes (one rank each): counters, memory history, id histograms and
// the plan's rows are merged; a measured clock offset to rank 0 moves the rank onto rank 0's
// clock, one within its uncertainty does not.
TEST(Merge, RankSessionsKeepCountersAndUseTheMeasuredClockOffset) {
  auto write = [](const std::string& path, int32_t rank, int64_t wall, int64_t offset, int64_t uncertainty) {
    SessionWriter w(path, true);
    w.set_metadata(meta::kWallAnchorUnixNs, std::to_string(wall));
    w.set_metadata(meta::kClockOffsetToRank0Ns, std::to_string(offset));
    w.set_metadata(meta::kClockOffsetUncertaintyNs, std::to_string(uncertainty));
    w.add_rank({rank, "h", "cpu (thread)", 1 << 20});
    w.add_step({0, rank, 1000, 2000, 0.5, 10, 20});
    LoadCounter l;
    l.step = 0, l.rank = rank, l.table = 0, l.shard = rank, l.ids = 7 + rank;
    w.add_load(l);
    MemoryEvent e;
    e.rank = rank, e.time_ns = 1500, e.step = 0, e.action = "alloc", e.address = 0, e.size = 512, e.requested = 500,
    e.tag = "weights";
    w.add_memory_events({e});
    w.add_shards({{0, "t", "row_wise", -1, 0, 0, 0, 5, 0, 4, 80}, {0, "t", "row_wise", -1, 1, 1, 5, 5, 0, 4, 80}});
    w.close("complete", "");
  };
  const std::string a = scratch_db("p_rank0.db"), b = scratch_db("p_rank1.db"), c = scratch_db("p_rank2.db");
  write(a, 0, 1'000'000'000, 0, 0);
  write(b, 1, 1'000'000'000, 3'000'000, 500'000);  // rank 0's clock is 3 ms ahead: measured
  write(c, 2, 1'000'000'000, 200'000, 500'000);    // 0.2 ms, within the 0.5 ms uncertainty: not used
  const std::string all = scratch_db("p_all.db");
  // (steps of 1 us, rank 1's 3 ms after the others: disjoint time ranges, refused without
  // allow_disjoint since imp43 - the fixture is about the offsets, not real steps)
  merge_sessions({a, b, c}, all, {"none", true, true});
  const SessionReader m(all);
  const auto from = nlohmann::json::parse(m.meta(meta::kMergedFromJson));
  ASSERT_EQ(from.size(), 3u);
  // origin: the earliest recorded step start, 1e9 + 1000 ns (rank 0's and rank 2's); shift =
  // time base - origin: -1000 ns, 3 ms - 1000 ns, -1000 ns
  EXPECT_EQ(from[0]["shift_ns"], -1000);
  EXPECT_EQ(from[1]["shift_ns"], 2'999'000);
  EXPECT_EQ(from[2]["shift_ns"], -1000);
  for (const auto& f : from) EXPECT_EQ(f["ended"], "complete");
  ASSERT_EQ(m.load().size(), 3u);
  EXPECT_EQ(m.load()[1].ids, 8);
  const auto events = m.memory_events();
  ASSERT_EQ(events.size(), 3u);
  int64_t t1 = -1;
  for (const auto& e : events)
    if (e.rank == 1) t1 = e.time_ns;
  EXPECT_EQ(t1, 1500 + 2'999'000);  // moved as rank 1's ops are
  EXPECT_EQ(m.shards().size(), 2u);  // once, not three times
}

// Each process of a launch records the tables' storage of its own ranks (metadata
// table_storage_json); the merged session holds every rank's (before, rank 0's file alone:
// rank 1's bytes read 0 and its cache counters were lost).
TEST(Merge, TableStorageOfEveryProcessIsKept) {
  const std::string r0 = R"([{"table": "t0", "placement": "host_cached", "cache_load_factor": 0.1,
      "weight_bytes": [64, 0], "host_bytes": [1000, 0], "cache_bytes": [128, 0], "cache_hits": 5,
      "cache_misses": 7, "bytes_h2d": 448, "max_abs_error": 0.5, "hash_collisions": 1},
     {"table": "t1", "weight_bytes": [0, 0]}])";
  const std::string r1 = R"([{"table": "t0", "placement": "host_cached", "cache_load_factor": 0.1,
      "weight_bytes": [0, 32], "host_bytes": [0, 500], "cache_bytes": [0, 64], "cache_hits": 3,
      "cache_misses": 1, "bytes_h2d": 64, "max_abs_error": 0.25, "hash_collisions": 2},
     {"table": "t1", "weight_bytes": [0, 80]}])";
  const auto m = nlohmann::json::parse(merge_table_storage_json({r0, r1}));
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["weight_bytes"], nlohmann::json::array({64, 32}));
  EXPECT_EQ(m[0]["host_bytes"], nlohmann::json::array({1000, 500}));
  EXPECT_EQ(m[0]["cache_bytes"], nlohmann::json::array({128, 64}));
  EXPECT_EQ(m[0]["cache_hits"], 8);
  EXPECT_EQ(m[0]["cache_misses"], 8);
  EXPECT_EQ(m[0]["bytes_h2d"], 512);
  EXPECT_EQ(m[0]["hash_collisions"], 3);
  EXPECT_DOUBLE_EQ(m[0]["max_abs_error"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(m[0]["cache_load_factor"].get<double>(), 0.1);  // a setting: not summed
  EXPECT_EQ(m[0]["placement"], "host_cached");
  EXPECT_EQ(m[1]["weight_bytes"], nlohmann::json::array({0, 80}));
  EXPECT_EQ(merge_table_storage_json({"", "not json"}), "");

  // through merge_sessions: two rank sessions as `launch` writes them
  auto write = [](const std::string& path, int32_t rank, const std::string& storage) {
    SessionWriter w(path, true);
    w.set_metadata(meta::kTableStorageJson, storage);
    w.add_rank({rank, "h", "cpu (thread)", 1 << 20});
    w.add_step({0, rank, 1000, 2000, 0.5, 10, 20});
    w.close("complete", "");
  };
  const std::string a = scratch_db("ts_rank0.db"), b = scratch_db("ts_rank1.db"), all = scratch_db("ts_all.db");
  write(a, 0, r0);
  write(b, 1, r1);
  merge_sessions({a, b}, all, {"none", true});
  const auto merged = nlohmann::json::parse(SessionReader(all).meta(meta::kTableStorageJson));
  EXPECT_EQ(merged[0]["weight_bytes"], nlohmann::json::array({64, 32}));
  EXPECT_EQ(merged[0]["cache_hits"], 8);
}

// A simulated rank (times from the cost model) is never merged with measured ones (tester33 D1),
// in either order.
TEST(Merge, SimulatedAndMeasuredSessionsAreNotMerged) {
  auto one_rank = [](const std::string& name, int32_t rank, bool simulated) {
    const std::string path = scratch_db(name);
    std::remove(path.c_str());
    SessionWriter w(path);
    w.set_metadata(meta::kWorldSize, "2");
    w.set_metadata(meta::kSimulated, simulated ? "1" : "0");
    w.add_rank({rank, "host", "cpu (thread)", 1 << 20});
    w.add_lane({rank, 0, "compute", "thread"});
    w.add_ops({{rank, Lane::compute, OpCategory::dense, "dense", 0, 0, 1000, 0, 0}});
    w.close("complete");
    return path;
  };
  const std::string sim = one_rank("k_sim0.db", 0, true), real = one_rank("k_real1.db", 1, false);
  for (const auto& [first, second] : {std::pair{sim, real}, std::pair{real, sim}}) {
    try {
      merge_sessions({first, second}, scratch_db("k_all.db"), {"none", true});
      FAIL() << "a simulated and a measured session were merged";
    } catch (const SessionError& e) {
      EXPECT_EQ(std::string(e.what()), second + ": " + (second == sim ? "simulated" : "measured") + " but " + first +
                                           " is " + (first == sim ? "simulated" : "measured") +
                                           "; merge sessions of one kind at a time");
    }
  }
  const std::string sim1 = one_rank("k_sim1.db", 1, true);
  EXPECT_EQ(merge_sessions({sim, sim1}, scratch_db("k_both_sim.db"), {"none", true}).ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(SessionReader(scratch_db("k_both_sim.db")).meta(meta::kSimulated), "1");
}

// An event that did not end before the first valid one (rank 0: "early" at 5 us with dur -1,
// "valid" at 10 us; rank 1: "valid" at 12 us) moves neither the import's time 0 nor the merge's:
// both are the valid events' (10 us); the marker keeps its time, -5 us.
TEST(Merge, AnEventThatDidNotEndMovesNeitherTimeZero) {
  std::vector<std::string> sessions;
  for (int rank : {0, 1}) {
    const std::string trace = scratch_db(fmt::format("m_early{}.json", rank));
    {
      std::ofstream f(trace);
      f << R"({"distributedInfo": {"rank": )" << rank << R"(, "world_size": 2}, "traceEvents": [)";
      if (rank == 0) f << R"({"ph": "X", "cat": "cpu_op", "name": "early", "pid": 1, "tid": 1, "ts": 5, "dur": -1},)";
      f << R"({"ph": "X", "cat": "cpu_op", "name": "valid", "pid": 1, "tid": 1, "ts": )" << (rank == 0 ? 10 : 12)
        << R"(, "dur": 2}]})";
    }
    sessions.push_back(import_one(trace, fmt::format("m_early{}.db", rank)));
  }
  const std::string merged = scratch_db("m_early_merged.db");
  merge_sessions(sessions, merged, {"none", true});
  for (const std::string& db : {sessions[0], merged}) {
    SCOPED_TRACE(db);
    const SessionReader r(db);
    EXPECT_EQ(r.meta(meta::kImportOriginNs), "10000");
    std::map<std::pair<int32_t, std::string>, OpRecord> ops;
    for (const auto& o : r.all_ops()) ops[{o.rank, r.name(o.name_id)}] = o;
    ASSERT_TRUE(ops.count({0, "early (did not end)"}));
    EXPECT_EQ(ops.at({0, "early (did not end)"}).start_ns, -5000);
    EXPECT_EQ(ops.at({0, "early (did not end)"}).end_ns, -5000);
    EXPECT_EQ(ops.at({0, "valid"}).start_ns, 0);
    EXPECT_EQ(ops.at({0, "valid"}).end_ns, 2000);
  }
  EXPECT_EQ(SessionReader(merged).op_count(), 3);
}

// Rank sessions of a cancelled launch (ended cancelled, no end message): the merged session is
// cancelled and has no end message (tester35 D9: "r0.db: " with nothing after it); an input that
// failed with a message passes it on, prefixed with its file.
TEST(Merge, HowTheInputsEndedIsKeptWithoutAnEmptyMessage) {
  auto write = [](const std::string& path, int32_t rank, const std::string& ended, const std::string& message) {
    SessionWriter w(path, true);
    w.set_metadata(meta::kWallAnchorUnixNs, "1000000000");
    w.add_rank({rank, "h", "cpu (thread)", 1 << 20});
    w.add_step({0, rank, 1000, 2000, 0.5, 10, 20});
    w.close(ended, message);
  };
  const std::string a = scratch_db("c_rank0.db"), b = scratch_db("c_rank1.db");
  write(a, 0, "cancelled", "");
  write(b, 1, "cancelled", "");
  const std::string all = scratch_db("c_all.db");
  merge_sessions({a, b}, all, {"none", true});
  {
    const SessionReader m(all);
    EXPECT_EQ(m.status(), "cancelled");
    EXPECT_EQ(m.meta(meta::kEndMessage, "?"), "");
  }
  write(b, 1, "oom", "rank 1: out of memory");
  merge_sessions({a, b}, all, {"none", true});
  const SessionReader m(all);
  EXPECT_EQ(m.status(), "cancelled");  // the first that did not complete
  write(a, 0, "complete", "");
  merge_sessions({a, b}, all, {"none", true});
  const SessionReader m2(all);
  EXPECT_EQ(m2.status(), "oom");
  EXPECT_EQ(m2.meta(meta::kEndMessage), b + ": rank 1: out of memory");
}

// Tester36 D1: rank sessions of different runs (run id or digest of workload and plan) are
// refused, naming both files and both values; the ranks of one run merge.
TEST(Merge, RankSessionsOfDifferentRunsAreRefused) {
  auto write = [](const std::string& name, int32_t rank, const std::string& run_id, const std::string& digest) {
    const std::string path = scratch_db(name);
    SessionWriter w(path, true);
    w.set_metadata(meta::kWorldSize, "2");
    if (!run_id.empty()) w.set_metadata(meta::kRunId, run_id);
    if (!digest.empty()) w.set_metadata(meta::kRunDigest, digest);
    w.add_rank({rank, "h", "cpu (thread)", 1 << 20});
    w.add_step({0, rank, 1000, 2000, 0.5, 10, 20});
    w.close("complete");
    return path;
  };
  const std::string a = write("runs_a0.db", 0, "job1", "48191ac0c374997e");
  const std::string b = write("runs_b1.db", 1, "slurm-777.0", "6a06f1daebf367d4");
  const std::string same = write("runs_a1.db", 1, "job1", "48191ac0c374997e");
  const std::string other_plan = write("runs_c1.db", 1, "job1", "bdf7d40c00e50b61");
  const std::string threaded = write("runs_t1.db", 1, "", "");
  const std::string out = scratch_db("runs_all.db");
  auto refusal = [&](const std::string& second) {
    try {
      merge_sessions({a, second}, out, {"none", true});
    } catch (const SessionError& e) {
      return std::string(e.what());
    }
    return std::string("(merged)");
  };
  EXPECT_EQ(refusal(b), b + ": run_id slurm-777.0 but " + a +
                            " has job1: the ranks of different runs; merge the rank sessions of one run");
  EXPECT_EQ(refusal(other_plan), other_plan + ": run_digest bdf7d40c00e50b61 but " + a +
                                     " has 48191ac0c374997e: the ranks of different runs; merge the rank sessions of "
                                     "one run");
  EXPECT_EQ(refusal(threaded), threaded + ": run_id (none) but " + a +
                                   " has job1: the ranks of different runs; merge the rank sessions of one run");
  EXPECT_EQ(merge_sessions({a, same}, out, {"none", true}).ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(SessionReader(out).meta(meta::kRunId), "job1");
}

// tester36 #9: `merge --align none` places each process by its wall-clock anchor; a rank whose
// collectives all end 7.5 ms later than its peers' (an anchor read across a preemption) is said
// (clock_disagreement, naming the rank, the offset and the remedy); 0.3 ms of jitter is not;
// --align collectives puts it right and says nothing.
TEST(Merge, WallClocksThatDisagreeWithTheCollectivesAreSaid) {
  auto write = [](const std::string& path, int32_t rank, int64_t late_ns) {
    SessionWriter w(path, true);
    w.set_metadata(meta::kWallAnchorUnixNs, "1000000000");
    w.add_rank({rank, "h", "cpu (thread)", 1 << 20});
    w.add_step({0, rank, 0, 60'000'000, 0.5, 10, 20});
    for (uint64_t seq = 0; seq < 5; ++seq) {
      CollectiveRecord c;
      c.rank = rank, c.op = "all_reduce", c.name = "dense_all_reduce", c.group = "world", c.sequence = seq;
      c.dtype = "float32", c.step = 0, c.peers = {0, 1, 2};
      const int64_t jitter = rank == 2 ? static_cast<int64_t>(seq % 2) * 300'000 : 0;  // 0 or 0.3 ms
      c.start_ns = 10'000'000 * static_cast<int64_t>(seq + 1) - 1'000'000 + late_ns;
      c.end_ns = 10'000'000 * static_cast<int64_t>(seq + 1) + late_ns + jitter;
      w.add_collective(c);
    }
    w.close("complete", "");
  };
  const std::string a = scratch_db("wc_rank0.db"), b = scratch_db("wc_rank1.db"), c = scratch_db("wc_rank2.db");
  write(a, 0, 0);
  write(b, 1, 7'500'000);  // every collective ends 7.5 ms late on rank 1
  write(c, 2, 0);
  auto clock_problem = [](const std::string& db) -> std::optional<ImportStat> {
    for (const auto& s : SessionReader(db).import_stats())
      if (s.name == "clock_disagreement") return s;
    return std::nullopt;
  };
  const std::string none = scratch_db("wc_none.db");
  merge_sessions({a, b, c}, none, {"none", true});
  const auto p = clock_problem(none);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->count, 1);  // rank 1 only: rank 2's 0.3 ms is jitter
  EXPECT_EQ(p->severity, "error");
  EXPECT_EQ(p->source, b);
  EXPECT_EQ(p->example,
            "rank 1: its collectives end 7.500 ms later than rank 0's on the recorded wall clocks (median of 5 "
            "collective end(s)); its process's clock or clock anchor was off: `--align collectives` (import or merge) "
            "puts the ranks on one clock by their collectives");
  const std::string aligned = scratch_db("wc_aligned.db");
  merge_sessions({a, b, c}, aligned, {"collectives", true});
  EXPECT_FALSE(clock_problem(aligned).has_value());
  // the CLI lists it with the merge's other problems
  const std::string out = scratch_db("wc_cli.db");
  std::remove(out.c_str());
  auto r = merge_cli("merge " + a + " " + b + " " + c + " -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("clock_disagreement"), std::string::npos) << r.out;
}

// tester37 D5: a directory import left on the traces' own clocks (align none) says the same
// clock_disagreement as merge: align/rank1.json runs 0.4 ms ahead (agrees); shifted 4.6 ms more,
// its collectives end 5 ms after rank 0's.
TEST(Merge, ADirectoryImportOnTheTracesClocksSaysAClockDisagreementToo) {
  const std::filesystem::path dir = import_scratch() / "skewed_dir";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(trace_fixture("align/rank0.json"), dir / "rank0.json",
                             std::filesystem::copy_options::overwrite_existing);
  nlohmann::json t = nlohmann::json::parse(std::ifstream(trace_fixture("align/rank1.json")));
  for (auto& e : t["traceEvents"])
    if (e.contains("ts")) e["ts"] = e["ts"].get<double>() + 4600;
  std::ofstream(dir / "rank1.json") << t.dump();
  auto disagreement = [](const std::string& db) -> std::optional<ImportStat> {
    for (const auto& s : SessionReader(db).import_stats())
      if (s.name == "clock_disagreement") return s;
    return std::nullopt;
  };
  import_into({dir.string()}, "skewed_none.db");
  const auto p = disagreement(scratch_db("skewed_none.db"));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->count, 1);
  EXPECT_EQ(p->example.rfind("rank 1: its collectives end 5.000 ms later than rank 0's on the recorded wall clocks", 0), 0u)
      << p->example;
  // the unshifted pair (0.4 ms apart) is one clock
  import_into({trace_fixture("align")}, "aligned_none.db");
  EXPECT_FALSE(disagreement(scratch_db("aligned_none.db")).has_value());
}

// docs55 D12: a missing input is named before anything is said or staged ("merge: merging 2
// sessions into all.db" came first), exit 2, no output left.
TEST(Merge, AMissingInputIsNamedBeforeTheMergeIsAnnounced) {
  const std::string missing = scratch_db("d12_no_such.db"), out = scratch_db("d12_all.db");
  std::filesystem::remove(missing);
  std::filesystem::remove(out);
  const auto r = merge_cli("merge " + missing + " " + missing + "2 -o " + out);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err, "error: " + missing + ": cannot open: No such file or directory\n");
  EXPECT_FALSE(std::filesystem::exists(out));
}
