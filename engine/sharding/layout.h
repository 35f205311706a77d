#pragma once
// The step layout shared by the CPU executor and the memory estimate: which (table, feature,
// shard) slots receive input on which rank, and which features take which output dist. The
// same on every rank. Internal to the engine.

#include <algorithm>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::detail {

/// Types whose shards hold whole rows of a column range (pooled all-to-all output dist).
inline bool is_a2a(ShardingType t) {
  return t == ShardingType::table_wise || t == ShardingType::column_wise || t == ShardingType::table_column_wise;
}
/// Types whose shards hold a row range (partial sums reduced in the output dist).
inline bool is_rw(ShardingType t) {
  return t == ShardingType::row_wise || t == ShardingType::table_row_wise || t == ShardingType::grid_shard;
}
/// Types reduced inside a node then sent across nodes (node and cross groups).
inline bool is_hierarchical(ShardingType t) { return t == ShardingType::table_row_wise || t == ShardingType::grid_shard; }

/// One feature's column block reduced inside a node (table_row_wise: the whole width; grid_shard:
/// one column block of the table), columns [col_offset, col_offset + cols) of the feature's
/// pooled output.
struct NodeBlock {
  int feature = 0;
  int64_t col_offset = 0;
  int64_t cols = 0;
  bool operator<(const NodeBlock& o) const { return feature != o.feature ? feature < o.feature : col_offset < o.col_offset; }
};

// A slot is one (table, feature, shard) that receives input through the KJT all-to-all.
struct Slot {
  int table = 0;
  int feature = 0;
  int shard = 0;  // index into TablePlan::shards
  ShardingType type{};
  Shard s;
  /// The input dist sends a bag's ids to this slot only where they fall in its row range
  /// (row_wise, table_row_wise); otherwise every id of the bag.
  bool bucketize_by_rows = false;
  /// The slot's pooled rows are final at the lookup (whole rows: table_wise, column_wise), so
  /// mean pooling scales them there; otherwise after the reduction of partial sums.
  bool final_at_lookup = false;
};

struct Layout {
  int world = 1, local = 1, nodes = 1;
  int64_t B = 0;
  std::vector<int64_t> dim;                    // per feature
  std::vector<Slot> slots;                     // non data-parallel, (table, feature, shard) order
  std::vector<std::vector<int>> slots_to;      // per rank: its slots, in order
  std::vector<std::vector<int>> a2a_slots_to;  // per rank: its table_wise / column_wise slots
  std::vector<int> rw_features;                // features of row_wise tables
  /// per node: the column blocks of its table_row_wise and grid_shard tables' features, by
  /// (feature, col_offset)
  std::vector<std::vector<NodeBlock>> node_blocks;
  std::vector<int> dp_tables;                  // data_parallel: replicated, no dist
  /// row_wise tables with low_rank_dim, in table order: every row shard holds A's rows and a copy
  /// of B, whose gradient the ranks all-reduce after the fused update (grad_dist/low_rank_b_all_reduce)
  std::vector<int> low_rank_rw_tables;
  bool hierarchical = false;                   // table_row_wise / grid_shard tables: node and cross groups
  std::vector<int> table_of;                   // per feature: the table serving it (FeatureIndex)
  std::vector<std::vector<int>> table_features;  // per table: its features' indices, in order
  bool replicated(int table) const { return std::find(dp_tables.begin(), dp_tables.end(), table) != dp_tables.end(); }  // O(dp tables)
  /// Hot-row replication (TableSharding::hot_rows): per table its replicated rows, sorted (empty
  /// for none), and the tables that have any, in table order. The input dist sends none of their
  /// ids; sharding/hot_rows.cpp looks them up in every rank's replica and all-reduces their gradients.
  std::vector<std::vector<int64_t>> hot_rows;
  std::vector<int> hot_tables;
  /// Index of `row` in hot_rows[table], -1 when it is not hot. O(log hot rows).
  int64_t hot_index(int table, int64_t row) const {
    const auto& h = hot_rows[static_cast<size_t>(table)];
    const auto it = std::lower_bound(h.begin(), h.end(), row);
    return it != h.end() && *it == row ? it - h.begin() : -1;
  }

  Layout(const WorkloadSpec& spec, const ShardingPlan& plan) {
    world = plan.world_size;
    local = plan.local_world_size;
    nodes = world / local;
    B = spec.batch_size;
    {  // O(n log n) in tables and features (a linear lookup per feature would be quadratic)
      const FeatureIndex index(spec);
      table_of = index.table_of_feature();
      table_features = index.features_of_table();
    }
    for (size_t f = 0; f < spec.features.size(); ++f)
      dim.push_back(spec.tables[static_cast<size_t>(table_of[f])].embedding_dim);
    slots_to.resize(static_cast<size_t>(world));
    a2a_slots_to.resize(static_cast<size_t>(world));
    node_blocks.resize(static_cast<size_t>(nodes));
    hot_rows.resize(spec.tables.size());
    for (const TablePlan& tp : plan.tables) {
      const TableSpec& ts = spec.tables[static_cast<size_t>(tp.table)];
      const auto e = spec.sharding.per_table.find(ts.name);
      if (e == spec.sharding.per_table.end() || e->second.hot_rows.empty()) continue;
      if (!is_rw(tp.type))
        throw std::invalid_argument("table \"" + ts.name + "\" has hot_rows but the plan shards it " +
                                    std::string(to_string(tp.type)) +
                                    ": hot-row replication needs row_wise, table_row_wise or grid_shard");
      hot_rows[static_cast<size_t>(tp.table)] = e->second.hot_rows;
      std::sort(hot_rows[static_cast<size_t>(tp.table)].begin(), hot_rows[static_cast<size_t>(tp.table)].end());
      hot_tables.push_back(tp.table);
    }
    std::sort(hot_tables.begin(), hot_tables.end());
    std::set<std::tuple<int, int, int64_t>> blocks_seen;  // (node, feature, col_offset)
    for (const TablePlan& tp : plan.tables) {
      if (tp.type == ShardingType::data_parallel) {
        dp_tables.push_back(tp.table);
        continue;
      }
      if (tp.type == ShardingType::row_wise && spec.tables[static_cast<size_t>(tp.table)].low_rank_dim > 0)
        low_rank_rw_tables.push_back(tp.table);
      for (const int f : table_features[static_cast<size_t>(tp.table)]) {
        if (tp.type == ShardingType::row_wise) rw_features.push_back(f);
        for (size_t s = 0; s < tp.shards.size(); ++s) {
          // a column block joins its node's list once (the rows of a block are on the ranks
          // of one node: validate_plan)
          const Shard& sh = tp.shards[s];
          if (is_hierarchical(tp.type) && blocks_seen.insert({sh.rank / local, f, sh.col_offset}).second) {
            node_blocks[static_cast<size_t>(sh.rank / local)].push_back({f, sh.col_offset, sh.num_cols});
            hierarchical = true;
          }
          const int idx = static_cast<int>(slots.size());
          slots.push_back({tp.table, f, static_cast<int>(s), tp.type, tp.shards[s], is_rw(tp.type), is_a2a(tp.type)});
          slots_to[static_cast<size_t>(tp.shards[s].rank)].push_back(idx);
          if (is_a2a(tp.type)) a2a_slots_to[static_cast<size_t>(tp.shards[s].rank)].push_back(idx);
        }
      }
    }
    std::sort(rw_features.begin(), rw_features.end());
    for (auto& v : node_blocks) std::sort(v.begin(), v.end());
  }
  int64_t sum_dims(const std::vector<int>& feats) const {
    int64_t s = 0;
    for (int f : feats) s += dim[static_cast<size_t>(f)];
    return s;
  }
  /// Columns of node m's blocks: its B x width block per sample owner node.
  int64_t node_width(int m) const {
    int64_t c = 0;
    for (const NodeBlock& b : node_blocks[static_cast<size_t>(m)]) c += b.cols;
    return c;
  }
  /// Index among rank r's slots (slots_to[r]) of the slot of feature f holding columns from
  /// col_offset; -1 when r has none. O(r's slots).
  int local_slot_of(int r, int f, int64_t col_offset) const {
    const auto& mine = slots_to[static_cast<size_t>(r)];
    for (size_t k = 0; k < mine.size(); ++k) {
      const Slot& sl = slots[static_cast<size_t>(mine[k])];
      if (sl.feature == f && sl.s.col_offset == col_offset) return static_cast<int>(k);
    }
    return -1;
  }
  /// Columns of rank r's table_wise / column_wise slots: its B x cols block per sample owner.
  int64_t a2a_cols(int r) const {
    int64_t c = 0;
    for (int k : a2a_slots_to[static_cast<size_t>(r)]) c += slots[static_cast<size_t>(k)].s.num_cols;
    return c;
  }
};

}  // namespace embedscope::engine::detail
