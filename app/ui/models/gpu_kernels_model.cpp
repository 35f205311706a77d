#include "models/gpu_kernels_model.h"

#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

namespace {
// The UI's durations (format_duration: "879.90 ms", "1.5 us"), not HTA's raw microseconds
// (tester38 #9); a part of the kernel time also says its share of it: "851.97 ms (96.8 %)".
QString duration_text(int64_t ns, int64_t kernel_time_ns, bool share) {
  QString out = QString::fromStdString(sessions::format_duration(ns));
  if (share && kernel_time_ns > 0)
    out += QString(" (%1 %)").arg(100.0 * static_cast<double>(ns) / static_cast<double>(kernel_time_ns), 0, 'f', 1);
  return out;
}
}  // namespace

QVariant GpuKernelsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& f = figures_[static_cast<size_t>(index.row())];
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool raw = role == Qt::UserRole;
  auto dur = [&](int64_t ns, bool share = true) -> QVariant {
    return raw ? QVariant::fromValue<qlonglong>(ns) : QVariant(duration_text(ns, f.kernel_time_ns, share));
  };
  switch (index.column()) {
    case Rank: return f.rank;
    case Overlap:
      if (!f.has_comm) return raw ? QVariant() : QVariant(QString("no communication"));
      return raw ? QVariant(f.overlap_pct) : QVariant(QString::number(f.overlap_pct, 'f', 2) + " %");
    case KernelTime: return dur(f.kernel_time_ns, false);
    case Idle: return dur(f.idle_ns);
    case Compute: return dur(f.compute_ns);
    case NonCompute: return dur(f.non_compute_ns);
    case Kernels: return QVariant::fromValue<qlonglong>(f.gpu_events);
    case Dropped: return QVariant::fromValue<qlonglong>(f.dropped_last_step);
    case DroppedNoLaunch: return QVariant::fromValue<qlonglong>(f.dropped_no_launch);
    default: return {};
  }
}

QVariant GpuKernelsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"rank", "overlap", "kernel time", "idle", "compute", "non-compute", "GPU events", "last step", "no launch"};
  static const char* tips[] = {
      "",
      "time computation kernels ran while communication kernels ran / communication kernel time (merged intervals "
      "per class; memory and sync kernels in neither)",
      "first GPU kernel start to last kernel end",
      "kernel time - union of all GPU kernels",
      "union of the computation kernels",
      "kernel time - compute - idle",
      "GPU events counted (kernels, memcpy, memset, sync)",
      "GPU events of the last profiler step, left out as HTA leaves them out (not lost records)",
      "GPU events with no launching host op (no runtime call with their correlation id): in no profiler step, left "
      "out as HTA leaves them out, whether or not the last step is kept"};
  if (role == Qt::DisplayRole) return QString(names[section]);
  if (role == Qt::ToolTipRole) return QString(tips[section]);
  return {};
}

}  // namespace embedscope::ui
