// The timeline opens on the measured steps (Shift+F shows the warm-up), marks set-up waits as
// set-up rather than exposed communication, names warm-up steps, shows a colour legend, and
// marks the collective a hung run timed out in.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QImage>
#include <QLabel>
#include <QTest>

#include <filesystem>

#include "charts/colors.h"
#include "charts/legend.h"
#include "timeline/step_box.h"
#include "timeline/timeline_view.h"
#include "timeline/timeline_widget.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
using sessions::Lane;
using sessions::OpCategory;

// Two ranks, warm-up steps -2 [0, 700) us and -1 [700, 800) us, measured 0 [800, 900) and
// 1 [900, 1000). Rank 0 starts at 0 and enters its all-to-all at 20 us; rank 1 starts at 600 us
// (its set-up took longer) and joins at 630 us; both end at 650 us. Each later step: lookup
// [s, s + 50), all-to-all [s + 50, s + 80) on both ranks. `ended`/`message`: how it ended.
std::string warmup_session(const std::string& name, const std::string& ended = "complete", const std::string& message = "") {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_" + name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
  }
  w.add_step({-2, 0, 0, 700'000, 0.5, 0, 0});
  w.add_step({-2, 1, 600'000, 700'000, 0.5, 0, 0});
  w.add_ops({{0, Lane::compute, OpCategory::input, "input", -2, 0, 10'000, 0, 0},
             {0, Lane::comm, OpCategory::comm, "output_dist/all_to_all", -2, 20'000, 650'000, 64, 1},
             {1, Lane::compute, OpCategory::input, "input", -2, 600'000, 620'000, 0, 0},
             {1, Lane::comm, OpCategory::comm, "output_dist/all_to_all", -2, 630'000, 650'000, 64, 1}});
  for (int64_t step = -1; step <= 1; ++step) {
    const int64_t s = 800'000 + step * 100'000;
    const auto seq = static_cast<uint64_t>(step + 3);
    for (int r = 0; r < 2; ++r) {
      w.add_step({step, r, s, s + 100'000, 0.5, 0, 0});
      w.add_ops({{r, Lane::compute, OpCategory::lookup, "lookup", step, s, s + 50'000, 0, 0},
                 {r, Lane::comm, OpCategory::comm, "output_dist/all_to_all", step, s + 50'000, s + 80'000, 64, seq}});
    }
  }
  w.close(ended, message);
  return path.string();
}
std::shared_ptr<const sessions::SessionReader> reader(const std::string& p) {
  return std::make_shared<const sessions::SessionReader>(p);
}
}  // namespace

TEST(TimelineFit, OpensOnTheMeasuredStepsAndShiftFShowsTheWarmUp) {
  TimelineWidget w(reader(warmup_session("fit")));
  EXPECT_EQ(w.view(), (ViewRange{800'000, 1'000'000}));  // steps 0 and 1
  EXPECT_EQ(w.warmup_steps(), 2);
  w.resize(TimelineWidget::kGutter + 1000, 200);
  QTest::keyClick(&w, Qt::Key_F, Qt::ShiftModifier);
  EXPECT_EQ(w.view(), (ViewRange{0, 1'000'000}));  // everything
  QTest::keyClick(&w, Qt::Key_F);
  EXPECT_EQ(w.view(), (ViewRange{800'000, 1'000'000}));
  EXPECT_TRUE(w.history().can_back());
}

TEST(TimelineFit, SetUpWaitIsDrawnAsSetUpNotAsExposedCommunication) {
  TimelineWidget w(reader(warmup_session("setup")));
  w.resize(TimelineWidget::kGutter + 1000, 200);
  (void)w.grab();
  w.scale().show(0, 1'000'000);  // 1 px per us
  const QImage img = w.grab().toImage();
  auto pixel = [&](int us, size_t row) { return img.pixelColor(TimelineWidget::kGutter + us, w.row_y(row) + TimelineWidget::kRowHeight / 2); };
  EXPECT_EQ(pixel(300, 1), setup_wait_color());                   // rank 0 waits for rank 1's set-up
  EXPECT_EQ(pixel(640, 1), category_color(OpCategory::comm));     // after it: exposed
  EXPECT_EQ(pixel(640, 3), category_color(OpCategory::comm));     // rank 1 waited for nobody
  EXPECT_EQ(w.setup_wait_ns({1, 0}), 580'000);                    // [20, 600) us
  EXPECT_EQ(w.setup_wait_ns({3, 0}), 0);
  EXPECT_NE(w.details({1, 0}).indexOf("set-up wait 580.0 us"), -1) << w.details({1, 0}).toStdString();
  EXPECT_NE(w.details({1, 0}).indexOf("warm-up 1 of 2"), -1);
  EXPECT_NE(w.details({1, 3}).indexOf("step 1"), -1);
}

TEST(TimelineFit, TheViewNamesWarmUpStepsAndSaysHowToSeeThem) {
  TimelineView v(reader(warmup_session("view")));
  v.resize(1400, 500);
  v.show();
  QApplication::processEvents();
  // the box names the first view, the measured steps 0 and 1 (it said "step 0"); its value is the
  // step at the view's centre (900 us: step 1), where the arrows go on from
  EXPECT_EQ(v.step_box()->text(), "all measured steps");
  EXPECT_EQ(v.step_box()->value(), 1);
  v.step_box()->setValue(-2);
  EXPECT_EQ(v.step_box()->text(), "warm-up 1 of 2");
  EXPECT_EQ(v.view_note()->text(), "2 warm-up steps left of the view (Shift+F or All shows them)");
  v.timeline()->scale().fit();
  v.timeline()->navigate(v.timeline()->view());
  EXPECT_EQ(v.view_note()->text(), "");
  ASSERT_NE(v.legend(), nullptr);
  EXPECT_EQ(v.legend()->entries(), timeline_legend());  // no hang: no "timed out" entry
  EXPECT_TRUE(v.legend()->isVisible());
}

TEST(TimelineFit, AHungRunMarksTheCollectiveThatTimedOut) {
  const std::string msg =
      "rank 1: all_to_all 'output_dist/all_to_all' (group world, sequence 5) did not finish within 300 ms (every rank "
      "arrived)";
  TimelineWidget w(reader(warmup_session("hung", "hang", msg)));
  ASSERT_TRUE(w.hung());
  EXPECT_EQ(*w.hung(), (OpRef{3, 3}));  // rank 1's comm row, its last all-to-all (step 1)
  EXPECT_NE(w.details(*w.hung()).indexOf("timed out here"), -1);
  w.resize(TimelineWidget::kGutter + 1000, 200);
  (void)w.grab();
  w.scale().show(0, 1'000'000);
  const QImage img = w.grab().toImage();
  // the dashed line at its end (980 us) crosses rank 0's rows too
  int marked = 0;
  for (int y = w.row_y(0); y < w.row_y(2); ++y) marked += img.pixelColor(TimelineWidget::kGutter + 980, y) == hang_marker_color();
  EXPECT_GT(marked, 5);
  TimelineView v(reader(warmup_session("hung_view", "hang", msg)));
  EXPECT_EQ(v.legend()->entries().back().label, "timed out");
  // a complete session has no marker
  TimelineWidget plain(reader(warmup_session("plain")));
  EXPECT_FALSE(plain.hung());
}
