#pragma once
// A test hook for the device path's failure handling (issue 14, "a GPU that disappears or errors
// mid-run"): the environment variable EMBEDSCOPE_INJECT_DEVICE_FAULT=RANK:CALL:N[:ERROR] makes
// the N-th call (1-based, warm-up included) of CALL on rank RANK's device throw the
// cuda::CudaError the CUDA runtime's failure would raise there, e.g.
//   EMBEDSCOPE_INJECT_DEVICE_FAULT=1:lookup:3                       (cudaErrorLaunchFailure)
//   EMBEDSCOPE_INJECT_DEVICE_FAULT=0:to_host:5:cudaErrorDevicesUnavailable  (the GPU went away)
// The run then ends as a real device error ends it: crashed, "rank R: <call> failed: <error>
// (...)", with every record up to there in the session. Works on the GPU (CudaRankDevice) and on
// the host stand-in (TrainerOptions::emulate_device) alike, so the handling is tested here.
// Internal to the engine.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/device/rank_device.h"

namespace embedscope::engine::detail {

/// A parsed EMBEDSCOPE_INJECT_DEVICE_FAULT.
struct DeviceFault {
  int rank = 0;
  std::string call;                               ///< a RankDevice method: lookup, update, to_host, ...
  int64_t nth = 1;                                ///< the call that fails, 1-based
  std::string error = "cudaErrorLaunchFailure";   ///< the cudaError_t name it reports
};

/// The calls that can fail: lookup, update, linear_forward, linear_backward, to_device,
/// to_host, comm_copy, comm_add, comm_to_host, comm_sync.
const std::vector<std::string>& injectable_device_calls();

/// Parses `value` (RANK:CALL:N[:ERROR]) for a run of `world_size` ranks. Throws
/// std::invalid_argument naming EMBEDSCOPE_INJECT_DEVICE_FAULT, the value and what is wrong: a
/// rank outside [0, world_size), a call not in injectable_device_calls() (they are listed), N
/// not a whole number >= 1, an ERROR that is not cudaErrorLaunchFailure, cudaErrorIllegalAddress,
/// cudaErrorDevicesUnavailable or cudaErrorNoDevice.
DeviceFault parse_device_fault(const std::string& value, int world_size);

/// EMBEDSCOPE_INJECT_DEVICE_FAULT from the environment (nullopt when unset or empty), parsed.
std::optional<DeviceFault> device_fault_from_env(int world_size);

/// Wraps devices[fault.rank] so that its fault.nth call of fault.call throws cuda::CudaError
/// "<call> failed: <error> (<its text>) [injected: EMBEDSCOPE_INJECT_DEVICE_FAULT]"; every other
/// call, and every call of the other ranks, goes to the device unchanged. A null devices[fault.rank]
/// (one rank per process: that rank runs elsewhere) is left as it is.
void inject_device_fault(std::vector<std::unique_ptr<RankDevice>>& devices, const DeviceFault& fault);

}  // namespace embedscope::engine::detail
