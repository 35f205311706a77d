// ux42 (tester41 #21): a run stopped at once (a second Ctrl-C) records its end through a
// connection of its own while its writer is still open, then the process ends without closing
// the writer: the session reads "cancelled" with the message, not "crashed". A forked child
// plays the run (it _exits as the CLI does), so no timing is involved.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/end_mark.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;

// The child: a writer whose first metadata is committed, then the stop mark (mark = false: none), then _exit.
std::string ux42_stopped_session(const std::string& name, bool mark, bool keep_wal = false) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("es_ux42_end_" + name + "_" + std::to_string(getpid()) + ".db")).string();
  std::filesystem::remove(path);
  const pid_t child = fork();
  if (child == 0) {
    ss::SessionWriter w(path);
    // the writer thread commits its first metadata (ended = running) on its own: wait for it (a
    // condition, bounded, not a duration: a run is steps in when a user presses Ctrl-C twice)
    bool committed = false;
    for (int i = 0; i < 600000 && !committed; ++i) {
      try {
        committed = ss::SessionReader(path).meta(ss::meta::kEnded) == "running";
      } catch (const std::exception&) {
      }
      if (!committed) usleep(100);
    }
    if (!committed) _exit(4);
    if (keep_wal) {  // a SIGKILLed run: its session stays in FILE.db + FILE.db-wal
      ss::StepMetric s{};
      s.end_ns = 1000;
      w.add_step(s);
      bool stepped = false;  // its step committed too (a condition, bounded)
      for (int i = 0; i < 600000 && !stepped; ++i) {
        try {
          stepped = ss::SessionReader(path).steps().size() == 1;
        } catch (const std::exception&) {
        }
        if (!stepped) usleep(100);
      }
      _exit(stepped ? 130 : 5);
    }
    const bool ok = !mark || ss::mark_session_ended(path, "cancelled", "stopped at once by a second Ctrl-C");
    _exit(ok ? 130 : 3);  // no destructor: the writer is never closed
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  return path;
}
}  // namespace

TEST(Ux42EndMark, ARunStoppedAtOnceReadsCancelledNotCrashed) {
  const ss::SessionReader r(ux42_stopped_session("marked", true));
  EXPECT_EQ(r.status(), "cancelled");
  EXPECT_EQ(r.meta(ss::meta::kEndMessage), "stopped at once by a second Ctrl-C");
  // without the mark the same stop reads crashed (the writer's process is gone)
  EXPECT_EQ(ss::SessionReader(ux42_stopped_session("unmarked", false)).status(), "crashed");
  // not a session: nothing written, false
  EXPECT_FALSE(ss::mark_session_ended("/nonexistent/dir/x.db", "cancelled", "m"));
}

// tester41 #11: a killed run's session (FILE.db + FILE.db-wal) is checkpointed into FILE.db by
// the first reader that may write (`stats`), only when no writer is alive.
TEST(Ux42EndMark, AKilledRunsWalIsCheckpointedOnlyWhenNoWriterIsAlive) {
  const std::string path = ux42_stopped_session("killed", false, true);
  ASSERT_GT(std::filesystem::file_size(path + "-wal"), 0u);
  std::string why;
  EXPECT_TRUE(ss::checkpoint_abandoned_session(path, &why)) << why;
  EXPECT_TRUE(!std::filesystem::exists(path + "-wal") || std::filesystem::file_size(path + "-wal") == 0);
  // the .db alone is the whole session now: a copy without the -wal reads its step
  const std::string copy = path + ".copy.db";
  std::filesystem::remove(copy);
  std::filesystem::copy_file(path, copy);
  const ss::SessionReader r(copy);
  EXPECT_EQ(r.steps().size(), 1u);
  EXPECT_EQ(ss::SessionReader(path).status(), "crashed");  // the metadata is not changed
  EXPECT_FALSE(ss::checkpoint_abandoned_session(path, &why));  // nothing left to do
  EXPECT_EQ(why, "no -wal file to checkpoint");
  // a live writer (this process's, holding its lock): never touched
  const std::string live =
      (std::filesystem::temp_directory_path() / ("es_ux42_live_" + std::to_string(getpid()) + ".db")).string();
  std::filesystem::remove(live);
  {
    ss::SessionWriter w(live);
    ss::StepMetric s{};
    s.end_ns = 1000;
    w.add_step(s);
    for (int i = 0; i < 600000; ++i) {  // until its first commit made a -wal (a condition, bounded)
      std::error_code ec;
      if (std::filesystem::file_size(live + "-wal", ec) > 0 && !ec) break;
      usleep(100);
    }
    EXPECT_FALSE(ss::checkpoint_abandoned_session(live, &why));
    EXPECT_EQ(why, "its writer is alive");
    w.close("complete");
  }
  EXPECT_EQ(ss::SessionReader(live).status(), "complete");
}

// retest47 R1: a run stopped at once during its start-up, before its writer committed the
// session's header (format, workload, ...): the end mark writes nothing and says so (false), so the
// CLI does not print "recorded as cancelled" over a file that reads "metadata 'format' is ''".
TEST(Ux42EndMark, AFileWithoutTheSessionsHeaderIsNotMarked) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("es_ux42_nohead_" + std::to_string(getpid()) + ".db")).string();
  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT)", nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_FALSE(ss::mark_session_ended(path, "cancelled", "stopped at once"));
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM metadata", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 0);  // nothing written
  sqlite3_finalize(st);
  // with the header, the same call marks it
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO metadata VALUES ('format', 'embedscope-session')", nullptr, nullptr, nullptr),
            SQLITE_OK);
  EXPECT_TRUE(ss::mark_session_ended(path, "cancelled", "stopped at once"));
  sqlite3_close(db);
  std::filesystem::remove(path);
}
