// The timeline reads every lane from the packed ops of a closed session (op_blocks, schema 12)
// and from the ops rows where a file has none: both draw the same pixels, and communication is
// drawn hidden where any compute row of its rank runs, whichever row that is.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <QImage>

#include <filesystem>
#include <string>
#include <vector>

#include "charts/colors.h"
#include "timeline/timeline_widget.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;
using namespace embedscope::ui::fixtures;

namespace {

// Rank 0: 70,000 lookups of 2 us every 3 us from 1 ms on lane 0 (five blocks), a dense op
// [100, 300) us on lane 0 before them, an optimizer op [250, 500) us on lane 2, an all-to-all
// [200, 600) us on lane 1 (hidden [200, 500): lane 0 to 300, lane 2 to 500; exposed after).
// Rank 1 starts at 220 us: its all-to-all [220, 420) us (rank 0 waits [200, 220) for its set-up).
// Steps 0 and 1.
std::string packed_timeline_session() {
  const auto path = scratch("packed_timeline.db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  using sessions::Lane;
  using sessions::OpCategory;
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
  }
  w.add_lane({0, 2, "gpu_compute", "stream"});
  w.add_ops({{0, Lane::compute, OpCategory::dense, "dense", 0, 100'000, 300'000, 0, 0},
             {0, Lane::comm, OpCategory::comm, "a2a", 0, 200'000, 600'000, 64, 1},
             {0, Lane::gpu_compute, OpCategory::optimizer, "opt", 0, 250'000, 500'000, 0, 0},
             {1, Lane::comm, OpCategory::comm, "a2a", 0, 220'000, 420'000, 64, 1}});
  std::vector<sessions::OpEvent> many;
  for (int64_t i = 0; i < 70'000; ++i)
    many.push_back({0, Lane::compute, OpCategory::lookup, "lookup", 1, 1'000'000 + i * 3'000, 1'000'000 + i * 3'000 + 2'000, 0, 0});
  w.add_ops(many);
  for (int r = 0; r < 2; ++r) {
    w.add_step({0, r, 0, 1'000'000, 0.5, 0, 0});
    w.add_step({1, r, 1'000'000, 211'000'000, 0.5, 0, 0});
  }
  w.close("complete");
  return path.string();
}

TEST(TimelinePacked, DrawsTheSameFromPackedOpsAsFromTheRows) {
  const std::string packed = packed_timeline_session();
  const std::string rows = scratch("rows_timeline.db").string();
  std::filesystem::copy_file(packed, rows, std::filesystem::copy_options::overwrite_existing);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(rows.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM op_blocks WHERE lane_key = -1", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto a_reader = open_reader(packed), b_reader = open_reader(rows);
  ASSERT_TRUE(a_reader->has_op_blocks());
  ASSERT_FALSE(b_reader->has_op_blocks());
  TimelineWidget a(a_reader), b(b_reader);
  ASSERT_EQ(a.rows(), 5u);
  ASSERT_EQ(b.rows(), 5u);
  for (size_t r = 0; r < a.rows(); ++r) {
    ASSERT_EQ(a.row_ops(r).size(), b.row_ops(r).size()) << "row " << r;
    for (size_t i = 0; i < a.row_ops(r).size(); ++i) {
      const auto &x = a.row_ops(r)[i], &y = b.row_ops(r)[i];
      ASSERT_TRUE(x.start_ns == y.start_ns && x.end_ns == y.end_ns && x.name_id == y.name_id && x.category == y.category &&
                  x.rank == y.rank && x.lane == y.lane && x.step == y.step && x.bytes == y.bytes)
          << "row " << r << " op " << i;
    }
  }
  EXPECT_EQ(a.row_ops(0).size(), 70'001u);
  for (TimelineWidget* w : {&a, &b}) w->resize(TimelineWidget::kGutter + 1000, 200);
  std::vector<std::pair<int64_t, int64_t>> views = {{0, 1'000'000}, {0, 211'000'000}, {100'000'000, 100'500'000}};
  for (auto [t0, t1] : views) {
    a.scale().show(t0, t1);
    b.scale().show(t0, t1);
    EXPECT_TRUE(a.grab().toImage() == b.grab().toImage()) << "view " << t0 << " .. " << t1;
  }
  // 1 px per us: communication under rank 0's compute rows is hidden, after it exposed
  a.scale().show(0, 1'000'000);
  const QImage img = a.grab().toImage();
  auto at = [&](int us, size_t row) { return img.pixelColor(at_us(a, us, row)); };
  EXPECT_EQ(at(280, 1), hidden_comm_color());  // under lane 0's dense op and lane 2's optimizer op
  EXPECT_EQ(at(400, 1), hidden_comm_color());  // under lane 2's alone
  EXPECT_EQ(at(550, 1), category_color(sessions::OpCategory::comm));
  EXPECT_EQ(at(400, 2), category_color(sessions::OpCategory::optimizer));  // row 2: rank 0 lane 2
  EXPECT_EQ(at(210, 1), setup_wait_color());
  // rank 1 started at 220 us: rank 0's communication before it is a set-up wait
  ASSERT_EQ(a.setup_wait_ranges().at(0).size(), 1u);
  EXPECT_EQ(a.setup_wait_ranges().at(0)[0], (ViewRange{200'000, 220'000}));
  EXPECT_EQ(b.setup_wait_ranges().at(0)[0], (ViewRange{200'000, 220'000}));
  std::filesystem::remove(packed);
  std::filesystem::remove(rows);
}

}  // namespace
