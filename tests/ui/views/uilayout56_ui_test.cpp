// uilayout56 (tester56 F4, F8, F1, F2, F5, F10): the workbench at the sizes a user drove it
// (1280x800, 1000x650): the Memory and Load pages scroll inside their tab instead of raising the
// window's minimum size (the Memory page held it at 1557x946, the Load page at 1280x946); the
// block map is the Memory page's largest pane; the Load page's parts do not overlap and its
// heatmap titles wrap; the step box fits the step on Enter / arrows and names the step at the
// view's centre; keys 0..9 fit steps 0..9; the time axis keeps labels apart and tells deep-zoom
// ticks apart. Set UILAYOUT56_SHOTS=DIR to write the windows as PNGs there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QComboBox>
#include <QCoreApplication>
#include <QFontMetrics>
#include <QLabel>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTest>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include <qcustomplot.h>

#include "charts/block_map.h"
#include "charts/active_timeline.h"
#include "core/timeline_math.h"
#include "jobs/analysis_job.h"
#include "shell/main_window.h"
#include "support/cli_run.h"
#include "timeline/step_box.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"
#include "ui/support/ui_fixtures.h"
#include "views/load_view.h"
#include "views/memory_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {

std::filesystem::path uilayout56_dir() {
  static const auto d = [] {
    auto p = std::filesystem::temp_directory_path() / ("es_uilayout56_" + std::to_string(getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

// `embedscope run --preset tiny --steps 20` (the tester's tiny.db: 763 allocator events on rank 0), once.
std::string uilayout56_tiny() {
  static const std::string db = [] {
    const std::string path = (uilayout56_dir() / "tiny.db").string();
    const auto r = test_support::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --steps 20 -o " + path, uilayout56_dir());
    EXPECT_EQ(r.code, 0) << r.err;
    return path;
  }();
  return db;
}

void uilayout56_settle() {
  for (int i = 0; i < 5; ++i) QCoreApplication::processEvents();
}

void uilayout56_shot(QWidget* w, const char* name) {
  if (const char* dir = std::getenv("UILAYOUT56_SHOTS"))
    w->grab().save(QString("%1/%2.png").arg(dir, name));
}

// A window at 1280x800 with tiny.db open on page `tab` (2 Load, 3 Memory), its view built and analysed.
template <class View>
View* uilayout56_open(MainWindow& w, int tab) {
  w.resize(1280, 800);
  w.show();
  EXPECT_EQ(w.open_session(QString::fromStdString(uilayout56_tiny()), true), QString());
  auto* page = qobject_cast<QTabWidget*>(w.tabs()->currentWidget());
  if (!page) return nullptr;
  page->setCurrentIndex(tab);
  auto* view = w.findChild<View*>();
  if (view) {
    EXPECT_TRUE(wait_for_analyses(view));
  }
  uilayout56_settle();
  return view;
}

// `w`'s geometry in `root`'s coordinates.
QRect uilayout56_in(const QWidget* w, const QWidget* root) { return QRect(w->mapTo(root, QPoint(0, 0)), w->size()); }

}  // namespace

// F4: the Memory page leaves the window at the size it was given (1280x800, then 1000x650) and its
// minimum at most 1280x720; the block map's viewport is at least kMemoryMapMinPx (160) high at
// both sizes, and at 1280x800 it is the tallest pane of the page and shown without scrolling.
TEST(UiLayout56, TheMemoryPageKeepsTheWindowSizeAndTheMapIsItsMainArea) {
  MainWindow w;
  MemoryView* view = uilayout56_open<MemoryView>(w, 3);
  ASSERT_NE(view, nullptr);
  ASSERT_GT(view->data().history->size(), 700);  // the allocator history arrived (763 entries)
  uilayout56_shot(&w, "memory_1280x800");
  EXPECT_EQ(w.size(), QSize(1280, 800));  // it grew to 1557x946 before
  EXPECT_LE(w.minimumSizeHint().width(), 1280);
  EXPECT_LE(w.minimumSizeHint().height(), 720);
  EXPECT_LE(w.minimumSize().width(), 1280);
  EXPECT_LE(w.minimumSize().height(), 720);
  // the map's viewport at least kMemoryMapMinPx; its pane (scrubber + map) the tallest of the
  // charts splitter, at least 30 % of it (tiny's one-segment map needs little more than its
  // minimum; a map of many rows gets 45 %); the charts at least their minimum
  const int map_h = view->map_scroll()->viewport()->height();
  EXPECT_GE(map_h, kMemoryMapMinPx);
  auto* split = view->findChild<QSplitter*>("memory_charts_split");
  ASSERT_NE(split, nullptr);
  ASSERT_EQ(split->count(), 4);
  EXPECT_GE(split->widget(3)->height(), split->height() * 30 / 100);
  for (int i = 0; i < 3; ++i) EXPECT_GT(split->widget(3)->height(), split->widget(i)->height()) << i;
  EXPECT_GE(view->timeline()->height(), kMemoryChartMinPx);
  // the page needs no scrolling at 1280x800: the map's bottom is inside the page's viewport
  auto* page = view->findChild<QScrollArea*>("memory_page_scroll");
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(page->verticalScrollBar()->maximum(), 0);
  EXPECT_LE(uilayout56_in(view->map_scroll(), page->viewport()).bottom(), page->viewport()->height());

  w.resize(1000, 650);
  uilayout56_settle();
  uilayout56_shot(&w, "memory_1000x650");
  EXPECT_EQ(w.size(), QSize(1000, 650));
  EXPECT_GE(view->map_scroll()->viewport()->height(), kMemoryMapMinPx);  // the page scrolls to it instead
}

// The shares: a large map takes 45 % of the height, a small one what it needs; the charts the rest.
TEST(UiLayout56, MemorySplitSizes) {
  EXPECT_EQ(memory_split_sizes(1000, 250, 900), (std::array<int, 4>{192, 148, 210, 450}));
  EXPECT_EQ(memory_split_sizes(1000, 250, 200), (std::array<int, 4>{262, 202, 286, 250}));  // 750: 262 + 202 + 286
  EXPECT_EQ(memory_split_sizes(1000, 100, 200), (std::array<int, 4>{280, 216, 304, 200}));
  EXPECT_EQ(memory_split_sizes(400, 300, 900)[3], 300);  // its minimum over the 45 %
  for (int h : {400, 613, 1000})
    for (int wants : {0, 150, 5000}) {
      const auto s = memory_split_sizes(h, 200, wants);
      EXPECT_EQ(s[0] + s[1] + s[2] + s[3], h);
      EXPECT_LE(s[3], std::max(200, h * 45 / 100));
      EXPECT_GE(s[3], 200);
    }
}

// F8: at 1280x800 the Load page's parts do not overlap (the table box was under the imbalance
// chart's axis labels), the table box is full height, the window keeps its size, and each heatmap
// title line fits its plot's width.
TEST(UiLayout56, TheLoadPagePartsDoNotOverlapAt1280x800) {
  MainWindow w;
  LoadView* view = uilayout56_open<LoadView>(w, 2);
  ASSERT_NE(view, nullptr);
  ASSERT_TRUE(wait_for_analyses(view));
  uilayout56_settle();
  uilayout56_shot(&w, "load_1280x800");
  EXPECT_EQ(w.size(), QSize(1280, 800));  // it grew to 1280x946 before
  EXPECT_LE(w.minimumSizeHint().height(), 720);
  auto* page = view->findChild<QScrollArea*>("load_page_scroll");
  ASSERT_NE(page, nullptr);
  QWidget* content = page->widget();
  QComboBox* table_box = nullptr;
  QLabel* table_label = nullptr;
  for (auto* b : view->findChildren<QComboBox*>())
    if (b->count() > 0 && b->itemText(0) == "t_small") table_box = b;  // tiny's first table
  for (auto* l : view->findChildren<QLabel*>())
    if (l->text() == "ids over the rows of table:") table_label = l;
  ASSERT_NE(table_box, nullptr);
  ASSERT_NE(table_label, nullptr);
  EXPECT_TRUE(table_box->isVisible());
  EXPECT_GE(table_box->height(), table_box->minimumSizeHint().height());
  const std::vector<std::pair<const char*, QWidget*>> parts = {
      {"shard map", view->shard_map()}, {"step map", view->step_map()},   {"imbalance", view->imbalance_plot()},
      {"rank bars", view->rank_plot()}, {"table label", table_label},     {"table box", table_box},
      {"row plot", view->row_plot()},   {"input note", view->input_note()}, {"input table", view->input_table()}};
  for (size_t i = 0; i < parts.size(); ++i)
    for (size_t j = i + 1; j < parts.size(); ++j)
      EXPECT_FALSE(uilayout56_in(parts[i].second, content).intersects(uilayout56_in(parts[j].second, content)))
          << parts[i].first << " overlaps " << parts[j].first;
  // the box can be reached and chosen: scrolled to, it is inside the page's viewport
  page->ensureWidgetVisible(table_box);
  uilayout56_settle();
  EXPECT_TRUE(page->viewport()->rect().contains(uilayout56_in(table_box, page->viewport())));
  // each title line within the cells' column it is centred over (the colour scale beside them)
  for (QCustomPlot* plot : {view->shard_map(), view->step_map()}) {
    plot->replot();
    auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0));
    auto* cells = qobject_cast<QCPAxisRect*>(plot->plotLayout()->element(1, 0));
    ASSERT_NE(title, nullptr);
    ASSERT_NE(cells, nullptr);
    const QFontMetrics fm(title->font());
    for (const QString& line : title->text().split('\n'))
      EXPECT_LE(fm.horizontalAdvance(line), cells->outerRect().width()) << line.toStdString();
  }
  // the shard map's ~640 px title is on two lines (it was cut at both ends)
  EXPECT_GT(qobject_cast<QCPTextElement*>(view->shard_map()->plotLayout()->element(0, 0))->text().count('\n'), 0);
}

// wrap_title: breaks at spaces only, each line within the width, the words kept in order.
TEST(UiLayout56, WrapTitleKeepsEveryWordWithinTheWidth) {
  const QFont font("sans", 10, QFont::Bold);
  const QFontMetrics fm(font);
  const QString title = "per rank x table shard (measured steps; colour from 0; grey: no such shard on the rank)";
  const int width = fm.horizontalAdvance("per rank x table shard (measured");
  const QString wrapped = wrap_title(title, fm, width);
  EXPECT_EQ(QString(wrapped).replace('\n', ' '), title);
  EXPECT_GE(wrapped.count('\n'), 2);
  for (const QString& line : wrapped.split('\n')) EXPECT_LE(fm.horizontalAdvance(line), width) << line.toStdString();
  EXPECT_EQ(wrap_title(title, fm, 10000), title);
  EXPECT_EQ(wrap_title("one\ntwo", fm, 10000), "one\ntwo");  // given lines stay
}

// F1, F2 on busy_session (steps 0 [0, 500) us and 1 [500, 1000) us): Enter in the step box fits
// the typed step, Up / Down the next / previous; after a pan the box names the step at the
// centre; keys 0 and 1 fit steps 0 and 1 (keys 1..9 were steps 0..8).
TEST(UiLayout56, TheStepBoxGoesToItsStepAndFollowsTheView) {
  TimelineView view(std::make_shared<const sessions::SessionReader>(fixtures::busy_session()));
  view.resize(1280, 800);
  view.show();
  uilayout56_settle();
  TimelineWidget* tl = view.timeline();
  StepBox* box = view.step_box();
  const ViewRange s0{0, 500'000}, s1{500'000, 1'000'000};
  ASSERT_EQ(tl->steps().at(0), s0);
  ASSERT_EQ(tl->steps().at(1), s1);
  box->setFocus();
  box->selectAll();
  QTest::keyClicks(box, "1");
  EXPECT_NE(tl->view(), s1);  // typing alone does not move the view
  QTest::keyClick(box, Qt::Key_Return);
  EXPECT_EQ(tl->view(), s1);
  QTest::keyClick(box, Qt::Key_Down);
  EXPECT_EQ(box->value(), 0);
  EXPECT_EQ(tl->view(), s0);
  QTest::keyClick(box, Qt::Key_Up);
  EXPECT_EQ(tl->view(), s1);
  // Enter on an unchanged box fits its step again (after the view moved away)
  tl->navigate({0, 2'000'000});
  QTest::keyClick(box, Qt::Key_Return);
  EXPECT_EQ(tl->view(), tl->steps().at(box->value()));
  // the box follows navigation: a view centred in step 1, then one centred in step 0
  tl->navigate({600'000, 800'000});
  EXPECT_EQ(box->value(), 1);
  tl->navigate({100'000, 300'000});
  EXPECT_EQ(box->value(), 0);
  tl->back();
  EXPECT_EQ(box->value(), 1);
  // keys 0..9 are the step numbers
  tl->setFocus();
  QTest::keyClick(tl, Qt::Key_1);
  EXPECT_EQ(tl->view(), s1);
  EXPECT_EQ(box->value(), 1);
  QTest::keyClick(tl, Qt::Key_0);
  EXPECT_EQ(tl->view(), s0);
  EXPECT_EQ(box->value(), 0);
  tl->navigate({0, 1'000'000});
  QTest::keyClick(tl, Qt::Key_2);  // no step 2: the view stays
  EXPECT_EQ(tl->view(), (ViewRange{0, 1'000'000}));
  // pictures of the axis: narrow (F5) and at deep zoom (F10)
  view.resize(800, 400);
  uilayout56_settle();
  uilayout56_shot(&view, "timeline_800_narrow");
  tl->navigate({350'100, 350'500});
  view.resize(1280, 400);
  uilayout56_settle();
  uilayout56_shot(&view, "timeline_deep_zoom");
  EXPECT_EQ(box->value(), 0);  // 350.3 us: in step 0
}

TEST(UiLayout56, StepAtCentre) {
  const std::map<int64_t, ViewRange> steps = {{0, {0, 500}}, {1, {500, 1000}}};
  EXPECT_EQ(step_at_centre(steps, {400, 700}), 1);  // centre 550
  EXPECT_EQ(step_at_centre(steps, {0, 998}), 0);    // centre 499
  EXPECT_EQ(step_at_centre(steps, {2000, 3000}), 1);  // right of every step: the nearest
  EXPECT_EQ(step_at_centre(steps, {-900, -100}), 0);
  EXPECT_EQ(step_at_centre({}, {0, 10}), std::nullopt);
  // overlapping windows (ranks offset): centre 510 is in both; step 1's centre (750) is 240 away, step 0's (260) 250
  EXPECT_EQ(step_at_centre({{0, {0, 520}}, {1, {500, 1000}}}, {410, 610}), 1);
}

// F10: the digits follow the tick spacing.
TEST(UiLayout56, AxisLabelsCarryTheDigitsTheTicksNeed) {
  EXPECT_EQ(axis_label(2'910'000'000, 100'000'000), "2.91 s");  // as format_duration
  EXPECT_EQ(axis_label(2'900'000'000, 100'000'000), "2.90 s");
  EXPECT_EQ(axis_label(2'910'000'050, 50), "2.91000005 s");
  EXPECT_EQ(axis_label(2'910'000'100, 100), "2.9100001 s");
  EXPECT_EQ(axis_label(2'910'000'001, 1), "2.910000001 s");
  EXPECT_EQ(axis_label(1'250, 50), "1.25 us");
  EXPECT_EQ(axis_label(250, 50), "250 ns");
  EXPECT_EQ(axis_label(0, 50), "0 ns");
  EXPECT_EQ(axis_label(12'500'000, 500'000), "12.50 ms");
  EXPECT_EQ(axis_label(30 * int64_t{60'000'000'000}, 10 * int64_t{60'000'000'000}), "30.0 min");
}

// F10: deep zoom at 2.91 s (a 400 ns view 800 px wide): every label differs. F5: a 500 ms view
// 300 px wide keeps each label (7 px a character) 12 px clear of the next tick; 1200 px wide
// shows more ticks, at most 8.
TEST(UiLayout56, AxisTicksKeepLabelsApartAndDistinct) {
  const auto px = [](const std::string& s) { return 7.0 * static_cast<double>(s.size()); };
  const AxisTicks deep = axis_ticks(2'910'000'000, 2'910'000'400, 0, 800, px);
  ASSERT_GE(deep.ticks.size(), 2u);
  std::set<std::string> labels;
  for (const auto& [t, l] : deep.ticks) labels.insert(l);
  EXPECT_EQ(labels.size(), deep.ticks.size());
  EXPECT_EQ(deep.ticks.front().second.substr(0, 4), "2.91");
  const auto check_apart = [&](const AxisTicks& a, int64_t span, double width) {
    for (const auto& [t, l] : a.ticks)
      EXPECT_LE(px(l) + 12, static_cast<double>(a.tick_ns) / static_cast<double>(span) * width) << l;
  };
  const AxisTicks narrow = axis_ticks(0, 500'000'000, 0, 300, px);
  check_apart(narrow, 500'000'000, 300);
  const AxisTicks wide = axis_ticks(0, 500'000'000, 0, 1200, px);
  check_apart(wide, 500'000'000, 1200);
  EXPECT_LT(narrow.ticks.size(), wide.ticks.size());
  EXPECT_LE(wide.ticks.size(), 8u);
  // 300 px, 9-char labels (63 px + 12): at most 4 ticks -> 200 ms apart ("0 ns", "200.00 ms", "400.00 ms")
  EXPECT_EQ(narrow.tick_ns, 200'000'000);
  ASSERT_EQ(narrow.ticks.size(), 3u);
  EXPECT_EQ(narrow.ticks[1].second, "200.00 ms");
  // the origin: labels relative to it
  const AxisTicks rel = axis_ticks(1'000'000'100, 1'000'000'500, 1'000'000'000, 800, px);
  ASSERT_FALSE(rel.ticks.empty());
  EXPECT_EQ(rel.ticks.front().second, std::to_string(rel.ticks.front().first - 1'000'000'000) + " ns");
}
