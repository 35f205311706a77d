#pragma once
// Test support for the teaching scenarios' claims tests: a scenario run made cheap to run
// without changing what its claims are about. The Criteo Kaggle tables hold 33.8 M rows (2.2 GB
// of fp32 weights over 4 ranks): their initialisation is most of a claims test's CPU time, and
// none of the communication claims depends on the rows' count, only on where the tables are
// (which rank sends whose pooled embeddings) and on the bytes a batch moves (ids and pooled
// values: 8 B an id, dim x 4 B a bag, whatever the table's size).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/scenario.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::test {

/// `run` with every table capped at `max_rows` rows (num_embeddings = min(rows, max_rows); the
/// ids are then drawn over the capped range) and the full-size tables' greedy plan pinned
/// (plan_overrides of plan_sharding of the original spec), so each rank holds the same tables as
/// in the scenario as users run it: the same collectives with the same bytes, a fraction of the
/// setup. Training results differ from the full run's (other ids, other rows); both runs of a
/// comparison must be capped alike. Tables the plan puts on `keep_rank` (>= 0) keep their rows:
/// that rank's memory (weights, buffers, its allocator's history) is the full run's, for claims
/// about one rank's memory. The result is validated again (parse_workload of its JSON).
/// Throws SpecError as parse_workload does, std::invalid_argument for an lm_embedding run or
/// max_rows < 1.
inline ScenarioRun capped_rows_fixed_plan(const ScenarioRun& run, int64_t max_rows, int keep_rank = -1) {
  if (run.lm) throw std::invalid_argument("capped_rows_fixed_plan: an lm_embedding run has no DLRM tables");
  if (max_rows < 1) throw std::invalid_argument("capped_rows_fixed_plan: max_rows must be at least 1");
  WorkloadSpec spec = run.spec;
  const ShardingPlan plan = plan_sharding(run.spec);
  spec.sharding.per_table = plan_overrides(run.spec, plan);
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    const auto& shards = plan.tables[i].shards;
    const bool keep = std::any_of(shards.begin(), shards.end(), [&](const Shard& sh) { return sh.rank == keep_rank; });
    if (!keep) spec.tables[i].num_embeddings = std::min(spec.tables[i].num_embeddings, max_rows);
  }
  ScenarioRun out = run;
  out.workload = to_json(spec);
  out.spec = parse_workload(out.workload, "capped " + run.label);
  return out;
}

/// The tables plan_sharding places on `rank` (table_wise tables: their one shard's rank).
inline int tables_on_rank(const WorkloadSpec& spec, int rank) {
  int n = 0;
  for (const TablePlan& tp : plan_sharding(spec).tables)
    for (const Shard& s : tp.shards) n += s.rank == rank ? 1 : 0;
  return n;
}

}  // namespace embedscope::engine::test
