#include "launch_stops.h"

#include <signal.h>

#include <fstream>
#include <string>

#include <fmt/format.h>

#include "embedscope/engine/exec/launch/rank_env.h"

namespace embedscope::cli {

bool process_stopped(pid_t pid) {
  std::ifstream f(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  std::getline(f, stat);
  const auto close = stat.rfind(')');  // the command name may hold spaces and ')'
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  return stat[close + 2] == 'T' || stat[close + 2] == 't';
}

bool continue_if_stopped(int rank, pid_t pid, const char* what) {
  if (!process_stopped(pid)) return false;
  fmt::print(stderr, "embedscope launch: rank {} (pid {}) is stopped: continued (SIGCONT) so that it takes the {} with "
                     "the others\n", rank, pid, what);
  kill(pid, SIGCONT);
  return true;
}

bool kill_if_still_stopped(int rank, pid_t pid, const std::string& store_url, const std::string& run_id) {
  if (!process_stopped(pid)) return false;
  fmt::print(stderr, "embedscope launch: rank {} (pid {}) is still stopped 2 s after SIGCONT (a debugger?): killed; the "
                     "other ranks end now\n", rank, pid);
  try {
    engine::launch::report_dead_rank(store_url, run_id, rank, "was stopped and did not continue: killed by launch");
  } catch (const std::exception&) {  // the store is gone: the others see the connections close
  }
  kill(pid, SIGKILL);
  return true;
}

}  // namespace embedscope::cli
