#include "interrupt.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace embedscope::cli {

namespace {
std::atomic<bool> g_cancel{false};
const char* g_said = "";

extern "C" void on_sigint(int) {
  g_cancel = true;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
  [[maybe_unused]] const auto n = write(STDERR_FILENO, g_said, std::strlen(g_said));  // async-signal-safe
}
}  // namespace

std::atomic<bool>& cancel_on_sigint(const char* said) {
  g_said = said;
  std::signal(SIGINT, on_sigint);
  return g_cancel;
}

}  // namespace embedscope::cli
