#pragma once
// How long a measured cpu step of an lm_embedding workload will take on this machine, said
// before the run starts (tester45 F10: `run --preset llama3_8b_embedding`, a preset docs/llm.md calls
// "plan only", started without a word and had not finished a step after 2.5 minutes). A lower
// bound, not the cost model's figure: the step's compute flops (program/lm_program.h: the body's
// and the output projection's GEMMs, 2 x multiply-adds) at this machine's fp32 GEMM rate measured
// just before, on as many cores as there are ranks (the ranks are threads of one process). Memory
// traffic, the cross-entropy's element-wise work, collectives and contention only add to it.

#include <cstdint>
#include <string>

#include "embedscope/engine/workload/lm_spec.h"

namespace embedscope::engine {

/// The compute flops of one step over all ranks: the sum of every rank's compute ops' flops in
/// build_lm_step_program(spec, rank, 0). Example: llama3_8b_embedding (8 ranks, sequence
/// parallel, 8,192 tokens, hidden 4,096, 16,032 vocabulary rows a rank, one body layer) is
/// dominated by the projection: 8 x 6 x 8,192 x 16,032 x 4,096 = 25.8 TFLOP. Throws SpecError
/// for an invalid spec.
int64_t lm_step_flops(const LmWorkloadSpec& spec);

/// This machine's fp32 GEMM rate on one thread, flops per CPU second: the engine's projection
/// product (Eigen, row-major, [256 x 512] x [512 x 512]^T) timed by thread CPU time
/// (CLOCK_THREAD_CPUTIME_ID, so time slices lost to other processes do not count), the best of 3
/// timings of >= 20 ms each. About 0.1 s.
double measure_gemm_flops_per_s();

/// The lower bound of a step's seconds: `flops` / (`flops_per_s_per_core` x min(`cores`,
/// `ranks`)); 0 when the rate or the cores are not positive. Pure. Example: 25.8e12 flops at 50
/// GFLOP/s a core, 2 cores, 8 ranks: 258 s.
double host_step_seconds(int64_t flops, double flops_per_s_per_core, int cores, int ranks);

/// "at least 4.3 min (25.8 TFLOP of GEMMs a step over all ranks at 50.0 GFLOP/s a core, measured
/// now, on 2 cores)": the bound of host_step_seconds with its figures, as `plan` prints it. Pure.
std::string host_step_text(int64_t flops, double flops_per_s_per_core, int cores, int ranks);

/// The warning `run` prints before a measured step that takes at least `threshold_s` ("" when
/// it is shorter or unknown): "this run's steps take at least 4.3 min (25.8 TFLOP of GEMMs a step
/// over all ranks at 50.0 GFLOP/s a core, measured now, on 2 cores) each on this machine: its 2
/// steps at least 8.6 min; `embedscope plan` and `--simulate PROFILE` give its figures
/// without running it (Ctrl-C cancels after the current step)". Pure.
std::string long_step_warning(int64_t flops, double flops_per_s_per_core, int cores, int ranks, int64_t steps,
                              double threshold_s = 60.0);

/// "42 s", "4.3 min", "2.1 h": a duration in seconds for people.
std::string duration_text(double seconds);

}  // namespace embedscope::engine
