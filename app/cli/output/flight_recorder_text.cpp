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
  if (a.findings.empty() && waiting)
    out += "  every rank reached the collectives its peers wait in: their transfers did not finish (a slow link, or a "
           "peer that failed inside the collective)\n";
  out += fmt::format("  {:<5} {:>5} {:<22} {:>8}  {}\n", "rank", "dump", "reason", "entries", "waits in");
  for (const auto& r : a.ranks) {
    if (!r.dumped) {
      out += fmt::format("  {:<5} {:>5} {:<22} {:>8}  {}\n", r.rank, "-", "(no dump)", "-", "-");
      continue;
    }
    out += fmt::format("  {:<5} {:>5} {:<22} {:>8}  {}\n", r.rank, r.dump, r.reason, r.entries,
                       r.waiting ? entry_text(*r.waiting) + " " + r.waiting->state : std::string("-"));
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
  for (const auto& r : a.ranks)
    j["ranks"].push_back({{"rank", r.rank}, {"dumped", r.dumped}, {"dump", r.dump}, {"reason", r.reason},
                          {"dump_time_ns", r.dump_time_ns}, {"entries", r.entries}, {"ring_dropped", r.ring_dropped},
                          {"waiting", entry_json(r.waiting)}, {"last_completed", entry_json(r.last_completed)}});
  for (const auto& g : a.groups)
    j["groups"].push_back({{"group", g.group}, {"members", g.members}, {"entered", g.entered}, {"completed", g.completed},
                           {"completed_everywhere", g.completed_everywhere},
                           {"completed_everywhere_name",
                            g.completed_everywhere_entry ? json(g.completed_everywhere_entry->name) : json(nullptr)}});
  return j;
}

}  // namespace embedscope::cli
