// A hot table changed from table_wise to row_wise or column_wise (rebalance/type_change.h): its
// new plan, the bytes the change moves and the predicted load of its shards.
#include "embedscope/engine/rebalance/type_change.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"

namespace embedscope::engine::rebalance {

TablePlan row_wise_table_plan(const WorkloadSpec& spec, int table, int world) {
  const TableSpec& t = spec.tables.at(static_cast<size_t>(table));
  TablePlan tp;
  tp.table = table;
  tp.type = ShardingType::row_wise;
  const std::vector<int64_t> rows = row_wise_split(t.rows(), world);
  int64_t off = 0;
  for (int r = 0; r < world; ++r) {
    tp.shards.push_back({r, off, rows[static_cast<size_t>(r)], 0, t.embedding_dim});
    off += rows[static_cast<size_t>(r)];
  }
  return tp;
}

int64_t row_move_bytes(const WorkloadSpec& spec, int table) {
  const TableSpec& t = spec.tables.at(static_cast<size_t>(table));
  const auto [m1, m2] = optimizer_state_floats(spec.optimizer.type, 1, t.embedding_dim);
  return row_bytes(t.data_type, t.embedding_dim) + (m1 + m2) * 4;
}

int64_t row_wise_change_bytes(const WorkloadSpec& spec, int table, int from, int world) {
  int64_t rows = 0;
  for (const Shard& s : row_wise_table_plan(spec, table, world).shards)
    if (s.rank != from) rows += s.num_rows;
  return rows * row_move_bytes(spec, table);
}

namespace {

/// `total` spread over parts in proportion to `weights` (floor, the remainder one each to the
/// first parts); `what` names the weights in the error when they sum to 0.
std::vector<int64_t> proportional(int64_t total, const std::vector<int64_t>& weights, int table, const char* what) {
  int64_t sum = 0;
  for (int64_t w : weights) sum += w;
  if (sum <= 0) throw std::invalid_argument(fmt::format("rebalance: table {} has shards of no {}", table, what));
  std::vector<int64_t> out;
  int64_t placed = 0;
  for (int64_t w : weights) {
    // total x w fits in 128 bits; in 64 bits for any realistic window (ids < 2^40, rows < 2^23)
    out.push_back(static_cast<int64_t>(static_cast<__int128>(total) * w / sum));
    placed += out.back();
  }
  for (size_t i = 0; placed < total && i < out.size(); ++i, ++placed) ++out[i];
  return out;
}

}  // namespace

std::vector<int64_t> row_wise_predicted_ids(int64_t ids, const TablePlan& tp) {
  std::vector<int64_t> rows;
  for (const Shard& s : tp.shards) rows.push_back(s.num_rows);
  return proportional(ids, rows, tp.table, "rows");
}

std::vector<int64_t> row_wise_predicted_ids(int64_t ids, const TablePlan& tp, const std::vector<RowCount>& rows) {
  std::vector<int64_t> w(tp.shards.size(), 0);
  int64_t any = 0;
  for (const RowCount& b : rows) {
    const int64_t len = b.row_end - b.row_begin;
    if (len <= 0 || b.ids <= 0) continue;
    any += b.ids;
    for (size_t i = 0; i < tp.shards.size(); ++i) {
      const Shard& s = tp.shards[i];
      const int64_t lo = std::max(b.row_begin, s.row_offset), hi = std::min(b.row_end, s.row_offset + s.num_rows);
      if (hi <= lo) continue;
      // exact for a block within one shard (ids x 2^20 < 2^53 for ids < 2^33)
      w[i] += static_cast<int64_t>(static_cast<double>(b.ids) * static_cast<double>(hi - lo) / static_cast<double>(len) * 1048576.0);
    }
  }
  if (any == 0 || std::all_of(w.begin(), w.end(), [](int64_t x) { return x == 0; })) return row_wise_predicted_ids(ids, tp);
  return proportional(ids, w, tp.table, "rows");
}

TablePlan column_wise_table_plan(const WorkloadSpec& spec, int table, int from, const std::vector<int>& others) {
  const TableSpec& t = spec.tables.at(static_cast<size_t>(table));
  const int parts = static_cast<int>(
      std::min<int64_t>(1 + static_cast<int64_t>(others.size()), std::max<int64_t>(1, t.embedding_dim / 4)));
  TablePlan tp;
  tp.table = table;
  tp.type = ShardingType::column_wise;
  int64_t off = 0;
  const std::vector<int64_t> cols = column_split(t.embedding_dim, parts);
  for (size_t i = 0; i < cols.size(); ++i) {
    tp.shards.push_back({i == 0 ? from : others[i - 1], 0, t.rows(), off, cols[i]});
    off += cols[i];
  }
  return tp;
}

int64_t block_move_bytes(const WorkloadSpec& spec, int table, int64_t rows, int64_t cols) {
  const TableSpec& t = spec.tables.at(static_cast<size_t>(table));
  const auto [m1, m2] = optimizer_state_floats(spec.optimizer.type, 1, cols);
  return rows * (row_bytes(t.data_type, cols) + (m1 + m2) * 4);
}

int64_t change_bytes(const WorkloadSpec& spec, const TablePlan& tp, int from) {
  int64_t b = 0;
  for (const Shard& s : tp.shards)
    if (s.rank != from) b += block_move_bytes(spec, tp.table, s.num_rows, s.num_cols);
  return b;
}

std::vector<int64_t> column_wise_predicted_load(int64_t load, const TablePlan& tp) {
  std::vector<int64_t> cols;
  for (const Shard& s : tp.shards) cols.push_back(s.num_cols);
  return proportional(load, cols, tp.table, "columns");
}

}  // namespace embedscope::engine::rebalance
