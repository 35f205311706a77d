#pragma once
// Where a run's batches come from (spec.input): one interface for the synthetic generator and
// the file sources, so the executors and the reference ask for "the batch of (iteration,
// rank)" without knowing which.

#include <cstdint>
#include <memory>
#include <string>

#include "embedscope/engine/input/input.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// A file source cannot read its files, finds a malformed line under malformed_lines error, or
/// runs out of samples under on_short error. Bad input: exit code 2. The message names the
/// file, the line (1-based) and, for a malformed line, the field.
class InputFileError : public SpecError {
 public:
  using SpecError::SpecError;
};

/// The batches of a run. make() is called from every rank's thread (thread-safe) and returns
/// rank `rank`'s local batch of `iteration` (0-based, warmup included): batch_size samples,
/// the KJT's features in WorkloadSpec::features order. Batch::origin says where the batch came
/// from for error messages (empty for synthetic input); Batch::skipped_lines counts the
/// malformed lines skipped while reading it.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual Batch make(int64_t iteration, int rank) = 0;
};

/// The source that spec.input names: the BatchGenerator for synthetic, CriteoBatchSource
/// (criteo.h) for criteo_tsv, KjtBatchSource (kjt_file.h) for kjt. The spec must outlive the source. A file source opens its first
/// file here, so a missing or unreadable file throws InputFileError before anything runs.
std::unique_ptr<BatchSource> make_batch_source(const WorkloadSpec& spec);

}  // namespace embedscope::engine
