// Cross-thread hand-off gaps of a measured cpu rank's step (cost/handoff.h).
#include "embedscope/engine/cost/handoff.h"

#include <algorithm>
#include <map>

namespace embedscope::engine {

std::optional<std::vector<HandoffGap>> handoff_gaps(const StepProgram& program,
                                                     const std::vector<MeasuredSpan>& compute,
                                                     const std::vector<MeasuredSpan>& comm, int64_t lane_start_ns) {
  namespace ss = embedscope::sessions;
  std::map<int, const MeasuredSpan*> span;  // program op id -> its measured span
  for (const auto& [lane, measured] : {std::pair{ss::Lane::compute, &compute}, std::pair{ss::Lane::comm, &comm}}) {
    const std::vector<const ProgramOp*> planned = program.lane(lane);
    if (planned.size() != measured->size()) return std::nullopt;
    for (size_t i = 0; i < planned.size(); ++i) {
      if (planned[i]->name != (*measured)[i].name) return std::nullopt;
      span[planned[i]->id] = &(*measured)[i];
    }
  }
  std::vector<HandoffGap> gaps;
  for (const auto& [id, s] : span) {
    const ProgramOp& op = program.ops[static_cast<size_t>(id)];
    int64_t own = lane_start_ns, other = -1;
    for (int w : op.waits_for) {
      const auto it = span.find(w);
      if (it == span.end()) continue;  // a host-link op: not one of the two threads
      int64_t& latest = program.ops[static_cast<size_t>(w)].lane == op.lane ? own : other;
      latest = std::max(latest, it->second->end_ns);
    }
    if (other > own) gaps.push_back({id, std::max<int64_t>(0, s->start_ns - other)});
  }
  return gaps;
}

}  // namespace embedscope::engine
