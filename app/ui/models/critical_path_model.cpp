#include "models/critical_path_model.h"

#include <algorithm>

#include "embedscope/engine/sharding/sharding.h"  // format_bytes
#include "core/kernel_name.h"
#include "core/timeline_math.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

namespace {
QVariant duration(int64_t ns, int role) {
  return role == Qt::UserRole ? QVariant::fromValue<qlonglong>(ns) : QString::fromStdString(format_duration(ns));
}
}  // namespace

CriticalPathModel::CriticalPathModel(const sessions::RunStats& stats, const sessions::SessionReader& session,
                                     QObject* parent)
    : QAbstractTableModel(parent), entries_(stats.critical_path) {
  std::vector<std::string> whole;
  for (const auto& e : entries_) {
    whole.push_back(e.name_id < 0 ? std::string("(gap: untraced)") : session.name(e.name_id));
    names_ << QString::fromStdString(whole.back());
  }
  for (const auto& n : sessions::distinct_short_kernel_names(whole)) short_names_ << QString::fromStdString(n);
}

int CriticalPathModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(entries_.size());
}

QVariant CriticalPathModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& e = entries_[static_cast<size_t>(index.row())];
  if (role == Qt::ToolTipRole && index.column() == 0) return names_[index.row()];  // a long kernel name, whole
  if (role == Qt::TextAlignmentRole)
    return int((index.column() <= Category ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  switch (index.column()) {
    case Op: return short_names_[index.row()];
    case Category: return e.name_id < 0 ? QString("-") : QString(sessions::to_string(e.category));
    case OnPath: return duration(e.ns, role);
    case Share: return role == Qt::UserRole ? QVariant(e.share) : QString::number(100 * e.share, 'f', 1) + " %";
    case TopRank: return e.top_rank;
    case StepsBounded: return QVariant::fromValue<qlonglong>(e.steps_bounded);
    default: return {};
  }
}

QVariant CriticalPathModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"op", "category", "on path", "share", "top rank", "steps bounded"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

CollectiveTimesModel::CollectiveTimesModel(const sessions::RunStats& stats, const sessions::SessionReader& session,
                                           QObject* parent)
    : QAbstractTableModel(parent), steps_(std::max<int64_t>(1, stats.counted_steps())),
      bytes_unknown_(sessions::collective_bytes_unknown(session)) {
  std::vector<std::string> whole;
  for (const auto& c : stats.collectives) {
    whole.push_back(session.name(c.name_id));
    names_ << QString::fromStdString(whole.back());
  }
  QStringList shorts;
  for (const auto& n : sessions::distinct_short_kernel_names(whole)) shorts << QString::fromStdString(n);
  // each collective's split checks on a row of their own under it (tester51 F4)
  const QStringList wholes = names_;
  names_.clear();
  for (size_t i = 0; i < stats.collectives.size(); ++i) {
    const auto& c = stats.collectives[i];
    rows_.push_back({c, false});
    names_ << wholes[static_cast<qsizetype>(i)];
    short_names_ << shorts[static_cast<qsizetype>(i)];
    if (c.check_count > 0) {
      rows_.push_back({c, true});
      names_ << wholes[static_cast<qsizetype>(i)] + "/split_check: Embedscope's all-gather of the split sizes before "
                "each all-to-all and reduce-scatter, not run by TorchRec; its count and bytes are not in the row "
                "above, its time is in that collective's ops";
      short_names_ << shorts[static_cast<qsizetype>(i)] + "/split_check";
    }
  }
}

int CollectiveTimesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

QVariant CollectiveTimesModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& row = rows_[static_cast<size_t>(index.row())];
  const auto& c = row.c;
  if (role == Qt::ToolTipRole && index.column() == Name) return names_[index.row()];  // whole
  if (role == Qt::TextAlignmentRole) return int((index.column() == Name ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  switch (index.column()) {
    case Name: return short_names_[index.row()];
    case Count: {
      const double per_step = static_cast<double>(row.check ? c.check_count : c.count) / static_cast<double>(steps_);
      return role == Qt::UserRole ? QVariant(per_step) : QString::number(per_step, 'f', 1);
    }
    case Bytes:
    case Received: {
      if (bytes_unknown_ && c.bytes == 0) return role == Qt::UserRole ? QVariant() : QVariant(QString("unknown"));
      const int64_t b = (index.column() == Bytes ? (row.check ? c.check_bytes_sent : c.bytes_sent)
                                                 : (row.check ? c.check_bytes_received : c.bytes_received)) /
                        steps_;
      return role == Qt::UserRole ? QVariant::fromValue<qlonglong>(b) : QString::fromStdString(sessions::format_bytes(b));
    }
    case Time:
    case Exposed:
    case Waiting:
      if (row.check) return role == Qt::UserRole ? QVariant() : QVariant(QString("-"));  // in its collective's
      break;
    default: return {};
  }
  switch (index.column()) {
    case Time: return duration(c.time_ns / steps_, role);
    case Exposed: return duration(c.exposed_ns / steps_, role);
    case Waiting: return duration(c.wait_ns / steps_, role);
    default: return {};
  }
}

QVariant CollectiveTimesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"collective", "ops / step", "bytes sent / step", "bytes received / step", "time / step", "exposed / step",
                                "waiting for peers / step"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace embedscope::ui
