#include "core/timeline_math.h"

#include "embedscope/sessions/model/unit_ladder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <regex>
#include <limits>
#include <tuple>
#include <utility>


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

LaneIndex::LaneIndex(const std::vector<sessions::OpRecord>& ops) : key_(ops.size()) {
  for (size_t i = 0; i < ops.size(); ++i)
    key_[i] = std::max(ops[i].end_ns - ops[i].start_ns, i ? ops[i].start_ns - ops[i - 1].end_ns : 0);
  for (size_t b = 0; b < key_.size(); b += kBlock)
    block_max_.push_back(*std::max_element(key_.begin() + static_cast<std::ptrdiff_t>(b),
                                           key_.begin() + static_cast<std::ptrdiff_t>(std::min(key_.size(), b + kBlock))));
  for (size_t b = 0; b < block_max_.size(); b += kBlock)
    super_max_.push_back(*std::max_element(block_max_.begin() + static_cast<std::ptrdiff_t>(b),
                                           block_max_.begin() + static_cast<std::ptrdiff_t>(std::min(block_max_.size(), b + kBlock))));
  // time per category before each block: a run's whole blocks are summed from two entries
  before_block_.reserve(key_.size() / kBlock + 2);
  CategoryNs sum{};
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i % kBlock == 0) before_block_.push_back(sum);
    sum[static_cast<size_t>(ops[i].category)] += ops[i].end_ns - ops[i].start_ns;
  }
  before_block_.push_back(sum);  // the last block's end (a partial block: only whole blocks are read)
}

sessions::OpCategory LaneIndex::dominant_category(const std::vector<sessions::OpRecord>& ops, size_t i, size_t k) const {
  CategoryNs ns{};
  auto add = [&](size_t a, size_t b) {
    for (; a < b; ++a) ns[static_cast<size_t>(ops[a].category)] += ops[a].end_ns - ops[a].start_ns;
  };
  const size_t first_whole = (i + kBlock - 1) / kBlock, end_whole = k / kBlock;  // blocks inside [i, k)
  if (first_whole < end_whole) {
    add(i, first_whole * kBlock);
    for (size_t c = 0; c < ns.size(); ++c) ns[c] += before_block_[end_whole][c] - before_block_[first_whole][c];
    add(end_whole * kBlock, k);
  } else {
    add(i, k);
  }
  auto best = static_cast<size_t>(ops[i].category);
  for (size_t c = 0; c < ns.size(); ++c)
    if (ns[c] > ns[best]) best = c;
  return static_cast<sessions::OpCategory>(best);
}

size_t LaneIndex::run_end(size_t i, double threshold_ns) const {
  const size_t n = key_.size();
  auto small = [&](int64_t k) { return static_cast<double>(k) < threshold_ns; };
  while (i < n) {
    if (i % (kBlock * kBlock) == 0 && small(super_max_[i / (kBlock * kBlock)])) {
      i += kBlock * kBlock;  // 4096 small ops at once
    } else if (i % kBlock == 0 && small(block_max_[i / kBlock])) {
      i += kBlock;
    } else {
      if (!small(key_[i])) return i;
      ++i;
    }
  }
  return n;
}

std::vector<LaneBox> fold_lane(const std::vector<sessions::OpRecord>& ops, const LaneIndex& index, const TimeScale& scale,
                               double min_px) {
  std::vector<LaneBox> out;
  // the visible ops: ops are sorted by start, and on one lane they do not nest, so their ends
  // are sorted too
  const auto first = static_cast<size_t>(
      std::partition_point(ops.begin(), ops.end(), [&](const sessions::OpRecord& o) { return o.end_ns <= scale.t0(); }) -
      ops.begin());
  const auto last = static_cast<size_t>(
      std::partition_point(ops.begin(), ops.end(), [&](const sessions::OpRecord& o) { return o.start_ns < scale.t1(); }) -
      ops.begin());
  const double small_ns = min_px * scale.ns_per_px();  // narrower than min_px
  for (size_t i = first; i < last;) {
    const auto& o = ops[i];
    const double x0 = std::max(0.0, scale.x(o.start_ns));
    size_t k = i + 1;
    // a sub-pixel op starts a run: the following ops that are narrow and start less than
    // min_px after the previous one ends (LaneIndex skips them 64 or 4096 at a time)
    if (static_cast<double>(o.end_ns - o.start_ns) < small_ns) k = std::min(last, std::max(k, index.run_end(k, small_ns)));
    const double x1 = std::min(scale.width(), scale.x(ops[k - 1].end_ns));
    // a folded run in the category with the most time in it, not its first op's (tester50 F10)
    out.push_back({x0, std::max(x0, x1), k - i > 1 ? index.dominant_category(ops, i, k) : o.category,
                   static_cast<int64_t>(k - i), i});
    i = k;
  }
  return out;
}

std::vector<sessions::OpRecord> take_partial_overlaps(std::vector<sessions::OpRecord>& ops) {
  // the importers count such spans as overlapping_spans (importers/common/lane_checks.cpp); here
  // a span taken does not stay open, so what is left of the lane nests
  std::vector<sessions::OpRecord> taken;
  std::vector<int64_t> open;  // ends of the ops enclosing the current one, innermost last
  size_t kept = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const sessions::OpRecord& o = ops[i];
    while (!open.empty() && open.back() <= o.start_ns) open.pop_back();
    if (!open.empty() && o.end_ns > open.back()) {
      taken.push_back(o);
      continue;
    }
    open.push_back(o.end_ns);
    if (kept != i) ops[kept] = ops[i];
    ++kept;
  }
  ops.resize(kept);
  return taken;
}

std::vector<LaneBox> fold_lane(const std::vector<sessions::OpRecord>& ops, const TimeScale& scale, double min_px) {
  return fold_lane(ops, LaneIndex(ops), scale, min_px);
}

void ZoomHistory::visit(ViewRange r, bool coalesce) {
  if (r == entries_[pos_]) return;
  entries_.resize(pos_ + 1);  // a new visit drops the forward entries
  if (coalesce && pos_ > 0) {
    entries_[pos_] = r;
    return;
  }
  entries_.push_back(r);
  ++pos_;
}

ViewRange ZoomHistory::back() {
  if (pos_ > 0) --pos_;
  return entries_[pos_];
}

ViewRange ZoomHistory::forward() {
  if (pos_ + 1 < entries_.size()) ++pos_;
  return entries_[pos_];
}

std::optional<OpRef> find_op(const std::vector<const std::vector<sessions::OpRecord>*>& rows,
                             const std::vector<bool>& match, std::optional<OpRef> from, bool forward,
                             int64_t from_ns) {
  auto matches = [&](const sessions::OpRecord& o) {
    return o.name_id >= 0 && static_cast<size_t>(o.name_id) < match.size() && match[static_cast<size_t>(o.name_id)];
  };
  using Key = std::tuple<int64_t, size_t, size_t>;
  constexpr size_t kEnd = std::numeric_limits<size_t>::max();
  // without an op: just before (from_ns, first row) going forward, or at it going backward
  const Key origin = from ? Key{(*rows[from->row])[from->index].start_ns, from->row, from->index}
                          : forward ? Key{from_ns - 1, kEnd, kEnd} : Key{from_ns, 0, 0};
  std::optional<Key> best;
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto& ops = *rows[r];
    if (forward) {
      // first candidate: the first op whose key is past the origin
      auto i = static_cast<size_t>(std::partition_point(ops.begin(), ops.end(), [&](const sessions::OpRecord& o) {
                                     return o.start_ns < std::get<0>(origin);
                                   }) - ops.begin());
      while (i < ops.size() && Key{ops[i].start_ns, r, i} <= origin) ++i;
      for (; i < ops.size(); ++i) {
        if (best && ops[i].start_ns > std::get<0>(*best)) break;
        if (matches(ops[i])) {
          if (!best || Key{ops[i].start_ns, r, i} < *best) best = Key{ops[i].start_ns, r, i};
          break;
        }
      }
    } else {
      auto i = static_cast<size_t>(std::partition_point(ops.begin(), ops.end(), [&](const sessions::OpRecord& o) {
                                     return o.start_ns <= std::get<0>(origin);
                                   }) - ops.begin());
      while (i > 0 && Key{ops[i - 1].start_ns, r, i - 1} >= origin) --i;
      for (; i > 0; --i) {
        if (best && ops[i - 1].start_ns < std::get<0>(*best)) break;
        if (matches(ops[i - 1])) {
          if (!best || Key{ops[i - 1].start_ns, r, i - 1} > *best) best = Key{ops[i - 1].start_ns, r, i - 1};
          break;
        }
      }
    }
  }
  if (!best) return std::nullopt;
  return OpRef{std::get<1>(*best), std::get<2>(*best)};
}

std::vector<OpTotal> range_totals(const std::vector<sessions::OpRecord>& ops, int64_t t0, int64_t t1, bool per_rank) {
  std::map<std::pair<int32_t, int32_t>, OpTotal> by;
  for (const auto& o : ops) {
    if (o.end_ns <= t0 || o.start_ns >= t1) continue;
    const int32_t rank = per_rank ? o.rank : -1;
    OpTotal& t = by[{o.name_id, rank}];
    t.name_id = o.name_id;
    t.rank = rank;
    ++t.count;
    t.total_ns += std::min(o.end_ns, t1) - std::max(o.start_ns, t0);
    t.bytes += o.bytes;
  }
  std::vector<OpTotal> out;
  for (auto& [k, v] : by) out.push_back(v);
  std::stable_sort(out.begin(), out.end(), [](const OpTotal& a, const OpTotal& b) { return a.total_ns > b.total_ns; });
  return out;
}

std::map<int64_t, ViewRange> step_windows(const std::vector<sessions::StepMetric>& steps) {
  std::map<int64_t, ViewRange> out;
  for (const auto& s : steps) {
    auto [it, fresh] = out.try_emplace(s.step, ViewRange{s.start_ns, s.end_ns});
    if (!fresh) it->second = {std::min(it->second.t0, s.start_ns), std::max(it->second.t1, s.end_ns)};
  }
  return out;
}

std::optional<ViewRange> measured_extent(const std::map<int64_t, ViewRange>& steps) {
  std::optional<ViewRange> out;
  for (auto it = steps.lower_bound(0); it != steps.end(); ++it)
    out = out ? ViewRange{std::min(out->t0, it->second.t0), std::max(out->t1, it->second.t1)} : it->second;
  return out;
}

std::string step_name(int64_t step, int64_t warmup_steps, bool imported) {
  if (step >= 0) return "step " + std::to_string(step);
  if (imported) return "outside any profiler step";
  if (warmup_steps > 0 && step >= -warmup_steps)
    return "warm-up " + std::to_string(step + warmup_steps + 1) + " of " + std::to_string(warmup_steps);
  return "warm-up (step " + std::to_string(step) + ")";
}

std::map<int32_t, std::vector<ViewRange>> setup_waits(const std::map<int32_t, int64_t>& first_op_start,
                                                       const std::map<int32_t, std::vector<ViewRange>>& comm) {
  std::map<int32_t, std::vector<ViewRange>> out;
  if (first_op_start.size() < 2) return out;  // one rank waits for nobody
  int64_t setup_end = std::numeric_limits<int64_t>::min();
  for (const auto& [rank, t] : first_op_start) setup_end = std::max(setup_end, t);
  for (const auto& [rank, ops] : comm) {
    std::vector<ViewRange> clipped;
    for (const auto& c : ops)
      if (c.t0 < setup_end && std::min(c.t1, setup_end) > c.t0) clipped.push_back({c.t0, std::min(c.t1, setup_end)});
    std::sort(clipped.begin(), clipped.end(), [](const ViewRange& a, const ViewRange& b) { return a.t0 < b.t0; });
    std::vector<ViewRange> waits;
    for (const auto& w : clipped) {
      if (!waits.empty() && w.t0 <= waits.back().t1)
        waits.back().t1 = std::max(waits.back().t1, w.t1);
      else
        waits.push_back(w);
    }
    if (!waits.empty()) out[rank] = std::move(waits);
  }
  return out;
}

std::optional<HangSite> parse_hang_message(const std::string& msg) {
  static const std::regex re(R"(^rank (\d+): (\w+) '([^']*)'(?: \(group ([^,]+), sequence (\d+)\))? (?:did not finish|failed after \d))");
  std::smatch m;
  if (!std::regex_search(msg, m, re)) return std::nullopt;
  HangSite site;
  site.rank = static_cast<int32_t>(std::stol(m[1].str()));
  site.op = m[2].str();
  site.name = m[3].str();
  site.group = m[4].str();
  if (m[5].matched) site.sequence = std::stoll(m[5].str());
  return site;
}

std::optional<OpRef> hung_op(const HangSite& site, const std::vector<const std::vector<sessions::OpRecord>*>& rows,
                             const std::vector<int32_t>& row_ranks, const std::vector<std::string>& names) {
  std::optional<OpRef> named, last;
  auto later = [&](const std::optional<OpRef>& a, OpRef b) {
    return !a || (*rows[b.row])[b.index].start_ns > (*rows[a->row])[a->index].start_ns;
  };
  for (size_t r = 0; r < rows.size() && r < row_ranks.size(); ++r) {
    if (row_ranks[r] != site.rank) continue;
    const auto& ops = *rows[r];
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].category != sessions::OpCategory::comm) continue;
      const OpRef ref{r, i};
      if (later(last, ref)) last = ref;
      const auto id = static_cast<size_t>(ops[i].name_id);
      if (ops[i].name_id >= 0 && id < names.size() && names[id] == site.name && later(named, ref)) named = ref;
    }
  }
  return named ? named : last;
}

int64_t axis_tick_ns(double span_ns, int ticks) {
  const double raw = std::max(span_ns / std::max(ticks, 1), 1.0);
  const auto decade_1_2_5 = [](double x) {  // the smallest of 1, 2, 5 x 10^k that is >= x
    const double mag = std::pow(10.0, std::floor(std::log10(x)));
    return x <= mag ? mag : x <= 2 * mag ? 2 * mag : x <= 5 * mag ? 5 * mag : 10 * mag;
  };
  constexpr double kMin = 60e9, kHour = 3600e9, kDay = 86400e9;
  if (raw <= 500e9) return static_cast<int64_t>(decade_1_2_5(raw));
  for (double step : {10 * kMin, 15 * kMin, 30 * kMin, kHour, 2 * kHour, 3 * kHour, 6 * kHour, 12 * kHour, kDay,
                      2 * kDay, 5 * kDay, 10 * kDay})
    if (raw <= step) return static_cast<int64_t>(step);
  return static_cast<int64_t>(decade_1_2_5(raw / (10 * kDay)) * 10 * kDay);
}

std::optional<int64_t> step_at_centre(const std::map<int64_t, ViewRange>& steps, ViewRange view) {
  if (steps.empty()) return std::nullopt;
  const double c = (static_cast<double>(view.t0) + static_cast<double>(view.t1)) / 2;
  std::optional<int64_t> best;
  std::pair<bool, double> best_key;  // (outside, distance): any step holding the centre first
  for (const auto& [step, w] : steps) {
    const double t0 = static_cast<double>(w.t0), t1 = static_cast<double>(w.t1);
    const bool inside = c >= t0 && c < t1;
    const std::pair<bool, double> key{!inside, inside ? std::abs((t0 + t1) / 2 - c) : (c < t0 ? t0 - c : c - t1)};
    if (!best || key < best_key) best = step, best_key = key;
  }
  return best;
}

std::string axis_label(int64_t t_ns, int64_t tick_ns) {
  const sessions::DurationUnit u = sessions::duration_unit(static_cast<double>(t_ns));
  if (u.ns == 1) return fmt::format("{} ns", t_ns);
  const double per_unit = static_cast<double>(std::max<int64_t>(1, tick_ns)) / u.ns;
  // the digits that tell two ticks apart; 1e-9 against rounding (a 100 ns tick in s: 7, not 8)
  const int need = per_unit >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(per_unit) - 1e-9));
  const int decimals = std::clamp(std::max(u.decimals, need), 0, 9);
  return fmt::format("{:.{}f} {}", static_cast<double>(t_ns) / u.ns, decimals, u.name);
}

AxisTicks axis_ticks(int64_t t0, int64_t t1, int64_t origin, double width_px,
                     const std::function<double(const std::string&)>& label_px, int max_ticks, double gap_px) {
  AxisTicks out;
  const double span = static_cast<double>(std::max<int64_t>(1, t1 - t0));
  for (int n = std::max(1, max_ticks); n >= 1; --n) {
    out.tick_ns = axis_tick_ns(span, n);
    out.ticks.clear();
    const auto tick = static_cast<double>(out.tick_ns);
    double widest = 0;
    for (double t = std::ceil((static_cast<double>(t0) - static_cast<double>(origin)) / tick) * tick;
         t + static_cast<double>(origin) < static_cast<double>(t1); t += tick) {
      const auto rel = static_cast<int64_t>(std::llround(t));
      out.ticks.emplace_back(rel + origin, axis_label(rel, out.tick_ns));
      widest = std::max(widest, label_px(out.ticks.back().second));
    }
    if (widest + gap_px <= tick / span * width_px) break;  // each label clear of the next tick's
  }
  return out;
}

}  // namespace embedscope::ui
