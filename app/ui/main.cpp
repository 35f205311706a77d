// embedscope-ui: the Qt workbench.
// Usage: embedscope-ui [SESSION.db ...] [--screenshot FILE.png]
//   --screenshot renders the window with the sessions opened to FILE.png and exits (works
//   offscreen: QT_QPA_PLATFORM=offscreen), for documentation and checks without a display.

#include <QApplication>
#include <QTimer>

#include <cstdio>

#include "main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("Embedscope");
  QApplication::setOrganizationName("Embedscope");
  embedscope::ui::MainWindow w;
  QString screenshot;
  const QStringList args = QApplication::arguments().mid(1);
  for (int i = 0; i < args.size(); ++i) {
    if (args[i] == "--screenshot") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "error: --screenshot needs a file name\n");
        return 2;
      }
      screenshot = args[++i];
    } else if (!w.open_session(args[i], !screenshot.isNull() || args.contains("--screenshot")).isEmpty() &&
               args.contains("--screenshot")) {
      std::fprintf(stderr, "error: %s\n", qPrintable(w.open_session(args[i], true)));
      return 2;
    }
  }
  w.show();
  if (!screenshot.isEmpty()) {
    QApplication::processEvents();
    if (!w.grab().save(screenshot)) {
      std::fprintf(stderr, "error: %s: cannot write the screenshot\n", qPrintable(screenshot));
      return 2;
    }
    return 0;
  }
  return QApplication::exec();
}
