#include "models/gpu_kernels_model.h"

namespace embedscope::ui {

namespace {
// HTA prints whole microseconds; sub-us figures (exact ns of engine sessions) keep 3 decimals.
QString us(int64_t ns) {
  return ns % 1000 == 0 ? QString("%1 us").arg(ns / 1000) : QString("%1 us").arg(static_cast<double>(ns) / 1000.0, 0, 'f', 3);
}
}  // namespace

QVariant GpuKernelsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& f = figures_[static_cast<size_t>(index.row())];
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool raw = role == Qt::UserRole;
  auto dur = [&](int64_t ns) -> QVariant { return raw ? QVariant::fromValue<qlonglong>(ns) : QVariant(us(ns)); };
  switch (index.column()) {
    case Rank: return f.rank;
    case Overlap:
      if (!f.has_comm) return raw ? QVariant() : QVariant(QString("no communication"));
      return raw ? QVariant(f.overlap_pct) : QVariant(QString::number(f.overlap_pct, 'f', 2) + " %");
    case KernelTime: return dur(f.kernel_time_ns);
    case Idle: return dur(f.idle_ns);
    case Compute: return dur(f.compute_ns);
    case NonCompute: return dur(f.non_compute_ns);
    case Kernels: return QVariant::fromValue<qlonglong>(f.gpu_events);
    case Dropped: return QVariant::fromValue<qlonglong>(f.dropped_events);
    default: return {};
  }
}

QVariant GpuKernelsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"rank", "overlap", "kernel time", "idle", "compute", "non-compute", "GPU events", "dropped"};
  static const char* tips[] = {
      "",
      "time computation kernels ran while communication kernels ran / communication kernel time (merged intervals "
      "per class; memory and sync kernels in neither)",
      "first GPU kernel start to last kernel end",
      "kernel time - union of all GPU kernels",
      "union of the computation kernels",
      "kernel time - compute - idle",
      "GPU events counted (kernels, memcpy, memset, sync)",
      "GPU events of the last profiler step, dropped as HTA drops them"};
  if (role == Qt::DisplayRole) return QString(names[section]);
  if (role == Qt::ToolTipRole) return QString(tips[section]);
  return {};
}

}  // namespace embedscope::ui
