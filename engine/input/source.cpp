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

}  // namespace embedscope::engine
