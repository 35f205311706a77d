// robust55: the session reader against killed runs, cut copies and hand edits.
// - retest54 R3: a killed run whose writer_pid now names another live process is crashed, and
//   may be replaced (the writer lock decides where flock works);
// - retest54 R5: a cut copy is refused beside a 0-byte -wal, a -wal shorter than one frame, or
//   a 0-byte -journal; a killed run's cut file with its whole -wal still reads;
// - retest54 R7 / tester54 F6: a rank outside the world, text in an integer column, a negative
//   byte count and a step that ends before it starts are refused, naming the table, the row and
//   the column;
// - the import error of a memory snapshot with nothing in any device's lists says what is there.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {

fs::path r55_dir() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_robust55_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string r55_path(const std::string& name) { return (r55_dir() / name).string(); }

void r55_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string what = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << what;
}

// The steps and collective of one step of a 2-rank run: step s of rank r runs from
// 1000 s + 10 r to 1000 s + 10 r + 500 ns.
void r55_add_step(SessionWriter& w, int s) {
  for (int32_t r = 0; r < 2; ++r) {
    w.add_ops({OpEvent{r, Lane::compute, OpCategory::lookup, "lookup", s, 1000 * s + 10 * r, 1000 * s + 10 * r + 100, 0, 0}});
    w.add_step({s, r, 1000 * s + 10 * r, 1000 * s + 10 * r + 500, 0.5, 64, 64});
    CollectiveRecord c;
    c.rank = r;
    c.op = "all_to_all";
    c.name = "output_dist/all_to_all";
    c.group = "world";
    c.sequence = static_cast<uint64_t>(s);
    c.dtype = "float32";
    c.step = s;
    c.start_ns = 1000 * s + 200;
    c.end_ns = 1000 * s + 300;
    c.bytes_sent = 96;
    c.bytes_received = 96;
    c.peers = {0, 1};
    c.send_elements = {24, 24};
    c.recv_elements = {24, 24};
    w.add_collective(c);
  }
}

// A closed 2-rank session of `steps` steps (world_size 2, ranks 0 and 1).
void r55_closed_session(const std::string& path, int steps) {
  SessionWriter w(path, true);
  w.set_metadata(meta::kWorldSize, "2");
  for (int32_t r = 0; r < 2; ++r) {
    w.add_rank({r, "host", "cpu (thread)", 1 << 20});
    w.add_lane({r, 0, "compute", "thread"});
  }
  for (int s = 0; s < steps; ++s) r55_add_step(w, s);
  w.close("complete");
}

// A run killed by SIGKILL once a reader sees its `steps` steps: the session a killed run leaves
// (metadata ended running, the dead writer's pid, its commits in the -wal). Returns that pid.
pid_t r55_killed_run(const std::string& path, int steps) {
  const pid_t child = fork();
  if (child == 0) {
    try {
      SessionWriter w(path, true);
      w.set_metadata(meta::kWorldSize, "2");
      for (int32_t r = 0; r < 2; ++r) w.add_lane({r, 0, "compute", "thread"});
      for (int s = 0; s < steps; ++s) r55_add_step(w, s);
      for (;;) pause();  // committed within kCommitInterval; killed here
    } catch (...) {
      _exit(3);
    }
  }
  EXPECT_GT(child, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  size_t seen = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      seen = SessionReader(path).steps().size();
    } catch (const SessionError&) {
      seen = 0;  // not committed yet
    }
    if (seen == static_cast<size_t>(2 * steps)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(seen, static_cast<size_t>(2 * steps)) << "the writer did not commit its steps in 30 s";
  return child;
}

std::string r55_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const SessionError& e) {
    return e.what();
  }
  return "";
}

void r55_cut(const std::string& from, const std::string& to, uintmax_t bytes) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  fs::resize_file(to, bytes);
}

}  // namespace

// retest54 R3: after a SIGKILL the writer's pid was given to another live process (here a
// sleeping child); the session read `running` and every --force-overwrite refused it. Its writer
// lock is free (flock works here): the run is gone.
TEST(Robust55KilledRun, APidReusedByALiveProcessNeitherKeepsItRunningNorBlocksItsReplacement) {
  const std::string path = r55_path("killed.db");
  const pid_t dead = r55_killed_run(path, 3);
  {
    const SessionReader r(path);
    EXPECT_EQ(r.meta(meta::kEnded), "running");
    EXPECT_EQ(r.meta(meta::kWriterPid), std::to_string(dead));
    EXPECT_EQ(r.status(), "crashed");  // the pid is dead too
  }
  const pid_t sleeper = fork();
  ASSERT_GE(sleeper, 0);
  if (sleeper == 0) {
    for (;;) pause();
  }
  struct Reap {  // killed however the test ends (a refusal below throws)
    pid_t pid;
    ~Reap() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reap{sleeper};
  r55_sql(path, "UPDATE metadata SET value = '" + std::to_string(sleeper) + "' WHERE key = 'writer_pid'");
  ASSERT_EQ(kill(sleeper, 0), 0);  // alive, on this host, not this process
  {
    const SessionReader r(path);
    EXPECT_EQ(r.meta(meta::kWriterPid), std::to_string(sleeper));
    EXPECT_EQ(r.status(), "crashed");
    EXPECT_EQ(r.steps().size(), 6u);
  }
  EXPECT_EQ(r55_error([&] { refuse_replacing_live_session(path); }), "");
  EXPECT_EQ(r55_error([&] { SessionWriter::check_path(path, true); }), "");
  ASSERT_EQ(r55_error([&] {
              SessionWriter w(path, true);  // replaces it
              w.set_metadata(meta::kWorldSize, "2");
              w.add_lane({0, 0, "compute", "thread"});
              w.add_step({0, 0, 0, 700, 0.25, 0, 0});
              w.close("complete");
            }),
            "");
  const SessionReader r(path);
  EXPECT_EQ(r.status(), "complete");
  ASSERT_EQ(r.steps().size(), 1u);
  EXPECT_EQ(r.steps()[0].end_ns, 700);
}

// A live writer still holds its lock: refused and running, whatever the metadata's pid says.
TEST(Robust55KilledRun, ALiveWritersLockStillDecidesWhenItsMetadataPidIsDead) {
  const std::string path = r55_path("live.db");
  SessionWriter w(path, true);
  w.set_metadata(meta::kWorldSize, "2");
  w.add_lane({0, 0, "compute", "thread"});
  w.add_step({0, 0, 0, 500, 0.5, 0, 0});
  std::this_thread::sleep_for(kCommitInterval * 2);
  const std::string why = r55_error([&] { refuse_replacing_live_session(path); });
  EXPECT_NE(why.find("not overwritten: a run (pid " + std::to_string(getpid()) + ") is still writing it"),
            std::string::npos)
      << why;
  EXPECT_EQ(SessionReader(path).status(), "running");
  w.close("complete");
  EXPECT_EQ(SessionReader(path).status(), "complete");
}

// retest54 R5: a copy cut inside its last page is refused beside siblings that restore nothing.
TEST(Robust55CutShort, ACutCopyIsRefusedBesideAnEmptyWalOrJournal) {
  const std::string whole = r55_path("whole.db");
  r55_closed_session(whole, 40);
  ASSERT_FALSE(fs::exists(whole + "-wal"));  // the writer left WAL mode when it closed
  const uintmax_t size = fs::file_size(whole);
  ASSERT_EQ(size % 16384, 0u) << size;  // pages of 16 KiB
  const std::string cut = r55_path("cut.db");
  r55_cut(whole, cut, size - 4096);
  const std::string want = cut + ": the session file is truncated or corrupt (" + std::to_string(size - 4096) +
                           " bytes, where its SQLite header says " + std::to_string(size / 16384) +
                           " pages of 16384 bytes: " + std::to_string(size) + " bytes; an interrupted copy? copy it again)";
  EXPECT_EQ(r55_error([&] { SessionReader r(cut); }), want);  // no sibling (tester54 F6)
  { std::ofstream(cut + "-wal", std::ios::binary); }             // 0 bytes
  EXPECT_EQ(r55_error([&] { SessionReader r(cut); }), want);
  { std::ofstream(cut + "-wal", std::ios::binary) << std::string(31, '\x01'); }  // shorter than its header
  EXPECT_EQ(r55_error([&] { SessionReader r(cut); }), want);
  { std::ofstream(cut + "-wal", std::ios::binary) << std::string(32 + 24 + 16384 - 1, '\0'); }  // no whole frame
  EXPECT_EQ(r55_error([&] { SessionReader r(cut); }), want);
  fs::remove(cut + "-wal");
  fs::remove(cut + "-shm");
  { std::ofstream(cut + "-journal", std::ios::binary); }  // 0 bytes: not a hot journal
  EXPECT_EQ(r55_error([&] { SessionReader r(cut); }), want);
  fs::remove(cut + "-journal");
  // the whole file reads beside the same siblings
  { std::ofstream(whole + "-journal", std::ios::binary); }
  { std::ofstream(whole + "-wal", std::ios::binary); }
  EXPECT_EQ(SessionReader(whole).steps().size(), 80u);
}

// A killed run's file cut to half beside its whole -wal (which holds every commit) still reads,
// every step of it; without the -wal, or beside a 0-byte one, the cut is refused.
TEST(Robust55CutShort, AKilledRunsCutFileWithItsWholeWalStillReads) {
  const std::string killed = r55_path("killed_cut_src.db");
  r55_killed_run(killed, 4);
  ASSERT_TRUE(fs::exists(killed + "-wal"));
  const uintmax_t wal = fs::file_size(killed + "-wal");
  ASSERT_GE(wal, 32u + 24 + 16384);
  const uintmax_t size = fs::file_size(killed);
  const std::string cut = r55_path("killed_cut.db");
  r55_cut(killed, cut, size / 2);
  fs::copy_file(killed + "-wal", cut + "-wal", fs::copy_options::overwrite_existing);
  {
    const SessionReader r(cut);
    EXPECT_EQ(r.status(), "crashed");
    const auto steps = r.steps();
    ASSERT_EQ(steps.size(), 8u);
    EXPECT_EQ(steps[7].step, 3);
    EXPECT_EQ(steps[7].rank, 1);
    EXPECT_EQ(steps[7].end_ns, 3510);
    EXPECT_EQ(r.collectives().size(), 8u);
  }
  fs::remove(cut + "-wal");
  fs::remove(cut + "-shm");
  { std::ofstream(cut + "-wal", std::ios::binary); }
  const std::string why = r55_error([&] { SessionReader r(cut); });
  EXPECT_NE(why.find(cut + ": the session file is truncated or corrupt (" + std::to_string(size / 2) + " bytes"),
            std::string::npos)
      << why;
}

// retest54 R7: ranks 2000000000 (ranks, lanes, steps edited) in a world of 2 were shown as a member.
TEST(Robust55HandEdits, ARankOutsideTheWorldIsRefusedNamingTheTable) {
  const std::string whole = r55_path("ranks.db");
  r55_closed_session(whole, 3);
  const std::string path = r55_path("rank_edit.db");
  fs::copy_file(whole, path, fs::copy_options::overwrite_existing);
  r55_sql(path, "UPDATE ranks SET rank = 2000000000 WHERE rank = 1; UPDATE lanes SET rank = 2000000000 WHERE rank = 1; "
                "UPDATE steps SET rank = 2000000000 WHERE rank = 1");
  const SessionReader r(path);  // the metadata is fine: each table says so when it is read
  const std::string tail = ": rank 2000000000 is outside the world of 2 ranks (metadata world_size: ranks 0-1): the "
                           "session file is damaged or was edited";
  EXPECT_EQ(r55_error([&] { r.steps(); }), path + ": table steps, row (step 0, rank 2000000000), column rank" + tail);
  EXPECT_EQ(r55_error([&] { r.ranks(); }), path + ": table ranks, row (rank 2000000000), column rank" + tail);
  EXPECT_EQ(r55_error([&] { r.lanes(); }), path + ": table lanes, row (rank 2000000000, lane 0), column rank" + tail);
  // rank 2 is the first outside; rank 1 (the last inside) reads
  fs::copy_file(whole, path, fs::copy_options::overwrite_existing);
  r55_sql(path, "UPDATE collectives SET rank = 2 WHERE step = 2 AND rank = 1");
  EXPECT_EQ(r55_error([&] { SessionReader(path).collectives(); }),
            path + ": table collectives, row (id 6), column rank: rank 2 is outside the world of 2 ranks (metadata "
                   "world_size: ranks 0-1): the session file is damaged or was edited");
  // without world_size, a rank id is bounded by kMaxWorldSize (2^20)
  fs::copy_file(whole, path, fs::copy_options::overwrite_existing);
  r55_sql(path, "DELETE FROM metadata WHERE key = 'world_size'; UPDATE steps SET rank = 1048575 WHERE rank = 1 AND "
                "step = 0; UPDATE steps SET rank = 1048576 WHERE rank = 1 AND step = 1");
  EXPECT_EQ(r55_error([&] { SessionReader(path).steps(); }),
            path + ": table steps, row (step 1, rank 1048576), column rank: rank 1048576 is not a rank id in [0, "
                   "1048576): the session file is damaged or was edited");
  r55_sql(path, "DELETE FROM steps WHERE rank = 1048576");
  const auto steps = SessionReader(path).steps();
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_EQ(steps[1].rank, 1048575);
}

// tester54 F6: a negative step, text in an integer column and negative bytes were read silently
// (a mean of 0.99 ms instead of 2.92; 'abc' as 0; "bytes sent -220 B").
TEST(Robust55HandEdits, NegativeDurationsTextAndNegativeBytesAreRefusedNamingTheRowAndColumn) {
  const std::string whole = r55_path("edits.db");
  r55_closed_session(whole, 3);
  const std::string path = r55_path("edit.db");
  auto edited = [&](const std::string& sql) {
    fs::copy_file(whole, path, fs::copy_options::overwrite_existing);
    r55_sql(path, sql);
  };
  const std::string damaged = ": the session file is damaged or was edited";
  edited("UPDATE steps SET end_ns = start_ns - 1000000000 WHERE step = 1 AND rank = 0");
  EXPECT_EQ(r55_error([&] { SessionReader(path).steps(); }),
            path + ": table steps, row (step 1, rank 0), column end_ns: -999999000 is before start_ns 1000 (a duration "
                   "of -1000000000 ns)" + damaged);
  edited("UPDATE steps SET start_ns = 'abc' WHERE step = 1 AND rank = 1");
  EXPECT_EQ(r55_error([&] { SessionReader(path).steps(); }),
            path + ": table steps, row (step 1, rank 1), column start_ns: text 'abc' where an integer is stored" +
                damaged);
  edited("UPDATE steps SET memory_peak_bytes = 2.5 WHERE step = 2 AND rank = 0");
  EXPECT_EQ(r55_error([&] { SessionReader(path).steps(); }),
            path + ": table steps, row (step 2, rank 0), column memory_peak_bytes: the real 2.5 where an integer is "
                   "stored" + damaged);
  edited("UPDATE steps SET loss = 'x' WHERE step = 0 AND rank = 0");
  EXPECT_EQ(r55_error([&] { SessionReader(path).steps(); }),
            path + ": table steps, row (step 0, rank 0), column loss: text 'x' where a number is stored" + damaged);
  edited("UPDATE collectives SET bytes_sent = -5 WHERE step = 1 AND rank = 0");
  EXPECT_EQ(r55_error([&] { SessionReader(path).collectives(); }),
            path + ": table collectives, row (id 3), column bytes_sent: -5 is negative" + damaged);
  edited("UPDATE collectives SET end_ns = start_ns - 1 WHERE step = 2 AND rank = 1");
  EXPECT_EQ(r55_error([&] { SessionReader(path).collectives(); }),
            path + ": table collectives, row (id 6), column end_ns: 2199 is before start_ns 2200 (a duration of -1 ns)" +
                damaged);
  // a step of 0 ns is a step; the file untouched reads its values
  edited("UPDATE steps SET end_ns = start_ns WHERE step = 2 AND rank = 1");
  const auto steps = SessionReader(path).steps();
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(steps[5].start_ns, 2010);
  EXPECT_EQ(steps[5].end_ns, 2010);
  EXPECT_EQ(SessionReader(whole).collectives()[3].bytes_sent, 96);
}

// Load counters: negative counts and bytes are refused; shard -1 (a rank's hot_rows replica) is
// a legitimate value and reads.
TEST(Robust55HandEdits, LoadCountersRefuseNegativeCountsAndKeepTheHotRowsShard) {
  const std::string path = r55_path("load.db");
  {
    SessionWriter w(path, true);
    w.set_metadata(meta::kWorldSize, "2");
    LoadCounter a;
    a.step = 0;
    a.rank = 1;
    a.table = 0;
    a.shard = -1;
    a.ids = 12;
    a.bytes_in = 96;
    w.add_load(a);
    w.close("complete");
  }
  const auto load = SessionReader(path).load();
  ASSERT_EQ(load.size(), 1u);
  EXPECT_EQ(load[0].shard, -1);
  EXPECT_EQ(load[0].ids, 12);
  r55_sql(path, "UPDATE load_counters SET bytes_in = -96");
  EXPECT_EQ(r55_error([&] { SessionReader(path).load(); }),
            path + ": table load_counters, row (step 0, rank 1, table_index 0, shard -1), column bytes_in: -96 is "
                   "negative: the session file is damaged or was edited");
  r55_sql(path, "UPDATE load_counters SET bytes_in = 96, shard = -2");
  EXPECT_EQ(r55_error([&] { SessionReader(path).load(); }),
            path + ": table load_counters, row (step 0, rank 1, table_index 0, shard -2), column shard: -2 is outside "
                   "[-1, 2147483647]: the session file is damaged or was edited");
}

// The import error of a snapshot whose every device list exists but is empty said "segments and
// device_traces are empty"; it says what is there.
TEST(Robust55SnapshotWording, AnEmptySnapshotSaysWhichListsItHas) {
  using namespace embedscope::sessions::torch_snapshot;
  const std::string path = r55_path("snap.db");
  SessionWriter w(path, true);
  MemorySnapshotFile s;
  auto said = [&](const std::string& name) {
    try {
      import_torch_memory_snapshots({{&s, name}}, w);
    } catch (const SnapshotError& e) {
      return std::string(e.what());
    }
    return std::string("imported");
  };
  const std::string tail = "): nothing was recorded - nothing was allocated, or it was dumped before the workload; no "
                           "session written";
  s.device_traces.assign(8, {});  // PyTorch: one list per visible GPU, all empty
  EXPECT_EQ(said("eight.pickle"), "eight.pickle: the memory snapshot holds no segment and no trace entry (its segments "
                                  "list is empty and each of its 8 device_traces lists (devices 0-7) is empty" + tail);
  s.device_traces.assign(1, {});
  EXPECT_EQ(said("one.pickle"), "one.pickle: the memory snapshot holds no segment and no trace entry (its segments list "
                                "is empty and its one device_traces list (device 0) is empty" + tail);
  s.device_traces.clear();
  EXPECT_EQ(said("none.pickle"), "none.pickle: the memory snapshot holds no segment and no trace entry (its segments "
                                 "list is empty and it has no device_traces list" + tail);
  w.close("failed");
}
