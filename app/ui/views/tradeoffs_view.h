#pragma once
// The storage trade-offs of a scenario's runs side by side (issue 16: "memory vs loss vs time"):
// a table per run (TradeoffsModel: table bytes, the busiest rank's peak, step time, the loss
// after N steps against the reference run, the lookup error, collisions) and a chart with memory
// on x and the loss after N steps on y, one point per run, its size growing with the run's step
// time and its label giving the step time. The figures are computed off the GUI thread by
// core/tradeoff_figures.h; the view only draws them. The scenario view shows it as the
// comparison's "Trade-offs" page for scenarios whose runs store their tables differently.

#include <QWidget>

#include <vector>

#include "models/labelled_session.h"
#include "models/tradeoffs_model.h"

class QComboBox;
class QCustomPlot;
class QCPItemText;
class QLabel;
class QTableView;

namespace embedscope::ui {

class AnalysisJob;

class TradeoffsView : public QWidget {
  Q_OBJECT

 public:
  /// What the chart's x axis shows.
  enum class Memory { table_bytes, peak_allocated };
  /// Starts the analysis of `sessions` (each read on the worker through a reader of its own);
  /// model() is empty and the caption says "analysing..." until it arrives (job()).
  explicit TradeoffsView(const std::vector<LabelledSession>& sessions, QWidget* parent = nullptr);
  TradeoffsModel* model() { return model_; }
  QCustomPlot* plot() { return plot_; }
  QTableView* table() { return table_; }
  QLabel* caption() { return caption_; }
  AnalysisJob* job() { return job_; }
  /// Chooses the chart's x axis (also the combo box above the chart) and redraws.
  void set_memory_axis(Memory m);
  /// The x value of run `i` on the chart for the current axis (MiB).
  double memory_mib(size_t i) const;
  /// The point size of run `i` on the chart (px): 8 px for the fastest run up to 24 px for the
  /// slowest, by mean step time; 8 px when no run has measured steps.
  double point_size(size_t i) const;
  /// For each run, the earlier run whose point its own covers on the chart (within 0.5 % of each
  /// axis's span), or -1; its label then says "B = A" (tester42 F3). Empty before the figures.
  const std::vector<int>& coincident() const { return coincident_; }

 private:
  void show_comparison();
  void draw();
  // Puts each run's label beside its point where it covers no other label or point (right,
  // left, above, below, then further up or down); runs after every layout of the plot, when the
  // points' pixels are known.
  void place_labels();
  struct Label {
    QCPItemText* item;
    double x, y;   // the point (plot coordinates)
    double size;   // its diameter (px)
  };
  std::vector<Label> labels_;
  std::vector<int> coincident_;
  std::vector<LabelledSession> sessions_;
  TradeoffsModel* model_;
  AnalysisJob* job_;
  QLabel* caption_;
  QTableView* table_;
  QComboBox* axis_;
  QCustomPlot* plot_;
  Memory memory_ = Memory::table_bytes;
};

}  // namespace embedscope::ui
