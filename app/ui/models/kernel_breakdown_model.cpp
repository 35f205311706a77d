#include "models/kernel_breakdown_model.h"

#include <algorithm>
#include <stdexcept>

#include "core/kernel_name.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

namespace {
QString breakdown_share(double share) { return QString("%1 %").arg(100 * share, 0, 'f', 1); }
QString breakdown_duration(int64_t ns) { return QString::fromStdString(sessions::format_duration(ns)); }
}  // namespace

QVariant KernelTypesModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& t = types_[static_cast<size_t>(index.row())];
  if (role == Qt::TextAlignmentRole)
    return index.column() == Type ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool raw = role == Qt::UserRole;
  switch (index.column()) {
    case Type: return QString::fromStdString(sessions::importers::to_string(t.cls));
    case Count: return QVariant::fromValue<qlonglong>(t.count);
    case Total: return raw ? QVariant::fromValue<qlonglong>(t.total_ns) : QVariant(breakdown_duration(t.total_ns));
    case Share: return raw ? QVariant(t.share) : QVariant(breakdown_share(t.share));
    default: return {};
  }
}

QVariant KernelTypesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount || role != Qt::DisplayRole)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"type", "count", "total", "share"};
  return QString(names[section]);
}

KernelBreakdownModel::KernelBreakdownModel(sessions::KernelBreakdown breakdown, std::vector<std::string> names,
                                           int64_t top, QObject* parent)
    : QAbstractTableModel(parent), breakdown_(std::move(breakdown)), names_(std::move(names)) {
  if (names_.size() != breakdown_.kernels.size())
    throw std::invalid_argument("KernelBreakdownModel: " + std::to_string(names_.size()) + " names for " +
                                std::to_string(breakdown_.kernels.size()) + " kernels");
  shown_ = top <= 0 ? names_.size() : std::min(names_.size(), static_cast<size_t>(top));
  // told apart among the rows shown, as stats_tables.cpp breakdown_names does
  short_names_ = distinct_short_kernel_names(std::vector<std::string>(names_.begin(), names_.begin() + static_cast<std::ptrdiff_t>(shown_)));
}

QVariant KernelBreakdownModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const size_t i = static_cast<size_t>(index.row());
  const auto& k = breakdown_.kernels[i];
  if (role == Qt::ToolTipRole && index.column() == Kernel) return QString::fromStdString(names_[i]);
  if (role == Qt::TextAlignmentRole)
    return index.column() <= Type ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool raw = role == Qt::UserRole;
  auto dur = [&](int64_t ns) -> QVariant { return raw ? QVariant::fromValue<qlonglong>(ns) : QVariant(breakdown_duration(ns)); };
  switch (index.column()) {
    case Kernel: return QString::fromStdString(raw ? names_[i] : short_names_[i]);
    case Type: return QString::fromStdString(sessions::importers::to_string(k.cls));
    case Count: return QVariant::fromValue<qlonglong>(k.count);
    case Total: return dur(k.total_ns);
    case Share: return raw ? QVariant(k.share) : QVariant(breakdown_share(k.share));
    case Mean: return raw ? QVariant(k.mean_ns) : QVariant(breakdown_duration(static_cast<int64_t>(k.mean_ns)));
    case Min: return dur(k.min_ns);
    case Max: return dur(k.max_ns);
    default: return {};
  }
}

QVariant KernelBreakdownModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"kernel", "type", "count", "total", "share", "mean", "min", "max"};
  static const char* tips[] = {"the kernel's short name (whole in its tooltip)", "HTA's kernel type",
                               "GPU events of this name, over every rank", "summed durations",
                               "of the summed durations of all GPU events", "", "", ""};
  if (role == Qt::DisplayRole) return QString(names[section]);
  if (role == Qt::ToolTipRole) return QString(tips[section]);
  return {};
}

QString KernelBreakdownModel::left_out_text() const {
  if (shown_ >= breakdown_.kernels.size()) return {};
  double rest = 0;
  for (size_t i = shown_; i < breakdown_.kernels.size(); ++i) rest += breakdown_.kernels[i].share;
  return QString("... and %1 more (share %2): `embedscope stats --top 0` lists all")
      .arg(breakdown_.kernels.size() - shown_)
      .arg(breakdown_share(rest));
}

}  // namespace embedscope::ui
