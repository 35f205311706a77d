#pragma once
// The summary page of a session: how the run went (workload, ranks, backend, pipeline, how it
// ended), the `embedscope stats` figures, per-rank times (RankStatsModel), what bounded the
// steps (CriticalPathModel, CollectiveTimesModel) and the sharding plan with per-rank memory
// and load (ShardingPlanModel), and what the ranks' flight recorder dumps say (a hang: who did not
// reach which collective).

#include <QWidget>

#include <memory>

#include "embedscope/sessions/store/session.h"

class QLabel;

namespace embedscope::ui {

class AnalysisJob;

/// The figures come from sessions::analyze, run off the GUI thread when the view is made (the
/// Summary tab is built when first shown): until they arrive the page says "Analysing the
/// session ..." and job()->busy() is true; an analysis that throws leaves its message there.
class SummaryView : public QWidget {
  Q_OBJECT

 public:
  explicit SummaryView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent = nullptr);
  AnalysisJob* job() { return job_; }

 private:
  std::shared_ptr<const sessions::SessionReader> session_;
  AnalysisJob* job_;
  QLabel* status_;  // "Analysing ...", or the analysis' error; null once the figures are shown
};

}  // namespace embedscope::ui
