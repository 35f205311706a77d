#pragma once
// The window's first screen while no tab is open (tester63a F3: an empty grey window said nothing
// of what to do): what one can open or start, as Nsight Systems' project explorer and Perfetto's
// landing page do - open a session, trace or memory snapshot; a folder of per-rank traces; a new
// workload (designer: plan, memory estimate, run); compare sessions; each built-in teaching
// scenario; the recent files - and the command that makes a first session.

#include <QStringList>
#include <QWidget>

class QVBoxLayout;

namespace embedscope::ui {

class StartPage : public QWidget {
  Q_OBJECT

 public:
  /// The page with the built-in scenarios (builtin_scenarios(); a broken one: its error in place
  /// of the list) and `recent` (most recent first).
  explicit StartPage(const QStringList& recent, QWidget* parent = nullptr);
  /// Replaces the recent-files list (the window calls it when a file is opened).
  void set_recent(const QStringList& recent);
  /// The scenario ids listed, in order (builtin_scenarios' order: by id).
  const QStringList& scenario_ids() const { return scenario_ids_; }

 signals:
  void open_requested();            ///< "Open a session, trace or snapshot..." (File > Open)
  void open_folder_requested();     ///< "Open a folder of per-rank traces..."
  void new_workload_requested();    ///< "New workload..." (File > New Workload)
  void compare_requested();         ///< "Compare sessions..."
  void scenario_requested(const QString& id);  ///< a teaching scenario's link (QLabel "start_scenario_ID")
  void recent_requested(const QString& path);  ///< a recent file's link (QLabels "start_recent", tooltip: the path)

 private:
  QVBoxLayout* recent_box_ = nullptr;
  QStringList scenario_ids_;
};

}  // namespace embedscope::ui
