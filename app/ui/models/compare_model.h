#pragma once
// The `embedscope compare` figures of sessions side by side with their differences (File >
// Compare Sessions, teaching scenarios). Every number and every cell's text comes from
// sessions/analysis/compare.h, which `embedscope compare` prints too.

#include <QAbstractTableModel>
#include <QString>

#include <optional>
#include <vector>

#include "core/throughput.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"

namespace embedscope::ui {

/// The compare figures of N sessions: one row per figure (sessions::CompareFigure), columns
/// [figure, session 0 .. session N-1, session 1 - session 0, ..., session N-1 - session 0].
/// DisplayRole: compare_cell_text / compare_delta's text ("+1.20 ms (+15.3 %)" for a difference);
/// Qt::UserRole: the raw number (ns, samples/s or tokens/s, %, bytes, ratio; a difference as the
/// plain difference), invalid where the cell reads "-". A session without measured steps shows
/// "-" for every figure but the memory ones. Throughput is in each session's own unit (`rates`:
/// "691 samples/s", "126 tokens/s", "-" for a trace); where two sessions' units differ the
/// difference reads "units differ (tokens/s vs samples/s)" with no UserRole value (tester35 D7).
/// A GPU run's host threads' exposed communication and its GPU busy have rows of their own (ux41 #6).
class CompareModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Figure { StepMean, StepP50, StepP99, StepMin, StepMax, Throughput, ExposedComm, HostExposedComm, GpuBusy, Overlap, HtaOverlap, PeakAllocated,
                PeakReserved, LookupImbalancePerStep, LookupImbalance, LookupTimeImbalance, Loss, HeldOutAuc, WireBytesPerStep, WireBytesPerToken,
                FigureCount };
  /// `rates`: each session's throughput (throughput_of), one per stats entry; empty means every
  /// session's samples_per_s in samples (DLRM runs). A session whose rate has no unit is taken
  /// for an imported trace (as throughput_of says one). Throws std::invalid_argument when its
  /// size is neither 0 nor stats.size().
  CompareModel(std::vector<QString> labels, std::vector<sessions::RunStats> stats, std::vector<SessionThroughput> rates = {},
               QObject* parent = nullptr);
  int rowCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : FigureCount; }
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  const std::vector<sessions::ComparedSession>& sessions() const { return sessions_; }
  /// Each session's HTA comm/comp overlap (sessions::hta_overlap_pct; one per session, none for an
  /// engine run), for the HtaOverlap row (tester48 F13). Throws std::invalid_argument when the
  /// size differs from the sessions'. Call before a view shows the model.
  void set_hta_overlaps(const std::vector<std::optional<double>>& overlaps);
  /// Whether some session has an HTA overlap (the HtaOverlap row has a value to show).
  bool has_hta_overlap() const;
  /// Each session's wire facts (sessions::wire_facts: collective bytes unknown, split-check
  /// bytes), for the rows WireBytesPerStep ("bytes sent per step (all ranks)") and
  /// WireBytesPerToken; without them a session's bytes are taken as known and no split check is
  /// left out. Throws std::invalid_argument when the size differs from the sessions'. Call before
  /// a view shows the model.
  void set_wire_facts(const std::vector<sessions::WireFacts>& facts);
  /// Groups the sessions that ran the same configuration and holds the step-time verdicts of the
  /// figure rows against their run-to-run noise, as `embedscope compare` does
  /// (sessions::apply_run_to_run_noise; `readers` one per session, in order); returns that noise
  /// for its line (sessions::run_to_run_text). Throws std::invalid_argument when the size differs
  /// from the sessions'. Call before a view shows the model.
  sessions::RunToRunNoise apply_run_to_run_noise(const std::vector<const sessions::SessionReader*>& readers);
  /// Whether some session's throughput is in tokens (the WireBytesPerToken row has a value to show).
  bool has_tokens() const;

 private:
  std::vector<QString> labels_;
  std::vector<sessions::ComparedSession> sessions_;
};

}  // namespace embedscope::ui
