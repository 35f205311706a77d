// tester52 F8: "memviz worst step end" was the largest of PyTorch MemoryViz's measure, which is
// largest when memory is least fragmented (1 for an untouched segment), and the measure divided by
// the sum of the squared segment sizes where MemoryViz.js calculate_fragmentation divides by the
// squared sum. Both now as MemoryViz: sum of squared free gaps / (sum of segment sizes)^2, and
// `stats` shows the lowest at a step end with free memory.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;
namespace em = embedscope::engine;
}  // namespace

// Two 10-byte segments: A [4 used][6 free], B [2 free][3 used][2 free][3 used]: free gaps 6, 2, 2;
// MemoryViz: (36 + 4 + 4) / (10 + 10)^2 = 44 / 400 = 0.11 (the old sum of squared sizes gave
// 44 / 200 = 0.22). One segment alone is unchanged: A's 36 / 100.
TEST(Memviz52, TwoSegmentsDivideByTheSquaredSumOfTheirSizes) {
  const std::vector<em::SegmentInfo> two{
      {0, 10, false, {{0, 4, 4, true, "a"}, {4, 6, 0, false, ""}}},
      {100, 10, false, {{100, 2, 0, false, ""}, {102, 3, 3, true, "b"}, {105, 2, 0, false, ""}, {107, 3, 3, true, "c"}}}};
  em::MemoryStats st;
  em::fragmentation_of(two, st);
  EXPECT_DOUBLE_EQ(st.memviz_fragmentation, 44.0 / 400.0);
  em::MemoryStats one;
  em::fragmentation_of({two[0]}, one);
  EXPECT_DOUBLE_EQ(one.memviz_fragmentation, 36.0 / 100.0);
}

// Per rank, the lowest measure at a step end with free memory: rank 0's steps hold 0.36, 0.11 and
// a full step (reserved = allocated, measure 0, nothing fragmented): 0.11; rank 1 never has free
// memory: none. The largest, 0.36, was shown before as the worst.
TEST(Memviz52, StatsTakeTheLowestAtAStepEndWithFreeMemory) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_memviz52_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.db").string();
  std::filesystem::remove(path);
  {
    ss::SessionWriter w(path);
    auto counter = [&](int64_t step, int32_t rank, int64_t allocated, int64_t reserved, double memviz) {
      ss::MemoryCounter m;
      m.step = step;
      m.rank = rank;
      m.allocated = m.peak_allocated = allocated;
      m.reserved = m.peak_reserved = reserved;
      m.memviz_fragmentation = memviz;
      w.add_memory(m);
    };
    counter(0, 0, 4, 10, 0.36);
    counter(1, 0, 12, 20, 0.11);
    counter(2, 0, 20, 20, 0.0);
    counter(0, 1, 20, 20, 0.0);
    counter(1, 1, 20, 20, 0.0);
    w.close("complete");
  }
  const ss::RunStats st = ss::analyze(ss::SessionReader(path));
  ASSERT_EQ(st.ranks.size(), 2u);
  ASSERT_TRUE(st.ranks[0].memviz_fragmentation.has_value());
  EXPECT_DOUBLE_EQ(*st.ranks[0].memviz_fragmentation, 0.11);
  EXPECT_FALSE(st.ranks[1].memviz_fragmentation.has_value());
}
