#pragma once
// The pipeline's fill: the phases of a pipelined schedule that only its first iteration runs
// (step_program.cpp step_schedule: `if (iteration == 0)`). They start the batches that the
// steady state starts in the steps before: sparse_dist's input dist of batch 0, semi_sync's
// input dists of batches 0 and 1 and its lookup (with output dist) of batch 0. In a run without
// warm-up, every executor records the fill's collectives and comm spans at step -1, as a warm-up
// step holds them, so that measured step 0 holds a steady step's collectives (trace50: the
// threaded executor, exec/threaded/rank.h fill_phase_; sim51: the simulated one,
// exec/simulated/executor.cpp), and the fill's lookup's load counters and ids too (fixb49).

#include "embedscope/engine/program/step_program.h"

namespace embedscope::engine::program {

/// Whether phase `ph` of iteration 0's schedule is part of `pipeline`'s fill (see above); false
/// for every phase of base. Only meaningful for iteration 0 (a steady iteration has no such
/// phase: its start_batch is batch 1 (sparse_dist) or 2 (semi_sync), its lookup batch 1).
/// Example: semi_sync, iteration 0: start_batch 0, lookup 0 and start_batch 1 -> true;
/// finish_output_dist 0, lookup 1, start_batch 2, train 0 -> false.
inline bool pipeline_fill_phase(PipelineKind pipeline, const Phase& ph) {
  switch (pipeline) {
    case PipelineKind::base: return false;
    case PipelineKind::sparse_dist: return ph.kind == PhaseKind::start_batch && ph.batch == 0;
    case PipelineKind::semi_sync:
      return (ph.kind == PhaseKind::start_batch && (ph.batch == 0 || ph.batch == 1)) ||
             (ph.kind == PhaseKind::lookup && ph.batch == 0);
  }
  return false;
}

}  // namespace embedscope::engine::program
