#pragma once
// The `stats` figures of sessions side by side with their differences (File > Compare
// Sessions, teaching scenarios). Figures come from sessions::analyze.

#include <QAbstractTableModel>
#include <QString>

#include <vector>

#include "core/throughput.h"
#include "embedscope/sessions/analysis/analysis.h"

namespace embedscope::ui {

/// The `stats` figures of N sessions: one row per figure, columns
/// [figure, session 0 .. session N-1, session 1 - session 0, ..., session N-1 - session 0].
/// DisplayRole: formatted text ("+1.20 ms (+15.3 %)" for a difference); Qt::UserRole: the raw
/// number (ns, samples/s or tokens/s, %, bytes, ratio; a difference as the plain difference). A
/// session without measured steps shows "-" (and no UserRole value) for every figure but the
/// memory ones. Throughput is in each session's own unit (`rates`: "691 samples/s", "126
/// tokens/s", "-" for a trace); where two sessions' units differ the difference reads "units
/// differ (tokens/s vs samples/s)" with no UserRole value, never a ratio of the two (tester35 D7).
class CompareModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Figure { StepMean, StepP50, StepP99, Throughput, ExposedComm, Overlap, PeakAllocated, PeakReserved,
                LookupImbalance, LookupTimeImbalance, FigureCount };
  /// `rates`: each session's throughput (throughput_of), one per stats entry; empty means every
  /// session's samples_per_s in samples (DLRM runs). Throws std::invalid_argument when its size
  /// is neither 0 nor stats.size().
  CompareModel(std::vector<QString> labels, std::vector<sessions::RunStats> stats, std::vector<SessionThroughput> rates = {},
               QObject* parent = nullptr);
  int rowCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : FigureCount; }
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  /// The raw value of `figure` in `stats` (units as above; Throughput: samples_per_s).
  static double value(const sessions::RunStats& stats, Figure figure);
  /// The raw value of `figure` for session i: value(), except Throughput from its rate.
  double value_of(size_t session, Figure figure) const;
  const std::vector<sessions::RunStats>& stats() const { return stats_; }

 private:
  std::vector<QString> labels_;
  std::vector<sessions::RunStats> stats_;
  std::vector<SessionThroughput> rates_;
};

}  // namespace embedscope::ui
