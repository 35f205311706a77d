// The OOM explanation under max_split_size (tester43 F20): a request below max_split_size never
// takes a free block of max_split_size or more (PyTorch's get_free_block), so when every free
// block large enough is such a block the cause is that rule, not fragmentation; the advice is to
// drop or raise max_split_size, never a capacity the device already has. And the replay's peak
// allocated, inflated by oversize blocks handed whole to smaller requests, beside the program's own.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/memory/replay.h"
#include "support/cli_run.h"

using namespace embedscope::engine;

namespace {
constexpr int64_t kF20MiB = int64_t{1} << 20;
constexpr int64_t kF20GiB = int64_t{1} << 30;
MemoryAction f20_alloc(int64_t id, int64_t size) { return {MemoryAction::Kind::alloc, id, size, 0, "t", -1}; }
MemoryAction f20_free(int64_t id) { return {MemoryAction::Kind::free, id, 0, 0, "", -1}; }
}  // namespace

TEST(MaxSplitOom, ARequestBelowMaxSplitSizeIsExplainedByTheRule) {
  // expandable (20 MiB pages in the large pool), max_split_size 20 MiB, 40 MiB (alloc52: the
  // layout re-derived for PyTorch's expandable rules, where every block splits and releasing the
  // cache unmaps the whole pages in free blocks). 2 MiB maps page [0, 20) and splits; 36 MiB
  // takes the free [2, 20) and page [20, 40): [2, 38); 2 MiB takes the free [38, 40). The 36 MiB
  // freed is a free block [2, 38) of >= 20 MiB (oversize) with no whole page in it, so releasing
  // the cache gives nothing back. A 4 MiB request may not take it, and a new 20 MiB page does not
  // fit (40 + 20 > 40): OOM with 36 MiB free.
  auto a = DeviceAllocator::create({AllocatorKind::expandable, 40 * kF20MiB, 20 * kF20MiB, false});
  const Allocation w = a->allocate(2 * kF20MiB, "weights");
  const Allocation x = a->allocate(36 * kF20MiB, "activations");
  const Allocation y = a->allocate(2 * kF20MiB, "activations");
  EXPECT_EQ(x.address, w.address + 2 * kF20MiB);
  EXPECT_EQ(y.address, w.address + 38 * kF20MiB);
  a->free(x);
  try {
    a->allocate(4 * kF20MiB, "forward");
    FAIL() << "expected DeviceOutOfMemory";
  } catch (const DeviceOutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_EQ(m,
              "out of memory allocating 4.0 MiB for forward (expandable allocator): max_split_size: 36.0 MiB are free and "
              "the largest free block is 36.0 MiB, but the free blocks large enough are >= max_split_size (20.0 MiB), "
              "which a 4.0 MiB request does not split (a request below max_split_size never takes a block of "
              "max_split_size or more, as PyTorch's caching allocator), and the 0 B of capacity not reserved "
              "cannot hold a new 20.0 MiB run of pages for it. Allocated 4.0 MiB, reserved 40.0 MiB of 40.0 MiB; "
              "largest free block 36.0 MiB; most memory held by activations 2.0 MiB, weights 2.0 MiB. Advice: try "
              "without max_split_size, or with one above 36.0 MiB (so that the large free blocks serve small "
              "requests)");  // the live blocks are both 2 MiB: no order advice (tester59 F1)
    EXPECT_EQ(m.find("give the device"), std::string::npos) << m;
  }
  a->free(w);
  a->free(y);
  // without max_split_size the same program fits: the 4 MiB request splits the free 36 MiB block
  auto b = DeviceAllocator::create({AllocatorKind::expandable, 40 * kF20MiB, 0, false});
  const Allocation bw = b->allocate(2 * kF20MiB, "weights");
  const Allocation bx = b->allocate(36 * kF20MiB, "activations");
  const Allocation by = b->allocate(2 * kF20MiB, "activations");
  b->free(bx);
  const Allocation bz = b->allocate(4 * kF20MiB, "forward");
  EXPECT_EQ(bz.address, bx.address);
  EXPECT_EQ(bz.size, 4 * kF20MiB);
  b->free(bz);
  b->free(by);
  b->free(bw);
}

TEST(MaxSplitOom, CapacityAdviceNeverNamesWhatTheDeviceHas) {
  // caching, 8 GiB, bookkeeping only: 8 GiB - 42 MiB held, a 40 MiB segment freed and pinned by
  // 2 MiB at its start (38 MiB free there), reserved 8 GiB - 2 MiB; a 40 MiB request needs a new
  // 40 MiB segment: 8 GiB + 38 MiB, which "at least 8.0 GiB" would round to the capacity.
  auto a = DeviceAllocator::create({AllocatorKind::caching, 8 * kF20GiB, 0, false});
  const Allocation big = a->allocate(8 * kF20GiB - 42 * kF20MiB, "weights");
  const Allocation x = a->allocate(40 * kF20MiB, "activations");
  a->free(x);
  const Allocation pin = a->allocate(2 * kF20MiB, "kjt");
  try {
    a->allocate(40 * kF20MiB, "pooled_output");
    FAIL() << "expected DeviceOutOfMemory";
  } catch (const DeviceOutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("fragmentation: 40.0 MiB are free, but the largest free block is 38.0 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("or give the device 38.0 MiB more than its 8.0 GiB (a new 40.0 MiB segment beside the 8.0 GiB "
                     "reserved)"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find("at least 8.0 GiB"), std::string::npos) << m;
  }
  a->free(pin);
  a->free(big);
}

TEST(MaxSplitOom, ReplayKeepsTheProgramsPeakBesideTheInflatedPeakAllocated) {
  // caching, max_split_size 20 MiB (alloc52: expandable segments split every block, as PyTorch's
  // should_split, so the inflation is the caching allocator's): two 40 MiB segments cached; a
  // 21 MiB request (>= max_split_size) takes a 40 MiB block (40 < 21 + 20, get_free_block) and
  // keeps it whole (should_split: the request is not below max_split_size), twice; 30 MiB more
  // is a new segment. Allocated 40 + 40 + 30 = 110 MiB while the program holds 21 + 21 + 30 = 72;
  // its peak is the first two 40 MiB: 80 MiB.
  MemoryTrace t;
  t.actions = {f20_alloc(1, 40 * kF20MiB), f20_alloc(2, 40 * kF20MiB), f20_free(1),           f20_free(2),
               f20_alloc(3, 21 * kF20MiB), f20_alloc(4, 21 * kF20MiB), f20_alloc(5, 30 * kF20MiB)};
  const ReplayResult r = replay(t, {AllocatorKind::caching, 1024 * kF20MiB, 20 * kF20MiB, false}, "hand-built");
  EXPECT_FALSE(r.oom);
  EXPECT_EQ(r.peak_allocated, 110 * kF20MiB);
  EXPECT_EQ(r.peak_requested, 80 * kF20MiB);
  EXPECT_EQ(r.peak_reserved, 110 * kF20MiB);
  // without max_split_size each 21 MiB request splits a 40 MiB block (19 MiB left, too small for
  // the next one): allocated peaks with the program, at 80 MiB
  const ReplayResult plain = replay(t, {AllocatorKind::caching, 1024 * kF20MiB, 0, false}, "hand-built");
  EXPECT_EQ(plain.peak_allocated, 80 * kF20MiB);
  EXPECT_EQ(plain.peak_requested, 80 * kF20MiB);
  // expandable with max_split_size: no inflation, every block is split (peak allocated 80 MiB)
  const ReplayResult ex = replay(t, {AllocatorKind::expandable, 1024 * kF20MiB, 20 * kF20MiB, false}, "hand-built");
  EXPECT_EQ(ex.peak_allocated, 80 * kF20MiB);
}

namespace {
std::filesystem::path f20_scratch() {
  const auto d = std::filesystem::temp_directory_path() / ("embedscope_f20_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}
}  // namespace

TEST(MaxSplitOom, ReplayMemorySaysTheInflatedPeakAndTheSettingWithout) {
  // alloc52: two traces, as the inflated peak is the caching allocator's and the OOM of the
  // max_split_size rule the expandable allocator's (free blocks keep their partial pages).
  // 1. caching, max_split_size 20 MiB: the trace of ReplayKeepsTheProgramsPeakBesideThe-
  //    InflatedPeakAllocated: peak allocated 110 MiB, the program's peak 80 MiB.
  const auto dir = f20_scratch();
  const std::string trace = (dir / "f20_trace.json").string();
  std::ofstream(trace) << R"({"actions": [
    {"action": "alloc", "id": 1, "size": 41943040, "tag": "weights"},
    {"action": "alloc", "id": 2, "size": 41943040, "tag": "activations"},
    {"action": "free", "id": 1}, {"action": "free", "id": 2},
    {"action": "alloc", "id": 3, "size": 22020096, "tag": "kjt"},
    {"action": "alloc", "id": 4, "size": 22020096, "tag": "kjt"},
    {"action": "alloc", "id": 5, "size": 31457280, "tag": "forward"}]})";
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "replay-memory " + trace + " --allocator caching --max-split-size 20971520 --capacity 1073741824",
      dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("caching, max_split_size 20.0 MiB: peak allocated 110.0 MiB counts whole blocks of "
                       "max_split_size (20.0 MiB) or more handed unsplit to smaller requests; the program itself held "
                       "at most 80.0 MiB (requested bytes)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("caching: peak allocated"), std::string::npos) << r.out;  // no note without max_split_size
  // 2. expandable at 40 MiB, max_split_size 20 MiB: the layout of ARequestBelowMaxSplitSize-
  //    IsExplainedByTheRule; without max_split_size: ok. No inflated peak (every block split).
  const std::string trace2 = (dir / "f20_trace2.json").string();
  std::ofstream(trace2) << R"({"actions": [
    {"action": "alloc", "id": 1, "size": 2097152, "tag": "weights"},
    {"action": "alloc", "id": 2, "size": 37748736, "tag": "activations"},
    {"action": "alloc", "id": 3, "size": 2097152, "tag": "activations"},
    {"action": "free", "id": 2},
    {"action": "alloc", "id": 4, "size": 4194304, "tag": "forward"}]})";
  const auto r2 = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "replay-memory " + trace2 + " --allocator expandable --max-split-size 20971520 --capacity 41943040",
      dir);
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_NE(r2.out.find("max_split_size: 36.0 MiB are free and the largest free block is 36.0 MiB, but the free blocks "
                        "large enough are >= max_split_size (20.0 MiB), which a 4.0 MiB request does not split"),
            std::string::npos)
      << r2.out;
  // the advice from the row beside it (tester59 F1)
  EXPECT_NE(r2.out.find("Advice: of the other settings replayed on the trace's actions, expandable_segments (peak "
                        "reserved 40.0 MiB) completes them: use it (expandable without max_split_size: ok)\n"),
            std::string::npos)
      << r2.out;
  EXPECT_EQ(r2.out.find("counts whole blocks"), std::string::npos) << r2.out;
  std::filesystem::remove_all(dir);
}
