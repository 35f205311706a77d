#include "exec/cuda/gpu_trace_drain.h"

#include <map>
#include <utility>

namespace embedscope::engine::exec {

GpuTraceDrain::GpuTraceDrain(profiler::CuptiTracer& tracer, threaded::Shared& sh, std::vector<int32_t> ranks)
    : tracer_(tracer), sh_(sh), ranks_(std::move(ranks)) {}

profiler::SessionDrain& GpuTraceDrain::drain() {
  std::call_once(once_, [this] {
    drain_ = std::make_unique<profiler::SessionDrain>(
        tracer_, sh_.session, ranks_,
        -sh_.spec.warmup_steps - 1,  // the step of setup's work (Rank::setup)
        [this](int64_t since_ns) {   // the collective records that can hold NCCL kernels from since_ns on
          std::vector<sessions::CollectiveRecord> out;
          std::lock_guard<std::mutex> lock(sh_.records_mu);
          for (const auto& r : sh_.records)
            if (r.end_ns + 20000 >= since_ns) out.push_back(r);
          return out;
        },
        profiler::SessionDrain::Mode::background);
  });
  return *drain_;
}

void GpuTraceDrain::step_ended(int rank, int64_t step, int64_t start_ns, int64_t end_ns) {
  drain().step_ended(rank, step, start_ns, end_ns);
}

std::string GpuTraceDrain::finish(const std::vector<std::unique_ptr<threaded::Rank>>& ranks,
                                  sessions::SessionWriter* session) {
  std::map<int32_t, profiler::RunningStep> running;  // what the step-end drains left, and a failed rank's last step
  for (size_t i = 0; i < ranks.size() && i < ranks_.size(); ++i) {
    const auto& win = ranks[i]->windows;
    const int64_t in = ranks[i]->step_in_progress(), start = ranks[i]->step_in_progress_start_ns();
    if (start >= 0 && (win.empty() || in > win.back().step)) running[ranks_[i]] = {in, start};
  }
  drain().finish(running);
  if (session) tracer_.write_metadata(*session);
  return drain().error();
}

}  // namespace embedscope::engine::exec
