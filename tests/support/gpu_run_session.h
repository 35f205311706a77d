#pragma once
// A hand-made cuda run's session for the GPU-run figures (ux41 #2, #6): what `stats`, `compare`,
// the Summary page and the Compare view say of GPU busy and of the host threads' exposed
// communication beside the streams'. Header-only; writes `path` (replaced) and returns it.
//
// Two ranks sharing one GPU ("NVIDIA H200 (cuda:0)"), one measured step [0, 1) ms each, 8
// samples a step (8000 samples/s). In us:
//   rank 0  GPU: tbe_forward_kernel [0,100) on gpu_compute, memcpy_dtod (comm) [200,300) on gpu_comm
//           host: dense [0,H0) on compute, all-to-all [H0,1000) on comm      (host exposed 1000-H0)
//   rank 1  GPU: sm90_xmma_gemm [0,G1) on gpu_compute
//           host: dense [0,500) on compute, all-to-all [500,H1) on comm      (host exposed H1-500)
// GPU busy: rank 0 20%, rank 1 G1/10 %. Stream-level exposed communication: rank 0 100 us (the
// copy, nothing computing under it), rank 1 0: 50 us per rank. With `sync_lane` a gpu_sync lane
// (kind "sync") without any wait is declared for rank 0 (a run whose host never waited).

#include <cstdint>
#include <cstdio>
#include <string>

#include "embedscope/sessions/store/session.h"

namespace embedscope::test_support {

struct GpuRunShape {
  int64_t h0_us = 600;   ///< rank 0's host compute end = its collective's start
  int64_t h1_us = 700;   ///< rank 1's collective end
  int64_t g1_us = 400;   ///< rank 1's gemm end
  bool sync_lane = false;
  std::string ended = "complete";
};

inline std::string gpu_run_session(const std::string& path, const GpuRunShape& shape = {}) {
  namespace ss = embedscope::sessions;
  std::remove(path.c_str());
  ss::SessionWriter w(path);
  w.set_metadata("world_size", "2");
  w.set_metadata("backend", "cuda");
  w.set_metadata("workload_name", "hand");
  w.set_metadata("samples_per_step", "8");
  w.set_metadata("warmup_steps", "0");
  for (int r = 0; r < 2; ++r) {
    w.add_rank({r, "h", "NVIDIA H200 (cuda:0)", 1 << 30});
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    w.add_lane({r, 2, "gpu_compute", "stream"});
    w.add_lane({r, 3, "gpu_comm", "stream"});
    w.add_step({0, r, 0, 1000000, 0.5, 0, 0});
  }
  if (shape.sync_lane) w.add_lane({0, 5, "gpu_sync", "sync"});
  using ss::Lane;
  using ss::OpCategory;
  const int64_t us = 1000;
  w.add_ops({ss::OpEvent{0, Lane::gpu_compute, OpCategory::lookup, "tbe_forward_kernel", 0, 0, 100 * us, 0, 0},
             ss::OpEvent{0, Lane::gpu_comm, OpCategory::comm, "memcpy_dtod", 0, 200 * us, 300 * us, 64, 0},
             ss::OpEvent{0, Lane::compute, OpCategory::dense, "dense_forward_backward", 0, 0, shape.h0_us * us, 0, 0},
             ss::OpEvent{0, Lane::comm, OpCategory::comm, "output_dist/all_to_all", 0, shape.h0_us * us, 1000 * us, 0, 0},
             ss::OpEvent{1, Lane::gpu_compute, OpCategory::dense, "sm90_xmma_gemm", 0, 0, shape.g1_us * us, 0, 0},
             ss::OpEvent{1, Lane::compute, OpCategory::dense, "dense_forward_backward", 0, 0, 500 * us, 0, 0},
             ss::OpEvent{1, Lane::comm, OpCategory::comm, "output_dist/all_to_all", 0, 500 * us, shape.h1_us * us, 0, 0}});
  w.close(shape.ended);
  return path;
}

}  // namespace embedscope::test_support
