// The OOM explanation under max_split_size (tester43 F20): a request below max_split_size never
// takes a free block of max_split_size or more (PyTorch's get_free_block), so when every free
// block large enough is such a block the cause is that rule, not fragmentation; the advice is to
// drop or raise max_split_size, never a capacity the device already has. And the replay's peak
// allocated, inflated by oversize blocks handed whole to small requests, beside the program's own.
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
  // expandable, max_split_size 20 MiB, 62 MiB: A (30 MiB) and B (30 MiB) fill 60 MiB of pages;
  // A freed leaves a 30 MiB free block at the start (>= 20 MiB: oversize). A 4 MiB request may
  // not take it, and the segment cannot grow by 4 MiB (60 + 4 > 62): OOM with 32 MiB free.
  auto a = DeviceAllocator::create({AllocatorKind::expandable, 62 * kF20MiB, 20 * kF20MiB, false});
  const Allocation x = a->allocate(30 * kF20MiB, "weights");
  const Allocation y = a->allocate(30 * kF20MiB, "activations");
  a->free(x);
  try {
    a->allocate(4 * kF20MiB, "forward");
    FAIL() << "expected DeviceOutOfMemory";
  } catch (const DeviceOutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_EQ(m,
              "out of memory allocating 4.0 MiB for forward (expandable allocator): max_split_size: 32.0 MiB are free and "
              "the largest free block is 30.0 MiB, but the free blocks large enough are >= max_split_size (20.0 MiB), "
              "which a 4.0 MiB request does not split (a request below max_split_size never takes a block of "
              "max_split_size or more, as PyTorch's caching allocator), and the 2.0 MiB of capacity not reserved "
              "cannot hold a new 4.0 MiB run of pages for it. Allocated 30.0 MiB, reserved 60.0 MiB of 62.0 MiB; "
              "largest free block 30.0 MiB; most memory held by activations 30.0 MiB. Advice: try without "
              "max_split_size, or with one above 30.0 MiB (so that the large free blocks serve small requests), or "
              "allocating the largest long-lived buffers first");
    EXPECT_EQ(m.find("give the device"), std::string::npos) << m;
  }
  a->free(y);
  // without max_split_size the same program fits: the 4 MiB request splits the free 30 MiB block
  auto b = DeviceAllocator::create({AllocatorKind::expandable, 62 * kF20MiB, 0, false});
  const Allocation bx = b->allocate(30 * kF20MiB, "weights");
  const Allocation by = b->allocate(30 * kF20MiB, "activations");
  b->free(bx);
  const Allocation bz = b->allocate(4 * kF20MiB, "forward");
  EXPECT_EQ(bz.address, bx.address);
  b->free(bz);
  b->free(by);
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
  // expandable, max_split_size 20 MiB: 30 MiB allocated and freed leaves a free 30 MiB tail; a
  // 4 MiB request takes it whole (not split: oversize); 30 MiB more grows the segment; then
  // allocated = 30 + 30 = 60 MiB while the program holds 4 + 30 = 34 MiB (its peak: 34 MiB).
  MemoryTrace t;
  t.actions = {f20_alloc(1, 30 * kF20MiB), f20_free(1), f20_alloc(2, 4 * kF20MiB), f20_alloc(3, 30 * kF20MiB)};
  const ReplayResult r = replay(t, {AllocatorKind::expandable, 1024 * kF20MiB, 20 * kF20MiB, false}, "hand-built");
  EXPECT_FALSE(r.oom);
  EXPECT_EQ(r.peak_allocated, 60 * kF20MiB);
  EXPECT_EQ(r.peak_requested, 34 * kF20MiB);
  EXPECT_EQ(r.peak_reserved, 60 * kF20MiB);
  const ReplayResult plain = replay(t, {AllocatorKind::expandable, 1024 * kF20MiB, 0, false}, "hand-built");
  EXPECT_EQ(plain.peak_allocated, 34 * kF20MiB);
  EXPECT_EQ(plain.peak_requested, 34 * kF20MiB);
}

namespace {
std::filesystem::path f20_scratch() {
  const auto d = std::filesystem::temp_directory_path() / ("embedscope_f20_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}
}  // namespace

TEST(MaxSplitOom, ReplayMemorySaysTheInflatedPeakAndTheSettingWithout) {
  // expandable at 62 MiB, max_split_size 20 MiB: 30 MiB freed leaves a free 30 MiB tail that a
  // 4 MiB request takes whole; 30 MiB more grows the segment to 60 MiB (allocated 60 MiB, the
  // program 34 MiB); the 4 MiB block freed is a free 30 MiB block at the start, which the next
  // 4 MiB request may not take, and 60 + 4 > 62: OOM. Without max_split_size: ok (34 MiB).
  const auto dir = f20_scratch();
  const std::string trace = (dir / "f20_trace.json").string();
  std::ofstream(trace) << R"({"actions": [
    {"action": "alloc", "id": 1, "size": 31457280, "tag": "weights"}, {"action": "free", "id": 1},
    {"action": "alloc", "id": 2, "size": 4194304, "tag": "kjt"},
    {"action": "alloc", "id": 3, "size": 31457280, "tag": "activations"}, {"action": "free", "id": 2},
    {"action": "alloc", "id": 4, "size": 4194304, "tag": "forward"}]})";
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "replay-memory " + trace + " --allocator expandable --max-split-size 20971520 --capacity 65011712",
      dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("expandable, max_split_size 20.0 MiB: peak allocated 60.0 MiB counts whole blocks of "
                       "max_split_size (20.0 MiB) or more handed unsplit to smaller requests; the program itself held "
                       "at most 34.0 MiB (requested bytes, up to the OOM)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("max_split_size: 32.0 MiB are free and the largest free block is 30.0 MiB, but the free blocks "
                       "large enough are >= max_split_size (20.0 MiB), which a 4.0 MiB request does not split"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("or allocating the largest long-lived buffers first (expandable without max_split_size: ok)\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("expandable: peak allocated"), std::string::npos) << r.out;  // no note without max_split_size
  std::filesystem::remove_all(dir);
}
