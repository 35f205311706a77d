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

}  // namespace embedscope::engine
