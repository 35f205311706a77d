#pragma once
// The storage trade-offs of a scenario's runs (core/tradeoff_figures.h) as a Qt item model, for
// the scenario view's "Trade-offs" table: per run what its tables take and what that costs in
// loss, lookup error and step time, beside the reference (fp32) run.

#include <QAbstractTableModel>

#include "core/tradeoff_figures.h"

namespace embedscope::ui {

class TradeoffsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  /// The figures the chart shows first (memory, loss, time), then the rest.
  enum Column { Run, Technique, TableBytes, TableBytesRatio, Loss, LossDelta, HeldOutAuc, HeldOutAucDelta, StepTime,
                StepTimeRatio, MaxAbsError, RelativeError, CollisionsPerStep, PeakAllocated, Weights, OptimizerState,
                HeldOutLoss, ColumnCount };
  explicit TradeoffsModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
  /// Replaces the rows (one per run, in the comparison's order).
  void set_comparison(TradeoffComparison comparison);
  const TradeoffComparison& comparison() const { return comparison_; }
  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(comparison_.runs.size());
  }
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole: readable text ("12.2 MiB", "25.0 %", "43.26 ms", "+0.0524 (+9.0 %)", AUC "0.7312"
  /// and its difference "-0.0031", "-" where a
  /// run has no figure); Qt::UserRole: the raw number (bytes, ns, ratios as fractions, the loss
  /// and its difference to the reference as plain numbers), invalid where the text is "-";
  /// ToolTipRole: the held-out samples for HeldOutAuc, weights + optimizer state for TableBytes, the busiest rank for PeakAllocated, the relative difference for LossDelta, how
  /// the run ended when not complete (Run); FontRole: the reference row in bold.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  /// Horizontal headers in two lines (Loss names N: "loss after\n3 steps"); ToolTipRole gives
  /// each figure's definition.
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  TradeoffComparison comparison_;
};

}  // namespace embedscope::ui
