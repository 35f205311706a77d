// One rank per process through the CLI: `embedscope run --rank R --world-size N --rendezvous`,
// `embedscope launch -n N run ...` against the threaded run of the same workload, bad input
// (exit 2, named), and a rank killed with SIGKILL mid-run.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/redis_server.h"

namespace fs = std::filesystem;
using nlohmann::json;
using embedscope::sessions::SessionReader;

namespace {
fs::path scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_launch_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
using Result = embedscope::test_support::CliResult;
Result cli(const std::string& args) { return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, scratch()); }
std::string s(const fs::path& p) { return p.string(); }

// The tiny preset as a file, with its collective timeout set to `timeout_ms`.
std::string tiny_file(const std::string& name, int64_t timeout_ms) {
  std::ifstream in(std::string(EMBEDSCOPE_TEST_DATA) + "/../../resources/workloads/tiny.json");
  json j = json::parse(in);
  j["collective_timeout_ms"] = timeout_ms;
  const auto p = scratch() / name;
  std::ofstream(p) << j.dump();
  return s(p);
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Starts `embedscope args` with stdout and stderr to files and `env` ("NAME=VALUE") added to
// the environment; returns the pid.
pid_t start(const std::vector<std::string>& args, const fs::path& out, const fs::path& err,
            const std::vector<std::string>& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
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

// Waits for `pid` at most `limit`; the exit code, -signal, or 999 when it did not end (then killed).
int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return 999;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}
}  // namespace

// The acceptance check of `launch`: 4 processes give the 4 threads' losses, per-rank load
// counters, bytes and plan rows, in one merged session.
TEST(LaunchCli, FourProcessesGiveTheFourThreadsLossesAndTables) {
  const std::string threads_db = s(scratch() / "threads.db"), merged = s(scratch() / "launched.db");
  const std::string args = "--preset tiny --sharding row_wise --steps 3 --warmup-steps 1";
  Result t = cli("run " + args + " --devices 4 --json -o " + threads_db);
  ASSERT_EQ(t.code, 0) << t.err;
  Result l = cli("launch -n 4 run " + args + " --json -o " + merged);
  ASSERT_EQ(l.code, 0) << l.err;
  const json tj = json::parse(t.out), lj = json::parse(l.out);
  EXPECT_EQ(lj["ended"], "complete");
  EXPECT_EQ(lj["session"], merged);
  ASSERT_EQ(lj["ranks"].size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const json& rk = lj["ranks"][static_cast<size_t>(r)];
    EXPECT_EQ(rk["ended"], "exit 0");
    EXPECT_EQ(rk["result"]["process_rank"], r);
    EXPECT_EQ(rk["result"]["loss"], tj["loss"]) << "rank " << r;
    EXPECT_EQ(rk["result"]["ranks"][0]["bytes_sent"], tj["ranks"][static_cast<size_t>(r)]["bytes_sent"]);
    EXPECT_EQ(rk["result"]["ranks"][0]["ids_looked_up"], tj["ranks"][static_cast<size_t>(r)]["ids_looked_up"]);
    EXPECT_EQ(rk["session"], s(scratch() / ("launched.rank" + std::to_string(r) + ".db")));
  }
  // the stderr of every rank streamed, prefixed
  for (int r = 0; r < 4; ++r) EXPECT_NE(l.err.find("[rank " + std::to_string(r) + "] step 3/3"), std::string::npos) << l.err;
  const SessionReader a(threads_db), b(merged);
  EXPECT_EQ(b.status(), "complete");
  EXPECT_EQ(b.meta("world_size"), "4");
  ASSERT_EQ(b.ranks().size(), 4u);
  auto losses = [](const SessionReader& x) {
    std::map<std::pair<int64_t, int32_t>, double> m;
    for (const auto& st : x.steps()) m[{st.step, st.rank}] = st.loss;
    return m;
  };
  EXPECT_EQ(losses(a), losses(b));
  EXPECT_EQ(losses(b).size(), 16u);  // (1 warmup + 3) steps x 4 ranks
  auto load = [](const SessionReader& x) {
    std::map<std::tuple<int64_t, int32_t, int32_t, int32_t>, std::pair<int64_t, int64_t>> m;
    for (const auto& c : x.load()) m[{c.step, c.rank, c.table, c.shard}] = {c.ids, c.unique_ids};
    return m;
  };
  EXPECT_EQ(load(a), load(b));
  EXPECT_FALSE(load(b).empty());
  auto bytes = [](const SessionReader& x) {
    std::map<std::tuple<int32_t, std::string, uint64_t>, std::pair<int64_t, int64_t>> m;
    for (const auto& c : x.collectives()) m[{c.rank, c.group, c.sequence}] = {c.bytes_sent, c.bytes_received};
    return m;
  };
  EXPECT_EQ(bytes(a), bytes(b));
  ASSERT_EQ(a.shards().size(), b.shards().size());
  for (size_t i = 0; i < a.shards().size(); ++i) {
    EXPECT_EQ(a.shards()[i].rank, b.shards()[i].rank);
    EXPECT_EQ(a.shards()[i].num_rows, b.shards()[i].num_rows);
  }
  const json from = json::parse(b.meta("merged_from_json"));
  ASSERT_EQ(from.size(), 4u);
  for (const auto& f : from) EXPECT_EQ(f["ended"], "complete");
  for (int r = 0; r < 4; ++r) {
    const SessionReader one(s(scratch() / ("launched.rank" + std::to_string(r) + ".db")));
    EXPECT_EQ(one.meta("process_rank"), std::to_string(r));
    EXPECT_EQ(one.meta("run_digest").size(), 16u);
    EXPECT_EQ(one.meta("rendezvous").rfind("file:///", 0), 0u);
  }
}

TEST(LaunchCli, BadInputIsExitTwoAndNamed) {
  const std::string dir = s(scratch() / "bad_store");
  fs::create_directories(dir);
  Result r = cli("run --preset tiny --rank 4 --world-size 4 --rendezvous file://" + dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: --rank 4: not below the world size 4 (ranks are 0..3)"), std::string::npos) << r.err;
  r = cli("run --preset tiny --rank 0 --rendezvous file://" + dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: --rank needs --world-size (the number of processes)"), std::string::npos) << r.err;
  r = cli("run --preset tiny --rank 0 --world-size 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: rank 0 of 2 (from --rank): give --rendezvous file:///shared/dir"), std::string::npos) << r.err;
  r = cli("run --preset tiny --rank 0 --world-size 2 --rendezvous file://" + dir + " -o one.db");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: -o one.db: every rank writes its own session; put {rank} in the name"), std::string::npos)
      << r.err;
  r = cli("run --preset tiny --devices 3 --rank 0 --world-size 2 --rendezvous file://" + dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: --devices 3 but --world-size 2"), std::string::npos) << r.err;
  r = cli("run --preset tiny --rank 0 --world-size 2 --rendezvous file://" + dir + "/nope");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  r = cli("launch -n 2 run --preset tiny --rank 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: launch: --rank is set by launch for every rank; leave it out"), std::string::npos) << r.err;
  // the environment of a launcher, in conflict
  r = embedscope::test_support::run_cli("RANK=1 WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=2 " + std::string(EMBEDSCOPE_CLI),
                                        "run --preset tiny --rendezvous file://" + dir, scratch());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: SLURM_PROCID=0 but RANK=1: the Slurm and torchrun ranks disagree; unset one"),
            std::string::npos) << r.err;
}

// A rank alone in an empty store ends within the collective timeout with the absent rank named.
TEST(LaunchCli, AnEmptyStoreTimesOutNamingTheAbsentRank) {
  const std::string dir = s(scratch() / "empty_store");
  fs::create_directories(dir);
  const std::string w = tiny_file("t_empty.json", 700);
  const auto t0 = std::chrono::steady_clock::now();
  Result r = cli("run " + w + " --steps 2 --rank 1 --world-size 2 --rendezvous file://" + dir + " -o " + s(scratch() / "e.rank{rank}.db"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("rank(s) 0 of 2 did not arrive within 700 ms (this is rank 1)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(scratch() / "e.rank1.db"));  // refused before the session existed
}

// Two processes with different workloads: both refuse (exit 2), naming the field.
TEST(LaunchCli, MismatchedWorkloadsAreRefusedByBothRanks) {
  const std::string dir = s(scratch() / "mismatch_store");
  fs::create_directories(dir);
  const auto base = std::vector<std::string>{"run", "--preset", "tiny", "--steps", "2", "--world-size", "2",
                                             "--rendezvous", "file://" + dir, "-o", s(scratch() / "mm.rank{rank}.db")};
  auto a0 = base, a1 = base;
  a0.insert(a0.end(), {"--rank", "0", "--batch-size", "8"});
  a1.insert(a1.end(), {"--rank", "1", "--batch-size", "16"});
  const pid_t p0 = start(a0, scratch() / "mm0.out", scratch() / "mm0.err");
  const pid_t p1 = start(a1, scratch() / "mm1.out", scratch() / "mm1.err");
  EXPECT_EQ(wait_for(p0, std::chrono::seconds(60)), 2);
  EXPECT_EQ(wait_for(p1, std::chrono::seconds(60)), 2);
  const std::string e0 = slurp(scratch() / "mm0.err"), e1 = slurp(scratch() / "mm1.err");
  EXPECT_NE(e0.find("rank 1's workload and plan differ from rank 0's"), std::string::npos) << e0;
  EXPECT_NE(e0.find("first at /workload/batch_size: 8 vs 16 (rank 0 vs rank 1)"), std::string::npos) << e0;
  EXPECT_NE(e1.find("first at /workload/batch_size: 16 vs 8 (rank 1 vs rank 0)"), std::string::npos) << e1;
  // the same run id again in that store: every rank is claimed already
  Result r = cli("run --preset tiny --steps 2 --world-size 2 --rank 0 --rendezvous file://" + dir + " -o " +
                 s(scratch() / "again.rank{rank}.db"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("rank 0 is claimed already by"), std::string::npos) << r.err;
}

// SIGKILL of rank 1 mid-run: ranks 0 and 2 end (exit 1) within the collective timeout with an
// error naming rank 1; every session is readable and says how its rank ended; they merge.
TEST(LaunchCli, ARankKilledMidRunIsNamedByTheOthers) {
  const std::string dir = s(scratch() / "kill_store");
  fs::create_directories(dir);
  const std::string w = tiny_file("t_kill.json", 3000);
  std::vector<pid_t> pids;
  for (int r = 0; r < 3; ++r)
    pids.push_back(start({"run", w, "--steps", "100000", "--world-size", "3", "--rank", std::to_string(r), "--rendezvous",
                          "file://" + dir, "--json", "-o", s(scratch() / "k.rank{rank}.db")},
                         scratch() / ("k" + std::to_string(r) + ".out"), scratch() / ("k" + std::to_string(r) + ".err")));
  struct KillAll {  // whatever happens below, no process outlives the test
    std::vector<pid_t>& p;
    ~KillAll() {
      for (pid_t x : p) kill(x, SIGKILL), waitpid(x, nullptr, WNOHANG);
    }
  } guard{pids};
  // until rank 1 has run steps (its first progress line, after 2 s when stderr is no terminal)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (slurp(scratch() / "k1.err").find("/100000") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_NE(slurp(scratch() / "k1.err").find("/100000"), std::string::npos) << slurp(scratch() / "k1.err");
  kill(pids[1], SIGKILL);
  const auto t_kill = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_for(pids[1], std::chrono::seconds(10)), -SIGKILL);
  for (int r : {0, 2}) {
    EXPECT_EQ(wait_for(pids[static_cast<size_t>(r)], std::chrono::seconds(30)), 1) << "rank " << r;
    const json j = json::parse(slurp(scratch() / ("k" + std::to_string(r) + ".out")));
    const std::string err = j["error"].get<std::string>();
    // rank 1 alone: the other survivor reported its failure in time, whatever its collective saw
    EXPECT_NE(err.find("(rank(s) 1 reported no failure within 4000 ms: the process did not answer: it exited, was "
                       "killed, or is stopped or stalled)"),
              std::string::npos) << err;
  }
  // about twice the collective timeout of 3 s: a rank may wait out one collective, then the
  // others' failure keys (launch/executor.h)
  EXPECT_LT(std::chrono::steady_clock::now() - t_kill, std::chrono::seconds(15));
  std::vector<std::string> files;
  for (int r = 0; r < 3; ++r) {
    files.push_back(s(scratch() / ("k.rank" + std::to_string(r) + ".db")));
    const SessionReader x(files.back());
    EXPECT_NE(x.status(), "running") << r;
    EXPECT_NE(x.status(), "complete") << r;
    EXPECT_FALSE(x.steps().empty()) << r;
  }
  EXPECT_EQ(SessionReader(files[1]).status(), "crashed");  // its writer is gone
  embedscope::sessions::merge_sessions(files, s(scratch() / "k_merged.db"), {});
  const SessionReader m(s(scratch() / "k_merged.db"));
  const json from = json::parse(m.meta("merged_from_json"));
  ASSERT_EQ(from.size(), 3u);
  EXPECT_EQ(from[1]["ended"], "crashed");
  EXPECT_NE(m.status(), "complete");
}

// Two processes over a RedisStore (redis-server on a free loopback port) train as two threads.
TEST(LaunchCli, TwoProcessesOverRedisGiveTheThreadsLosses) {
  if (!embedscope::test_support::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed (.ci/setup installs it)";
  embedscope::test_support::RedisServer redis;
  ASSERT_TRUE(redis.running()) << "redis-server did not start on port " << redis.port();
  Result t = cli("run --preset tiny --steps 3 --devices 2 --json -o " + s(scratch() / "rthreads.db"));
  ASSERT_EQ(t.code, 0) << t.err;
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r)
    pids.push_back(start({"run", "--preset", "tiny", "--steps", "3", "--world-size", "2", "--rank", std::to_string(r),
                          "--rendezvous", redis.url("cli"), "--run-id", "redis-test", "--json", "-o",
                          s(scratch() / "r.rank{rank}.db")},
                         scratch() / ("r" + std::to_string(r) + ".out"), scratch() / ("r" + std::to_string(r) + ".err")));
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(wait_for(pids[static_cast<size_t>(r)], std::chrono::seconds(60)), 0) << slurp(scratch() / ("r" + std::to_string(r) + ".err"));
    const json j = json::parse(slurp(scratch() / ("r" + std::to_string(r) + ".out")));
    EXPECT_EQ(j["loss"], json::parse(t.out)["loss"]) << "rank " << r;
    const SessionReader x(s(scratch() / ("r.rank" + std::to_string(r) + ".db")));
    EXPECT_EQ(x.meta("rendezvous"), redis.url("cli"));
  }
}

// Slurm's variables (as srun sets them) give rank, world size and run id; no --rank needed.
TEST(LaunchCli, SlurmVariablesGiveRankWorldAndRunId) {
  const std::string dir = s(scratch() / "slurm_store");
  fs::create_directories(dir);
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r)
    pids.push_back(start({"run", "--preset", "tiny", "--steps", "2", "--rendezvous", "file://" + dir, "--json", "-o",
                          s(scratch() / "slurm.rank{rank}.db")},
                         scratch() / ("s" + std::to_string(r) + ".out"), scratch() / ("s" + std::to_string(r) + ".err"),
                         {"SLURM_PROCID=" + std::to_string(r), "SLURM_NTASKS=2", "SLURM_LOCALID=" + std::to_string(r),
                          "SLURM_NODEID=0", "SLURM_JOB_ID=77", "SLURM_STEP_ID=0"}));
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(wait_for(pids[static_cast<size_t>(r)], std::chrono::seconds(60)), 0)
        << slurp(scratch() / ("s" + std::to_string(r) + ".err"));
    EXPECT_NE(slurp(scratch() / ("s" + std::to_string(r) + ".err"))
                  .find("this process: rank " + std::to_string(r) + " of 2 (from Slurm's environment)"),
              std::string::npos);
    const SessionReader x(s(scratch() / ("slurm.rank" + std::to_string(r) + ".db")));
    EXPECT_EQ(x.meta("process_rank"), std::to_string(r));
    EXPECT_EQ(x.meta("run_id"), "slurm-77.0");
    EXPECT_EQ(x.meta("world_size"), "2");
  }
}

namespace {
// The pid of the process whose command line holds every one of `parts` (NUL-separated args).
pid_t find_process(const std::vector<std::string>& parts) {
  DIR* d = opendir("/proc");
  pid_t found = -1;
  while (dirent* e = d ? readdir(d) : nullptr) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::string cmd = slurp(fs::path("/proc") / e->d_name / "cmdline");
    bool all = !cmd.empty();
    for (const auto& p : parts) all = all && cmd.find(p) != std::string::npos;
    if (all) found = pid;
  }
  if (d) closedir(d);
  return found;
}
}  // namespace

// launch sees rank 1 die (SIGKILL) and says so in the store: the others name it at once rather
// than after their 20 s collective timeout; the merged session is written and says how each ended.
TEST(LaunchCli, LaunchNamesARankItSawDieAtOnce) {
  const std::string w = tiny_file("t_launch_kill.json", 20000);
  const std::string merged = s(scratch() / "ld.db");
  const pid_t launch = start({"launch", "-n", "3", "run", w, "--steps", "100000", "--json", "-o", merged},
                             scratch() / "ld.out", scratch() / "ld.err");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (slurp(scratch() / "ld.err").find("[rank 1] step ") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string rank1_arg = std::string("--rank") + '\0' + "1" + '\0';
  const pid_t child = find_process({"ld.rank{rank}.db", rank1_arg});
  ASSERT_GT(child, 0) << slurp(scratch() / "ld.err");
  kill(child, SIGKILL);
  const auto t_kill = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_for(launch, std::chrono::seconds(60)), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t_kill, std::chrono::seconds(15));  // not the 20 s timeout
  const json j = json::parse(slurp(scratch() / "ld.out"));
  EXPECT_EQ(j["first_death"], "rank 1 was killed by signal 9 (Killed)");
  EXPECT_EQ(j["ranks"][1]["ended"], "killed by signal 9 (Killed)");
  for (int r : {0, 2}) {
    EXPECT_EQ(j["ranks"][static_cast<size_t>(r)]["ended"], "exit 1");
    const std::string err = j["ranks"][static_cast<size_t>(r)]["result"]["error"].get<std::string>();
    EXPECT_NE(err.find("(rank 1 was killed by signal 9 (Killed) (seen by launch))"), std::string::npos) << err;
  }
  const SessionReader m(merged);
  const json from = json::parse(m.meta("merged_from_json"));
  ASSERT_EQ(from.size(), 3u);
  EXPECT_EQ(from[1]["ended"], "crashed");  // its writer is gone
  for (int r : {0, 2}) {  // a broken transport (crashed) or a send that timed out on it (hang)
    const std::string e = from[static_cast<size_t>(r)]["ended"].get<std::string>();
    EXPECT_TRUE(e == "crashed" || e == "hang") << e;
  }
}
