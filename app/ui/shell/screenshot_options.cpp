#include "shell/screenshot_options.h"

#include <QRegularExpression>
#include <QStringList>
#include <QTabWidget>

#include "shell/main_window.h"
#include "views/compare_view.h"
#include "views/scenario_view.h"

namespace embedscope::ui {

std::optional<QSize> parse_window_size(const QString& text) {
  static const QRegularExpression re(R"(^(\d{3,5})[xX](\d{3,5})$)");
  const auto m = re.match(text.trimmed());
  if (!m.hasMatch()) return std::nullopt;
  const int w = m.captured(1).toInt(), h = m.captured(2).toInt();
  if (w < 200 || h < 200 || w > 10000 || h > 10000) return std::nullopt;
  return QSize(w, h);
}

QString show_page(MainWindow& w, const QString& name) {
  QWidget* tab = w.tabs()->currentWidget();
  auto* pages = qobject_cast<QTabWidget*>(tab);  // a session's tab
  if (auto* cmp = qobject_cast<CompareView*>(tab)) pages = cmp->pages();
  if (auto* sc = qobject_cast<ScenarioView*>(tab); sc && sc->compare()) pages = sc->compare()->pages();
  if (!pages) return QString("--page %1: the tab has no pages").arg(name);
  QStringList names;
  for (int i = 0; i < pages->count(); ++i) {
    if (pages->tabText(i).compare(name, Qt::CaseInsensitive) == 0) {
      pages->setCurrentIndex(i);
      return {};
    }
    names << pages->tabText(i);
  }
  return QString("--page %1: the tab has no such page (its pages: %2)").arg(name, names.join(", "));
}

}  // namespace embedscope::ui
