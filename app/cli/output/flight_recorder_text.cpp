#include "output/flight_recorder_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace embedscope::cli {

namespace ss = embedscope::sessions;
using nlohmann::json;

namespace {
std::string entry_text(const ss::FlightRecord& e) {
  // a warm-up step is negative (sessions number the measured steps from 0): say so (tester35 D13)
  return fmt::format("{} '{}' (group {}, sequence {}, step {}{})", e.op, e.name, e.group, e.sequence, e.step,
                     e.step < 0 ? ", warm-up" : "");
}
json entry_json(const std::optional<ss::FlightRecord>& e) {
  if (!e) return nullptr;
  return {{"group", e->group}, {"sequence", e->sequence}, {"op", e->op}, {"name", e->name}, {"state", e->state},
          {"step", e->step}};
}
}  // namespace

std::string flight_recorder_text(const ss::FlightAnalysis& a) {
  if (a.empty()) return "";
  bool waiting = false;
  for (const auto& r : a.ranks) waiting |= r.waiting.has_value();
  std::string out = fmt::format("flight recorder (each rank's last dump of its last collectives){}\n",
                                a.findings.empty() && !waiting ? ": every rank completed every collective it entered" : "");
  for (const auto& f : a.findings) out += fmt::format("  ! {}\n", f.text);
  if (!a.in_flight_note.empty()) out += fmt::format("  {}\n", a.in_flight_note);
  out += fmt::format("  {:<5} {:>5} {:<22} {:>8}  {}\n", "rank", "dump", "reason", "entries", "waits in");
  for (const auto& r : a.ranks) {
    if (!r.dumped) {
      const char* why = !r.in_session ? "(not in this session)" : !r.stale_dump.empty() ? "(older dump set aside)" : "(no dump)";
      out += fmt::format("  {:<5} {:>5} {:<22} {:>8}  {}\n", r.rank, "-", why, "-", "-");
      continue;
    }
    // every collective the rank is inside (a dist on one lane, the dense all-reduce on another)
    std::string in;
    for (const auto& e : r.in_flight) in += (in.empty() ? "" : "; also ") + entry_text(e) + " " + e.state;
    out += fmt::format("  {:<5} {:>5} {:<22} {:>8}  {}\n", r.rank, r.dump, r.reason, r.entries, in.empty() ? "-" : in);
  }
  for (const auto& g : a.groups)
    out += fmt::format("  group {} (ranks {}): {}\n", g.group, fmt::join(g.members, ","),
                       g.completed_everywhere_entry
                           ? fmt::format("last completed on every rank that dumped: {}",
                                         entry_text(*g.completed_everywhere_entry))
                           : std::string("no collective completed on every rank that dumped"));
  return out + "\n";
}

json flight_recorder_json(const ss::FlightAnalysis& a) {
  json j{{"findings", json::array()}, {"ranks", json::array()}, {"groups", json::array()}};
  for (const auto& f : a.findings)
    j["findings"].push_back(
        {{"kind", ss::to_string(f.kind)}, {"text", f.text}, {"ranks", f.ranks}, {"groups", f.groups}, {"sequences", f.sequences}});
  for (const auto& r : a.ranks) {
    json in_flight = json::array();
    for (const auto& e : r.in_flight) in_flight.push_back(entry_json(e));
    j["ranks"].push_back({{"rank", r.rank}, {"dumped", r.dumped}, {"in_session", r.in_session}, {"dump", r.dump},
                          {"reason", r.reason}, {"dump_time_ns", r.dump_time_ns}, {"entries", r.entries},
                          {"ring_dropped", r.ring_dropped}, {"waiting", entry_json(r.waiting)},
                          {"in_flight", in_flight}, {"last_completed", entry_json(r.last_completed)},
                          {"stale_dump", r.stale_dump.empty() ? json(nullptr) : json(r.stale_dump)}});
  }
  j["in_flight_note"] = a.in_flight_note.empty() ? json(nullptr) : json(a.in_flight_note);
  for (const auto& g : a.groups)
    j["groups"].push_back({{"group", g.group}, {"members", g.members}, {"entered", g.entered}, {"completed", g.completed},
                           {"completed_everywhere", g.completed_everywhere},
                           {"completed_everywhere_name",
                            g.completed_everywhere_entry ? json(g.completed_everywhere_entry->name) : json(nullptr)}});
  return j;
}

}  // namespace embedscope::cli
