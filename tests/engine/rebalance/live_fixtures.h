#pragma once
// The crowded workload the live rebalancing parity tests run (live_parity_test,
// live_pipeline_test) and the moves a run made.

#include "engine/parity_check.h"

namespace embedscope::test_support {

/// parity_spec on `world` ranks with every table table_wise on rank 0 (imbalance = world), a
/// rebalance every 2 steps over 6 steps (after steps 1 and 3), under `pipeline`.
inline engine::WorkloadSpec crowded_live_spec(int world, engine::OptimizerType opt,
                                              engine::PipelineKind pipeline = engine::PipelineKind::base,
                                              engine::Pooling pooling = engine::Pooling::sum) {
  engine::WorkloadSpec s = engine::parity::parity_spec(engine::ShardingType::table_wise, world, pooling, opt);
  for (const auto& t : s.tables) s.sharding.per_table[t.name] = {engine::ShardingType::table_wise, {0}, -1};
  s.pipeline = pipeline;
  s.steps = 6;
  s.rebalance.trigger = engine::RebalanceTrigger::every;
  s.rebalance.every = 2;
  return s;
}

/// Tables moved or changed over all of a run's live rebalances.
inline int rebalance_moves(const engine::RunResult& r) {
  int n = 0;
  for (const auto& e : r.rebalances) n += e.moves;
  return n;
}

}  // namespace embedscope::test_support
