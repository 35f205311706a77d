// A cuda run's synchronization waits (CUPTI SYNCHRONIZATION records on the lane of kind `sync`,
// profiler::kSyncLane) are neither compute nor comm: the overlap figures, HTA's kernel figures
// and the critical path leave them out (issue 14). And CUPTI's MEMORY2 events (`cupti_alloc` /
// `cupti_free`) stand beside the rank's own allocator history without changing it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/analysis/memory_history.h"
#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;

namespace {
// One measured step [0, 1000) of rank 0: a compute kernel [0, 400) on gpu_compute, an NCCL
// kernel [300, 700) on gpu_comm and the host's cudaStreamSynchronize [400, 900) on gpu_sync.
std::string sync_session() {
  const auto path = std::filesystem::temp_directory_path() / ("es_sync_lane_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  SessionWriter w(path.string());
  w.set_metadata("world_size", "1");
  w.add_lane({0, 0, "compute", "thread"});
  w.add_lane({0, 2, "gpu_compute", "stream"});
  w.add_lane({0, 3, "gpu_comm", "stream"});
  w.add_lane({0, 5, "gpu_sync", "sync"});
  w.add_ops({OpEvent{0, Lane::gpu_compute, OpCategory::other, "embedding_lookup_kernel", 0, 0, 400, 0, 0},
             OpEvent{0, Lane::gpu_comm, OpCategory::comm, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 300, 700, 0, 0},
             OpEvent{0, static_cast<Lane>(5), OpCategory::other, "cudaStreamSynchronize", 0, 400, 900, 0, 0}});
  w.add_step({0, 0, 0, 1000, 0.5, 0, 0});
  w.close("complete");
  return path.string();
}
}  // namespace

TEST(SyncLane, WaitsAreNeitherComputeNorOnTheCriticalPath) {
  const std::string path = sync_session();
  {
    SessionReader r(path);
    const RunStats st = analyze(r);
    ASSERT_EQ(st.ranks.size(), 1u);
    // by hand: compute [0,400) = 400, comm [300,700) = 400, both [300,400) = 100 -> 25%;
    // exposed 300; busy [0,700): idle 1000 - 700 = 300 (the wait [400,900) is none of them)
    EXPECT_EQ(st.ranks[0].compute_ns, 400);
    EXPECT_EQ(st.ranks[0].comm_ns, 400);
    EXPECT_EQ(st.ranks[0].overlap_ns, 100);
    EXPECT_DOUBLE_EQ(st.overlap_pct, 25.0);
    EXPECT_EQ(st.ranks[0].exposed_comm_ns, 300);
    EXPECT_EQ(st.ranks[0].idle_ns, 300);
    // the last op on the path is the NCCL kernel at 700, not the wait at 900: kernel [0,300)
    // then the all-reduce [300,700) (launched while the kernel ran), and the rest of the step's
    // window no op on the path covers, [700, 1000), a gap: 1000 ns
    ASSERT_EQ(st.critical_paths.size(), 1u);
    EXPECT_EQ(st.critical_path_ns, 1000);
    const auto& segs = st.critical_paths[0].segments;
    ASSERT_EQ(segs.size(), 3u);
    EXPECT_EQ(segs[0].lane, 2);
    EXPECT_EQ(segs[0].end_ns, 300);
    EXPECT_EQ(segs[1].lane, 3);
    EXPECT_EQ(segs[1].end_ns, 700);
    EXPECT_EQ(segs[2].kind, PathSegment::Kind::gap);
    EXPECT_EQ(segs[2].end_ns, 1000);
    for (const auto& e : st.critical_path) EXPECT_NE(r.name(e.name_id), "cudaStreamSynchronize");
    // HTA's kernel figures: streams only, the wait in neither class; first to last kernel 700
    const auto k = gpu_kernel_figures(r);
    ASSERT_EQ(k.size(), 1u);
    EXPECT_EQ(k[0].kernel_time_ns, 700);
    EXPECT_EQ(k[0].compute_ns, 400);
    EXPECT_EQ(k[0].overlap_ns, 100);
    EXPECT_DOUBLE_EQ(k[0].overlap_pct, 25.0);
    EXPECT_EQ(k[0].gpu_events, 2);
  }
  std::filesystem::remove(path);
}

TEST(SyncLane, CuptiMemoryEventsLeaveTheAllocatorHistoryAsItIs) {
  // the arena's block of 1,000 B at 0x1000 inside the 4 KiB segment CUPTI saw cudaMalloc'ed at
  // the same address; then the block freed and the segment cudaFree'd
  std::vector<MemoryEvent> ev{{0, 10, 0, "cupti_alloc", 0x1000, 4096, 4096, "cuda_device"},
                              {0, 20, 0, "alloc", 0x1000, 1000, 1000, "weights"},
                              {0, 30, 0, "free", 0x1000, 1000, 1000, "weights"},
                              {0, 40, 0, "cupti_free", 0x1000, 4096, 4096, "cuda_device"}};
  const MemoryHistory h = MemoryHistory::build(ev, nullptr);
  ASSERT_EQ(h.size(), 4);
  EXPECT_TRUE(h.problems().empty()) << h.problems().front();
  EXPECT_EQ(h.allocated_after(0), 0);     // CUPTI's allocation is not the allocator's
  EXPECT_EQ(h.allocated_after(1), 1000);
  EXPECT_EQ(h.allocated_after(2), 0);
  EXPECT_EQ(h.allocated_after(3), 0);
  EXPECT_EQ(h.entries()[0].kind, MemoryEntryKind::other);
  EXPECT_EQ(h.entries()[3].kind, MemoryEntryKind::other);
}

// The engine's own copies (CUPTI MEMCPY records on gpu_copy, category memcpy, named memcpy_htod)
// are memory kernels as HTA counts them: in neither class, so not in the compute column
// (tester38 #3: a cuda session's "compute" was kernels plus copies, 3x the kernels alone).
TEST(SyncLane, EngineCopiesAreMemoryKernelsNotComputation) {
  const auto path = std::filesystem::temp_directory_path() / ("es_copy_class_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    SessionWriter w(path.string());
    w.set_metadata("world_size", "1");
    w.add_lane({0, 0, "compute", "thread"});
    w.add_lane({0, 2, "gpu_compute", "stream"});
    w.add_lane({0, 4, "gpu_copy", "stream"});
    w.add_ops({OpEvent{0, Lane::gpu_compute, OpCategory::lookup, "tbe_forward_kernel", 0, 0, 400, 0, 0},
               OpEvent{0, Lane::gpu_copy, OpCategory::memcpy, "memcpy_htod", 0, 500, 800, 4096, 0}});
    w.add_step({0, 0, 0, 1000, 0.5, 0, 0});
    w.close("complete");
  }
  {
    SessionReader r(path.string());
    const auto k = gpu_kernel_figures(r);
    ASSERT_EQ(k.size(), 1u);
    // by hand: first kernel 0 to last end 800; union [0,400) + [500,800) = 700, idle 100;
    // compute [0,400) = 400; non-compute = 800 - 400 - 100 = 300 (the copy)
    EXPECT_EQ(k[0].kernel_time_ns, 800);
    EXPECT_EQ(k[0].idle_ns, 100);
    EXPECT_EQ(k[0].compute_ns, 400);
    EXPECT_EQ(k[0].non_compute_ns, 300);
  }
  std::filesystem::remove(path);
}

// The chrome export puts the waits in Kineto's category for them, cuda_sync (tester38: "other").
TEST(SyncLane, TheChromeExportCallsTheWaitsCudaSync) {
  const std::string path = sync_session();
  {
    SessionReader r(path);
    std::ostringstream out;
    export_chrome_trace(r, out);
    const auto j = nlohmann::json::parse(out.str());
    int waits = 0, kernels = 0;
    for (const auto& e : j["traceEvents"]) {
      if (e.value("ph", "") != "X") continue;
      if (e["name"] == "cudaStreamSynchronize") waits += e["cat"] == "cuda_sync";
      if (e["name"] == "embedding_lookup_kernel") kernels += e["cat"] == "other";
    }
    EXPECT_EQ(waits, 1);
    EXPECT_EQ(kernels, 1);  // a stream lane's op keeps its category
  }
  std::filesystem::remove(path);
}
