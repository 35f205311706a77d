#include "embedscope/sessions/critical_path.h"

#include <algorithm>
#include <tuple>

#include "embedscope/sessions/analysis.h"

namespace embedscope::sessions {

namespace {
bool is_compute(OpCategory c) { return c != OpCategory::comm && c != OpCategory::memcpy; }
}  // namespace

std::map<CollectiveKey, std::vector<size_t>> collective_instances(const std::vector<OpRecord>& ops,
                                                                  const std::vector<CollectiveRecord>& collectives) {
  std::map<std::pair<int32_t, uint64_t>, std::vector<const CollectiveRecord*>> by_rank_seq;
  for (const auto& c : collectives) by_rank_seq[{c.rank, c.sequence}].push_back(&c);
  std::map<CollectiveKey, std::vector<size_t>> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpRecord& o = ops[i];
    if (o.category != OpCategory::comm || o.correlation == 0) continue;
    CollectiveKey key{"", o.name_id, o.correlation};
    if (auto it = by_rank_seq.find({o.rank, o.correlation}); it != by_rank_seq.end())
      for (const CollectiveRecord* c : it->second)
        if (c->start_ns >= o.start_ns && c->end_ns <= o.end_ns) {
          key.group = c->group;
          break;
        }
    out[key].push_back(i);
  }
  return out;
}

StepCriticalPath critical_path(const std::vector<OpRecord>& ops, const std::vector<CollectiveRecord>& collectives,
                               int64_t step) {
  StepCriticalPath path;
  path.step = step;
  // Per rank, the valid ops ordered by (end, start): the predecessor of time t on a rank is the
  // last entry with end <= t.
  std::map<int32_t, std::vector<size_t>> by_end;
  size_t last = ops.size();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].end_ns <= ops[i].start_ns) continue;
    by_end[ops[i].rank].push_back(i);
    if (last == ops.size() || ops[i].end_ns > ops[last].end_ns) last = i;
  }
  if (last == ops.size()) return path;
  for (auto& [rank, v] : by_end)
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      return std::tie(ops[a].end_ns, ops[a].start_ns) < std::tie(ops[b].end_ns, ops[b].start_ns);
    });
  // Per rank, the valid ops by start and, for each prefix, the op that ends last: the op still
  // running at time t (if any) is the prefix of ops starting before t whose latest end is > t.
  std::map<int32_t, std::vector<size_t>> by_start, running;
  for (const auto& [rank, v] : by_end) {
    auto& s = by_start[rank] = v;
    std::sort(s.begin(), s.end(), [&](size_t a, size_t b) { return ops[a].start_ns < ops[b].start_ns; });
    auto& m = running[rank];
    for (size_t i : s) m.push_back(m.empty() || ops[i].end_ns > ops[m.back()].end_ns ? i : m.back());
  }
  std::vector<const std::vector<size_t>*> instance_of(ops.size(), nullptr);
  const auto instances = collective_instances(ops, collectives);
  for (const auto& [key, members] : instances)
    for (size_t i : members) instance_of[i] = &members;

  // Walk back from the op that ends last. Time strictly decreases at every hop (a predecessor
  // ends at or before the current start, or runs over it, and starts before it), so the walk
  // terminates.
  std::vector<PathSegment> reversed;
  size_t cur = last;
  int64_t seg_end = ops[cur].end_ns;
  for (;;) {
    const OpRecord& c = ops[cur];
    size_t from = cur;  // the op whose start the path continues from
    if (instance_of[cur])
      for (size_t m : *instance_of[cur])
        if (ops[m].end_ns > ops[m].start_ns && ops[m].start_ns > ops[from].start_ns && ops[m].start_ns < seg_end) from = m;
    const int64_t t = ops[from].start_ns;
    reversed.push_back({PathSegment::Kind::op, c.rank, c.lane, c.name_id, c.category, t, seg_end});
    const auto& candidates = by_end[ops[from].rank];
    auto it = std::upper_bound(candidates.begin(), candidates.end(), t,
                               [&](int64_t value, size_t i) { return value < ops[i].end_ns; });
    const auto& starts = by_start[ops[from].rank];
    const auto started = std::lower_bound(starts.begin(), starts.end(), t,
                                          [&](size_t i, int64_t value) { return ops[i].start_ns < value; });
    const size_t busy = started == starts.begin() ? ops.size() : running[ops[from].rank][static_cast<size_t>(started - starts.begin()) - 1];
    const bool ended_at_t = it != candidates.begin() && ops[*std::prev(it)].end_ns == t;
    if (busy != ops.size() && ops[busy].end_ns > t && !ended_at_t) {
      // An op of the rank was still running at t (a DDP bucket's all-reduce launched during the
      // backward, a prefetch under compute): the rank was busy, not in a gap; the path goes
      // through that op up to t.
      cur = busy;
      seg_end = t;
      continue;
    }
    if (it == candidates.begin()) break;
    const size_t pred = *std::prev(it);
    if (ops[pred].end_ns < t)
      reversed.push_back({PathSegment::Kind::gap, ops[from].rank, 0, 0, OpCategory::other, ops[pred].end_ns, t});
    cur = pred;
    seg_end = ops[pred].end_ns;
  }
  path.segments.assign(reversed.rbegin(), reversed.rend());
  path.start_ns = path.segments.front().start_ns;
  path.end_ns = path.segments.back().end_ns;
  return path;
}

void add_collective_times(const std::vector<OpRecord>& ops, const std::map<CollectiveKey, std::vector<size_t>>& instances,
                          std::map<int32_t, CollectiveTimes>& out) {
  std::map<int32_t, std::vector<Interval>> compute;
  for (const auto& o : ops)
    if (is_compute(o.category)) compute[o.rank].push_back({o.start_ns, o.end_ns});
  for (auto& [rank, v] : compute) v = merge_intervals(std::move(v));
  for (const auto& o : ops) {
    if (o.category != OpCategory::comm) continue;
    CollectiveTimes& t = out[o.name_id];
    t.name_id = o.name_id;
    ++t.count;
    t.bytes += o.bytes;
    const int64_t dur = std::max<int64_t>(0, o.end_ns - o.start_ns);
    t.time_ns += dur;
    const auto& mine = compute[o.rank];
    t.exposed_ns += dur - covered_ns(intersect(mine, merge_intervals({{o.start_ns, o.end_ns}})));
  }
  for (const auto& [key, members] : instances) {
    int64_t latest = ops[members.front()].start_ns;
    for (size_t m : members) latest = std::max(latest, ops[m].start_ns);
    for (size_t m : members) out[key.name_id].wait_ns += std::min(latest, ops[m].end_ns) - ops[m].start_ns;
  }
}

}  // namespace embedscope::sessions
