// The scenario tab's explanation as a person reads it (tester59 F7): every line wraps inside the
// visible width beside the scroll bar at the window sizes a person uses (the screenshot's, a
// narrow window), and the page the text ends by pointing to ("Open the Memory page") is opened
// and linked.
#include <gtest/gtest.h>

#include <QAbstractTextDocumentLayout>
#include <QApplication>
#include <QScrollBar>
#include <QTabWidget>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextDocument>
#include <QTextLayout>

#include <filesystem>
#include <string>

#include "embedscope/engine/workload/scenario.h"
#include "support/step_sessions.h"
#include "views/compare_view.h"
#include "views/scenario_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {

// The right edge of the explanation's widest line, px in the viewport, and how many lines it has.
std::pair<double, int> widest_line(QTextBrowser* e) {
  QTextDocument* doc = e->document();
  double right = 0;
  int lines = 0;
  for (QTextBlock b = doc->begin(); b.isValid(); b = b.next()) {
    const QTextLayout* layout = b.layout();
    const QRectF block = doc->documentLayout()->blockBoundingRect(b);
    for (int i = 0; i < layout->lineCount(); ++i) {
      right = std::max(right, block.left() + layout->lineAt(i).naturalTextRect().right());
      ++lines;
    }
  }
  return {right, lines};
}

}  // namespace

// caching_vs_expandable: the paragraphs' lines end inside the viewport at 1379 x 1000 (the
// screenshot's size), 1280 x 800 and a narrow 700 x 600 window; the viewport is left of the scroll bar.
TEST(Ui59ScenarioText, ExplanationWrapsInsideTheVisibleWidth) {
  Scenario sc;
  for (const Scenario& s : builtin_scenarios())
    if (s.id == "caching_vs_expandable") sc = s;
  ASSERT_EQ(sc.id, "caching_vs_expandable");
  ScenarioView view(sc);
  QTextBrowser* e = view.explanation();
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->toPlainText().contains("the largest free block is 16.4 MiB"));
  for (const QSize size : {QSize(1379, 1000), QSize(1280, 800), QSize(700, 600)}) {
    view.resize(size);
    view.show();
    QApplication::processEvents();
    const auto [right, lines] = widest_line(e);
    const int visible = e->viewport()->width();
    EXPECT_GT(lines, 20) << size.width();  // the four paragraphs wrapped into many lines
    EXPECT_LE(right, visible) << size.width() << " x " << size.height() << ": a line ends at " << right
                              << " px in a viewport " << visible << " px wide";
    EXPECT_GE(visible, 250) << size.width();  // the text is not squeezed into a strip
    // the viewport ends where the scroll bar starts (or at the browser's edge), inside the tab
    const QRect vp(e->viewport()->mapTo(&view, QPoint(0, 0)), e->viewport()->size());
    EXPECT_LE(vp.right(), view.width()) << size.width();
    if (e->verticalScrollBar()->isVisible()) {
      const QRect bar(e->verticalScrollBar()->mapTo(&view, QPoint(0, 0)), e->verticalScrollBar()->size());
      EXPECT_FALSE(vp.intersects(bar)) << size.width();
    }
  }
}

// The text's pages are links, and the last paragraph's page is the one the tab opens.
TEST(Ui59ScenarioText, PageNamesAreLinksAndTheLastOneIsOpened) {
  EXPECT_EQ(link_pages("Open the Memory page: a < b"),
            "Open the <a href=\"page:Memory\">Memory page</a>: a &lt; b");
  EXPECT_EQ(link_pages("see the Timeline page and the Figures page"),
            "see the <a href=\"page:Timelines\">Timeline page</a> and the <a href=\"page:Figures\">Figures page</a>");
  EXPECT_EQ(link_pages("the Summary and Timeline pages"), "the Summary and Timeline pages");  // no page of the comparison
  for (const Scenario& s : builtin_scenarios()) {
    if (s.id == "caching_vs_expandable" || s.id == "compaction_rescues_semi_sync") {
      EXPECT_EQ(page_named_last(s), "Memory") << s.id;
    } else if (s.id == "communication_storm") {
      EXPECT_EQ(page_named_last(s), "") << s.id;
    }
  }

  const auto dir = std::filesystem::temp_directory_path() / ("es_ui59_scen_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const Scenario sc = parse_scenario(nlohmann::json::parse(R"({"id": "ui59", "title": "Pages",
      "explanation": ["Two runs.", "Open the Memory page: their bytes."],
      "runs": [{"label": "a", "preset": "tiny"}, {"label": "b", "preset": "tiny"}]})"), "ui59.json");
  std::filesystem::copy_file(test_support::step_session("es_ui59_a", 0, {1'000'000, 1'000'000}), dir / "ui59-0.db",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(test_support::step_session("es_ui59_b", 0, {2'000'000, 2'000'000}), dir / "ui59-1.db",
                             std::filesystem::copy_options::overwrite_existing);
  ScenarioView view(sc);
  view.resize(1280, 800);
  view.show();
  EXPECT_FALSE(view.open_page("Memory"));  // no comparison yet
  ASSERT_EQ(view.open_folder(QString::fromStdString(dir.string())), 2);
  QTabWidget* pages = view.compare()->pages();
  EXPECT_EQ(pages->tabText(pages->currentIndex()), "Memory");  // the page the text points to
  EXPECT_TRUE(view.explanation()->toHtml().contains("href=\"page:Memory\""));
  // the link opens its page again after another page was chosen
  pages->setCurrentIndex(1);
  ASSERT_EQ(pages->tabText(1), "Timelines");
  emit view.explanation()->anchorClicked(QUrl("page:Memory"));
  EXPECT_EQ(pages->tabText(pages->currentIndex()), "Memory");
  EXPECT_FALSE(view.open_page("Trade-offs"));  // runs that store their tables alike have none
  std::filesystem::remove_all(dir);
}
