#pragma once
// When a measured peak above the planner's memory estimate is the estimate's rounding, not an
// under-estimate: the one rule the workbench's Summary and sharding plan (ui/models
// ShardingPlanModel) and anything else comparing a rank's planned and measured peak use.

#include <algorithm>
#include <cstdint>

namespace embedscope::sessions {

/// One allocator block (PyTorch's kMinBlockSize, engine/memory/allocator.h): the estimate counts
/// each buffer rounded to it, so a peak may sit one block off the plan.
inline constexpr int64_t kEstimateRoundingBlock = 512;

/// The most a measured peak may exceed its estimate and still be the estimate's rounding, bytes:
/// one allocator block or 0.1 % of the estimate, whichever is larger (tester48 F14.9: +512 B
/// over a 268.0 KiB plan is 0.19 % of it, one block; tester46 F9: +512 B over 538.3 MiB). 0 for
/// an estimate <= 0 (unknown).
inline int64_t estimate_rounding_bytes(int64_t planned) {
  return planned > 0 ? std::max(kEstimateRoundingBlock, planned / 1000) : 0;
}

/// Whether `peak` is above `planned` by no more than estimate_rounding_bytes(planned). Examples:
/// 268.0 KiB planned, +512 B: true; +1 KiB: false; 538.3 MiB planned, +512 KiB: true; 2.0 GiB
/// planned, +4.9 MiB (0.24 %): false.
inline bool over_within_estimate_rounding(int64_t planned, int64_t peak) {
  return planned > 0 && peak > planned && peak - planned <= estimate_rounding_bytes(planned);
}

}  // namespace embedscope::sessions
