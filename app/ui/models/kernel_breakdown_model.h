#pragma once
// Holistic Trace Analysis' get_gpu_kernel_breakdown (sessions/analysis/kernel_breakdown.h) as Qt
// item models for the Summary: the kernel types and the top kernels by total time, the tables
// `embedscope stats` prints (app/cli/commands/stats_tables.cpp kernel_breakdown_text) from the
// same KernelBreakdown, with the same top rows and "... and K more" line.

#include <QAbstractTableModel>
#include <QString>

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/kernel_breakdown.h"

namespace embedscope::ui {

/// `stats --top`'s default: the kernels the Summary lists before "... and K more".
constexpr int64_t kBreakdownTopRows = 10;

/// The kernel types: type, count, total, share (one row per KernelBreakdown::types entry).
class KernelTypesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Type, Count, Total, Share, ColumnCount };
  explicit KernelTypesModel(std::vector<sessions::KernelTypeRow> types, QObject* parent = nullptr)
      : QAbstractTableModel(parent), types_(std::move(types)) {}
  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(types_.size());
  }
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole: "computation", "12", "1.25 ms" (format_duration), "30.0 %"; Qt::UserRole: raw
  /// (count, total ns, share 0..1).
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<sessions::KernelTypeRow> types_;
};

/// The first `top` kernels by total time (every kernel when `top` <= 0): kernel (Nsight's short
/// name, told apart: distinct_short_kernel_names; the whole name in its tooltip), type, count,
/// total, share, mean, min, max.
class KernelBreakdownModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Kernel, Type, Count, Total, Share, Mean, Min, Max, ColumnCount };
  /// `names`: SessionReader::name of every kernel's name_id, in the order of `breakdown.kernels`
  /// (throws std::invalid_argument when the counts differ).
  KernelBreakdownModel(sessions::KernelBreakdown breakdown, std::vector<std::string> names, int64_t top = kBreakdownTopRows,
                       QObject* parent = nullptr);
  int rowCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : static_cast<int>(shown_); }
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole: the short name, type, count, durations as format_duration writes them (mean
  /// truncated to whole ns, as stats prints it), share "41.2 %"; Qt::UserRole: raw (whole name,
  /// ns, share 0..1, mean ns as a double); ToolTipRole of the kernel column: the whole name.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  /// "... and 234 more (share 3.1 %): `embedscope stats --top 0` lists all" for the kernels not
  /// shown, "" when every kernel is.
  QString left_out_text() const;
  const sessions::KernelBreakdown& breakdown() const { return breakdown_; }

 private:
  sessions::KernelBreakdown breakdown_;
  std::vector<std::string> names_, short_names_;
  size_t shown_ = 0;
};

}  // namespace embedscope::ui
