#pragma once
// The steps of a rank's trace that are incomplete (internal to the Kineto importer): each gets no
// step window, so no step figure counts it, while its events keep its number. Two kinds:
//  - cut: a file cut short inside its last surviving step's host ops (the whole trace's, or each
//    window's of a process whose windows were joined: process_windows.h), import problem
//    last_step_cut (data_loss), with the next step whose span the cut lost;
//  - aborted: the last step of a trace that ends with it and lacks the backward pass or the
//    optimizer step that every earlier step holds (an exception mid-iteration, the profiler then
//    stopped), import problem aborted_last_step (info);
//  - gpu_lost: a step of a cut file whose GPU events the cut lost (Kineto writes a trace's GPU
//    events after its host ops, so a cut among them keeps every host op of every step but not
//    their kernels), import problem cut_lost_gpu_events (data_loss).

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/model/events.h"
#include "importers/kineto_json/trace_model.h"

namespace embedscope::sessions::importers::kineto {

/// One incomplete step of a rank.
struct IncompleteStep {
  enum class Why : uint8_t { cut, aborted, gpu_lost };
  Why why = Why::cut;
  int64_t number = 0;  ///< N of its ProfilerStep#N
  std::string file;    ///< the file (window) it is in
  /// cut only: the step whose span was lost with the cut (N + 1; -1: none, its span survived),
  /// which the host events in [lost_from, lost_to) (trace clock ns) belong to.
  int64_t lost = -1;
  int64_t lost_from = 0, lost_to = std::numeric_limits<int64_t>::max();
  /// aborted only: what every earlier step held and this one lacks, in words ("the backward pass
  /// (autograd::engine::evaluate_function / *Backward ops) and the optimizer step (Optimizer.step#*)")
  std::string lacks;
  int64_t earlier_steps = 0;  ///< aborted only: the earlier complete steps compared
  /// gpu_lost only: the step's kernel / copy launches (cuda_runtime calls) and how many of them
  /// have no GPU event of their correlation in the file
  int64_t launches = 0, launches_lost = 0;
  /// gpu_lost only: the step ends after the frontier (the trace ts, ns, of the file's last event
  /// before its cut, a runtime call or GPU event): its later runtime and GPU events were lost
  bool past_frontier = false;
  int64_t frontier = 0;
};

/// The incomplete steps of `tr`, whose steps sorted by start are `steps`. Cut: for the trace's cut
/// (RankTrace::cut) and each earlier window's (RankTrace::earlier_window_cuts), the last step that
/// starts before the next window (the trace's last step for the final cut) when the last event the
/// file held before the cut is a host op inside it, on its lane (any lane of the legacy profiler,
/// which writes every event in start order); the next step's span was lost with it when no step
/// has its number. Aborted (conservative: a normal last step has both phases, or its trace holds
/// neither): a trace not cut whose last step is no cut step, with at least one earlier step, no
/// host event starting after its end, and no host event in it of a phase that every earlier step
/// holds: the backward pass (a name starting "autograd::engine::evaluate_function" or holding
/// "Backward", PyTorch's autograd node names) or the optimizer step ("Optimizer.step#", the
/// record_function torch.optim.Optimizer wraps step() in). GPU lost: in a trace cut short (the
/// trace's own cut or an earlier window's) of which at least one GPU event survived, each step
/// not already incomplete that holds a kernel or copy launch (a runtime call named *Launch* or
/// *Memcpy*, with a correlation) whose GPU event (same correlation) is not in the file: the
/// cut lost its GPU work, so its GPU figures would count idle what was lost; and, when the last
/// event before the trace's own cut is a runtime call or a GPU event (the cut fell among them:
/// Kineto writes them after every host op, roughly in time order), each step that ends after
/// that event's ts (conservative: such a step's later launches and kernels were written after
/// the cut, as in the damaged nccl_data, whose surviving launches all had their kernels). (In the whole
/// real traces every such launch has its GPU event: nccl_data 3660 of 3660, trace_diff_test
/// 9690 of 9690; memsets are left out, 3 of nccl_data's have none.) A trace of whose GPU events
/// none survived keeps its steps: its figures fall back to the host threads, whole per step.
std::vector<IncompleteStep> incomplete_steps(const RankTrace& tr, const std::vector<Step>& steps, const Interner& names);

/// Says each of `incomplete` as an import problem of rank `rank`: last_step_cut (data_loss) for a
/// cut step, with the count of its events and of the lost step's events and collectives in `ops`
/// and `collectives` (by their step); aborted_last_step (info) for an aborted one, with what it
/// lacks and that it is out of the step figures; cut_lost_gpu_events (data_loss, once per rank
/// for all its gpu_lost steps) naming the steps and the launches without their GPU event.
void say_incomplete_steps(const std::vector<IncompleteStep>& incomplete, int32_t rank, const std::vector<OpEvent>& ops,
                          const std::vector<CollectiveRecord>& collectives, ImportProblems& problems);

}  // namespace embedscope::sessions::importers::kineto
