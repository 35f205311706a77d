#include "shell/report_layout.h"

#include <QLabel>
#include <QLocale>

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
#include <QTreeView>
#include <QWidget>

#include <algorithm>

#include "timeline/timeline_widget.h"

namespace embedscope::ui {

namespace {
constexpr const char* kHeld = "embedscope_report_held";  // a pane held to its first rows: their px
constexpr const char* kPolicy = "embedscope_report_policy";  // its vertical size policy before

// How far the widgets below `area`'s top are drawn over its bottom, px (the most of them): a held
// pane is fixed, so a layout given less than its items need puts the ones under it over it
// (retest47 R12: an imported trace's Summary drew the "Sharding plan" caption over the critical
// path's last row, nothing running past the page). Cost: one step a widget under `view`.
int drawn_over(QWidget* area, QWidget* view) {
  const QRect a(area->mapTo(view, QPoint(0, 0)), area->size());
  int most = 0;
  for (QWidget* w : view->findChildren<QWidget*>()) {
    if (w == area || !w->isVisibleTo(view) || area->isAncestorOf(w) || w->isAncestorOf(area)) continue;
    const QRect r(w->mapTo(view, QPoint(0, 0)), w->size());
    if (r.top() > a.top() && r.intersects(a)) most = std::max(most, a.bottom() - r.top() + 1);
  }
  return most;
}

// The scroll areas of `view`: those under it and `view` itself when it is one (compare's Figures
// page is a scroll area: its own overflow went uncounted, and the report cut its two charts at
// 900 px: tester61a F8).
QList<QAbstractScrollArea*> scroll_areas(QWidget* view) {
  QList<QAbstractScrollArea*> out = view->findChildren<QAbstractScrollArea*>();
  if (auto* self = qobject_cast<QAbstractScrollArea*>(view)) out.prepend(self);
  return out;
}

// The vertical overflow of every visible scroll area under `view` not held, px (summed), plus
// what a held one still lacks of its held height (a window too short to give it).
int overflow(QWidget* view) {
  int total = 0;
  for (auto* area : scroll_areas(view)) {
    if (area != view && !area->isVisibleTo(view)) continue;
    if (const int held = area->property(kHeld).toInt(); held > 0) {
      // short of its held height, or running past its parent's bottom (a window too short)
      const QWidget* parent = area->parentWidget();
      const int past = parent ? area->geometry().bottom() - parent->rect().bottom() : 0;
      // both measure the one squeeze when the pane runs past the page: the larger of them
      total += std::max(0, held - area->viewport()->height()) + std::max({0, past, drawn_over(area, view)});
      continue;
    }
    if (auto* items = qobject_cast<QAbstractItemView*>(area)) items->setVerticalScrollMode(QAbstractItemView::ScrollPerPixel);
    total += std::max(0, area->verticalScrollBar()->maximum());
  }
  return total;
}

// The rows `items` draws, in order from the top: a tree's expanded rows, children included (tester44
// F5: a plan tree of 128 ranks x 27 rows counted 128 and was held to 64 ranks' 1,728 rows, a
// 27,460 px image), else the model's rows. Cost: one step a drawn row.
int drawn_rows(QAbstractItemView* items) {
  const auto* m = items->model();
  if (auto* tree = qobject_cast<QTreeView*>(items)) {
    int n = 0;
    for (QModelIndex i = m->index(0, 0, tree->rootIndex()); i.isValid(); i = tree->indexBelow(i)) ++n;
    return n;
  }
  return m->rowCount(items->rootIndex());
}

// The second drawn row of `items` (invalid for fewer than 2): a tree's row below its first.
QModelIndex second_row(QAbstractItemView* items) {
  const auto* m = items->model();
  if (auto* tree = qobject_cast<QTreeView*>(items)) return tree->indexBelow(m->index(0, 0, tree->rootIndex()));
  return m->index(1, 0, items->rootIndex());
}

// How many drawn rows of `items` are whole within the top `px` of its viewport (scrolled to its
// top): a tree's counted from its top (indexAt is invalid on a top row's branch mark), a table's
// from the row at the bottom edge.
int rows_within(QAbstractItemView* items, int px) {
  if (auto* tree = qobject_cast<QTreeView*>(items)) {
    int n = 0;
    for (QModelIndex i = items->model()->index(0, 0, tree->rootIndex()); i.isValid() && tree->visualRect(i).bottom() <= px - 1;
         i = tree->indexBelow(i))
      ++n;
    return n;
  }
  const QModelIndex last = items->indexAt(QPoint(1, px - 1));  // the row at the bottom edge
  return !last.isValid() ? drawn_rows(items) : last.row() + (items->visualRect(last).bottom() <= px - 1 ? 1 : 0);
}

// Holds every visible scroll area of more than `max_rows` rows to the height of its first
// `max_rows`: its frame and header (what is not viewport) plus the rows.
void hold_long_panes(QWidget* view, const int max_table_rows) {
  for (auto* area : view->findChildren<QAbstractScrollArea*>()) {
    // a pane may allow more rows of its own (the Summary's sharding plan: a rank's row and its
    // shards' rows, 108 for 4 ranks of 26 tables, were cut at 64: tester63a F14)
    int max_rows = std::max(max_table_rows, area->property("report_max_rows").toInt());
    if (!area->isVisibleTo(view) || qobject_cast<QHeaderView*>(area)) continue;  // a table's header goes with it
    const int chrome = area->height() - area->viewport()->height();
    int rows = 0, height = 0;
    if (auto* items = qobject_cast<QAbstractItemView*>(area); items && items->model()) {
      rows = drawn_rows(items);
      // the pitch of the rows as drawn (a table's section size, grid line included), else a size hint
      const auto* m = items->model();
      const int row = rows > 1 ? items->visualRect(second_row(items)).top() - items->visualRect(m->index(0, 0, items->rootIndex())).top() : 0;
      height = std::max(1, row > 0 ? row : items->sizeHintForRow(0)) * max_rows;
    } else if (auto* scroll = qobject_cast<QScrollArea*>(area)) {
      if (auto* tl = qobject_cast<TimelineWidget*>(scroll->widget())) {
        rows = static_cast<int>(tl->rows());
        max_rows *= 2;  // its rows are lanes: a rank's compute and comm at least
        height = tl->row_y(static_cast<size_t>(max_rows)) + 4;
      }
    }
    if (rows <= max_rows) continue;
    area->setProperty(kPolicy, static_cast<int>(area->sizePolicy().verticalPolicy()));  // setFixedHeight sets Fixed
    area->setFixedHeight(chrome + height);
    area->setProperty(kHeld, height);
  }
}

// Corrects each held pane's height so that its viewport is the height held (its frame, header
// and scroll bars change as the layout settles). True when one changed.
bool fit_held_panes(QWidget* view) {
  bool changed = false;
  for (auto* area : view->findChildren<QAbstractScrollArea*>()) {
    const int want = area->property(kHeld).toInt();
    if (want <= 0 || area->viewport()->height() == want) continue;
    area->setFixedHeight(area->height() + want - area->viewport()->height());
    changed = true;
  }
  return changed;
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

int columns_cut(QWidget* view) {
  int cut = 0;
  for (auto* table : view->findChildren<QTableView*>()) {
    if (!table->isVisibleTo(view) || (table->sizeAdjustPolicy() != QAbstractScrollArea::AdjustToContents &&
                                      !table->property("report_every_column").toBool()))
      continue;
    cut = std::max(cut, table->horizontalHeader()->length() - table->viewport()->width());
  }
  return std::max(0, cut);
}

int show_every_row(QWidget* window, QWidget* view, int max_height, int max_rows, int max_width) {
  settle(window);
  // a table that means to show all it holds (compare's 7 sessions: 14 columns) widens the image
  // rather than scroll its last columns out of it (tester39 F14)
  for (int round = 0, cut = columns_cut(view); cut > 0 && round < 8 && window->width() < max_width;
       ++round, cut = columns_cut(view)) {
    window->resize(std::min(max_width, window->width() + cut + 8), window->height());
    settle(window);
  }
  hold_long_panes(view, max_rows);
  settle(window);
  for (int round = 0; round < 4 && fit_held_panes(view); ++round) settle(window);
  int left = overflow(view);
  for (int round = 0; left > 0 && round < 40 && window->height() < max_height; ++round) {
    // layouts share the extra height between their panes: grow by all of it, then look again
    window->resize(window->width(), std::min(max_height, window->height() + left + 8));
    settle(window);
    for (int r = 0; r < 4 && fit_held_panes(view); ++r) settle(window);
    left = overflow(view);
  }
  return left;
}

std::vector<CutPane> cut_panes(QWidget* view) {
  std::vector<CutPane> out;
  for (auto* area : scroll_areas(view)) {
    if (area != view && !area->isVisibleTo(view)) continue;
    const int more = area->verticalScrollBar()->maximum();
    if (more <= 0) continue;
    CutPane p;
    p.shown_px = area->viewport()->height();
    p.total_px = p.shown_px + more;
    if (auto* items = qobject_cast<QAbstractItemView*>(area); items && items->model()) {
      p.name = table_name(items);
      p.total_rows = drawn_rows(items);
      p.shown_rows = rows_within(items, p.shown_px);
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
  return QString("Rows left out of this image (a pane of the report shows at most %1 rows, the sharding plan %2, the "
                 "timeline %3): %4. Every row: open the session in embedscope-ui (its pane scrolls), `embedscope stats "
                 "--top 0` (the critical path, collectives and ranks) or `embedscope export SESSION --format csv` "
                 "(ranks.csv, load.csv: every rank's and table's figures).")
      .arg(c.toString(kReportMaxRows), c.toString(kReportMaxPlanRows), c.toString(2 * kReportMaxRows), parts.join("; "));
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

void release_held_panes(QWidget* view) {
  for (auto* area : view->findChildren<QAbstractScrollArea*>())
    if (area->property(kHeld).toInt() > 0) {
      area->setMinimumHeight(0);
      area->setMaximumHeight(QWIDGETSIZE_MAX);
      QSizePolicy policy = area->sizePolicy();
      policy.setVerticalPolicy(static_cast<QSizePolicy::Policy>(area->property(kPolicy).toInt()));
      area->setSizePolicy(policy);
      area->setProperty(kHeld, QVariant());
      area->updateGeometry();
      for (QWidget* up = area->parentWidget(); up && up != view->window(); up = up->parentWidget()) up->updateGeometry();
    }
}

int wrap_wide_labels(QWidget* view, int max_width) {
  int changed = 0;
  for (QLabel* label : view->findChildren<QLabel*>())
    if (!label->wordWrap() && label->sizeHint().width() > max_width - 64) {
      label->setWordWrap(true);
      ++changed;
    }
  return changed;
}

QImage capped_width(const QImage& image, int max_width) {
  if (image.width() <= max_width) return image;
  return with_cut_note(image.copy(0, 0, max_width, image.height()),
                       QString("This page is cut at %1 px of its %2 px width (a report image is at most %1 px wide).")
                           .arg(QLocale(QLocale::English).toString(max_width), QLocale(QLocale::English).toString(image.width())));
}

}  // namespace embedscope::ui
