#include "timeline/timeline_stack.h"

#include <QLabel>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>
#include <optional>

#include "charts/legend.h"
#include "core/timeline_math.h"
#include "embedscope/sessions/analysis/step_windows.h"
#include "jobs/analysis_job.h"
#include "timeline/timeline_widget.h"

namespace embedscope::ui {

namespace {

bool same_windows(const std::vector<std::vector<sessions::StepMetric>>& a,
                  const std::vector<std::vector<sessions::StepMetric>>& b) {
  auto same = [](const sessions::StepMetric& x, const sessions::StepMetric& y) {
    return x.step == y.step && x.rank == y.rank && x.start_ns == y.start_ns && x.end_ns == y.end_ns;
  };
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [&](const auto& u, const auto& v) { return std::equal(u.begin(), u.end(), v.begin(), v.end(), same); });
}

}  // namespace

TimelineStack::TimelineStack(const std::vector<LabelledSession>& sessions, int64_t align_step, QWidget* parent)
    : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  std::vector<std::string> paths;
  QStringList files;
  for (const auto& s : sessions) files << QString::fromStdString(s.session->path());
  const QStringList names = distinct_file_names(files);  // as the Figures page's legend names them
  for (size_t i = 0; i < sessions.size(); ++i) {
    // the file's name, as the Figures page's legend says it (an imported trace's session has an
    // absolute path: tester39); the whole path on hover
    const QString path = QString::fromStdString(sessions[i].session->path());
    auto* label = new QLabel(QString("<b>%1</b> &nbsp; %2").arg(sessions[i].label.toHtmlEscaped(),
                                                                names[static_cast<qsizetype>(i)].toHtmlEscaped()),
                             this);
    label->setToolTip(path);
    auto* w = new TimelineWidget(sessions[i].session, this);
    extents_.emplace_back(w->scale().t0(), w->scale().t1());  // a new timeline shows all it recorded
    steps_.push_back(sessions[i].session->steps());  // the steps table; windows of a run that ended inside a step below
    paths.push_back(sessions[i].session->path());
    timelines_.push_back(w);
    layout->addWidget(label);
    layout->addWidget(w);
    connect(w, &TimelineWidget::view_changed, this, [this, i] { sync_from(i); });
  }
  layout->addStretch(1);
  // the colours, as the single timeline shows them (GPU sync waits where a session has them)
  const bool sync = std::any_of(timelines_.begin(), timelines_.end(), [](const TimelineWidget* t) { return t->has_sync_rows(); });
  const bool annotations =
      std::any_of(timelines_.begin(), timelines_.end(), [](const TimelineWidget* t) { return t->has_annotation_rows(); });
  // the stacked timelines draw no critical path (no control turns it on here, unlike the
  // session's Timeline): the legend leaves its line out (tester61a F9)
  std::vector<LegendEntry> entries = timeline_legend(sync, annotations);
  std::erase_if(entries, [](const LegendEntry& e) { return e.label == "critical path"; });
  legend_ = new ColourLegend(std::move(entries), this);
  layout->insertWidget(0, legend_);
  align_to_step(align_step);
  // A run that ended inside a step has no row for it: its window comes from a pass over every
  // op (sessions::step_windows), off the GUI thread; a complete run's windows are its table's.
  auto* job = new AnalysisJob(this);
  job->start<std::vector<std::vector<sessions::StepMetric>>>(
      [paths] {
        std::vector<std::vector<sessions::StepMetric>> windows;
        for (const auto& p : paths) windows.push_back(sessions::step_windows(sessions::SessionReader(p)));
        return windows;
      },
      [this](std::vector<std::vector<sessions::StepMetric>>& windows) {
        const bool changed = !same_windows(windows, steps_);
        steps_ = std::move(windows);
        if (changed) align_to_step(align_step_);  // else the view the user may have moved stays
      });
}

void TimelineStack::align_to_step(int64_t step) {
  align_step_ = step;
  offsets_ = sessions::align_offsets(steps_, step);
  // the union of the aligned extents, so that every view can show the same aligned range
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < timelines_.size(); ++i) {
    lo = std::min(lo, extents_[i].first - offsets_[i]);
    hi = std::max(hi, extents_[i].second - offsets_[i]);
  }
  for (size_t i = 0; i < timelines_.size(); ++i) {
    TimelineWidget* w = timelines_[i];
    w->scale() = TimeScale(lo + offsets_[i], hi + offsets_[i], w->scale().width());
    w->set_time_origin(offsets_[i]);
  }
  fit_step();
}

void TimelineStack::fit_step() {
  int64_t longest = 0;
  for (const auto& steps : steps_)
    if (const std::optional<int64_t> start = sessions::step_start(steps, align_step_))
      for (const auto& s : steps)
        if (s.step == align_step_) longest = std::max(longest, s.end_ns - *start);
  if (longest <= 0) {
    for (TimelineWidget* w : timelines_) {
      w->scale().fit();
      w->update();
    }
    return;
  }
  show_range(-longest / 50, longest + longest / 50);
}

void TimelineStack::show_range(int64_t t0_ns, int64_t t1_ns) {
  for (size_t i = 0; i < timelines_.size(); ++i) {
    timelines_[i]->scale().show(t0_ns + offsets_[i], t1_ns + offsets_[i]);
    timelines_[i]->update();
  }
}

int64_t TimelineStack::view_t0() const {
  return timelines_.empty() ? 0 : timelines_[0]->scale().t0() - offsets_[0];
}

void TimelineStack::sync_from(size_t i) {
  if (syncing_) return;
  syncing_ = true;
  const TimeScale& s = timelines_[i]->scale();
  show_range(s.t0() - offsets_[i], s.t1() - offsets_[i]);
  syncing_ = false;
}

}  // namespace embedscope::ui
