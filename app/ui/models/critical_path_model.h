#pragma once
// The critical path and per-collective times of a session (sessions/critical_path.h, the
// tables of `embedscope stats`) as Qt item models for the Summary tab.

#include <QAbstractTableModel>
#include <QStringList>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

/// One row per op name on the critical path (and one for the gaps), most time first:
/// op, category, time on the path (summed over the measured steps), share of the path, the rank
/// where most of it ran, steps in which it held the most path time. A kernel's op name shows as
/// its short name (distinct_short_kernel_names, core/kernel_name.h), the whole name in its ToolTipRole.
class CriticalPathModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Op, Category, OnPath, Share, TopRank, StepsBounded, ColumnCount };
  CriticalPathModel(const sessions::RunStats& stats, const sessions::SessionReader& session, QObject* parent = nullptr);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole: formatted text; Qt::UserRole: the raw number (ns, share 0..1, count).
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<sessions::CriticalPathEntry> entries_;
  QStringList names_, short_names_;  // whole (tooltips) and distinct_short_kernel_names (shown)
};

/// One row per collective name, most exposed first, per measured step and summed over ranks:
/// name, ops, bytes, time, exposed time (no compute under it on its rank), time waiting for the
/// last member to join. Names show as distinct_short_kernel_names, whole in the ToolTipRole.
/// A collective with split checks (CollectiveTimes::check_count > 0) is followed by a row
/// "NAME/split_check" with the checks' count and bytes (not in NAME's row) and "-" for the
/// times, which are in NAME's (Qt::UserRole null there; tester51 F4).
class CollectiveTimesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  /// Bytes: bytes sent / step (CollectiveTimes::bytes_sent), Received: bytes received / step
  /// (tester49 F7: one "bytes" column held their sum, unlabelled).
  enum Column { Name, Count, Bytes, Received, Time, Exposed, Waiting, ColumnCount };
  CollectiveTimesModel(const sessions::RunStats& stats, const sessions::SessionReader& session, QObject* parent = nullptr);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole: formatted text; Qt::UserRole: the raw per-step number (ns, bytes; ops as a double:
  /// a pipeline that prefetches has fewer dists inside the measured steps than steps).
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    sessions::CollectiveTimes c;
    bool check = false;  ///< the split-check row under its collective's
  };
  std::vector<Row> rows_;
  QStringList names_, short_names_;  // whole (tooltips) and distinct_short_kernel_names (shown)
  int64_t steps_ = 1;
  bool bytes_unknown_ = false;  ///< sessions::collective_bytes_unknown: 0 B reads "unknown"
};

}  // namespace embedscope::ui
