#pragma once
// CUPTI's records of a cuda run into its session, for both cuda executors (the threaded one:
// every rank of the process; one rank per process: its rank). A SessionDrain
// (profiler/cupti/session_drain.h) on a thread of its own, made at the first step end (when
// Shared::session is set), joins NCCL kernels with the run's collective records and writes each
// step's GPU ops once every rank here has ended the step: a killed run keeps the GPU lanes of
// its ended steps, and no rank waits for CUPTI's flush. Internal to the engine.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "embedscope/profiler/cupti/cupti_tracer.h"
#include "embedscope/profiler/cupti/session_drain.h"
#include "exec/threaded/rank.h"

namespace embedscope::engine::exec {

class GpuTraceDrain {
 public:
  /// `ranks`: the ranks this process runs (their step ends make a drain due), ascending; the
  /// tracer and `sh` outlive this object.
  GpuTraceDrain(profiler::CuptiTracer& tracer, threaded::Shared& sh, std::vector<int32_t> ranks);

  /// Shared::on_step_end's body: rank `rank` ended `step`, host window [start_ns, end_ns) (ns
  /// on the run's clock). Any rank's thread; never throws.
  void step_ended(int rank, int64_t step, int64_t start_ns, int64_t end_ns);

  /// After the ranks' threads have ended: the last drain (a rank that ended inside a step it did
  /// not end, `ranks[i]` being the constructor's i-th rank, has its later records placed in that
  /// step) and the tracer's counters into `session` (null: nothing written). Returns the drain's
  /// first error ("" none). Once.
  std::string finish(const std::vector<std::unique_ptr<threaded::Rank>>& ranks, sessions::SessionWriter* session);

 private:
  profiler::SessionDrain& drain();

  profiler::CuptiTracer& tracer_;
  threaded::Shared& sh_;
  std::vector<int32_t> ranks_;
  std::once_flag once_;
  std::unique_ptr<profiler::SessionDrain> drain_;
};

}  // namespace embedscope::engine::exec
