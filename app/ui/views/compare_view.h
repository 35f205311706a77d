#pragma once
// Comparing sessions (two in File > Compare Sessions, two or more in a teaching scenario):
// their `stats` figures side by side with differences, charts on shared axes, their timelines
// one above the other on one time scale aligned by step, and their memory side by side.
// Figures come from sessions::analyze (views never compute what an analysis can).

#include <QWidget>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/throughput.h"

#include "models/compare_model.h"
#include "models/labelled_session.h"
#include "timeline/timeline_stack.h"

class QCustomPlot;
class QLabel;
class QSpinBox;
class QTabWidget;
class QTableView;

namespace embedscope::ui {

class AnalysisJob;
class MemoryCompare;

/// The comparison page: "Figures" (CompareModel, step time per step and exposed communication
/// per rank on shared axes), "Timelines" (TimelineStack with the step to align) and "Memory"
/// (MemoryCompare). The figures are analysed off the GUI thread (an AnalysisJob; model() and
/// the plots are null until they arrive, see wait_for_analyses); the page says why when a
/// session cannot be analysed. Throws sessions::SessionError if a session cannot be read.
class CompareView : public QWidget {
  Q_OBJECT

 public:
  CompareView(const std::vector<LabelledSession>& sessions, int64_t align_step = 0, QWidget* parent = nullptr);
  CompareModel* model() { return model_; }
  TimelineStack* timelines() { return stack_; }
  MemoryCompare* memory() { return memory_; }
  QTabWidget* pages() { return pages_; }
  QCustomPlot* step_plot() { return step_plot_; }
  QCustomPlot* exposed_plot() { return exposed_plot_; }

 private:
  void show_figures(std::vector<sessions::RunStats> stats, std::vector<SessionThroughput> rates);

  QTabWidget* pages_;
  std::vector<LabelledSession> sessions_;
  std::vector<std::string> gpu_lines_;  ///< per session: sessions::gpu_run_text, computed with the figures
  std::vector<std::optional<double>> hta_;  ///< per session: sessions::hta_overlap_pct (tester48 F13)
  std::vector<sessions::WireFacts> wire_;   ///< per session: sessions::wire_facts (the bytes-on-the-wire rows)
  std::vector<std::string> recorded_oom_;  ///< per session: sessions::recorded_oom_text (tester52 F9), "" for most
  AnalysisJob* job_;
  QWidget* figures_ = nullptr;
  QLabel* status_ = nullptr;
  CompareModel* model_ = nullptr;
  TimelineStack* stack_ = nullptr;
  MemoryCompare* memory_ = nullptr;
  QCustomPlot* step_plot_ = nullptr;
  QCustomPlot* exposed_plot_ = nullptr;
};

}  // namespace embedscope::ui
