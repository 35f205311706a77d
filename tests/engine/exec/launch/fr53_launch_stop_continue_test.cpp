// tester53 F4: a rank SIGSTOPped (inside a collective, almost always: a step of tiny with 2 ms
// links is mostly waiting on them) and continued after its peers' collective timeout was named by
// nobody; the flight recorder guessed "a slow link" on an unlimited-bandwidth network. Three real
// processes under `embedscope launch`, rank 2 stopped 4 s with a 300 ms timeout: the merged
// session's flight recorder names rank 2 as stalled, and neither peer. What must hold, not timings.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/flight_recorder.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;

fs::path fr53_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_fr53_stop_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string fr53_slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The pid of launch's child running `--rank R` (-1 while there is none).
pid_t fr53_rank_pid(pid_t launch, int rank) {
  const std::string children = fr53_slurp("/proc/" + std::to_string(launch) + "/task/" + std::to_string(launch) + "/children");
  std::istringstream in(children);
  for (pid_t p; in >> p;) {
    std::string cmd = fr53_slurp("/proc/" + std::to_string(p) + "/cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(" --rank " + std::to_string(rank) + " ") != std::string::npos) return p;
  }
  return -1;
}

// stdout of `cmd` (stderr joined)
std::string fr53_run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  pclose(p);
  return out;
}

}  // namespace

TEST(Fr53LaunchStopContinue, TheRankStoppedInsideACollectiveAndContinuedIsNamedAsStalled) {
  const fs::path dir = fr53_scratch();
  std::ifstream in(std::string(EMBEDSCOPE_TEST_DATA) + "/../../resources/workloads/tiny.json");
  nlohmann::json wl = nlohmann::json::parse(in);
  wl["collective_timeout_ms"] = 300;
  wl["network"] = {{"intra_node", {{"latency_ns", 2000000}}}, {"inter_node", {{"latency_ns", 2000000}}}};
  std::ofstream(dir / "t.json") << wl.dump();
  const fs::path out = dir / "launch.out", err = dir / "launch.err", db = dir / "stop.db";
  pid_t launch = fork();
  if (launch == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1), dup2(e, 2);
    const std::string w = (dir / "t.json").string(), o_db = db.string();
    std::vector<const char*> argv{EMBEDSCOPE_CLI, "launch", "-n", "3", "run", w.c_str(), "--steps", "1000000",
                                  "-o", o_db.c_str(), nullptr};
    execv(EMBEDSCOPE_CLI, const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  pid_t stopped = -1;
  struct Cleanup {  // whatever happens below, no process outlives the test, none stays stopped
    pid_t& launch;
    pid_t& stopped;
    ~Cleanup() {
      if (stopped > 0) kill(stopped, SIGCONT), kill(stopped, SIGKILL);
      if (launch > 0) kill(launch, SIGKILL), waitpid(launch, nullptr, 0);
    }
  } guard{launch, stopped};
  // until rank 2 has run steps (its first progress line through launch), a condition, bounded
  for (int i = 0; i < 3000 && fr53_slurp(err).find("[rank 2] step") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stopped = fr53_rank_pid(launch, 2);
  ASSERT_GT(stopped, 0) << fr53_slurp(err);
  ASSERT_EQ(kill(stopped, SIGSTOP), 0);
  // ranks 0 and 1 time out after 300 ms and wait at most 1.3 s for rank 2's word: 4 s is well past
  std::this_thread::sleep_for(std::chrono::seconds(4));
  ASSERT_EQ(kill(stopped, SIGCONT), 0);
  int st = 0;
  bool ended = false;
  for (int i = 0; i < 3000 && !ended; ++i) {  // bounded by 60 s, not timed
    ended = waitpid(launch, &st, WNOHANG) == launch;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string e = fr53_slurp(err);
  ASSERT_TRUE(ended) << "launch did not end: " << e;
  launch = -1;
  stopped = -1;
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1) << e;
  // rank 2's own error does not blame a peer: stopped inside a collective it says its own process
  // did not run; stopped elsewhere (or in the emulated links' hold, its collective completing late)
  // its next collective fails on the peers' closed connections
  const auto at = e.find("[rank 2] error: ");
  ASSERT_NE(at, std::string::npos) << e;
  const std::string own = e.substr(at, e.find('\n', at) - at);
  EXPECT_EQ(own.find("a peer stopped sending"), std::string::npos) << own;
  if (own.find("did not run for") != std::string::npos) {
    EXPECT_NE(own.find("this rank's own process did not run for"), std::string::npos) << own;
    EXPECT_NE(own.find("run ended hang"), std::string::npos) << own;  // its own hang, not a peer's consequence
  }
  ASSERT_TRUE(fs::exists(db)) << e;  // merged
  const embedscope::sessions::SessionReader m(db.string());
  const auto a = embedscope::sessions::analyze_flight_records(m);
  std::vector<int32_t> stalled;
  std::string findings;
  for (const auto& f : a.findings) {
    findings += f.text + "\n";
    if (f.kind == embedscope::sessions::FlightFinding::Kind::stalled) stalled.insert(stalled.end(), f.ranks.begin(), f.ranks.end());
  }
  // where it stopped decides which finding names it (inside a collective every rank failed in, in
  // the emulated links' hold of one its peers completed, before one they wait in), some say it twice;
  // every one names rank 2 alone
  std::sort(stalled.begin(), stalled.end());
  stalled.erase(std::unique(stalled.begin(), stalled.end()), stalled.end());
  EXPECT_EQ(stalled, std::vector<int32_t>{2}) << findings << a.in_flight_note << "\n" << e;
  EXPECT_EQ(a.in_flight_note.find("their transfers did not finish"), std::string::npos) << a.in_flight_note;
  // what `stats` prints: the finding, in the flight recorder's section
  const std::string stats = fr53_run(std::string(EMBEDSCOPE_CLI) + " stats " + db.string());
  // (stopped between collectives, it arrives late in the next one: the recorder defers to the hang)
  EXPECT_TRUE(stats.find("! rank 2 stalled in ") != std::string::npos ||
              stats.find("! rank 2 arrived late in ") != std::string::npos) << stats;
  EXPECT_EQ(stats.find("(a slow link"), std::string::npos) << stats;  // the note's guess ("not a slow link" is fine)
}
