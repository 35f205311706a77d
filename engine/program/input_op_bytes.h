#pragma once
// Device-memory bytes of the step's input ops (program/step_program.cpp start_batch and
// lookup_and_output_dist), one formula for the StepProgram and the planner's pre-ranking
// estimate (planner/prerank.h), so both time them alike (cost/cost_model.h compute_ns: memory
// bytes over HBM bandwidth x memory_kernel_efficiency, plus a launch).

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::program {

/// Bytes of one rank's batch as a KJT: its ids and bag lengths as int64,
///   8 x (sum over the spec's features of B x mean pooling factor + B x features).
/// Example: B 4, two features of pooling factor 1 and 3: 8 x (16 + 8) = 192 B.
inline double kjt_bytes(const WorkloadSpec& spec) {
  const double B = static_cast<double>(spec.batch_size);
  double ids = 0;
  for (const auto& f : spec.features) ids += B * f.pooling_factor.mean;
  return 8.0 * (ids + B * static_cast<double>(spec.features.size()));
}

/// The "bucketize" op's bytes (group the rank's ids by destination shard): the KJT read and
/// written, 2 x kjt_bytes(spec). The same on every rank and under every plan.
inline double bucketize_bytes(const WorkloadSpec& spec) { return 2.0 * kjt_bytes(spec); }

/// The "kjt_permute" op's bytes (arrange the received ids per local shard): `ids` received ids
/// and `bags` x `slots` lengths (every rank's B bags of each of the rank's `slots` (shard,
/// feature) buckets), int64, read and written: 2 x 8 x (ids + bags x slots).
/// Example: 8 ids, 8 bags, 1 slot: 256 B.
inline double kjt_permute_bytes(double ids, double bags, double slots) { return 2.0 * 8.0 * (ids + bags * slots); }

/// The "input" op's work items (ProgramOp::work_items, HostWork::input_ids): the ids of one
/// rank's batch, B x the features' mean pooling factors summed (each drawn, checked against its
/// table and, for hashed tables, hashed: exec/threaded/rank_input.cpp Rank::input).
/// Example: B 4, two features of pooling factor 1 and 3: 16 ids.
inline double input_ids(const WorkloadSpec& spec) {
  double ids = 0;
  for (const auto& f : spec.features) ids += static_cast<double>(spec.batch_size) * f.pooling_factor.mean;
  return ids;
}

/// One destination slot's share of the "bucketize" op's work items (HostWork::bucketize_items):
/// bucketize_kjt (input/bucketize.h) scans, for every (shard, feature) slot of every rank, the
/// feature's B bags and their ids (a row-wise feature over W shards is scanned W times), so
///   B x (1 + mean pooling factor of `feature`).
/// The op's items are this summed over the layout's slots. Example: B 4, pooling factor 3: 16.
inline double bucketize_slot_items(const WorkloadSpec& spec, int feature) {
  const double B = static_cast<double>(spec.batch_size);
  return B * (1.0 + spec.features.at(static_cast<size_t>(feature)).pooling_factor.mean);
}

}  // namespace embedscope::engine::program
