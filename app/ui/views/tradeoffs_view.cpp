#include "views/tradeoffs_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>

#include <qcustomplot.h>

#include "charts/colors.h"  // session_color
#include "core/equal_series.h"
#include "jobs/analysis_job.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

namespace {
constexpr int kTradeoffsMaxColumnPx = 130;  ///< widest a Trade-offs column grows before its text wraps
}  // namespace

TradeoffsView::TradeoffsView(const std::vector<LabelledSession>& sessions, QWidget* parent)
    : QWidget(parent), sessions_(sessions), model_(new TradeoffsModel(this)), job_(new AnalysisJob(this)),
      caption_(new QLabel(this)), table_(new QTableView(this)), axis_(new QComboBox(this)), plot_(new QCustomPlot(this)) {
  auto* layout = new QVBoxLayout(this);
  caption_->setWordWrap(true);
  caption_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  caption_->setText(QString("Analysing %1 sessions (table storage, step times, losses)...").arg(sessions.size()));
  layout->addWidget(caption_);
  table_->setModel(model_);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  // long cells ("fp16 rows, stochastic rounding", "+0.0001 (within noise)") wrap onto a second
  // line rather than widen their column: the chart's figures, up to the step time, fit the
  // default window (tester48 F14.7: "step time" was cut at its edge, 17 columns on one line)
  table_->horizontalHeader()->setMaximumSectionSize(kTradeoffsMaxColumnPx);
  table_->setWordWrap(true);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table_->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);  // every run visible, no scrolling
  table_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  layout->addWidget(table_);
  auto* chart = new QWidget(this);
  auto* cl = new QVBoxLayout(chart);
  cl->setContentsMargins(0, 0, 0, 0);
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel("memory on x:", chart));
  axis_->addItem("table bytes (weights + optimizer state, all ranks)");
  axis_->addItem("peak allocated of the busiest rank");
  bar->addWidget(axis_);
  bar->addWidget(new QLabel("point size and label: mean step time", chart));
  bar->addStretch(1);
  cl->addLayout(bar);
  plot_->setMinimumSize(400, 260);
  cl->addWidget(plot_, 1);
  layout->addWidget(chart, 1);
  connect(plot_, &QCustomPlot::afterLayout, this, &TradeoffsView::place_labels);
  connect(axis_, &QComboBox::currentIndexChanged, this,
          [this](int i) { set_memory_axis(i == 1 ? Memory::peak_allocated : Memory::table_bytes); });

  std::vector<std::pair<std::string, std::string>> runs;  // label, path: read on the worker
  for (const auto& s : sessions) runs.emplace_back(s.label.toStdString(), s.session->path());
  job_->start<TradeoffComparison>(
      [runs] {
        std::vector<TradeoffRun> figures;
        for (const auto& [label, path] : runs) figures.push_back(tradeoff_run(label, sessions::SessionReader(path)));
        return compare_tradeoffs(std::move(figures));
      },
      [this](TradeoffComparison& c) {
        model_->set_comparison(std::move(c));
        show_comparison();
      },
      [this](const QString& error) { caption_->setText(error); });
}

void TradeoffsView::set_memory_axis(Memory m) {
  memory_ = m;
  {
    const QSignalBlocker block(axis_);
    axis_->setCurrentIndex(m == Memory::peak_allocated ? 1 : 0);
  }
  draw();
}

double TradeoffsView::memory_mib(size_t i) const {
  const TradeoffRun& r = model_->comparison().runs[i];
  const int64_t b = memory_ == Memory::peak_allocated ? r.peak_allocated_bytes : r.table_bytes();
  return static_cast<double>(b) / (1024.0 * 1024.0);
}

double TradeoffsView::point_size(size_t i) const {
  const auto& runs = model_->comparison().runs;
  double lo = std::numeric_limits<double>::max(), hi = 0;
  for (const auto& r : runs)
    if (r.steps > 0) {
      lo = std::min(lo, r.step_mean_ns);
      hi = std::max(hi, r.step_mean_ns);
    }
  if (runs[i].steps == 0 || hi <= lo) return 8;
  return 8 + 16 * (runs[i].step_mean_ns - lo) / (hi - lo);
}

void TradeoffsView::show_comparison() {
  const TradeoffComparison& c = model_->comparison();
  if (c.runs.empty()) {
    caption_->setText("No runs to compare.");
    return;
  }
  const TradeoffRun& ref = c.runs[c.reference];
  QString text = QString("Each run against <b>%1</b> (bold, the reference): its tables' bytes as the run measured them, "
                         "the busiest rank's peak, the mean step time, the loss after %2 measured step%3 (the fewest any "
                         "run measured), the held-out AUC (the trained model on generated batches training never saw, "
                         "the same samples wherever the features keep their tables) and the stored rows' error against their "
                         "fp32 values. The AUC reads \u00b1 its standard error (Hanley & McNeil 1982, from the held-out "
                         "set's positives and negatives); a difference within 2 standard errors is <i>within noise</i>: the "
                         "held-out sample alone could make it. One beyond them is not noise of the sample, but a short run can "
                         "still make it (a low-rank table's shared factor trains on every step).")
                     .arg(QString::fromStdString(ref.label).toHtmlEscaped())
                     .arg(c.loss_steps)
                     .arg(c.loss_steps == 1 ? "" : "s");
  QStringList missing;
  for (const auto& r : c.runs) {
    if (!r.has_loss)
      missing << QString("%1 (ended %2, %3 measured steps)")
                     .arg(QString::fromStdString(r.label).toHtmlEscaped(), QString::fromStdString(r.ended))
                     .arg(r.steps);
    else if (!r.has_storage)
      missing << QString("%1 (no table storage in its session)").arg(QString::fromStdString(r.label).toHtmlEscaped());
  }
  if (!missing.isEmpty())
    text += QString("<br><span style=\"color:#b00000\">Not on the chart: %1</span>").arg(missing.join(", "));
  caption_->setText(text);
  draw();
}

void TradeoffsView::draw() {
  plot_->clearGraphs();
  plot_->clearItems();
  labels_.clear();
  const TradeoffComparison& c = model_->comparison();
  double x_hi = 0, y_lo = std::numeric_limits<double>::max(), y_hi = 0;
  int plotted = 0;
  std::vector<size_t> shown;  // the runs on the chart
  for (size_t i = 0; i < c.runs.size(); ++i) {
    const TradeoffRun& r = c.runs[i];
    if (!r.has_loss || (memory_ == Memory::table_bytes ? !r.has_storage : r.peak_rank < 0)) continue;
    shown.push_back(i);
  }
  // the y axis: the held-out loss when every run on the chart has one (the figure remedies are
  // judged by: the training loss put Adam with fp16 optimizer state lowest of all while its
  // held-out loss was 15 % worse), else the training loss after the same steps
  const bool held = !shown.empty() && std::all_of(shown.begin(), shown.end(), [&](size_t i) { return c.runs[i].has_held_out; });
  const auto y_of = [held](const TradeoffRun& r) { return held ? r.held_out_loss : r.loss; };
  for (size_t i : shown) {
    x_hi = std::max(x_hi, memory_mib(i));
    y_lo = std::min(y_lo, y_of(c.runs[i]));
    y_hi = std::max(y_hi, y_of(c.runs[i]));
    ++plotted;
  }
  // points drawn on each other (tester42 F3: fp16 rows under fp16 rows, stochastic rounding):
  // within 0.5 % of either axis's span; the later one's label names the one it covers
  coincident_.assign(c.runs.size(), -1);
  {
    std::vector<double> xs, ys;
    for (size_t i : shown) xs.push_back(memory_mib(i)), ys.push_back(y_of(c.runs[i]));
    const double tol_x = 0.005 * std::max(1e-3, x_hi) * 1.3, tol_y = 0.005 * std::max(1e-4, y_hi - y_lo);
    const std::vector<int> on = coincident_with_earlier(xs, ys, tol_x, tol_y);
    for (size_t k = 0; k < shown.size(); ++k)
      if (on[k] >= 0) coincident_[shown[k]] = static_cast<int>(shown[static_cast<size_t>(on[k])]);
  }
  // the largest points first, so that a smaller one on a larger one stays visible; each run its
  // colour and marker (session_color repeats from the 13th run, the marker does not)
  std::vector<size_t> order = shown;
  std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) { return point_size(a) > point_size(b); });
  for (size_t i : order) {
    const TradeoffRun& r = c.runs[i];
    const double x = memory_mib(i);
    auto* g = plot_->addGraph();
    g->setName(QString::fromStdString(r.label));
    g->setData(QVector<double>{x}, QVector<double>{y_of(r)});
    g->setLineStyle(QCPGraph::lsNone);
    QColor fill = session_color(i);
    fill.setAlpha(170);
    g->setScatterStyle(QCPScatterStyle(static_cast<QCPScatterStyle::ScatterShape>(session_marker(i)),
                                       QPen(session_color(i).darker(130), 1.5), fill, point_size(i)));
    auto* label = new QCPItemText(plot_);
    label->position->setType(QCPItemPosition::ptAbsolute);  // pixels, set by place_labels
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    labels_.push_back({label, x, y_of(r), point_size(i)});
    const QString same =
        coincident_[i] >= 0
            ? QString(" = %1").arg(QString::fromStdString(c.runs[static_cast<size_t>(coincident_[i])].label))
            : QString();
    label->setText(QString("%1%2  %3").arg(QString::fromStdString(r.label), same,
                                           QString::fromStdString(sessions::format_duration(static_cast<int64_t>(r.step_mean_ns)))));
    label->setFont(QFont(font().family(), 8));
    label->setColor(session_color(i).darker(140));
    label->setClipToAxisRect(false);
  }
  const TradeoffRun& ref = c.runs[c.reference];
  if (plotted > 0 && ref.has_loss && (!held || ref.has_held_out)) {  // the reference's loss, dashed
    auto* line = new QCPItemStraightLine(plot_);
    line->point1->setCoords(0, y_of(ref));
    line->point2->setCoords(1, y_of(ref));
    line->setPen(QPen(Qt::gray, 1, Qt::DashLine));
  }
  plot_->xAxis->setLabel(memory_ == Memory::peak_allocated ? "peak allocated of the busiest rank (MiB)"
                                                           : "table bytes: weights + optimizer state, all ranks (MiB)");
  const QString ref_label = c.runs.empty() ? QString() : QString::fromStdString(ref.label);
  plot_->yAxis->setLabel(held ? QString("held-out loss (dashed: %1)").arg(ref_label)
                              : QString("loss after %1 step%2 (dashed: %3)")
                                    .arg(c.loss_steps)
                                    .arg(c.loss_steps == 1 ? "" : "s")
                                    .arg(ref_label));
  if (plotted > 0) {
    // from 0 so that bytes compare by length; room on the right for the labels
    plot_->xAxis->setRange(0, std::max(1e-3, x_hi) * 1.3);
    const double pad = std::max(1e-4, (y_hi - y_lo) * 0.12);
    plot_->yAxis->setRange(y_lo - pad, y_hi + pad);
  }
  plot_->replot();
}

void TradeoffsView::place_labels() {
  const QRectF inside(plot_->axisRect()->rect());  // labels stay inside the axes
  std::vector<QRectF> taken;  // the points, then each placed label
  for (const Label& l : labels_) {
    const QPointF p(plot_->xAxis->coordToPixel(l.x), plot_->yAxis->coordToPixel(l.y));
    taken.emplace_back(p.x() - l.size / 2, p.y() - l.size / 2, l.size, l.size);
  }
  for (const Label& l : labels_) {
    const QPointF p(plot_->xAxis->coordToPixel(l.x), plot_->yAxis->coordToPixel(l.y));
    const QFontMetricsF fm(l.item->font());
    const QSizeF size(fm.horizontalAdvance(l.item->text()) + 2, fm.height());
    const double r = l.size / 2 + 3, w = size.width(), h = size.height();
    std::vector<QPointF> candidates = {{p.x() + r, p.y() - h / 2},      // right
                                       {p.x() - r - w, p.y() - h / 2},  // left
                                       {p.x() - w / 2, p.y() - r - h},  // above
                                       {p.x() - w / 2, p.y() + r}};     // below
    for (int k = 1; k <= 4; ++k) {  // further up or down, on the right
      candidates.emplace_back(p.x() + r, p.y() - h / 2 - k * h);
      candidates.emplace_back(p.x() + r, p.y() - h / 2 + k * h);
    }
    QPointF chosen = candidates.front();
    for (const QPointF& c : candidates) {
      const QRectF rect(c, size);
      if (!inside.contains(rect)) continue;
      if (std::none_of(taken.begin(), taken.end(), [&](const QRectF& t) { return t.intersects(rect); })) {
        chosen = c;
        break;
      }
    }
    l.item->position->setCoords(chosen);
    taken.emplace_back(chosen, size);
  }
}

}  // namespace embedscope::ui
