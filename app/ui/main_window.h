#pragma once
// The workbench window: sessions in tabs (each with its timeline and summary), opened from the
// command line, File > Open, or drag and drop. A bad or foreign file gives a dialog with the
// reader's message.

#include <QMainWindow>
#include <QTabWidget>

namespace embedscope::ui {

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  /// Opens `path` in a new tab; on failure shows a dialog (unless `quiet`) and returns the error.
  /// Opened files go to the front of the recent-files list (QSettings "recent").
  QString open_session(const QString& path, bool quiet = false);
  QTabWidget* tabs() { return tabs_; }
  /// File > Export for the current session: "chrome" (Trace Event JSON), "csv" (a folder),
  /// "png", "svg" (vector, QSvgGenerator) or "pdf" (the current view). Returns the error, or an empty string.
  QString export_current(const QString& format, const QString& path);
  /// The recent-files list, most recent first (at most 10).
  static QStringList recent_files();

 protected:
  void dragEnterEvent(QDragEnterEvent*) override;
  void dropEvent(QDropEvent*) override;
  void closeEvent(QCloseEvent*) override;

 private:
  void rebuild_recent_menu();
  QTabWidget* tabs_;
  class QMenu* recent_menu_ = nullptr;
};

/// The SQLite library version, for About.
QString sqlite_version();

}  // namespace embedscope::ui
