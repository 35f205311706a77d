#pragma once
// A hardware profile of round numbers for hand-computed planner tests: HBM 1 B/ns (1e9 B/s),
// dense 1e12 flop/s, every efficiency 1, a kernel launch 1 us, 8 GPUs a node (4 nodes), and
// links of 1 B/ns plus `latency_ns` a call, the same within and across nodes; and a workload of
// round numbers to plan on it.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"

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

/// `ranks` ranks on one node, batch 4, sgd (the tiny preset's rest); tables t0, t1, ... of 1000
/// rows x 8 (fp32, sum), table i serving one feature fi of uniform ids with the fixed pooling
/// factor pooling_factors[i].
inline embedscope::engine::WorkloadSpec round_workload(int ranks, const std::vector<double>& pooling_factors) {
  embedscope::engine::WorkloadSpec s = embedscope::engine::load_preset("tiny");
  s.devices.count = ranks;
  s.batch_size = 4;
  s.tables.clear();
  s.features.clear();
  for (size_t i = 0; i < pooling_factors.size(); ++i) {
    embedscope::engine::TableSpec t;
    t.name = "t" + std::to_string(i);
    t.num_embeddings = 1000;
    t.embedding_dim = 8;
    t.feature_names = {"f" + std::to_string(i)};
    s.tables.push_back(t);
    embedscope::engine::FeatureSpec f;
    f.name = t.feature_names[0];
    f.pooling_factor.mean = pooling_factors[i];
    f.pooling_factor.max = static_cast<int64_t>(pooling_factors[i]);
    s.features.push_back(f);
  }
  return s;
}

}  // namespace planner_testing
