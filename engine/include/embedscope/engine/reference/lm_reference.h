#pragma once
// The unsharded reference of the lm_embedding model (model/lm_embedding.h), written apart from
// the sharded step: double precision, plain loops, no Eigen, no collectives, the whole global
// batch on one "rank". It shares only the data (lm_sequence_tokens), the initial weights
// (lm_initial_weight) and the rounding of the weights the forward pass reads (lm_read_weight).
// The global batch: B sequences (vocab_parallel, one tensor-parallel group) or p B sequences
// (data_parallel, row_wise: rank r's are r B .. r B + B - 1). The vocabulary is V' (padded).

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "embedscope/engine/workload/lm_spec.h"

namespace embedscope::engine {

class LmReference {
 public:
  explicit LmReference(const LmWorkloadSpec& spec);
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
};

}  // namespace embedscope::engine
