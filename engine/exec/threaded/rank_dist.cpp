// The interpreter's dispatch and waits (rank.h): each op to its owner, comm ops queued on the
// comm worker, the sync points of a batch, and the output dist's finish (the pooled
// embeddings unpacked from what the sharding modules' output dist ops received).
#include "rank.h"

namespace embedscope::engine::threaded {

using program::RankOp;

namespace {
// Waits for a queued op (rethrows what it threw); an op waited for once is not waited again.
void await(std::shared_future<void>& f) {
  if (!f.valid()) return;
  std::shared_future<void> g = std::move(f);
  f = {};
  g.get();
}
}  // namespace

void Rank::run_op(const Program& pr, const ProgramOp& op, Inflight& b) {
  const program::OpOwner& tag = pr.owners[static_cast<size_t>(op.id)];
  if (tag.kind < 0) throw std::logic_error(fmt::format("step program op {} \"{}\" has no owner", op.id, op.name));
  current_ = &b;
  // a queued op after another one goes with it; any other op ends the run of queued ops
  if (op.lane != Lane::comm || op.id != last_queued_ + 1) flush_queued();
  if (op.lane != Lane::comm)  // the compute worker runs it once what it needs is there
    for (int w : op.waits_for) await(op_done_[static_cast<size_t>(w)]);
  try {
    if (tag.owner < 0)
      run_own(pr, op, tag, b);
    else
      shardings_.at(static_cast<size_t>(tag.owner))->run(op, tag, *this, b, tag.owner);
  } catch (...) {
    release_train_buffers(b);
    throw;
  }
}

void Rank::run_own(const Program& pr, const ProgramOp& op, const program::OpOwner& tag, Inflight& b) {
  switch (static_cast<RankOp>(tag.kind)) {
    case RankOp::input: input(b); return;
    case RankOp::bucketize: bucketize(b, false); return;
    case RankOp::input_dist_splits: queue(op, input_dist_job(b, 0, false)); return;
    case RankOp::input_dist_lengths: queue(op, input_dist_job(b, 1, false)); return;
    case RankOp::input_dist_ids: queue(op, input_dist_job(b, 2, false)); return;
    case RankOp::kjt_permute: finish_input(b); return;
    // tables in host memory: on this executor the lookup fetches its misses and the optimizer
    // moves its rows (HostRowStore), inside their own spans
    case RankOp::host_fetch:
    case RankOp::host_update: return;
    case RankOp::lookup:
      lookup(b);
      b.output_jobs.clear();  // the modules' output dist ops that follow add theirs
      return;
    case RankOp::prefetch: prefetch(b); return;
    case RankOp::dense_forward_backward: dense_forward_backward(pr, op, b); return;
    case RankOp::backward_fused_optimizer: backward_fused_optimizer(b); return;
    case RankOp::dense_optimizer: dense_optimizer(b); return;
    case RankOp::dense_all_reduce: break;  // launched by dense_forward_backward, never run on its own
  }
  throw std::logic_error(fmt::format("step program op {} \"{}\": the rank runs no op of kind {} on its own", op.id,
                                     op.name, tag.kind));
}

void Rank::queue(const ProgramOp& op, std::function<void()> fn) {
  if (op.id != last_queued_ + 1 || current_ != pending_batch_) flush_queued();
  last_queued_ = op.id;
  pending_batch_ = current_;
  pending_.emplace_back(op.id, std::move(fn));
}

void Rank::flush_queued() {
  if (pending_.empty()) return;
  std::vector<int> ids;
  for (const auto& [id, fn] : pending_) ids.push_back(id);
  std::shared_future<void> done = comm_
                                      ->submit([this, jobs = std::move(pending_),
                                                step = fill_phase_ ? step_ - 1 : step_, fill = fill_phase_] {
                                        comm_step_ = step;  // the pipeline's fill: step -1 (rank.h)
                                        comm_fill_ = fill;
                                        struct Reset {
                                          std::atomic<bool>& f;
                                          ~Reset() { f = false; }
                                        } reset{comm_fill_};
                                        for (const auto& [id, fn] : jobs) fn();
                                      })
                                      .share();
  pending_.clear();
  for (int id : ids) op_done_[static_cast<size_t>(id)] = done;
  if (pending_batch_) pending_batch_->queued.push_back(std::move(done));
  pending_batch_ = nullptr;
}

void Rank::settle(Inflight& b) {
  flush_queued();
  for (auto& f : b.queued) await(f);
  b.queued.clear();
  if (b.looked_up) finish_output_dist(b);
}

void Rank::finish_output_dist(Inflight& b) {
  if (b.output_done) return;  // finished early, before a live rebalance (settle_inflight)
  b.output_done = true;
  for (auto& f : b.queued) await(f);
  b.queued.clear();
  for (auto& j : b.output_jobs) j->finish(*this, b.pooled, b.batch.kjt.lengths);
  // which features' pooled embeddings the jobs left in device memory (the layout they ran under)
  b.pooled_dev.assign(b.pooled.size(), 0);
  for (size_t f = 0; f < b.pooled.size(); ++f) b.pooled_dev[f] = pooled_on_device(static_cast<int>(f)) ? 1 : 0;
  for (auto& j : b.output_jobs) j.reset();  // the comm buffers go back to the allocator, in order
  b.output_jobs.clear();
  if (sh_.opt.on_pooled)
    for (size_t f = 0; f < b.pooled.size(); ++f)
      sh_.opt.on_pooled(me_, b.it, static_cast<int>(f), b.pooled[f].data(), L_.B, L_.dim[f]);
}

void Rank::release_train_buffers(Inflight& b) {
  for (auto& s : b.scratch) s.reset();
  b.shard_grads.clear();
  b.slot_grad.clear();
  b.dpooled.clear();
}

}  // namespace embedscope::engine::threaded
