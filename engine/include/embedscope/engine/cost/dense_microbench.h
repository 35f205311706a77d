#pragma once
// The dense op's three rates measured on this machine (issue 15, dense44): a microbenchmark of
// the engine's own dense code, which `embedscope calibrate` runs so that the cost model can time
// the dense op's GEMMs, dot interaction and element-wise work each at its own rate
// (hardware_profile.h GpuProfile::dense_interaction_ops_per_s / dense_elementwise_ops_per_s,
// cost_model.h math_seconds). Why: one flop rate fitted on criteo_kaggle (whose dense op is
// 46-48% work outside its GEMMs, mostly the per-element dot interaction) timed
// mlperf_dlrm_dcnv2_scaled's (13-17% outside) 1.5x too slow (notes gemm43, dense44).
//
// What it times, on the calling thread, by its CPU time (CLOCK_THREAD_CPUTIME_ID: time slices
// lost to other processes are not counted; contention is the cost model's own factor), each the
// best of `repetitions` after one warm-up (a timing repeats a short part to >= 10 ms of CPU and
// takes the time per call), on one model (the fit sessions' workload):
//   T  = DenseModel::forward_backward on a batch of B (random inputs);
//   Tg = the model's GEMMs (DenseModel::gemms(B)) by cblas_sgemm, one after another (NoTrans);
//   Ti = dot_interaction_forward + dot_interaction_backward at the model's (B, F, d0) when its
//        interaction is dot, else at (B, F = its features, d0 16);
//   Te = T - Tg - (Ti when the model's interaction is dot): the element-wise code, the residual.
// Rates: gemm flops / Tg, interaction ops / Ti (of the shape timed), elementwise ops / Te
// (DenseModel::work). calibrate uses only their ratios; the sessions fit the scale.

#include <cstdint>
#include <string>

#include "embedscope/engine/model/dense_work.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// The result of measure_dense_rates; times are thread CPU seconds, rates per CPU second.
struct DenseMicrobench {
  std::string model;             ///< what was timed, for people ("criteo_kaggle dense part, B 512")
  int64_t batch = 0;             ///< B
  int repetitions = 0;           ///< best of this many timings per part
  DenseWork work;                ///< DenseModel::work(B) of the model timed
  int64_t interaction_ops_timed = 0;  ///< multiply-adds of the dot kernels' shape timed (Ti)
  double forward_backward_s = 0, gemm_s = 0, interaction_s = 0, elementwise_s = 0;  ///< T, Tg, Ti, Te
  double gemm_flops_per_s = 0, interaction_ops_per_s = 0, elementwise_ops_per_s = 0;  ///< each > 0
  double wall_s = 0;             ///< the whole measurement's wall-clock time
};

/// Times the dense part of `spec` (batch spec.batch_size) as the header says. Throws SpecError
/// when the spec has no dense part ("dense": null: nothing to time) or when the residual Te is
/// not positive (the element-wise code took no time beside the GEMMs: a timing that cannot be
/// trusted; rerun on a quieter machine). About 2 x (repetitions + 1) x T of CPU time.
DenseMicrobench measure_dense_rates(const WorkloadSpec& spec, int repetitions = 5);

}  // namespace embedscope::engine
