#pragma once
// The reference's low-rank tables (TableSpec::low_rank_dim; model/low_rank.h): A and B kept in
// double and updated with plain loops from the gradient of the full rows, written from the
// formulas (d pooled_b / d A_i = s_b B^T, d pooled_b / d B = sum_i s_b A_i^T), independently of
// kernels/low_rank.h. Internal to the engine (reference.cpp).

#include <cstdint>
#include <set>
#include <vector>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::reference_detail {

struct LowRankTable {
  int64_t rows = 0, r = 0, dim = 0;
  OptimizerStateType state_type = OptimizerStateType::fp32;
  std::vector<double> a, b;                 ///< rows x r, r x dim
  std::vector<double> a_m1, a_m2, b_m1, b_m2;  ///< FBGEMM state of A's rows and of B's rows
};

/// Table t of spec (low_rank_dim > 0) at its initial values: A from initial_weight over rows() x
/// r, B from low_rank_initial_b; state zero.
LowRankTable make_low_rank_table(const WorkloadSpec& spec, int t);

/// e (rows x dim) = A B, each entry summed in double over k, stored as float.
void materialize(const LowRankTable& lr, std::vector<float>& e);

/// One optimizer step: grad holds d loss / d E (rows x dim, zero outside `touched`); dA of the
/// touched rows and dB (every row of B, when any row is touched) from A and B before the step,
/// then spec.optimizer's row update (kernels.h formulas, in double; state rounded to the table's
/// optimizer_state_type after use) of A's touched rows and of B's r rows. `iteration` from 1.
void low_rank_step(const OptimizerSpec& opt, int64_t iteration, LowRankTable& lr, const std::vector<double>& grad,
                   const std::set<int64_t>& touched);

}  // namespace embedscope::engine::reference_detail
