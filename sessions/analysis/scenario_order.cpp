#include "embedscope/sessions/analysis/scenario_order.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "embedscope/sessions/analysis/critical_path.h"

namespace embedscope::sessions {

std::vector<PlayStep> play_order(const SessionReader& session, int64_t step) {
  std::vector<OpRecord> ops;
  for (const auto& o : session.all_ops())
    if (o.step == step) ops.push_back(o);
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start_ns, a.rank, a.lane) < std::tie(b.start_ns, b.rank, b.lane);
  });
  std::vector<CollectiveRecord> collectives;
  for (auto& c : session.collectives())
    if (c.step == step) collectives.push_back(std::move(c));
  std::map<std::pair<int32_t, int32_t>, std::string> lane_names;
  for (const auto& l : session.lanes()) lane_names[{l.rank, l.lane}] = l.name;
  // what each op waited for: the analysis' inferred dependencies (critical_path.h)
  const StepDependencies deps(ops, collectives);
  std::vector<PlayStep> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& o = ops[i];
    const OpWait w = deps.wait_of(i);
    const auto& q = ops[w.op];
    std::string waits;
    switch (w.kind) {
      case OpWait::Kind::collective_peer:
        waits = fmt::format("rank {} to join the collective ({} later)", q.rank, format_duration(q.start_ns - o.start_ns));
        break;
      case OpWait::Kind::ended_before:
        waits = fmt::format("{} on the {} lane (ended {} before)", session.name(q.name_id), lane_names[{q.rank, q.lane}],
                            format_duration(o.start_ns - q.end_ns));
        break;
      case OpWait::Kind::launched_from:
        waits = fmt::format("{} on the {} lane, which launched it ({} after that op began)", session.name(q.name_id),
                            lane_names[{q.rank, q.lane}], format_duration(o.start_ns - q.start_ns));
        break;
      case OpWait::Kind::nothing: waits = "nothing: it starts the step on its rank"; break;
    }
    out.push_back({o, std::move(waits)});
  }
  return out;
}

}  // namespace embedscope::sessions
