#include "models/rank_stats_model.h"

#include "embedscope/engine/sharding/sharding.h"  // format_bytes
#include "core/timeline_math.h"
#include "embedscope/sessions/model/units.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace embedscope::ui {

RankStatsModel::RankStatsModel(sessions::RunStats stats, QObject* parent)
    : QAbstractTableModel(parent), stats_(std::move(stats)) {
  // one unit a time column (tester60a F5: "1.25 s, 1.30 s, 989.70 ms, 1.01 s" in one column)
  for (int c : {Compute, Comm, ExposedComm, Idle}) {
    double least = std::numeric_limits<double>::max(), most = 0;
    for (const auto& r : stats_.ranks) {
      const int64_t v = c == Compute ? r.compute_ns : c == Comm ? r.comm_ns : c == ExposedComm ? r.exposed_comm_ns : r.idle_ns;
      const double a = std::abs(static_cast<double>(v));
      if (a > 0) least = std::min(least, a);
      most = std::max(most, a);
    }
    if (most == 0) continue;  // all 0: each reads "0 ns"
    unit_[c] = sessions::duration_unit(least);
    if (most / unit_[c].ns >= 1e5) unit_[c] = sessions::duration_unit(most);  // not "2500000.00 ms"
  }
}

QVariant RankStatsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& r = stats_.ranks[static_cast<size_t>(index.row())];
  auto dur = [&](int64_t ns) -> QVariant {
    if (role == Qt::UserRole) return QVariant::fromValue<qlonglong>(ns);
    const sessions::DurationUnit& u = unit_[index.column()];
    if (u.ns <= 1) return QString::fromStdString(format_duration(ns));
    return QString::fromStdString(fmt::format("{:.{}f} {}", static_cast<double>(ns) / u.ns, u.decimals, u.name));
  };
  auto bytes = [&](int64_t b) -> QVariant {
    return role == Qt::UserRole ? QVariant::fromValue<qlonglong>(b) : QString::fromStdString(sessions::format_bytes(b));
  };
  auto pct = [&](double v) -> QVariant { return role == Qt::UserRole ? QVariant(v) : QString::number(v, 'f', 1) + " %"; };
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  // not measured, as `compare` says it (tester41 #17: a run killed before its first step read
  // "peak allocated 0 B"): the memory columns without memory counters (a memory snapshot has
  // them and no step), the others without a completed measured step
  const QVariant none = role == Qt::UserRole ? QVariant() : QVariant(QString("-"));
  const bool memory_column = index.column() == PeakAllocated || index.column() == PeakReserved ||
                             index.column() == Fragmentation;
  // (a trace without profiler steps has its figures over the whole trace: RunStats::whole_trace)
  if (memory_column ? !stats_.has_memory : index.column() != Rank && stats_.steps <= 0 && !stats_.whole_trace) return none;
  switch (index.column()) {
    case Rank: return r.rank;
    case Compute: return dur(r.compute_ns);
    case Comm: return dur(r.comm_ns);
    case ExposedComm: return dur(r.exposed_comm_ns);
    case Idle: return dur(r.idle_ns);
    case Overlap:  // n/a without communication, as `stats` says it
      if (r.comm_ns == 0) return role == Qt::UserRole ? QVariant() : QVariant(QString("n/a"));
      return pct(r.overlap_pct);
    case IdsLookedUp: return QVariant::fromValue<qlonglong>(r.ids_looked_up);
    case BytesSent:
      if (bytes_unknown_ && r.comm_ns > 0 && r.bytes_sent == 0) return role == Qt::UserRole ? QVariant() : QVariant(QString("unknown"));
      return bytes(r.bytes_sent);
    case BytesReceived:
      if (bytes_unknown_ && r.comm_ns > 0 && r.bytes_received == 0) return role == Qt::UserRole ? QVariant() : QVariant(QString("unknown"));
      return bytes(r.bytes_received);
    case PeakAllocated: return bytes(r.peak_allocated_bytes);
    case PeakReserved: return bytes(r.peak_reserved_bytes);
    case Fragmentation: return pct(100 * r.fragmentation);
    default: return {};
  }
}

QVariant RankStatsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation == Qt::Horizontal && role == Qt::ToolTipRole && section == Fragmentation)
    return QString("%1: 1 - largest free block / free bytes in the reserved segments (docs/output.md, `embedscope stats`)")
        .arg(headerData(section, orientation, Qt::DisplayRole).toString());
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, orientation, role);
  // the fragmentation of a run: the largest at any step end (RunStats; tester41 #7 - the Memory
  // page gives it at peak allocated and at peak reserved, each named so)
  static const char* names[] = {"rank", "compute", "comm", "exposed comm", "idle", "overlap", "ids looked up",
                                "bytes sent", "bytes received", "peak allocated", "peak reserved",
                                "fragmentation, worst step end"};
  if (section == Fragmentation && !fragmentation_label_.isEmpty()) return fragmentation_label_;
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace embedscope::ui
