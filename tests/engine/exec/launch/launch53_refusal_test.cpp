// tester53 F1: a rank refused because its session file already existed (a SessionError, not a
// SpecError) did not write its refusal into the store, so its peers waited out the whole 30 s
// rendezvous timeout and named the wrong cause ("start every rank with the same --rendezvous and
// --run-id"); launch then read the leftover file, which this run never wrote, as that rank's
// session (and mpirun's rank 0 merged such leftovers). Now every bad-input refusal before the
// claim is reported (its peers end at once, exit 2, "rank 1 refused its input before the
// rendezvous"), launch refuses existing rank session names up front (without --force-overwrite),
// and a file at a rank's name that this run did not write is never read or merged as its session.
// tester53 F8: launch exited 1 (a failure) when a second Ctrl-C stopped its ranks at once (each
// exit 130, as `run`); it now exits 130 too. Every test runs the real CLI in real processes.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace ts = embedscope::test_support;
using nlohmann::json;

fs::path l53_scratch(const std::string& name) {
  return ts::fresh_scratch("es_launch53_" + name + "_" + std::to_string(getpid()));
}
std::string l53_slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
// Starts `embedscope args` in `dir`, stdout and stderr to files; returns the pid.
pid_t l53_start(const std::vector<std::string>& args, const fs::path& dir, const fs::path& out, const fs::path& err) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(126);
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1), dup2(e, 2);
    std::vector<char*> argv{const_cast<char*>(EMBEDSCOPE_CLI)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(EMBEDSCOPE_CLI, argv.data());
    _exit(127);
  }
  return pid;
}
// Waits for `pid` at most `limit`: its exit code, -signal, or 999 (then killed).
int l53_wait(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return 999;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}
double l53_seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
constexpr const char* kExists = ": already exists; choose another name or allow overwriting it (embedscope run "
                                "--force-overwrite)";
}  // namespace

// F1 at the rank level (ranks by hand, as mpirun or a script starts them): rank 1's session file
// is left from an earlier run. Rank 1 refuses it; ranks 0 and 2, already waiting in the
// rendezvous, end at once (exit 2) naming rank 1 and its reason - the tiny preset's collective
// timeout is 30 s, which they waited out before.
TEST(Launch53, ARankRefusingItsExistingSessionEndsItsWaitingPeersAtOnce) {
  const fs::path dir = l53_scratch("byhand");
  const std::string pattern = (dir / "ow2.rank{rank}.db").string(), stale = (dir / "ow2.rank1.db").string();
  std::ofstream(stale) << "an earlier run's file";
  const std::string store = "file://" + (dir / "rdv").string();
  fs::create_directories(dir / "rdv");
  auto rank = [&](int r) {
    return std::vector<std::string>{"run", "--preset", "tiny", "--steps", "3", "--rank", std::to_string(r),
                                    "--world-size", "3", "--rendezvous", store, "--run-id", "l53", "-o", pattern};
  };
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t p0 = l53_start(rank(0), dir, dir / "o0.txt", dir / "e0.txt");
  const pid_t p2 = l53_start(rank(2), dir, dir / "o2.txt", dir / "e2.txt");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // 0 and 2 wait for rank 1
  const pid_t p1 = l53_start(rank(1), dir, dir / "o1.txt", dir / "e1.txt");
  EXPECT_EQ(l53_wait(p1, std::chrono::seconds(60)), 2) << l53_slurp(dir / "e1.txt");
  EXPECT_EQ(l53_wait(p0, std::chrono::seconds(60)), 2) << l53_slurp(dir / "e0.txt");
  EXPECT_EQ(l53_wait(p2, std::chrono::seconds(60)), 2) << l53_slurp(dir / "e2.txt");
  EXPECT_LT(l53_seconds_since(t0), 10.0) << "the peers waited for the 30 s timeout";
  EXPECT_EQ(l53_slurp(dir / "e1.txt"), "error: " + stale + kExists + "\n");
  for (int r : {0, 2}) {
    const std::string err = l53_slurp(dir / ("e" + std::to_string(r) + ".txt"));
    EXPECT_NE(err.find("error: rendezvous " + store + " (run id l53): rank 1 refused its input before the rendezvous "
                       "(this is rank " + std::to_string(r) + "): " + stale + kExists + "\n"),
              std::string::npos)
        << err;
    EXPECT_EQ(err.find("did not arrive"), std::string::npos) << err;
    EXPECT_EQ(err.find("start every rank with the same"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(dir / ("ow2.rank" + std::to_string(r) + ".db")));  // refused before writing
  }
  EXPECT_EQ(l53_slurp(stale), "an earlier run's file");  // left as it was
}

// F1 under launch, the tester's command: an existing rank session name is refused before any
// process starts (as the merged -o is), naming the file and --force-overwrite.
TEST(Launch53, LaunchRefusesAnExistingRankSessionBeforeStartingAnyRank) {
  const fs::path dir = l53_scratch("upfront");
  std::ofstream(dir / "ow2.rank1.db") << "";  // `touch`: an empty leftover does the same
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = ts::run_cli(EMBEDSCOPE_CLI, "launch -n 3 run --preset tiny --steps 3 -o " + (dir / "ow2.db").string(), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_LT(l53_seconds_since(t0), 5.0);
  EXPECT_EQ(r.err, "error: " + (dir / "ow2.rank1.db").string() + ": already exists (rank 1's session of " +
                       (dir / "ow2.db").string() + "); choose another name (-o) or allow overwriting it "
                       "(--force-overwrite)\n");
  EXPECT_FALSE(fs::exists(dir / "ow2.rank0.db"));  // no rank started
  EXPECT_FALSE(fs::exists(dir / "ow2.db"));
  EXPECT_EQ(fs::file_size(dir / "ow2.rank1.db"), 0u);
  // a {rank} pattern names the same files
  const auto p = ts::run_cli(EMBEDSCOPE_CLI, "launch -n 2 run --preset tiny --steps 3 -o " +
                                                 (dir / "ow2.rank{rank}.db").string(), dir);
  EXPECT_EQ(p.code, 2) << p.err;
  EXPECT_NE(p.err.find("error: " + (dir / "ow2.rank1.db").string() + ": already exists (rank 1's session of "),
            std::string::npos)
      << p.err;
}

// F1, launch's reading: with --force-overwrite a rank still refuses a session another run is
// writing (a live writer). Its peers end at once, and launch does not read that file as rank 1's
// session: the rank wrote none.
TEST(Launch53, LaunchNeverReadsARankFileThisRunDidNotWrite) {
  const fs::path dir = l53_scratch("live");
  const std::string live = (dir / "lv.rank1.db").string();
  // another run writes lv.rank1.db (slow steps: each collective 300 ms of emulated latency)
  const pid_t other = l53_start({"run", "--preset", "tiny", "--steps", "300", "--network-latency", "300000000", "-o", live},
                                dir, dir / "other_out.txt", dir / "other_err.txt");
  const auto w0 = std::chrono::steady_clock::now();
  while (!fs::exists(live) && l53_seconds_since(w0) < 30) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(fs::exists(live)) << l53_slurp(dir / "other_err.txt");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its writer holds the file's lock
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = ts::run_cli(EMBEDSCOPE_CLI, "launch -n 3 run --preset tiny --steps 3 --force-overwrite --json -o " +
                                                 (dir / "lv.db").string(), dir);
  const double wall = l53_seconds_since(t0);
  kill(other, SIGKILL);
  waitpid(other, nullptr, 0);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_LT(wall, 10.0) << r.err;
  const std::string reason = live + ": not overwritten: a run (pid " + std::to_string(other) + ") is still writing it";
  EXPECT_NE(r.err.find("[rank 1] error: " + reason), std::string::npos) << r.err;
  for (int k : {0, 2})
    EXPECT_NE(r.err.find("[rank " + std::to_string(k) + "] error: rendezvous file://"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1 refused its input before the rendezvous (this is rank 0): " + reason), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("rank 1 refused its input before the rendezvous (this is rank 2): " + reason), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("embedscope launch: rank 1 wrote no session; " + live + " was there before this run (not read)\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("reading rank 1's session"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error: launch: a rank refused its input (above)\n"), std::string::npos) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["ended"], "bad_input");
  ASSERT_EQ(j["ranks"].size(), 3u);
  for (const auto& rk : j["ranks"]) {
    EXPECT_EQ(rk["ended"], "exit 2") << rk.dump();
    EXPECT_TRUE(rk["session"].is_null()) << rk.dump();
    EXPECT_FALSE(rk.contains("from_session")) << rk.dump();
  }
  EXPECT_FALSE(fs::exists(dir / "lv.db"));
}

// The same for a name that is not a regular file (a directory): refused by the rank with
// --force-overwrite, its peers end at once, and launch neither reads nor merges it.
TEST(Launch53, ADirectoryAtARanksSessionNameIsRefusedAndNotRead) {
  const fs::path dir = l53_scratch("dir");
  fs::create_directories(dir / "d.rank1.db");
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = ts::run_cli(EMBEDSCOPE_CLI, "launch -n 3 run --preset tiny --steps 3 --force-overwrite -o " +
                                                 (dir / "d.db").string(), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_LT(l53_seconds_since(t0), 10.0) << r.err;
  const std::string reason = (dir / "d.rank1.db").string() + ": exists and is not a regular file\n";
  EXPECT_NE(r.err.find("[rank 1] error: " + reason), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1 refused its input before the rendezvous (this is rank 0): " + reason), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("embedscope launch: rank 1 wrote no session; " + (dir / "d.rank1.db").string() +
                       " was there before this run (not read)\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("reading rank 1's session"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_directory(dir / "d.rank1.db"));
  EXPECT_FALSE(fs::exists(dir / "d.db"));
}

// F1 under mpirun: every rank's session file is left from an earlier run, so every rank refuses;
// rank 0 used to merge those leftovers into the merged name as if this run had written them.
TEST(Launch53, MpirunNeverMergesSessionsItsRanksDidNotWrite) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "mpirun is not installed (.ci/setup installs openmpi-bin)";
  const fs::path dir = l53_scratch("mpi");
  fs::create_directories(dir / "rv");
  const auto first = ts::run_cli(EMBEDSCOPE_CLI, "launch -n 2 run --preset tiny --steps 2 -o " + (dir / "m.db").string(), dir);
  ASSERT_EQ(first.code, 0) << first.err;
  fs::remove(dir / "m.db");  // the rank sessions stay: m.rank0.db, m.rank1.db
  const auto r = ts::run_cli("EMBEDSCOPE_RENDEZVOUS_DIR=" + (dir / "rv").string() +
                                 " timeout 120 mpirun --oversubscribe --allow-run-as-root -n 2 " + EMBEDSCOPE_CLI,
                             "run --preset tiny --steps 2 -o " + (dir / "m.rank{rank}.db").string(), dir);
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.code, 124) << "timed out\n" << r.err;
  for (int k : {0, 1})
    EXPECT_NE(r.err.find("error: " + (dir / ("m.rank" + std::to_string(k) + ".db")).string() + kExists), std::string::npos)
        << r.err;
  EXPECT_NE(r.err.find("embedscope run (rank 0): a rank refused its input; nothing merged"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "m.db")) << r.err;
}

// F8: a second Ctrl-C to launch stops every rank at once (each exits 130, as `run` does); launch
// exits 130 too, not 1, and says so; --json: ended "cancelled", stopped_at_once. The rank sessions
// (cancelled by the user) are still merged. A step here has several collectives of 1 s latency,
// so the ranks are still in the step they cancel after when the second Ctrl-C comes 0.8 s later.
TEST(Launch53, ASecondCtrlCStopsLaunchAtOnceWithExit130AsRun) {
  const fs::path dir = l53_scratch("ctrlc");
  const std::string db = (dir / "int4.db").string();
  ts::SignalWhen second("embedscope launch: forwarding Ctrl-C to every rank");
  second.delay_ms = 800;
  const auto t0 = std::chrono::steady_clock::now();
  const auto run = ts::run_signalled(EMBEDSCOPE_CLI,
                                     {"launch", "-n", "3", "run", "--preset", "tiny", "--steps", "300", "--warmup-steps",
                                      "0", "--network-latency", "1000000000", "--json", "-o", db},
                                     SIGINT, {ts::SignalWhen("[rank 2] step 1/"), second},
                                     ts::ChildIo(2, (dir / "out.txt").string()));
  const std::string& err = run.piped;
  ASSERT_EQ(run.sent, 2) << err;
  ASSERT_TRUE(WIFEXITED(run.status)) << err;
  EXPECT_EQ(WEXITSTATUS(run.status), 130) << err;
  EXPECT_LT(l53_seconds_since(t0), 60.0);
  for (int k = 0; k < 3; ++k)
    EXPECT_NE(err.find("[rank " + std::to_string(k) + "] stopped at once; session: " +
                       (dir / ("int4.rank" + std::to_string(k) + ".db")).string() + " (recorded as cancelled by the user)"),
              std::string::npos)
        << err;
  EXPECT_NE(err.find("embedscope launch: the ranks were stopped at once by a second Ctrl-C (exit 130, as run's; their "
                     "sessions read cancelled by the user)\n"),
            std::string::npos)
      << err;
  const json j = json::parse(l53_slurp(dir / "out.txt"));
  EXPECT_EQ(j["ended"], "cancelled");
  EXPECT_EQ(j["stopped_at_once"], true);
  EXPECT_EQ(j["session"], db);
  ASSERT_EQ(j["ranks"].size(), 3u);
  for (const auto& rk : j["ranks"]) EXPECT_EQ(rk["ended"], "exit 130") << rk.dump();
  EXPECT_EQ(embedscope::sessions::SessionReader(db).status(), "cancelled");
}
