// The output dist of a batch (pooled embeddings to the ranks owning the samples), through the
// plan's sharding modules (sharding/embedding_sharding.h), and its unpacking.
#include "rank.h"

namespace embedscope::engine::threaded {

void Rank::start_output_dist(Inflight& b, bool async) {
  b.output_jobs.clear();
  for (const auto& m : shardings_)
    if (auto j = m->start_output_dist(*this, b.slot_out)) b.output_jobs.push_back(std::move(j));
  // the modules' collectives run in order on the comm worker
  auto job = [this, &b, step = step_] {
    comm_step_ = step;
    for (auto& j : b.output_jobs) j->run(*this);
  };
  if (async)
    b.output_dist = comm_->submit(std::move(job));
  else
    comm_->run(std::move(job));
}

void Rank::finish_output_dist(Inflight& b) {
  if (b.output_done) return;  // finished early, before a live rebalance (settle_inflight)
  b.output_done = true;
  if (b.output_dist.valid()) b.output_dist.get();
  for (auto& j : b.output_jobs) j->finish(*this, b.pooled, b.batch.kjt.lengths);
  for (auto& j : b.output_jobs) j.reset();  // the comm buffers go back to the allocator, in order
  b.output_jobs.clear();
  if (sh_.opt.on_pooled)
    for (size_t f = 0; f < b.pooled.size(); ++f)
      sh_.opt.on_pooled(me_, b.it, static_cast<int>(f), b.pooled[f].data(), L_.B, L_.dim[f]);
}

}  // namespace embedscope::engine::threaded
