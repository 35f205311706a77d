#pragma once
// Per-op-name totals of a selected time range of the timeline (timeline_math.h range_totals)
// as a Qt item model: name, rank ("all" when summed over ranks), count, total time in the range,
// mean, bytes.

#include <QAbstractTableModel>

#include <memory>
#include <string>
#include <vector>

#include "embedscope/sessions/store/session.h"
#include "core/timeline_math.h"

namespace embedscope::ui {

class RangeTotalsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Name, Rank, Count, Total, Mean, Bytes, ColumnCount };
  /// `session` names the ops (SessionReader::name).
  explicit RangeTotalsModel(std::shared_ptr<const sessions::SessionReader> session, QObject* parent = nullptr)
      : QAbstractTableModel(parent), session_(std::move(session)) {}
  /// Replaces the rows (a model reset).
  void set_totals(std::vector<OpTotal> totals);
  const std::vector<OpTotal>& totals() const { return totals_; }
  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(totals_.size());
  }
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }
  /// DisplayRole: text ("12.50 ms", "1.2 MiB"; a kernel's name as distinct_short_kernel_names, whole in
  /// the name's ToolTipRole); Qt::UserRole: the raw number (ns, bytes, count;
  /// rank -1 for all ranks; the mean in ns as a double).
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::shared_ptr<const sessions::SessionReader> session_;
  std::vector<OpTotal> totals_;
  std::vector<std::string> short_names_;  // distinct_short_kernel_names of the rows' names
};

}  // namespace embedscope::ui
