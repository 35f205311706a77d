#pragma once
// The workload designer: a preset or a JSON file, its tables edited in a table view, devices,
// batch size, steps, optimizer and allocator in a form; the engine's validation message beside
// the offending cell or field; the estimated memory of every device, updated as you edit; Save
// as JSON; Run (a RunJob off the GUI thread) with a progress bar (step, samples/s, ETA) and
// Cancel.

#include <QWidget>

#include <map>
#include <memory>

#include "jobs/analysis_job.h"
#include "jobs/run_job.h"
#include "models/workload_model.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;
class QTableWidget;

namespace embedscope::ui {

class WorkloadDesigner : public QWidget {
  Q_OBJECT

 public:
  /// Opens on `preset` (engine::preset_names()).
  explicit WorkloadDesigner(const QString& preset = "tiny", QWidget* parent = nullptr);
  ~WorkloadDesigner() override;

  WorkloadModel* model() { return model_; }
  QTableView* table_view() { return table_; }
  /// Loads a preset or a workload file; returns the error (also shown in a dialog unless quiet).
  /// The Preset box then shows the preset's name, or "(file NAME.json)" (its placeholder, no
  /// item selected) for a file; after an error it keeps showing what is loaded. An lm_embedding
  /// preset or file is refused (WorkloadModel::load_preset / load_file say why).
  QString load_preset(const QString& name, bool quiet = false);
  QString load_file(const QString& path, bool quiet = false);
  /// The Preset box (engine::preset_names(), the DLRM presets).
  QComboBox* preset_box() { return preset_box_; }
  /// Writes the workload as JSON; returns the error or an empty string.
  QString save(const QString& path);
  /// The message shown beside a form field ("/batch_size", "/devices/count",
  /// "/devices/memory_bytes", "/steps", "/warmup_steps", "/optimizer", "/memory",
  /// "/sharding/default", "/dense/precision", ...) or under the table ("/tables"); empty when none.
  QString message_at(const QString& field) const;
  /// The estimated-memory table (rank, weights, optimizer state, dense, buffers, total, capacity).
  QTableWidget* memory_table() { return memory_table_; }

  /// Searches a plan for the workload as it stands (engine::plan_search on its hardware
  /// profile, planning_profile; off the GUI thread, auto_plan_job()) and writes it into the
  /// workload as per-table overrides (engine::plan_overrides), which the tables view, the
  /// memory estimate and Run then use; auto_plan_text() compares it with the greedy plan.
  /// Returns the error when the workload is invalid (nothing is searched); a search that
  /// finds no plan shows its error in auto_plan_text().
  QString plan_automatically();
  AnalysisJob* auto_plan_job() { return auto_plan_job_; }
  /// What the last search found (or "searching for a plan...", or its error); empty before.
  QString auto_plan_text() const;

  /// Starts a run writing `session_path` (empty: embedscope-YYYYmmdd-HHMMSS.db in the current
  /// folder). Returns the error when the workload cannot run or a run is going.
  QString run(const QString& session_path = {});
  void cancel();
  /// The run going, or null.
  RunJob* job() { return job_.get(); }
  QProgressBar* progress_bar() { return progress_; }
  QString progress_text() const;

 signals:
  /// A run ended and wrote a session (any `ended`, also cancelled, oom, hang).
  void session_written(const QString& session_path, const QString& ended);

 private:
  void refresh();        // form values, messages and memory from the model
  void on_finished(const QString& path, const QString& ended, const QString& message);
  QLabel* add_message(const QString& field);

  WorkloadModel* model_;
  QTableView* table_;
  QComboBox* preset_box_;
  QString source_;  // what the workload shown came from: a preset's name or "file NAME.json"
  void show_source(const QString& source);
  QSpinBox *devices_, *memory_mib_, *batch_, *steps_, *warmup_;
  QComboBox *optimizer_, *allocator_, *default_sharding_, *backend_, *pipeline_;
  QComboBox *qcomms_, *qcomms_bwd_;  // /qcomms/forward_precision, /qcomms/backward_precision
  QComboBox* dense_precision_;       // /dense/precision (disabled for a workload with "dense": null)
  QComboBox* hardware_;  // backend simulated: the hardware profile (engine cost/hardware_profile.h)
  QDoubleSpinBox* learning_rate_;
  // /network/intra_node and /network/inter_node: bandwidth (MB/s, 0 = unlimited), latency (us)
  QDoubleSpinBox *bandwidth_mbs_, *latency_us_, *inter_bandwidth_mbs_, *inter_latency_us_;
  void set_network(QDoubleSpinBox* edited);  // the one field of /network that box holds
  std::map<QString, QLabel*> messages_;  // field pointer -> its message label
  QLabel* other_message_;
  QTableWidget* memory_table_;
  QLabel* memory_status_;
  QLineEdit* session_edit_;
  QPushButton *run_button_, *cancel_button_, *auto_plan_button_;
  QLabel* auto_plan_label_;
  AnalysisJob* auto_plan_job_;
  QProgressBar* progress_;
  QLabel* progress_label_;
  std::unique_ptr<RunJob> job_;
  bool refreshing_ = false;
};

/// True when `path` is a workload file (JSON, at most 16 MiB): an object with "model":
/// "lm_embedding", or with a "tables" array (a DLRM workload, complete or not: one without
/// "batch_size" or with an unknown key opens in the designer with the engine's error; not a plan,
/// whose tables carry "sharding_type", nor a scenario, which has "runs", nor a Kineto trace, which
/// has "traceEvents"). MainWindow::open_path opens such a
/// file in a designer (tester43 F8: `embedscope-ui tiny.json --screenshot x.png` took it for a
/// trace). False for anything unreadable or not JSON; never throws.
bool is_workload_file(const QString& path);

/// For a file that is meant as a workload but is not valid JSON (a hand edit cut short, a
/// missing quote): the error `embedscope run` gives for it, with line and column, e.g.
/// "w.json: a workload JSON? line 9, column 48: syntax error while parsing object key - ...";
/// "" for anything else (valid JSON, or text without a workload's keys "tables", "batch_size",
/// "vocab_size", or a Kineto trace's "traceEvents", or a file whose first non-blank byte is not
/// "{": a session, which stores its workload JSON, a pickle, a gzip). At most 16 MiB read; never
/// throws.
/// tester47 F8: such a file fell through to the importers ("not a format embedscope import reads").
QString broken_workload_json_error(const QString& path);

}  // namespace embedscope::ui
