// `embedscope run` beside other processes on its session (issue 20, defects 1 and 2), as a user
// runs them: `stats` in a loop while the run writes, and a second run with --force-overwrite.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"

namespace fs = std::filesystem;

namespace {
fs::path live_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_cli_live_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs a POSIX shell script in live_scratch() with $E set to the CLI; returns its exit status.
int sh(const std::string& script) {
  const fs::path file = live_scratch() / "script.sh";
  std::ofstream(file) << "cd '" << live_scratch().string() << "' || exit 99\nE='" << EMBEDSCOPE_CLI << "'\n" << script;
  const int status = std::system(("sh '" + file.string() + "'").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

// `embedscope stats` in a loop on the session of a run that is writing it: every run ends
// complete with its summary, exit 0, and leaves the session complete (before the fix about half
// of the runs failed at close: "database is locked", exit 2, no summary).
TEST(CliLiveSession, StatsInALoopNeverBreaksTheRun) {
  constexpr int kRuns = 20;
  for (int i = 0; i < kRuns; ++i) {
    const int rc = sh("rm -f s.db s.db-wal s.db-shm\n"
                      "$E run --preset tiny --steps 3 --warmup-steps 1 --json -o s.db >run.json 2>run.err &\n"
                      "P=$!\n"
                      "while kill -0 $P 2>/dev/null; do $E stats s.db >/dev/null 2>&1; done &\n"
                      "L=$!\n"
                      "wait $P; R=$?\nwait $L\nexit $R\n");
    ASSERT_EQ(rc, 0) << "run " << i << ": " << slurp(live_scratch() / "run.err");
    const auto j = nlohmann::json::parse(slurp(live_scratch() / "run.json"));
    EXPECT_EQ(j["ended"], "complete") << "run " << i;
    EXPECT_EQ(j["steps"], 3) << "run " << i;
    embedscope::sessions::SessionReader r((live_scratch() / "s.db").string());
    EXPECT_EQ(r.status(), "complete") << "run " << i;
    EXPECT_EQ(r.steps().size(), 8u) << "run " << i;  // (1 warmup + 3 steps) x 2 ranks
  }
}

// A second run with --force-overwrite on the session of a run still writing it is refused
// (exit 2) with a message naming the first run's pid; the first run completes and its session
// keeps every step. Before the fix the second run replaced the file and the first failed at
// close ("attempt to write a readonly database") with its data gone.
TEST(CliLiveSession, ForceOverwriteRefusesASessionALiveRunWrites) {
  // 2 ms per collective: the first run takes a second or more
  const int rc = sh("rm -f live.db*\n"
                    "$E run --preset tiny --steps 60 --network-latency 2000000 --json -o live.db >first.json "
                    "2>first.err &\n"
                    "P=$!\necho $P >first.pid\n"
                    "while [ ! -s live.db ]; do kill -0 $P 2>/dev/null || exit 97; sleep 0.01; done\n"
                    "$E run --preset tiny --steps 1 --force-overwrite -o live.db >/dev/null 2>second.err\n"
                    "echo $? >second.rc\n"
                    "wait $P\n");
  ASSERT_EQ(rc, 0) << slurp(live_scratch() / "first.err");
  long first_pid = 0;
  std::ifstream(live_scratch() / "first.pid") >> first_pid;
  const std::string pid = std::to_string(first_pid);
  EXPECT_EQ(slurp(live_scratch() / "second.rc"), "2\n");
  const std::string err = slurp(live_scratch() / "second.err");
  EXPECT_NE(err.find("error: live.db: not overwritten: a run (pid " + pid + ") is still writing it"), std::string::npos)
      << err;
  const auto j = nlohmann::json::parse(slurp(live_scratch() / "first.json"));
  EXPECT_EQ(j["ended"], "complete");
  embedscope::sessions::SessionReader r((live_scratch() / "live.db").string());
  EXPECT_EQ(r.status(), "complete");
  EXPECT_EQ(r.meta("writer_pid"), pid);
  EXPECT_EQ(r.steps().size(), 120u);  // 60 steps x 2 ranks
  // once it has ended, --force-overwrite replaces it
  EXPECT_EQ(sh("$E run --preset tiny --steps 1 --force-overwrite -o live.db >/dev/null 2>&1"), 0);
  EXPECT_EQ(embedscope::sessions::SessionReader((live_scratch() / "live.db").string()).steps().size(), 2u);
}

// Signals to a running `embedscope run` (issue 18, the flight recorder): SIGUSR1 dumps every
// rank's last collectives into the session and the run goes on; SIGTERM (what mpirun, srun and
// a scheduler's time limit send) dumps them again and cancels after the current step, exit 0;
// `stats` shows the dumps.
TEST(CliLiveSession, SigusrOneAndSigtermDumpTheFlightRecorderIntoTheSession) {
  const int rc = sh("rm -f fr.db*\n"
                    "$E run --preset tiny --steps 400 --network-latency 2000000 --json -o fr.db >fr.json 2>fr.err &\n"
                    "P=$!\n"
                    "steps() { [ -s fr.db ] && sqlite3 -readonly fr.db 'SELECT count(*) FROM steps' 2>/dev/null || echo 0; }\n"
                    "until [ \"$(steps)\" -ge 4 ]; do kill -0 $P || exit 97; sleep 0.05; done\n"
                    "kill -USR1 $P\n"
                    "sleep 0.5\n"
                    "kill -TERM $P\n"
                    "wait $P; R=$?\n"
                    "$E stats fr.db >stats.txt 2>&1 || exit 98\n"
                    "exit $R\n");
  ASSERT_EQ(rc, 0) << slurp(live_scratch() / "fr.err");
  const auto j = nlohmann::json::parse(slurp(live_scratch() / "fr.json"));
  EXPECT_EQ(j["ended"], "cancelled");
  embedscope::sessions::SessionReader r((live_scratch() / "fr.db").string());
  EXPECT_EQ(r.status(), "cancelled");
  EXPECT_LT(r.steps().size(), 800u);  // cancelled before its 400 steps x 2 ranks
  std::map<std::pair<int32_t, int32_t>, std::string> dumps;  // (rank, dump) -> reason
  for (const auto& e : r.flight_records()) dumps[{e.rank, e.dump}] = e.reason;
  const std::map<std::pair<int32_t, int32_t>, std::string> want{
      {{0, 0}, "SIGUSR1"}, {{0, 1}, "SIGTERM"}, {{1, 0}, "SIGUSR1"}, {{1, 1}, "SIGTERM"}};
  EXPECT_EQ(dumps, want);
  const std::string stats = slurp(live_scratch() / "stats.txt");
  EXPECT_NE(stats.find("flight recorder (each rank's last dump of its last collectives)"), std::string::npos) << stats;
  EXPECT_NE(stats.find("SIGTERM"), std::string::npos) << stats;
  EXPECT_EQ(stats.find("did not reach"), std::string::npos) << stats;  // a clean cancel is no hang (tester41 #1)
}
