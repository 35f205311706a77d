#include "embedscope/sessions/analysis/critical_path.h"

#include <algorithm>
#include <climits>
#include <set>
#include <tuple>

#include "embedscope/sessions/analysis/analysis.h"

namespace embedscope::sessions {

/// The ops of `ops` with each lane's nested spans replaced by the pieces of time in which each is
/// the innermost one running (its exclusive time; of ops open at a moment, the one that started
/// last, the shorter on a tie), adjacent pieces of one op joined. A span that encloses others on
/// its lane (a record_function range "## forward ##", aten::linear around aten::addmm) is on
/// the path only for its own time between its children, and the path goes through the ops inside
/// it, as HTA's critical path attributes a parent's time (tester37 #16: three "## ... ##" spans
/// were 99.7 % of nccl_data's path). Comm ops are kept whole (their sequence numbers join the
/// members of a collective) and end the pieces of their parents like any child; ops with end <=
/// start pass as they are. Spans that do not nest pass unchanged. Cost O(n log n).
std::vector<OpRecord> innermost_pieces(const std::vector<OpRecord>& ops) {
  std::vector<OpRecord> out;
  out.reserve(ops.size());
  std::map<std::pair<int32_t, int32_t>, std::vector<size_t>> by_lane;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].end_ns <= ops[i].start_ns) {
      out.push_back(ops[i]);
      continue;
    }
    if (ops[i].category == OpCategory::comm) out.push_back(ops[i]);
    by_lane[{ops[i].rank, ops[i].lane}].push_back(i);
  }
  for (auto& [lane, v] : by_lane) {
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) { return ops[a].start_ns < ops[b].start_ns; });
    std::vector<int64_t> bounds;
    bounds.reserve(2 * v.size());
    for (size_t i : v) bounds.push_back(ops[i].start_ns), bounds.push_back(ops[i].end_ns);
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    // open ops, innermost first: latest start, then earliest end
    std::set<std::tuple<int64_t, int64_t, size_t>> open;
    size_t next = 0;
    size_t piece_of = ops.size();  // the op of the last piece written, while it may still grow
    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
      const int64_t t = bounds[k];
      while (next < v.size() && ops[v[next]].start_ns == t) {
        open.insert({-ops[v[next]].start_ns, ops[v[next]].end_ns, v[next]});
        ++next;
      }
      while (!open.empty()) {  // drop the ops that ended (not always the innermost: spans may cross)
        auto it = std::find_if(open.begin(), open.end(), [&](const auto& e) { return std::get<1>(e) <= t; });
        if (it == open.end()) break;
        open.erase(it);
      }
      if (open.empty()) {
        piece_of = ops.size();
        continue;
      }
      const size_t owner = std::get<2>(*open.begin());
      if (ops[owner].category == OpCategory::comm) {  // kept whole above
        piece_of = ops.size();
        continue;
      }
      if (piece_of == owner && out.back().end_ns == t) {
        out.back().end_ns = bounds[k + 1];
        continue;
      }
      OpRecord p = ops[owner];
      p.start_ns = t;
      p.end_ns = bounds[k + 1];
      out.push_back(p);
      piece_of = owner;
    }
  }
  return out;
}

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

StepDependencies::StepDependencies(const std::vector<OpRecord>& ops, const std::vector<CollectiveRecord>& collectives)
    : ops_(ops), instance_of_(ops.size(), nullptr) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].end_ns <= ops[i].start_ns) continue;
    by_end_[ops[i].rank].push_back(i);
    by_start_[{ops[i].rank, ops[i].lane}].push_back(i);
  }
  for (auto& [rank, v] : by_end_)
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      return std::tie(ops[a].end_ns, ops[a].start_ns) < std::tie(ops[b].end_ns, ops[b].start_ns);
    });
  for (auto& [lane, v] : by_start_)
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) { return ops[a].start_ns < ops[b].start_ns; });
  instances_ = collective_instances(ops, collectives);
  for (const auto& [key, members] : instances_)
    for (size_t i : members) instance_of_[i] = &members;
}

std::optional<size_t> StepDependencies::last_member(size_t op, int64_t before_ns) const {
  if (!instance_of_[op]) return std::nullopt;
  size_t from = op;
  for (size_t m : *instance_of_[op])
    if (ops_[m].end_ns > ops_[m].start_ns && ops_[m].start_ns > ops_[from].start_ns && ops_[m].start_ns < before_ns) from = m;
  return from == op ? std::nullopt : std::optional<size_t>(from);
}

OpWait StepDependencies::before(int32_t rank, int64_t t) const {
  // the op of the rank that ended last at or before t
  size_t pred = ops_.size();
  if (auto e = by_end_.find(rank); e != by_end_.end()) {
    auto it = std::upper_bound(e->second.begin(), e->second.end(), t,
                               [&](int64_t value, size_t i) { return value < ops_[i].end_ns; });
    if (it != e->second.begin()) pred = *std::prev(it);
  }
  // the op of the rank (any lane) running across t that started last
  size_t running = ops_.size();
  for (auto it = by_start_.lower_bound({rank, INT32_MIN}); it != by_start_.end() && it->first.first == rank; ++it) {
    const auto& v = it->second;
    auto after = std::partition_point(v.begin(), v.end(), [&](size_t i) { return ops_[i].start_ns < t; });
    if (after == v.begin()) continue;
    const size_t i = *std::prev(after);
    if (ops_[i].end_ns > t && (running == ops_.size() || ops_[i].start_ns > ops_[running].start_ns)) running = i;
  }
  if (running != ops_.size() && (pred == ops_.size() || t - ops_[pred].end_ns > kLaunchSlackNs))
    return {OpWait::Kind::launched_from, running};
  if (pred != ops_.size()) return {OpWait::Kind::ended_before, pred};
  return {};
}

OpWait StepDependencies::wait_of(size_t op) const {
  if (auto late = last_member(op, ops_[op].end_ns)) return {OpWait::Kind::collective_peer, *late};
  return before(ops_[op].rank, ops_[op].start_ns);
}

StepCriticalPath critical_path(const std::vector<OpRecord>& all_ops, const std::vector<CollectiveRecord>& collectives,
                               int64_t step) {
  const std::vector<OpRecord> ops = innermost_pieces(all_ops);  // nested spans: their own time only
  StepCriticalPath path;
  path.step = step;
  size_t last = ops.size();
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].end_ns > ops[i].start_ns && (last == ops.size() || ops[i].end_ns > ops[last].end_ns)) last = i;
  if (last == ops.size()) return path;
  const StepDependencies deps(ops, collectives);

  // Walk back from the op that ends last. Time strictly decreases at every hop (a predecessor
  // ends at or before the current start, an op running across it started before it, a late
  // member starts before the segment ends), so the walk terminates.
  std::vector<PathSegment> reversed;
  size_t cur = last;
  int64_t seg_end = ops[cur].end_ns;
  for (;;) {
    const OpRecord& c = ops[cur];
    const size_t from = deps.last_member(cur, seg_end).value_or(cur);  // the op whose start the path continues from
    const int64_t t = std::min(ops[from].start_ns, seg_end);
    reversed.push_back({PathSegment::Kind::op, c.rank, c.lane, c.name_id, c.category, t, seg_end});
    const OpWait w = deps.before(ops[from].rank, t);
    if (w.kind == OpWait::Kind::launched_from) {
      cur = w.op;
      seg_end = t;
      continue;
    }
    if (w.kind == OpWait::Kind::nothing) break;
    if (ops[w.op].end_ns < t)
      reversed.push_back({PathSegment::Kind::gap, ops[from].rank, 0, 0, OpCategory::other, ops[w.op].end_ns, t});
    cur = w.op;
    seg_end = ops[w.op].end_ns;
  }
  path.segments.assign(reversed.rbegin(), reversed.rend());
  path.start_ns = path.segments.front().start_ns;
  path.end_ns = path.segments.back().end_ns;
  return path;
}

void add_collective_times(const std::vector<OpRecord>& ops, const std::map<CollectiveKey, std::vector<size_t>>& instances,
                          std::map<int32_t, CollectiveTimes>& out, const std::vector<CollectiveRecord>& collectives,
                          const std::map<int32_t, std::vector<Interval>>* given_compute) {
  std::map<int32_t, std::vector<const CollectiveRecord*>> records_of_rank;
  for (const auto& c : collectives) records_of_rank[c.rank].push_back(&c);
  // the op's record: same rank and sequence inside the op (an engine run's op), else one holding
  // the op (an imported trace's kernel, the record spanning its kernels)
  auto record_of = [&](const OpRecord& o) -> const CollectiveRecord* {
    auto it = records_of_rank.find(o.rank);
    if (it == records_of_rank.end()) return nullptr;
    for (const CollectiveRecord* c : it->second)
      if (o.correlation != 0 && c->sequence == o.correlation && c->start_ns >= o.start_ns && c->end_ns <= o.end_ns) return c;
    for (const CollectiveRecord* c : it->second)
      if (c->start_ns <= o.start_ns && o.end_ns <= c->end_ns) return c;
    return nullptr;
  };
  std::map<int32_t, std::vector<Interval>> own_compute;
  if (!given_compute) own_compute = compute_intervals(ops);
  const auto& compute = given_compute ? *given_compute : own_compute;
  static const std::vector<Interval> kNone;
  for (const auto& o : ops) {
    if (o.category != OpCategory::comm) continue;
    CollectiveTimes& t = out[o.name_id];
    t.name_id = o.name_id;
    ++t.count;
    t.bytes += o.bytes;
    const CollectiveRecord* rec = o.bytes > 0 ? record_of(o) : nullptr;
    const int64_t both = rec ? rec->bytes_sent + rec->bytes_received : 0;
    // (an op carrying its whole record: exactly its bytes sent; a share of it: long double, 64-bit
    // mantissa, exact enough for any byte count)
    const int64_t sent = both <= 0        ? o.bytes - o.bytes / 2
                         : o.bytes == both ? rec->bytes_sent
                                           : static_cast<int64_t>(static_cast<long double>(o.bytes) *
                                                                  static_cast<long double>(rec->bytes_sent) /
                                                                  static_cast<long double>(both));
    t.bytes_sent += sent;
    t.bytes_received += o.bytes - sent;
    const int64_t dur = std::max<int64_t>(0, o.end_ns - o.start_ns);
    t.time_ns += dur;
    const auto it = compute.find(o.rank);
    const auto& mine = it == compute.end() ? kNone : it->second;
    t.exposed_ns += dur - covered_ns(intersect(mine, merge_intervals({{o.start_ns, o.end_ns}})));
  }
  for (const auto& [key, members] : instances) {
    int64_t latest = ops[members.front()].start_ns;
    for (size_t m : members) latest = std::max(latest, ops[m].start_ns);
    for (size_t m : members) out[key.name_id].wait_ns += std::min(latest, ops[m].end_ns) - ops[m].start_ns;
  }
}

}  // namespace embedscope::sessions
