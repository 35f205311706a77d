#pragma once
// The teaching view of a scenario (scenario.h): the runs' timelines one above the other on one
// time scale aligned by step (CompareView, which also gives their figures and memory), the
// explanation beside them, a row per run to open its saved session or ask for a run, and a
// play control that steps through one training step op by op (sessions::play_order); for a
// scenario whose runs store their tables differently, a "Trade-offs" page (TradeoffsView).

#include <QWidget>

#include <memory>
#include <string>
#include <vector>

#include "views/compare_view.h"
#include "embedscope/sessions/analysis/scenario_order.h"
#include "embedscope/engine/workload/scenario.h"

class QComboBox;
class QLabel;
class QPushButton;
class QSlider;
class QTextBrowser;
class QTimer;
class QVBoxLayout;

namespace embedscope::ui {

// The engine's teaching scenarios (engine/workload/scenario.h) under the workbench's names.
using engine::builtin_scenarios;
using engine::load_scenario_file;
using engine::parse_scenario;
using engine::Scenario;
using engine::ScenarioRun;
using engine::session_file_name;

class AnalysisJob;
class RunJob;
class TradeoffsView;

/// `text` with a zero-width space (U+200B) after each '_', '/', '-' and '.', so that a word-wrapped
/// QLabel may break a long identifier there ("vocab_parallel + sequence_parallel" was cut at the
/// Runs pane's 420 px, tester43 F9). "a_b.db" -> "a_\u200Bb.\u200Bdb"; text without them is unchanged.
QString breakable(QString text);

/// `paragraph` (plain text) as HTML, escaped, each "<Page> page" that names a page of a scenario's
/// comparison (Figures, Timelines - also "Timeline page" -, Memory, Trade-offs) made a link to it,
/// href "page:<tab title>": "Open the Memory page: ..." -> "Open the <a href="page:Memory">Memory
/// page</a>: ...". The scenario tab opens the page when the link is clicked.
QString link_pages(const QString& paragraph);
/// The page the last paragraph of the scenario's explanation links (link_pages; its first link):
/// the page the text ends by sending the reader to ("Open the Memory page" -> "Memory"), which the
/// tab opens once its runs' sessions are open; "" when the last paragraph names no page.
QString page_named_last(const Scenario& scenario);
/// The explanation as the tab shows it: the title as <h3>, each paragraph a <p> with link_pages.
QString explanation_html(const Scenario& scenario);

class ScenarioView : public QWidget {
  Q_OBJECT

 public:
  explicit ScenarioView(Scenario scenario, QWidget* parent = nullptr);
  const Scenario& scenario() const { return scenario_; }
  /// Opens `path` as the session of run `index`; returns the error (empty on success).
  QString open_run_session(size_t index, const QString& path);
  /// Opens, for every run, DIR/session_file_name(scenario, i) when it exists; returns how many.
  /// Also makes DIR the run_directory().
  int open_folder(const QString& dir);
  /// Where runs started from the view write their sessions (default: the current directory).
  const QString& run_directory() const { return run_dir_; }
  /// The comparison of the opened runs (nullptr while fewer than one is open).
  CompareView* compare() { return compare_; }
  /// The comparison's "Trade-offs" page (views/tradeoffs_view.h): shown, and made the current
  /// page, for a scenario whose runs store their tables differently (runs_differ_in_table_storage,
  /// e.g. compression); nullptr for other scenarios and while no run is open.
  TradeoffsView* tradeoffs() { return tradeoffs_; }
  /// The explanation (explanation_html): a text browser that wraps its lines inside its
  /// viewport, whose page links (link_pages) open pages of the comparison.
  QTextBrowser* explanation() { return explanation_; }
  /// Makes the comparison's page whose tab reads `name` ("Memory") the current one; false when
  /// no run is open or there is no such page.
  bool open_page(const QString& name);
  /// The play control: the ops of the played step and the current position. The order
  /// (sessions::play_order) is found off the GUI thread whenever the played run or the
  /// comparison changes: empty until play_job() is no longer busy.
  const std::vector<sessions::PlayStep>& play_steps() const { return play_; }
  AnalysisJob* play_job() { return play_job_; }
  int play_position() const { return position_; }
  void set_play_position(int i);
  /// The text describing the current op.
  QString play_text() const;

 signals:
  /// Run `run_index` of the scenario was started (its workload: scenario().runs[i]). The view runs
  /// it itself (RunJob, off the GUI thread; its Run button turns into Cancel) into
  /// run_directory()/session_file_name(...), replacing an older session of that run, and opens the
  /// session when the run ends.
  void run_requested(const QString& scenario_id, int run_index);

 private:
  // The aligned step as every view names it ("step 0", "warm-up 1 of 1").
  QString play_step_name() const;
  void rebuild();
  void load_play();  // starts finding the play order of the chosen run
  void show_play();  // the play control for play_
  void run_or_cancel(size_t index, QPushButton* button);
  Scenario scenario_;
  std::vector<std::shared_ptr<const sessions::SessionReader>> sessions_;  // per run, may be null
  std::vector<QLabel*> run_status_;
  QVBoxLayout* compare_box_;
  CompareView* compare_ = nullptr;
  TradeoffsView* tradeoffs_ = nullptr;  // a page of compare_
  bool storage_differs_ = false;  // runs_differ_in_table_storage(scenario_)
  QLabel* placeholder_;
  QTextBrowser* explanation_ = nullptr;
  QComboBox* play_run_;
  QPushButton *back_, *play_button_, *forward_;
  QSlider* slider_;
  QLabel* op_text_;
  QTimer* timer_;
  AnalysisJob* play_job_;
  QWidget* highlight_ = nullptr;
  std::vector<sessions::PlayStep> play_;
  size_t play_session_ = 0;  // index into the compared sessions
  std::vector<size_t> compared_runs_;  // run index of each compared session
  int position_ = -1;
  QString run_dir_ = ".";
  std::vector<RunJob*> jobs_;  // per run; children of the view
};

}  // namespace embedscope::ui
