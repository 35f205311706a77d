// make_batch_source: spec.input -> the source of a run's batches (source.h).
#include "embedscope/engine/input/source.h"

#include "embedscope/engine/input/criteo.h"
#include "embedscope/engine/input/kjt_file.h"

namespace embedscope::engine {

namespace {
class SyntheticSource final : public BatchSource {
 public:
  explicit SyntheticSource(const WorkloadSpec& spec) : gen_(spec) {}
  Batch make(int64_t iteration, int rank) override { return gen_.make(iteration, rank); }

 private:
  BatchGenerator gen_;  // const and pure in (iteration, rank): no lock needed
};
}  // namespace

std::unique_ptr<BatchSource> make_batch_source(const WorkloadSpec& spec) {
  switch (spec.input.kind) {
    case InputKind::synthetic: return std::make_unique<SyntheticSource>(spec);
    case InputKind::criteo_tsv: return std::make_unique<CriteoBatchSource>(spec);
    case InputKind::kjt: return std::make_unique<KjtBatchSource>(spec);
  }
  throw SpecError("/input/kind: unknown input kind");
}

Batch SequentialBatchSource::make(int64_t iteration, int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) throw InputFileError(*error_);
  try {
    if (iteration < next_it_ && !cache_.count(iteration)) {  // asked again for a batch all ranks took: read again
      rewind();
      cache_.clear();
      next_it_ = 0;
    }
    while (next_it_ <= iteration) {
      cache_[next_it_] = {read_global(next_it_), 0};
      ++next_it_;
    }
  } catch (const InputFileError& e) {
    error_ = e.what();
    throw;
  }
  auto it = cache_.find(iteration);
  Batch out = std::move(it->second.ranks[static_cast<size_t>(rank)]);  // each rank takes its slice once
  if (++it->second.taken == ranks_) cache_.erase(it);
  return out;
}

}  // namespace embedscope::engine
