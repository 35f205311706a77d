#include "models/peer_waits_model.h"

#include <algorithm>

#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

PeerWaitsModel::PeerWaitsModel(std::vector<sessions::RankPeerWait> ranks, int64_t steps, QObject* parent)
    : QAbstractTableModel(parent), ranks_(std::move(ranks)), steps_(std::max<int64_t>(1, steps)) {}

QVariant PeerWaitsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& r = ranks_[static_cast<size_t>(index.row())];
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool raw = role == Qt::UserRole;
  // per step as stats_tables.cpp peer_waits_text divides: integer ns
  auto wait = [&](int64_t ns) -> QVariant {
    return raw ? QVariant::fromValue<qlonglong>(ns) : QVariant(QString::fromStdString(sessions::format_duration(ns / steps_)));
  };
  switch (index.column()) {
    case Rank: return r.rank;
    case Collectives: return QVariant::fromValue<qlonglong>(r.collectives);
    case LastArrivals: return QVariant::fromValue<qlonglong>(r.last_arrivals);
    case Waited: return wait(r.waited_ns);
    case CausedWait: return wait(r.caused_wait_ns);
    default: return {};
  }
}

QVariant PeerWaitsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"rank", "collectives", "last to arrive", "waited for peers", "peers waited for it"};
  static const char* tips[] = {
      "",
      "collective instances the rank took part in that ran on two ranks or more",
      "instances in which the rank's op started last, later than another member's: its peers waited for it",
      "per step: from the rank's start of each collective to the start of its last member (capped at its own end)",
      "per step: the other members' waiting in the instances this rank arrived last in"};
  if (role == Qt::DisplayRole) return QString(names[section]);
  if (role == Qt::ToolTipRole) return QString(tips[section]);
  return {};
}

}  // namespace embedscope::ui
