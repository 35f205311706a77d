#pragma once
// `embedscope scaling` of an lm_embedding workload (exec/lm_scaling_study.h): scaling.cpp hands
// a workload with "model": "lm_embedding" (file or preset) to cmd_scaling_lm.

#include <string>
#include <vector>

#include "workload_args.h"

namespace embedscope::cli {

/// What `scaling` parsed, for its LM path.
struct LmScalingArgs {
  std::vector<int> gpus;
  /// --shardings as given; empty: the LM default (vocab_parallel, data_parallel, row_wise)
  std::vector<std::string> shardings;
  std::string output;  ///< -o DIR: each point's simulated session, DIR/<sharding>_<gpus>.db
  bool overwrite = false;
  bool json = false;
};

/// "warning: vocab_parallel is one tensor-parallel group over all the GPUs, so above 8 GPUs (one
/// node) its activation collectives cross nodes ...": what `scaling` and `plan --simulate` say of a
/// vocab_parallel point larger than one node of `gpus_per_node`.
std::string tp_across_nodes_warning(int gpus_per_node);

/// Runs the study and prints its table (or --json): per sharding type and GPU count the simulated
/// step time, tokens/s (and per GPU), scaling efficiency, embedding and all communication share,
/// bytes on the wire per step (all ranks) and per token, memory per GPU (the LM memory estimate's
/// peak); a point refused (memory, the workload's rules) prints its reason in its row. Returns 0,
/// or 1 when a point's session could not be written. Throws SpecError for bad input (an unknown
/// sharding type names --shardings and the LM types).
int cmd_scaling_lm(WorkloadArgs& a, const LmScalingArgs& s);

}  // namespace embedscope::cli
