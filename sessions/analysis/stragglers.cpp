#include "embedscope/sessions/analysis/stragglers.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "embedscope/sessions/model/units.h"  // format_duration

namespace embedscope::sessions {

void add_peer_waits(const std::vector<OpRecord>& ops, const std::map<CollectiveKey, std::vector<size_t>>& instances,
                    std::map<int32_t, RankPeerWait>& out) {
  for (const auto& [key, members] : instances) {
    if (members.empty()) continue;
    int64_t earliest = ops[members.front()].start_ns, latest = earliest;
    std::set<int32_t> ranks;
    for (size_t m : members) {
      earliest = std::min(earliest, ops[m].start_ns);
      latest = std::max(latest, ops[m].start_ns);
      ranks.insert(ops[m].rank);
    }
    std::map<int32_t, int64_t> waited;  // rank -> its members' wait in this instance
    std::set<int32_t> last;             // ranks with a member at the latest start
    for (size_t m : members) {
      const OpRecord& o = ops[m];
      RankPeerWait& w = out[o.rank];
      w.rank = o.rank;
      const int64_t wait = std::min(latest, o.end_ns) - o.start_ns;
      w.waited_ns += wait;
      waited[o.rank] += wait;
      if (o.start_ns == latest && latest > earliest) last.insert(o.rank);
    }
    if (ranks.size() < 2) continue;
    int64_t others = 0;  // the waiting of the ranks that were not last
    for (const auto& [r, ns] : waited) {
      ++out[r].collectives;
      if (!last.contains(r)) others += ns;
    }
    const auto n = static_cast<int64_t>(last.size());
    int64_t rest = n > 0 ? others % n : 0;
    for (int32_t r : last) {
      ++out[r].last_arrivals;
      out[r].caused_wait_ns += others / n + (rest > 0 ? 1 : 0);
      if (rest > 0) --rest;
    }
  }
}

std::optional<RankPeerWait> straggler(const std::vector<RankPeerWait>& ranks) {
  const RankPeerWait* best = nullptr;
  for (const auto& r : ranks)
    if (r.caused_wait_ns > 0 && (!best || r.caused_wait_ns > best->caused_wait_ns ||
                                 (r.caused_wait_ns == best->caused_wait_ns && r.rank < best->rank)))
      best = &r;
  if (!best) return std::nullopt;
  return *best;
}

std::string straggler_text(const std::vector<RankPeerWait>& ranks, int64_t steps) {
  int64_t most = 0;  // collectives on two ranks or more: the most any rank took part in
  for (const auto& r : ranks) most = std::max(most, r.collectives);
  if (most == 0) return "";
  const int64_t per = std::max<int64_t>(1, steps);
  const auto s = straggler(ranks);
  if (!s) return fmt::format("none: no rank kept its peers waiting in a collective ({} collective{} on 2 ranks or more)",
                             most, most == 1 ? "" : "s");
  return fmt::format("rank {}: the last to arrive in {} of its {} collective{}; its peers waited {} for it ({} per step)",
                     s->rank, s->last_arrivals, s->collectives, s->collectives == 1 ? "" : "s",
                     format_duration(s->caused_wait_ns), format_duration(s->caused_wait_ns / per));
}

}  // namespace embedscope::sessions
