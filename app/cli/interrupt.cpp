#include "interrupt.h"

#include <fcntl.h>
#include <poll.h>
#include <semaphore.h>
#include <unistd.h>

#include <time.h>

#include <csignal>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace embedscope::cli {

namespace {
std::atomic<bool> g_cancel{false};
const char* g_said = "";
engine::FlightDumpRequest g_flight;
std::atomic<bool> g_flight_on{false};
sem_t g_stop_now;                          // posted by a second SIGINT / SIGTERM
std::atomic<bool> g_stop_watched{false};   // stop_at_once_with was called
std::atomic<unsigned> g_stopped_sigs{0};   // bit 1 << sig: on_stop handled a first `sig`
// per signal number: CLOCK_MONOTONIC ns of the first one on_stop took (0: none yet)
std::atomic<int64_t> g_first_ns[NSIG];

int64_t monotonic_ns() {  // clock_gettime is async-signal-safe (POSIX)
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// A copy of the first `sig` (coreutils timeout: one to the process, one to its process group),
// not a second request: it came less than kOneStopRequestMs after the first.
bool same_request(int sig, int64_t now_ns) {
  const int64_t first = g_first_ns[sig].load();
  return first != 0 && now_ns - first < int64_t{kOneStopRequestMs} * 1'000'000;
}

extern "C" void on_again(int sig) {
  if (same_request(sig, monotonic_ns())) return;  // the first request's copy: it is under way
  std::signal(sig, SIG_DFL);  // a third one ends the process at once
  if (g_stop_watched) {
    sem_post(&g_stop_now);  // async-signal-safe
  } else {
    std::raise(sig);  // async-signal-safe; blocked in this handler, delivered by the default action on return
  }
}

void request_dump(int sig) {  // async-signal-safe: two lock-free atomic stores
  if (!g_flight_on) return;
  g_flight.signal = sig;
  g_flight.count.fetch_add(1);
}

extern "C" void on_stop(int sig) {
  // The first of `sig` takes the time; another that comes before this one has re-armed the
  // signal (on another thread) is on_again's case.
  const int64_t now = monotonic_ns();
  int64_t none = 0;
  if (!g_first_ns[sig].compare_exchange_strong(none, now)) {
    on_again(sig);
    return;
  }
  request_dump(sig);
  g_cancel = true;
  g_stopped_sigs.fetch_or(1u << sig);  // lock-free: async-signal-safe
  // a second Ctrl-C (or SIGTERM), kOneStopRequestMs or more after this one, ends the process at
  // once: by the default action, or after the run's stop_at_once_with callback (on_again)
  std::signal(sig, on_again);
  [[maybe_unused]] const auto n = write(STDERR_FILENO, g_said, std::strlen(g_said));  // async-signal-safe
}

extern "C" void on_usr1(int sig) { request_dump(sig); }

sem_t g_cancel_now;  // posted by the first SIGINT / SIGTERM of cancel_at_once_with

extern "C" void on_cancel_now(int) {
  if (g_cancel.exchange(true)) return;  // the cancel is under way: nothing more to do
  [[maybe_unused]] const auto n = write(STDERR_FILENO, g_said, std::strlen(g_said));  // async-signal-safe
  sem_post(&g_cancel_now);                                                          // async-signal-safe
}
}  // namespace

void take_stop_signals_early(const char* said) {
  g_said = said;
  std::signal(SIGINT, on_stop);
  std::signal(SIGTERM, on_stop);
}

std::atomic<bool>& cancel_on_sigint(const char* said) {
  g_said = said;
  std::signal(SIGINT, on_stop);
  return g_cancel;
}

std::atomic<bool>& cancel_on_sigint_or_sigterm(const char* said) {
  std::atomic<bool>& cancel = cancel_on_sigint(said);
  std::signal(SIGTERM, on_stop);
  return cancel;
}

void cancel_at_once_with(const char* said, std::function<void()> at_cancel) {
  g_said = said;
  sem_init(&g_cancel_now, 0, 0);
  std::thread([at_cancel = std::move(at_cancel)] {
    while (sem_wait(&g_cancel_now) != 0 && errno == EINTR) {
    }
    at_cancel();  // returns only when it is too late to cancel
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }).detach();
  std::signal(SIGINT, on_cancel_now);
  std::signal(SIGTERM, on_cancel_now);
}

bool cancel_requested() { return g_cancel.load(); }

const engine::FlightDumpRequest& flight_dump_on_signals() {
  g_flight_on = true;
  std::signal(SIGTERM, on_stop);
  std::signal(SIGUSR1, on_usr1);
  return g_flight;
}

void stop_at_once_with(std::function<void()> at_stop) {
  sem_init(&g_stop_now, 0, 0);
  std::thread([at_stop = std::move(at_stop)] {
    while (sem_wait(&g_stop_now) != 0 && errno == EINTR) {
    }
    at_stop();
    _exit(130);  // as the default action's 128 + SIGINT; no destructor runs (the run is mid-step)
  }).detach();
  g_stop_watched = true;
  // A first signal that came before this call left the default action for its second one, which
  // would kill the process although "Ctrl-C again stops at once" had been printed (retest47 R2):
  // give the second to at_stop too. (The runs call this before installing on_stop, so that no
  // first signal can come before it; this makes any order right.)
  for (const int sig : {SIGINT, SIGTERM}) {
    if (!(g_stopped_sigs.load() & (1u << sig))) continue;
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_DFL) std::signal(sig, on_again);
  }
}

namespace {
std::atomic<long> g_launcher{0};           // watch_launcher's pid; 0: none
std::atomic<bool> g_launcher_closed{false};  // its pipe was seen without a reader
}  // namespace

long watch_launcher(std::atomic<bool>& cancel) {
  const char* v = std::getenv("EMBEDSCOPE_LAUNCHER_PID");
  char* end = nullptr;
  const long pid = v ? std::strtol(v, &end, 10) : 0;
  if (pid <= 0 || end == v || *end != '\0') return 0;
  g_launcher = pid;
  std::thread([&cancel] {
    pollfd p{STDERR_FILENO, 0, 0};  // POLLERR (a pipe without a reader) and POLLHUP come unasked
    while (true) {
      const int n = poll(&p, 1, -1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || (p.revents & POLLNVAL)) return;  // not a descriptor poll can watch: nothing to say
      if (p.revents & (POLLERR | POLLHUP)) break;
    }
    if (const int null = open("/dev/null", O_WRONLY); null >= 0) {  // before anything else writes
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      close(null);
    }
    g_launcher_closed = true;
    cancel = true;
  }).detach();
  return pid;
}

bool launcher_gone() {
  const long pid = g_launcher.load();
  return pid > 0 && (g_launcher_closed.load() || static_cast<long>(getppid()) != pid);
}

}  // namespace embedscope::cli
