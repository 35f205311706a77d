#include "shell/report_layout.h"

#include <QAbstractItemView>
#include <QApplication>
#include <QHeaderView>
#include <QLayout>
#include <QLocale>
#include <QPainter>
#include <QScrollArea>
#include <QScrollBar>
#include <QStringList>
#include <QTableView>
#include <QWidget>

#include <algorithm>

#include "timeline/timeline_widget.h"

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

// "table rank, compute, comm": an item view named by its first (up to 3) column headers.
QString table_name(QAbstractItemView* items) {
  QStringList heads;
  const auto* m = items->model();
  for (int c = 0; m && c < std::min(3, m->columnCount()); ++c)
    if (const QString h = m->headerData(c, Qt::Horizontal).toString(); !h.isEmpty()) heads << h;
  return heads.isEmpty() ? QString("table") : "table " + heads.join(", ");
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

std::vector<CutPane> cut_panes(QWidget* view) {
  std::vector<CutPane> out;
  for (auto* area : view->findChildren<QAbstractScrollArea*>()) {
    if (!area->isVisibleTo(view)) continue;
    const int more = area->verticalScrollBar()->maximum();
    if (more <= 0) continue;
    CutPane p;
    p.shown_px = area->viewport()->height();
    p.total_px = p.shown_px + more;
    if (auto* items = qobject_cast<QAbstractItemView*>(area); items && items->model()) {
      p.name = table_name(items);
      p.total_rows = items->model()->rowCount();
      const int bottom = items->indexAt(QPoint(1, p.shown_px - 1)).row();  // the row cut by the edge
      p.shown_rows = bottom < 0 ? p.total_rows : bottom;
    } else if (auto* scroll = qobject_cast<QScrollArea*>(area)) {
      if (auto* tl = qobject_cast<TimelineWidget*>(scroll->widget())) {
        p.name = "timeline";
        p.total_rows = static_cast<int>(tl->rows());
        while (p.shown_rows < p.total_rows && tl->row_y(static_cast<size_t>(p.shown_rows)) + TimelineWidget::kRowHeight <= p.shown_px)
          ++p.shown_rows;
      } else {
        p.name = "pane";
      }
    } else {
      p.name = "pane";
    }
    out.push_back(p);
  }
  return out;
}

QString cut_note(const std::vector<CutPane>& panes) {
  if (panes.empty()) return {};
  const QLocale c(QLocale::English, QLocale::UnitedStates);  // 2,048
  QStringList parts;
  for (const auto& p : panes)
    parts << (p.total_rows > 0 ? QString("%1: rows 1-%2 of %3 shown").arg(p.name, c.toString(p.shown_rows), c.toString(p.total_rows))
                               : QString("%1: the first %2 of %3 px shown").arg(p.name, c.toString(p.shown_px), c.toString(p.total_px)));
  return QString("Rows left out of this image (the report's images are at most %1 px tall): %2. Every row: open the "
                 "session in embedscope-ui, or `embedscope stats`.")
      .arg(c.toString(kReportMaxHeight), parts.join("; "));
}

QImage with_cut_note(const QImage& image, const QString& note) {
  if (note.isEmpty()) return image;
  QFont font = QApplication::font();
  font.setBold(true);
  const QFontMetrics fm(font);
  const QRect text = fm.boundingRect(QRect(0, 0, image.width() - 16, 10000), Qt::TextWordWrap, note);
  const int strip = text.height() + 12;
  QImage out(image.width(), image.height() + strip, QImage::Format_ARGB32_Premultiplied);
  out.fill(QColor(0xff, 0xf4, 0xc2));
  QPainter p(&out);
  p.setFont(font);
  p.setPen(QColor(0x5a, 0x3c, 0x00));
  p.drawText(QRect(8, 6, image.width() - 16, strip - 12), Qt::TextWordWrap, note);
  p.drawImage(0, strip, image);
  return out;
}

}  // namespace embedscope::ui
