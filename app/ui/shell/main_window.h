#pragma once
// The workbench window: sessions in tabs (each with its timeline and summary), opened from the
// command line, File > Open, or drag and drop (sessions, or traces imported in the background), and workload designers (File > New Workload)
// whose runs open their sessions in new tabs. A bad or foreign file gives a dialog with the
// reader's message.

#include <QMainWindow>
#include <QTabWidget>

class QStackedWidget;

namespace embedscope::ui {

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  /// Opens `path` in a new tab (a SessionTab: pages over one reader, a snapshot for a session whose
  /// run still writes it, copied in the background while the tab says so, File > Reload); on
  /// failure shows a dialog (unless `quiet`) and returns the error.
  /// Opened files go to the front of the recent-files list (QSettings "recent").
  /// The tab is titled with the file name, plus the session's end in brackets when it did not
  /// complete ("s.db [cancelled]"), and "[imported: FORMAT]" for an imported session ("[running: as of step N]" for a
  /// snapshot: SessionTab::title, updated as its watch sees new steps or the end); the window
  /// title follows the current tab ("Embedscope - s.db [imported: kineto_json]").
  QString open_session(const QString& path, bool quiet = false);
  /// File > Reload (F5): re-reads the current session tab in place (SessionTab::reload; a new
  /// snapshot of a session still being written is copied in the background, its banner saying
  /// so); returns the error (a dialog unless `quiet`), or "reload: the current tab is not a
  /// session's".
  QString reload_current(bool quiet = false);
  /// View > Go to Slowest Step (Ctrl+Shift+S): shows the current session tab's Timeline fitted to
  /// the slowest measured step, the one `embedscope stats` names (TimelineView::go_to_slowest_step;
  /// read off the GUI thread on first use). Returns "" when it started, else why not ("go to
  /// slowest step: the current tab has no timeline").
  QString go_to_slowest_step();
  /// File > Close Tab (Ctrl+W): closes the current tab, whatever it shows.
  void close_current_tab();
  /// File > Open's name filters: sessions and every format open_path imports (Kineto JSON, Nsight
  /// Systems .sqlite / .nsys-rep, memory snapshots) and workloads. File > Open takes several files
  /// and opens each as open_path does.
  static QString open_filter();
  /// Opens what `path` is: a session (SQLite) in a tab as open_session does; a trace file
  /// (.json, .json.gz, .pt.trace.json.gz), a directory of per-rank traces or a PyTorch memory
  /// snapshot pickle is imported first (import_trace); a scaling study opens as open_scaling
  /// does, a workload file (is_workload_file) in a designer (new_workload, then
  /// WorkloadDesigner::load_file; an lm_embedding workload is refused there and no tab stays).
  /// Returns the error (empty when the session opened or the import started).
  QString open_path(const QString& path, bool quiet = false);
  /// Imports `sources` in the background (ImportJob) into a session beside the first source,
  /// or in the cache folder (imports_folder()) when that folder is not writable; a complete
  /// earlier import of the same files is opened as it is. Meanwhile a tab shows a progress bar
  /// and Cancel; when the import completes, the tab is replaced by the session's tab (marked
  /// "[imported]"); when it fails or is cancelled, the tab is titled "import failed: NAME" (or
  /// "import cancelled: NAME"), says "Import failed: REASON" wrapped, and its button reads Close. Returns the job (nullptr when the session was reused or the target could
  /// not be chosen: then `error` says why). Ranks whose time ranges do not overlap (traces of
  /// different jobs?) are refused as `embedscope import` refuses them (ended "disjoint", the
  /// tab saying why); unless `quiet`, a dialog ("disjoint_import") shows the refusal and offers
  /// Import Anyway, which imports them again with `allow_disjoint` (tester42 F12).
  class ImportJob* import_trace(const QStringList& sources, bool quiet = false, QString* error = nullptr,
                                bool allow_disjoint = false);
  /// The cache folder for imported sessions of read-only sources.
  static QString imports_folder();
  /// File > New Workload: a workload designer in a new tab, on `preset`.
  class WorkloadDesigner* new_workload(const QString& preset = "tiny");
  QTabWidget* tabs() { return tabs_; }
  /// The first screen, shown in place of the tabs while none is open (StartPage: open, new
  /// workload, compare, the scenarios, the recent files); its buttons do what the File menu does.
  class StartPage* start_page() { return start_; }
  /// Opens a comparison tab (CompareView) of two or more sessions; returns the error, shown in a
  /// dialog unless `quiet`.
  QString open_compare(const QStringList& paths, bool quiet = false);
  /// Opens a scenario tab (ScenarioView): `scenario` is a built-in scenario's id or a scenario
  /// file; the runs' sessions are looked for in `sessions_dir` when given. Returns the error.
  /// (Its run_requested signal is for the run machinery to connect.)
  QString open_scenario(const QString& scenario, const QString& sessions_dir = {}, bool quiet = false);
  /// Opens a scaling study tab (ScalingView) of the file `embedscope scaling --json` wrote (File >
  /// Open and open_path recognise it by its first key); returns the error, shown unless `quiet`.
  QString open_scaling(const QString& path, bool quiet = false);
  /// File > Export for the current session: "chrome" (Trace Event JSON), "csv" (a folder),
  /// "png", "svg" (vector, QSvgGenerator) or "pdf" (the current view). Returns the error, or an empty string.
  QString export_current(const QString& format, const QString& path);
  /// The recent-files list, most recent first (at most 10).
  static QStringList recent_files();

 signals:
  /// An import started by import_trace ended: `ended` "complete" (its session is open in a tab,
  /// `session` its path), "cancelled", "error" or "disjoint" (refused: ranks of different
  /// jobs?) (`session` empty, `message` why).
  void import_finished(const QString& session, const QString& ended, const QString& message);

 protected:
  void dragEnterEvent(QDragEnterEvent*) override;
  void dropEvent(QDropEvent*) override;
  void closeEvent(QCloseEvent*) override;

 private:
  void rebuild_recent_menu();
  QTabWidget* tabs_;
  QStackedWidget* stack_ = nullptr;  // the start page, or the tabs once one is open
  class StartPage* start_ = nullptr;
  class QMenu* recent_menu_ = nullptr;
};

/// The SQLite library version, for About.
QString sqlite_version();
/// Help > About's text: Embedscope's version and those of Qt, SQLite, Gloo and, when built
/// with it, the CUDA toolkit.
QString about_text();

}  // namespace embedscope::ui
