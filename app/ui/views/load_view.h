#pragma once
// The load view: heatmaps (QCPColorMap) of a load metric per rank x table shard and per
// rank x step with a colour scale and hover values, the imbalance (max / mean) of each step,
// a bar per rank, for a chosen table how its ids fall over its row range (hot rows) with
// the shard boundaries drawn on it, and the run's input per feature as `embedscope
// inspect-input` prints it (ids per bag, distinct rows, top 1% / 10% share, out-of-range ids).

#include <QColor>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "embedscope/sessions/store/session.h"
#include "core/input_figures.h"
#include "core/load_data.h"

class QCustomPlot;
class QComboBox;
class QFontMetrics;
class QLabel;
class QTableView;
class QTableWidget;

namespace embedscope::ui {

class AnalysisJob;

/// Columns a heatmap names one by one at most; more get their tables' names (below).
constexpr int kMaxNamedColumns = 40;
/// The colour of a heatmap cell whose rank holds no such shard (NaN), light grey.
inline const QColor kNoShardColor{0xd9, 0xd9, 0xd9};

/// The x ticks of a rank x column heatmap, (column, name): every column's name when there are
/// at most kMaxNamedColumns; else, given `tables` (each column's table, as many as `columns`),
/// one tick per run of columns of the same table, at its first column, named by the table
/// (tester41 #18: bare indices 0..100 for 104 shards); else (or more tables than that) none:
/// the caller draws integer indices.
std::vector<std::pair<int, QString>> heatmap_column_ticks(const QStringList& columns, const QStringList& tables);
/// `text` with each of its lines word-wrapped at spaces to at most `width` px in `fm` (a word
/// wider than that stays whole on its own line). The heatmaps' titles, wrapped again on each
/// resize of their plot (tester56 F8: "r rank x table shard ... on the rar" cut at both ends).
QString wrap_title(const QString& text, const QFontMetrics& fm, int width);
class InputStatsModel;

class LoadView : public QWidget {
  Q_OBJECT

 public:
  explicit LoadView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent = nullptr);
  /// Shows `m`. The aggregation (sessions::load_data) runs off the GUI thread: until it arrives
  /// the metric row says "computing...", data() keeps the previous metric's figures and
  /// job()->busy() is true; a metric chosen before the last one arrived is dropped.
  void set_metric(sessions::LoadMetric m);
  const sessions::LoadData& data() const { return data_; }
  AnalysisJob* job() { return job_; }
  QCustomPlot* shard_map() { return shard_plot_; }
  QCustomPlot* step_map() { return step_plot_; }
  QCustomPlot* imbalance_plot() { return imbalance_plot_; }
  /// The steps the imbalance chart draws as "no ids" (no rank had any of the metric: 0 of 0, no
  /// ratio; a grey band with a legend entry, not a balanced 1 on the line).
  const std::vector<double>& no_metric_steps() const { return no_metric_steps_; }
  /// The bar per rank of the metric's total (a "not recorded" text item instead for a lookup time no counter holds).
  QCustomPlot* rank_plot() { return rank_plot_; }
  /// The most pixels a rank's row of a heatmap gets (tester38 #14: a report window grown for
  /// the input table stretched each row of a 4-rank heatmap to ~570 px).
  static constexpr int kMaxRankRowPx = 48;
  /// The tallest a rank x column heatmap is drawn for `ranks` ranks: its title and rotated
  /// column names (kHeatmapChromePx) plus kMaxRankRowPx per rank; at least the plots' minimum
  /// height, 200 px. 4 ranks: 150 + 192 = 342 px.
  static constexpr int kHeatmapChromePx = 150;
  /// heatmap_max_height of the rows a heatmap draws (at most kHeatMaxRows: core/heat_bins.h), and
  /// at most kMaxBinnedHeatmapPx (tester42 F19: 64 binned rows at kMaxRankRowPx made 3,222 px).
  static constexpr int kMaxBinnedHeatmapPx = 800;
  static int binned_heatmap_max_height(int ranks) { return std::min(kMaxBinnedHeatmapPx, heatmap_max_height(std::min(ranks, 64))); }
  static int heatmap_max_height(int ranks) { return std::max(200, kHeatmapChromePx + kMaxRankRowPx * std::max(1, ranks)); }
  /// The least pixels a rank's row of a heatmap gets, up to kHeatMaxRows rows (tester43 F5: 8
  /// ranks in ~25 px overprinted their labels).
  static constexpr int kMinRankRowPx = 18;
  /// The shortest a rank x column heatmap is drawn: kHeatmapChromePx plus kMinRankRowPx per rank
  /// row, at least 200 px. 4 ranks: 222 px; 8: 294 px.
  static int heatmap_min_height(int ranks) {
    return std::max(200, kHeatmapChromePx + kMinRankRowPx * std::clamp(ranks, 1, 16));
  }
  /// The tallest the imbalance line and per-rank bar charts are drawn (px).
  static constexpr int kMaxChartPx = 320;
  /// Shows the row histogram of table `table` (an index into the workload's tables).
  void set_table(int table);
  /// The histogram shown (empty buckets when the session has none: see row_note()).
  const RowHistogram& rows() const { return rows_; }
  QCustomPlot* row_plot() { return row_plot_; }
  /// Says what the row histogram shows, or that the session has none.
  QLabel* row_note() { return row_note_; }
  /// The input per feature (core/input_figures.h), counted off the GUI thread by input_job()
  /// when the view is built; clicking a feature's row shows its table's row histogram.
  InputStatsModel* input_model() { return input_model_; }
  QTableView* input_table() { return input_table_; }
  /// Where the input figures come from, "counting the input..." meanwhile, or why there are none.
  QLabel* input_note() { return input_note_; }
  AnalysisJob* input_job() { return input_job_; }
  /// The plan over time (core/rebalance_marks.h plan_rows): which rank held each shard from which
  /// step to which, one row per span (table, type, shard, rank, rows, steps); shown with its
  /// title only when the session's plan changed (live rebalances), hidden otherwise.
  QTableWidget* plan_table() { return plan_table_; }
  /// Whether `session` holds no measured step: it did not end complete (a complete run trained
  /// every planned step) and it has no step row, no load counter of a step >= 0 and no id
  /// histogram bucket. The page then says "no measured step" in the metric row, on each chart,
  /// in row_note() and input_note() instead of empty charts with 0..1 scales, a 0-id hottest
  /// bucket and the input statistics of batches never trained on (tester49 F15). Reads the
  /// session; throws what its reader throws (sessions::SessionError naming the file).
  static bool no_measured_step(const sessions::SessionReader& session);
  /// The steps the row histogram counts, as row_note() starts: "ids of the 20 measured steps";
  /// "ids looked up in the 8 counted steps 0-7 (the drain steps 8-9 left out, as in the charts
  /// above and stats)" (a session whose id histogram is written so: metadata id_histogram_counts);
  /// for an older pipelined session, whose histogram holds every measured step's batch, that it
  /// does, and which steps the charts and stats count instead.
  QString histogram_steps_text() const;
  /// The steps the charts above count, for their titles: "measured steps", or "counted steps 0-7;
  /// the drain steps 8-9 left out, as stats".
  QString counted_steps_text() const;

 private:
  void rebuild();  // starts the aggregation of metric_
  void draw();     // the plots of data_
  void rebuild_rows();
  void count_input();  // starts input_job_
  std::shared_ptr<const sessions::SessionReader> session_;
  sessions::LoadMetric metric_ = sessions::LoadMetric::ids_looked_up;
  sessions::LoadData data_;
  QComboBox *metric_box_, *table_box_;
  QCustomPlot *shard_plot_, *step_plot_, *imbalance_plot_, *rank_plot_, *row_plot_;
  QLabel* row_note_;
  QLabel* status_;  // "computing...", the aggregation's error, or nothing
  AnalysisJob* job_;
  InputStatsModel* input_model_;
  QTableView* input_table_;
  QLabel* input_note_;
  AnalysisJob* input_job_;
  QLabel* plan_title_;
  QTableWidget* plan_table_;
  int table_ = 0;
  RowHistogram rows_;
  std::vector<double> no_metric_steps_;
  // the session's measured steps (steps rows with step >= 0, distinct; -1 before the count)
  int64_t measured_steps_ = -1;
  // no_measured_step(*session_): the page says so instead of empty charts, a 0-id "hottest
  // bucket" and the input statistics of batches never trained on (tester49 F15)
  bool no_measured_step_ = false;
  // "no measured step (the run ended cancelled before its first measured step)", or "... yet" while running
  QString no_measured_step_text() const;
  // the pipeline's drain steps the session holds (LoadData::drain_first / drain_steps, read here
  // for the row histogram's caption, which does not wait for the aggregation)
  int64_t drain_first_ = 0, drain_steps_ = 0;
  /// Writes `text` over the middle of `plot` (cleared first) and replots it.
  static void say_on_plot(QCustomPlot* plot, const QString& text);
};

}  // namespace embedscope::ui
