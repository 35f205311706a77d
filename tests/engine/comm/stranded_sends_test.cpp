// comm/gloo/stranded_sends.h: a send queued on a Gloo TCP pair whose peer dies while it is being
// written fails at once with the pair's error, not after the whole timeout (tester36 D8, which
// failed in CI under load: "Timed out waiting 20000ms for send operation to complete").
//
// The peer is a real process - this executable again (StrandedSendsChild.*, which skips unless
// a StrandedSends test started it): it posts a receive of 64 MiB, so that this side's send is
// queued for writing, then stops itself (SIGSTOP: it reads nothing more, the socket buffers fill)
// and is killed (SIGKILL: the kernel resets the connection, as for tester36's killed rank).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "comm/gloo/stranded_sends.h"

namespace fs = std::filesystem;
using embedscope::engine::StrandedSendWatch;

namespace {

constexpr size_t kStrandedBytes = 64u << 20;  // far beyond loopback's socket buffers
constexpr uint64_t kStrandedSlot = 7;

std::shared_ptr<gloo::rendezvous::Context> stranded_connect(int rank, const fs::path& dir,
                                                            std::chrono::milliseconds timeout) {
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, 2);
  ctx->setTimeout(timeout);
  gloo::rendezvous::FileStore store(dir.string());
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  ctx->connectFullMesh(store, device);
  return ctx;
}

struct StrandedOutcome {
  std::string error;     // what waitSend threw ("" if it returned)
  double seconds = 0.0;  // how long waitSend took after the peer's death
};

// Starts the peer (rank 1, this executable's child test), queues a 64 MiB send to it once it has
// posted its receive and stopped, kills it, and waits for the send with `timeout`; the watch
// runs around the wait when `watched`.
StrandedOutcome stranded_send_to_a_killed_peer(const fs::path& dir, std::chrono::milliseconds timeout, bool watched) {
  fs::create_directories(dir);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string env = "ES_STRANDED_DIR=" + dir.string();
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(const_cast<char*>(env.c_str()));
  envp.push_back(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    execle(self.c_str(), self.c_str(), "--gtest_filter=StrandedSendsChild.PostsAReceiveAndStops", nullptr, envp.data());
    _exit(127);
  }
  EXPECT_GT(child, 0);
  auto ctx = stranded_connect(0, dir, timeout);
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, WUNTRACED), child);
  EXPECT_TRUE(WIFSTOPPED(status)) << "the peer ended before it stopped (status " << status << ")";
  std::vector<char> data(kStrandedBytes, 'x');
  auto buf = ctx->createUnboundBuffer(data.data(), data.size());
  buf->send(1, kStrandedSlot);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // queued for writing, the socket buffers full
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  StrandedSendWatch watch(ctx);
  if (watched) watch.begin();
  StrandedOutcome out;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    buf->waitSend(timeout);
  } catch (const gloo::IoException& e) {
    out.error = e.what();
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  watch.end();
  if (watched) {
    EXPECT_GE(watch.woken(), 1);
  }
  return out;
}

}  // namespace

TEST(StrandedSends, ASendQueuedToAKilledPeerFailsAtOnceWithTheConnectionError) {
  signal(SIGPIPE, SIG_IGN);  // as run_training does: a write to the reset socket fails with EPIPE
  const auto out = stranded_send_to_a_killed_peer(fs::temp_directory_path() / "stranded_watched",
                                                  std::chrono::milliseconds(10000), true);
  EXPECT_LT(out.seconds, 2.0) << out.error;
  EXPECT_FALSE(out.error.empty());
  EXPECT_EQ(out.error.find("Timed out"), std::string::npos) << out.error;
}

// Why the watch exists: without it the same send waits out its timeout (Gloo at 5b14351). If
// this fails, Gloo now wakes these sends itself and the watch may go.
TEST(StrandedSends, WithoutTheWatchGlooLetsTheSendTimeOut) {
  signal(SIGPIPE, SIG_IGN);
  const auto out = stranded_send_to_a_killed_peer(fs::temp_directory_path() / "stranded_unwatched",
                                                  std::chrono::milliseconds(1000), false);
  EXPECT_NE(out.error.find("Timed out waiting 1000ms for send operation to complete"), std::string::npos) << out.error;
  EXPECT_GE(out.seconds, 0.9);
}

// The peer started by the tests above: rank 1 posts the receive, then stops until killed.
TEST(StrandedSendsChild, PostsAReceiveAndStops) {
  const char* dir = std::getenv("ES_STRANDED_DIR");
  if (dir == nullptr) GTEST_SKIP() << "run by StrandedSends.* as their peer process";
  auto ctx = stranded_connect(1, dir, std::chrono::milliseconds(10000));
  std::vector<char> data(kStrandedBytes);
  auto buf = ctx->createUnboundBuffer(data.data(), data.size());
  buf->recv(0, kStrandedSlot);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the receive's notice reaches rank 0
  raise(SIGSTOP);
  buf->waitRecv();  // never reached: killed while stopped
}
