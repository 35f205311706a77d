#include "views/scenario_view.h"

#include <QComboBox>
#include <QDir>
#include <QEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QScrollArea>
#include <QSlider>
#include <QStyle>
#include <QTabWidget>
#include <QTextBrowser>
#include <QRegularExpression>
#include <QUrl>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>

#include "charts/colors.h"  // session_color
#include "jobs/analysis_job.h"
#include "jobs/run_job.h"
#include "core/timeline_math.h"
#include "core/tradeoff_figures.h"
#include "timeline/timeline_widget.h"
#include "views/tradeoffs_view.h"

namespace embedscope::ui {

QString breakable(QString text) {
  for (const QChar after : {QChar('_'), QChar('/'), QChar('-'), QChar('.')})
    text.replace(after, QString(after) + QChar(0x200B));
  return text;
}

QString link_pages(const QString& paragraph) {
  static const QRegularExpression page(R"(\b(Figures|Timelines?|Memory|Trade-offs) page\b)");
  QString out;
  qsizetype at = 0;
  for (auto it = page.globalMatch(paragraph); it.hasNext();) {
    const auto m = it.next();
    const QString tab = m.captured(1) == "Timeline" ? QString("Timelines") : m.captured(1);
    out += paragraph.mid(at, m.capturedStart() - at).toHtmlEscaped();
    out += QString("<a href=\"page:%1\">%2</a>").arg(tab, m.captured(0).toHtmlEscaped());
    at = m.capturedEnd();
  }
  return out + paragraph.mid(at).toHtmlEscaped();
}

QString page_named_last(const Scenario& scenario) {
  if (scenario.paragraphs.empty()) return {};
  static const QRegularExpression link(R"re(<a href="page:([^"]+)">)re");
  const auto m = link.match(link_pages(QString::fromStdString(scenario.paragraphs.back())));
  return m.hasMatch() ? m.captured(1) : QString();
}

QString explanation_html(const Scenario& scenario) {
  QString text = "<h3>" + QString::fromStdString(scenario.title).toHtmlEscaped() + "</h3>";
  for (const auto& p : scenario.paragraphs) text += "<p>" + link_pages(QString::fromStdString(p)) + "</p>";
  return text;
}

namespace {
// A frame around the played op, drawn over a timeline (the timeline itself is not changed).
class OpHighlight : public QWidget {
 public:
  explicit OpHighlight(TimelineWidget* timeline) : QWidget(timeline), timeline_(timeline) {
    setAttribute(Qt::WA_TransparentForMouseEvents);
    timeline->installEventFilter(this);
    setGeometry(timeline->rect());
    raise();
    show();
  }
  void set(int row, int64_t t0, int64_t t1) {
    row_ = row;
    t0_ = t0;
    t1_ = t1;
    update();
  }

 protected:
  bool eventFilter(QObject*, QEvent* e) override {
    if (e->type() == QEvent::Resize) setGeometry(timeline_->rect());
    return false;
  }
  void paintEvent(QPaintEvent*) override {
    if (row_ < 0) return;
    const TimeScale& s = timeline_->scale();
    const double x0 = TimelineWidget::kGutter + std::max(-4.0, s.x(t0_));
    const double x1 = TimelineWidget::kGutter + std::min(s.width() + 4, s.x(t1_));
    if (x1 < TimelineWidget::kGutter) return;
    QPainter p(this);
    const QRectF r(x0 - 3, timeline_->row_y(static_cast<size_t>(row_)), std::max(3.0, x1 - x0) + 6,
                   TimelineWidget::kRowHeight);
    p.setPen(QPen(Qt::black, 3));
    p.drawRect(r);
    p.setPen(QPen(QColor(0xff, 0xd7, 0x00), 1.5));
    p.drawRect(r);
  }

 private:
  TimelineWidget* timeline_;
  int row_ = -1;
  int64_t t0_ = 0, t1_ = 0;
};
}  // namespace

ScenarioView::ScenarioView(Scenario scenario, QWidget* parent)
    : QWidget(parent), scenario_(std::move(scenario)), sessions_(scenario_.runs.size()), compare_box_(new QVBoxLayout),
      placeholder_(new QLabel(this)), play_run_(new QComboBox(this)), back_(new QPushButton(this)),
      play_button_(new QPushButton(this)), forward_(new QPushButton(this)), slider_(new QSlider(Qt::Horizontal, this)),
      op_text_(new QLabel(this)), timer_(new QTimer(this)), play_job_(new AnalysisJob(this)) {
  storage_differs_ = runs_differ_in_table_storage(scenario_);
  auto* layout = new QHBoxLayout(this);
  auto* left = new QVBoxLayout;
  placeholder_->setText("Open the saved sessions of this scenario's runs (Open folder..., or Open... per run), or "
                        "run them, to see their timelines here.");
  placeholder_->setAlignment(Qt::AlignCenter);
  placeholder_->setWordWrap(true);
  compare_box_->addWidget(placeholder_, 1);
  left->addLayout(compare_box_, 1);
  // play control
  auto* play = new QHBoxLayout;
  play->addWidget(new QLabel("play one step of", this));
  play->addWidget(play_run_);
  back_->setIcon(style()->standardIcon(QStyle::SP_MediaSeekBackward));
  back_->setToolTip("previous op");
  play_button_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
  play_button_->setToolTip("play / pause");
  forward_->setIcon(style()->standardIcon(QStyle::SP_MediaSeekForward));
  forward_->setToolTip("next op");
  play->addWidget(back_);
  play->addWidget(play_button_);
  play->addWidget(forward_);
  play->addWidget(slider_, 1);
  left->addLayout(play);
  op_text_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  op_text_->setMinimumHeight(2 * fontMetrics().height() + 4);
  op_text_->setWordWrap(true);
  left->addWidget(op_text_);
  layout->addLayout(left, 3);
  timer_->setInterval(700);
  connect(timer_, &QTimer::timeout, this, [this] {
    if (position_ + 1 >= static_cast<int>(play_.size())) {
      timer_->stop();
      play_button_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
      return;
    }
    set_play_position(position_ + 1);
  });
  connect(play_button_, &QPushButton::clicked, this, [this] {
    if (timer_->isActive()) {
      timer_->stop();
    } else {
      if (position_ + 1 >= static_cast<int>(play_.size())) set_play_position(-1);  // from the start again
      timer_->start();
    }
    play_button_->setIcon(style()->standardIcon(timer_->isActive() ? QStyle::SP_MediaPause : QStyle::SP_MediaPlay));
  });
  connect(back_, &QPushButton::clicked, this, [this] { set_play_position(std::max(0, position_ - 1)); });
  connect(forward_, &QPushButton::clicked, this, [this] {
    set_play_position(std::min(static_cast<int>(play_.size()) - 1, position_ + 1));
  });
  connect(slider_, &QSlider::valueChanged, this, [this](int v) {
    if (v != position_) set_play_position(v);
  });
  connect(play_run_, &QComboBox::currentIndexChanged, this, [this](int i) {
    if (i >= 0) {
      play_session_ = static_cast<size_t>(i);
      load_play();
    }
  });

  // the explanation and the runs
  auto* side = new QWidget(this);
  auto* right = new QVBoxLayout(side);
  right->setContentsMargins(0, 0, 0, 0);
  // a text browser wraps its text in its own viewport, beside its scroll bar at any width (a
  // QLabel in a scroll area was laid out wider than the viewport: every line cut at the right)
  explanation_ = new QTextBrowser(side);
  explanation_->setObjectName("scenario_explanation");
  explanation_->setFrameShape(QFrame::NoFrame);
  explanation_->setOpenLinks(false);  // the links open pages of the comparison, not documents
  explanation_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  explanation_->setLineWrapMode(QTextEdit::WidgetWidth);
  explanation_->setWordWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
  explanation_->viewport()->setAutoFillBackground(false);
  explanation_->setHtml(explanation_html(scenario_));
  connect(explanation_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
    if (url.scheme() == "page") open_page(url.path());
  });
  right->addWidget(explanation_, 1);
  auto* runs = new QGroupBox("Runs", side);
  auto* rl = new QVBoxLayout(runs);
  for (size_t i = 0; i < scenario_.runs.size(); ++i) {
    const auto& run = scenario_.runs[i];
    auto* row = new QHBoxLayout;
    auto* name = new QLabel(QString("<span style=\"color:%1\">&#9632;</span> <b>%2</b>")
                                .arg(session_color(i).name(), breakable(QString::fromStdString(run.label).toHtmlEscaped())),
                            runs);
    name->setToolTip(QString::fromStdString(run.workload.dump(2)));
    name->setWordWrap(true);  // long labels ("1 Gb Ethernet (125 MB/s, 50 us)") wrap, never clipped
    row->addWidget(name, 1);
    auto* open = new QPushButton("Open...", runs);
    auto* start = new QPushButton("Run", runs);
    start->setToolTip(QString("run this workload (%1 steps on %2 ranks)").arg(run.steps()).arg(run.world_size()));
    row->addWidget(open);
    row->addWidget(start);
    rl->addLayout(row);
    auto* status = new QLabel("no session open", runs);
    status->setWordWrap(true);
    run_status_.push_back(status);
    jobs_.push_back(nullptr);
    rl->addWidget(status);
    connect(open, &QPushButton::clicked, this, [this, i] {
      const QString path = QFileDialog::getOpenFileName(this, "Session of " + QString::fromStdString(scenario_.runs[i].label),
                                                        {}, "Sessions (*.db);;All files (*)");
      if (!path.isEmpty()) open_run_session(i, path);
    });
    connect(start, &QPushButton::clicked, this, [this, i, start] { run_or_cancel(i, start); });
  }
  auto* folder = new QPushButton("Open folder...", runs);
  folder->setToolTip(QString("opens %1-0.db, %1-1.db, ... from a folder").arg(QString::fromStdString(scenario_.id)));
  connect(folder, &QPushButton::clicked, this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, "Folder with the scenario's sessions");
    if (!dir.isEmpty()) open_folder(dir);
  });
  rl->addWidget(folder);
  right->addWidget(runs);
  side->setMaximumWidth(420);
  side->setMinimumWidth(300);
  layout->addWidget(side, 1);
  load_play();
}

bool ScenarioView::open_page(const QString& name) {
  if (!compare_ || name.isEmpty()) return false;
  QTabWidget* pages = compare_->pages();
  for (int i = 0; i < pages->count(); ++i)
    if (pages->tabText(i) == name) {
      pages->setCurrentIndex(i);
      return true;
    }
  return false;
}

QString ScenarioView::open_run_session(size_t index, const QString& path) {
  if (index >= sessions_.size()) return QString("no run %1 in scenario %2").arg(index).arg(QString::fromStdString(scenario_.id));
  try {
    sessions_[index] = std::make_shared<const sessions::SessionReader>(path.toStdString());
    run_status_[index]->setText(breakable(QFileInfo(path).fileName()) + ": " + QString::fromStdString(sessions_[index]->status()));
    run_status_[index]->setToolTip(path);
    rebuild();
    return {};
  } catch (const std::exception& e) {
    run_status_[index]->setText(breakable(QString::fromUtf8(e.what())));
    return QString::fromUtf8(e.what());
  }
}

void ScenarioView::run_or_cancel(size_t i, QPushButton* button) {
  if (jobs_[i] && jobs_[i]->running()) {
    jobs_[i]->cancel();
    run_status_[i]->setText("cancelling after the current step...");
    return;
  }
  emit run_requested(QString::fromStdString(scenario_.id), static_cast<int>(i));
  const QString path = QDir(run_dir_).filePath(QString::fromStdString(session_file_name(scenario_, i)));
  delete jobs_[i];
  const ScenarioRun& run = scenario_.runs[i];
  jobs_[i] = run.lm ? new RunJob(*run.lm, path, /*overwrite=*/true, this) : new RunJob(run.spec, path, /*overwrite=*/true, this);
  // an lm_embedding run's samples are its sequences
  const QString unit = run.lm ? "sequences/s" : "samples/s";
  const int decimals = run.lm ? 1 : 0;
  connect(jobs_[i], &RunJob::progress, this, [this, i, unit, decimals](qint64 step, qint64 steps, double samples_per_s, double eta_s) {
    run_status_[i]->setText(QString("running: step %1/%2, %3 %4, %5 left")
                                .arg(step)
                                .arg(steps)
                                .arg(samples_per_s, 0, 'f', decimals)
                                .arg(unit)
                                .arg(format_eta(eta_s)));
  });
  connect(jobs_[i], &RunJob::finished, this,
          [this, i, button](const QString& session, const QString& ended, const QString& message) {
            button->setText("Run");
            if (session.isEmpty()) {
              run_status_[i]->setText(ended + ": " + breakable(message));
              return;
            }
            open_run_session(i, session);
            if (!message.isEmpty()) run_status_[i]->setToolTip(message);
          });
  button->setText("Cancel");
  run_status_[i]->setText("starting " + breakable(QFileInfo(path).fileName()) + "...");
  jobs_[i]->start();
}

int ScenarioView::open_folder(const QString& dir) {
  run_dir_ = dir;
  int opened = 0;
  for (size_t i = 0; i < scenario_.runs.size(); ++i) {
    const QString path = QDir(dir).filePath(QString::fromStdString(session_file_name(scenario_, i)));
    if (!QFileInfo::exists(path)) continue;
    try {
      sessions_[i] = std::make_shared<const sessions::SessionReader>(path.toStdString());
      run_status_[i]->setText(breakable(QFileInfo(path).fileName()) + ": " + QString::fromStdString(sessions_[i]->status()));
      run_status_[i]->setToolTip(path);
      ++opened;
    } catch (const std::exception& e) {
      run_status_[i]->setText(QString::fromUtf8(e.what()));
    }
  }
  if (opened > 0) rebuild();
  return opened;
}

void ScenarioView::rebuild() {
  timer_->stop();
  highlight_ = nullptr;  // a child of the old comparison's timelines
  std::vector<LabelledSession> open;
  compared_runs_.clear();
  for (size_t i = 0; i < sessions_.size(); ++i)
    if (sessions_[i]) {
      open.push_back({QString::fromStdString(scenario_.runs[i].label), sessions_[i]});
      compared_runs_.push_back(i);
    }
  delete compare_;
  compare_ = nullptr;
  tradeoffs_ = nullptr;  // a page of the old comparison
  placeholder_->setVisible(open.empty());
  if (!open.empty()) {
    compare_ = new CompareView(open, scenario_.align_step, this);
    compare_->pages()->setCurrentIndex(1);  // the timelines
    if (storage_differs_) {  // what each way of storing the tables costs: the point of such a scenario
      tradeoffs_ = new TradeoffsView(open, compare_->pages());
      compare_->pages()->addTab(tradeoffs_, "Trade-offs");
      compare_->pages()->setCurrentWidget(tradeoffs_);
    }
    open_page(page_named_last(scenario_));  // "Open the Memory page": the text's last word on where to look
    compare_box_->addWidget(compare_, 1);
  }
  const QSignalBlocker block(play_run_);
  play_run_->clear();
  for (const auto& s : open) play_run_->addItem(s.label);
  play_session_ = 0;
  load_play();
}

void ScenarioView::load_play() {
  timer_->stop();
  play_button_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
  play_.clear();
  delete highlight_;
  highlight_ = nullptr;
  position_ = -1;
  if (compare_ && play_session_ < compare_->timelines()->size()) {
    highlight_ = new OpHighlight(compare_->timelines()->timeline(play_session_));
    // the order, and what each op waited for, off the GUI thread (a newer choice drops this one)
    const int64_t step = compare_->timelines()->align_step();
    for (QWidget* w : std::initializer_list<QWidget*>{back_, play_button_, forward_, slider_}) w->setEnabled(false);
    op_text_->setText(QString("finding the order of the ops of %1...").arg(play_step_name()));
    play_job_->start<std::vector<sessions::PlayStep>>(
        [file = sessions_[compared_runs_[play_session_]]->path(), step] {
          return sessions::play_order(sessions::SessionReader(file), step);
        },
        [this](std::vector<sessions::PlayStep>& play) {
          play_ = std::move(play);
          show_play();
        },
        [this](const QString& error) { op_text_->setText(error); });
    return;
  }
  play_job_->cancel();
  show_play();
}

QString ScenarioView::play_step_name() const {
  if (!compare_) return {};
  const int64_t warmup = scenario_.runs.empty() ? 0 : scenario_.runs.front().warmup_steps();
  return QString::fromStdString(step_name(compare_->timelines()->align_step(), warmup));
}

void ScenarioView::show_play() {
  const bool any = !play_.empty();
  for (QWidget* w : std::initializer_list<QWidget*>{back_, play_button_, forward_, slider_}) w->setEnabled(any);
  play_run_->setEnabled(compare_ != nullptr);
  const QSignalBlocker block(slider_);
  slider_->setRange(0, std::max(0, static_cast<int>(play_.size()) - 1));
  position_ = -1;
  slider_->setValue(0);
  op_text_->setText(any ? QString("%1 ops in %2 of %3: press play or step through them")
                              .arg(play_.size())
                              .arg(play_step_name())
                              .arg(play_run_->currentText())
                        : compare_ ? QString("%1 has no ops in %2 (the run ended %3)")
                                         .arg(play_run_->currentText())
                                         .arg(play_step_name())
                                         .arg(QString::fromStdString(sessions_[compared_runs_[play_session_]]->status()))
                                   : QString("no ops to play"));
}

QString ScenarioView::play_text() const {
  if (position_ < 0 || position_ >= static_cast<int>(play_.size())) return {};
  const auto& p = play_[static_cast<size_t>(position_)];
  const auto& session = *sessions_[compared_runs_[play_session_]];
  const int64_t offset = compare_->timelines()->offset(play_session_);
  QString lane = QString::number(p.op.lane);
  for (const auto& l : session.lanes())
    if (l.rank == p.op.rank && l.lane == p.op.lane) lane = QString::fromStdString(l.name);
  return QString("%1/%2 &nbsp; <b>%3</b> &nbsp; rank %4, %5 lane, %6 &nbsp; starts at %7, takes <b>%8</b>%9<br>"
                 "waits for: %10")
      .arg(position_ + 1)
      .arg(play_.size())
      .arg(QString::fromStdString(session.name(p.op.name_id)).toHtmlEscaped())
      .arg(p.op.rank)
      .arg(lane)
      .arg(sessions::to_string(p.op.category))
      .arg(QString::fromStdString(format_duration(p.op.start_ns - offset)))
      .arg(QString::fromStdString(format_duration(p.op.end_ns - p.op.start_ns)))
      .arg(p.op.bytes ? QString(", %1 bytes").arg(p.op.bytes) : QString())
      .arg(QString::fromStdString(p.waits_for).toHtmlEscaped());
}

void ScenarioView::set_play_position(int i) {
  if (play_.empty()) return;
  position_ = std::clamp(i, -1, static_cast<int>(play_.size()) - 1);
  {
    const QSignalBlocker block(slider_);
    slider_->setValue(std::max(0, position_));
  }
  auto* hl = static_cast<OpHighlight*>(highlight_);
  if (position_ < 0) {
    if (hl) hl->set(-1, 0, 0);
    op_text_->clear();
    return;
  }
  const auto& op = play_[static_cast<size_t>(position_)].op;
  const auto& session = *sessions_[compared_runs_[play_session_]];
  const auto lanes = session.lanes();
  int row = -1;
  for (size_t r = 0; r < lanes.size(); ++r)
    if (lanes[r].rank == op.rank && lanes[r].lane == op.lane) row = static_cast<int>(r);
  // keep the op in view: when it is outside, centre the view on it (all timelines follow)
  TimelineStack* stack = compare_->timelines();
  TimelineWidget* tl = stack->timeline(play_session_);
  const TimeScale& s = tl->scale();
  if (op.start_ns < s.t0() || op.end_ns > s.t1()) {
    const int64_t span = s.t1() - s.t0(), offset = stack->offset(play_session_);
    const int64_t mid = (op.start_ns + op.end_ns) / 2 - offset;
    stack->show_range(mid - span / 2, mid - span / 2 + span);
  }
  if (hl) hl->set(row, op.start_ns, op.end_ns);
  op_text_->setText(play_text());
}

}  // namespace embedscope::ui
