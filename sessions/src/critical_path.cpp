#include "embedscope/sessions/critical_path.h"

#include <algorithm>
#include <climits>
#include <set>
#include <tuple>

#include "embedscope/sessions/analysis.h"

namespace embedscope::sessions {

namespace {
// How long after its predecessor ended an op may start and still count as started by it
// (thread hand-over and wake-up); past that, an op of the rank running across its start is the
// one it was launched from.
constexpr int64_t kLaunchSlackNs = 50'000;

bool is_compute(OpCategory c) { return c != OpCategory::comm && c != OpCategory::memcpy; }
}  // namespace

std::map<CollectiveKey, std::vector<size_t>> collective_instances(const std::vector<OpRecord>& ops,
                                                                  const std::vector<CollectiveRecord>& collectives) {
  std::map<std::pair<int32_t, uint64_t>, std::vector<const CollectiveRecord*>> by_rank_seq;
  for (const auto& c : collectives) by_rank_seq[{c.rank, c.sequence}].push_back(&c);
  // The group of each comm op from its rank's records; an op without a record of its own joins
  // the group of the others of its (name, sequence) when they agree on one.
  std::vector<std::pair<size_t, CollectiveKey>> keyed;
  std::map<std::pair<int32_t, uint64_t>, std::set<std::string>> groups;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpRecord& o = ops[i];
    if (o.category != OpCategory::comm || o.correlation == 0) continue;
    CollectiveKey key{"", o.name_id, o.correlation};
    if (auto it = by_rank_seq.find({o.rank, o.correlation}); it != by_rank_seq.end())
      for (const CollectiveRecord* c : it->second)
        if (c->start_ns >= o.start_ns && c->end_ns <= o.end_ns) {
          key.group = c->group;
          groups[{o.name_id, o.correlation}].insert(c->group);
          break;
        }
    keyed.emplace_back(i, std::move(key));
  }
  std::map<CollectiveKey, std::vector<size_t>> out;
  for (auto& [i, key] : keyed) {
    if (key.group.empty())
      if (auto it = groups.find({key.name_id, key.sequence}); it != groups.end() && it->second.size() == 1)
        key.group = *it->second.begin();
    out[key].push_back(i);
  }
  return out;
}

StepCriticalPath critical_path(const std::vector<OpRecord>& ops, const std::vector<CollectiveRecord>& collectives,
                               int64_t step) {
  StepCriticalPath path;
  path.step = step;
  // Per rank, the valid ops ordered by (end, start): the predecessor of time t on a rank is the
  // last entry with end <= t. Per (rank, lane), the valid ops ordered by start: the op of a lane
  // running at time t is the last one starting before t, if it ends after t.
  std::map<int32_t, std::vector<size_t>> by_end;
  std::map<std::pair<int32_t, int32_t>, std::vector<size_t>> by_start;
  size_t last = ops.size();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].end_ns <= ops[i].start_ns) continue;
    by_end[ops[i].rank].push_back(i);
    by_start[{ops[i].rank, ops[i].lane}].push_back(i);
    if (last == ops.size() || ops[i].end_ns > ops[last].end_ns) last = i;
  }
  if (last == ops.size()) return path;
  for (auto& [rank, v] : by_end)
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      return std::tie(ops[a].end_ns, ops[a].start_ns) < std::tie(ops[b].end_ns, ops[b].start_ns);
    });
  for (auto& [lane, v] : by_start)
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) { return ops[a].start_ns < ops[b].start_ns; });
  // The op of `rank` (any lane) running across t that started last, or ops.size().
  auto running_at = [&](int32_t rank, int64_t t) {
    size_t found = ops.size();
    for (auto it = by_start.lower_bound({rank, INT32_MIN}); it != by_start.end() && it->first.first == rank; ++it) {
      const auto& v = it->second;
      auto after = std::partition_point(v.begin(), v.end(), [&](size_t i) { return ops[i].start_ns < t; });
      if (after == v.begin()) continue;
      const size_t i = *std::prev(after);
      if (ops[i].end_ns > t && (found == ops.size() || ops[i].start_ns > ops[found].start_ns)) found = i;
    }
    return found;
  };
  std::vector<const std::vector<size_t>*> instance_of(ops.size(), nullptr);
  const auto instances = collective_instances(ops, collectives);
  for (const auto& [key, members] : instances)
    for (size_t i : members) instance_of[i] = &members;

  // Walk back from the op that ends last. Time strictly decreases at every hop (a predecessor
  // ends at or before the current start, an op running across it started before it), so the
  // walk terminates.
  std::vector<PathSegment> reversed;
  size_t cur = last;
  int64_t seg_end = ops[cur].end_ns;
  for (;;) {
    const OpRecord& c = ops[cur];
    size_t from = cur;  // the op whose start the path continues from
    if (instance_of[cur])
      for (size_t m : *instance_of[cur])
        if (ops[m].end_ns > ops[m].start_ns && ops[m].start_ns > ops[from].start_ns && ops[m].start_ns < seg_end) from = m;
    const int64_t t = std::min(ops[from].start_ns, seg_end);
    reversed.push_back({PathSegment::Kind::op, c.rank, c.lane, c.name_id, c.category, t, seg_end});
    const int32_t rank = ops[from].rank;
    const auto& candidates = by_end[rank];
    auto it = std::upper_bound(candidates.begin(), candidates.end(), t,
                               [&](int64_t value, size_t i) { return value < ops[i].end_ns; });
    const size_t pred = it == candidates.begin() ? ops.size() : *std::prev(it);
    // An op that starts while another op of its rank runs, long after anything before it ended,
    // was launched from inside that op (e.g. a DDP bucket's all-reduce during the backward pass).
    const size_t running = running_at(rank, t);
    if (running != ops.size() && (pred == ops.size() || t - ops[pred].end_ns > kLaunchSlackNs)) {
      cur = running;
      seg_end = t;
      continue;
    }
    if (pred == ops.size()) break;
    if (ops[pred].end_ns < t)
      reversed.push_back({PathSegment::Kind::gap, rank, 0, 0, OpCategory::other, ops[pred].end_ns, t});
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
