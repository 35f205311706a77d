#pragma once
// Holistic Trace Analysis' GPU-kernel figures per rank (sessions/analysis/gpu_kernels.h) as a
// Qt item model, for the summary of a session with GPU stream lanes (imported traces, cuda
// runs): overlap %, kernel time, idle, compute, non-compute, kernels counted and dropped (Dropped:
// of the last profiler step; DroppedNoLaunch: with no launch, in no step - tester47 F6).

#include <QAbstractTableModel>

#include <vector>

#include "embedscope/sessions/analysis/gpu_kernels.h"

namespace embedscope::ui {

class GpuKernelsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Rank, Overlap, KernelTime, Idle, Compute, NonCompute, Kernels, Dropped, DroppedNoLaunch, ColumnCount };
  explicit GpuKernelsModel(std::vector<sessions::RankKernelFigures> figures, QObject* parent = nullptr)
      : QAbstractTableModel(parent), figures_(std::move(figures)) {}
  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(figures_.size());
  }
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole: text ("68.80 %", "no communication" for a rank without communication
  /// kernels; durations as the rest of the UI shows them (format_duration), idle, compute and
  /// non-compute with their share of the kernel time: "628.37 ms", "46.91 ms (7.5 %)", "1.5 us");
  /// Qt::UserRole: the raw number
  /// (ns, percent; invalid for "no communication"); ToolTipRole of a header: its definition.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  const std::vector<sessions::RankKernelFigures>& figures() const { return figures_; }

 private:
  std::vector<sessions::RankKernelFigures> figures_;
};

}  // namespace embedscope::ui
