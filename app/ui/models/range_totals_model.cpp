#include "models/range_totals_model.h"

#include "core/kernel_name.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

void RangeTotalsModel::set_totals(std::vector<OpTotal> totals) {
  beginResetModel();
  totals_ = std::move(totals);
  std::vector<std::string> whole;
  for (const auto& t : totals_) whole.push_back(session_->name(t.name_id));
  short_names_ = sessions::distinct_short_kernel_names(whole);
  endResetModel();
}

QVariant RangeTotalsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const OpTotal& t = totals_[static_cast<size_t>(index.row())];
  if (role == Qt::TextAlignmentRole)
    return index.column() == Name ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ToolTipRole && index.column() == Name) return QString::fromStdString(session_->name(t.name_id));  // whole
  const bool raw = role == Qt::UserRole;
  if (role != Qt::DisplayRole && !raw) return {};
  const double mean = t.count ? static_cast<double>(t.total_ns) / static_cast<double>(t.count) : 0.0;
  switch (index.column()) {
    case Name: return QString::fromStdString(short_names_[static_cast<size_t>(index.row())]);
    case Rank: return raw || t.rank >= 0 ? QVariant(t.rank) : QVariant(QString("all"));
    case Count: return QVariant::fromValue<qlonglong>(t.count);
    case Total: return raw ? QVariant::fromValue<qlonglong>(t.total_ns) : QString::fromStdString(format_duration(t.total_ns));
    case Mean: return raw ? QVariant(mean) : QString::fromStdString(format_duration(static_cast<int64_t>(mean)));
    case Bytes: return raw ? QVariant::fromValue<qlonglong>(t.bytes) : QString::fromStdString(sessions::format_bytes(t.bytes));
    default: return {};
  }
}

QVariant RangeTotalsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"name", "rank", "count", "time in range", "mean", "bytes"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace embedscope::ui
