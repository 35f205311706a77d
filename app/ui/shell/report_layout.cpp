#include "shell/report_layout.h"

#include <QAbstractItemView>
#include <QApplication>
#include <QLayout>
#include <QScrollBar>
#include <QWidget>

#include <algorithm>

namespace embedscope::ui {

namespace {
// The vertical overflow of every visible scroll area under `view`, px (summed).
int overflow(QWidget* view) {
  int total = 0;
  for (auto* area : view->findChildren<QAbstractScrollArea*>()) {
    if (!area->isVisibleTo(view)) continue;
    if (auto* items = qobject_cast<QAbstractItemView*>(area)) items->setVerticalScrollMode(QAbstractItemView::ScrollPerPixel);
    total += std::max(0, area->verticalScrollBar()->maximum());
  }
  return total;
}

void settle(QWidget* window) {
  for (auto* l : window->findChildren<QLayout*>()) l->activate();
  QApplication::processEvents();
}
}  // namespace

int show_every_row(QWidget* window, QWidget* view, int max_height) {
  settle(window);
  int left = overflow(view);
  for (int round = 0; left > 0 && round < 40 && window->height() < max_height; ++round) {
    // layouts share the extra height between their panes: grow by all of it, then look again
    window->resize(window->width(), std::min(max_height, window->height() + left + 8));
    settle(window);
    left = overflow(view);
  }
  return left;
}

}  // namespace embedscope::ui
