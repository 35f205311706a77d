#pragma once
// Where a run's batches come from (spec.input): one interface for the synthetic generator and
// the file sources, so the executors and the reference ask for "the batch of (iteration,
// rank)" without knowing which.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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

/// A BatchSource over files read front to back, one global batch (every rank's slice) per
/// iteration: make() reads up to the iteration asked for, keeps each global batch until every
/// rank has taken its slice, and reads again from the start when asked for an iteration it has
/// already dropped. Thread-safe (one read at a time); once a read throws InputFileError every
/// later make() throws the same error. A subclass reads one global batch and rewinds.
class SequentialBatchSource : public BatchSource {
 public:
  /// `ranks`: the slices of a global batch (devices.count).
  explicit SequentialBatchSource(int ranks) : ranks_(ranks) {}
  Batch make(int64_t iteration, int rank) final;

 protected:
  /// The `ranks` batches of `iteration`, read where the previous call (or rewind()) left off.
  virtual std::vector<Batch> read_global(int64_t iteration) = 0;
  /// Back to the first global batch.
  virtual void rewind() = 0;

 private:
  struct Global {
    std::vector<Batch> ranks;
    int taken = 0;
  };
  const int ranks_;
  std::mutex mu_;
  int64_t next_it_ = 0;  // the next global batch read_global() returns
  std::map<int64_t, Global> cache_;
  std::optional<std::string> error_;
};

/// The source that spec.input names: the BatchGenerator for synthetic, CriteoBatchSource
/// (criteo.h) for criteo_tsv, KjtBatchSource (kjt_file.h) for kjt. The spec must outlive the source. A file source opens its first
/// file here, so a missing or unreadable file throws InputFileError before anything runs.
std::unique_ptr<BatchSource> make_batch_source(const WorkloadSpec& spec);

}  // namespace embedscope::engine
