#include "embedscope/sessions/model/units.h"

#include "embedscope/sessions/model/unit_ladder.h"

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


DurationUnit duration_unit(double ns) {
  const double a = std::abs(ns);
  // long spans (an imported trace's epoch-based clock, a long run): minutes, hours, days
  if (a >= 172800e9) return {"d", 86400e9, 2};
  if (a >= 6000e9) return {"h", 3600e9, 2};
  if (a >= 600e9) return {"min", 60e9, 1};
  if (a >= 1e9) return {"s", 1e9, 2};
  if (a >= 1e6) return {"ms", 1e6, 2};
  if (a >= 1e3) return {"us", 1e3, 1};
  return {"ns", 1, 0};
}

std::string format_duration(int64_t ns) {
  const DurationUnit u = duration_unit(static_cast<double>(ns));
  if (u.ns == 1) return fmt::format("{} ns", ns);
  return fmt::format("{:.{}f} {}", static_cast<double>(ns) / u.ns, u.decimals, u.name);
}

std::string format_ms(double ns) {
  // from 10 minutes on the ladder (min / h / d): a 13-hour simulated step read "46974990.65 ms",
  // a 51-day import's range "4458677101.16 ms" (tester39 F9)
  if (std::isfinite(ns) && std::abs(ns) >= 600e9) return format_duration(std::llround(ns));
  return fmt::format("{:.2f} ms", ns / 1e6);
}

std::string format_rate(double per_s) {
  if (!std::isfinite(per_s)) return "-";
  const double a = std::abs(per_s);
  if (a == 0) return "0";
  if (a >= 1) return fmt::format("{:.0f}", per_s);
  if (a < 1e-9) return per_s > 0 ? "< 0.000000001" : "> -0.000000001";
  // three significant digits: 0.25 -> "0.250", 3.4e-4 -> "0.000340"
  const int decimals = 2 - static_cast<int>(std::floor(std::log10(a)));
  return fmt::format("{:.{}f}", per_s, decimals);
}

}  // namespace embedscope::sessions
