// The segment timeline chart (memory_viz's "Active Cached Segment Timeline"): which band is under
// a point, what its tooltip says, the colours it draws the active and cached share in, and its
// click (the memory view scrubs there and marks the segment's row on the block map).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>
#include <QSignalSpy>
#include <QSlider>
#include <QTest>

#include <cmath>
#include <filesystem>

#include "charts/block_map.h"
#include "charts/segment_timeline_chart.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "jobs/analysis_job.h"
#include "views/memory_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {

sessions::MemoryEvent ev(const char* action, int64_t address, int64_t size) {
  sessions::MemoryEvent e;
  e.action = action;
  e.address = address;
  e.size = size;
  e.requested = size;
  return e;
}

// Two segments: A (4096 B, 512 active) from entry 0 to 5, B (2048 B, 1024 active) from entry 2.
std::shared_ptr<const sessions::MemoryHistory> two_segments() {
  return std::make_shared<const sessions::MemoryHistory>(sessions::MemoryHistory::build(
      {ev("segment_alloc", 0x10000, 4096), ev("alloc", 0x10000, 512), ev("segment_alloc", 0x20000, 2048),
       ev("alloc", 0x20000, 1024), ev("free", 0x10000, 512), ev("segment_free", 0x10000, 4096)},
      nullptr));
}

std::shared_ptr<const sessions::SessionReader> imported(const std::string& fixture) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_segtl_" + std::to_string(getpid()) + fixture + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string(), true);
    sessions::torch_snapshot::import_torch_memory_snapshot(
        std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + fixture, w);
    w.close("complete");
  }
  return std::make_shared<const sessions::SessionReader>(path.string());
}

}  // namespace

TEST(SegmentTimelineChart, BandsTooltipsColoursAndClicks) {
  const auto h = two_segments();
  SegmentTimelineChart c;
  c.resize(672, 290);  // a plot of 588 x 240 px: 98 px per column, 6144 B in 240 px (A ends at 80 px)
  c.set_data(h, sessions::segment_timeline(*h, 6), {}, {});
  c.show();
  ASSERT_EQ(c.timeline().columns.size(), 6u);
  const QRectF r = c.plot_rect();
  const double top = 6144;  // the peak reserved bytes: A and B at entries 2-4
  auto x_of = [&](int col) { return r.left() + (col + 0.5) * r.width() / 6; };
  auto y_of = [&](double bytes) { return r.bottom() - bytes / top * r.height(); };
  // column 3: A at the bottom (0-4096), B above it (4096-6144), nothing above
  EXPECT_EQ(c.segment_at(x_of(3), y_of(100)), 0);
  EXPECT_EQ(c.segment_at(x_of(3), y_of(4000)), 0);
  EXPECT_EQ(c.segment_at(x_of(3), y_of(5000)), 1);
  EXPECT_EQ(c.segment_at(x_of(0), y_of(5000)), -1);  // entry 0: A alone
  EXPECT_EQ(c.segment_at(x_of(5), y_of(100)), 1);    // entry 5: A released, B at the bottom
  const QString tip = c.describe(0, 3);
  EXPECT_TRUE(tip.contains("segment at 0x10000")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("made at entry 0 (")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("released at entry 5 (")) << tip.toStdString();
  EXPECT_TRUE(tip.contains(": 5 entries")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("large pool (by its size), stream 0")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("after entry 3: 512 B of 4.0 KiB active (12.5%)")) << tip.toStdString();
  EXPECT_TRUE(c.describe(1).contains("still reserved at the end of the trace"));
  // A's active 512 B at its foot in the full colour, its cached rest in the light one; no stacks:
  // the one colour of segments without a stack
  EXPECT_EQ(c.color_of(0), SegmentTimelineChart::no_stack_color());
  EXPECT_EQ(c.reserved_color(0), QColor((0x6a + 765) / 4, (0x7f + 765) / 4, (0x9a + 765) / 4));
  const QImage img = c.grab().toImage();
  EXPECT_EQ(img.pixelColor(QPoint(static_cast<int>(x_of(3)), static_cast<int>(y_of(200)))), c.color_of(0));
  EXPECT_EQ(img.pixelColor(QPoint(static_cast<int>(x_of(3)), static_cast<int>(y_of(3000)))), c.reserved_color(0));
  EXPECT_EQ(img.pixelColor(QPoint(static_cast<int>(x_of(3)), static_cast<int>(y_of(5500)))), c.reserved_color(1));
  // a line of the background where A ends and B begins
  EXPECT_EQ(img.pixelColor(QPoint(static_cast<int>(x_of(3)), static_cast<int>(std::ceil(y_of(4096))))),
            c.palette().color(QPalette::Base));
  // a click on a band names its column's entry and the segment; beside the bands only the entry
  QSignalSpy seg(&c, &SegmentTimelineChart::segment_clicked), entry(&c, &SegmentTimelineChart::entry_clicked);
  QTest::mouseClick(&c, Qt::LeftButton, {}, QPoint(static_cast<int>(x_of(3)), static_cast<int>(y_of(5000))));
  ASSERT_EQ(seg.count(), 1);
  EXPECT_EQ(seg.at(0).at(0).toLongLong(), 3);
  EXPECT_EQ(seg.at(0).at(1).toLongLong(), 0x20000);
  QTest::mouseClick(&c, Qt::LeftButton, {}, QPoint(static_cast<int>(x_of(0)), static_cast<int>(y_of(5000))));
  ASSERT_EQ(entry.count(), 1);
  EXPECT_EQ(entry.at(0).at(0).toLongLong(), 0);
}

// In the memory view on oom_p5 (7 segments made, 2 released before the OOM): a click on a band
// scrubs the map to that entry and marks the segment's row; the details name the segment.
TEST(SegmentTimelineChart, ClickScrubsTheViewAndMarksTheSegment) {
  MemoryView view(imported("oom_p5.pickle"));
  view.resize(1400, 1000);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  SegmentTimelineChart& c = *view.segment_timeline();
  ASSERT_EQ(c.timeline().segments.size(), 7u);
  ASSERT_EQ(c.timeline().columns.size(), 37u);  // one per entry
  // entry 20: the 30 MiB segment made at entry 11 (released at 34) is the fifth band
  const sessions::SegmentColumn& col = c.timeline().columns[20];
  ASSERT_EQ(col.bands.size(), 7u);
  const auto& band = col.bands[4];
  const sessions::SegmentLife& s = c.timeline().segments[static_cast<size_t>(band.segment)];
  EXPECT_EQ(s.start_entry, 11);
  EXPECT_EQ(s.end_entry, 34);
  EXPECT_EQ(s.size, 30 * (int64_t{1} << 20));
  // coloured as the allocation that made it: its stack's innermost function, as on the block map
  const auto frames = sessions::stack_frames(s.stack_id, view.data().frames, view.data().stacks);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(c.color_of(band.segment), BlockMap::color_of_tag(frames[0].substr(0, frames[0].find(" ("))));
  // where it is drawn: ui45 cuts static segments out of the stack (oom_p5's 64 MiB one below it)
  const sessions::SegmentColumn::Band* drawn = nullptr;
  for (const auto& b : c.shown().columns[20].bands)
    if (b.segment == band.segment) drawn = &b;
  ASSERT_NE(drawn, nullptr);
  const QRectF r = c.plot_rect();
  const double x = r.left() + 20.5 * r.width() / 37;
  const double y = r.bottom() - (static_cast<double>(drawn->offset) + drawn->size / 2.0) /
                                    static_cast<double>(c.shown().peak_reserved) * r.height();
  EXPECT_EQ(c.segment_at(x, y), band.segment);
  QTest::mouseClick(&c, Qt::LeftButton, {}, QPoint(static_cast<int>(x), static_cast<int>(y)));
  EXPECT_EQ(view.slider()->value(), 20);
  EXPECT_EQ(view.state().entry, 20);
  const int row = view.map()->row_of_segment(static_cast<int64_t>(s.address));
  ASSERT_GE(row, 0);
  EXPECT_EQ(view.map()->highlighted_row(), row);
  EXPECT_TRUE(view.details()->text().contains(QString("segment at 0x%1").arg(static_cast<qulonglong>(s.address), 0, 16)))
      << view.details()->text().toStdString();
  // scrubbing elsewhere lays the map out anew, without the mark
  view.scrub_to(30);
  EXPECT_EQ(view.map()->highlighted_row(), -1);
}
