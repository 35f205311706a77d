#pragma once
// The simulated executor (devices.backend simulated): runs the step programs of every rank of a
// modelled cluster (devices.hardware: cost/hardware_profile.h) without computing anything, each
// op timed by the cost model (cost/cost_model.h), and writes a normal session marked simulated.
//
// How the time goes (a discrete-event simulation over all ranks, one step at a time):
//  - each rank has the program's two lanes (compute, comm), each running its ops one at a time
//    in program order; an op starts when its lane is free and every op it waits for
//    (ProgramOp::waits_for) has ended;
//  - a DDP bucket all-reduce (launched_by the dense forward/backward) is ready when the backward
//    pass has produced its gradients: at start + duration x (1/3 + 2/3 x (k+1)/buckets) of the
//    launching op (the forward is a third of the flops: 2 of the 6 per parameter and sample);
//  - a collective starts when every member of its group has reached it (matched by group and
//    order of issue, as NCCL and Gloo match them) and lasts the largest of the members' cost
//    model figures, so a fast rank waits for the slowest: load imbalance becomes exposed
//    communication exactly as on a real cluster;
//  - a comm op runs its collectives one after another; a step ends on a rank when its last op
//    has ended (the pipelines' queued collectives always end inside the step).
//  - sequence numbers: each group's collectives are numbered 1, 2, ... on every member, as the
//    Gloo groups number them (comm/gloo_process_group.h); a comm op's correlation is the sequence
//    of its first collective (the cpu executor's on_comm_lane, threaded/rank.h), so the session's
//    collective instances (sessions/analysis/critical_path.h) form: waits for peers, cross-rank
//    critical-path edges, per-collective bytes (tester51 F6, F1).
//  - cpu ranks (a profile with a cpu block): the compute ops running at once on the machine share
//    its cores - every rank's, whatever the emulated node shape (cost/shared_cores.h core_group) -
//    (ComputeSharing: each progresses at 1 / contention_factor(k) with k ops running),
//    event-driven: when every rank is as far as it can get, the op that ends first ends; a member's scheduling lag at a collective counts the compute ops
//    running at its arrival (conc46). Each step is simulated on its own, so ops of different
//    steps (a rank that began its next step while another finishes) do not share. GPUs (no cpu
//    block): every op its cost-model time, as before.
// Memory: the planner's replay of each rank's allocator (planner/memory_replay.h, what
// estimate_memory and `plan` report): its estimate as the step rows' bytes and the peak allocated,
// its peak_reserved as the peak reserved, and its allocator's figures at each replayed step end
// (allocated, reserved, segments, fragmentation; the first min(iterations, 8), later steps as the
// last of them) as the memory counters a run's rank records (tester51 F7); loads: the program's
// expected ids per shard.
// Not modelled: losses (nothing is trained: the session has none), allocator events, per-peer
// splits of collectives in worlds over 64 ranks (their bytes are kept).

#include <memory>
#include <string>

#include "embedscope/engine/cost/hardware_profile.h"
#include "exec/executor.h"

namespace embedscope::engine::simulated {

class SimulatedExecutor final : public exec::Executor {
 public:
  /// `spec` must have backend simulated and a hardware profile; spec and plan outlive it.
  SimulatedExecutor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options);
  /// Loads the hardware profile: SpecError naming /devices/hardware.
  void prepare() override;
  const profiler::RunClock& clock() const override { return clock_; }
  void run(sessions::SessionWriter* session, RunResult& result) override;

 private:
  const WorkloadSpec& spec_;
  const ShardingPlan& plan_;
  const TrainerOptions& opt_;
  HardwareProfile hw_;
  bool prepared_ = false;
  profiler::RunClock clock_;
};

}  // namespace embedscope::engine::simulated
