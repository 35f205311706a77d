#pragma once
// The threaded executor: one Rank (rank.h) per device, each on its own thread, over Shared run
// state. The cuda executor (exec/cuda/) derives from it and adds the devices' set-up and what
// the devices recorded. Internal to the engine.

#include "exec/executor.h"
#include "rank.h"

namespace embedscope::engine::threaded {

class ThreadedExecutor : public exec::Executor {
 public:
  ThreadedExecutor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options);
  ~ThreadedExecutor() override;
  void run(sessions::SessionWriter* session, RunResult& result) override;
  const profiler::RunClock& clock() const override { return sh_.tracer.clock(); }

 protected:
  /// After every rank's thread has ended, before the tracer's spans go into the session: what
  /// the devices recorded (the cuda executor's GPU ops and metadata). Nothing by default.
  virtual void after_ranks(sessions::SessionWriter* /*session*/) {}

  Shared sh_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace embedscope::engine::threaded
