// This machine's memory for the run guards (planner/host_memory.h).
#include "embedscope/engine/planner/host_memory.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "embedscope/sessions/model/units.h"

namespace embedscope::engine {

HostMemory parse_meminfo(const std::string& text) {
  HostMemory m;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key, unit;
    long long kb = -1;
    if (!(ls >> key >> kb) || kb < 0) continue;
    ls >> unit;
    const int64_t bytes = unit == "kB" ? static_cast<int64_t>(kb) * 1024 : static_cast<int64_t>(kb);
    if (key == "MemTotal:") m.total_bytes = bytes;
    else if (key == "MemAvailable:") m.available_bytes = bytes;
  }
  return m;
}

HostMemory this_host_memory() {
  std::ifstream f("/proc/meminfo");
  HostMemory m;
  if (f) {
    std::stringstream ss;
    ss << f.rdbuf();
    m = parse_meminfo(ss.str());
  }
  if (m.total_bytes <= 0) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    m.total_bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  }
  return m;
}

bool fits_host_memory(int64_t need, const HostMemory& m) {
  return m.available_bytes <= 0 || need <= m.available_bytes * 9 / 10;
}

std::string host_memory_text(const HostMemory& m) {
  return fmt::format("{} available now (of {}; a run is refused above 90% of what is available)",
                     sessions::format_bytes(m.available_bytes), sessions::format_bytes(m.total_bytes));
}

int host_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace embedscope::engine
