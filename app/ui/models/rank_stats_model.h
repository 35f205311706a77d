#pragma once
// Per-rank figures of a session (the rows of `embedscope stats`) as a Qt item model: times over
// the measured steps, device memory peaks (allocated and reserved) over every step, warm-up and
// set-up included.

#include <QAbstractTableModel>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/unit_ladder.h"

namespace embedscope::ui {

class RankStatsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Rank, Compute, Comm, ExposedComm, Idle, Overlap, IdsLookedUp, BytesSent, BytesReceived, PeakAllocated, PeakReserved,
                Fragmentation, ColumnCount };
  explicit RankStatsModel(sessions::RunStats stats, QObject* parent = nullptr);
  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(stats_.ranks.size());
  }
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole: formatted text, a time column's every row in one unit (the unit of its least
  /// non-zero value, "989.70 ms" beside "1253.03 ms", as `stats` prints them - not "1.25 s" beside
  /// "989.70 ms"; the largest value's unit where that would need more than 5 digits before the
  /// point); Qt::UserRole: the raw number (ns, bytes, percent). Not
  /// measured - the memory columns of a session without memory counters (RunStats::has_memory),
  /// the others (but the rank) of one without a completed measured step - reads "-" (UserRole:
  /// a null QVariant).
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  const sessions::RunStats& stats() const { return stats_; }
  /// Bytes sent / received of 0 of a rank that communicated (comm_ns > 0) read "unknown"
  /// (collective_bytes_unknown: the trace's collectives carry no arguments; tester37 #13); a rank
  /// without communication moved 0 B.
  void set_bytes_unknown(bool unknown) { bytes_unknown_ = unknown; }
  /// The fragmentation column's header, saying when the figure was taken (a memory snapshot's
  /// Summary: "fragmentation at peak allocated", the Memory page's figure; tester37 #14). Empty:
  /// "fragmentation, worst step end" (RunStats::fragmentation). The header's ToolTipRole gives the
  /// definition.
  void set_fragmentation_label(QString label) { fragmentation_label_ = std::move(label); }

 private:
  sessions::RunStats stats_;
  bool bytes_unknown_ = false;
  sessions::DurationUnit unit_[ColumnCount] = {};  ///< a time column's unit (ns: format_duration's own)
  QString fragmentation_label_;
};

}  // namespace embedscope::ui
