#pragma once
// `run` and `plan` of an lm_embedding workload (workload/lm_spec.h, exec/lm_run.h): run.cpp
// and plan.cpp hand a workload with "model": "lm_embedding" to these (commands/lm.cpp).

#include <atomic>
#include <string>

#include "embedscope/engine/exec/run.h"
#include "workload_args.h"

namespace embedscope::cli {

/// Runs the workload on CPU ranks, writes the session `output` ("" = the default name), and
/// prints the summary: plan, step time, tokens/s, loss, communication by collective (bytes,
/// time, share of the step), bytes on the wire per token, per rank bytes and memory estimate.
/// Returns 0, or 1 when the run failed (the session says how). Bad input throws SpecError, and so
/// does a workload that does not fit: a measured run's ranks in this machine's memory, a
/// --simulate run's ranks in the profile's GPU memory (lm_gpu_memory_verdict, as plan --simulate
/// and scaling judge it), before anything is written.
/// `cancel` and `flight`: what cmd_run's signal handlers (interrupt.h, installed first thing)
/// set; a cancel asked before the run starts ends it without a session (exit 0), one asked
/// during the run (cpu or simulated) stops it after the current step.
int cmd_run_lm(WorkloadArgs& a, bool as_json, std::string output, bool overwrite, std::atomic<bool>& cancel,
               const engine::FlightDumpRequest& flight);
/// Prints the plan of the workload: vocabulary padding, each rank's rows, the memory estimate
/// per rank (planner/lm_memory_estimate.h) and, for a measured backend, the verdict against this
/// machine's available memory ("fits" / "DOES NOT FIT ... `run` refuses it"; --json: "fits" and
/// "refusal", run's refusal); with --simulate PROFILE the verdict against the profile's GPU memory
/// on each rank's peak reserved (lm_gpu_memory_verdict, scaling's check: "memory       fits on P:
/// ..." / "DOES NOT FIT on P: ..."; --json: "fits", "refusal", "device_memory_bytes",
/// "memory_reserved_bytes_per_gpu", ...), and the stand-in body's share of the simulated step.
/// Returns 0 either way, as a DLRM plan's verdict on this machine; bad input (the workload, a
/// flag) throws SpecError.
int cmd_plan_lm(WorkloadArgs& a, bool as_json);

}  // namespace embedscope::cli
