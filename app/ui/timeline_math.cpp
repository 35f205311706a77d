#include "timeline_math.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace embedscope::ui {

namespace {
constexpr int64_t kMinSpanNs = 1000;
}

TimeScale::TimeScale(int64_t min_ns, int64_t max_ns, double width_px)
    : min_(min_ns), max_(std::max(max_ns, min_ns + kMinSpanNs)), t0_(min_), t1_(max_), width_(std::max(1.0, width_px)) {}

void TimeScale::set_width(double width_px) { width_ = std::max(1.0, width_px); }

void TimeScale::show(int64_t t0_ns, int64_t t1_ns) {
  int64_t span = std::clamp<int64_t>(t1_ns - t0_ns, kMinSpanNs, max_ - min_);
  int64_t a = std::clamp(t0_ns, min_, max_ - span);
  t0_ = a;
  t1_ = a + span;
}

void TimeScale::zoom_at(double x_px, double factor) {
  if (factor <= 0) return;
  const int64_t anchor = t(x_px);
  const double span = static_cast<double>(t1_ - t0_) / factor;
  const double left = x_px / width_ * span;
  show(anchor - static_cast<int64_t>(std::llround(left)), anchor - static_cast<int64_t>(std::llround(left)) +
                                                             static_cast<int64_t>(std::llround(span)));
}

void TimeScale::pan(double dx_px) {
  const auto dt = static_cast<int64_t>(std::llround(dx_px * ns_per_px()));
  show(t0_ + dt, t1_ + dt);
}

std::vector<LaneBox> fold_lane(const std::vector<sessions::OpRecord>& ops, const TimeScale& scale, double min_px) {
  std::vector<LaneBox> out;
  // first op that ends after the view starts: ops are sorted by start, and on one lane they do
  // not nest, so their ends are sorted too
  auto it = std::partition_point(ops.begin(), ops.end(), [&](const sessions::OpRecord& o) { return o.end_ns <= scale.t0(); });
  for (; it != ops.end() && it->start_ns < scale.t1(); ++it) {
    const double x0 = std::max(0.0, scale.x(it->start_ns));
    const double x1 = std::min(scale.width(), scale.x(it->end_ns));
    if (!out.empty() && out.back().x1 - out.back().x0 < min_px && x1 - out.back().x0 <= min_px) {
      out.back().x1 = std::max(out.back().x1, x1);  // fold into the sub-pixel box
      ++out.back().count;
      continue;
    }
    out.push_back({x0, std::max(x1, x0), it->category, 1, static_cast<size_t>(it - ops.begin())});
  }
  return out;
}

std::string format_duration(int64_t ns) {
  const double v = static_cast<double>(ns);
  if (std::abs(v) >= 1e9) return fmt::format("{:.2f} s", v / 1e9);
  if (std::abs(v) >= 1e6) return fmt::format("{:.2f} ms", v / 1e6);
  if (std::abs(v) >= 1e3) return fmt::format("{:.1f} us", v / 1e3);
  return fmt::format("{} ns", ns);
}

}  // namespace embedscope::ui
