// garbage_collection_threshold in the caching allocator: the blocks PyTorch's
// garbage_collect_cached_blocks (c10/cuda/CUDACachingAllocator.cpp) releases, hand-computed from
// its code: a block's age is the number of get_free_block calls on its pool (one per malloc) since
// it became free (BlockPool::insert_into_blocks sets gc_count_base); malloc, when no cached block
// serves the request, collects before reserving: with reserved > t x allowed memory, passes that
// release every unsplit large-pool free block whose age is >= the average age of those left, until
// the bytes released reach reserved - t x allowed. The small pool is never collected.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/workload/spec.h"
#include "support/cli_run.h"

using namespace embedscope::engine;

namespace {
constexpr int64_t kM61MiB = int64_t{1} << 20;

struct M61Recorder {
  std::vector<std::pair<int64_t, int64_t>> segment_frees;  // (address, bytes)
};

std::unique_ptr<DeviceAllocator> m61_make(double threshold, M61Recorder& rec) {
  AllocatorConfig c;
  c.kind = AllocatorKind::caching;
  c.capacity_bytes = 100 * kM61MiB;
  c.back_with_memory = false;
  c.garbage_collection_threshold = threshold;
  auto a = DeviceAllocator::create(c);
  a->set_listener([&rec](const AllocatorEvent& e) {
    if (e.kind == AllocatorEvent::Kind::segment_free) rec.segment_frees.emplace_back(e.address, e.size);
  });
  return a;
}
}  // namespace

// capacity 100 MiB, threshold 0.5: collection when reserved > 50 MiB (large-pool ages L = that
// pool's get_free_block calls so far).
//  S 512 KiB (small pool: a 2 MiB segment; L stays 0), freed.       reserved  2
//  A 12 MiB (L=1), B 14 MiB (L=2), C 16 MiB (L=3): own segments.     reserved 44
//  free A (base 3).  X 18 MiB (L=4): no cached block fits; 44 <= 50, nothing collected.  62
//  free B (base 4).  a 512 KiB request (small pool: L unchanged), freed again.
//  Y 24 MiB (L=5): no fit; 62 > 50, target 12; A age 2, B age 1, average 1.5: A is released
//    (12 >= 12: done), B stays.                                       reserved 50 + 24 = 74
//  free C (base 5), free Y (base 5).
//  Z 30 MiB (L=6): no fit; 74 > 50, target 24; B age 2, C 1, Y 1, average 4/3: pass 1 releases
//    B (14 < 24); pass 2, average 1: C and Y (both, the pass does not stop at the target).
//    reserved 74 - 54 = 20 (S 2 + X 18), + Z 30 = 50; S, of the small pool, stays.
// Without the threshold: Y takes 62 + 24 = 86; Z finds 86 + 30 > 100, releases every free
// segment (S, A, B, C, Y: release_cached_blocks) and retries: 18 + 30 = 48.
TEST(Mem61GcThreshold, ReleasesTheBlocksPyTorchWould) {
  M61Recorder rec;
  auto a = m61_make(0.5, rec);
  const Allocation s = a->allocate(512 * 1024, "s");
  a->free(s);
  const Allocation A = a->allocate(12 * kM61MiB, "a"), B = a->allocate(14 * kM61MiB, "b"), C = a->allocate(16 * kM61MiB, "c");
  EXPECT_EQ(a->reserved_bytes(), 44 * kM61MiB);
  a->free(A);
  const Allocation X = a->allocate(18 * kM61MiB, "x");
  EXPECT_TRUE(rec.segment_frees.empty());
  EXPECT_EQ(a->reserved_bytes(), 62 * kM61MiB);
  a->free(B);
  a->free(a->allocate(512 * 1024, "s2"));  // served by S's cached segment: the large pool's ages do not move
  const Allocation Y = a->allocate(24 * kM61MiB, "y");
  ASSERT_EQ(rec.segment_frees.size(), 1u);
  EXPECT_EQ(rec.segment_frees[0], std::make_pair(A.address, 12 * kM61MiB));  // the older one only
  EXPECT_EQ(a->reserved_bytes(), 74 * kM61MiB);
  a->free(C);
  a->free(Y);
  const Allocation Z = a->allocate(30 * kM61MiB, "z");
  ASSERT_EQ(rec.segment_frees.size(), 4u);
  EXPECT_EQ(rec.segment_frees[1], std::make_pair(B.address, 14 * kM61MiB));  // pass 1
  EXPECT_EQ(rec.segment_frees[2], std::make_pair(C.address, 16 * kM61MiB));  // pass 2, size order
  EXPECT_EQ(rec.segment_frees[3], std::make_pair(Y.address, 24 * kM61MiB));
  const MemoryStats st = a->stats();
  EXPECT_EQ(st.reserved, 50 * kM61MiB);
  EXPECT_EQ(st.peak_reserved, 74 * kM61MiB);
  EXPECT_EQ(st.alloc_retries, 0);
  EXPECT_EQ(st.segments, 3);  // S (small, cached), X, Z
  (void)X;
  (void)Z;

  M61Recorder none;
  auto b = m61_make(0, none);
  const Allocation s0 = b->allocate(512 * 1024, "s");
  b->free(s0);
  const Allocation A0 = b->allocate(12 * kM61MiB, "a"), B0 = b->allocate(14 * kM61MiB, "b"), C0 = b->allocate(16 * kM61MiB, "c");
  b->free(A0);
  b->allocate(18 * kM61MiB, "x");
  b->free(B0);
  b->free(b->allocate(512 * 1024, "s2"));
  const Allocation Y0 = b->allocate(24 * kM61MiB, "y");
  EXPECT_EQ(b->reserved_bytes(), 86 * kM61MiB);
  EXPECT_TRUE(none.segment_frees.empty());
  b->free(C0);
  b->free(Y0);
  b->allocate(30 * kM61MiB, "z");
  const MemoryStats st0 = b->stats();
  EXPECT_EQ(st0.reserved, 48 * kM61MiB);
  EXPECT_EQ(st0.peak_reserved, 86 * kM61MiB);
  EXPECT_EQ(st0.alloc_retries, 1);
  EXPECT_EQ(none.segment_frees.size(), 5u);  // S, A, B, C, Y
}

// A cached block that serves a request is no longer free; a split block (part of a segment) is
// never collected (is_split), only whole free segments.
TEST(Mem61GcThreshold, SplitBlocksAndTheSmallPoolStay) {
  M61Recorder rec;
  auto a = m61_make(0.1, rec);  // collects above 10 MiB
  const Allocation p = a->allocate(4 * kM61MiB, "p");   // a 20 MiB segment, split: 4 MiB + 16 MiB free
  const Allocation q = a->allocate(12 * kM61MiB, "q");  // taken from the 16 MiB rest: 4 MiB left free
  const Allocation s = a->allocate(1000, "s");       // small pool, 2 MiB segment
  a->free(s);
  a->free(q);  // the 20 MiB segment: p live, 16 MiB free beside it (split)
  a->allocate(30 * kM61MiB, "r");  // 22 > 10 MiB: nothing unsplit in the large pool, nothing released
  EXPECT_TRUE(rec.segment_frees.empty());
  EXPECT_EQ(a->reserved_bytes(), 52 * kM61MiB);
  (void)p;
}

TEST(Mem61GcThreshold, ThresholdOutsideZeroOneIsRefused) {
  for (const double t : {-0.1, 1.0, 1.5}) {
    AllocatorConfig c;
    c.capacity_bytes = 100 * kM61MiB;
    c.back_with_memory = false;
    c.garbage_collection_threshold = t;
    try {
      DeviceAllocator::create(c);
      ADD_FAILURE() << t << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("garbage_collection_threshold must be > 0 and < 1"), std::string::npos)
          << e.what();
    }
  }
}

// A recorded run with the threshold (make_mem61.py, the sequence above as PyTorch records it):
// the recorded settings replay its collections and reproduce the dump; caching without the
// threshold reserves more; --garbage-collection-threshold adds the caching row with it.
TEST(Mem61GcThreshold, SnapshotReplayWithAndWithoutTheThreshold) {
  const auto dir = embedscope::test_support::fresh_scratch("mem61_gc_threshold");
  const std::string snap = std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/mem61_gc.pickle";
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI,
      "replay-memory " + snap + " --allocator caching --garbage-collection-threshold 0.5 --capacity 104857600 --json", dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto dev = nlohmann::json::parse(r.out)["devices"][0];
  EXPECT_EQ(dev["trace_peak_reserved_bytes"], 74 * kM61MiB);
  EXPECT_TRUE(dev["recorded_settings_reproduce_the_dump"].get<bool>()) << dev.dump(1);
  const auto& rows = dev["results"];
  ASSERT_EQ(rows.size(), 3u);  // recorded (caching, 0.5), caching, caching with 0.5
  EXPECT_DOUBLE_EQ(rows[0]["garbage_collection_threshold"].get<double>(), 0.5);
  EXPECT_EQ(rows[0]["peak_reserved_bytes"], 74 * kM61MiB);
  EXPECT_EQ(rows[0]["final_reserved_bytes"], 50 * kM61MiB);
  EXPECT_EQ(rows[0]["final_segments"], 3);
  EXPECT_DOUBLE_EQ(rows[1]["garbage_collection_threshold"].get<double>(), 0);
  EXPECT_EQ(rows[1]["peak_reserved_bytes"], 86 * kM61MiB);
  EXPECT_EQ(rows[1]["final_reserved_bytes"], 48 * kM61MiB);
  EXPECT_EQ(rows[2]["label"], "caching, garbage_collection_threshold 0.5");
  EXPECT_EQ(rows[2]["peak_reserved_bytes"], 74 * kM61MiB);
  for (const auto& row : rows) EXPECT_EQ(row["result"], "ok") << row.dump();

  const auto bad = embedscope::test_support::run_cli(EMBEDSCOPE_CLI,
                                                     "replay-memory " + snap + " --garbage-collection-threshold 1", dir);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE((bad.out + bad.err).find("must be a number > 0 and < 1"), std::string::npos) << bad.out << bad.err;
}

// The workload key: accepted for caching, kept by to_json, handed to the rank's allocator.
TEST(Mem61GcThreshold, WorkloadKeyIsReadAndWritten) {
  nlohmann::json j = nlohmann::json::parse(R"({
    "tables": [{"name": "t0", "num_embeddings": 10, "embedding_dim": 4, "feature_names": ["f0"]}],
    "features": [{"name": "f0"}], "batch_size": 8, "devices": {"count": 1},
    "memory": {"allocator": "caching", "garbage_collection_threshold": 0.6}})");
  const WorkloadSpec s = parse_workload(j, "gc.json");
  EXPECT_DOUBLE_EQ(s.memory.garbage_collection_threshold, 0.6);
  EXPECT_DOUBLE_EQ(to_json(s)["memory"]["garbage_collection_threshold"].get<double>(), 0.6);
  j["memory"].erase("garbage_collection_threshold");
  EXPECT_FALSE(to_json(parse_workload(j, "none.json"))["memory"].contains("garbage_collection_threshold"));
}
