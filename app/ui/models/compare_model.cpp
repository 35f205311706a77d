#include "models/compare_model.h"

#include <stdexcept>
#include <string>

namespace embedscope::ui {

static_assert(static_cast<int>(CompareModel::FigureCount) == sessions::kCompareFigureCount);
static_assert(static_cast<int>(CompareModel::HostExposedComm) == static_cast<int>(sessions::CompareFigure::HostExposedComm));
static_assert(static_cast<int>(CompareModel::HtaOverlap) == static_cast<int>(sessions::CompareFigure::HtaOverlap));
static_assert(static_cast<int>(CompareModel::LookupImbalancePerStep) ==
              static_cast<int>(sessions::CompareFigure::LookupImbalancePerStep));
static_assert(static_cast<int>(CompareModel::LookupTimeImbalance) ==
              static_cast<int>(sessions::CompareFigure::LookupTimeImbalance));
static_assert(static_cast<int>(CompareModel::WireBytesPerStep) == static_cast<int>(sessions::CompareFigure::WireBytesPerStep));
static_assert(static_cast<int>(CompareModel::WireBytesPerToken) == static_cast<int>(sessions::CompareFigure::WireBytesPerToken));

CompareModel::CompareModel(std::vector<QString> labels, std::vector<sessions::RunStats> stats, std::vector<SessionThroughput> rates,
                           QObject* parent)
    : QAbstractTableModel(parent), labels_(std::move(labels)) {
  if (rates.empty())
    for (const auto& s : stats) rates.push_back({s.samples_per_s, "samples"});
  if (rates.size() != stats.size())
    throw std::invalid_argument("CompareModel: " + std::to_string(rates.size()) + " throughputs for " +
                                std::to_string(stats.size()) + " sessions");
  for (size_t i = 0; i < stats.size(); ++i) {
    const bool imported = rates[i].unit.empty();
    sessions_.push_back({std::move(stats[i]), std::move(rates[i]), imported});
  }
}

void CompareModel::set_hta_overlaps(const std::vector<std::optional<double>>& overlaps) {
  if (overlaps.size() != sessions_.size())
    throw std::invalid_argument("CompareModel: " + std::to_string(overlaps.size()) + " HTA overlaps for " +
                                std::to_string(sessions_.size()) + " sessions");
  beginResetModel();
  for (size_t i = 0; i < overlaps.size(); ++i) sessions_[i].hta_overlap_pct = overlaps[i];
  endResetModel();
}

bool CompareModel::has_hta_overlap() const {
  for (const auto& s : sessions_)
    if (s.hta_overlap_pct) return true;
  return false;
}

void CompareModel::set_wire_facts(const std::vector<sessions::WireFacts>& facts) {
  if (facts.size() != sessions_.size())
    throw std::invalid_argument("CompareModel: " + std::to_string(facts.size()) + " wire facts for " +
                                std::to_string(sessions_.size()) + " sessions");
  beginResetModel();
  for (size_t i = 0; i < facts.size(); ++i) sessions_[i].wire = facts[i];
  endResetModel();
}

sessions::RunToRunNoise CompareModel::apply_run_to_run_noise(const std::vector<const sessions::SessionReader*>& readers) {
  if (readers.size() != sessions_.size())
    throw std::invalid_argument("apply_run_to_run_noise: " + std::to_string(readers.size()) + " sessions for " +
                                std::to_string(sessions_.size()) + " sessions");
  return sessions::apply_run_to_run_noise(sessions_, readers);
}

bool CompareModel::has_tokens() const {
  for (const auto& s : sessions_)
    if (s.rate.unit == "tokens") return true;
  return false;
}

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() || sessions_.empty() ? 0 : static_cast<int>(2 * sessions_.size());
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= FigureCount || index.column() >= columnCount()) return {};
  const auto f = static_cast<sessions::CompareFigure>(index.row());
  const size_t n = sessions_.size();
  const int col = index.column();
  if (role == Qt::TextAlignmentRole)
    return col == 0 ? QVariant(Qt::AlignLeft | Qt::AlignVCenter) : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (col == 0) return role == Qt::DisplayRole ? QVariant(sessions::compare_figure_name(f)) : QVariant();
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  if (static_cast<size_t>(col) <= n) {  // a session's value
    const auto& s = sessions_[static_cast<size_t>(col) - 1];
    if (role == Qt::DisplayRole) return QString::fromStdString(sessions::compare_cell_text(s, f));
    const auto v = sessions::compare_value(s, f);
    return v ? QVariant(*v) : QVariant();
  }
  const size_t other = static_cast<size_t>(col) - n;  // 1..n-1: session `other` minus session 0
  const sessions::CompareDelta d = sessions::compare_delta(sessions_[0], sessions_[other], f);
  if (role == Qt::DisplayRole) return QString::fromStdString(d.text);
  return d.diff ? QVariant(*d.diff) : QVariant();
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  const size_t n = sessions_.size();
  if (section == 0) return QString("figure");
  if (static_cast<size_t>(section) <= n) return labels_[static_cast<size_t>(section) - 1];
  return labels_[static_cast<size_t>(section) - n] + " - " + labels_[0];
}

}  // namespace embedscope::ui
