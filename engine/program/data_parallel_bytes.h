#pragma once
// The figures of a data_parallel table's update ops (sharding/data_parallel.cpp emit_update),
// one formula for the StepProgram and the planner's pre-ranking estimate (planner/search.cpp,
// planner/prerank.h), so both time them alike (cost/cost_model.h compute_ns: memory bytes over
// HBM bandwidth x tbe_backward_efficiency, plus a launch; collective_ns for the all-reduces).
//
// A data_parallel table of V rows x D columns (TableSpec::rows(): hash_size for a hashed table)
// on W ranks, as TorchRec trains it (DistributedDataParallel over the replicas): each replica's
// gradient is a dense V x D fp32 buffer, all-reduced (sum) over the world, and each rank's V
// touched flags with it (sharding/data_parallel.cpp says why). A factorized table (low_rank_dim
// r > 0: E = A B, A V x r, B r x D; model/low_rank.h) has A and B as its parameters, so DDP
// all-reduces their gradients instead: V r + r D floats in one buffer (dA's rows, then dB).

#include <cmath>
#include <cstdint>

namespace embedscope::engine::program {

/// Expected distinct rows among n ids drawn uniformly from N rows: N (1 - (1 - 1/N)^n); 0 for
/// N <= 0. Example: N 1,000, n 128: 120.2; n 256 (2 ranks' batches): 225.9.
inline double uniform_distinct_rows(double N, double n) {
  if (N <= 0) return 0.0;
  return N * (1.0 - std::pow(1.0 - 1.0 / N, n));
}

/// Elements of the step's two all-reduces of one data_parallel table (fp32, 4 B each): the
/// gradient ("grad_dist/data_parallel_all_reduce"): V x D, or for a factorized table (r > 0) the
/// factors' V r + r D (dA then dB, TorchRec's DDP over the table's parameters A and B); and the
/// touched flags V ("grad_dist/data_parallel_touched"). Examples: 1,000 x 64: 64,000 and 1,000
/// (256,000 B and 4,000 B a buffer; a ring moves 2 (W - 1) / W of each per rank: the same on 2
/// ranks); 1,000 x 64 with r 4: 4,000 + 256 = 4,256 (17,024 B); 50,000 x 16 with r 4: 200,064.
inline int64_t dp_gradient_elements(int64_t V, int64_t D, int64_t r = 0) { return r > 0 ? V * r + r * D : V * D; }
inline int64_t dp_flag_elements(int64_t V) { return V; }

/// Device bytes of "backward_data_parallel" (one rank's replica of a V x D table; r: its
/// low_rank_dim, 0 for a full table): the bags' fp32 gradients read (bags x 4 D) and the ids
/// (8 B each); the gradient buffer (dp_gradient_elements) and the touched flags zeroed
/// (4 (elements + V) written); each id's gradient row read and written back (2 x 4 D) and its
/// flag written (4):
///   bags x 4 D + 4 (dp_gradient_elements(V, D, r) + V) + ids x (8 + 8 D + 4).
/// Example: V 1,000, D 64, 128 ids in 64 bags: 16,384 + 260,000 + 128 x 524 = 343,456 B.
inline double dp_backward_bytes(double ids, double bags, int64_t V, int64_t D, int64_t r = 0) {
  const double d = static_cast<double>(D);
  const double buf = static_cast<double>(dp_gradient_elements(V, D, r) + dp_flag_elements(V));
  return bags * 4.0 * d + 4.0 * buf + ids * (8.0 + 8.0 * d + 4.0);
}

/// Device bytes "optimizer_data_parallel" reads to find the rows to update: the all-reduced
/// gradient buffer and the V flags, 4 (dp_gradient_elements(V, D, r) + V) (the fused update of
/// those rows adds ProgramSink::update_bytes of them). Example: V 1,000, D 64: 260,000 B.
inline double dp_scan_bytes(int64_t V, int64_t D, int64_t r = 0) {
  return 4.0 * static_cast<double>(dp_gradient_elements(V, D, r) + dp_flag_elements(V));
}

}  // namespace embedscope::engine::program
