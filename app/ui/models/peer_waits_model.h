#pragma once
// Each rank's waits for its peers in the collectives of the counted steps (sessions/analysis/
// stragglers.h, from RunStats::peer_waits) as a Qt item model: the table `embedscope stats`
// prints under "waiting for peers, per rank" (app/cli/commands/stats_tables.cpp peer_waits_text),
// with the same per-step division, so that a cell reads as the CLI's.

#include <QAbstractTableModel>

#include <cstdint>
#include <vector>

#include "embedscope/sessions/analysis/stragglers.h"

namespace embedscope::ui {

class PeerWaitsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Rank, Collectives, LastArrivals, Waited, CausedWait, ColumnCount };
  /// `ranks`: RunStats::peer_waits (sums over the counted steps, ns); `steps`: what the times are
  /// divided by, as stats divides them: the counted steps (RunStats::counted_steps), 1 for a whole
  /// trace (values < 1 read as 1).
  PeerWaitsModel(std::vector<sessions::RankPeerWait> ranks, int64_t steps, QObject* parent = nullptr);
  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(ranks_.size());
  }
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole: the rank, counts, and the waits per step as format_duration writes them ("0.15 ms",
  /// "700 ns"); Qt::UserRole: the raw number (a wait: its sum over the counted steps in ns, as
  /// `stats --json` peer_waits.ranks[].waited_ns / caused_wait_ns); ToolTipRole of a header: its definition.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  int64_t steps() const { return steps_; }

 private:
  std::vector<sessions::RankPeerWait> ranks_;
  int64_t steps_ = 1;
};

}  // namespace embedscope::ui
