#pragma once
// The Summary's table-storage block (tester42 F11): one row per table of
// sessions::table_storage_rows, the same figures `embedscope stats` prints (data type, rounding,
// optimizer state, placement, hashing, low rank, bytes over all ranks, the stored rows' error,
// hash collisions per measured step, the device cache's hit rate). "-" where the session has no
// figure (a simulated run's error, an uncached table's hit rate). Qt::UserRole: the raw number
// (bytes, error, collisions a step, hit rate 0..1) or an invalid QVariant for "-".

#include <QAbstractTableModel>

#include <vector>

#include "embedscope/sessions/analysis/table_storage.h"

namespace embedscope::ui {

class TableStorageModel : public QAbstractTableModel {
 public:
  enum Column { Table, DataType, Rounding, State, Placement, HashSize, LowRank, Weights, OptimizerState,
                MaxAbsError, RelativeError, Collisions, CacheHitRate, ColumnCount };
  explicit TableStorageModel(std::vector<sessions::TableStorageRow> rows, QObject* parent = nullptr);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  /// True when a table is stored other than fp32 on the device, unhashed and full rank: the
  /// Summary shows the block only then (sessions::stored_differently).
  bool worth_showing() const;

 private:
  std::vector<sessions::TableStorageRow> rows_;
};

}  // namespace embedscope::ui
