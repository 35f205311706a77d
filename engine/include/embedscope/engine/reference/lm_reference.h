#pragma once
// The unsharded reference of the lm_embedding model (model/lm_embedding.h), written apart from
// the sharded step: double precision, plain loops, no Eigen, no collectives, the whole global
// batch on one "rank". It shares only the data (lm_sequence_tokens), the initial weights
// (lm_initial_weight) and the rounding of the weights the forward pass reads (lm_read_weight).
// The global batch: B sequences (vocab_parallel, one tensor-parallel group) or p B sequences
// (data_parallel, row_wise: rank r's are r B .. r B + B - 1). The vocabulary is V' (padded).
//
// Rounding on the wire (tester55 F2): with data_type bf16 / fp16 the sharded step sends its
// activations' collectives in that type (program/lm_program.h lm_wire_precision), and the
// reference rounds at the same points (round_p: round_to_precision of the value as a float,
// quant/quant.h), unless built with round_on_the_wire false:
//   the hidden states h^L the projection reads: round_p(h^L) with sequence_parallel and row_wise
//     (their all-gather); not vocab_parallel alone (every rank computed them) nor data_parallel;
//   the projection input's gradient dh = sum over ranks r of round_p(dh_r), dh_r the sum over
//     the vocabulary rows vocab_range(V', p, r) of rank r (sequence_parallel, row_wise: the
//     reduce-scatter sums the rounded terms), round_p of that sum for vocab_parallel alone (its
//     all-reduce sends the sum rounded, ProcessGroup::all_reduce_q); not data_parallel;
//   the embedding output's gradient: round_p(de) with sequence_parallel and row_wise (its
//     all-gather / all-to-all);
//   the embedding output itself needs none: the rows are read rounded to data_type already and
//     its all-reduce / reduce-scatter adds zeros to one rank's row (exact).
// Parameters' gradients and the cross-entropy are exact sums in double here (fp32 on the wire).

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "embedscope/engine/workload/lm_spec.h"

namespace embedscope::engine {

class LmReference {
 public:
  /// `round_on_the_wire`: round at the sharded step's 2-byte collectives (the header comment);
  /// false: the same model without that rounding (a test's contrast).
  explicit LmReference(const LmWorkloadSpec& spec, bool round_on_the_wire = true);
  /// One SGD step on the global batch of step `step`; returns the mean loss over its N targets.
  double step(int64_t step);
  /// The embedding output of the last step: (global sequence g, position s) -> H values at
  /// index (g S + s) H.
  const std::vector<double>& embedding_out() const { return e_; }
  const std::vector<double>& table() const { return E_; }            ///< [V' x H]
  const std::vector<double>& output_projection() const { return O_; } ///< [V' x H]; empty when tied
  const std::vector<std::vector<double>>& body_weights() const { return W_; }  ///< [H x H] in x out
  int64_t sequences() const { return seqs_; }

 private:
  LmWorkloadSpec spec_;
  int64_t V_ = 0, H_ = 0, seqs_ = 0;
  std::vector<double> E_, O_, e_;
  std::vector<std::vector<double>> W_, b_;
  // adam: the first and second moments of each parameter ("E", "O", "W<l>", "b<l>"), the steps taken
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> moments_;
  int64_t adam_t_ = 0;
  bool round_on_the_wire_ = true;
};

}  // namespace embedscope::engine
