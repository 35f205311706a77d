// tester46 F15: the report cut the Memory page's Replay result column at the image edge ("OOM at
// c..."), the segment timeline's title ("...; click: th") and the stacks table's header; the
// replay's OOM message is now said under the table, the right pane widened to its tables for the
// report, and the entry charts' titles wrap.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QLabel>
#include <QScrollBar>
#include <QSplitter>
#include <QTableWidget>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "charts/segment_timeline_chart.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "views/memory_replay.h"
#include "views/memory_view.h"

namespace {

std::string rep47_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("es_rep47_" + std::to_string(getpid()) + "_" + name + ".db")).string();
}

}  // namespace

// F15: fragmented_oom_p4 replayed as the report does at 1600 px: the caching replay runs out of
// memory; its whole message is under the table, and the table shows every column.
TEST(Rep47MemoryReport, TheReplaysVerdictIsWholeOnTheReport) {
  const std::string path = rep47_path("foom");
  std::filesystem::remove(path);
  {
    embedscope::sessions::SessionWriter w(path, true);
    embedscope::sessions::torch_snapshot::import_torch_memory_snapshot(
        std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/fragmented_oom_p4.pickle", w);
    w.close("complete");
  }
  embedscope::ui::MemoryView view(std::make_shared<const embedscope::sessions::SessionReader>(path));
  view.resize(1600, 900);
  view.show();
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  view.show_for_report();
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  QApplication::processEvents();
  auto* panel = view.replay();
  ASSERT_EQ(panel->results().size(), 2u);
  const auto& caching = panel->results()[0];
  ASSERT_TRUE(caching.oom);
  EXPECT_TRUE(panel->verdicts()->isVisibleTo(&view));
  EXPECT_EQ(panel->verdicts()->text().toStdString(), caching.label + ": " + caching.oom_message);
  EXPECT_FALSE(panel->results()[1].oom);  // expandable: ok, no line
  QTableWidget* t = panel->table();
  EXPECT_EQ(t->horizontalScrollBar()->maximum(), 0) << "the result column is cut";
  QTableWidget* s = view.stacks_table();
  EXPECT_EQ(s->horizontalScrollBar()->maximum(), 0) << "the stacks table is cut";
  if (const char* dir = std::getenv("EMBEDSCOPE_REP47_SHOTS")) view.grab().save(QString("%1/rep47_memory.png").arg(dir));
  std::filesystem::remove(path);
}

// F15: a title wider than the chart wraps onto a second line above the plot instead of being cut.
TEST(Rep47MemoryReport, AnEntryChartsLongTitleWraps) {
  embedscope::ui::SegmentTimelineChart chart;
  chart.resize(300, 200);
  const QRectF title = chart.title_rect();
  const int line = chart.fontMetrics().height();
  EXPECT_GE(title.height(), 2 * line) << "the ~130-character title on 216 px takes several lines";
  EXPECT_DOUBLE_EQ(chart.plot_rect().top(), title.bottom());
  chart.resize(3000, 200);
  EXPECT_DOUBLE_EQ(chart.title_rect().height(), 20.0);  // one line fits: the 20 px strip
}
