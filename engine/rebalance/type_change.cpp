// A hot table changed from table_wise to row_wise (rebalance/type_change.h): its row_wise plan,
// the bytes the change moves and the predicted load of its row shards.
#include "embedscope/engine/rebalance/type_change.h"

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
  const std::vector<int64_t> rows = even_split(t.rows(), world);
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

std::vector<int64_t> row_wise_predicted_ids(int64_t ids, const TablePlan& tp) {
  int64_t rows = 0;
  for (const Shard& s : tp.shards) rows += s.num_rows;
  if (rows <= 0) throw std::invalid_argument(fmt::format("rebalance: table {} has shards of no rows", tp.table));
  std::vector<int64_t> out;
  int64_t placed = 0;
  for (const Shard& s : tp.shards) {
    // ids x num_rows fits in 128 bits; in 64 bits for any realistic window (ids < 2^40, rows < 2^23)
    out.push_back(static_cast<int64_t>(static_cast<__int128>(ids) * s.num_rows / rows));
    placed += out.back();
  }
  for (size_t i = 0; placed < ids && i < out.size(); ++i, ++placed) ++out[i];
  return out;
}

}  // namespace embedscope::engine::rebalance
