#include "compare.h"

#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>
#include <map>

#include <qcustomplot.h>

#include "embedscope/engine/sharding.h"  // format_bytes
#include "memory_compare.h"
#include "timeline_math.h"
#include "timeline_widget.h"

namespace embedscope::ui {

QColor session_color(size_t i) {
  static const QColor colors[] = {QColor(0x1f, 0x77, 0xb4), QColor(0xff, 0x7f, 0x0e), QColor(0x2c, 0xa0, 0x2c),
                                  QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b), QColor(0x17, 0xbe, 0xcf)};
  return colors[i % std::size(colors)];
}

// ---- CompareModel ----------------------------------------------------------------------------

namespace {
const char* const kFigureNames[] = {"step time mean", "step time p50", "step time p99", "throughput (samples/s)",
                                    "exposed communication (per rank)", "overlap %", "peak allocated (largest rank)",
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
    case CompareModel::Throughput: return sign + QString::number(v, 'f', 0);
    case CompareModel::Overlap: return sign + QString::number(v, 'f', 1) + " %";
    case CompareModel::PeakAllocated:
    case CompareModel::PeakReserved:
      return (v < 0 ? "-" : sign) + QString::fromStdString(engine::format_bytes(static_cast<int64_t>(std::abs(v))));
    case CompareModel::LookupImbalance:
    case CompareModel::LookupTimeImbalance: return sign + QString::number(v, 'f', 2);
    case CompareModel::FigureCount: break;
  }
  return {};
}
}  // namespace

CompareModel::CompareModel(std::vector<QString> labels, std::vector<sessions::RunStats> stats, QObject* parent)
    : QAbstractTableModel(parent), labels_(std::move(labels)), stats_(std::move(stats)) {}

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() || stats_.empty() ? 0 : static_cast<int>(2 * stats_.size());
}

double CompareModel::value(const sessions::RunStats& s, Figure f) {
  switch (f) {
    case StepMean: return s.step_time_ns.mean;
    case StepP50: return static_cast<double>(s.step_time_ns.p50);
    case StepP99: return static_cast<double>(s.step_time_ns.p99);
    case Throughput: return s.samples_per_s;
    case ExposedComm: return static_cast<double>(s.exposed_comm_ns);
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
  auto measured = [&](size_t i) { return stats_[i].steps > 0 || f == PeakAllocated || f == PeakReserved; };
  if (static_cast<size_t>(col) <= n) {  // a session's value
    if (!measured(static_cast<size_t>(col) - 1)) return role == Qt::DisplayRole ? QVariant("-") : QVariant();
    const double v = value(stats_[static_cast<size_t>(col) - 1], f);
    return role == Qt::UserRole ? QVariant(v) : QVariant(format_figure(f, v, false));
  }
  const size_t other = static_cast<size_t>(col) - n;  // 1..n-1: session `other` minus session 0
  if (!measured(0) || !measured(other)) return role == Qt::DisplayRole ? QVariant("-") : QVariant();
  const double base = value(stats_[0], f), diff = value(stats_[other], f) - base;
  if (role == Qt::UserRole) return diff;
  QString text = format_figure(f, diff, true);
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

// ---- TimelineStack ---------------------------------------------------------------------------

TimelineStack::TimelineStack(const std::vector<LabelledSession>& sessions, int64_t align_step, QWidget* parent)
    : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  for (size_t i = 0; i < sessions.size(); ++i) {
    auto* label = new QLabel(QString("<b>%1</b> &nbsp; %2").arg(sessions[i].label.toHtmlEscaped(),
                                                                QString::fromStdString(sessions[i].session->path()).toHtmlEscaped()),
                             this);
    auto* w = new TimelineWidget(sessions[i].session, this);
    extents_.emplace_back(w->scale().t0(), w->scale().t1());  // a new timeline shows all it recorded
    steps_.push_back(sessions::step_windows(*sessions[i].session));
    timelines_.push_back(w);
    layout->addWidget(label);
    layout->addWidget(w);
    connect(w, &TimelineWidget::view_changed, this, [this, i] { sync_from(i); });
  }
  layout->addStretch(1);
  align_to_step(align_step);
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

// ---- CompareView -----------------------------------------------------------------------------

namespace {
void style_plot(QCustomPlot* plot) {
  plot->legend->setVisible(true);
  plot->legend->setFont(QFont(plot->font().family(), 8));
  plot->setMinimumSize(300, 200);
}
}  // namespace

CompareView::CompareView(const std::vector<LabelledSession>& sessions, int64_t align_step, QWidget* parent)
    : QWidget(parent), pages_(new QTabWidget(this)) {
  std::vector<QString> labels;
  std::vector<sessions::RunStats> stats;
  for (const auto& s : sessions) {
    labels.push_back(s.label);
    stats.push_back(sessions::analyze(*s.session));
  }
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(pages_);

  // Figures: the table, then the two charts side by side
  auto* figures = new QWidget(pages_);
  auto* fl = new QVBoxLayout(figures);
  QString head;
  for (size_t i = 0; i < sessions.size(); ++i)
    head += QString("<span style=\"color:%1\">&#9632;</span> <b>%2</b> &nbsp; %3: %4, %5 on %6 ranks, %7%8<br>")
                .arg(session_color(i).name(), labels[i].toHtmlEscaped(),
                     QFileInfo(QString::fromStdString(sessions[i].session->path())).fileName().toHtmlEscaped(),
                     QString::fromStdString(sessions[i].session->meta("workload_name")).toHtmlEscaped(),
                     QString::fromStdString(stats[i].ended))
                .arg(stats[i].ranks.size())
                .arg(QString::fromStdString(sessions[i].session->meta("backend")))
                .arg(stats[i].simulated ? " (SIMULATED)" : "");
  for (size_t i = 0; i < sessions.size(); ++i)  // how a run that failed ended, in its own words
    if (const std::string msg = sessions[i].session->meta("end_message"); !msg.empty() && stats[i].ended != "complete")
      head += QString("<span style=\"color:#b00000\"><b>%1</b>: %2</span><br>")
                  .arg(labels[i].toHtmlEscaped(), QString::fromStdString(msg).toHtmlEscaped());
  auto* head_label = new QLabel(head, figures);
  head_label->setWordWrap(true);
  head_label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  fl->addWidget(head_label);
  model_ = new CompareModel(labels, stats, this);
  auto* table = new QTableView(figures);
  table->setModel(model_);
  table->verticalHeader()->hide();
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);  // every figure visible, no scrolling
  table->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  fl->addWidget(table);
  auto* charts = new QHBoxLayout;
  step_plot_ = new QCustomPlot(figures);
  exposed_plot_ = new QCustomPlot(figures);
  style_plot(step_plot_);
  style_plot(exposed_plot_);
  auto* group = new QCPBarsGroup(exposed_plot_);
  int max_ranks = 0;
  for (size_t i = 0; i < stats.size(); ++i) {
    // step time per measured step: the slowest rank's window, as analyze() defines step time
    std::map<int64_t, int64_t> per_step;
    for (const auto& t : stats[i].per_step) per_step[t.step] = std::max(per_step[t.step], t.window_ns);
    QVector<double> xs, ys;
    for (const auto& [step, ns] : per_step) {
      xs << static_cast<double>(step);
      ys << static_cast<double>(ns) / 1e6;
    }
    auto* g = step_plot_->addGraph();
    g->setName(labels[i]);
    g->setData(xs, ys);
    g->setPen(QPen(session_color(i), 2));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
    QVector<double> ranks, exposed;
    for (const auto& r : stats[i].ranks) {
      ranks << r.rank;
      exposed << static_cast<double>(r.exposed_comm_ns) / 1e6;
    }
    max_ranks = std::max(max_ranks, static_cast<int>(stats[i].ranks.size()));
    auto* bars = new QCPBars(exposed_plot_->xAxis, exposed_plot_->yAxis);
    bars->setName(labels[i]);
    bars->setData(ranks, exposed);
    bars->setWidth(0.8 / static_cast<double>(std::max<size_t>(1, stats.size())));
    bars->setBrush(session_color(i));
    bars->setPen(Qt::NoPen);
    bars->setBarsGroup(group);
  }
  QSharedPointer<QCPAxisTickerFixed> step_ticker(new QCPAxisTickerFixed);
  step_ticker->setTickStep(1);
  step_ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  step_plot_->xAxis->setTicker(step_ticker);
  step_plot_->xAxis->setLabel("step");
  step_plot_->yAxis->setLabel("step time (ms)");
  step_plot_->rescaleAxes();
  step_plot_->xAxis->setRange(step_plot_->xAxis->range().lower - 0.5, step_plot_->xAxis->range().upper + 0.5);
  step_plot_->yAxis->setRange(0, step_plot_->yAxis->range().upper * 1.4);  // room for the legend
  exposed_plot_->xAxis->setLabel("rank");
  exposed_plot_->yAxis->setLabel("exposed communication (ms, all steps)");
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1);
  exposed_plot_->xAxis->setTicker(ticker);
  exposed_plot_->rescaleAxes();
  exposed_plot_->xAxis->setRange(-0.6, max_ranks - 0.4);
  exposed_plot_->yAxis->setRange(0, std::max(1e-3, exposed_plot_->yAxis->range().upper * 1.4));
  charts->addWidget(step_plot_);
  charts->addWidget(exposed_plot_);
  fl->addLayout(charts, 1);
  pages_->addTab(figures, "Figures");

  // Timelines, aligned on a step
  auto* tl = new QWidget(pages_);
  auto* tll = new QVBoxLayout(tl);
  auto* bar = new QHBoxLayout;
  auto* step_box = new QSpinBox(tl);
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const auto& s : sessions)
    for (const auto& st : s.session->steps()) {
      first = std::min(first, st.step);
      last = std::max(last, st.step);
    }
  if (first > last) first = last = 0;
  step_box->setRange(static_cast<int>(first), static_cast<int>(last));
  step_box->setValue(static_cast<int>(std::clamp(align_step, first, last)));
  bar->addWidget(new QLabel("align on step", tl));
  bar->addWidget(step_box);
  bar->addWidget(new QLabel("(it starts at 0 in every timeline; zoom or pan one and all follow; "
                            "red: exposed communication, light red: hidden under compute)", tl));
  bar->addStretch(1);
  tll->addLayout(bar);
  auto* scroll = new QScrollArea(tl);
  stack_ = new TimelineStack(sessions, step_box->value(), scroll);
  scroll->setWidget(stack_);
  scroll->setWidgetResizable(true);
  tll->addWidget(scroll, 1);
  connect(step_box, &QSpinBox::valueChanged, stack_, [this](int v) { stack_->align_to_step(v); });
  pages_->addTab(tl, "Timelines");

  memory_ = new MemoryCompare(sessions, pages_);
  pages_->addTab(memory_, "Memory");
}

}  // namespace embedscope::ui
