// The Memory page as a person reads its screenshot (tester59 F8): the screenshot holds the
// replay's rows (it waits for the replay as --report does), the timelines' byte tick labels do not
// overlap, the fragmentation chart's tick labels keep apart and its axis titles fit their axes,
// and the replay table's headers are whole before any row.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QFontMetrics>
#include <QHeaderView>
#include <QTableWidget>

#include <qcustomplot.h>

#include "charts/active_timeline.h"
#include "charts/plot_axes.h"
#include "charts/segment_timeline_chart.h"
#include "jobs/analysis_job.h"
#include "shell/main_window.h"
#include "ui/support/ui_fixtures.h"
#include "views/memory_replay.h"
#include "views/memory_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {

// Pairs of rects in `rects` that intersect (labels drawn over each other), as "i/j".
std::string overlapping(const std::vector<QRectF>& rects) {
  std::string out;
  for (size_t i = 0; i < rects.size(); ++i)
    for (size_t j = i + 1; j < rects.size(); ++j)
      if (rects[i].intersects(rects[j])) out += std::to_string(i) + "/" + std::to_string(j) + " ";
  return out;
}

std::vector<QRectF> label_rects(const EntryChart& chart) {
  std::vector<QRectF> out;
  for (const auto& t : chart.y_ticks()) out.push_back(t.label);
  return out;
}

// Lays `plot` out at its size until keep_axes_readable has nothing more to change.
void settle(QCustomPlot* plot) {
  for (int i = 0; i < 3; ++i) {
    plot->replot(QCustomPlot::rpImmediateRefresh);
    QApplication::processEvents();
  }
}

}  // namespace

// fragmented_oom_p4: the active timeline reaches 40 MiB (make_fixtures.py). At the window sizes of
// a screenshot (1280 x 800) and a short window (1280 x 640) the byte labels of both timelines keep
// apart, and there are at least two of them (0 and one above).
TEST(Ui59MemoryAxes, TimelineByteLabelsDoNotOverlap) {
  MemoryView view(fixtures::imported_snapshot("fragmented_oom_p4.pickle", "ui59_axes"));
  for (const QSize size : {QSize(1280, 800), QSize(1280, 640)}) {
    view.resize(size);
    view.show();
    ASSERT_TRUE(wait_for_analyses(&view));
    QApplication::processEvents();
    for (const EntryChart* chart : {static_cast<const EntryChart*>(view.timeline()),
                                    static_cast<const EntryChart*>(view.segment_timeline())}) {
      const auto ticks = chart->y_ticks();
      ASSERT_GE(ticks.size(), 2u) << size.height();
      EXPECT_EQ(ticks.front().bytes, 0);
      EXPECT_EQ(overlapping(label_rects(*chart)), "") << size.height() << ": plot " << chart->plot_rect().height()
                                                      << " px high, " << ticks.size() << " labels";
      EXPECT_GE(ticks.front().label.bottom(), ticks.back().label.bottom());  // drawn bottom up
    }
  }
}

// The fragmentation chart at the screenshot's size: its tick labels keep apart on both value axes,
// and each title fits its axis ("fragmentation %" read "gmentation %" on a 60 px axis).
TEST(Ui59MemoryAxes, FragmentationChartTicksAndTitlesFit) {
  MemoryView view(fixtures::imported_snapshot("fragmented_oom_p4.pickle", "ui59_frag"));
  view.resize(1280, 800);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  QCustomPlot* p = view.fragmentation_plot();
  settle(p);
  for (QCPAxis* axis : {p->yAxis, p->yAxis2}) {
    const auto rects = tick_label_rects(axis);
    EXPECT_GE(rects.size(), 2u);
    EXPECT_EQ(overlapping(rects), "") << axis->axisRect()->height() << " px axis, " << rects.size() << " labels";
    EXPECT_TRUE(axis_label_fits(axis)) << axis->label().toStdString() << " on a " << axis->axisRect()->height() << " px axis";
  }
  EXPECT_TRUE(fragmentation_label_choices().contains(p->yAxis2->label())) << p->yAxis2->label().toStdString();
}

// The clipped scale's title on a report's tall chart and a short one: the fullest choice that fits.
TEST(Ui59MemoryAxes, ClippedScaleTitleIsTheFullestThatFits) {
  const QStringList choices = clipped_scale_label_choices(1);
  ASSERT_EQ(choices.size(), 4);
  EXPECT_EQ(choices[0], "MiB (scaled to entries 1 on: entry 0 clipped)");
  EXPECT_EQ(choices[1], "MiB (scaled to entries 1 on:\nentry 0 clipped)");
  EXPECT_EQ(choices[2], "MiB (entry 0 clipped)");
  EXPECT_EQ(clipped_scale_label_choices(9)[2], "MiB (entries 0-8 clipped)");
  QCustomPlot plot;
  plot.yAxis->setRange(0, 22);
  set_label_choices(plot.yAxis, choices);
  keep_axes_readable(&plot, 5);
  const QFontMetrics fm(plot.yAxis->labelFont());
  for (const int height : {600, 260, 160, 90}) {
    plot.resize(500, height);
    plot.show();
    settle(&plot);
    const int length = plot.yAxis->axisRect()->height();
    const int chosen = static_cast<int>(choices.indexOf(plot.yAxis->label()));
    ASSERT_GE(chosen, 0) << height;
    EXPECT_TRUE(axis_label_fits(plot.yAxis)) << height << ": " << plot.yAxis->label().toStdString();
    if (chosen > 0) {  // the fuller one before it does not fit
      int wider = 0;
      for (const QString& line : choices[chosen - 1].split('\n')) wider = std::max(wider, fm.horizontalAdvance(line));
      EXPECT_GT(wider, length) << height;
    }
    EXPECT_EQ(overlapping(tick_label_rects(plot.yAxis)), "") << height;
  }
  plot.resize(500, 600);
  settle(&plot);
  EXPECT_EQ(plot.yAxis->label(), choices[0]);  // tall: the whole sentence on one line
}

// The replay table's headers are whole before any row ("frag. at peak reserved" read "g. at peak reserv").
TEST(Ui59MemoryAxes, ReplayHeadersAreWhole) {
  MemoryReplayPanel panel;
  panel.resize(420, 300);
  panel.show();
  QApplication::processEvents();
  QTableWidget* t = panel.table();
  QHeaderView* h = t->horizontalHeader();
  for (int c = 0; c < t->columnCount(); ++c) {
    const QString text = t->horizontalHeaderItem(c)->text();
    EXPECT_GE(h->sectionSize(c), QFontMetrics(h->font()).horizontalAdvance(text)) << text.toStdString();
  }
}

// `embedscope-ui SNAPSHOT.db --screenshot`: the window opens on the Memory page and the image waits
// for the replay: caching runs out at entry 5 as the trace did, expandable completes reserving
// 60 MiB (make_fixtures.py's device of 60 MiB; the rows TimelineFragmentationStacksAndReplay checks).
TEST(Ui59MemoryAxes, ScreenshotHoldsTheReplayRows) {
  const auto session = fixtures::imported_snapshot("fragmented_oom_p4.pickle", "ui59_shot");
  MainWindow w;
  ASSERT_EQ(w.open_session(QString::fromStdString(session->path())), "");
  w.resize(1280, 800);
  w.show();
  QApplication::processEvents();
  ASSERT_TRUE(wait_for_analyses(&w));
  auto* view = w.findChild<MemoryView*>();
  ASSERT_NE(view, nullptr);
  ASSERT_TRUE(view->isVisible());  // the Memory page is the one shown
  EXPECT_EQ(view->replay()->table()->rowCount(), 0);  // nothing replayed until asked
  EXPECT_EQ(finish_shown_memory_pages(&w), 1);
  QTableWidget* t = view->replay()->table();
  ASSERT_EQ(t->rowCount(), 2);
  EXPECT_EQ(t->item(0, 0)->text(), "caching");
  EXPECT_EQ(t->item(0, 3)->text(), "OOM at entry 5");
  EXPECT_EQ(t->item(1, 0)->text(), "expandable");
  EXPECT_EQ(t->item(1, 1)->text(), "60.0 MiB");
  EXPECT_EQ(t->item(1, 3)->text(), "ok");
}
