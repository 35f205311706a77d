// Processor sharing of a collective's members on a node's shared cores (cost/shared_cores.h).
#include "embedscope/engine/cost/shared_cores.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "embedscope/engine/cost/cost_model.h"

namespace embedscope::engine {

double processor_sharing_time(std::vector<double> work, int ranks_on_node, const std::function<double(int)>& factor) {
  if (static_cast<int>(work.size()) > ranks_on_node)
    throw std::invalid_argument("processor_sharing_time: " + std::to_string(work.size()) + " members on a node of " +
                                std::to_string(ranks_on_node) + " ranks");
  for (double& w : work) w = std::max(0.0, w);
  std::sort(work.begin(), work.end());
  double t = 0, prev = 0;
  for (size_t k = 0; k < work.size(); ++k) {
    t += (work[k] - prev) * factor(ranks_on_node - static_cast<int>(k));
    prev = work[k];
  }
  return t;
}

int64_t shared_cores_collective_ns(const std::vector<int64_t>& member_ns, int ranks_on_node, const HardwareProfile& hw) {
  std::vector<double> w(member_ns.begin(), member_ns.end());
  return std::llround(processor_sharing_time(std::move(w), ranks_on_node,
                                             [&](int m) { return contention_factor(hw, m); }));
}

int64_t contended_ns(int64_t ns, const HardwareProfile& hw, int ranks_on_node) {
  const double f = contention_factor(hw, ranks_on_node);
  return f == 1.0 ? ns : static_cast<int64_t>(std::llround(static_cast<double>(ns) * f));
}

double oversubscribed_share(const HardwareProfile& hw, int ranks_on_node) {
  if (hw.cpu.cores <= 0) return 0.0;
  return std::clamp(sync_lag_factor(hw, ranks_on_node) - 1.0, 0.0, 1.0);
}

int64_t collective_call_ns(const std::vector<CallMember>& members, const HardwareProfile& hw) {
  if (members.empty()) return 0;
  bool one_node = true;
  int most = 0;  // the members' largest node
  for (const CallMember& m : members) {
    one_node = one_node && m.node == members.front().node;
    most = std::max(most, m.ranks_on_node);
  }
  // a cpu call's wait for a core on an oversubscribed node (hardware_profile.h call_wait_ns)
  const int64_t wait = hw.cpu.cores > 0 && members.size() > 1 && hw.cpu.call_wait_ns > 0
                           ? std::llround(static_cast<double>(hw.cpu.call_wait_ns) * oversubscribed_share(hw, most))
                           : 0;
  if (hw.cpu.cores > 0 && one_node) {
    std::vector<int64_t> own;
    own.reserve(members.size());
    for (const CallMember& m : members) own.push_back(m.own_ns);
    return shared_cores_collective_ns(own, members.front().ranks_on_node, hw) + wait;
  }
  int64_t longest = 0;
  for (const CallMember& m : members) longest = std::max(longest, contended_ns(m.own_ns, hw, m.ranks_on_node));
  return longest + wait;
}

}  // namespace embedscope::engine
