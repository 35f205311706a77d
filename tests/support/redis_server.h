#pragma once
// A redis-server of the test's own on a free loopback port (127.0.0.1 only), stopped when the
// object goes. Tests skip (GTEST_SKIP with the reason) where redis-server is not installed
// (.ci/setup installs it). Header-only.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace embedscope::test_support {

class RedisServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/redis-server";
  static bool installed() { return access(kBinary, X_OK) == 0; }

  /// Starts the server; running() says whether it accepts connections within 10 s.
  RedisServer() {
    port_ = free_port();
    if (port_ <= 0 || !installed()) return;
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      execl(kBinary, kBinary, "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--loglevel", "warning", static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline && !(running_ = connects()))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ~RedisServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  bool running() const { return running_; }
  int port() const { return port_; }
  /// "redis://127.0.0.1:PORT/prefix"
  std::string url(const std::string& prefix) const {
    return "redis://127.0.0.1:" + std::to_string(port_) + "/" + prefix;
  }

  /// A loopback port nothing listened on a moment ago (bind to port 0, read it back, close).
  static int free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    close(fd);
    return port;
  }

 private:
  bool connects() const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port_));
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    return ok;
  }
  int port_ = -1;
  pid_t pid_ = -1;
  bool running_ = false;
};

}  // namespace embedscope::test_support
