// launch51 (a tester's leftover of tester50 F7): the Redis rendezvous store (gloo's RedisStore)
// kept every arrival key of every collective until the server went away, ~12 keys a step, and
// every other key of a complete run: gloo's store has no delete. The run's keys are now removed
// with DEL on the store's own hiredis connection, as the file store's files are
// (fixl50_store_growth_test): each rank its own arrival keys of a group's earlier collectives
// once every member's key of the latest one is there, and after a complete run the rest.
//
// The bound, by hand, for 2 ranks of the tiny preset (one Gloo group, "world"): before the first
// step each rank has set 5 keys (its claim, its digest, its clock key; Gloo's connect: its host
// name key and its address key): 10 keys. During the steps each rank holds its arrival key of
// the latest collective and at most one earlier one not yet released: 2 more per rank. At the
// end each rank sets its done key before it removes its own keys: 2 more. The wait before step 0
// (its own group, "setup") adds per rank Gloo's connect keys (host name, address) and the arrival
// key of its one collective, which no later collective releases: 3 more per rank. So at most
// 10 + 2 x 2 + 2 + 2 x 3 = 22 keys, for 20 steps as for 200 (Redis writes no temporary keys, the
// file store's ".NAME" files; the same bound holds; measured: 20 at most).
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "embedscope/sessions/store/session.h"
#include "support/redis_server.h"

namespace {
namespace fs = std::filesystem;

constexpr int64_t kLaunch51MaxRedisKeys = 22;  // the bound of the header comment

// One connection to the test's Redis server that asks DBSIZE (RESP: "*1\r\n$6\r\nDBSIZE\r\n",
// answered ":N\r\n"); -1 when the server did not answer.
class Launch51DbSize {
 public:
  explicit Launch51DbSize(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~Launch51DbSize() {
    if (fd_ >= 0) close(fd_);
  }
  Launch51DbSize(const Launch51DbSize&) = delete;
  Launch51DbSize& operator=(const Launch51DbSize&) = delete;
  int64_t operator()() {
    static const char kAsk[] = "*1\r\n$6\r\nDBSIZE\r\n";
    if (fd_ < 0 || write(fd_, kAsk, sizeof kAsk - 1) != static_cast<ssize_t>(sizeof kAsk - 1)) return -1;
    std::string line;
    char c = 0;
    while (read(fd_, &c, 1) == 1) {
      if (c == '\n') break;
      line += c;
    }
    if (line.size() < 2 || line[0] != ':') return -1;
    return std::stoll(line.substr(1));
  }

 private:
  int fd_ = -1;
};

fs::path launch51r_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("es_launch51_redis_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Starts rank `rank` of 2 of the tiny preset for `steps` measured steps over `url`; its output
// to /dev/null, its session dir/r{rank}.db.
pid_t launch51r_start_rank(const fs::path& dir, const std::string& url, int rank, int steps) {
  const std::vector<std::string> args{"run", "--preset", "tiny", "--steps", std::to_string(steps), "--warmup-steps", "0",
                                      "--rank", std::to_string(rank), "--world-size", "2", "--rendezvous", url,
                                      "--run-id", "growth", "-o", (dir / "r{rank}.db").string()};
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

int64_t launch51r_steps(const std::string& db) {
  const embedscope::sessions::SessionReader s(db);
  int64_t n = 0;
  for (const auto& st : s.steps()) n += st.rank == 0 ? 1 : 0;
  return n;
}
}  // namespace

TEST(Launch51RedisGrowth, TheRedisStoreHoldsAtMostTheSameFewKeysFor20And200StepsAndNoneAfter) {
  if (!embedscope::test_support::RedisServer::installed())
    GTEST_SKIP() << "redis-server is not installed (Debian package redis-server; .ci/setup installs it)";
  for (const int steps : {20, 200}) {
    SCOPED_TRACE(std::to_string(steps) + " steps");
    const embedscope::test_support::RedisServer server;  // a fresh database for each run
    ASSERT_TRUE(server.running()) << "redis-server did not start";
    Launch51DbSize dbsize(server.port());
    ASSERT_EQ(dbsize(), 0);
    const fs::path dir = launch51r_scratch("steps" + std::to_string(steps));
    const std::string url = server.url("es");
    pid_t pid[2] = {launch51r_start_rank(dir, url, 0, steps), launch51r_start_rank(dir, url, 1, steps)};
    int status[2] = {0, 0};
    bool running[2] = {pid[0] > 0, pid[1] > 0};
    int64_t most = 0;  // the most keys seen while a rank ran (every ms)
    while (running[0] || running[1]) {
      most = std::max(most, dbsize());
      for (int i = 0; i < 2; ++i)
        if (running[i] && waitpid(pid[i], &status[i], WNOHANG) == pid[i]) running[i] = false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(WIFEXITED(status[i])) << "rank " << i;
      EXPECT_EQ(WEXITSTATUS(status[i]), 0) << "rank " << i;
    }
    EXPECT_EQ(launch51r_steps((dir / "r0.db").string()), steps);
    EXPECT_LE(most, kLaunch51MaxRedisKeys);  // before: about 12 more a step (2,400 after 200)
    EXPECT_GT(most, 0) << "the database was never seen holding the run's keys";
    EXPECT_EQ(dbsize(), 0) << "a complete run removes its keys";  // before: every key stayed
    fs::remove_all(dir);
  }
}
