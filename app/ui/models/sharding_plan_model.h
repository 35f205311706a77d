#pragma once
// The sharding plan of a session as a tree, like TorchRec's planner statistics: one row per
// rank (the shards it holds by type, its planned and measured memory, the ids it looked up and
// the bytes its lookups took in and gave out), with one child row per shard (table, sharding
// type, rows x cols at its offset, its weight bytes and its own load). Sources: the session's
// sharding_plan_json and workload_json metadata, load_counters (measured steps) and the
// per-rank peak allocated memory of sessions::analyze (sessions/schema/FORMAT.md).

#include <QAbstractItemModel>

#include <string>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

class ShardingPlanModel : public QAbstractItemModel {
  Q_OBJECT

 public:
  enum Column { Name, Sharding, Size, PlannedMemory, PeakMemory, IdsLookedUp, BytesIn, BytesOut, ColumnCount };

  struct ShardRow {
    std::string table, type;  ///< table name, TorchRec sharding type
    int shard = 0;            ///< index into the table's shards in the plan
    int64_t num_rows = 0, num_cols = 0, row_offset = 0, col_offset = 0;
    int64_t weight_bytes = 0;  ///< num_rows x num_cols x 4 (fp32)
    int64_t ids = 0, bytes_in = 0, bytes_out = 0;  ///< load counters, measured steps
  };
  struct RankRow {
    int rank = 0;
    std::vector<ShardRow> shards;
    int64_t planned_bytes = -1;  ///< engine::estimate_memory total; -1 when unknown
    int64_t peak_bytes = -1;     ///< measured peak allocated; -1 when the session has none
    int64_t ids = 0, bytes_in = 0, bytes_out = 0;
  };

  /// A session without a plan gives an empty model.
  ShardingPlanModel(const sessions::SessionReader& session, const sessions::RunStats& stats, QObject* parent = nullptr);
  const std::vector<RankRow>& ranks() const { return ranks_; }
  /// The ranks whose measured peak allocated memory exceeds the plan's estimate (the plan
  /// under-estimated them), ascending. Their peak cell reads "746.3 MiB (+1.0 MiB over the
  /// plan)" in red, with the figures in its tooltip.
  std::vector<int> under_planned() const;

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  /// DisplayRole: text; Qt::UserRole: the raw number (bytes, ids) of numeric columns.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<RankRow> ranks_;
};

}  // namespace embedscope::ui
