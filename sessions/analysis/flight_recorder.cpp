// Where a run's collectives stopped, from the ranks' flight recorder dumps.
#include "embedscope/sessions/analysis/flight_recorder.h"

#include <algorithm>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

namespace {

std::vector<int32_t> parse_members(const std::string& s) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    try {
      size_t used = 0;
      const std::string part = s.substr(i, j - i);
      const int v = std::stoi(part, &used);
      if (used != part.size()) return {};
      out.push_back(v);
    } catch (const std::exception&) {
      return {};
    }
    i = j + 1;
  }
  return out;
}

// "all_reduce 'dense/allreduce' (group world, sequence 7)"
std::string describe(const FlightRecord& e) {
  return fmt::format("{} '{}' (group {}, sequence {})", e.op, e.name, e.group, e.sequence);
}

// "rank 3" / "ranks 1, 2" (analysis.h rank_list, the public one, writes runs as "0-3")
std::string ranks_phrase(const std::vector<int32_t>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

// The entries of each rank's last dump, by rank, in record order.
std::map<int32_t, std::vector<const FlightRecord*>> last_dumps(const std::vector<FlightRecord>& records) {
  std::map<int32_t, int32_t> last;
  for (const auto& r : records) {
    auto [it, fresh] = last.try_emplace(r.rank, r.dump);
    if (!fresh) it->second = std::max(it->second, r.dump);
  }
  std::map<int32_t, std::vector<const FlightRecord*>> out;
  for (const auto& r : records)
    if (r.dump == last[r.rank]) out[r.rank].push_back(&r);
  for (auto& [rank, v] : out)
    std::sort(v.begin(), v.end(), [](const auto* a, const auto* b) { return a->record_id < b->record_id; });
  return out;
}

}  // namespace

const char* to_string(FlightFinding::Kind k) {
  switch (k) {
    case FlightFinding::Kind::opposite_order: return "opposite_order";
    case FlightFinding::Kind::mismatch: return "mismatch";
    case FlightFinding::Kind::not_reached: return "not_reached";
    case FlightFinding::Kind::no_dump: return "no_dump";
    case FlightFinding::Kind::stalled: return "stalled";
  }
  return "not_reached";
}

FlightAnalysis analyze_flight_records(const std::vector<FlightRecord>& records, int world_size,
                                      const std::vector<int32_t>& absent_ranks) {
  FlightAnalysis a;
  if (records.empty()) return a;
  auto dumps = last_dumps(records);
  const std::set<int32_t> absent(absent_ranks.begin(), absent_ranks.end());
  // A SIGUSR1 snapshot older than the collective its peers' failure dumps wait in says nothing
  // about the failure (tester36 D4: a rank SIGKILLed a second after its snapshot read as stuck
  // where the snapshot was): set aside, the rank counts as having left no dump at the failure.
  const auto is_snapshot = [](const std::string& reason) { return reason == "SIGUSR1"; };
  int64_t failure_start = std::numeric_limits<int64_t>::max();
  for (const auto& [rank, v] : dumps) {
    if (v.empty() || is_snapshot(v.front()->reason)) continue;
    int64_t t = v.front()->dump_time_ns;
    for (const auto* e : v)
      if (e->state != "completed") {
        t = e->time_created_ns;
        break;
      }
    failure_start = std::min(failure_start, t);
  }
  std::map<int32_t, std::string> stale;
  if (failure_start != std::numeric_limits<int64_t>::max())
    for (auto it = dumps.begin(); it != dumps.end();) {
      const FlightRecord* first = it->second.empty() ? nullptr : it->second.front();
      if (first && is_snapshot(first->reason) && first->dump_time_ns < failure_start) {
        stale[it->first] = fmt::format("its last dump, a SIGUSR1 snapshot, was taken {:.3f} s before its peers entered "
                                       "the collective they failed in",
                                       static_cast<double>(failure_start - first->dump_time_ns) / 1e9);
        it = dumps.erase(it);
      } else {
        ++it;
      }
    }
  // --- the ranks: the world, every rank that dumped, every member of a group
  std::set<int32_t> all_ranks;
  for (int r = 0; r < world_size; ++r) all_ranks.insert(r);
  std::map<std::string, std::vector<int32_t>> members;  // first dump naming the group wins
  std::vector<FlightFinding> mismatches;
  std::set<std::string> member_mismatch_reported;
  for (const auto& [rank, entries] : dumps) {
    all_ranks.insert(rank);
    for (const auto* e : entries) {
      auto m = parse_members(e->members);
      for (int32_t x : m) all_ranks.insert(x);
      auto [it, fresh] = members.try_emplace(e->group, m);
      if (!fresh && it->second != m && member_mismatch_reported.insert(e->group).second) {
        FlightFinding f;
        f.kind = FlightFinding::Kind::mismatch;
        f.ranks = {rank};
        f.groups = {e->group};
        f.text = fmt::format("rank {} has group {} with members {}, another rank with members {}", rank, e->group,
                             e->members, fmt::join(it->second, ","));
        mismatches.push_back(std::move(f));
      }
    }
  }
  for (int32_t r : all_ranks) {
    FlightRankState s;
    s.rank = r;
    s.in_session = !absent.count(r);
    if (auto st = stale.find(r); st != stale.end()) s.stale_dump = st->second;
    if (auto it = dumps.find(r); it != dumps.end() && !it->second.empty()) {
      const auto& v = it->second;
      s.dumped = true;
      s.dump = v.front()->dump;
      s.reason = v.front()->reason;
      s.dump_time_ns = v.front()->dump_time_ns;
      s.ring_dropped = v.front()->ring_dropped;
      s.entries = static_cast<int64_t>(v.size());
      for (const auto* e : v) {
        if (e->state != "completed") s.in_flight.push_back(*e);
        if (e->state == "completed") s.last_completed = *e;
      }
      if (!s.in_flight.empty()) s.waiting = s.in_flight.front();
    }
    a.ranks.push_back(std::move(s));
  }
  auto state_of = [&](int32_t r) -> const FlightRankState& {
    return *std::find_if(a.ranks.begin(), a.ranks.end(), [&](const auto& s) { return s.rank == r; });
  };
  // --- each group: how far each member got, and what each (group, sequence) was on each rank
  std::map<std::pair<std::string, uint64_t>, std::map<int32_t, const FlightRecord*>> at;  // (group, seq) -> rank -> entry
  for (const auto& [rank, entries] : dumps)
    for (const auto* e : entries) at[{e->group, e->sequence}][rank] = e;
  for (const auto& [name, m] : members) {
    FlightGroupState g;
    g.group = name;
    g.members = m;
    for (int32_t r : m) {
      uint64_t entered = 0, completed = 0;
      const bool dumped = dumps.count(r) > 0;
      if (dumped)
        for (const auto* e : dumps.at(r))
          if (e->group == name) {
            entered = std::max(entered, e->sequence);
            if (e->state == "completed") completed = std::max(completed, e->sequence);
          }
      g.entered.push_back(entered);
      g.completed.push_back(completed);
      g.dumped.push_back(dumped);
    }
    uint64_t everywhere = UINT64_MAX;
    for (size_t i = 0; i < m.size(); ++i)
      if (g.dumped[i]) everywhere = std::min(everywhere, g.completed[i]);
    g.completed_everywhere = everywhere == UINT64_MAX ? 0 : everywhere;
    if (g.completed_everywhere > 0)
      if (auto it = at.find({name, g.completed_everywhere}); it != at.end()) g.completed_everywhere_entry = *it->second.begin()->second;
    a.groups.push_back(std::move(g));
  }
  // --- different collectives at one (group, sequence)
  std::set<std::string> mismatched_groups;
  for (const auto& [key, by_rank] : at) {
    if (mismatched_groups.count(key.first)) continue;  // the first per group says it; later ones follow from it
    const FlightRecord* first = by_rank.begin()->second;
    for (const auto& [rank, e] : by_rank) {
      const bool same_sizes = e->op != "all_reduce" || e->input_elements == first->input_elements;
      if (e->op == first->op && e->name == first->name && e->dtype == first->dtype && same_sizes) continue;
      FlightFinding f;
      f.kind = FlightFinding::Kind::mismatch;
      f.ranks = {first->rank, rank};
      f.groups = {key.first, key.first};
      f.sequences = {key.second, key.second};
      f.text = fmt::format("ranks {} and {} ran different collectives at group {}'s sequence {}: rank {} {} '{}' ({} "
                           "{} elements), rank {} {} '{}' ({} {} elements)",
                           first->rank, rank, key.first, key.second, first->rank, first->op, first->name,
                           first->input_elements, first->dtype, rank, e->op, e->name, e->input_elements, e->dtype);
      mismatches.push_back(std::move(f));
      mismatched_groups.insert(key.first);
      break;
    }
  }
  // --- who waits for whom: rank A waits in (G, s) for the members of G that have not entered s
  auto entered_in = [&](int32_t r, const std::string& group) -> uint64_t {
    for (const auto& g : a.groups)
      if (g.group == group)
        for (size_t i = 0; i < g.members.size(); ++i)
          if (g.members[i] == r) return g.entered[i];
    return 0;
  };
  auto in_group = [&](int32_t r, const std::string& group) {
    const auto it = members.find(group);
    return it != members.end() && std::find(it->second.begin(), it->second.end(), r) != it->second.end();
  };
  std::vector<FlightFinding> opposite, not_reached, no_dump, stalled;
  std::set<std::tuple<int32_t, std::string, uint64_t>> stall_said;  // (rank, group, sequence)
  std::set<std::pair<int32_t, std::string>> explained;  // (rank, group) an opposite order accounts for
  for (const auto& sa : a.ranks) {
    if (!sa.waiting) continue;
    const FlightRecord& wa = *sa.waiting;
    for (const auto& sb : a.ranks) {
      if (sb.rank <= sa.rank || !sb.waiting) continue;
      const FlightRecord& wb = *sb.waiting;
      if (wa.group == wb.group || !in_group(sb.rank, wa.group) || !in_group(sa.rank, wb.group)) continue;
      if (entered_in(sb.rank, wa.group) >= wa.sequence || entered_in(sa.rank, wb.group) >= wb.sequence) continue;
      FlightFinding f;
      f.kind = FlightFinding::Kind::opposite_order;
      f.ranks = {sa.rank, sb.rank};
      f.groups = {wa.group, wb.group};
      f.sequences = {wa.sequence, wb.sequence};
      f.text = fmt::format("ranks {} and {} entered process groups {} and {} in opposite orders: rank {} waits in {} and "
                           "has not reached group {}'s sequence {}; rank {} waits in {} and has not reached group {}'s "
                           "sequence {}",
                           sa.rank, sb.rank, wa.group, wb.group, sa.rank, describe(wa), wb.group, wb.sequence, sb.rank,
                           describe(wb), wa.group, wa.sequence);
      opposite.push_back(std::move(f));
      explained.insert({sb.rank, wa.group});
      explained.insert({sa.rank, wb.group});
    }
  }
  for (const auto& g : a.groups) {
    uint64_t frontier = 0;
    for (size_t i = 0; i < g.members.size(); ++i) frontier = std::max(frontier, g.entered[i]);
    if (frontier == 0) continue;
    // per sequence not reached by someone: who waits in it and who has not entered it
    std::map<uint64_t, std::vector<int32_t>> missing;  // the next sequence each laggard did not enter
    for (size_t i = 0; i < g.members.size(); ++i)
      if (g.dumped[i] && g.entered[i] < frontier && !explained.count({g.members[i], g.group}))
        missing[g.entered[i] + 1].push_back(g.members[i]);
    std::vector<int32_t> undumped, elsewhere;  // left no dump; not in this session
    for (size_t i = 0; i < g.members.size(); ++i)
      if (!g.dumped[i]) (absent.count(g.members[i]) ? elsewhere : undumped).push_back(g.members[i]);
    for (const auto& [seq, laggards] : missing) {
      const auto it = at.find({g.group, seq});
      if (it == at.end()) continue;  // older than every dump's ring
      const FlightRecord& e = *it->second.begin()->second;
      std::vector<int32_t> waiting;
      for (const auto& [r, x] : it->second)
        if (x->state != "completed") waiting.push_back(r);
      for (int32_t r : laggards) {
        const FlightRankState& s = state_of(r);
        // r waits in (group, seq - 1), which a peer completed only after spending longer than the
        // timeout in it: that peer stalled (it was stopped inside it), r gave up and left
        if (s.waiting && s.waiting->group == g.group && s.waiting->sequence + 1 == seq) {
          std::vector<const FlightRecord*> slow;
          if (const auto prev = at.find({g.group, seq - 1}); prev != at.end())
            for (const auto& [p, x] : prev->second) {
              const int64_t limit_ns = std::max(x->timeout_ms, s.waiting->timeout_ms) * 1'000'000;
              if (p != r && x->state == "completed" && limit_ns > 0 && x->time_completed_ns >= 0 &&
                  x->time_completed_ns - x->time_created_ns > limit_ns)
                slow.push_back(x);
            }
          if (!slow.empty()) {
            for (const FlightRecord* x : slow) {
              if (!stall_said.insert({x->rank, g.group, seq - 1}).second) continue;
              FlightFinding f;
              f.kind = FlightFinding::Kind::stalled;
              f.ranks = {x->rank};
              f.groups = {g.group};
              f.sequences = {seq - 1};
              f.text = fmt::format(
                  "rank {} stalled in {}: it spent {:.1f} s in it, longer than the {} ms timeout after which rank {} "
                  "gave up (a stopped or stalled process: SIGSTOP, swapping, a debugger); rank {} then left it and did "
                  "not reach {}{}",
                  x->rank, describe(*x), static_cast<double>(x->time_completed_ns - x->time_created_ns) / 1e9,
                  s.waiting->timeout_ms, r, r, describe(e),
                  waiting.empty() ? std::string()
                                  : fmt::format(", which {} wait{} in", ranks_phrase(waiting), waiting.size() == 1 ? "s" : ""));
              stalled.push_back(std::move(f));
            }
            continue;
          }
        }
        std::string where = s.waiting ? fmt::format("it waits in {}", describe(*s.waiting))
                            : s.last_completed ? fmt::format("its last collective, {}, completed", describe(*s.last_completed))
                                               : std::string("it recorded no collective");
        FlightFinding f;
        f.kind = FlightFinding::Kind::not_reached;
        f.ranks = {r};
        f.groups = {g.group};
        f.sequences = {seq};
        f.text = fmt::format("rank {} did not reach {}{}; {}", r, describe(e),
                             waiting.empty() ? std::string() : fmt::format(", which {} wait{} in", ranks_phrase(waiting),
                                                                          waiting.size() == 1 ? "s" : ""),
                             where);
        not_reached.push_back(std::move(f));
      }
    }
    if (!undumped.empty() || !elsewhere.empty()) {  // the collective the dumped members wait in, for the others
      const auto it = at.find({g.group, frontier});
      std::vector<int32_t> waiting;
      if (it != at.end())
        for (const auto& [r, x] : it->second)
          if (x->state != "completed") waiting.push_back(r);
      if (!waiting.empty()) {
        const std::string where = describe(*it->second.at(waiting.front()));
        const std::string wait = fmt::format("{} wait{} in {}", ranks_phrase(waiting), waiting.size() == 1 ? "s" : "", where);
        const std::string not_here =
            elsewhere.empty() ? std::string()
                              : fmt::format("{} {} not in this session (each process wrote its own: merge the ranks' "
                                            "sessions to see where {} stopped)",
                                            ranks_phrase(elsewhere), elsewhere.size() == 1 ? "is" : "are",
                                            elsewhere.size() == 1 ? "it" : "they");
        std::vector<int32_t> set_aside;
        for (int32_t r : undumped)
          if (stale.count(r)) set_aside.push_back(r);
        FlightFinding f;
        f.kind = FlightFinding::Kind::not_reached;
        f.ranks = undumped.empty() ? elsewhere : undumped;
        f.groups = {g.group};
        f.sequences = {frontier};
        if (undumped.empty())
          f.text = fmt::format("{}; {}", wait, not_here);
        else
          f.text = fmt::format("{} left no dump{}; {} for {}{}", ranks_phrase(undumped),
                               set_aside.empty() ? std::string()
                                                 : fmt::format(" at the failure ({}: {})", ranks_phrase(set_aside),
                                                               stale.at(set_aside.front())),
                               wait, undumped.size() == 1 ? "it" : "them", not_here.empty() ? "" : "; " + not_here);
        not_reached.push_back(std::move(f));
      }
    }
  }
  // --- a member that stayed inside a failed collective long after its peers had failed (tester53
  // F4). A rank closes its connections when it fails, so a running member of its groups leaves any
  // collective at once then (or at its own timeout before): a member X that entered a collective
  // of group G before the first of G's other members failed, and failed there more than
  // max(timeout, 1 s) after the last of them had, did not run meanwhile (SIGSTOP, swapping, a
  // debugger). A failed record keeps its state and has time_completed_ns >= 0 (its failure time).
  const auto failed = [](const FlightRecord& e) { return e.state != "completed" && e.time_completed_ns >= 0; };
  std::map<int32_t, int64_t> first_failure;  // rank -> its earliest failure time in the dump
  for (const auto& st : a.ranks)
    for (const auto& e : st.in_flight)
      if (failed(e)) {
        auto [it, fresh] = first_failure.try_emplace(st.rank, e.time_completed_ns);
        if (!fresh) it->second = std::min(it->second, e.time_completed_ns);
      }
  for (const auto& sx : a.ranks)
    for (const auto& ex : sx.in_flight) {
      if (!failed(ex) || stall_said.count({sx.rank, ex.group, ex.sequence})) continue;
      int64_t first_peer = std::numeric_limits<int64_t>::max(), last_peer = std::numeric_limits<int64_t>::min();
      std::vector<int32_t> peers;
      const auto mit = members.find(ex.group);
      if (mit == members.end()) continue;
      for (int32_t p : mit->second) {
        const auto f = first_failure.find(p);
        if (p == sx.rank || f == first_failure.end()) continue;
        peers.push_back(p);
        first_peer = std::min(first_peer, f->second);
        last_peer = std::max(last_peer, f->second);
      }
      const int64_t timeout_ms = ex.timeout_ms;
      const int64_t margin_ns = std::max<int64_t>(timeout_ms, 1000) * 1'000'000;
      if (peers.empty() || timeout_ms <= 0 || ex.time_created_ns >= first_peer ||
          ex.time_completed_ns - last_peer <= margin_ns)
        continue;
      stall_said.insert({sx.rank, ex.group, ex.sequence});
      FlightFinding f;
      f.kind = FlightFinding::Kind::stalled;
      f.ranks = {sx.rank};
      f.groups = {ex.group};
      f.sequences = {ex.sequence};
      f.text = fmt::format(
          "rank {} stalled in {}: it had entered it before {} failed ({} ms timeout), and failed there only {:.1f} s "
          "after the last of them, {:.1f} s after it entered; a running rank leaves a collective at its timeout or "
          "as soon as its peers close their connections, so rank {}'s process did not run meanwhile (a stopped or "
          "stalled process: SIGSTOP, swapping, a debugger; not a slow link)",
          sx.rank, describe(ex), ranks_phrase(peers), timeout_ms,
          static_cast<double>(ex.time_completed_ns - last_peer) / 1e9,
          static_cast<double>(ex.time_completed_ns - ex.time_created_ns) / 1e9, sx.rank);
      stalled.push_back(std::move(f));
      break;  // one finding per rank: its oldest such collective
    }
  std::set<int32_t> said;  // ranks a finding above already names as having left no dump
  for (const auto& f : not_reached)
    if (f.ranks.size() != 1 || !state_of(f.ranks.front()).dumped) said.insert(f.ranks.begin(), f.ranks.end());
  for (const auto& s : a.ranks)
    if (!s.dumped && s.in_session && !said.count(s.rank)) {
      FlightFinding f;
      f.kind = FlightFinding::Kind::no_dump;
      f.ranks = {s.rank};
      f.text = s.stale_dump.empty()
                   ? fmt::format("rank {} left no flight recorder dump (its process was killed, or its run did not "
                                 "reach a dump)", s.rank)
                   : fmt::format("rank {} left no flight recorder dump at the failure ({})", s.rank, s.stale_dump);
      no_dump.push_back(std::move(f));
    }
  for (auto* v : {&opposite, &mismatches, &stalled, &not_reached, &no_dump})
    a.findings.insert(a.findings.end(), std::make_move_iterator(v->begin()), std::make_move_iterator(v->end()));
  // no finding, yet ranks inside collectives: what that means (tester36 D10, D14)
  bool any_waiting = false, all_snapshots = true, none_started = true;
  for (const auto& s : a.ranks) {
    if (!s.dumped) continue;
    all_snapshots &= is_snapshot(s.reason);
    for (const auto& e : s.in_flight) {
      any_waiting = true;
      none_started &= e.state == "scheduled";
    }
  }
  if (a.findings.empty() && any_waiting)
    a.in_flight_note =
        all_snapshots ? "a snapshot taken while the run went on (SIGUSR1): the collectives below were in flight at that "
                        "instant, which is no sign of a failure"
        : none_started
            ? "every rank entered the collectives below but none started its transfer: the rendezvous store or the "
              "transport failed before any data moved"
            : "every rank reached the collectives its peers wait in: their transfers did not finish (a slow link, or a "
              "peer that failed inside the collective)";
  return a;
}

void defer_to_recorded_hang(FlightAnalysis& a, const std::string& end_message) {
  // engine/comm: "[rank W: ]OP 'NAME' (group G, sequence S) did not finish within T ms: rank(s) A, B did not arrive"
  static const std::regex kHang(
      R"((?:rank (\d+): )?(\S+ '[^']*' \(group ([^,()]+), sequence (\d+)\)) did not finish within (\d+) ms: rank\(s\) ([0-9, ]+) did not arrive)");
  std::smatch m;
  if (!std::regex_search(end_message, m, kHang)) return;
  const std::string waiter = m[1].matched ? "rank " + m[1].str() : std::string("a peer");
  const std::string head = m[2], group = m[3];
  uint64_t seq = 0;
  try {
    seq = std::stoull(m[4].str());
  } catch (const std::exception&) {
    return;
  }
  const std::vector<int32_t> late_named = parse_members(m[6].str());
  const auto g = std::find_if(a.groups.begin(), a.groups.end(), [&](const FlightGroupState& x) { return x.group == group; });
  if (g == a.groups.end()) return;
  std::vector<FlightFinding> late;
  for (int32_t r : late_named) {
    const auto i = std::find(g->members.begin(), g->members.end(), r) - g->members.begin();
    if (static_cast<size_t>(i) >= g->members.size() || !g->dumped[static_cast<size_t>(i)] ||
        g->entered[static_cast<size_t>(i)] < seq)
      continue;  // no dump there, or it never entered: the other findings say so
    const bool said = std::any_of(a.findings.begin(), a.findings.end(), [&](const FlightFinding& f) {
      return f.kind == FlightFinding::Kind::stalled && f.ranks == std::vector<int32_t>{r} && !f.groups.empty() &&
             f.groups[0] == group && !f.sequences.empty() && f.sequences[0] == seq;
    });
    if (said) continue;
    const bool inside = g->completed[static_cast<size_t>(i)] < seq;
    FlightFinding f;
    f.kind = FlightFinding::Kind::stalled;
    f.ranks = {r};
    f.groups = {group};
    f.sequences = {seq};
    f.text = fmt::format("rank {} arrived late in {}: {}'s own hang records that it had not arrived when its {} ms "
                         "timeout ran out, and rank {}'s dump shows it {} the collective since (a stopped or stalled "
                         "process: SIGSTOP, swapping, a debugger; not a slow link)",
                         r, head, waiter, m[5].str(), r, inside ? "inside" : "entered");
    late.push_back(std::move(f));
  }
  if (late.empty()) return;
  const auto at = std::find_if(a.findings.begin(), a.findings.end(), [](const FlightFinding& f) {
    return f.kind == FlightFinding::Kind::not_reached || f.kind == FlightFinding::Kind::no_dump;
  });
  a.findings.insert(at, std::make_move_iterator(late.begin()), std::make_move_iterator(late.end()));
  a.in_flight_note.clear();
}

FlightAnalysis analyze_flight_records(const SessionReader& session) {
  const auto records = session.flight_records();
  if (records.empty()) return {};
  int world = 0;
  try {
    world = std::stoi(session.meta(meta::kWorldSize, "0"));
  } catch (const std::exception&) {
    world = 0;
  }
  // a rank-per-process session holds its own rank: the others are in their own sessions
  std::vector<int32_t> absent;
  if (!session.meta(meta::kProcessRank).empty()) {
    std::set<int32_t> present;
    for (const auto& l : session.lanes()) present.insert(l.rank);
    for (int32_t r = 0; r < world; ++r)
      if (!present.empty() && !present.count(r)) absent.push_back(r);
  }
  FlightAnalysis a = analyze_flight_records(records, world, absent);
  // A run that stopped cleanly after a signal (ended "cancelled": SIGTERM / SIGINT / Ctrl-C make
  // every rank finish its step, then stop) dumped its rings when the signal arrived, mid-step:
  // the ranks were at different collectives, which then all completed. No hang to report
  // (tester41 #1: a clean SIGTERM read as "rank 0 did not reach all_to_all ...", in red).
  if (session.meta(meta::kEnded) == "cancelled" && !a.findings.empty()) {
    std::set<std::string> reasons;
    for (const auto& s : a.ranks)
      if (s.dumped) reasons.insert(s.reason);
    a.findings.clear();
    a.in_flight_note = fmt::format(
        "dumped when {} arrived, mid-step; the run then finished that step and stopped cleanly (ended: cancelled), so "
        "the collectives below completed after the dump: no sign of a hang",
        fmt::join(reasons, " / "));
  } else {
    defer_to_recorded_hang(a, session.meta(meta::kEndMessage, ""));
  }
  return a;
}

}  // namespace embedscope::sessions
