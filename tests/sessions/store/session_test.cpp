// Session files: writer/reader round trip, range queries, bad files, a writer killed midway,
// and the analyses against hand-computed numbers.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {
// Emptied first: a folder left by an earlier process with the same pid would hold files that
// SessionWriter refuses to overwrite.
fs::path session_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_sessions_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

OpEvent op(int rank, Lane lane, OpCategory cat, const char* name, int64_t step, int64_t s, int64_t e, int64_t bytes = 0) {
  return OpEvent{rank, lane, cat, name, step, s, e, bytes, 0};
}

std::string error_of(const std::string& path) {
  try {
    SessionReader r(path);
  } catch (const SessionError& e) {
    return e.what();
  }
  return "";
}

// session_scratch() of a process whose pid an earlier process used starts empty (ctest runs one test per
// process, so session_scratch() is first called in the child here).
TEST(Session, ScratchDirectoryStartsEmpty) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto stale = fs::temp_directory_path() / ("es_sessions_" + std::to_string(getpid()));
    fs::create_directories(stale);
    std::ofstream(stale / "killed.db") << "left by an earlier process";
    _exit(fs::exists(session_scratch() / "killed.db") ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A small two-rank session: step 0 on both ranks, step -1 (warmup) on rank 0.
std::string make_session(const std::string& name) {
  const std::string path = (session_scratch() / name).string();
  SessionWriter w(path);
  w.set_metadata("world_size", "2");
  w.set_metadata("samples_per_step", "16");
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
  }
  // rank 0, step 0, window [1000, 2000): compute [1000,1100) and [1050,1150) (overlapping),
  // [1300,1310); comm [1100,1400) -> overlap with compute: [1100,1150) + [1300,1310) = 60
  w.add_ops({op(0, Lane::compute, OpCategory::lookup, "lookup", 0, 1000, 1100),
             op(0, Lane::compute, OpCategory::dense, "dense", 0, 1050, 1150),
             op(0, Lane::compute, OpCategory::optimizer, "opt", 0, 1300, 1310),
             op(0, Lane::comm, OpCategory::comm, "a2a", 0, 1100, 1400, 64),
             op(0, Lane::compute, OpCategory::lookup, "lookup", -1, 10, 20)});
  // rank 1, step 0, window [1000, 1500): compute [1000, 1200), comm [1200, 1300)
  w.add_ops({op(1, Lane::compute, OpCategory::lookup, "lookup", 0, 1000, 1200),
             op(1, Lane::comm, OpCategory::comm, "a2a", 0, 1200, 1300, 64)});
  w.add_rank({0, "h", "cpu (thread)", 1 << 20});
  w.add_rank({1, "h", "cpu (thread)", 1 << 20});
  w.add_step({-1, 0, 0, 500, 0.9, 100, 200});
  w.add_step({0, 0, 1000, 2000, 0.7, 300, 400});
  w.add_step({0, 1, 1000, 1500, 0.7, 300, 400});
  w.add_load({0, 0, 0, 0, 30, 10, 240, 512, 100});
  w.add_load({0, 1, 1, 0, 10, 5, 80, 512, 300});
  w.add_load({-1, 0, 0, 0, 999, 1, 1, 1, 1});
  CollectiveRecord c;
  c.rank = 0;
  c.op = "all_to_all";
  c.name = "output_dist/all_to_all";
  c.group = "world";
  c.sequence = 3;
  c.dtype = "float32";
  c.start_ns = 1100;
  c.end_ns = 1400;
  c.bytes_sent = 32;
  c.bytes_received = 48;
  c.peers = {0, 1};
  c.send_elements = {4, 8};
  c.recv_elements = {4, 12};
  w.add_collective(c);
  c.rank = 1;
  c.start_ns = 1200;
  c.end_ns = 1300;
  c.bytes_sent = 48;
  c.bytes_received = 32;
  c.send_elements = {12, 4};
  c.recv_elements = {8, 4};
  w.add_collective(c);
  w.close("complete");
  return path;
}
}  // namespace

TEST(Intervals, UnionIsCountedOnce) {
  // [0,100) and [50,150) on one lane plus [300,310): busy 160 ns, not 210
  auto m = merge_intervals({{0, 100}, {300, 310}, {50, 150}});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], (Interval{0, 150}));
  EXPECT_EQ(covered_ns(m), 160);
  EXPECT_EQ(covered_ns(intersect(m, merge_intervals({{140, 305}}))), 10 + 5);
  EXPECT_TRUE(merge_intervals({{5, 5}, {7, 6}}).empty());
  EXPECT_EQ(merge_intervals({{0, 10}, {10, 20}}).size(), 1u);  // touching intervals join
}

TEST(Analysis, RankStepTimesByHand) {
  std::vector<OpRecord> ops{{0, 0, OpCategory::lookup, 0, 0, 0, 100, 0, 0},
                            {0, 0, OpCategory::dense, 0, 0, 50, 150, 0, 0},
                            {0, 1, OpCategory::comm, 0, 0, 120, 400, 0, 0},
                            {0, 0, OpCategory::optimizer, 0, 0, 300, 310, 0, 0},
                            {0, 0, OpCategory::input, 0, 0, 900, 1200, 0, 0}};  // clipped to the window end
  RankStepTimes t = rank_step_times(ops, 0, 1000);
  EXPECT_EQ(t.window_ns, 1000);
  EXPECT_EQ(t.compute_ns, 150 + 10 + 100);
  EXPECT_EQ(t.comm_ns, 280);
  EXPECT_EQ(t.overlap_ns, 30 + 10);
  EXPECT_EQ(t.exposed_comm_ns, 240);
  EXPECT_EQ(t.idle_ns, 1000 - (150 + 250 + 100));  // busy = [0,400) + [900,1000)
  EXPECT_EQ(t.by_category_ns[static_cast<size_t>(OpCategory::lookup)], 100);
  EXPECT_EQ(t.by_category_ns[static_cast<size_t>(OpCategory::input)], 100);
  EXPECT_DOUBLE_EQ(max_over_mean({1, 3}), 1.5);
  EXPECT_DOUBLE_EQ(max_over_mean({0, 0}), 1.0);
}

TEST(Session, RoundTripAndAnalysis) {
  const std::string path = make_session("rt.db");
  SessionReader r(path);
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  EXPECT_EQ(r.status(), "complete");
  EXPECT_EQ(r.meta("world_size"), "2");
  EXPECT_EQ(r.op_count(), 7);
  ASSERT_EQ(r.lanes().size(), 4u);
  EXPECT_EQ(r.lanes()[1].name, "comm");
  auto colls = r.collectives();
  ASSERT_EQ(colls.size(), 2u);
  EXPECT_EQ(colls[1].send_elements, (std::vector<int64_t>{12, 4}));
  EXPECT_EQ(colls[0].peers, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(r.steps().size(), 3u);
  EXPECT_EQ(r.steps()[1].memory_peak_bytes, 400);
  ASSERT_EQ(r.ranks().size(), 2u);
  EXPECT_EQ(r.ranks()[1].memory_capacity_bytes, 1 << 20);
  EXPECT_EQ(r.load().size(), 3u);

  RunStats st = analyze(r);
  EXPECT_EQ(st.steps, 1);
  EXPECT_EQ(st.step_time_ns.p50, 1000);  // the slowest rank's window
  EXPECT_DOUBLE_EQ(st.samples_per_s, 16 / 1e-6);
  ASSERT_EQ(st.ranks.size(), 2u);
  // rank 0: compute [1000,1150) + [1300,1310) = 160; comm 300; overlap 50 + 10 = 60
  EXPECT_EQ(st.ranks[0].compute_ns, 160);
  EXPECT_EQ(st.ranks[0].comm_ns, 300);
  EXPECT_EQ(st.ranks[0].overlap_ns, 60);
  EXPECT_EQ(st.ranks[0].exposed_comm_ns, 240);
  EXPECT_EQ(st.ranks[0].idle_ns, 1000 - 400);  // busy [1000,1400)
  EXPECT_DOUBLE_EQ(st.ranks[0].overlap_pct, 20.0);
  EXPECT_EQ(st.ranks[1].overlap_ns, 0);
  EXPECT_EQ(st.ranks[1].idle_ns, 200);
  EXPECT_DOUBLE_EQ(st.overlap_pct, 100.0 * 60 / 400);
  EXPECT_EQ(st.exposed_comm_ns, (240 + 100) / 2);
  // warmup load counters are excluded
  EXPECT_EQ(st.ranks[0].ids_looked_up, 30);
  EXPECT_DOUBLE_EQ(st.lookups_max_over_mean, 30.0 / 20.0);
  ASSERT_TRUE(st.lookup_time_max_over_mean);
  EXPECT_DOUBLE_EQ(*st.lookup_time_max_over_mean, 300.0 / 200.0);
  EXPECT_EQ(st.ranks[1].bytes_sent, 48);
  EXPECT_EQ(st.loss, (std::vector<double>{0.7}));
}

TEST(Session, RangeQueryFindsOpsStartingBeforeTheWindow) {
  const std::string path = (session_scratch() / "range.db").string();
  {
    SessionWriter w(path);
    w.add_lane({0, 0, "compute", "thread"});
    std::vector<OpEvent> ops;
    ops.push_back(op(0, Lane::compute, OpCategory::dense, "long", 0, 0, 5000));
    for (int i = 0; i < 1000; ++i) ops.push_back(op(0, Lane::compute, OpCategory::lookup, "short", 0, 100 + i * 10, 105 + i * 10));
    ops.push_back(op(0, Lane::comm, OpCategory::comm, "other lane", 0, 2000, 2100));
    w.add_ops(ops);
    w.close("complete");
  }
  SessionReader r(path);
  auto got = r.ops(0, 0, 2000, 2050);
  ASSERT_EQ(got.size(), 1u + 5u);  // the long op, and short ops starting at 2000..2040
  EXPECT_EQ(r.name(got[0].name_id), "long");
  EXPECT_EQ(got[1].start_ns, 2000);
  EXPECT_EQ(got.back().start_ns, 2040);
  EXPECT_TRUE(r.ops(0, 0, 20000, 30000).empty());
  EXPECT_EQ(r.ops(0, 1, 0, 10000).size(), 1u);
}

TEST(Session, BadFilesGiveOneClearError) {
  const auto dir = session_scratch();
  EXPECT_NE(error_of((dir / "missing.db").string()).find("missing.db: cannot open: No such file"), std::string::npos);
  { std::ofstream((dir / "empty.db").string()); }
  EXPECT_NE(error_of((dir / "empty.db").string()).find("empty.db: the file is empty"), std::string::npos);
  { std::ofstream((dir / "text.db").string()) << "this is not a database, just some text that is long enough\n"; }
  EXPECT_NE(error_of((dir / "text.db").string()).find("text.db: not an SQLite database"), std::string::npos)
      << error_of((dir / "text.db").string());
  EXPECT_NE(error_of(dir.string()).find("is a directory"), std::string::npos);
  // an SQLite database that is not a session
  {
    sqlite3* db = nullptr;
    sqlite3_open((dir / "other.db").c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE t (x)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  EXPECT_NE(error_of((dir / "other.db").string()).find("not an Embedscope session"), std::string::npos);
  // a newer schema
  const std::string newer = make_session("newer.db");
  {
    sqlite3* db = nullptr;
    sqlite3_open(newer.c_str(), &db);
    sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  EXPECT_NE(error_of(newer).find("newer.db: written by a newer Embedscope (session schema version 99; this build reads up to " +
                                 std::to_string(kSchemaVersion) + ")"),
            std::string::npos)
      << error_of(newer);
  // truncated: half of a real session
  const std::string whole = make_session("whole.db");
  const auto size = fs::file_size(whole);
  const std::string cut = (dir / "cut.db").string();
  fs::copy_file(whole, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, size / 2);
  std::string e = error_of(cut);
  if (e.empty()) {  // the header survived: the damage shows on the first query
    SessionReader r(cut);
    try {
      r.all_ops();
      r.collectives();
      r.load();
      ADD_FAILURE() << "a truncated file read without error";
    } catch (const SessionError& err) {
      e = err.what();
    }
  }
  EXPECT_NE(e.find("cut.db"), std::string::npos) << e;
  EXPECT_TRUE(e.find("truncated or corrupt") != std::string::npos || e.find("not an SQLite") != std::string::npos) << e;
}

TEST(Session, ReadersNeverChangeTheFile) {
  const std::string path = make_session("ro.db");
  const auto before = fs::last_write_time(path);
  const auto size = fs::file_size(path);
  {
    SessionReader r(path);
    analyze(r);
  }
  EXPECT_EQ(fs::last_write_time(path), before);
  EXPECT_EQ(fs::file_size(path), size);
  EXPECT_FALSE(fs::exists(path + "-wal"));
}

TEST(Session, KilledWriterLeavesAReadableSessionThatSaysCrashed) {
  const std::string path = (session_scratch() / "killed.db").string();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SessionWriter w(path);
    w.set_metadata("world_size", "1");
    w.add_lane({0, 0, "compute", "thread"});
    std::vector<OpEvent> ops;
    for (int i = 0; i < 1000; ++i) ops.push_back(op(0, Lane::compute, OpCategory::lookup, "lookup", 0, i * 10, i * 10 + 5));
    w.add_ops(ops);
    w.add_step({0, 0, 0, 10000, 0.5, 0, 0});
    std::this_thread::sleep_for(kCommitInterval * 4);  // committed by now
    w.add_ops({op(0, Lane::compute, OpCategory::lookup, "late", 1, 20000, 20005)});
    kill(getpid(), SIGKILL);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  SessionReader r(path);
  EXPECT_EQ(r.meta("ended"), "running");
  EXPECT_EQ(r.status(), "crashed");  // the writer process is gone
  EXPECT_GE(r.op_count(), 1000);
  EXPECT_EQ(r.steps().size(), 1u);
  EXPECT_EQ(analyze(r).ended, "crashed");
}

TEST(Export, ChromeTraceKeepsNanosecondsAndLinksCollectives) {
  EXPECT_EQ(ns_to_us(1234567), "1234.567");
  EXPECT_EQ(ns_to_us(5), "0.005");
  EXPECT_EQ(ns_to_us(-1500), "-1.500");
  const std::string path = make_session("chrome.db");
  SessionReader r(path);
  std::stringstream out;
  export_chrome_trace(r, out);
  auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["metadata"]["ended"], "complete");
  int x = 0, flows_s = 0, flows_f = 0, thread_names = 0, counters = 0, params = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X" && e["name"] == "record_param_comms") {  // each rank's record of the a2a, inside its op
      ++params;
      EXPECT_EQ(e["cat"], "comm");
      EXPECT_EQ(e["tid"], 1);
      EXPECT_EQ(e["args"]["embedscope collective"], "output_dist/all_to_all");
      EXPECT_EQ(e["args"]["Collective name"], "all_to_allv");
      EXPECT_EQ(e["args"]["Seq"], 3);
      if (e["pid"] == 0) {  // the record's times and elements (1100-1400 ns, 4 + 8 sent)
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.1);
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.3);
        EXPECT_EQ(e["args"]["In split size"], nlohmann::json::array({4, 8}));
        EXPECT_EQ(e["args"]["In msg nelems"], 12);
      }
    } else if (ph == "X") {
      ++x;
      if (e["name"] == "a2a" && e["pid"] == 0) {
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.1);
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.3);
        EXPECT_EQ(e["args"]["bytes"], 64);
        EXPECT_EQ(e["tid"], 1);
      }
    }
    if (ph == "s") ++flows_s;
    if (ph == "f") ++flows_f;
    if (ph == "C") ++counters;
    if (ph == "M" && e["name"] == "thread_name") ++thread_names;
  }
  EXPECT_EQ(x, 7 + 3);  // the ops and, since imp43 (tester42 F28), the 3 step rows' ProfilerStep#N spans
  EXPECT_EQ(params, 2);  // since tester52 F12
  EXPECT_EQ(thread_names, 4 + 2);  // the lanes and each rank's "steps" row
  EXPECT_EQ(flows_s, 1);  // rank 0 entered first; one arrow to rank 1
  EXPECT_EQ(flows_f, 1);
  EXPECT_EQ(counters, 3 + 3 + 3);  // loss and memory per step row, ids per (step, rank)
  EXPECT_NE(out.str().find("\"ts\":1.100"), std::string::npos);  // three decimals: exact ns
}

TEST(Export, CsvFilesWithHeaders) {
  const std::string path = make_session("csv.db");
  SessionReader r(path);
  auto files = export_csv(r, analyze(r), (session_scratch() / "csv").string());
  ASSERT_EQ(files.size(), 8u);
  {  // stats' per-collective table, after the collective records
    EXPECT_EQ(std::filesystem::path(files[5]).filename(), "collective_times.csv");
    std::ifstream times(files[5]);
    std::string head;
    std::getline(times, head);
    EXPECT_EQ(head, "name,counted_steps,count,bytes_sent,bytes_received,time_ns,exposed_ns,wait_ns");
  }
  {  // stats' waiting for peers, per rank
    EXPECT_EQ(std::filesystem::path(files[6]).filename(), "peer_waits.csv");
    std::ifstream waits(files[6]);
    std::string head;
    std::getline(waits, head);
    EXPECT_EQ(head, "rank,counted_steps,collectives,last_arrivals,waited_ns,caused_wait_ns,straggler");
  }
  {  // what the files describe (tester33 D9: a simulated session's CSVs did not say so)
    std::ifstream meta(files[7]);
    std::stringstream text;
    text << meta.rdbuf();
    EXPECT_NE(text.str().find("key,value\n"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("\nsimulated,0\nimported,0\n"), std::string::npos) << text.str();
  }
  std::ifstream ev(files[0]);
  std::string header, line;
  std::getline(ev, header);
  EXPECT_EQ(header, "rank,lane,category,name,step,start_ns,end_ns,dur_ns,bytes,sequence");
  int rows = 0;
  while (std::getline(ev, line)) ++rows;
  EXPECT_EQ(rows, 7);
  std::ifstream ranks(files[2]);
  std::getline(ranks, header);
  std::getline(ranks, line);
  EXPECT_EQ(line.rfind("0,160,300,60,240,600,20.000,30,100,32,48", 0), 0u) << line;
}

TEST(Session, WriterNeverReplacesWhatItShouldNot) {
  const std::string path = make_session("exists.db");
  try {
    SessionWriter w(path);
    ADD_FAILURE() << "an existing session was replaced";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("exists.db: already exists"), std::string::npos) << e.what();
  }
  EXPECT_EQ(SessionReader(path).status(), "complete");  // untouched
  try {
    SessionWriter w(session_scratch().string(), true);  // a directory, even with overwrite
    ADD_FAILURE() << "a directory was replaced";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a regular file"), std::string::npos) << e.what();
  }
  {
    SessionWriter w(path, true);
    w.close("cancelled");
  }
  EXPECT_EQ(SessionReader(path).status(), "cancelled");
}

TEST(Session, DamagedRowsGiveAnErrorNotACrash) {
  auto damaged = [&](const std::string& name, const char* sql) {
    const std::string path = make_session(name);
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
    sqlite3_close(db);
    return path;
  };
  // (a tool that edits ops rows deletes the packed copy, FORMAT.md op_blocks: the rows are read)
  const std::string cat = damaged("cat.db", "UPDATE ops SET category = 7 WHERE step = 0; DELETE FROM op_blocks");
  SessionReader r(cat);
  try {
    analyze(r);
    ADD_FAILURE() << "category 7 was accepted";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("cat.db: the session file is corrupt (an op of rank 0 has category 7)"),
              std::string::npos)
        << e.what();
  }
  const std::string gap = damaged("gap.db", "UPDATE strings SET id = 2147483647 WHERE id = 1");
  EXPECT_NE(error_of(gap).find("gap.db: the session file is corrupt (strings id 2 where 1 was expected)"),
            std::string::npos)
      << error_of(gap);
  // a hand-made file with NULL values where the schema has none
  const std::string null_meta = (session_scratch() / "nullmeta.db").string();
  sqlite3* db = nullptr;
  sqlite3_open(null_meta.c_str(), &db);
  sqlite3_exec(db,
               "PRAGMA user_version=1; CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT);"
               "INSERT INTO metadata VALUES ('format', 'embedscope-session'), ('ended', NULL);"
               "CREATE TABLE strings (id INTEGER PRIMARY KEY, value TEXT); INSERT INTO strings VALUES (0, NULL);"
               "CREATE TABLE lanes (rank, lane, name, kind, max_duration_ns);",
               nullptr, nullptr, nullptr);
  sqlite3_close(db);
  SessionReader r2(null_meta);
  EXPECT_EQ(r2.meta("ended", "x"), "");
  EXPECT_EQ(r2.name(0), "");
}

TEST(Session, MemoryCountersAndSnapshotsRoundTrip) {
  const std::string path = (session_scratch() / "memory.db").string();
  {
    SessionWriter w(path);
    w.add_memory({0, 1, 100, 2048, 150, 2048, 1024, 12, 1, 0.25, 0.125});
    MemorySnapshot sn;
    sn.rank = 1;
    sn.step = 0;
    sn.time_ns = 77;
    sn.reason = "oom";
    sn.blocks = {{4096, 2048, 4096, 1024, 1000, true, "weights"}, {4096, 2048, 5120, 1024, 0, false, ""}};
    w.add_snapshot(sn);
    w.close("oom", "rank 1: out of memory");
  }
  SessionReader r(path);
  auto mc = r.memory_counters();
  ASSERT_EQ(mc.size(), 1u);
  EXPECT_EQ(mc[0].reserved, 2048);
  EXPECT_DOUBLE_EQ(mc[0].external_fragmentation, 0.25);
  auto snaps = r.memory_snapshots();
  ASSERT_EQ(snaps.size(), 1u);
  EXPECT_EQ(snaps[0].reason, "oom");
  auto blocks = r.memory_blocks(snaps[0].id);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].tag, "weights");
  EXPECT_EQ(blocks[0].requested, 1000);
  EXPECT_FALSE(blocks[1].allocated);
  RunStats st = analyze(r);
  EXPECT_EQ(st.peak_reserved_bytes, 2048);
}

TEST(Session, VersionOneFilesAreReadAsTheyAre) {
  const std::string path = make_session("v1.db");
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  ASSERT_EQ(sqlite3_exec(db,
                         "DROP TABLE memory_counters; DROP TABLE memory_snapshots; DROP TABLE memory_blocks;"
                         "PRAGMA user_version = 1;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  SessionReader r(path);
  EXPECT_EQ(r.schema_version(), 1);
  EXPECT_TRUE(r.memory_counters().empty());
  EXPECT_EQ(analyze(r).ranks[0].compute_ns, 160);
}

TEST(Session, IdHistogramRoundTripAndVersionTwoFilesWithoutIt) {
  const std::string path = (session_scratch() / "idhist.db").string();
  {
    SessionWriter w(path);
    w.add_id_histogram({{1, 0, 3, 30, 40, 7}, {0, 0, 3, 30, 40, 5}, {0, 1, 0, 0, 2, 9}});
    w.close("complete");
  }
  {
    SessionReader r(path);
    EXPECT_EQ(r.schema_version(), kSchemaVersion);  // the version this build writes
    ASSERT_TRUE(r.has_id_histogram());
    const auto h = r.id_histogram();
    ASSERT_EQ(h.size(), 3u);  // ordered by (table, bucket, rank)
    EXPECT_EQ(h[0].rank, 0);
    EXPECT_EQ(h[0].ids, 5);
    EXPECT_EQ(h[1].rank, 1);
    EXPECT_EQ(h[1].bucket, 3);
    EXPECT_EQ(h[1].row_begin, 30);
    EXPECT_EQ(h[1].row_end, 40);
    EXPECT_EQ(h[1].ids, 7);
    EXPECT_EQ(h[2].table, 1);
    EXPECT_EQ(h[2].ids, 9);
  }
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE id_histogram; PRAGMA user_version = 2;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  SessionReader r(path);
  EXPECT_EQ(r.schema_version(), 2);
  EXPECT_FALSE(r.has_id_histogram());
  EXPECT_TRUE(r.id_histogram().empty());
}

// The writer inserts ops 100 rows per statement and commits every 100,000: batches of every size
// around those boundaries keep every op, its fields, and ids in insertion order.
TEST(Session, OpsOfEveryBatchSizeKeepTheirFieldsAndInsertionOrder) {
  const std::string path = (session_scratch() / "batches.db").string();
  std::vector<OpEvent> all;
  {
    SessionWriter w(path);
    w.add_lane({0, 0, "compute", "thread"});
    w.add_lane({0, 1, "comm", "thread"});
    static const char* names[] = {"a", "b", "c"};
    int64_t n = 0;
    for (size_t size : {size_t{1}, size_t{99}, size_t{100}, size_t{101}, size_t{250}, size_t{100037}, size_t{7}}) {
      std::vector<OpEvent> batch;
      for (size_t i = 0; i < size; ++i, ++n) {
        const Lane lane = n % 3 ? Lane::compute : Lane::comm;  // the two lanes' keys interleave
        batch.push_back(OpEvent{0, lane, n % 2 ? OpCategory::lookup : OpCategory::comm, names[n % 3], n / 1000,
                                n * 10, n * 10 + 5, n % 5, static_cast<uint64_t>(n * 7)});
      }
      if (size % 2) w.add_ops(batch);
      else w.add_ops(batch.data(), batch.size());
      all.insert(all.end(), batch.begin(), batch.end());
    }
    w.close("complete");
  }
  SessionReader r(path);
  ASSERT_EQ(r.op_count(), static_cast<int64_t>(all.size()));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT ops.id, lane_key, start_ns, end_ns, category, step, bytes, correlation, s.value "
                               "FROM ops JOIN strings s ON s.id = ops.name_id ORDER BY ops.id",
                               -1, &st, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  size_t i = 0;
  for (; sqlite3_step(st) == SQLITE_ROW; ++i) {
    ASSERT_LT(i, all.size());
    const OpEvent& o = all[i];
    ASSERT_EQ(sqlite3_column_int64(st, 0), static_cast<int64_t>(i));
    ASSERT_EQ(sqlite3_column_int64(st, 1), static_cast<int>(o.lane)) << i;
    ASSERT_EQ(sqlite3_column_int64(st, 2), o.start_ns) << i;
    ASSERT_EQ(sqlite3_column_int64(st, 3), o.end_ns) << i;
    ASSERT_EQ(sqlite3_column_int64(st, 4), static_cast<int>(o.category)) << i;
    ASSERT_EQ(sqlite3_column_int64(st, 5), o.step) << i;
    ASSERT_EQ(sqlite3_column_int64(st, 6), o.bytes) << i;
    ASSERT_EQ(sqlite3_column_int64(st, 7), static_cast<int64_t>(o.correlation)) << i;
    ASSERT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 8)), o.name) << i;
  }
  EXPECT_EQ(i, all.size());
  sqlite3_finalize(st);
  sqlite3_close(db);
}
