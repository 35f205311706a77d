#include "views/load_view.h"

#include "charts/colors.h"
#include "charts/plot_axes.h"
#include "core/heat_bins.h"
#include "core/rebalance_marks.h"
#include "jobs/analysis_job.h"
#include "models/input_stats_model.h"
#include "embedscope/sessions/analysis/analysis.h"  // analyze_step_times
#include "embedscope/sessions/model/metadata_keys.h"

#include <QComboBox>
#include <QEvent>
#include <QFontMetrics>
#include <QFrame>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QTableView>
#include <QTableWidget>
#include <QToolTip>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>

namespace embedscope::ui {

namespace {

// The table whose shards every column is ("NAME #k" each, `tables` all NAME, as many as the
// columns, at most kMaxNamedColumns), else "".
QString single_table_of(const QStringList& columns, const QStringList& tables) {
  if (tables.isEmpty() || tables.size() != columns.size() || columns.size() > kMaxNamedColumns) return {};
  for (int c = 0; c < static_cast<int>(columns.size()); ++c)
    if (tables[c] != tables[0] || !columns[c].startsWith(tables[0] + " ")) return {};
  return tables[0];
}

// The px a heatmap's colour scale column (scale, tick labels, metric label) takes beside the
// cells; the title sits in the cells' column, centred over them.
constexpr int kColourScaleColumnPx = 120;

// The heatmap's title (the text element at the layout's top) wrapped to its column's width; its
// text as given is kept in the property "unwrapped" (tester56 F8: cut at both ends at 1280 px).
void wrap_heatmap_title(QCustomPlot* plot) {
  auto* head = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementCount() > 0 ? plot->plotLayout()->elementAt(0) : nullptr);
  if (!head) return;
  if (!head->property("unwrapped").isValid()) head->setProperty("unwrapped", head->text());
  head->setText(wrap_title(head->property("unwrapped").toString(), QFontMetrics(head->font()),
                           std::max(100, plot->width() - kColourScaleColumnPx)));
}

// Re-wraps a heatmap's title whenever its plot is resized.
class TitleWrapper : public QObject {
 public:
  using QObject::QObject;
  bool eventFilter(QObject* watched, QEvent* e) override {
    if (e->type() == QEvent::Resize)
      if (auto* plot = qobject_cast<QCustomPlot*>(watched)) wrap_heatmap_title(plot);
    return false;
  }
};

// A rank x column colour map with a colour scale from 0 (tester41 #18: a scale from the smallest
// cell made a 1.16 max/mean look like cold vs red hot); hovering a cell shows its value. A cell
// `held` says false for is NaN, drawn light grey ("no shard on this rank", not "0 ids").
// `column_label` titles the column axis ("table shard", "measured step": tester46 F8, the step
// map's 0, 1, 2 ... read as ranks without it); the shards of one table say "NAME: shard" instead.
void fill_heatmap(QCustomPlot* plot, const QString& title, const QStringList& columns, int ranks,
                  const std::function<double(int, int)>& value, const QString& metric, const QString& column_label,
                  const std::function<bool(int, int)>& held = {}, const QStringList& tables = {}) {
  plot->clearPlottables();
  plot->plotLayout()->clear();
  auto* head = new QCPTextElement(plot, title, QFont("sans", 10, QFont::Bold));
  plot->plotLayout()->addElement(0, 0, head);
  wrap_heatmap_title(plot);
  auto* rect = new QCPAxisRect(plot);
  plot->plotLayout()->addElement(1, 0, rect);
  auto* map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
  const int cols = std::max<int>(1, static_cast<int>(columns.size()));
  const int rows = std::max(ranks, 1);
  // QCPColorMap draws a cell half the distance to its neighbour wide, so a map of one column (one
  // measured step) or one rank drew nothing: such an axis holds two half-width cells of the same
  // value, at -0.25 and +0.25, which together cover -0.5..0.5 as one cell would
  const int key_cells = cols == 1 ? 2 : cols, value_cells = rows == 1 ? 2 : rows;
  map->data()->setSize(key_cells, value_cells);
  map->data()->setRange(cols == 1 ? QCPRange(-0.25, 0.25) : QCPRange(0, cols - 1),
                        rows == 1 ? QCPRange(-0.25, 0.25) : QCPRange(0, rows - 1));
  double top = 0;
  for (int c = 0; c < static_cast<int>(columns.size()); ++c)
    for (int r = 0; r < ranks; ++r) {
      const bool here = !held || held(r, c);
      const double v = here ? value(r, c) : std::numeric_limits<double>::quiet_NaN();
      if (here) top = std::max(top, v);
      for (int kc = c; kc < (cols == 1 ? 2 : c + 1); ++kc)
        for (int vr = r; vr < (rows == 1 ? 2 : r + 1); ++vr) map->data()->setCell(kc, vr, v);
    }
  auto* scale = new QCPColorScale(plot);
  plot->plotLayout()->addElement(1, 1, scale);
  scale->setLabel(metric);
  map->setColorScale(scale);
  QCPColorGradient gradient = heat_gradient();  // its top is red, not white
  gradient.setNanHandling(QCPColorGradient::nhNanColor);
  gradient.setNanColor(kNoShardColor);
  map->setGradient(gradient);
  map->setInterpolate(false);  // one flat cell per (rank, column)
  map->setDataRange(QCPRange(0, top > 0 ? top : 1));
  rect->axis(QCPAxis::atLeft)->setLabel("rank");
  rect->axis(QCPAxis::atLeft)->setRange(-0.5, std::max(ranks, 1) - 0.5);
  rect->axis(QCPAxis::atBottom)->setRange(-0.5, cols - 0.5);
  auto ticks = heatmap_column_ticks(columns, tables);
  // the shards of one table (an lm_embedding run's token_embedding #0..#7): the table's name once,
  // on the axis, and "#k" upright under each column, so the names do not take the rows' height
  // (tester43 F5: "token_embedding #k" rotated took ~100 px of a 4-rank heatmap and was cut)
  const QString one_table = single_table_of(columns, tables);
  if (!one_table.isEmpty())
    for (auto& [c, name] : ticks) name = name.mid(one_table.size()).trimmed();
  if (!ticks.empty()) {  // the columns' names, or each table's at its first shard
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (const auto& [c, name] : ticks) ticker->addTick(c, name);
    rect->axis(QCPAxis::atBottom)->setTicker(ticker);
    rect->axis(QCPAxis::atBottom)->setTickLabelRotation(one_table.isEmpty() ? 60 : 0);
  }
  rect->axis(QCPAxis::atBottom)->setLabel(one_table.isEmpty() ? column_label : one_table + ": shard");
  rect->axis(QCPAxis::atLeft)->setTicker(integer_ticker());
  if (ticks.empty()) rect->axis(QCPAxis::atBottom)->setTicker(integer_ticker());  // column indices
  QObject::disconnect(plot, &QCustomPlot::mouseMove, nullptr, nullptr);
  QObject::connect(plot, &QCustomPlot::mouseMove, plot, [plot, map, columns, metric, cols, rows](QMouseEvent* e) {
    double key = 0, val = 0;
    map->pixelsToCoords(e->position(), key, val);
    const int c = static_cast<int>(std::lround(key)), r = static_cast<int>(std::lround(val));
    if (c < 0 || r < 0 || c >= cols || r >= rows) {
      QToolTip::hideText();
      return;
    }
    const double v = map->data()->data(key, val);  // the cell under the pointer (also a doubled one)
    QToolTip::showText(e->globalPosition().toPoint(),
                       QString("rank %1, %2\n%3: %4").arg(r).arg(c < columns.size() ? columns[c] : QString::number(c))
                           .arg(metric)
                           .arg(std::isnan(v) ? QString("no such shard on this rank") : QString::number(v, 'f', 0)),
                       plot);
  });
  follow_palette(plot);
  if (plot->isVisible()) plot->replot();  // a hidden plot replots when it is first shown and sized
}

// fill_heatmap of at most kHeatMaxRows rank rows and kHeatMaxColumns columns (tester42 F19): more
// are binned (core/heat_bins.h) and the title and the rank axis say so. Kept apart from
// fill_heatmap, which draws the cells.
// `held` and `tables` (fill_heatmap's) apply when nothing is binned; a binned cell is its group's
// largest value, so "no such shard" is not drawn there.
void fill_binned_heatmap(QCustomPlot* plot, const QString& title, const QStringList& columns, int ranks,
                         const std::function<double(int, int)>& value, const QString& metric, const std::string& what,
                         const QString& column_label, const std::function<bool(int, int)>& held = {},
                         const QStringList& tables = {}) {
  std::vector<std::string> names;
  for (const QString& c : columns) names.push_back(c.toStdString());
  const HeatGrid grid = bin_heat_grid(ranks, names, value, what);
  if (grid.note.empty()) {
    fill_heatmap(plot, title, columns, ranks, value, metric, column_label, held, tables);
    return;
  }
  QStringList binned;
  for (const auto& n : grid.names) binned << QString::fromStdString(n);
  fill_heatmap(plot, QString("%1\n%2").arg(title, QString::fromStdString(grid.note)), binned, grid.rows,
               [&grid](int r, int c) { return grid.at(r, c); }, metric + (grid.ranks_per_row > 1 ? " (bin max)" : ""),
               column_label);
  if (grid.ranks_per_row > 1)
    plot->axisRect()->axis(QCPAxis::atLeft)->setLabel(QString("rank / %1 (row k: ranks %1k..%1k+%2)")
                                                          .arg(grid.ranks_per_row)
                                                          .arg(grid.ranks_per_row - 1));
}

}  // namespace

QString wrap_title(const QString& text, const QFontMetrics& fm, int width) {
  QStringList out;
  for (const QString& line : text.split('\n')) {
    QString cur;
    for (const QString& word : line.split(' ')) {
      const QString next = cur.isEmpty() ? word : cur + ' ' + word;
      if (!cur.isEmpty() && fm.horizontalAdvance(next) > width) {
        out << cur;
        cur = word;
      } else {
        cur = next;
      }
    }
    out << cur;
  }
  return out.join('\n');
}

std::vector<std::pair<int, QString>> heatmap_column_ticks(const QStringList& columns, const QStringList& tables) {
  std::vector<std::pair<int, QString>> out;
  if (columns.size() <= kMaxNamedColumns) {
    for (int c = 0; c < static_cast<int>(columns.size()); ++c) out.emplace_back(c, columns[c]);
    return out;
  }
  if (tables.size() != columns.size()) return out;
  for (int c = 0; c < static_cast<int>(tables.size()); ++c)
    if (c == 0 || tables[c] != tables[c - 1]) out.emplace_back(c, tables[c]);
  if (static_cast<int>(out.size()) > kMaxNamedColumns) out.clear();  // too many tables to name: indices
  return out;
}

LoadView::LoadView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent)
    : QWidget(parent), session_(std::move(session)), metric_box_(new QComboBox(this)), table_box_(new QComboBox(this)), shard_plot_(new QCustomPlot(this)),
      step_plot_(new QCustomPlot(this)), imbalance_plot_(new QCustomPlot(this)), rank_plot_(new QCustomPlot(this)),
      row_plot_(new QCustomPlot(this)), row_note_(new QLabel(this)), status_(new QLabel(this)), job_(new AnalysisJob(this)),
      input_model_(new InputStatsModel(this)), input_table_(new QTableView(this)), input_note_(new QLabel(this)),
      input_job_(new AnalysisJob(this)), plan_title_(new QLabel(this)), plan_table_(new QTableWidget(this)) {
  using sessions::LoadMetric;
  for (LoadMetric m : {LoadMetric::ids_looked_up, LoadMetric::unique_ids, LoadMetric::bytes_in, LoadMetric::bytes_out,
                       LoadMetric::lookup_time})
    metric_box_->addItem(sessions::to_string(m), static_cast<int>(m));
  // a run with tables in host memory (placement host / host_cached): their transfers too
  if (session_ && session_->meta(sessions::meta::kTableStorageJson, "").find("\"placement\":\"host") != std::string::npos)
    for (LoadMetric m : {LoadMetric::cache_hits, LoadMetric::cache_misses, LoadMetric::rows_fetched, LoadMetric::bytes_h2d,
                         LoadMetric::bytes_d2h})
      metric_box_->addItem(sessions::to_string(m), static_cast<int>(m));
  // the page scrolls inside its tab below its minimum height (tester56 F8: squeezed to 1280x800
  // its parts overlapped, the table box under the imbalance chart's axis; free to grow it pushed
  // the window to 1280x946)
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* page = new QScrollArea(this);
  page->setObjectName("load_page_scroll");
  page->setFrameShape(QFrame::NoFrame);
  page->setWidgetResizable(true);
  outer->addWidget(page);
  auto* content = new QWidget(page);
  page->setWidget(content);
  auto* grid = new QGridLayout(content);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel("metric:", this));
  top->addWidget(metric_box_);
  top->addWidget(status_);
  top->addStretch(1);
  grid->addLayout(top, 0, 0, 1, 2);
  grid->addWidget(shard_plot_, 1, 0);
  grid->addWidget(step_plot_, 1, 1);
  grid->addWidget(imbalance_plot_, 2, 0);
  grid->addWidget(rank_plot_, 2, 1);
  auto* rows_bar = new QHBoxLayout;
  rows_bar->addWidget(new QLabel("ids over the rows of table:", this));
  for (const auto& t : sessions::workload_tables(*session_)) table_box_->addItem(QString::fromStdString(t.name));
  rows_bar->addWidget(table_box_);
  row_note_->setWordWrap(true);
  rows_bar->addWidget(row_note_, 1);
  grid->addLayout(rows_bar, 3, 0, 1, 2);
  grid->addWidget(row_plot_, 4, 0, 1, 2);
  input_note_->setWordWrap(true);
  grid->addWidget(input_note_, 5, 0, 1, 2);
  input_table_->setModel(input_model_);
  input_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  input_table_->setSelectionMode(QAbstractItemView::SingleSelection);
  input_table_->verticalHeader()->hide();
  input_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  input_table_->setMinimumHeight(120);
  grid->addWidget(input_table_, 6, 0, 1, 2);
  // the plan over time: only when live rebalances changed it
  {
    const auto rows = plan_rows(sessions::plan_over_time(*session_));
    plan_table_->setColumnCount(6);
    plan_table_->setHorizontalHeaderLabels({"table", "sharding type", "shard", "rank", "rows", "steps"});
    plan_table_->setRowCount(static_cast<int>(rows.size()));
    for (size_t i = 0; i < rows.size(); ++i) {
      const PlanRow& r = rows[i];
      int c = 0;
      for (const std::string* v : {&r.table, &r.sharding_type, &r.shard, &r.rank, &r.rows, &r.steps})
        plan_table_->setItem(static_cast<int>(i), c++, new QTableWidgetItem(QString::fromStdString(*v)));
    }
    plan_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    plan_table_->verticalHeader()->hide();
    plan_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    plan_table_->setMinimumHeight(120);
    const size_t changes = session_->plan_changes().size();
    plan_title_->setText(QString("plan over time: %1 change(s) by live rebalances (which rank held each shard at which measured steps)")
                             .arg(changes));
    plan_title_->setVisible(changes > 0);
    plan_table_->setVisible(changes > 0);
    grid->addWidget(plan_title_, 7, 0, 1, 2);
    grid->addWidget(plan_table_, 8, 0, 1, 2);
    grid->setRowStretch(8, 1);
  }
  grid->setRowStretch(1, 3);
  grid->setRowStretch(2, 2);
  grid->setRowStretch(4, 2);
  grid->setRowStretch(6, 1);
  for (auto* plot : {shard_plot_, step_plot_, imbalance_plot_, rank_plot_, row_plot_}) plot->setMinimumSize(320, 200);
  // compact plots however tall the window (a report grows it to show the input table whole):
  // the heatmaps at most kMaxRankRowPx per rank, the charts kMaxChartPx; the tables take the rest
  const int ranks = session_ ? std::max(static_cast<int>(session_->ranks().size()),
                                        std::atoi(session_->meta("world_size", "1").c_str()))
                             : 1;
  for (auto* plot : {shard_plot_, step_plot_}) {
    plot->installEventFilter(new TitleWrapper(plot));
    plot->setMaximumHeight(binned_heatmap_max_height(ranks));
    plot->setMinimumHeight(heatmap_min_height(ranks));  // 8 ranks' labels apart (tester43 F5)
  }
  for (auto* plot : {imbalance_plot_, rank_plot_}) plot->setMaximumHeight(kMaxChartPx);
  row_plot_->setMaximumHeight(kMaxChartPx + 40);
  // the aggregated plots follow the palette from the start, also while their figures are computed
  for (auto* plot : {shard_plot_, step_plot_, imbalance_plot_, rank_plot_}) follow_palette(plot);
  connect(metric_box_, &QComboBox::currentIndexChanged, this,
          [this](int i) { set_metric(static_cast<sessions::LoadMetric>(metric_box_->itemData(i).toInt())); });
  connect(table_box_, &QComboBox::currentIndexChanged, this, [this](int i) { set_table(i); });
  connect(input_table_, &QTableView::clicked, this, [this](const QModelIndex& index) {
    const auto& features = input_model_->features();
    if (index.row() < 0 || static_cast<size_t>(index.row()) >= features.size()) return;
    const int t = table_box_->findText(QString::fromStdString(features[static_cast<size_t>(index.row())].table));
    if (t >= 0) set_table(t);
  });
  {
    std::set<int64_t> measured;
    for (const auto& s : session_->steps())
      if (s.step >= 0) measured.insert(s.step);
    measured_steps_ = static_cast<int64_t>(measured.size());
    no_measured_step_ = no_measured_step(*session_);
    // the drain steps `stats` leaves out (its rule: the step rows alone), which load_data leaves out too
    if (const auto st = sessions::analyze_step_times(*session_); st.drain_steps > 0 && !measured.empty()) {
      drain_steps_ = st.drain_steps;
      drain_first_ = *measured.rbegin() - st.drain_steps + 1;
    }
  }
  rebuild();
  rebuild_rows();
  count_input();
}

namespace {
// "step 8" or "steps 8-9"
QString step_span(int64_t first, int64_t n) {
  return n == 1 ? QString("step %1").arg(first) : QString("steps %1-%2").arg(first).arg(first + n - 1);
}
}  // namespace

QString LoadView::counted_steps_text() const {
  if (drain_steps_ == 0) return "measured steps";
  return QString("counted steps 0-%1; the drain %2 left out, as stats")
      .arg(drain_first_ - 1)
      .arg(step_span(drain_first_, drain_steps_));
}

QString LoadView::histogram_steps_text() const {
  if (drain_steps_ == 0) return QString("ids of the %1 measured step%2").arg(measured_steps_).arg(measured_steps_ == 1 ? "" : "s");
  const int64_t counted = measured_steps_ - drain_steps_;
  if (session_->meta(sessions::meta::kIdHistogramCounts, "") == "counted_lookups")
    return QString("ids looked up in the %1 counted step%2 0-%3 (the drain %4 left out, as in the charts above and stats)")
        .arg(counted)
        .arg(counted == 1 ? "" : "s")
        .arg(drain_first_ - 1)
        .arg(step_span(drain_first_, drain_steps_));
  return QString("ids of every measured step's batch, %1 (this session's histogram was written before the drain %2 "
                 "were left out of it: the charts above and stats count %3 steps)")
      .arg(measured_steps_)
      .arg(step_span(drain_first_, drain_steps_))
      .arg(counted);
}

bool LoadView::no_measured_step(const sessions::SessionReader& session) {
  const std::string ended = session.status();
  if (ended == "complete") return false;  // a complete run trained every planned step
  for (const auto& s : session.steps())
    if (s.step >= 0) return false;
  for (const auto& l : session.load())
    if (l.step >= 0) return false;
  return !session.has_id_histogram() || session.id_histogram().empty();
}

QString LoadView::no_measured_step_text() const {
  const std::string ended = session_->status();
  return ended == "running" ? QString("no measured step yet (the run is still in its warm-up)")
                            : QString("no measured step (the run ended %1 before its first measured step)")
                                  .arg(QString::fromStdString(ended.empty() ? std::string("without an end record") : ended));
}

void LoadView::say_on_plot(QCustomPlot* plot, const QString& text) {
  plot->clearPlottables();
  plot->clearGraphs();
  plot->clearItems();
  for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
    if (!axis) continue;  // a heatmap's layout has its own axis rect
    axis->setTicks(false);
    axis->setTickLabels(false);
    axis->setLabel("");
  }
  auto* item = new QCPItemText(plot);
  item->position->setType(QCPItemPosition::ptAxisRectRatio);
  item->position->setCoords(0.5, 0.5);
  item->setText(text);
  if (plot->isVisible()) plot->replot();
}

void LoadView::count_input() {
  if (no_measured_step_) {  // the statistics of batches never trained on would read as the run's (tester49 F15)
    input_note_->setText("input per feature: none - " + no_measured_step_text() +
                         ": no batch of the workload's input was trained on");
    return;
  }
  input_note_->setText("input per feature: counting the run's input...");
  input_job_->start<InputFigures>(
      [file = session_->path()] { return input_figures(sessions::SessionReader(file)); },
      [this](InputFigures& f) {
        input_model_->set_features(std::move(f.inspection.features));
        input_note_->setText(f.unavailable.empty()
                                 ? QString("input per feature (as embedscope inspect-input counts it) - %1")
                                       .arg(QString::fromStdString(f.source))
                                 : QString("input per feature: %1").arg(QString::fromStdString(f.unavailable)));
      },
      [this](const QString& error) { input_note_->setText("input per feature: " + error); });
}

void LoadView::set_table(int table) {
  table_ = table;
  if (table_box_->currentIndex() != table) table_box_->setCurrentIndex(table);
  rebuild_rows();
}

void LoadView::rebuild_rows() {
  row_plot_->clearPlottables();
  row_plot_->clearItems();
  rows_ = {};
  if (!session_->has_id_histogram() || table_box_->count() == 0) {
    row_note_->setText(session_->has_id_histogram() ? "the session names no tables"
                                                    : "this session has no row histogram (recorded from session schema 3 on)");
    if (row_plot_->isVisible()) row_plot_->replot();
    return;
  }
  if (no_measured_step_) {
    row_note_->setText(no_measured_step_text() + ": no ids were recorded");
    say_on_plot(row_plot_, "no measured step: no ids recorded");
    return;
  }
  rows_ = row_histogram(*session_, table_);
  // ids per row, not per bucket: 1000 rows in 256 buckets are buckets of 3 and 4 rows, and a
  // uniform table showed a dip at every 3-row bucket (tester50 F11); the hottest bucket likewise
  int64_t total = 0;
  const size_t hot = rows_.hottest_bucket();
  const int64_t hottest = rows_.ids.empty() ? 0 : rows_.ids[hot];
  const double hottest_per_row = rows_.ids.empty() ? 0.0 : rows_.ids_per_row(hot);
  QVector<double> x, y;
  for (size_t b = 0; b < rows_.ids.size(); ++b) {
    x << 0.5 * static_cast<double>(rows_.row_begin[b] + rows_.row_end[b]);
    y << rows_.ids_per_row(b);
    total += rows_.ids[b];
  }
  auto* bars = new QCPBars(row_plot_->xAxis, row_plot_->yAxis);
  bars->setWidthType(QCPBars::wtPlotCoords);
  bars->setWidth(rows_.ids.empty() ? 1.0 : static_cast<double>(rows_.num_rows) / static_cast<double>(rows_.ids.size()));
  bars->setData(x, y, true);
  bars->setPen(Qt::NoPen);
  bars->setBrush(QColor(0x2c, 0xa0, 0x2c));
  row_plot_->xAxis->setLabel("row");
  row_plot_->xAxis->setTicker(integer_ticker());
  row_plot_->yAxis->setLabel("ids per row");  // a bucket's ids / its rows (measured steps, all ranks)
  row_plot_->xAxis->setRange(0, static_cast<double>(std::max<int64_t>(rows_.num_rows, 1)));
  row_plot_->yAxis->setRange(0, std::max(1.0, hottest_per_row * 1.15));
  // shard boundaries: a dashed line where one rank's rows end, the rank over each row range
  const QPen line(QColor(0xd6, 0x27, 0x28), 2, Qt::DashLine);
  // 1,024 shards' boundaries and labels would paint the chart red (tester42 F19): up to kHeatMaxRows
  const bool mark_shards = rows_.shards.size() <= static_cast<size_t>(kHeatMaxRows);
  for (int64_t row : mark_shards ? rows_.boundaries() : std::vector<int64_t>{}) {
    auto* l = new QCPItemStraightLine(row_plot_);
    l->setPen(line);
    l->point1->setCoords(static_cast<double>(row), 0);
    l->point2->setCoords(static_cast<double>(row), 1);
  }
  if (!rows_.boundaries().empty() && rows_.shards.size() <= static_cast<size_t>(kHeatMaxRows))  // 1,024 labels overprint
    for (const auto& s : rows_.shards) {
      auto* label = new QCPItemText(row_plot_);
      label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
      label->position->setCoords(static_cast<double>(s.row_offset) + 0.5 * static_cast<double>(s.num_rows), 0.05);
      label->setPositionAlignment(Qt::AlignTop | Qt::AlignHCenter);
      label->setText(QString("rank %1").arg(s.rank));
      label->setColor(QColor(0xd6, 0x27, 0x28));
    }
  // ranges, at most 8 (tester42 F19: 1,024 ranks listed one by one made the page 31,674 px wide)
  std::vector<int32_t> shard_ranks;
  for (const auto& s : rows_.shards) shard_ranks.push_back(s.rank);
  // a table a live rebalance re-sharded: the plan at the end, and how it started (rows_.plan_note)
  const QString ranks = QString::fromStdString(rank_ranges(shard_ranks)) +
                        (rows_.plan_note.empty() ? QString() : QString(" %1").arg(QString::fromStdString(rows_.plan_note)));
  if (total == 0 && session_ && session_->meta(sessions::meta::kSimulated, "") == "1") {
    row_note_->setText(QString("%1 rows; ids per row not recorded: a simulated run draws no ids (its load above is the "
                               "expected ids of each shard); %2 on rank(s) %3")
                           .arg(rows_.num_rows)
                           .arg(QString::fromStdString(rows_.sharding_type.empty() ? "unplanned" : rows_.sharding_type))
                           .arg(ranks));
    if (row_plot_->isVisible()) row_plot_->replot();
    return;
  }
  if (total == 0 && measured_steps_ > 0 && session_->id_histogram().empty()) {
    // measured steps, but not one id in the histogram: a run killed or stopped at once by an
    // older Embedscope build wrote it only at a normal end (tester49 F16)
    row_note_->setText(QString("%1 rows; no id histogram in this session although it holds %2 measured step(s): a run "
                               "killed or stopped at once by an older Embedscope build (one that wrote it only at a normal end) has none; %3 on rank(s) %4")
                           .arg(rows_.num_rows)
                           .arg(measured_steps_)
                           .arg(QString::fromStdString(rows_.sharding_type.empty() ? "unplanned" : rows_.sharding_type))
                           .arg(ranks));
    say_on_plot(row_plot_, "no id histogram recorded");
    return;
  }
  if (total == 0) {  // no "hottest bucket" of 0 ids (tester49 F15)
    row_note_->setText(histogram_steps_text() + QString(": %1 rows in %2 buckets, 0 ids recorded for this table; %3 on rank(s) %4")
                           .arg(rows_.num_rows)
                           .arg(rows_.ids.size())
                           .arg(QString::fromStdString(rows_.sharding_type.empty() ? "unplanned" : rows_.sharding_type))
                           .arg(ranks));
    if (row_plot_->isVisible()) row_plot_->replot();
    return;
  }
  row_note_->setText(histogram_steps_text() + QString(": %1 rows in %2 buckets, %3 ids; hottest bucket rows %4..%5 (%6 % of the ids) at %9 ids "
                             "per row; %7 on rank(s) %8")
                         .arg(rows_.num_rows)
                         .arg(rows_.ids.size())
                         .arg(total)
                         .arg(rows_.row_begin.empty() ? 0 : rows_.row_begin[hot])
                         .arg(rows_.row_end.empty() ? 0 : rows_.row_end[hot] - 1)
                         .arg(total ? 100.0 * static_cast<double>(hottest) / static_cast<double>(total) : 0.0, 0, 'f', 1)
                         .arg(QString::fromStdString(rows_.sharding_type.empty() ? "unplanned" : rows_.sharding_type))
                         .arg(ranks)
                         .arg(QString::number(hottest_per_row, 'f', 1)));
  if (row_plot_->isVisible()) row_plot_->replot();
}

void LoadView::set_metric(sessions::LoadMetric m) {
  metric_ = m;
  const int i = metric_box_->findData(static_cast<int>(m));
  if (i >= 0 && metric_box_->currentIndex() != i) metric_box_->setCurrentIndex(i);
  rebuild();
}

void LoadView::rebuild() {
  status_->setText("computing...");
  job_->start<sessions::LoadData>(
      [file = session_->path(), metric = metric_] { return sessions::load_data(sessions::SessionReader(file), metric); },
      [this](sessions::LoadData& d) {
        data_ = std::move(d);
        status_->clear();
        draw();
      },
      [this](const QString& error) { status_->setText(error); });
}

void LoadView::draw() {
  const QString metric = sessions::to_string(metric_);
  if (data_.steps.empty() && no_measured_step_) {  // nothing to chart: say so (tester49 F15)
    status_->setText(no_measured_step_text() + ": no load was recorded");
    for (auto* plot : {shard_plot_, step_plot_, imbalance_plot_, rank_plot_})
      say_on_plot(plot, "no measured step: no load recorded");
    return;
  }
  QStringList shards, steps, tables;
  for (const auto& s : data_.shards) shards << QString::fromStdString(s);
  for (const auto& t : data_.shard_tables) tables << QString::fromStdString(t);
  for (int64_t s : data_.steps) steps << QString::number(s);
  const bool some_not_held = std::find(data_.held.begin(), data_.held.end(), 0) != data_.held.end();
  fill_binned_heatmap(
      shard_plot_,
      QString("per rank x table shard (%1; colour from 0%2)")
          .arg(counted_steps_text(), some_not_held ? "; grey: no such shard on the rank" : ""),
      shards, data_.ranks, [this](int r, int c) { return data_.at_shard(r, static_cast<size_t>(c)); }, metric, "shards",
      "table shard", [this](int r, int c) { return data_.holds(r, static_cast<size_t>(c)); }, tables);
  fill_binned_heatmap(step_plot_,
                      drain_steps_ > 0 ? QString("per rank x step (colour from 0; %1)").arg(counted_steps_text())
                                       : QString("per rank x step (colour from 0)"),
                      steps, data_.ranks,
                      [this](int r, int c) { return data_.at_step(r, static_cast<size_t>(c)); }, metric, "steps",
                      "measured step");
  // imbalance per step; a lookup time not recorded is said, not drawn as a balanced 1 (tester47 F16:
  // the counters' 0 ns of an older lm_embedding session made a flat line at 1)
  imbalance_plot_->clearGraphs();
  imbalance_plot_->clearItems();
  const QString not_recorded = "lookup time not recorded (no rank's load counters hold a lookup time)";
  rank_plot_->clearItems();
  if (!data_.recorded) {
    status_->setText(not_recorded);
    for (auto* plot : {imbalance_plot_, rank_plot_}) {  // the line and the bars (zeros) say it
      auto* text = new QCPItemText(plot);
      text->position->setType(QCPItemPosition::ptAxisRectRatio);
      text->position->setCoords(0.5, 0.5);
      text->setText(plot == rank_plot_ ? QString(not_recorded).replace(" (", "\n(") : not_recorded);  // a narrower chart
    }
  }
  imbalance_plot_->clearPlottables();
  auto* g = imbalance_plot_->addGraph();
  QVector<double> x, y, none;
  for (size_t i = 0; i < data_.steps.size(); ++i) {
    if (!data_.recorded) break;
    x << static_cast<double>(data_.steps[i]);
    y << data_.imbalance[i];  // NaN (a gap) for a step without any of the metric
    if (std::isnan(data_.imbalance[i])) none << static_cast<double>(data_.steps[i]);
  }
  g->setData(x, y);
  g->setPen(QPen(QColor(0xd6, 0x27, 0x28), 2));
  g->setName("max / mean over ranks");
  // a step in which no rank had any of the metric (0 of 0): a grey band across the chart with a
  // legend entry, not a balanced 1 on the line (a semi_sync run's last drain step looked nothing up)
  no_metric_steps_ = std::vector<double>(none.begin(), none.end());
  imbalance_plot_->legend->setVisible(!none.isEmpty());
  if (!none.isEmpty()) {
    auto* bands = new QCPBars(imbalance_plot_->xAxis, imbalance_plot_->yAxis);
    bands->setName(metric_ == sessions::LoadMetric::lookup_time ? QString("no lookup time recorded in the step")
                                                                : QString("no %1 in the step (0 of 0: no ratio)").arg(metric));
    bands->setPen(Qt::NoPen);
    bands->setBrush(kNoShardColor);
    bands->setWidth(0.8);
    bands->setData(none, QVector<double>(none.size(), 1e9), true);  // to the top, whatever the range
    bands->setLayer("background");
    imbalance_plot_->legend->setBrush(QColor(255, 255, 255, 220));
    imbalance_plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);  // under the ratios (>= 1)
    // a step between two bands is a point of its own: drawn as one, not only as a line's end
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 6));
  }
  if (x.size() == 1) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 8));  // one step: no line, a point
  imbalance_plot_->xAxis->setLabel("step");
  imbalance_plot_->xAxis->setTicker(integer_ticker());
  imbalance_plot_->yAxis->setLabel("imbalance (max / mean)");
  // the steps' range, and from 0 to a tenth over the largest ratio (a flat line's range was
  // centred on it, 0.9..5.9 for a constant 3.4); the bands reach up to the chart's top
  // (one step: centred, half a step either side, not on the chart's left edge)
  const double pad = none.isEmpty() && x.size() > 1 ? 0.0 : 0.5;
  if (!x.isEmpty()) imbalance_plot_->xAxis->setRange(x.front() - pad, x.back() + pad);  // steps are distinct
  double top = 1.0;
  for (double v : y)
    if (std::isfinite(v)) top = std::max(top, v);
  imbalance_plot_->yAxis->setRange(0, data_.recorded ? top * 1.1 : 1.0);
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
  rank_plot_->xAxis->setTicker(integer_ticker());
  rank_plot_->yAxis->setLabel(metric + " (total)");
  rank_plot_->rescaleAxes();
  if (!data_.recorded) rank_plot_->yAxis->setRange(0, 1);  // no stale range of the metric before
  rank_plot_->xAxis->setRange(-0.6, data_.ranks - 0.4);
  rank_plot_->yAxis->setRangeLower(0);
  follow_palette(rank_plot_);
  if (rank_plot_->isVisible()) rank_plot_->replot();
}

}  // namespace embedscope::ui
