// OOM advice derived from evidence (tester59 F1): replay-memory names the settings whose rows
// completed, never suggests max_split_size for a small-pool request nor an allocation order where
// the live blocks are one size; a recorded garbage_collection_threshold is replayed (F4).
// Fixtures: tests/data/memory_snapshots/make_tester59.py (hand figures there).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/memory/replay.h"
#include "support/cli_run.h"

using namespace embedscope::engine;

namespace {
constexpr int64_t kMiB = int64_t{1} << 20;
std::string m59_fixture(const std::string& name) {
  return std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + name;
}
embedscope::test_support::CliResult m59_cli(const std::string& args) {
  const auto dir = embedscope::test_support::fresh_scratch("mem59_oom_advice");
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, dir);
}
}  // namespace

// tester59_mine.pickle: only direct completes (hand: 8 MiB + 1 KiB live + 6 MiB = 14 MiB <= 26 MiB;
// every caching / expandable setting needs one more 20 MiB segment or page: 42 MiB > 26 MiB).
TEST(Mem59OomAdvice, ReplayMemoryNamesOnlyTheSettingThatCompleted) {
  const auto r = m59_cli("replay-memory " + m59_fixture("tester59_mine.pickle") + " --max-split-size " +
                         std::to_string(20 * kMiB) + " --json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& rows = j["devices"][0]["results"];
  ASSERT_EQ(rows.size(), 6u);  // recorded caching, caching, caching mss, expandable, expandable mss, direct
  int oks = 0;
  for (const auto& row : rows) {
    const std::string label = row["label"], msg = row["oom_message"];
    if (row["result"] == "ok") {
      ++oks;
      EXPECT_EQ(row["allocator"], "direct");
      // one segment per block: at entry 6, four 4 MiB blocks and the 1 KiB one (5 segments)
      EXPECT_EQ(row["peak_reserved_bytes"], 16 * kMiB + 1024);
      EXPECT_EQ(row["segments_at_peak"], 5);
      continue;
    }
    EXPECT_EQ(row["result"], "OOM at action 11") << label;
    EXPECT_NE(msg.find("Advice: of the other settings replayed on the device's trace, only direct (peak reserved "),
              std::string::npos)
        << label << ": " << msg;
    EXPECT_NE(msg.find(") completes them: use it; "), std::string::npos) << msg;
    EXPECT_NE(msg.find("do not (OOM at action 11)"), std::string::npos) << msg;
    // no untested candidate is left: "try the expandable allocator", "a max_split_size, so that"
    EXPECT_EQ(msg.find("try the expandable"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("a max_split_size, so that"), std::string::npos) << msg;
    // the four 4 MiB buffers are one size: no allocation order can help
    EXPECT_EQ(msg.find("allocating the largest long-lived buffers first"), std::string::npos) << msg;
    if (label == "caching") {
      EXPECT_NE(msg.find("caching with max_split_size 20.0 MiB, expandable_segments and expandable_segments with "
                         "max_split_size 20.0 MiB do not (OOM at action 11); with caching itself: give the device at "
                         "least 42.0 MiB (a new 20.0 MiB segment beside the 22.0 MiB reserved)"),
                std::string::npos)
          << msg;
    }
  }
  EXPECT_EQ(oks, 1);
}

// No setting completes: the advice says so and gives the capacity that would have sufficed, the
// least peak reserved without a capacity limit. Three 12 MiB requests on 30 MiB (36 MiB live):
// caching reserves a 12 MiB segment each (>= 10 MiB: the request rounded to 2 MiB) = 36 MiB,
// direct 36 MiB, expandable 20 MiB pages: 40 MiB. So 36.0 MiB, by caching (the first of the two).
TEST(Mem59OomAdvice, NoSettingCompletesGivesTheCapacityThatSuffices) {
  const auto dir = embedscope::test_support::fresh_scratch("mem59_none_ok");
  const auto trace = (dir / "t.json").string();
  {
    std::ofstream(trace) << R"({"capacity_bytes": 31457280, "actions": [
      {"action": "alloc", "id": 1, "size": 12582912}, {"action": "alloc", "id": 2, "size": 12582912},
      {"action": "alloc", "id": 3, "size": 12582912}]})";
  }
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "replay-memory " + trace + " --json", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][0]["result"], "OOM at action 2");  // caching: 24 MiB reserved, 12 more do not fit
  EXPECT_EQ(j["results"][1]["result"], "OOM at action 1");  // expandable: a second 20 MiB page does not fit
  EXPECT_EQ(j["results"][2]["result"], "OOM at action 2");  // direct
  for (const auto& row : j["results"]) {
    const std::string msg = row["oom_message"];
    EXPECT_NE(msg.find("none of the other settings replayed on the trace's actions completes them: "), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("a capacity of 36.0 MiB would have sufficed (caching reserves at most that for them)"),
              std::string::npos)
        << msg;
  }
}

// A small-pool request: max_split_size never applies there (PyTorch applies it to large-pool
// blocks only); its two live 1 MiB blocks are one size, so no order of allocation helps either.
TEST(Mem59OomAdvice, SmallPoolRequestIsNotAdvisedMaxSplitSize) {
  AllocatorConfig c;
  c.kind = AllocatorKind::caching;
  c.capacity_bytes = 22 * kMiB + kMiB / 2;
  c.back_with_memory = false;
  auto a = DeviceAllocator::create(c);
  Allocation big = a->allocate(5 * kMiB, "weights");  // a 20 MiB large segment
  Allocation s1 = a->allocate(kMiB, "kjt"), s2 = a->allocate(kMiB, "kjt");  // the 2 MiB small segment full
  try {
    a->allocate(512 * 1024, "comm_buffer");
    FAIL() << "expected DeviceOutOfMemory";
  } catch (const DeviceOutOfMemory& e) {
    ASSERT_TRUE(e.fragmentation);
    const std::string m = e.what();
    EXPECT_EQ(m.find("max_split_size"), std::string::npos) << m;
    EXPECT_EQ(m.find("allocating the largest long-lived buffers first"), std::string::npos) << m;
    EXPECT_EQ(e.setting_advice, "the expandable allocator (expandable_segments), whose one range per pool maps pages "
                                "beside freed space instead of stranding it");
    EXPECT_EQ(e.other_advice, "give the device at least 24.0 MiB (a new 2.0 MiB segment beside the 22.0 MiB reserved)");
    EXPECT_EQ(m, e.explanation + " Advice: try " + e.setting_advice + ", or " + e.other_advice);
  }
  a->free(big);
  a->free(s1);
  a->free(s2);
}

// Blocks of different sizes keep the order advice (a large request, so max_split_size too).
TEST(Mem59OomAdvice, DifferentSizesKeepTheOrderAdvice) {
  AllocatorConfig c;
  c.kind = AllocatorKind::caching;
  c.capacity_bytes = 48 * kMiB;
  c.back_with_memory = false;
  auto a = DeviceAllocator::create(c);
  Allocation x = a->allocate(40 * kMiB, "activations");
  a->free(x);
  Allocation pin = a->allocate(2 * kMiB, "kjt");
  Allocation pin2 = a->allocate(4 * kMiB, "kjt");
  try {
    a->allocate(40 * kMiB, "pooled_output");
    FAIL();
  } catch (const DeviceOutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("a max_split_size, so that large cached blocks are not split by small requests"), std::string::npos) << m;
    EXPECT_NE(m.find("allocating the largest long-lived buffers first"), std::string::npos) << m;
  }
  a->free(pin);
  a->free(pin2);
}

// F4: a recorded garbage_collection_threshold is replayed: the recorded settings' row carries it
// (here nothing is collectable: segment A is split by its live blocks, so the OOM stays, entry 11).
TEST(Mem59OomAdvice, RecordedGcThresholdIsReplayed) {
  const auto r = m59_cli("replay-memory " + m59_fixture("tester59_gc.pickle"));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("caching, garbage_collection_threshold 0.6 (recorded)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("which the replay does not model"), std::string::npos) << r.out;
  const auto none = m59_cli("replay-memory " + m59_fixture("tester59_mine.pickle"));
  EXPECT_EQ(none.out.find("garbage_collection_threshold"), std::string::npos) << none.out;
  const auto js = m59_cli("replay-memory " + m59_fixture("tester59_gc.pickle") + " --json");
  const auto row = nlohmann::json::parse(js.out)["devices"][0]["results"][0];
  EXPECT_DOUBLE_EQ(row["garbage_collection_threshold"].get<double>(), 0.6);
  EXPECT_EQ(row["result"], "OOM at action 11");
}
