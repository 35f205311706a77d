#pragma once
// `embedscope inspect-input`'s figures per feature (engine/input/input_stats.h) as a Qt item
// model, for the load view's "input per feature" table: ids per bag (mean, p99, max), distinct
// rows looked up, the share of the lookups on the hottest 1% / 10% of the table's rows, and ids
// outside the table.

#include <QAbstractTableModel>

#include <vector>

#include "embedscope/engine/input/input_stats.h"

namespace embedscope::ui {

class InputStatsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Feature, Table, Rows, IdsPerBag, P99, Max, Distinct, Top1, Top10, OutOfRange, ColumnCount };
  explicit InputStatsModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
  /// Replaces the rows (one per feature, in the workload's feature order).
  void set_features(std::vector<engine::FeatureInputStats> features);
  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(features_.size());
  }
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole: the text inspect-input prints ("2.500", "42.1 %"); Qt::UserRole: the raw number
  /// (shares as fractions in [0, 1]), for sorting and tests; ToolTipRole of Top1 / Top10: how many
  /// rows the share is over.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  /// Horizontal headers; their ToolTipRole gives each figure's definition.
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  const std::vector<engine::FeatureInputStats>& features() const { return features_; }

 private:
  std::vector<engine::FeatureInputStats> features_;
};

}  // namespace embedscope::ui
