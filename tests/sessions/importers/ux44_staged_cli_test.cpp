// tester43 F17: `embedscope import big.pickle -o bigk.db & sleep 2.5; kill -KILL $!` left
// ".bigk.db.importing-PID" (+ -wal, -shm) behind, and the next import to bigk.db, run at once,
// kept them: they had changed within the last minute, the guard for a live import on another
// host. The next import now asks SQLite's lock of the staged file's -shm whether any connection
// still has it open: a killed writer's files go at once, a live writer's (even under a pid this
// host does not run) stay, however old its files look.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using embedscope::sessions::testing::import_scratch;
using embedscope::sessions::testing::trace_fixture;

embedscope::test_support::CliResult f17_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}

// A WAL database with one row, its -wal and -shm written: what an import has on disk mid-way.
sqlite3* f17_open_wal(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return nullptr;
  sqlite3_exec(db, "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES(1);", nullptr, nullptr, nullptr);
  return db;
}

// A pid that no longer runs: a child that exited and was reaped.
pid_t f17_gone_pid() {
  const pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, nullptr, 0);
  return p;
}
}  // namespace

TEST(StagedImportF17, AKilledImportsFilesGoAtOnceALiveWritersStay) {
  const fs::path dir = import_scratch() / "f17_staged";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto staged = [&](long pid) { return (dir / (".k44.db.importing-" + std::to_string(pid))).string(); };
  // a killed import: a child writes its staged WAL session under its own pid and is SIGKILLed
  // mid-way; the files were written a moment ago
  const pid_t killed = fork();
  if (killed == 0) {
    f17_open_wal(staged(getpid()));
    raise(SIGKILL);
    _exit(1);
  }
  ASSERT_GT(killed, 0);
  int status = 0;
  ASSERT_EQ(waitpid(killed, &status, 0), killed);
  ASSERT_TRUE(WIFSIGNALED(status));
  for (const char* suffix : {"", "-wal", "-shm"}) ASSERT_TRUE(fs::exists(staged(killed) + suffix)) << suffix;
  // a live writer under a pid this host does not run (an import on another host sharing the
  // folder): this process holds the connection open; its files look two hours old
  const pid_t elsewhere = f17_gone_pid();
  sqlite3* live = f17_open_wal(staged(elsewhere));
  ASSERT_NE(live, nullptr);
  const auto old_time = fs::file_time_type::clock::now() - std::chrono::hours(2);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    ASSERT_TRUE(fs::exists(staged(elsewhere) + suffix)) << suffix;
    fs::last_write_time(staged(elsewhere) + suffix, old_time);
  }

  const auto r = f17_cli("import " + trace_fixture("align/rank0.json") + " -o " + (dir / "k44.db").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("import: removed " + staged(killed) + ", left by an import that was killed (pid " +
                       std::to_string(killed) + ")"),
            std::string::npos)
      << r.err;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    EXPECT_FALSE(fs::exists(staged(killed) + suffix)) << suffix;     // gone at once, though just written
    EXPECT_TRUE(fs::exists(staged(elsewhere) + suffix)) << suffix;   // its writer has it open
  }
  EXPECT_EQ(r.err.find(staged(elsewhere)), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "k44.db"));
  sqlite3_close(live);
}

// tester43 F19: `calibrate` of an lm_embedding session said "no workload_json or
// sharding_plan_json metadata (an imported trace, or not a session Embedscope ran)" of a session
// Embedscope ran; `plan` of one rank said "on 1 ranks".
TEST(Ux44CliWording, CalibrateNamesAnLmSessionAndPlanCountsOneRank) {
  const std::string db = (import_scratch() / "ux44_lm_session.db").string();
  fs::remove(db);
  {
    embedscope::sessions::SessionWriter w(db);
    w.set_metadata("workload_json", R"({"model": "lm_embedding", "vocab_size": 40})");
    w.add_step({0, 0, 0, 1000, 0.5, 0, 0});
    w.close("complete");
  }
  auto r = f17_cli("calibrate " + db);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(db + ": an lm_embedding session (calibration pairs DLRM step programs only)"), std::string::npos) << r.err;
  r = f17_cli("plan --preset llama3_8b_embedding_scaled --devices 1 --sequence-parallel");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("sharding     vocab_parallel + sequence_parallel on 1 rank\n"), std::string::npos) << r.out;
}

// tester43 F19: a sharding type and sequence parallel that disagree were "(set by --sharding)
// (set by --sequence-parallel)"; vocab_parallel on a DLRM workload listed the DLRM types only.
TEST(Ux44CliWording, SetByOnceAndVocabParallelSaysWhereItBelongs) {
  auto r = f17_cli("plan --preset llama3_8b_embedding_scaled --sharding data_parallel --sequence-parallel");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("only with sharding type vocab_parallel (got data_parallel) (set by --sharding and "
                       "--sequence-parallel)\n"),
            std::string::npos)
      << r.err;
  r = f17_cli("plan --preset tiny --sharding vocab_parallel");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--sharding: vocab_parallel is a sharding type of lm_embedding workloads (preset tiny is a DLRM "
                       "workload; its types: data_parallel, table_wise, row_wise, column_wise, table_row_wise, "
                       "table_column_wise, grid_shard)"),
            std::string::npos)
      << r.err;
}
