#include "timeline/timeline_view.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include "embedscope/sessions/analysis/analysis.h"
#include "jobs/analysis_job.h"
#include "models/range_totals_model.h"
#include "charts/colors.h"
#include "core/timeline_math.h"
#include "core/timeline_nav.h"
#include "charts/legend.h"
#include "timeline/step_box.h"
#include "timeline/timeline_widget.h"

namespace embedscope::ui {

TimelineView::TimelineView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent)
    : QWidget(parent), timeline_(new TimelineWidget(session, this)), totals_(new RangeTotalsModel(session, this)),
      search_(new QLineEdit(this)), details_(new QLabel(this)), range_label_(new QLabel(this)),
      search_status_(new QLabel(this)), per_rank_(new QCheckBox("per rank", this)),
      critical_path_(new QCheckBox("critical path", this)), path_job_(new AnalysisJob(this)),
      slowest_job_(new AnalysisJob(this)), session_(session),
      step_box_(new StepBox(timeline_->steps().empty() ? 0 : timeline_->steps().begin()->first,
                            timeline_->steps().empty() ? 0 : timeline_->steps().rbegin()->first, this)),
      view_note_(new QLabel(this)), legend_(new ColourLegend(
          [this] {
            auto entries = timeline_legend(timeline_->has_sync_rows(), timeline_->has_annotation_rows());
            if (timeline_->hung())
              entries.push_back({"timed out", hang_marker_color(), "the collective this hung run timed out in", true});
            return entries;
          }(),
          this)),
      back_(new QToolButton(this)), forward_(new QToolButton(this)) {
  auto* bar = new QHBoxLayout;
  auto button = [&](QToolButton* b, const QString& text, const QString& tip, auto fn) {
    b->setText(text);
    b->setToolTip(tip);
    connect(b, &QToolButton::clicked, this, fn);
    bar->addWidget(b);
  };
  button(back_, "<", "Back to the previous view (Backspace, Alt+Left)", [this] { timeline_->back(); });
  button(forward_, ">", "Forward (Shift+Backspace, Alt+Right)", [this] { timeline_->forward(); });
  button(new QToolButton(this), "Fit", "Show the measured steps (F)", [this] {
    timeline_->fit();
    timeline_->navigate(timeline_->view());
  });
  button(new QToolButton(this), "All", "Show everything: warm-up steps and set-up too (Shift+F)", [this] {
    timeline_->scale().fit();
    timeline_->navigate(timeline_->view());
  });
  bar->addWidget(new QLabel("step:", this));
  step_box_->setToolTip("Go to a step: Enter, the arrow keys or the wheel fit it (keys 0..9: steps 0..9; double-click on "
                        "a step; Ctrl+Shift+S: the slowest); it names what the view shows: the step at its centre, or "
                        "the whole steps it holds (\"steps 2-5\", \"all measured steps\")");
  bar->addWidget(step_box_);
  auto* fit_step = new QToolButton(this);
  button(fit_step, "Fit step", "Show the step chosen on the left", [this] { timeline_->fit_step(step_box_->value()); });
  const auto& steps = timeline_->steps();
  fit_step->setEnabled(!steps.empty());
  step_box_->setEnabled(!steps.empty());
  if (steps.empty()) step_box_->setToolTip("no step was recorded (the run ended before its first step ended)");
  // wraps in a narrow window ("1 warm-up step left of the view (Shift+F or All shows them)" in one
  // line held the window 1226 px wide, past a 1000x650 one)
  view_note_->setWordWrap(true);
  bar->addWidget(view_note_);
  bar->addSpacing(16);
  search_->setPlaceholderText("find op by name (Ctrl+F)");
  search_->setClearButtonEnabled(true);
  search_->setMaximumWidth(260);
  // the whole placeholder, plus the clear button and the frame
  search_->setMinimumWidth(search_->fontMetrics().horizontalAdvance(search_->placeholderText()) + 40);
  bar->addWidget(search_);
  button(new QToolButton(this), "Prev", "Previous match (Shift+Enter, Shift+F3)", [this] { find_next(false); });
  button(new QToolButton(this), "Next", "Next match (Enter, F3)", [this] { find_next(true); });
  bar->addWidget(search_status_);
  bar->addSpacing(16);
  critical_path_->setToolTip("Underline the ops that bounded each step, walked back from its last op (P)");
  connect(critical_path_, &QCheckBox::toggled, this, [this](bool on) { show_critical_path(on); });
  auto* toggle = new QShortcut(QKeySequence(Qt::Key_P), this);
  connect(toggle, &QShortcut::activated, critical_path_, &QCheckBox::toggle);
  bar->addWidget(critical_path_);
  bar->addStretch(1);

  auto* side = new QWidget(this);
  auto* side_layout = new QVBoxLayout(side);
  side_layout->setContentsMargins(0, 0, 0, 0);
  details_->setWordWrap(true);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  details_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  details_->setMinimumHeight(160);
  side_layout->addWidget(new QLabel("<b>Selected op</b>", side));
  side_layout->addWidget(details_);
  auto* range_head = new QHBoxLayout;
  // wraps in a narrow side pane (at 1000x650 its one line was cut to "Rang": tester60a)
  auto* range_title = new QLabel("<b>Range</b> (Shift+drag, or drag on the axis)", side);
  range_title->setObjectName("range_title");
  range_title->setWordWrap(true);
  range_head->addWidget(range_title, 1);
  range_head->addWidget(per_rank_);
  side_layout->addLayout(range_head);
  side_layout->addWidget(range_label_);
  auto* table = new QTableView(side);
  table->setModel(totals_);
  table->verticalHeader()->hide();
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  side_layout->addWidget(table, 1);

  auto* scroll = new QScrollArea(this);  // many ranks: the rows scroll, the axis scrolls with them
  scroll->setWidget(timeline_);
  scroll->setWidgetResizable(true);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(scroll);
  split->addWidget(side);
  scroll->setMinimumWidth(400);
  side->setMinimumWidth(260);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  split->setSizes({1100, 420});
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(legend_);
  layout->addWidget(split, 1);

  connect(search_, &QLineEdit::returnPressed, this, [this] { find_next(true); });
  search_->installEventFilter(this);  // Shift+Enter: the previous match
  connect(search_, &QLineEdit::textEdited, search_status_, &QLabel::clear);  // "match 3 of 120" of the old text
  auto shortcut = [&](const QKeySequence& keys, auto fn) {
    auto* s = new QShortcut(keys, this, fn);
    s->setContext(Qt::WidgetWithChildrenShortcut);
  };
  shortcut(QKeySequence::Find, [this] {
    search_->setFocus();
    search_->selectAll();
  });
  shortcut(QKeySequence(Qt::Key_F3), [this] { find_next(true); });
  shortcut(QKeySequence(Qt::SHIFT | Qt::Key_F3), [this] { find_next(false); });
  connect(per_rank_, &QCheckBox::toggled, this, [this] { update_totals(); });
  connect(timeline_, &TimelineWidget::selection_changed, this, [this, scroll] {
    update_details();
    if (const auto sel = timeline_->selected())  // a search match in a row scrolled away
      scroll->ensureVisible(0, timeline_->row_y(sel->row) + TimelineWidget::kRowHeight / 2, 0, TimelineWidget::kRowHeight);
  });
  connect(timeline_, &TimelineWidget::range_changed, this, [this] { update_totals(); });
  connect(timeline_, &TimelineWidget::view_changed, this, [this] { update_buttons(); });
  // the step box names what the view shows, from the first view on (it said "step 0" over the
  // whole run) and after every fit, pan, zoom, search or history move: the step at the view's
  // centre, or the whole steps it holds; Enter or a step up / down in it fits its step (tester56
  // F1: only Fit step moved the view)
  connect(timeline_, &TimelineWidget::view_changed, this, [this] { update_step_box(); });
  connect(timeline_, &TimelineWidget::step_fitted, this, [this](int64_t step) {
    step_box_->name_view(static_cast<int>(step), {});  // the step fitted, whatever else its window holds
  });
  connect(step_box_, &StepBox::step_chosen, this, [this](int step) { timeline_->fit_step(step); });
  update_details();
  update_totals();
  update_buttons();
  update_step_box();
  timeline_->setFocus();
}

void TimelineView::update_step_box() {
  const auto shown = shown_steps(timeline_->steps(), timeline_->view());
  if (!shown) return;
  step_box_->name_view(static_cast<int>(shown->centre),
                       shown->several() ? QString::fromStdString(shown_steps_name(*shown, timeline_->steps(),
                                                                                  timeline_->warmup_steps()))
                                        : QString());
}

void TimelineView::go_to_slowest_step() {
  auto fit = [this] {
    if (*slowest_)
      timeline_->fit_step(**slowest_);
    else
      view_note_->setText("no slowest step: no measured step was counted");
  };
  if (slowest_) {
    fit();
    return;
  }
  if (slowest_job_->busy()) return;  // its result fits the step
  // the step `embedscope stats` calls slowest, from the step rows alone, off the GUI thread
  slowest_job_->start<std::optional<int64_t>>(
      [file = session_->path(), steps = timeline_->steps()] {
        return report_step(sessions::analyze_step_times(sessions::SessionReader(file)), steps);
      },
      [this, fit](std::optional<int64_t>& step) {
        slowest_ = step;
        fit();
      },
      [this](const QString& error) { view_note_->setText("slowest step: " + error); });
}

bool TimelineView::eventFilter(QObject* watched, QEvent* e) {
  if (watched == search_ && e->type() == QEvent::KeyPress) {
    const auto* key = static_cast<QKeyEvent*>(e);
    if ((key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter) && (key->modifiers() & Qt::ShiftModifier)) {
      find_next(false);
      return true;
    }
  }
  return QWidget::eventFilter(watched, e);
}

void TimelineView::show_critical_path(bool on) {
  if (critical_path_->isChecked() != on) critical_path_->setChecked(on);  // comes back here
  if (on && !path_loaded_) {
    if (path_job_->busy()) return;  // its result shows the path if the box is still checked
    // analysed once, off the GUI thread, through a reader of the job's own
    critical_path_->setText("critical path (computing...)");
    path_job_->start<std::vector<sessions::PathSegment>>(
        [file = session_->path()] {
          std::vector<sessions::PathSegment> path;
          for (const auto& step : sessions::analyze(sessions::SessionReader(file)).critical_paths)
            path.insert(path.end(), step.segments.begin(), step.segments.end());
          return path;
        },
        [this](std::vector<sessions::PathSegment>& path) {
          path_ = std::move(path);
          path_loaded_ = true;
          critical_path_->setText("critical path");
          timeline_->set_critical_path(critical_path_->isChecked() ? path_ : std::vector<sessions::PathSegment>{});
        },
        [this](const QString& error) {
          critical_path_->setText("critical path");
          critical_path_->setChecked(false);
          critical_path_->setToolTip(error);
        });
    return;
  }
  timeline_->set_critical_path(on ? path_ : std::vector<sessions::PathSegment>{});
}

bool TimelineView::find_next(bool forward) {
  const bool found = timeline_->find(search_->text(), forward);
  if (const auto& place = timeline_->match_place(); found && place)
    search_status_->setText(QString("match %1 of %2").arg(place->position).arg(place->total));
  else
    search_status_->setText(search_->text().isEmpty() ? QString() : "no match");
  return found;
}

void TimelineView::set_per_rank(bool per_rank) {
  per_rank_->setChecked(per_rank);
  update_totals();
}

void TimelineView::update_details() {
  const auto sel = timeline_->selected();
  details_->setText(sel ? timeline_->details(*sel) : QString("Click an op to see its details."));
}

void TimelineView::update_totals() {
  const auto r = timeline_->range();
  totals_->set_totals(timeline_->totals(per_rank_->isChecked()));
  range_label_->setText(r ? QString("%1 .. %2 (%3)")
                                .arg(QString::fromStdString(format_duration(r->t0)))
                                .arg(QString::fromStdString(format_duration(r->t1)))
                                .arg(QString::fromStdString(format_duration(r->t1 - r->t0)))
                          : QString("no range selected"));
}

void TimelineView::update_buttons() {
  back_->setEnabled(timeline_->history().can_back());
  forward_->setEnabled(timeline_->history().can_forward());
  // say when warm-up steps or the set-up before them are out of view, and how to see them
  const auto& steps = timeline_->steps();
  const bool warmup_hidden = timeline_->warmup_steps() > 0 && steps.begin()->second.t0 < timeline_->view().t0;
  view_note_->setText(warmup_hidden ? QString("%1 warm-up step%2 left of the view (Shift+F or All shows them)")
                                          .arg(timeline_->warmup_steps())
                                          .arg(timeline_->warmup_steps() == 1 ? "" : "s")
                                    : QString());
}

}  // namespace embedscope::ui
