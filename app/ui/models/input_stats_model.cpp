#include "models/input_stats_model.h"

namespace embedscope::ui {

void InputStatsModel::set_features(std::vector<engine::FeatureInputStats> features) {
  beginResetModel();
  features_ = std::move(features);
  endResetModel();
}

QVariant InputStatsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& f = features_[static_cast<size_t>(index.row())];
  const int c = index.column();
  if (role == Qt::TextAlignmentRole)
    return c == Feature || c == Table ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ToolTipRole) {
    if (c == Top1) return QString("%1 of %2 rows").arg(f.hot_rows_1).arg(f.num_embeddings);
    if (c == Top10) return QString("%1 of %2 rows").arg(f.hot_rows_10).arg(f.num_embeddings);
    return {};
  }
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool raw = role == Qt::UserRole;
  auto count = [](int64_t v) { return QVariant::fromValue<qlonglong>(v); };
  auto share = [raw](double v) { return raw ? QVariant(v) : QVariant(QString::number(100.0 * v, 'f', 1) + " %"); };
  switch (c) {
    case Feature: return QString::fromStdString(f.feature);
    case Table: return QString::fromStdString(f.table);
    case Rows: return count(f.num_embeddings);
    case IdsPerBag: return raw ? QVariant(f.ids_per_bag_mean) : QVariant(QString::number(f.ids_per_bag_mean, 'f', 3));
    case P99: return count(f.ids_per_bag_p99);
    case Max: return count(f.ids_per_bag_max);
    case Distinct: return count(f.distinct_ids);
    case Top1: return share(f.top1_share);
    case Top10: return share(f.top10_share);
    case OutOfRange: return count(f.out_of_range);
    default: return {};
  }
}

QVariant InputStatsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"feature", "table", "rows", "ids/bag", "p99", "max", "distinct (all)", "top 1%", "top 10%",
                                "out of range"};
  static const char* tips[] = {
      "",
      "",
      "rows of the feature's table (num_embeddings)",
      "mean ids per bag over every bag counted",
      "nearest-rank 99th percentile of the bag lengths",
      "longest bag",
      "distinct in-range rows looked up over all the batches counted, a row once however many steps name it (the "
      "metric \"rows updated (distinct per step)\" counts each step's distinct rows, summed over the steps)",
      "share of the in-range lookups on the hottest ceil(1% of the table's rows) rows",
      "share of the in-range lookups on the hottest ceil(10% of the table's rows) rows",
      "ids outside [0, rows), before the invalid_ids policy"};
  if (role == Qt::DisplayRole) return QString(names[section]);
  if (role == Qt::ToolTipRole) return QString(tips[section]);
  return {};
}

}  // namespace embedscope::ui
