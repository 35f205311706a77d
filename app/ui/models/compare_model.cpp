#include "models/compare_model.h"

#include <cmath>
#include <iterator>
#include <stdexcept>
#include <string>

#include "core/timeline_math.h"
#include "embedscope/engine/sharding/sharding.h"  // format_bytes
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_rate

namespace embedscope::ui {

namespace {
const char* const kFigureNames[] = {"step time mean", "step time p50", "step time p99", "throughput",
                                    "exposed communication (per rank and step)", "overlap %", "peak allocated (largest rank)",
                                    "peak reserved (largest rank)", "imbalance: ids looked up (max/mean)",
                                    "imbalance: lookup time (max/mean)"};
static_assert(std::size(kFigureNames) == CompareModel::FigureCount);

QString format_figure(CompareModel::Figure f, double v, bool signed_value) {
  const QString sign = signed_value && v > 0 ? "+" : "";
  switch (f) {
    case CompareModel::StepMean:
    case CompareModel::StepP50:
    case CompareModel::StepP99:
    case CompareModel::ExposedComm: return sign + QString::fromStdString(format_duration(static_cast<int64_t>(v)));
    case CompareModel::Throughput: return sign + QString::fromStdString(sessions::format_rate(v));  // the unit: data()
    // a difference of two percentages is in percentage points, not a percentage
    case CompareModel::Overlap: return sign + QString::number(v, 'f', 1) + (signed_value ? " points" : " %");
    case CompareModel::PeakAllocated:
    case CompareModel::PeakReserved:
      return (v < 0 ? "-" : sign) + QString::fromStdString(sessions::format_bytes(static_cast<int64_t>(std::abs(v))));
    case CompareModel::LookupImbalance:
    case CompareModel::LookupTimeImbalance: return sign + QString::number(v, 'f', 2);
    case CompareModel::FigureCount: break;
  }
  return {};
}
}  // namespace

CompareModel::CompareModel(std::vector<QString> labels, std::vector<sessions::RunStats> stats, std::vector<SessionThroughput> rates,
                           QObject* parent)
    : QAbstractTableModel(parent), labels_(std::move(labels)), stats_(std::move(stats)), rates_(std::move(rates)) {
  if (rates_.empty())
    for (const auto& s : stats_) rates_.push_back({s.samples_per_s, "samples"});
  if (rates_.size() != stats_.size())
    throw std::invalid_argument("CompareModel: " + std::to_string(rates_.size()) + " throughputs for " +
                                std::to_string(stats_.size()) + " sessions");
}

double CompareModel::value_of(size_t i, Figure f) const { return f == Throughput ? rates_[i].per_s : value(stats_[i], f); }

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() || stats_.empty() ? 0 : static_cast<int>(2 * stats_.size());
}

double CompareModel::value(const sessions::RunStats& s, Figure f) {
  switch (f) {
    case StepMean: return s.step_time_ns.mean;
    case StepP50: return static_cast<double>(s.step_time_ns.p50);
    case StepP99: return static_cast<double>(s.step_time_ns.p99);
    case Throughput: return s.samples_per_s;
    case ExposedComm: return s.steps > 0 ? static_cast<double>(s.exposed_comm_ns) / static_cast<double>(s.steps) : 0.0;
    case Overlap: return s.overlap_pct;
    case PeakAllocated: return static_cast<double>(s.peak_allocated_bytes);
    case PeakReserved: return static_cast<double>(s.peak_reserved_bytes);
    case LookupImbalance: return s.lookups_max_over_mean;
    case LookupTimeImbalance: return s.lookup_time_max_over_mean;
    case FigureCount: break;
  }
  return 0;
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= FigureCount || index.column() >= columnCount()) return {};
  const auto f = static_cast<Figure>(index.row());
  const size_t n = stats_.size();
  const int col = index.column();
  if (role == Qt::TextAlignmentRole)
    return col == 0 ? QVariant(Qt::AlignLeft | Qt::AlignVCenter) : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (col == 0) return role == Qt::DisplayRole ? QVariant(kFigureNames[f]) : QVariant();
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  // a run without measured steps (e.g. out of memory in warmup) has no step figures, only memory
  // a trace has no throughput (no samples or tokens)
  // a trace has no memory counters (its 0 B are "not recorded") and no ids looked up (tester37 D2)
  auto measured = [&](size_t i) {
    if (f == PeakAllocated || f == PeakReserved) return stats_[i].has_memory;
    if (f == LookupImbalance || f == LookupTimeImbalance) return stats_[i].steps > 0 && stats_[i].has_load;
    return stats_[i].steps > 0 && (f != Throughput || !rates_[i].unit.empty());
  };
  auto unit = [&](size_t i) { return QString::fromStdString(rates_[i].unit) + "/s"; };
  if (static_cast<size_t>(col) <= n) {  // a session's value
    const size_t i = static_cast<size_t>(col) - 1;
    if (!measured(i)) return role == Qt::DisplayRole ? QVariant("-") : QVariant();
    const double v = value_of(i, f);
    if (role == Qt::UserRole) return v;
    return format_figure(f, v, false) + (f == Throughput ? " " + unit(i) : QString());
  }
  const size_t other = static_cast<size_t>(col) - n;  // 1..n-1: session `other` minus session 0
  if (!measured(0) || !measured(other)) return role == Qt::DisplayRole ? QVariant("-") : QVariant();
  if (f == Throughput && rates_[0].unit != rates_[other].unit)  // tokens against samples: no difference
    return role == Qt::DisplayRole ? QVariant(QString("units differ (%1 vs %2)").arg(unit(other), unit(0))) : QVariant();
  const double base = value_of(0, f), diff = value_of(other, f) - base;
  if (role == Qt::UserRole) return diff;
  QString text = format_figure(f, diff, true) + (f == Throughput ? " " + unit(0) : QString());
  if (f != Overlap && base != 0) text += QString(" (%1%2 %)").arg(diff > 0 ? "+" : "").arg(100 * diff / base, 0, 'f', 1);
  return text;
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  const size_t n = stats_.size();
  if (section == 0) return QString("figure");
  if (static_cast<size_t>(section) <= n) return labels_[static_cast<size_t>(section) - 1];
  return labels_[static_cast<size_t>(section) - n] + " - " + labels_[0];
}

}  // namespace embedscope::ui
