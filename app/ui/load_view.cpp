#include "load_view.h"

#include "colors.h"

#include <QComboBox>
#include <QGridLayout>
#include <QLabel>
#include <QToolTip>

#include <qcustomplot.h>

namespace embedscope::ui {

namespace {

// A rank x column colour map with a colour scale; hovering a cell shows its value.
void fill_heatmap(QCustomPlot* plot, const QString& title, const QStringList& columns, int ranks,
                  const std::function<double(int, int)>& value, const QString& metric) {
  plot->clearPlottables();
  plot->plotLayout()->clear();
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, QFont("sans", 10, QFont::Bold)));
  auto* rect = new QCPAxisRect(plot);
  plot->plotLayout()->addElement(1, 0, rect);
  auto* map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
  const int cols = std::max<int>(1, static_cast<int>(columns.size()));
  map->data()->setSize(cols, std::max(ranks, 1));
  map->data()->setRange(QCPRange(0, cols - 1), QCPRange(0, std::max(ranks, 1) - 1));
  for (int c = 0; c < static_cast<int>(columns.size()); ++c)
    for (int r = 0; r < ranks; ++r) map->data()->setCell(c, r, value(r, c));
  auto* scale = new QCPColorScale(plot);
  plot->plotLayout()->addElement(1, 1, scale);
  scale->setLabel(metric);
  map->setColorScale(scale);
  map->setGradient(QCPColorGradient::gpThermal);
  map->setInterpolate(false);  // one flat cell per (rank, column)
  map->rescaleDataRange(true);
  rect->axis(QCPAxis::atLeft)->setLabel("rank");
  rect->axis(QCPAxis::atLeft)->setRange(-0.5, std::max(ranks, 1) - 0.5);
  rect->axis(QCPAxis::atBottom)->setRange(-0.5, cols - 0.5);
  if (columns.size() <= 40) {  // name the columns when they fit
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (int c = 0; c < static_cast<int>(columns.size()); ++c) ticker->addTick(c, columns[c]);
    rect->axis(QCPAxis::atBottom)->setTicker(ticker);
    rect->axis(QCPAxis::atBottom)->setTickLabelRotation(60);
  }
  auto ranks_ticker = QSharedPointer<QCPAxisTickerFixed>::create();
  ranks_ticker->setTickStep(1);
  rect->axis(QCPAxis::atLeft)->setTicker(ranks_ticker);
  QObject::disconnect(plot, &QCustomPlot::mouseMove, nullptr, nullptr);
  QObject::connect(plot, &QCustomPlot::mouseMove, plot, [plot, map, columns, metric](QMouseEvent* e) {
    double key = 0, val = 0;
    map->pixelsToCoords(e->position(), key, val);
    const int c = static_cast<int>(std::lround(key)), r = static_cast<int>(std::lround(val));
    if (c < 0 || r < 0 || c >= map->data()->keySize() || r >= map->data()->valueSize()) {
      QToolTip::hideText();
      return;
    }
    QToolTip::showText(e->globalPosition().toPoint(),
                       QString("rank %1, %2\n%3: %4").arg(r).arg(c < columns.size() ? columns[c] : QString::number(c))
                           .arg(metric).arg(map->data()->cell(c, r), 0, 'f', 0),
                       plot);
  });
  follow_palette(plot);
  if (plot->isVisible()) plot->replot();  // a hidden plot replots when it is first shown and sized
}

}  // namespace

LoadView::LoadView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent)
    : QWidget(parent), session_(std::move(session)), metric_box_(new QComboBox(this)), shard_plot_(new QCustomPlot(this)),
      step_plot_(new QCustomPlot(this)), imbalance_plot_(new QCustomPlot(this)), rank_plot_(new QCustomPlot(this)) {
  for (LoadMetric m : {LoadMetric::ids_looked_up, LoadMetric::unique_ids, LoadMetric::bytes_in, LoadMetric::bytes_out,
                       LoadMetric::lookup_time})
    metric_box_->addItem(to_string(m), static_cast<int>(m));
  auto* grid = new QGridLayout(this);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel("metric:", this));
  top->addWidget(metric_box_);
  top->addStretch(1);
  grid->addLayout(top, 0, 0, 1, 2);
  grid->addWidget(shard_plot_, 1, 0);
  grid->addWidget(step_plot_, 1, 1);
  grid->addWidget(imbalance_plot_, 2, 0);
  grid->addWidget(rank_plot_, 2, 1);
  grid->setRowStretch(1, 3);
  grid->setRowStretch(2, 2);
  for (auto* plot : {shard_plot_, step_plot_, imbalance_plot_, rank_plot_}) plot->setMinimumSize(320, 200);
  connect(metric_box_, &QComboBox::currentIndexChanged, this,
          [this](int i) { set_metric(static_cast<LoadMetric>(metric_box_->itemData(i).toInt())); });
  rebuild();
}

void LoadView::set_metric(LoadMetric m) {
  metric_ = m;
  const int i = metric_box_->findData(static_cast<int>(m));
  if (i >= 0 && metric_box_->currentIndex() != i) metric_box_->setCurrentIndex(i);
  rebuild();
}

void LoadView::rebuild() {
  data_ = load_data(*session_, metric_);
  const QString metric = to_string(metric_);
  QStringList shards, steps;
  for (const auto& s : data_.shards) shards << QString::fromStdString(s);
  for (int64_t s : data_.steps) steps << QString::number(s);
  fill_heatmap(shard_plot_, "per rank x table shard (measured steps)", shards, data_.ranks,
               [this](int r, int c) { return data_.at_shard(r, static_cast<size_t>(c)); }, metric);
  fill_heatmap(step_plot_, "per rank x step", steps, data_.ranks,
               [this](int r, int c) { return data_.at_step(r, static_cast<size_t>(c)); }, metric);
  // imbalance per step
  imbalance_plot_->clearGraphs();
  auto* g = imbalance_plot_->addGraph();
  QVector<double> x, y;
  for (size_t i = 0; i < data_.steps.size(); ++i) {
    x << static_cast<double>(data_.steps[i]);
    y << data_.imbalance[i];
  }
  g->setData(x, y);
  g->setPen(QPen(QColor(0xd6, 0x27, 0x28), 2));
  imbalance_plot_->xAxis->setLabel("step");
  imbalance_plot_->yAxis->setLabel("imbalance (max / mean)");
  imbalance_plot_->rescaleAxes();
  imbalance_plot_->yAxis->setRangeLower(0);
  imbalance_plot_->yAxis->setRangeUpper(std::max(1.1, imbalance_plot_->yAxis->range().upper * 1.1));
  follow_palette(imbalance_plot_);
  if (imbalance_plot_->isVisible()) imbalance_plot_->replot();
  // bar per rank
  rank_plot_->clearPlottables();
  auto* bars = new QCPBars(rank_plot_->xAxis, rank_plot_->yAxis);
  QVector<double> rk, val;
  for (int r = 0; r < data_.ranks; ++r) {
    rk << r;
    val << data_.per_rank[static_cast<size_t>(r)];
  }
  bars->setData(rk, val);
  bars->setBrush(QColor(0x2c, 0xa0, 0x2c));
  rank_plot_->xAxis->setLabel("rank");
  rank_plot_->yAxis->setLabel(metric + " (total)");
  rank_plot_->rescaleAxes();
  rank_plot_->xAxis->setRange(-0.6, data_.ranks - 0.4);
  rank_plot_->yAxis->setRangeLower(0);
  follow_palette(rank_plot_);
  if (rank_plot_->isVisible()) rank_plot_->replot();
}

}  // namespace embedscope::ui
