#include "models/table_storage_model.h"

#include <algorithm>
#include <optional>

#include "embedscope/sessions/model/units.h"  // format_bytes

namespace embedscope::ui {

TableStorageModel::TableStorageModel(std::vector<sessions::TableStorageRow> rows, QObject* parent)
    : QAbstractTableModel(parent), rows_(std::move(rows)) {}

int TableStorageModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int TableStorageModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

bool TableStorageModel::worth_showing() const {
  return std::any_of(rows_.begin(), rows_.end(), [](const auto& r) { return sessions::stored_differently(r); });
}

QVariant TableStorageModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[ColumnCount] = {"table",    "data_type", "rounding", "state",          "placement",
                                           "hash_size", "low_rank", "weights", "optimizer state", "max abs error",
                                           "relative",  "collisions/step", "cache hit rate"};
  return section >= 0 && section < ColumnCount ? QVariant(names[section]) : QVariant();
}

QVariant TableStorageModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const sessions::TableStorageRow& r = rows_[static_cast<size_t>(index.row())];
  auto number = [role](const std::optional<double>& v, const QString& text) -> QVariant {
    if (role == Qt::UserRole) return v ? QVariant(*v) : QVariant();
    return v ? text : QString("-");
  };
  auto count = [role](int64_t v) -> QVariant {
    if (role == Qt::UserRole) return v > 0 ? QVariant(static_cast<qlonglong>(v)) : QVariant();
    return v > 0 ? QString::number(v) : QString("-");
  };
  auto bytes = [role](int64_t v) -> QVariant {
    if (role == Qt::UserRole) return static_cast<qlonglong>(v);
    return QString::fromStdString(sessions::format_bytes(v));
  };
  if (role == Qt::TextAlignmentRole)
    return index.column() >= HashSize ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  switch (index.column()) {
    case Table: return QString::fromStdString(r.table);
    case DataType: return QString::fromStdString(r.data_type);
    case Rounding: return QString::fromStdString(r.rounding);
    case State: return QString::fromStdString(r.state);
    case Placement: return QString::fromStdString(r.placement);
    case HashSize: return count(r.hash_size);
    case LowRank: return count(r.low_rank_dim);
    case Weights: return bytes(r.weight_bytes);
    case OptimizerState: return bytes(r.optimizer_state_bytes);
    // the CLI's formats ({:.3g}, {:.1f}): one number, two programs
    case MaxAbsError: return number(r.max_abs_error, r.max_abs_error ? QString::number(*r.max_abs_error, 'g', 3) : QString());
    case RelativeError: return number(r.relative_error, r.relative_error ? QString::number(*r.relative_error, 'g', 3) : QString());
    case Collisions:
      return number(r.collisions_per_step, r.collisions_per_step ? QString::number(*r.collisions_per_step, 'f', 1) : QString());
    case CacheHitRate:
      return number(r.cache_hit_rate, r.cache_hit_rate ? QString("%1 %").arg(100 * *r.cache_hit_rate, 0, 'f', 1) : QString());
    default: return {};
  }
}

}  // namespace embedscope::ui
