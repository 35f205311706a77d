#pragma once
// The lookup / update plans of a rank's shards, built once (issue 14: "one TbePlan per shard,
// built once; it depends on shapes only"). A plan of the GPU (cuda::TbePlan) uploads its table
// descriptors with cudaMalloc + cudaMemcpy and frees them with cudaFree, which synchronizes the
// device: built at setup (RankDevice::prepare_shard) and reused by every step, with the step's
// bag count passed to the kernels as an argument. A plan the step asks for that setup did not
// prepare is built then and counted as a miss (a device-synchronizing allocation inside a step).
// Header only, templated on the plan, so the cache is tested with a stand-in plan
// (tests/engine/exec/device_workspace_test.cpp). Internal to the engine.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace embedscope::engine::detail {

/// The shape a shard's plan depends on: rows x cols of fp32 weights (one table, sum pooling,
/// out_stride = cols). Shards of one shape share a plan: it holds nothing else.
struct ShardShape {
  int64_t rows = 0;
  int64_t cols = 0;
  auto operator<=>(const ShardShape&) const = default;
};

/// Plans by ShardShape, built by `build` (which may throw; nothing is cached then).
/// Thread safe (setup and the compute lane may ask from different threads).
template <class Plan>
class ShardPlanCache {
 public:
  using Build = std::function<std::unique_ptr<Plan>(const ShardShape&)>;
  explicit ShardPlanCache(Build build) : build_(std::move(build)) {
    if (!build_) throw std::invalid_argument("ShardPlanCache: a build function is required");
  }
  /// Builds the plan of `shape` if there is none yet (setup). Returns it.
  const Plan& prepare(const ShardShape& shape) { return find_or_build(shape, false); }
  /// The plan of `shape` for a step: the prepared one, or built now and counted in misses().
  const Plan& get(const ShardShape& shape) { return find_or_build(shape, true); }
  int64_t builds() const {  ///< plans built so far (prepare and get)
    std::lock_guard lock(m_);
    return builds_;
  }
  int64_t misses() const {  ///< plans get() had to build (not prepared at setup)
    std::lock_guard lock(m_);
    return misses_;
  }
  size_t size() const {  ///< distinct shapes held
    std::lock_guard lock(m_);
    return plans_.size();
  }

 private:
  const Plan& find_or_build(const ShardShape& shape, bool in_step) {
    if (shape.rows < 0 || shape.cols < 1)
      throw std::invalid_argument("ShardPlanCache: shard shape " + std::to_string(shape.rows) + " x " +
                                  std::to_string(shape.cols) + " (rows >= 0, cols >= 1)");
    std::lock_guard lock(m_);
    if (auto it = plans_.find(shape); it != plans_.end()) return *it->second;
    std::unique_ptr<Plan> plan = build_(shape);
    if (!plan) throw std::logic_error("ShardPlanCache: the build function returned no plan");
    ++builds_;
    if (in_step) ++misses_;
    return *plans_.emplace(shape, std::move(plan)).first->second;
  }

  Build build_;
  mutable std::mutex m_;
  std::map<ShardShape, std::unique_ptr<Plan>> plans_;
  int64_t builds_ = 0, misses_ = 0;
};

/// Device-synchronizing calls a RankDevice made inside its ops (lookup, update, linear layers)
/// since it was created: cudaMalloc / cudaFree of its own scratch (workspace growth) and plans
/// built in a step (ShardPlanCache misses; each is a cudaMalloc pair, a cudaMemcpy and, when
/// replaced, a cudaFree). The blocks of the rank's arena (its DeviceAllocator) are not counted
/// here: the allocator's own statistics (segments) say when it asked the driver. `waits`
/// counts what blocks the rank's thread rather than the device: the host's waits for the rank's
/// compute stream (cudaStreamSynchronize after a copy back, RankDevice::begin_wait); it is kept
/// apart from total(), which stays the device-wide count.
struct DeviceSyncCalls {
  int64_t allocs = 0;       ///< cudaMalloc of scratch (workspace growth)
  int64_t frees = 0;        ///< cudaFree of scratch (replaced by a larger block)
  int64_t plan_misses = 0;  ///< plans built inside a step
  int64_t waits = 0;        ///< host waits for the compute stream (not in total())
  int64_t total() const { return allocs + frees + plan_misses; }
};

}  // namespace embedscope::engine::detail
