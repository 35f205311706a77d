// tester46 F22: the Memory page of a small-pool OOM charted the other pool's 16 MiB free block
// over its 16 KiB request; the circle now marks the largest free block of the pool that serves
// the request (PyTorch: <= 1 MiB the small pool), the legend and the line under the slider say which.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <qcustomplot.h>

#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "views/memory_view.h"

namespace {

constexpr int64_t kRep47PoolMiB = int64_t{1} << 20;

std::string rep47_pool_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("es_rep47_" + std::to_string(getpid()) + "_" + name + ".db")).string();
}

// A large-pool segment of 20 MiB holding 4 MiB of weights (16 MiB free), a small-pool segment of
// 2 MiB filled by two 1 MiB blocks, then an OOM of 16 KiB: the small pool serves it, with 0 B free.
std::shared_ptr<const embedscope::sessions::SessionReader> rep47_small_pool_oom() {
  const std::string path = rep47_pool_path("small_pool_oom");
  std::filesystem::remove(path);
  {
    embedscope::sessions::SessionWriter w(path, true);
    std::vector<embedscope::sessions::MemoryEvent> ev;
    int64_t t = 0;
    auto add = [&](const char* action, int64_t address, int64_t size, const char* tag) {
      embedscope::sessions::MemoryEvent e;
      e.time_ns = t += 1000;
      e.action = action;
      e.address = address;
      e.size = size;
      e.requested = size;
      e.tag = tag;
      ev.push_back(e);
    };
    add("segment_alloc", 0x10000000, 20 * kRep47PoolMiB, "");
    add("alloc", 0x10000000, 4 * kRep47PoolMiB, "weights");
    add("segment_alloc", 0x20000000, 2 * kRep47PoolMiB, "");
    add("alloc", 0x20000000, kRep47PoolMiB, "a");
    add("alloc", 0x20000000 + kRep47PoolMiB, kRep47PoolMiB, "b");
    add("oom", 0, 16 * 1024, "kjt");
    w.add_memory_events(ev);
    embedscope::sessions::MemoryCounter c;
    c.allocated = 6 * kRep47PoolMiB;
    c.reserved = 22 * kRep47PoolMiB;
    w.add_memory(c);
    w.close("oom");
  }
  return std::make_shared<const embedscope::sessions::SessionReader>(path);
}

QCPGraph* rep47_graph(QCustomPlot* p, const QString& prefix) {
  for (int i = 0; i < p->graphCount(); ++i)
    if (p->graph(i)->name().startsWith(prefix)) return p->graph(i);
  return nullptr;
}

}  // namespace

// F22: entry 5 is the OOM; the circle at 0 MiB (the small pool's largest free block), not 16 MiB,
// and the legend says which pool; the line under the slider names it too.
TEST(Rep47MemoryPools, ASmallPoolOomMarksTheSmallPoolsLargestFreeBlock) {
  embedscope::ui::MemoryView view(rep47_small_pool_oom());
  view.resize(1400, 900);
  view.show();
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  ASSERT_EQ(view.data().analysis.ooms.size(), 1u);
  const auto& o = view.data().analysis.ooms[0];
  EXPECT_EQ(o.entry, 5);
  EXPECT_TRUE(o.small_pool);
  EXPECT_EQ(o.largest_free_block, 16 * kRep47PoolMiB);
  EXPECT_EQ(o.largest_free_in_pool, 0);
  QCPGraph* request = rep47_graph(view.fragmentation_plot(), "OOM: the request");
  QCPGraph* free_block = nullptr;
  for (int i = 0; i < view.fragmentation_plot()->graphCount(); ++i)
    if (view.fragmentation_plot()->graph(i)->name().startsWith("OOM: ") && view.fragmentation_plot()->graph(i) != request)
      free_block = view.fragmentation_plot()->graph(i);
  ASSERT_NE(request, nullptr);
  ASSERT_NE(free_block, nullptr);
  ASSERT_NE(free_block, request);
  EXPECT_EQ(free_block->name().toStdString(),
            "OOM: the small pool's largest free block then (it serves requests <= 1 MiB)");
  ASSERT_EQ(free_block->data()->size(), 1);
  EXPECT_DOUBLE_EQ(free_block->data()->at(0)->key, 5.0);
  EXPECT_DOUBLE_EQ(free_block->data()->at(0)->value, 0.0);
  EXPECT_DOUBLE_EQ(request->data()->at(0)->value, 16.0 / 1024);
  view.scrub_to(5);
  bool said = false;
  for (auto* l : view.findChildren<QLabel*>())
    said = said || l->text().contains("requests up to 1 MiB come from the small pool, whose largest free block is 0 B");
  EXPECT_TRUE(said) << "the line under the slider names the small pool";
}

TEST(Rep47MemoryPools, TheLegendNamesThePoolOnlyWhereItIsNotTheLargestFreeBlock) {
  embedscope::sessions::MemoryOom small, large, same;
  small.small_pool = true;
  small.largest_free_block = 100;
  small.largest_free_in_pool = 0;
  large.small_pool = false;
  large.largest_free_block = 100;
  large.largest_free_in_pool = 50;
  same.small_pool = false;
  same.largest_free_block = same.largest_free_in_pool = 100;
  using embedscope::ui::MemoryView;
  EXPECT_EQ(MemoryView::oom_free_block_legend({same}).toStdString(), "OOM: largest free block then");
  EXPECT_EQ(MemoryView::oom_free_block_legend({small, same}).toStdString(),
            "OOM: the largest free block of the request's pool then (small: <= 1 MiB, large: above)");
  EXPECT_EQ(MemoryView::oom_free_block_legend({large}).toStdString(),
            "OOM: the large pool's largest free block then (it serves requests > 1 MiB)");
}

