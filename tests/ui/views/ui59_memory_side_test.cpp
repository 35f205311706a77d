// The Memory page's right pane (the clicked block, the stacks, the allocator settings, the
// Replay panel) as a person reads it at the window sizes of a screenshot (1280 x 800) and a short
// window (1280 x 640): no two of its widgets overlap (the replay's out-of-memory messages were
// drawn over its table and past the pane's bottom), every word-wrapped label has the height its
// lines need, and at 1280 x 800 the replay's rows are inside the pane's viewport unscrolled. The
// compare Memory page (a scenario's) says a session's OOM in its legend entry, not over its lines.
#include <gtest/gtest.h>

#include <QApplication>
#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableWidget>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include <filesystem>

#include "jobs/analysis_job.h"
#include "shell/main_window.h"
#include "ui/support/ui_fixtures.h"
#include "views/memory_compare.h"
#include "views/memory_replay.h"
#include "views/memory_view.h"

using namespace embedscope;
using namespace embedscope::ui;
namespace fs = std::filesystem;

namespace {

QRect in(QWidget* w, QWidget* root) { return QRect(w->mapTo(root, QPoint(0, 0)), w->size()); }

// The visible widgets laid out in `parent` (its direct children).
std::vector<QWidget*> laid_out(QWidget* parent) {
  std::vector<QWidget*> out;
  for (QWidget* w : parent->findChildren<QWidget*>(Qt::FindDirectChildrenOnly))
    if (w->isVisibleTo(parent) && !w->isWindow()) out.push_back(w);
  return out;
}

// A widget's name in a failure message: its class and the start of its text.
std::string name_of(QWidget* w) {
  std::string n = w->metaObject()->className();
  if (auto* l = qobject_cast<QLabel*>(w)) n += " '" + l->text().left(24).toStdString() + "'";
  return n;
}

// "A / B; " for each pair of `widgets` whose rects (in `root`) intersect.
std::string overlapping(const std::vector<QWidget*>& widgets, QWidget* root) {
  std::string out;
  for (size_t i = 0; i < widgets.size(); ++i)
    for (size_t j = i + 1; j < widgets.size(); ++j)
      if (in(widgets[i], root).intersects(in(widgets[j], root))) out += name_of(widgets[i]) + " / " + name_of(widgets[j]) + "; ";
  return out;
}

// Word-wrapped labels under `root` shorter than their lines need at their width.
std::string cut_labels(QWidget* root) {
  std::string out;
  for (QLabel* l : root->findChildren<QLabel*>())
    if (l->isVisibleTo(root) && l->wordWrap() && l->height() < l->heightForWidth(l->width()))
      out += name_of(l) + " " + std::to_string(l->height()) + " < " + std::to_string(l->heightForWidth(l->width())) + "; ";
  return out;
}

// The window on `session`'s Memory page at `size`, its replay's rows in (as a screenshot takes it).
struct Shown {
  MainWindow w;
  MemoryView* view = nullptr;
  explicit Shown(const std::shared_ptr<const sessions::SessionReader>& session, QSize size) {
    EXPECT_EQ(w.open_session(QString::fromStdString(session->path())), "");
    w.resize(size);
    w.show();
    QApplication::processEvents();
    EXPECT_TRUE(wait_for_analyses(&w));
    view = w.findChild<MemoryView*>();
    if (view && view->isVisible()) EXPECT_EQ(finish_shown_memory_pages(&w), 1);
  }
};

}  // namespace

// fragmented_oom_p4 replayed: caching runs out (its message under the table), expandable completes.
// At 1280 x 800 and 1280 x 640 the pane's widgets and the Replay panel's keep apart, and every
// wrapped label has its lines' height (the pane scrolls instead).
TEST(Ui59MemorySide, NoWidgetOfTheRightPaneOverlapsAnother) {
  const auto session = fixtures::imported_snapshot("fragmented_oom_p4.pickle", "ui59_side");
  for (const QSize size : {QSize(1280, 800), QSize(1280, 640)}) {
    Shown s(session, size);
    ASSERT_NE(s.view, nullptr);
    ASSERT_TRUE(s.view->isVisible());
    MemoryReplayPanel* replay = s.view->replay();
    ASSERT_EQ(replay->table()->rowCount(), 2);
    ASSERT_TRUE(replay->verdicts()->isVisible());  // caching's out-of-memory message
    QWidget* content = s.view->side_scroll()->widget();
    ASSERT_NE(content, nullptr);
    EXPECT_EQ(overlapping(laid_out(content), content), "") << size.height();
    EXPECT_EQ(overlapping(laid_out(replay), content), "") << size.height();
    EXPECT_EQ(cut_labels(content), "") << size.height();
    // nothing runs past the content's bottom (what the pane scrolls to)
    for (QWidget* w : laid_out(replay))
      EXPECT_LE(in(w, content).bottom(), content->height() - 1) << name_of(w) << " at " << size.height();
    EXPECT_LE(in(replay, content).bottom(), content->height() - 1) << size.height();
    // the table at its rows' height: header and both rows whole, nothing below them in it
    QTableWidget* t = replay->table();
    EXPECT_GE(t->viewport()->height(), t->rowViewportPosition(1) + t->rowHeight(1)) << size.height();
    EXPECT_EQ(t->verticalScrollBar()->maximum(), 0) << size.height();
  }
}

// At 1280 x 800, the screenshot's size, the replay's rows are within the pane's viewport as it opens
// (unscrolled); the out-of-memory message may be below them.
TEST(Ui59MemorySide, ReplayRowsAreInTheViewportAt1280x800) {
  Shown s(fixtures::imported_snapshot("fragmented_oom_p4.pickle", "ui59_side_rows"), QSize(1280, 800));
  ASSERT_NE(s.view, nullptr);
  QScrollArea* pane = s.view->side_scroll();
  EXPECT_EQ(pane->verticalScrollBar()->value(), 0);
  QTableWidget* t = s.view->replay()->table();
  ASSERT_EQ(t->rowCount(), 2);
  const QRect viewport(QPoint(0, 0), pane->viewport()->size());
  for (int row = 0; row < 2; ++row) {
    const QRect r(t->viewport()->mapTo(pane->viewport(), QPoint(0, t->rowViewportPosition(row))),
                  QSize(t->viewport()->width(), t->rowHeight(row)));
    EXPECT_TRUE(viewport.contains(r)) << "row " << row << " at y " << r.top() << ".." << r.bottom() << ", viewport "
                                      << viewport.height() << " px";
  }
}

// The pane's content height: the viewport's where the layout needs less, else what its wrapped
// labels need at the width (a 40-line label at 200 px is taller than a 100 px viewport).
TEST(Ui59MemorySide, ContentHeightFollowsTheWrappedLines) {
  QWidget content;
  auto* l = new QVBoxLayout(&content);
  auto* label = new QLabel(QString("word ").repeated(400), &content);
  label->setWordWrap(true);
  l->addWidget(label);
  const int need = l->totalMinimumHeightForWidth(200);
  ASSERT_GT(need, 100);
  EXPECT_EQ(side_content_height(&content, 200, 100), need);
  EXPECT_EQ(side_content_height(&content, 200, need + 50), need + 50);
  EXPECT_GE(need, label->heightForWidth(200));
}

// A session's OOM is said in its legend entry, the warm-up named as such ("step -1" meant nothing),
// and no text is drawn in the chart over the lines.
TEST(Ui59MemorySide, CompareOomIsInTheLegendAndNamesTheWarmup) {
  EXPECT_EQ(oom_legend_entry("caching", {}).toStdString(), "caching");
  EXPECT_EQ(oom_legend_entry("caching", {-1}).toStdString(), "caching: OOM in the warm-up (before measured step 0)");
  EXPECT_EQ(oom_legend_entry("caching", {4, 4}).toStdString(), "caching: OOM in step 4");
  const fs::path path = fixtures::scratch("ui59_oom_warmup.db");
  fs::remove(path);
  {
    sessions::SessionWriter w(path.string());
    for (int64_t step = -1; step <= 1; ++step)
      w.add_memory({step, 0, 4 << 20, 8 << 20, 4 << 20, 8 << 20, 4 << 20, 0, 1, 0.25, 0.1});
    const sessions::MemoryBlockRecord block{0, 8 << 20, 0, 4 << 20, 4 << 20, true, "weights"};
    w.add_snapshot({0, 0, -1, 10, "oom", {block}});
    w.close("oom");
  }
  MemoryCompare mc({{"caching", std::make_shared<const sessions::SessionReader>(path.string())}});
  mc.show(0, 1);
  QCustomPlot* p = mc.plot();
  for (int i = 0; i < p->itemCount(); ++i) EXPECT_EQ(qobject_cast<QCPItemText*>(p->item(i)), nullptr);
  QStringList names;
  for (int i = 0; i < p->legend->itemCount(); ++i)
    if (auto* item = qobject_cast<QCPPlottableLegendItem*>(p->legend->item(i))) names << item->plottable()->name();
  EXPECT_EQ(names, QStringList{"caching: OOM in the warm-up (before measured step 0)"});
}
