#include "embedscope/sessions/importers/common/clock_align.h"
#include "embedscope/sessions/model/did_not_end.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace embedscope::sessions::importers {

void shift_rank(RankRecords& r, int64_t d) {
  for (auto& o : r.ops) o.start_ns += d, o.end_ns += d;
  for (auto& s : r.steps) s.start_ns += d, s.end_ns += d;
  for (auto& c : r.collectives) c.start_ns += d, c.end_ns += d;
}

void write_rank(const RankRecords& r, SessionWriter& w, int64_t& lo, int64_t& hi) {
  w.add_rank(r.info);
  for (const auto& l : r.lanes) w.add_lane(l);
  for (const auto& s : r.steps) w.add_step(s);
  for (const auto& c : r.collectives) w.add_collective(c);
  for (const auto& o : r.ops)  // the time range is the valid events': ops that did not end are left out
    if (!did_not_end(o.start_ns, o.end_ns, o.name)) lo = std::min(lo, o.start_ns), hi = std::max(hi, o.end_ns);
  for (size_t i = 0; i < r.ops.size(); i += 100000) w.add_ops(r.ops.data() + i, std::min<size_t>(r.ops.size() - i, 100000));
}

namespace {
int64_t median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  if (n == 0) return 0;
  if (n % 2) return v[n / 2];
  const int64_t a = v[n / 2 - 1], b = v[n / 2];
  return a + (b - a) / 2;  // no overflow
}
}  // namespace

ClockAlignment align_by_collectives(const std::vector<RankRecords>& ranks) {
  ClockAlignment out;
  // (group, op, sequence) -> rank -> end (the earliest record of the rank, should there be two).
  // The op as well: one collective is one operation on every member, and a trace that numbers no
  // collective (the legacy profiler's gloo:* calls, kineto host_collectives.h) numbers them per
  // operation
  std::map<std::tuple<std::string, std::string, uint64_t>, std::map<int32_t, int64_t>> ends;
  std::set<int32_t> all;
  for (const auto& r : ranks) {
    all.insert(r.rank);
    for (const auto& c : r.collectives) {
      auto [it, fresh] = ends[{c.group, c.op, c.sequence}].try_emplace(r.rank, c.end_ns);
      if (!fresh) it->second = std::min(it->second, c.end_ns);
    }
  }
  if (all.empty()) return out;
  out.reference_rank = *all.begin();
  std::map<int32_t, int64_t> aligned{{out.reference_rank, 0}};
  for (bool grew = true; grew;) {
    grew = false;
    for (int32_t r : all) {
      if (aligned.count(r)) continue;
      std::vector<int64_t> diffs;
      for (const auto& [key, members] : ends) {
        auto mine = members.find(r);
        if (mine == members.end()) continue;
        // the aligned member with the lowest rank stands for the collective's end
        for (const auto& [m, end] : members)
          if (auto a = aligned.find(m); a != aligned.end()) {
            diffs.push_back(mine->second - (end - a->second));
            break;
          }
      }
      if (diffs.empty()) continue;
      aligned[r] = median(diffs);
      out.matches[r] = static_cast<int64_t>(diffs.size());
      grew = true;
    }
  }
  for (int32_t r : all) {
    auto a = aligned.find(r);
    out.offset_ns[r] = a == aligned.end() ? 0 : a->second;
    if (a == aligned.end()) out.unaligned.push_back(r);
  }
  std::vector<int64_t> skews;
  for (const auto& [key, members] : ends) {
    if (members.size() < 2) continue;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const auto& [m, end] : members) lo = std::min(lo, end - out.offset_ns[m]), hi = std::max(hi, end - out.offset_ns[m]);
    skews.push_back(hi - lo);
  }
  out.matched_collectives = static_cast<int64_t>(skews.size());
  if (!skews.empty()) {
    out.max_skew_ns = *std::max_element(skews.begin(), skews.end());
    out.median_skew_ns = median(skews);
  }
  return out;
}

ClockAlignment align_ranks(std::vector<RankRecords>& ranks, int64_t& origin, ImportProblems& problems) {
  const ClockAlignment a = align_by_collectives(ranks);
  int64_t min_t = std::numeric_limits<int64_t>::max();
  for (auto& rec : ranks) {
    shift_rank(rec, -a.offset_ns.at(rec.rank));
    for (const auto& o : rec.ops)
      if (!did_not_end(o.start_ns, o.end_ns, o.name)) min_t = std::min(min_t, o.start_ns);
    for (const auto& st : rec.steps) min_t = std::min(min_t, st.start_ns);
  }
  if (min_t == std::numeric_limits<int64_t>::max()) min_t = 0;
  // time 0 at the earliest aligned event, in whole microseconds (floor): a rank whose clock ran
  // behind held the raw minimum, which after alignment is no event at all (tester34 D16: 10 s
  // of nothing before the first op)
  const int64_t rebase = min_t < 0 ? -((-min_t + 999) / 1000) * 1000 : min_t / 1000 * 1000;
  if (rebase)
    for (auto& rec : ranks) shift_rank(rec, -rebase);
  origin += rebase;
  for (int32_t r : a.unaligned)
    problems.add_with("unaligned_rank", Severity::error, {"", -1}, [&] {
      return fmt::format("rank {} shares no collective (process group, operation and sequence number) with an aligned rank: its "
                         "clock is kept as recorded", r);
    });
  return a;
}

std::string alignment_json(const ClockAlignment& a) {
  nlohmann::json offsets = nlohmann::json::object(), matches = nlohmann::json::object();
  for (const auto& [r, o] : a.offset_ns) offsets[std::to_string(r)] = o;
  for (const auto& [r, n] : a.matches) matches[std::to_string(r)] = n;
  return nlohmann::json{{"method", "collectives"},
                        {"reference_rank", a.reference_rank},
                        {"offsets_ns", offsets},
                        {"matches", matches},
                        {"matched_collectives", a.matched_collectives},
                        {"max_skew_ns", a.max_skew_ns},
                        {"median_skew_ns", a.median_skew_ns},
                        {"unaligned_ranks", a.unaligned}}
      .dump();
}

std::string alignment_text(const ClockAlignment& a) {
  std::string s = fmt::format("clock alignment by collectives (same group, operation and sequence end together), reference rank {}\n",
                              a.reference_rank);
  for (const auto& [r, o] : a.offset_ns) {
    auto m = a.matches.find(r);
    const bool unaligned = std::find(a.unaligned.begin(), a.unaligned.end(), r) != a.unaligned.end();
    s += fmt::format("  rank {:<4} clock offset {:+.3f} us{}\n", r, static_cast<double>(o) / 1e3,
                     r == a.reference_rank ? std::string(" (reference)")
                     : unaligned           ? std::string(" (no collective in common: not aligned)")
                                           : fmt::format(" (median of {} collective end(s))", m == a.matches.end() ? 0 : m->second));
  }
  s += fmt::format("  residual skew of {} matched collective(s): max {:.3f} us, median {:.3f} us\n", a.matched_collectives,
                   static_cast<double>(a.max_skew_ns) / 1e3, static_cast<double>(a.median_skew_ns) / 1e3);
  return s;
}

namespace {
/// With align "none" the ranks sit on their processes' wall clocks. The members of one collective
/// end together (clock_align.h), so a rank whose collectives end, by the median, more than this
/// apart from the reference rank's was placed by a wall clock (or a clock anchor) that was off.
/// Measured on one machine (tester36): 0.1-1 ms between processes whose clocks agreed, 7.5 ms
/// for one whose anchor was read across a preemption.
constexpr int64_t kClockDisagreementNs = 2'000'000;

}  // namespace

void check_wall_clock_agreement(const std::vector<RankRecords>& ranks, ImportProblems& problems) {
  const ClockAlignment a = align_by_collectives(ranks);
  for (const auto& rr : ranks) {
    const auto it = a.offset_ns.find(rr.rank);
    if (it == a.offset_ns.end() || std::llabs(it->second) <= kClockDisagreementNs) continue;
    const auto m = a.matches.find(rr.rank);
    problems.add("clock_disagreement", Severity::error, {rr.file, -1},
                 fmt::format("rank {}: its collectives end {:.3f} ms {} rank {}'s on the recorded wall clocks (median of "
                             "{} collective end(s)); its process's clock or clock anchor was off: `--align "
                             "collectives` (import or merge) puts the ranks on one clock by their collectives",
                             rr.rank, std::llabs(it->second) / 1e6, it->second > 0 ? "later than" : "earlier than",
                             a.reference_rank, m == a.matches.end() ? 0 : m->second));
  }
}

RankSpan rank_span(const RankRecords& r) {
  RankSpan s{.rank = r.rank, .file = r.file};
  auto widen = [&](int64_t a, int64_t b) {
    s.start_ns = s.empty ? a : std::min(s.start_ns, a);
    s.end_ns = s.empty ? b : std::max(s.end_ns, b);
    s.empty = false;
  };
  for (const auto& st : r.steps) widen(st.start_ns, st.end_ns);
  for (const auto& o : r.ops)
    if (!did_not_end(o.start_ns, o.end_ns, o.name)) widen(o.start_ns, o.end_ns);
  return s;
}

namespace {
/// A gap between two ranks' ranges in the largest unit that reads well ("51.6 days", "3.2 h").
std::string gap_text(int64_t ns) {
  const double s = static_cast<double>(ns) / 1e9;
  if (s >= 86400) return fmt::format("{:.1f} days", s / 86400);
  if (s >= 3600) return fmt::format("{:.1f} h", s / 3600);
  if (s >= 1) return fmt::format("{:.3f} s", s);
  return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
}
}  // namespace

namespace {
constexpr std::string_view kAlignedClocks = "on the clocks aligned by collectives";
}  // namespace

void check_time_ranges_overlap(const std::vector<RankSpan>& spans, ImportProblems& problems, bool aligned) {
  const RankSpan* ref = nullptr;
  for (const auto& s : spans)
    if (!s.empty && (!ref || s.rank < ref->rank)) ref = &s;
  if (!ref) return;
  for (const auto& s : spans) {
    if (s.empty || &s == ref) continue;
    if (s.start_ns <= ref->end_ns && ref->start_ns <= s.end_ns) continue;  // they overlap
    const int64_t gap = s.start_ns > ref->end_ns ? s.start_ns - ref->end_ns : ref->start_ns - s.end_ns;
    problems.add("disjoint_time_ranges", Severity::error, {s.file, -1},
                 fmt::format("rank {} ({}) spans {:.6f} .. {:.6f} s and rank {} ({}) {:.6f} .. {:.6f} s from the earliest "
                             "input's first event, {}: they do not overlap ({} apart); the ranks of one job run at the same time: traces "
                             "of different runs? (import the traces of one job together)",
                             s.rank, s.file, static_cast<double>(s.start_ns) / 1e9, static_cast<double>(s.end_ns) / 1e9,
                             ref->rank, ref->file, static_cast<double>(ref->start_ns) / 1e9,
                             static_cast<double>(ref->end_ns) / 1e9,
                             aligned ? kAlignedClocks : std::string_view("on the recorded clocks"), gap_text(gap)));
  }
}

std::string disjoint_refusal(const std::vector<ImportStat>& problems, const std::string& anyway) {
  for (const auto& p : problems)
    if (p.name == "disjoint_time_ranges" && p.example.find(kAlignedClocks) != std::string::npos)
      return fmt::format("{}: refused: {}{}. --align collectives found no collective in common to put them on one "
                         "clock: import each job's traces on their own, or {}",
                         p.source, p.example,
                         p.count > 1 ? fmt::format(" (and {} more such rank{})", p.count - 1, p.count == 2 ? "" : "s") : "",
                         anyway);
    else if (p.name == "disjoint_time_ranges")
      return fmt::format("{}: refused: {}{}. Import each job's traces on their own; if they are the ranks of one job "
                         "whose clocks disagree, use --align collectives, or {}",
                         p.source, p.example,
                         p.count > 1 ? fmt::format(" (and {} more such rank{})", p.count - 1, p.count == 2 ? "" : "s") : "",
                         anyway);
  return "";
}

}  // namespace embedscope::sessions::importers
