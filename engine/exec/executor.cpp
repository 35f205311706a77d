#include "exec/executor.h"

#include <mutex>
#include <string>
#include <unordered_set>

#include "exec/launch/executor.h"
#include "exec/simulated/executor.h"
#include "exec/threaded/executor.h"

namespace embedscope::engine::exec {

#if EMBEDSCOPE_WITH_CUDA
std::unique_ptr<Executor> make_cuda_executor(const WorkloadSpec&, const ShardingPlan&, const TrainerOptions&);
std::unique_ptr<Executor> make_process_cuda_executor(const WorkloadSpec&, const ShardingPlan&, const TrainerOptions&);
#endif

std::unique_ptr<Executor> make_executor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options) {
  if (spec.devices.backend == Backend::cuda) {
#if EMBEDSCOPE_WITH_CUDA
    if (options.process.rank >= 0) return make_process_cuda_executor(spec, plan, options);  // one rank, this process
    return make_cuda_executor(spec, plan, options);
#else
    throw std::logic_error("make_executor: the cuda backend in a build without CUDA");
#endif
  }
  if (spec.devices.backend == Backend::simulated)
    return std::make_unique<simulated::SimulatedExecutor>(spec, plan, options);
  if (options.process.rank >= 0) return std::make_unique<launch::ProcessExecutor>(spec, plan, options);
  return std::make_unique<threaded::ThreadedExecutor>(spec, plan, options);
}

const char* intern_op_name(const std::string& name) {
  static std::mutex mu;
  static std::unordered_set<std::string> names;  // node-based: a name's c_str() never moves
  std::lock_guard<std::mutex> lock(mu);
  return names.insert(name).first->c_str();
}

}  // namespace embedscope::engine::exec
