#include "models/tradeoffs_model.h"

#include <QFont>

#include "embedscope/sessions/analysis/noise.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

namespace {
QString tradeoffs_signed(double v, int precision) {
  if (v == 0) return "0";
  return (v > 0 ? "+" : "") + QString::number(v, 'g', precision);
}
QString tradeoffs_percent(double fraction) { return QString::number(100.0 * fraction, 'f', 1) + " %"; }
}  // namespace

void TradeoffsModel::set_comparison(TradeoffComparison comparison) {
  beginResetModel();
  comparison_ = std::move(comparison);
  endResetModel();
}

QVariant TradeoffsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto row = static_cast<size_t>(index.row());
  const TradeoffRun& r = comparison_.runs[row];
  const bool is_reference = row == comparison_.reference;
  const int c = index.column();
  if (role == Qt::TextAlignmentRole)
    return c == Run || c == Technique ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::FontRole) {
    if (!is_reference) return {};
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::ToolTipRole) {
    if (c == Run) {
      if (r.ended != "complete") return QString("the run ended %1").arg(QString::fromStdString(r.ended));
      return is_reference ? QVariant(QString("the reference run")) : QVariant();
    }
    if (c == TableBytes && r.has_storage)
      return QString("%1 weights + %2 optimizer state")
          .arg(QString::fromStdString(sessions::format_bytes(r.weight_bytes)),
               QString::fromStdString(sessions::format_bytes(r.optimizer_state_bytes)));
    if (c == PeakAllocated && r.peak_rank >= 0) return QString("rank %1").arg(r.peak_rank);
    if (c == HeldOutAuc && r.has_held_out)
      return r.held_out_auc_se > 0 ? QString("on %1 held-out samples; \u00b1 its standard error (Hanley & McNeil 1982, from "
                                             "the held-out set's positives and negatives)")
                                         .arg(r.held_out_samples)
                                   : QString("on %1 held-out samples").arg(r.held_out_samples);
    if (c == HeldOutAucDelta && r.has_held_out && !is_reference && r.held_out_auc_delta_se > 0) {
      const sessions::AucDifference d{r.held_out_auc_delta, r.held_out_auc_delta_se, r.held_out_auc_delta_within_noise};
      return QString::fromStdString(sessions::auc_difference_text(d)) +
             (d.within_noise ? QString(": the held-out sample alone could make this difference")
                             : QString(": more than the held-out sample's chance; a short run can still make it "
                                       "(docs/configuration.md, the compression study)"));
    }
    if (c == LossDelta && r.has_loss && !is_reference) return tradeoffs_signed(100.0 * r.loss_relative, 3) + " % of the reference's loss";
    return {};
  }
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool raw = role == Qt::UserRole;
  const bool storage = r.has_storage, steps = r.steps > 0;
  auto bytes = [raw](int64_t v) {
    return raw ? QVariant::fromValue<qlonglong>(v) : QVariant(QString::fromStdString(sessions::format_bytes(v)));
  };
  const QVariant none = raw ? QVariant() : QVariant(QString("-"));
  switch (c) {
    case Run: return QString::fromStdString(r.label);
    case Technique: return QString::fromStdString(r.technique);
    case Weights: return storage ? bytes(r.weight_bytes) : none;
    case OptimizerState: return storage ? bytes(r.optimizer_state_bytes) : none;
    case TableBytes: return storage ? bytes(r.table_bytes()) : none;
    case TableBytesRatio: {
      if (!storage || !comparison_.runs[comparison_.reference].has_storage) return none;
      const double v = comparison_.table_bytes_ratio(row);
      return raw ? QVariant(v) : QVariant(tradeoffs_percent(v));
    }
    case PeakAllocated: return r.peak_rank >= 0 ? bytes(r.peak_allocated_bytes) : none;
    case StepTime:
      if (!steps) return none;
      return raw ? QVariant(r.step_mean_ns)
                 : QVariant(QString::fromStdString(sessions::format_duration(static_cast<int64_t>(r.step_mean_ns))));
    case StepTimeRatio: {
      if (!steps || comparison_.runs[comparison_.reference].steps == 0) return none;
      const double v = comparison_.step_time_ratio(row);
      return raw ? QVariant(v) : QVariant(tradeoffs_percent(v));
    }
    case Loss:
      if (!r.has_loss) return none;
      return raw ? QVariant(r.loss) : QVariant(QString::number(r.loss, 'f', 4));
    case LossDelta:
      if (!r.has_loss || !comparison_.runs[comparison_.reference].has_loss) return none;
      if (raw) return r.loss_delta;
      if (is_reference) return QString("reference");
      return QString("%1 (%2%3 %)")
          .arg(tradeoffs_signed(r.loss_delta, 3), r.loss_relative < 0 ? "" : "+")
          .arg(100.0 * r.loss_relative, 0, 'f', 2);
    case HeldOutAuc:
      if (!r.has_held_out) return none;
      if (raw) return r.held_out_auc;
      // its standard error beside it (tester42 F5)
      return r.held_out_auc_se > 0 ? QString("%1 \u00b1 %2").arg(r.held_out_auc, 0, 'f', 4).arg(r.held_out_auc_se, 0, 'f', 4)
                                   : QString::number(r.held_out_auc, 'f', 4);
    case HeldOutAucDelta: {
      if (!r.has_held_out || !comparison_.runs[comparison_.reference].has_held_out) return none;
      if (raw) return r.held_out_auc_delta;
      if (is_reference) return QString("reference");
      if (r.held_out_auc_delta_se <= 0)
        return r.held_out_auc_delta == 0 ? QString("0") : QString::asprintf("%+.4f", r.held_out_auc_delta);
      sessions::AucDifference d{r.held_out_auc_delta, r.held_out_auc_delta_se, r.held_out_auc_delta_within_noise};
      return QString::fromStdString(sessions::auc_difference_cell(d)).replace(" noise", " (within noise)");
    }
    case HeldOutLoss:
      if (!r.has_held_out) return none;
      return raw ? QVariant(r.held_out_loss) : QVariant(QString::number(r.held_out_loss, 'f', 4));
    case MaxAbsError:
      if (!storage || !r.errors_measured) return none;
      return raw ? QVariant(r.max_abs_error) : QVariant(QString::number(r.max_abs_error, 'g', 3));
    case RelativeError:
      if (!storage || !r.errors_measured) return none;
      return raw ? QVariant(r.relative_error) : QVariant(QString::number(r.relative_error, 'g', 3));
    case CollisionsPerStep:
      if (!storage || !steps || !r.errors_measured) return none;
      return raw ? QVariant(r.collisions_per_step()) : QVariant(QString::number(r.collisions_per_step(), 'f', 1));
    default: return {};
  }
}

QVariant TradeoffsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
    return QAbstractTableModel::headerData(section, orientation, role);
  const QString ref = comparison_.runs.empty() ? QString("the reference")
                                               : QString::fromStdString(comparison_.runs[comparison_.reference].label);
  if (role == Qt::DisplayRole) {
    switch (section) {
      case Run: return QString("run");
      case Technique: return QString("tables\nstored as");
      case Weights: return QString("weights");
      case OptimizerState: return QString("optimizer\nstate");
      case TableBytes: return QString("table\nbytes");
      case TableBytesRatio: return QString("of\n%1").arg(ref);
      case PeakAllocated: return QString("peak of the\nbusiest rank");
      case StepTime: return QString("step\ntime");
      case StepTimeRatio: return QString("of\n%1").arg(ref);
      case Loss: return QString("loss after\n%1 step%2").arg(comparison_.loss_steps).arg(comparison_.loss_steps == 1 ? "" : "s");
      case LossDelta: return QString("vs\n%1").arg(ref);
      case HeldOutAuc: return QString("held-out\nAUC");
      case HeldOutAucDelta: return QString("vs\n%1").arg(ref);
      case HeldOutLoss: return QString("held-out\nloss");
      case MaxAbsError: return QString("lookup\nerror");
      case RelativeError: return QString("relative\nerror");
      case CollisionsPerStep: return QString("collisions\nper step");
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Run: return QString("the scenario's run; the reference (bold) is the run labelled fp32, else the first");
      case Technique: return QString("how the run's tables are stored (its session's table_storage_json and workload)");
      case Weights: return QString("bytes of the tables' stored rows (low rank: A and B), every table on every rank");
      case OptimizerState: return QString("bytes of the tables' optimizer state, every table on every rank");
      case TableBytes: return QString("weights + optimizer state");
      case TableBytesRatio: return QString("table bytes over the reference's");
      case PeakAllocated: return QString("the busiest rank's peak allocated device memory over the run (warm-up included)");
      case StepTime: return QString("mean over the measured steps of the slowest rank's step time");
      case StepTimeRatio: return QString("step time over the reference's");
      case Loss: return QString("the loss of measured step N (the same on every rank), N the fewest measured steps of any run");
      case LossDelta: return QString("loss - the reference's loss after the same steps (and relative to it)");
      case HeldOutAuc: return QString("ROC AUC of the trained model on held-out batches the workload's generator made "
                                      "from iterations training never reached (the same samples for every run whose features keep "
                                      "their tables: the teacher labels an id by the table that serves it)");
      case HeldOutAucDelta: return QString("held-out AUC - the reference's; \"within noise\" when within 2 standard "
                                           "errors of the difference, sqrt(SE^2 + SE_ref^2)");
      case HeldOutLoss: return QString("mean binary cross-entropy of the trained model on the held-out batches");
      case MaxAbsError: return QString("max |fp32 row - row as stored| over the rows the measured steps updated, worst table "
                                       "(0 for fp32 rows, hashed and low-rank tables: their cost shows in the loss)");
      case RelativeError: return QString("that error over max |fp32 row|, worst table");
      case CollisionsPerStep: return QString("ids sharing a row with another id of the batch (hashing), all tables and ranks, per measured step");
      default: return {};
    }
  }
  return {};
}

}  // namespace embedscope::ui
