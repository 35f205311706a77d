#include "embedscope/sessions/model/units.h"

#include <cmath>

#include <fmt/format.h>

namespace embedscope::sessions {

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024.0 && u < 4) { v /= 1024.0; ++u; }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace embedscope::sessions
