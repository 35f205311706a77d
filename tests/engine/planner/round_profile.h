#pragma once
// A hardware profile of round numbers for hand-computed planner tests: HBM 1 B/ns (1e9 B/s),
// dense 1e12 flop/s, every efficiency 1, a kernel launch 1 us, 8 GPUs a node (4 nodes), and
// links of 1 B/ns plus `latency_ns` a call, the same within and across nodes.

#include <cstdint>
#include <string>

#include "embedscope/engine/cost/hardware_profile.h"

namespace planner_testing {

inline embedscope::engine::HardwareProfile round_profile(const std::string& name, int64_t latency_ns = 10000) {
  embedscope::engine::HardwareProfile hw;
  hw.name = name;
  hw.gpu.name = "round";
  hw.gpu.memory_bytes = int64_t{1} << 40;
  hw.gpu.hbm_bandwidth_bytes_per_s = 1e9;
  hw.gpu.dense_flops_per_s = 1e12;
  hw.gpu.dense_efficiency = hw.gpu.tbe_forward_efficiency = hw.gpu.tbe_backward_efficiency = 1.0;
  hw.gpu.memory_kernel_efficiency = 1.0;
  hw.gpu.kernel_launch_ns = 1000;
  hw.gpus_per_node = 8;
  hw.max_nodes = 4;
  hw.intra_node = {"round link", 1e9, latency_ns};
  hw.inter_node = hw.intra_node;
  return hw;
}

}  // namespace planner_testing
