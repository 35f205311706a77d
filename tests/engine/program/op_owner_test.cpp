// Every op of a step program names who runs it (program/program_sink.h OpOwner), what the
// threaded executor interprets the program with (exec/threaded/rank.h: Rank::run_op hands
// each op to its owner): the executor's own ops by RankOp kind, the sharding modules' ops by
// their module's index in embedding_shardings (sharding/embedding_sharding.h) with the module's
// own kind and argument. An op without a tag (kind -1) is one the executor refuses.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "program/program_sink.h"
#include "sharding/embedding_sharding.h"
#include "sharding/layout.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/workload/presets.h"

using namespace embedscope::engine;
using program::OpOwner;
using program::RankOp;

namespace {

WorkloadSpec owner_tiny(int world, ShardingType type, PipelineKind pipeline) {
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = world;
  s.sharding.default_type = type;
  s.sharding.per_table.clear();
  if (type == ShardingType::table_row_wise || type == ShardingType::grid_shard ||
      type == ShardingType::table_column_wise)
    s.sharding.local_world_size = world >= 4 ? 2 : 1;
  s.pipeline = pipeline;
  s.steps = 4;
  return s;
}

// The op name of each RankOp (the executor's own ops).
const std::map<RankOp, std::string> kRankOpNames = {
    {RankOp::input, "input"},
    {RankOp::bucketize, "bucketize"},
    {RankOp::input_dist_splits, "input_dist/splits"},
    {RankOp::input_dist_lengths, "input_dist/lengths"},
    {RankOp::input_dist_ids, "input_dist/ids"},
    {RankOp::kjt_permute, "kjt_permute"},
    {RankOp::host_fetch, "host_fetch"},
    {RankOp::lookup, "lookup"},
    {RankOp::prefetch, "prefetch"},
    {RankOp::dense_forward_backward, "dense_forward_backward"},
    {RankOp::dense_all_reduce, "dense_all_reduce"},
    {RankOp::host_update, "host_update"},
    {RankOp::backward_fused_optimizer, "backward_fused_optimizer"},
    {RankOp::dense_optimizer, "dense_optimizer"},
};

// Checks every op of every rank's program in every place of the run: a tag, the executor's
// ops by name, the modules' ops within the plan's modules and never one of the executor's
// names, the DDP buckets numbered 0, 1, ... in launch order. Returns the ops of module
// `module` on rank 0 in the steady iteration as (name, kind, arg).
std::vector<std::tuple<std::string, int, int>> check_owners(const WorkloadSpec& s, const ShardingPlan& plan,
                                                            int module = -2) {
  const detail::Layout layout(s, plan);
  const size_t modules = sharding::embedding_shardings(layout).size();
  std::vector<std::tuple<std::string, int, int>> out;
  std::set<std::string> rank_names;
  for (const auto& [k, n] : kRankOpNames) rank_names.insert(n);
  const int64_t total = s.warmup_steps + s.steps;
  for (int rank = 0; rank < plan.world_size; ++rank)
    for (int64_t it : {int64_t{0}, int64_t{1}, total - 2, total - 1}) {
      std::vector<OpOwner> owners;
      const StepProgram p = program::build_step_program(s, plan, layout, rank, it, owners);
      const std::string where = std::string(to_string(s.sharding.default_type)) + " rank " + std::to_string(rank) +
                                " iteration " + std::to_string(it);
      EXPECT_EQ(owners.size(), p.ops.size()) << where;
      if (owners.size() != p.ops.size()) return out;
      std::map<int, int> buckets;  // launching op -> buckets so far
      for (const ProgramOp& op : p.ops) {
        const OpOwner& o = owners[static_cast<size_t>(op.id)];
        EXPECT_GE(o.kind, 0) << where << ": op " << op.id << " " << op.name << " has no owner";
        if (o.owner < 0) {
          const auto name = kRankOpNames.find(static_cast<RankOp>(o.kind));
          EXPECT_NE(name, kRankOpNames.end()) << where << ": op " << op.name << " kind " << o.kind;
          if (name == kRankOpNames.end()) continue;
          EXPECT_EQ(op.name, name->second) << where << ": op " << op.id;
          if (static_cast<RankOp>(o.kind) == RankOp::dense_all_reduce) {
            EXPECT_GE(op.launched_by, 0) << where;
            EXPECT_EQ(o.arg, buckets[op.launched_by]++) << where << ": op " << op.id;
          } else {
            EXPECT_EQ(o.arg, 0) << where << ": op " << op.name;
          }
        } else {
          EXPECT_LT(static_cast<size_t>(o.owner), modules) << where << ": op " << op.name;
          EXPECT_EQ(rank_names.count(op.name), 0u) << where << ": the executor's op " << op.name << " owned by module "
                                                   << o.owner;
          if (rank == 0 && it == steady_iteration(s) && o.owner == module) out.emplace_back(op.name, o.kind, o.arg);
        }
      }
    }
  return out;
}

}  // namespace

// The example (tiny, 2 ranks, table_wise, base, rank 0) op by op: the executor's own
// ops, the one module (pooled_all_to_all, index 0) owning the output and gradient dists.
TEST(OpOwner, TableWiseBaseOpByOp) {
  const WorkloadSpec s = owner_tiny(2, ShardingType::table_wise, PipelineKind::base);
  const ShardingPlan plan = plan_sharding(s);
  std::vector<OpOwner> owners;
  const StepProgram p = program::build_step_program(s, plan, detail::Layout(s, plan), 0, 0, owners);
  std::vector<std::tuple<std::string, int, int, int>> got;
  for (const ProgramOp& op : p.ops) {
    const OpOwner& o = owners.at(static_cast<size_t>(op.id));
    got.emplace_back(op.name, o.owner, o.kind, o.arg);
  }
  auto own = [](const char* n, RankOp k, int arg = 0) { return std::tuple<std::string, int, int, int>{n, -1, static_cast<int>(k), arg}; };
  // pooled_all_to_all's kinds: 0 output dist, 1 grad dist
  const std::vector<std::tuple<std::string, int, int, int>> want = {
      own("input", RankOp::input),
      own("bucketize", RankOp::bucketize),
      own("input_dist/splits", RankOp::input_dist_splits),
      own("input_dist/lengths", RankOp::input_dist_lengths),
      own("input_dist/ids", RankOp::input_dist_ids),
      own("kjt_permute", RankOp::kjt_permute),
      own("lookup", RankOp::lookup),
      {"output_dist/all_to_all", 0, 0, 0},
      own("dense_forward_backward", RankOp::dense_forward_backward),
      own("dense_all_reduce", RankOp::dense_all_reduce, 0),
      {"grad_dist/all_to_all", 0, 1, 0},
      own("backward_fused_optimizer", RankOp::backward_fused_optimizer),
      own("dense_optimizer", RankOp::dense_optimizer),
  };
  EXPECT_EQ(got, want);
}

// Every sharding type and pipeline, every rank and place in the run.
TEST(OpOwner, EveryOpOfEveryProgramHasAnOwner) {
  for (ShardingType type : {ShardingType::table_wise, ShardingType::row_wise, ShardingType::column_wise,
                            ShardingType::data_parallel, ShardingType::table_row_wise, ShardingType::grid_shard,
                            ShardingType::table_column_wise})
    for (PipelineKind pipeline : {PipelineKind::base, PipelineKind::sparse_dist, PipelineKind::semi_sync}) {
      const int world = type == ShardingType::column_wise ? 3
                        : type == ShardingType::table_row_wise || type == ShardingType::grid_shard ||
                                type == ShardingType::table_column_wise
                            ? 4
                            : 2;
      const WorkloadSpec s = owner_tiny(world, type, pipeline);
      check_owners(s, plan_sharding(s));
    }
}

// The modules with update ops of their own, with their kinds and arguments (a table, or a hot
// table's index): table_row_wise's two dists (module 1 of table_wise + table_row_wise), the
// replicated tables' three ops a table (data_parallel), the hot rows' fused ops and one
// optimizer per hot table, row_wise's factorized tables.
TEST(OpOwner, ModulesTagTheirUpdateOpsWithTheirTables) {
  using Ops = std::vector<std::tuple<std::string, int, int>>;
  {  // t_c table_row_wise on 4 ranks (2 nodes): modules pooled_all_to_all, table_row_wise
    WorkloadSpec s = owner_tiny(4, ShardingType::table_wise, PipelineKind::base);
    s.sharding.local_world_size = 2;
    s.sharding.per_table["t_c"].type = ShardingType::table_row_wise;
    EXPECT_EQ(check_owners(s, plan_sharding(s), 1),
              (Ops{{"output_dist/reduce_scatter_intra_node", 0, 0}, {"output_dist/all_to_all_cross_node", 1, 0},
                   {"grad_dist/all_to_all_cross_node", 2, 0}, {"grad_dist/all_gather_intra_node", 3, 0}}));
  }
  {  // t_a (table 1) and t_c (table 3) data_parallel: modules pooled_all_to_all, data_parallel
    WorkloadSpec s = owner_tiny(2, ShardingType::table_wise, PipelineKind::sparse_dist);
    s.sharding.per_table["t_a"].type = ShardingType::data_parallel;
    s.sharding.per_table["t_c"].type = ShardingType::data_parallel;
    EXPECT_EQ(check_owners(s, plan_sharding(s), 1),
              (Ops{{"backward_data_parallel", 0, 1}, {"grad_dist/data_parallel_all_reduce", 1, 1},
                   {"optimizer_data_parallel", 2, 1}, {"backward_data_parallel", 0, 3},
                   {"grad_dist/data_parallel_all_reduce", 1, 3}, {"optimizer_data_parallel", 2, 3}}));
  }
  {  // hot rows of t_a (table 1) and t_c (table 3), both row_wise: modules pooled_all_to_all,
     // row_wise, hot_rows
    WorkloadSpec s = owner_tiny(2, ShardingType::table_wise, PipelineKind::semi_sync);
    s.sharding.per_table["t_a"].type = ShardingType::row_wise;
    s.sharding.per_table["t_a"].hot_rows = {3};
    s.sharding.per_table["t_c"].type = ShardingType::row_wise;
    s.sharding.per_table["t_c"].hot_rows = {0, 5, 17};
    EXPECT_EQ(check_owners(s, plan_sharding(s), 2),
              (Ops{{"backward_hot_rows", 0, 0}, {"grad_dist/hot_rows_all_reduce", 1, 0}, {"optimizer_hot_rows", 2, 0},
                   {"optimizer_hot_rows", 2, 1}}));
  }
  {  // t_c (table 3) factorized (low_rank_dim 3) and row_wise on 2 ranks: modules
     // pooled_all_to_all, row_wise
    WorkloadSpec s = owner_tiny(2, ShardingType::table_wise, PipelineKind::base);
    s.tables[3].low_rank_dim = 3;
    s.sharding.per_table["t_c"].type = ShardingType::row_wise;
    EXPECT_EQ(check_owners(s, plan_sharding(s), 1),
              (Ops{{"output_dist/reduce_scatter", 0, 0}, {"grad_dist/all_gather", 1, 0},
                   {"grad_dist/low_rank_b_all_reduce", 2, 3}, {"low_rank_row_wise_update", 3, 3}}));
  }
  {  // t_c in host_cached memory with the prefetch pipeline: the host link's ops are the executor's
    WorkloadSpec s = owner_tiny(2, ShardingType::table_wise, PipelineKind::sparse_dist);
    s.tables[3].placement = TablePlacement::host_cached;
    s.tables[3].prefetch_pipeline = true;
    s.tables[2].placement = TablePlacement::host;
    check_owners(s, plan_sharding(s));
  }
}
