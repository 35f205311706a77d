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
  QString open_session(const QString& path, bool quiet = false);
  QTabWidget* tabs() { return tabs_; }

 protected:
  void dragEnterEvent(QDragEnterEvent*) override;
  void dropEvent(QDropEvent*) override;

 private:
  QTabWidget* tabs_;
};

/// The SQLite library version, for About.
QString sqlite_version();

}  // namespace embedscope::ui
