// The machine load of a run of several processes (merge/merged_load.h).
#include "embedscope/sessions/merge/merged_load.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace embedscope::sessions {

MergedLoad merge_process_load(const std::vector<ProcessLoad>& processes) {
  if (processes.empty()) throw std::invalid_argument("merge_process_load: no process");
  bool runnable = true;
  for (const ProcessLoad& p : processes) {
    if (!(p.self_cores >= 0) || !(p.other_cores >= 0) || (p.own_runnable && !(*p.own_runnable >= 0)) ||
        (p.other_runnable && !(*p.other_runnable >= 0)))
      throw std::invalid_argument("merge_process_load: a negative load figure (host " + p.host + ")");
    runnable = runnable && p.own_runnable && p.other_runnable;
  }
  struct Host {
    double self = 0, busy = 0, own = 0, running = 0;
    int n = 0;
  };
  std::map<std::string, Host> hosts;
  for (const ProcessLoad& p : processes) {
    Host& h = hosts[p.host];
    ++h.n;
    h.self += p.self_cores;
    h.busy += p.self_cores + p.other_cores;
    if (runnable) {
      h.own += *p.own_runnable;
      h.running += *p.own_runnable + *p.other_runnable;
    }
  }
  MergedLoad m;
  m.processes = static_cast<int>(processes.size());
  m.hosts = static_cast<int>(hosts.size());
  double own = 0, other_runnable = 0;
  for (const auto& [name, h] : hosts) {
    m.self_cores += h.self;
    m.other_cores += std::max(0.0, h.busy / h.n - h.self);
    own += h.own;
    other_runnable += std::max(0.0, h.running / h.n - h.own);
  }
  if (runnable) {
    m.own_runnable = own;
    m.other_runnable = other_runnable;
  }
  return m;
}

}  // namespace embedscope::sessions
