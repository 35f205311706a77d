#pragma once
// A run and the host<->device copies of its measured steps: the device-dist tests' count of what
// a change moved off the host (support/device_dist_runs.h; the GPU tests of
// gpu/cuda_resident_dense_test.cpp). Needs the engine's source folder on the include path.
#include <string>

#include "embedscope/engine/exec/run.h"
#include "exec/device/rank_device.h"

namespace embedscope::engine::test_support {

/// A run and the host<->device copies of its measured steps (detail::step_copy_totals).
struct CountedRun {
  RunResult result;
  detail::CopyTotals copies;
};

/// run_training(s, plan, o) with detail::step_copy_totals before and after.
inline CountedRun run_counting_copies(const WorkloadSpec& s, const ShardingPlan& plan, const TrainerOptions& o) {
  const detail::CopyTotals before = detail::step_copy_totals();
  CountedRun r{run_training(s, plan, o), {}};
  const detail::CopyTotals after = detail::step_copy_totals();
  r.copies = {after.host_to_device - before.host_to_device, after.device_to_host - before.device_to_host,
              after.host_to_device_bytes - before.host_to_device_bytes,
              after.device_to_host_bytes - before.device_to_host_bytes};
  return r;
}

/// "N copies in (B B), M out (C B)": the line each copy-count test prints for `c`.
inline std::string copies_text(const detail::CopyTotals& c) {
  return std::to_string(c.host_to_device) + " copies in (" + std::to_string(c.host_to_device_bytes) + " B), " +
         std::to_string(c.device_to_host) + " out (" + std::to_string(c.device_to_host_bytes) + " B)";
}

}  // namespace embedscope::engine::test_support
