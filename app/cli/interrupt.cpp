#include "interrupt.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace embedscope::cli {

namespace {
std::atomic<bool> g_cancel{false};
const char* g_said = "";
engine::FlightDumpRequest g_flight;
std::atomic<bool> g_flight_on{false};

void request_dump(int sig) {  // async-signal-safe: two lock-free atomic stores
  if (!g_flight_on) return;
  g_flight.signal = sig;
  g_flight.count.fetch_add(1);
}

extern "C" void on_stop(int sig) {
  request_dump(sig);
  g_cancel = true;
  std::signal(sig, SIG_DFL);  // a second Ctrl-C (or SIGTERM) ends the process at once
  [[maybe_unused]] const auto n = write(STDERR_FILENO, g_said, std::strlen(g_said));  // async-signal-safe
}

extern "C" void on_usr1(int sig) { request_dump(sig); }
}  // namespace

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

const engine::FlightDumpRequest& flight_dump_on_signals() {
  g_flight_on = true;
  std::signal(SIGTERM, on_stop);
  std::signal(SIGUSR1, on_usr1);
  return g_flight;
}

}  // namespace embedscope::cli
