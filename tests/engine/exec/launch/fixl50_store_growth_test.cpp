// tester50 F7: the file:// rendezvous store (what `launch` uses) kept every arrival key of every
// collective until the run ended, ~12 files a step (1.3 GiB / ~400,000 files after 10 minutes;
// 4,262 files at the end of a 200-step run of the tiny preset on 2 ranks), and a killed run left
// them all behind. Each rank now removes its own keys of a group's earlier collectives once it has
// seen every member's key of the latest one (comm/gloo/process_group.cpp), so the folder holds a
// number of files that does not depend on the number of steps. F12: launch reads the workload
// file once before starting any rank. F2: two SIGTERMs in a row to launch (coreutils timeout's
// two copies) are forwarded as one.
//
// The bound, by hand, for 2 ranks of the tiny preset (one Gloo group, "world"): before the first
// step each rank has set 5 keys (its claim, its digest, its clock key; Gloo's connect: its host
// name key and its address key): 10 files. During the steps each rank holds, per group, its
// arrival key of the latest collective and at most one earlier one not yet released, and at
// most one temporary file of a key being set (FileStore writes ".NAME" and renames it): 3 more
// per rank. The wait before step 0 (its own group, "setup") adds per rank Gloo's connect keys
// (host name, address) and the arrival key of its one collective, which no later collective
// releases: 3 more per rank. So at most 10 + 2 x 3 + 2 x 3 = 22 files, for 20 steps as for 200
// (measured: 20 at most).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/signal_child.h"

namespace {
namespace fs = std::filesystem;

constexpr size_t kFixl50MaxStoreFiles = 22;  // the bound of the header comment

fs::path fixl50s_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("es_fixl50_store_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d / "rdv");
  return d;
}

size_t fixl50s_files(const fs::path& dir) {
  std::error_code ec;
  size_t n = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

// Starts rank `rank` of 2 of the tiny preset for `steps` measured steps, over the file store in
// dir/rdv; its output to /dev/null, its session dir/r{rank}.db.
pid_t fixl50s_start_rank(const fs::path& dir, int rank, const std::string& steps) {
  const std::vector<std::string> args{"run", "--preset", "tiny", "--steps", steps, "--warmup-steps", "0",
                                      "--rank", std::to_string(rank), "--world-size", "2",
                                      "--rendezvous", "file://" + (dir / "rdv").string(), "--run-id", "growth",
                                      "-o", (dir / "r{rank}.db").string()};
  const pid_t child = fork();
  if (child == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    std::vector<char*> argv{const_cast<char*>(EMBEDSCOPE_CLI)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(EMBEDSCOPE_CLI, argv.data());
    _exit(127);
  }
  return child;
}

struct Fixl50sRun {
  size_t most_files = 0;  // the most files seen in the store folder while a rank ran
  int status[2] = {0, 0};
};

// Two ranks of `steps` steps to their end, the store folder's files counted between (every ms).
Fixl50sRun fixl50s_two_ranks(const fs::path& dir, int steps) {
  Fixl50sRun r;
  pid_t pid[2] = {fixl50s_start_rank(dir, 0, std::to_string(steps)), fixl50s_start_rank(dir, 1, std::to_string(steps))};
  bool running[2] = {pid[0] > 0, pid[1] > 0};
  while (running[0] || running[1]) {
    r.most_files = std::max(r.most_files, fixl50s_files(dir / "rdv"));
    for (int i = 0; i < 2; ++i)
      if (running[i] && waitpid(pid[i], &r.status[i], WNOHANG) == pid[i]) running[i] = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return r;
}

int64_t fixl50s_steps(const std::string& db) {
  const embedscope::sessions::SessionReader s(db);
  int64_t n = 0;
  for (const auto& st : s.steps()) n += st.rank == 0 ? 1 : 0;
  return n;
}
}  // namespace

TEST(Fixl50StoreGrowth, TheStoreFolderHoldsAtMostTheSameFewFilesFor20And200Steps) {
  for (const int steps : {20, 200}) {
    const fs::path dir = fixl50s_scratch("steps" + std::to_string(steps));
    const Fixl50sRun r = fixl50s_two_ranks(dir, steps);
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(WIFEXITED(r.status[i])) << "rank " << i << ", " << steps << " steps";
      EXPECT_EQ(WEXITSTATUS(r.status[i]), 0) << "rank " << i << ", " << steps << " steps";
    }
    EXPECT_EQ(fixl50s_steps((dir / "r0.db").string()), steps);
    EXPECT_LE(r.most_files, kFixl50MaxStoreFiles) << steps << " steps";
    EXPECT_GT(r.most_files, 0u) << "the folder was never seen holding the run's keys";
    EXPECT_EQ(fixl50s_files(dir / "rdv"), 0u) << "a complete run removes its keys";  // as before
    fs::remove_all(dir);
  }
}

// Both ranks killed (SIGKILL: nothing cleans up) after 60 or more steps: what is left is within
// the same bound (before: about 12 files a step).
TEST(Fixl50StoreGrowth, AKilledRunLeavesAtMostTheBound) {
  const fs::path dir = fixl50s_scratch("killed");
  const pid_t pid[2] = {fixl50s_start_rank(dir, 0, "1000000"), fixl50s_start_rank(dir, 1, "1000000")};
  ASSERT_GT(pid[0], 0);
  ASSERT_GT(pid[1], 0);
  int64_t seen = 0;
  for (int i = 0; i < 1200 && seen < 60; ++i) {  // up to 2 minutes on a loaded machine
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    try {
      seen = fs::exists(dir / "r0.db") ? fixl50s_steps((dir / "r0.db").string()) : 0;
    } catch (const std::exception&) {  // the session being created
    }
  }
  for (const pid_t p : pid) kill(p, SIGKILL);
  for (const pid_t p : pid) waitpid(p, nullptr, 0);
  ASSERT_GE(seen, 60) << "the ranks did not get to 60 steps";
  EXPECT_LE(fixl50s_files(dir / "rdv"), kFixl50MaxStoreFiles);
  fs::remove_all(dir);
}

namespace {
// The tiny preset's workload file, copied to dir/tiny.json.
std::string fixl50s_workload(const fs::path& dir) {
  const fs::path f = dir / "tiny.json";
  fs::copy_file(std::string(EMBEDSCOPE_TEST_DATA) + "/../../resources/workloads/tiny.json", f,
                fs::copy_options::overwrite_existing);
  return f.string();
}
}  // namespace

// F12: a missing or broken workload file is refused by launch itself, before any rank or
// rendezvous, with the single run's error line (exit 2).
TEST(Fixl50LaunchWorkloadCheck, AMissingOrBrokenWorkloadIsRefusedOnceBeforeAnyRankStarts) {
  const fs::path dir = fixl50s_scratch("check");
  const std::string cli = EMBEDSCOPE_CLI;
  const std::string missing = (dir / "nonexist.json").string();
  auto r = embedscope::test_support::run_merged(cli + " launch -n 2 run " + missing + " -o " + (dir / "m.db").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out, "error: " + missing + ": cannot open: No such file or directory\n");  // nothing else: no rank
  const fs::path broken = dir / "broken.json";
  std::ofstream(broken) << R"({"name": "b", "tables": [)";
  const auto single = embedscope::test_support::run_merged(cli + " run " + broken.string() + " -o " + (dir / "s.db").string());
  ASSERT_EQ(single.code, 2) << single.out;
  ASSERT_EQ(single.out.rfind("error: " + broken.string() + ": ", 0), 0u) << single.out;
  r = embedscope::test_support::run_merged(cli + " launch -n 2 run " + broken.string() + " -o " + (dir / "b.db").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out, single.out);  // the same error line, once
  EXPECT_FALSE(fs::exists(dir / "b.rank0.db"));
  // a good file, an option's value before it: launch reads the file, not the value
  const std::string w = fixl50s_workload(dir);
  r = embedscope::test_support::run_merged(cli + " launch -n 2 run --steps 2 " + w + " -o " + (dir / "g.db").string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir / "g.db")) << r.out;
  fs::remove_all(dir);
}

// F2 for launch: `timeout` sends SIGTERM to launch and to launch's process group (the ranks are in
// groups of their own): launch forwards one SIGTERM, not two, and the ranks end cancelled after
// their current step (exit 0), none stopped at once.
TEST(Fixl50LaunchDoubleSigterm, TwoSigtermsInARowAreForwardedOnce) {
  const fs::path dir = fixl50s_scratch("term");
  const std::string db = (dir / "t.db").string();
  const auto stop = embedscope::test_support::stop_as_timeout_does(
      EMBEDSCOPE_CLI,
      {"launch", "-n", "2", "run", "--preset", "tiny", "--steps", "1000000", "--warmup-steps", "0", "-o", db},
      [](const std::string& line) { return line.find("[rank 0] step ") != std::string::npos; });
  const int status = stop.status;
  const bool sent = stop.sent;
  const std::string& err = stop.err;
  ASSERT_TRUE(sent) << err;
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  size_t forwards = 0;
  for (size_t at = 0; (at = err.find("forwarding SIGTERM to every rank", at)) != std::string::npos; ++at) ++forwards;
  EXPECT_EQ(forwards, 1u) << err;
  EXPECT_EQ(err.find("stopped at once"), std::string::npos) << err;
  const embedscope::sessions::SessionReader merged(db);
  EXPECT_EQ(merged.status(), "cancelled");
  fs::remove_all(dir);
}
