#pragma once
// What a rank's device did in each step, added to the process-wide totals after the step
// (Rank::main): the device-synchronizing calls and host waits (detail::add_step_sync_calls), the
// resident dense part's host<->device copies of a measured step (detail::add_dense_copies) and
// every host<->device copy of a measured step (detail::add_step_copies). Internal to the
// threaded executor.

#include <cstdint>

#include "exec/device/rank_device.h"
#include "exec/threaded/rank_dense_device.h"

namespace embedscope::engine::threaded {

/// The running counters of one rank's device (RankDevice::sync_calls, RankDevice::copies) and
/// of its resident dense part (RankDenseDevice::counted) as last seen; add_step adds their
/// increase since then. Counters of a device or dense part that is absent count nothing.
class StepDeviceCounts {
 public:
  StepDeviceCounts() = default;
  /// Starts from the counters now (after setup: setup's copies and waits are no step's). Both
  /// pointers may be null (the cpu backend; a dense part that is not resident); they outlive
  /// this object.
  StepDeviceCounts(const detail::RankDevice* gpu, const RankDenseDevice* dense) : gpu_(gpu), dense_(dense) {
    if (gpu_) {
      sync_calls_ = gpu_->sync_calls().total();
      waits_ = gpu_->sync_calls().waits;
      copies_ = gpu_->copies();
    }
    if (dense_) dense_copies_ = dense_->counted();
  }
  /// Adds the increase since the last call (or construction) to the process-wide totals: the
  /// sync calls and waits to the measured or warm-up ones, the copies only when `measured`.
  void add_step(bool measured) {
    if (gpu_) {
      const detail::DeviceSyncCalls now = gpu_->sync_calls();
      detail::add_step_sync_calls(measured, now.total() - sync_calls_, now.waits - waits_);
      sync_calls_ = now.total();
      waits_ = now.waits;
    }
    if (dense_) {  // the resident dense part's host<->device copies
      const detail::DenseCopyTotals now = dense_->counted();
      if (measured) detail::add_dense_copies(minus(now, dense_copies_));
      dense_copies_ = now;
    }
    if (gpu_) {  // every host<->device copy of the step (detail::step_copy_totals)
      const detail::CopyTotals now = gpu_->copies();
      if (measured) detail::add_step_copies(minus(now, copies_));
      copies_ = now;
    }
  }

 private:
  static detail::CopyTotals minus(const detail::CopyTotals& a, const detail::CopyTotals& b) {
    return {a.host_to_device - b.host_to_device, a.device_to_host - b.device_to_host,
            a.host_to_device_bytes - b.host_to_device_bytes, a.device_to_host_bytes - b.device_to_host_bytes};
  }
  const detail::RankDevice* gpu_ = nullptr;
  const RankDenseDevice* dense_ = nullptr;
  int64_t sync_calls_ = 0, waits_ = 0;
  detail::DenseCopyTotals dense_copies_{};
  detail::CopyTotals copies_{};
};

}  // namespace embedscope::engine::threaded
