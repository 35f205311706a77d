// The active memory timeline starts above the blocks live for the whole trace (tester43 F13: a
// DLRM run's 618.4 MiB of weights, allocated at entry 1 and live to the end, left the per-step
// buffers a 2-3 px fringe). A hand-built history: a 700 MiB segment, 600 MiB of weights, then
// three steps of a 4 MiB and a 2 MiB buffer, each freed in its step.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <qcustomplot.h>

#include "charts/active_timeline.h"
#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/store/session.h"
#include "ui/support/ui_fixtures.h"
#include "views/memory_compare.h"

using namespace embedscope;

namespace {
constexpr int64_t kF13MiB = int64_t{1} << 20;

sessions::MemoryEvent f13_event(int64_t t, const char* action, int64_t address, int64_t size, const char* tag) {
  sessions::MemoryEvent e;
  e.time_ns = t * 1000;
  e.action = action;
  e.address = address;
  e.size = size;
  e.requested = size;
  e.tag = tag;
  return e;
}

std::shared_ptr<const sessions::MemoryHistory> f13_history(bool free_weights) {
  std::vector<sessions::MemoryEvent> ev{f13_event(0, "segment_alloc", 0, 700 * kF13MiB, ""),
                                        f13_event(1, "alloc", 0, 600 * kF13MiB, "weights")};
  for (int64_t k = 0; k < 3; ++k) {
    const int64_t t = 2 + 4 * k;
    ev.push_back(f13_event(t, "alloc", 600 * kF13MiB, 4 * kF13MiB, "activations"));
    ev.push_back(f13_event(t + 1, "alloc", 604 * kF13MiB, 2 * kF13MiB, "kjt"));
    ev.push_back(f13_event(t + 2, "free", 600 * kF13MiB, 4 * kF13MiB, "activations"));
    ev.push_back(f13_event(t + 3, "free", 604 * kF13MiB, 2 * kF13MiB, "kjt"));
  }
  if (free_weights) ev.push_back(f13_event(14, "free", 0, 600 * kF13MiB, "weights"));
  return std::make_shared<const sessions::MemoryHistory>(sessions::MemoryHistory::build(ev, nullptr));
}

// the chart's title line (protected) made readable
struct F13Probe : ui::ActiveTimeline {
  using ui::ActiveTimeline::title;
};
}  // namespace

TEST(MemoryBaseline, TheWeightsLiveToTheEndAreTheBaseline) {
  EXPECT_EQ(ui::whole_trace_baseline(*f13_history(false)), 600 * kF13MiB);
  EXPECT_EQ(ui::whole_trace_baseline(*f13_history(true)), 0);  // the oldest block is freed: no baseline
}

TEST(MemoryBaseline, TheTimelineStartsAboveItAndSaysSo) {
  const auto h = f13_history(false);
  F13Probe t;
  t.resize(800, 300);
  t.set_data(h, sessions::active_timeline(*h, 100), {}, {});
  ASSERT_TRUE(t.baseline_enabled());  // the default
  EXPECT_EQ(t.baseline_bytes(), 600 * kF13MiB);
  // y from 600 MiB to the 606 MiB of the busiest entry (the 700 MiB reserved is more than twice
  // the 6 MiB above the baseline: along the top, clipped)
  EXPECT_EQ(t.top_bytes(), 606 * kF13MiB);
  EXPECT_TRUE(t.title().startsWith("active memory timeline above 600.0 MiB live for the whole run: ")) << t.title().toStdString();
  // the column after the first 4 MiB alloc (entry 2): one pixel above the plot's bottom is that
  // buffer, not the weights
  const auto& cols = t.columns();
  int c = 0;
  while (c < static_cast<int>(cols.size()) && cols[static_cast<size_t>(c)].entry != 2) ++c;
  ASSERT_LT(c, static_cast<int>(cols.size()));
  const QRectF r = t.plot_rect();
  const double x = r.left() + (c + 0.5) / static_cast<double>(cols.size()) * r.width();
  const int32_t above = t.allocation_at(x, r.bottom() - 1);
  ASSERT_GE(above, 0);
  EXPECT_EQ(h->allocations()[static_cast<size_t>(above)].tag, "activations");
  // off: from 0 again, to the reserved 700 MiB (at most twice the active 606 MiB), and the
  // bottom pixel is the weights
  t.set_baseline_enabled(false);
  EXPECT_EQ(t.top_bytes(), 700 * kF13MiB);
  EXPECT_FALSE(t.title().contains("live for the whole run")) << t.title().toStdString();
  const int32_t low = t.allocation_at(x, r.bottom() - 1);
  ASSERT_GE(low, 0);
  EXPECT_EQ(h->allocations()[static_cast<size_t>(low)].tag, "weights");
}

namespace {
// A run's memory counters of rank 0: `allocated` / `reserved` MiB at steps -1 .. 2.
std::string f13_counters(const std::string& name, int64_t allocated, int64_t reserved) {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  for (int64_t step = -1; step <= 2; ++step)
    w.add_memory({step, 0, allocated << 20, reserved << 20, allocated << 20, reserved << 20, allocated << 20, 0, 1, 0.25,
                  0.1});
  w.close("complete");
  return path.string();
}
}  // namespace

// The compare page's allocated / reserved lines at 620-646 MiB (tester43 F13: on a 0-700 MiB axis
// the +2 MiB of B was invisible): the axis starts near the lowest point, and says it is not from 0.
TEST(MemoryBaseline, CompareLinesFarAboveZeroGetAnAxisNotFromZero) {
  ui::MemoryCompare mc({{"A", ui::fixtures::open_reader(f13_counters("es_f13_a", 620, 644))},
                        {"B", ui::fixtures::open_reader(f13_counters("es_f13_b", 622, 646))}});
  mc.resize(1200, 800);
  mc.show(0, 2);
  // lowest 620, highest 646 MiB: from 620 - 26 / 4 to 646 + 26 / 10
  EXPECT_DOUBLE_EQ(mc.plot()->yAxis->range().lower, 613.5);
  EXPECT_DOUBLE_EQ(mc.plot()->yAxis->range().upper, 648.6);
  EXPECT_EQ(mc.plot()->yAxis->label().toStdString(), "MiB (not from 0)");
  // lines from half the largest down keep the axis from 0 (reserved twice allocated)
  ui::MemoryCompare low({{"A", ui::fixtures::open_reader(f13_counters("es_f13_c", 300, 600))}});
  low.resize(1200, 800);
  low.show(0, 2);
  EXPECT_DOUBLE_EQ(low.plot()->yAxis->range().lower, 0);
  EXPECT_EQ(low.plot()->yAxis->label().toStdString(), "MiB");
}
