// The step figures' interval arithmetic and one rank's times in one step window (analysis.h:
// the time classes, the same-lane rule for blocking collectives, OpRoles).

#include <algorithm>
#include <limits>

#include "embedscope/sessions/analysis/analysis.h"

namespace embedscope::sessions {

std::vector<Interval> merge_intervals(std::vector<Interval> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](const Interval& i) { return i.end <= i.start; }), v.end());
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<Interval> out;
  for (const auto& i : v) {
    if (!out.empty() && i.start <= out.back().end)
      out.back().end = std::max(out.back().end, i.end);
    else
      out.push_back(i);
  }
  return out;
}

int64_t covered_ns(const std::vector<Interval>& merged) {
  int64_t s = 0;
  for (const auto& i : merged) s += i.end - i.start;
  return s;
}

std::vector<Interval> intersect(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t s = std::max(a[i].start, b[j].start), e = std::min(a[i].end, b[j].end);
    if (s < e) out.push_back({s, e});
    if (a[i].end < b[j].end) ++i; else ++j;
  }
  return out;
}

namespace {
bool is_compute(OpCategory c) { return c != OpCategory::comm && c != OpCategory::memcpy; }

using LaneKey = std::pair<int32_t, int32_t>;  // (rank, lane)

bool is_wait(const OpRecord& o, const OpRoles& roles) { return roles.wait_id >= 0 && o.name_id == roles.wait_id; }
bool is_annotation(const OpRecord& o, const OpRoles& roles) { return is_plain_annotation(o, roles.annotation_ids); }

// Per lane: the time of its comm ops and waits within [t0, t1), merged.
std::map<LaneKey, std::vector<Interval>> lane_blocked(const std::vector<OpRecord>& ops, const OpRoles& roles, int64_t t0,
                                                      int64_t t1) {
  std::map<LaneKey, std::vector<Interval>> out;
  for (const auto& o : ops)
    if (o.category == OpCategory::comm || is_wait(o, roles)) {
      const int64_t s = std::max(o.start_ns, t0), e = std::min(o.end_ns, t1);
      if (s < e) out[{o.rank, o.lane}].push_back({s, e});
    }
  for (auto& [lane, v] : out) v = merge_intervals(std::move(v));
  return out;
}

// Appends the parts of [s, e) outside `blocked` (merged) to `out`.
void append_outside(int64_t s, int64_t e, const std::vector<Interval>* blocked, std::vector<Interval>& out) {
  if (!blocked) {
    out.push_back({s, e});
    return;
  }
  auto it = std::upper_bound(blocked->begin(), blocked->end(), s, [](int64_t v, const Interval& i) { return v < i.end; });
  int64_t cur = s;
  for (; it != blocked->end() && it->start < e; ++it) {
    if (it->start > cur) out.push_back({cur, it->start});
    cur = std::max(cur, it->end);
  }
  if (cur < e) out.push_back({cur, e});
}

const std::vector<Interval>* blocked_of(const std::map<LaneKey, std::vector<Interval>>& blocked, const OpRecord& o) {
  const auto it = blocked.find({o.rank, o.lane});
  return it == blocked.end() ? nullptr : &it->second;
}
}  // namespace

bool is_plain_annotation(const OpRecord& o, const std::set<int32_t>& annotation_ids) {
  return o.category == OpCategory::other && annotation_ids.count(o.name_id) > 0;
}

std::map<int32_t, std::vector<Interval>> compute_intervals(const std::vector<OpRecord>& ops, const OpRoles& roles) {
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const auto blocked = lane_blocked(ops, roles, lo, hi);
  std::map<int32_t, std::vector<Interval>> out;
  for (const auto& o : ops)
    if (is_compute(o.category) && o.end_ns > o.start_ns && !is_wait(o, roles) && !is_annotation(o, roles))
      append_outside(o.start_ns, o.end_ns, blocked_of(blocked, o), out[o.rank]);
  for (auto& [rank, v] : out) v = merge_intervals(std::move(v));
  return out;
}

std::vector<OpSelfTime> op_self_times(const std::vector<OpRecord>& ops, const OpRoles& roles) {
  std::vector<OpRecord> kept;
  kept.reserve(ops.size());
  std::map<int32_t, OpSelfTime> by_name;
  for (const auto& o : ops) {
    if (is_wait(o, roles) || is_annotation(o, roles)) continue;
    kept.push_back(o);
    OpSelfTime& t = by_name[o.name_id];
    t.name_id = o.name_id;
    t.category = o.category;
    ++t.count;
  }
  for (const auto& p : innermost_pieces(kept))
    if (p.end_ns > p.start_ns) by_name[p.name_id].self_ns += p.end_ns - p.start_ns;
  std::vector<OpSelfTime> out;
  out.reserve(by_name.size());
  for (const auto& [id, t] : by_name) out.push_back(t);
  std::stable_sort(out.begin(), out.end(), [](const OpSelfTime& a, const OpSelfTime& b) { return a.self_ns > b.self_ns; });
  return out;
}

RankStepTimes rank_step_times(const std::vector<OpRecord>& ops, int64_t t0, int64_t t1, const OpRoles& roles) {
  RankStepTimes t;
  t.window_ns = std::max<int64_t>(0, t1 - t0);
  const auto blocked = lane_blocked(ops, roles, t0, t1);
  std::array<std::vector<Interval>, kNumCategories> by_cat;
  for (const auto& o : ops) {
    if (is_wait(o, roles) || is_annotation(o, roles)) continue;
    const int64_t s = std::max(o.start_ns, t0), e = std::min(o.end_ns, t1);
    if (s >= e) continue;
    auto& dst = by_cat[static_cast<size_t>(o.category)];
    if (is_compute(o.category))
      append_outside(s, e, blocked_of(blocked, o), dst);
    else
      dst.push_back({s, e});
  }
  std::vector<Interval> compute, comm, busy;
  for (int c = 0; c < kNumCategories; ++c) {
    auto merged = merge_intervals(by_cat[static_cast<size_t>(c)]);
    t.by_category_ns[static_cast<size_t>(c)] = covered_ns(merged);
    auto cat = static_cast<OpCategory>(c);
    auto& dst = cat == OpCategory::comm ? comm : (cat == OpCategory::memcpy ? busy : compute);
    dst.insert(dst.end(), merged.begin(), merged.end());
  }
  compute = merge_intervals(compute);
  comm = merge_intervals(comm);
  busy.insert(busy.end(), compute.begin(), compute.end());
  busy.insert(busy.end(), comm.begin(), comm.end());
  t.compute_ns = covered_ns(compute);
  t.comm_ns = covered_ns(comm);
  t.overlap_ns = covered_ns(intersect(compute, comm));
  t.exposed_comm_ns = t.comm_ns - t.overlap_ns;
  t.idle_ns = t.window_ns - covered_ns(merge_intervals(busy));
  return t;
}

}  // namespace embedscope::sessions
