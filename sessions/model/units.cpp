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


std::string format_duration(int64_t ns) {
  const double v = static_cast<double>(ns);
  // long spans (an imported trace's epoch-based clock, a long run): minutes, hours, days
  if (std::abs(v) >= 172800e9) return fmt::format("{:.2f} d", v / 86400e9);
  if (std::abs(v) >= 6000e9) return fmt::format("{:.2f} h", v / 3600e9);
  if (std::abs(v) >= 600e9) return fmt::format("{:.1f} min", v / 60e9);
  if (std::abs(v) >= 1e9) return fmt::format("{:.2f} s", v / 1e9);
  if (std::abs(v) >= 1e6) return fmt::format("{:.2f} ms", v / 1e6);
  if (std::abs(v) >= 1e3) return fmt::format("{:.1f} us", v / 1e3);
  return fmt::format("{} ns", ns);
}

}  // namespace embedscope::sessions
