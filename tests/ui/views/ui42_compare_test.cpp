// tester42 F26/F3/F23: comparisons of many sessions stay readable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QLabel>

#include <cmath>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include <qcustomplot.h>

#include "charts/block_map.h"
#include "charts/colors.h"
#include "core/equal_series.h"
#include "embedscope/sessions/store/session.h"
#include "ui/support/ui_fixtures.h"
#include "jobs/analysis_job.h"
#include "ui/support/tradeoff_sessions.h"
#include "views/memory_compare.h"
#include "views/tradeoffs_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {

// A session of rank 0 with steps -1..2: allocated `mib` MiB, reserved 2 x `mib`, and one
// snapshot at step -1 (the warm-up's layout, unchanged after).
std::string ui42_memory_session(const std::string& name, int64_t mib) {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  for (int64_t step = -1; step <= 2; ++step)
    w.add_memory({step, 0, mib << 20, (2 * mib) << 20, mib << 20, (2 * mib) << 20, mib << 20, 0, 1, 0.25, 0.1});
  const sessions::MemoryBlockRecord block{0, (2 * mib) << 20, 0, mib << 20, mib << 20, true, "weights"};
  w.add_snapshot({0, 0, -1, 10, "step", {block}});
  w.close("complete");
  return path.string();
}

double ui42_color_distance(const QColor& a, const QColor& b) {
  const int dr = a.red() - b.red(), dg = a.green() - b.green(), db = a.blue() - b.blue();
  return std::sqrt(static_cast<double>(dr * dr + dg * dg + db * db));
}

}  // namespace

// 12 sessions, 12 colours at least 60 apart in RGB (8 before: A and I were both blue); past 12
// the marker shifts and the dash changes, so (colour, marker) never repeats in 144 sessions.
TEST(Ui42Palette, TwelveDistinctColoursThenMarkersAndDashes) {
  for (size_t i = 0; i < kSessionColors; ++i)
    for (size_t j = 0; j < i; ++j)
      EXPECT_GT(ui42_color_distance(session_color(i), session_color(j)), 60.0) << i << " vs " << j;
  EXPECT_GE(kSessionColors, 12u);
  std::set<std::pair<QRgb, int>> seen;
  for (size_t i = 0; i < 144; ++i) EXPECT_TRUE(seen.insert({session_color(i).rgb(), session_marker(i)}).second) << i;
  EXPECT_EQ(session_dash(0), Qt::SolidLine);
  EXPECT_EQ(session_dash(11), Qt::SolidLine);
  EXPECT_EQ(session_dash(12), Qt::DashLine);
  EXPECT_EQ(session_color(12), session_color(0));
}

TEST(Ui42EqualSeries, FirstEqualEarlierSeries) {
  EXPECT_EQ(same_as_earlier({{1, 2}, {3}, {1, 2}, {3}, {1, 2}, {}}), (std::vector<int>{-1, -1, 0, 1, 0, -1}));
  EXPECT_EQ(same_as_earlier({}), std::vector<int>{});
}

// 250 px holds 3 labels of 80 px; 6 at most; one at least.
TEST(Ui42BlockMap, ByteScaleTicksFitTheMapWidth) {
  EXPECT_EQ(byte_ticks_for_width(250), 3);
  EXPECT_EQ(byte_ticks_for_width(1000), 6);
  EXPECT_EQ(byte_ticks_for_width(40), 1);
  // 86 MiB on 3 intervals: 32 MiB apart (0, 32, 64 MiB), not 16 MiB (6 labels in 250 px)
  EXPECT_EQ(byte_tick_step(int64_t{86} << 20, byte_ticks_for_width(250)), int64_t{32} << 20);
  EXPECT_EQ(MemoryCompare::map_columns(2), 2);
  EXPECT_EQ(MemoryCompare::map_columns(11), 6);
  EXPECT_EQ(MemoryCompare::map_columns(13), 5);
}

// 11 sessions: every line at one width (before, session i's was 2 x (11 - i) px), one legend entry
// a session, and B, equal to A, says "B = A"; C is its own.
TEST(Ui42MemoryCompare, ElevenSessionsOneWidthAndEqualOnesNamed) {
  std::vector<LabelledSession> sessions;
  const std::string letters = "ABCDEFGHIJK";
  for (size_t i = 0; i < letters.size(); ++i) {
    const int64_t mib = i == 1 ? 8 : 8 + static_cast<int64_t>(i);  // B = A
    sessions.push_back({QString(letters[i]), fixtures::open_reader(ui42_memory_session("es_ui42_mc" + std::to_string(i), mib))});
  }
  MemoryCompare mc(sessions);
  mc.resize(1600, 900);
  mc.show(0, 2);
  QCustomPlot* plot = mc.plot();
  ASSERT_EQ(plot->graphCount(), 33);
  // the baseline's three lines wide and pale under the rest (tester60a F3), every other one width
  for (int g = 0; g < plot->graphCount(); ++g)
    EXPECT_DOUBLE_EQ(plot->graph(g)->pen().widthF(), g < 3 ? MemoryCompare::kBaselineWidth : MemoryCompare::kLineWidth) << g;
  ASSERT_EQ(plot->legend->itemCount(), 11);
  EXPECT_EQ(plot->graph(0)->name().toStdString(), "A");
  EXPECT_EQ(plot->graph(3)->name().toStdString(), "B = A");
  EXPECT_EQ(plot->graph(6)->name().toStdString(), "C");
  EXPECT_EQ(mc.same_as_earlier(), (std::vector<int>{-1, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_NE(plot->graph(0)->pen().color(), plot->graph(24)->pen().color());  // A and I
}

TEST(Ui42CoincidentPoints, WithinTolerancesNameTheFirstEarlierPoint) {
  EXPECT_EQ(coincident_with_earlier({1, 5, 1.001}, {2, 2, 2}, 0.01, 0.01), (std::vector<int>{-1, -1, 0}));
  EXPECT_EQ(coincident_with_earlier({1, 1, 1}, {2, 2.5, 2}, 0.01, 0.01), (std::vector<int>{-1, -1, 0}));
  EXPECT_THROW(coincident_with_earlier({1}, {}, 0, 0), std::invalid_argument);
}

// tester42 F3: two runs with the same bytes and loss (fp16 rows and fp16 rows with stochastic
// rounding): the later point's label says "= fp16 rows"; each run has its own marker.
TEST(Ui42TradeoffsView, CoincidentPointsAreNamed) {
  const std::vector<std::string> paths = tradeoff_fixtures::tradeoff_study();
  std::vector<LabelledSession> sessions = {
      {"fp16 rows", std::make_shared<const sessions::SessionReader>(paths[0])},
      {"fp32", std::make_shared<const sessions::SessionReader>(paths[1])},
      {"fp16 SR", std::make_shared<const sessions::SessionReader>(paths[0])}};
  TradeoffsView view(sessions);
  view.resize(1200, 800);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  QApplication::processEvents();
  EXPECT_EQ(view.coincident(), (std::vector<int>{-1, -1, 0}));
  QStringList texts;
  for (int i = 0; i < view.plot()->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(view.plot()->item(i))) texts << t->text();
  EXPECT_TRUE(texts.contains("fp16 SR = fp16 rows  10.00 ms")) << texts.join(" | ").toStdString();
  EXPECT_TRUE(texts.contains("fp16 rows  10.00 ms")) << texts.join(" | ").toStdString();
  std::set<int> shapes;
  for (int g = 0; g < view.plot()->graphCount(); ++g) shapes.insert(view.plot()->graph(g)->scatterStyle().shape());
  EXPECT_EQ(shapes.size(), 3u);
}

// tester42 F23: "unchanged since the snapshot of step -1" -> the warm-up, named as such.
TEST(Ui42MemoryCompare, WarmupSnapshotIsNamedAsTheWarmup) {
  sessions::MemorySnapshot warm{1, 0, -1, 0, "step", {}}, at3{2, 0, 3, 0, "step", {}}, oom{3, 0, 4, 0, "oom", {}};
  EXPECT_EQ(snapshot_when(warm, 19).toStdString(), "the layout of the warm-up (before measured step 0), unchanged up to step 19");
  EXPECT_EQ(snapshot_when(at3, 19).toStdString(), "the layout of step 3, unchanged up to step 19");
  EXPECT_EQ(snapshot_when(at3, 3).toStdString(), "snapshot of step 3");
  EXPECT_EQ(snapshot_when(oom, 4).toStdString(), "the layout at its OOM in step 4");
  MemoryCompare mc({{"A", fixtures::open_reader(ui42_memory_session("es_ui42_warm", 4))}});
  mc.show(0, 2);
  QString text;
  for (auto* l : mc.findChildren<QLabel*>()) text += l->text() + "\n";
  EXPECT_TRUE(text.contains("rank 0, the layout of the warm-up (before measured step 0), unchanged up to step 2: 1 segment,"))
      << text.toStdString();
  EXPECT_FALSE(text.contains("step -1")) << text.toStdString();
  EXPECT_EQ(mc.plot()->xAxis->label().toStdString(), "step (-1: the warm-up, before measured step 0)");
}
