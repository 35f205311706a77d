// The threaded executor's rank: the step loop (Rank::main), a step's walk through its program's
// schedule op by op (Rank::step), the step programs and the batches in flight.
#include "rank.h"
#include "program/pipeline_fill.h"
#include <utility>

#include "embedscope/engine/input/bucketize.h"
#include "embedscope/engine/sharding/plan_json.h"
#if EMBEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "exec/device/cuda_rank_device.h"
#endif

namespace embedscope::engine::threaded {

LocalShard& Rank::shard_of(int table, int shard_index) {
  for (auto& ls : shards)
    if (ls.table == table && ls.shard_index == shard_index) return ls;
  throw std::logic_error("shard not local");
}

void Rank::main() {
  setup();
  wait_for_every_rank_set_up();  // setup time counts against no collective timeout, nor step 0
  const int64_t total = sh_.spec.warmup_steps + sh_.spec.steps;
  // The programs of every place in the run (first, steady state, last two), built before the
  // first step so that no step's time includes building one.
  for (int64_t it : {int64_t{0}, int64_t{1}, total - 2, total - 1})
    if (it >= 0 && it < total) program_of(it);
  const int64_t samples_per_step = L_.B * L_.world;
  int64_t measured_ns = 0;
  // the device-synchronizing calls, host waits and copies each step's device ops made
  StepDeviceCounts device_counts(gpu_, dense_device_.get());
  for (int64_t it = 0; it < total; ++it) {
    if (it == sh_.spec.warmup_steps) {
      summary = {};
      summary.rank = me_;
      counter_base_ = {bytes_sent(), bytes_received()};
    }
    current_step_ = step_of(it);
    flight_.set_step(step_of(it));
    const int64_t t0 = sh_.tracer.now_ns();
    step_start_ns_ = t0;
    const bool stop = step(it);
    arena_.mark_step_end();  // where an OOM's replay with memory.compaction 1 packs the device
    // an earlier step's distinct-row counts not taken in this one (it ran no embedding backward
    // on the device): taken now, inside the step (a wait, counted, if the step made none)
    if (deferred_counts_ && deferred_counts_->step != step_of(it)) take_deferred_counts();
    device_counts.add_step(it >= sh_.spec.warmup_steps);
    const int64_t t1 = sh_.tracer.now_ns();
    const int64_t dt = t1 - t0;
    windows.push_back({step_of(it), t0, t1});
    if (it >= sh_.spec.warmup_steps) {
      step_ns.push_back(dt);
      measured_ns += dt;
    }
    // Compaction runs between steps: its span (labelled with the step it follows) starts at the
    // step window's end, so no step time includes it (tester48 F14.10: a 9 s compaction made a
    // scenario's "step mean" 9573 ms); the next step's window starts after it.
    if (sh_.spec.memory.compaction > 0 && (it + 1) % sh_.spec.memory.compaction == 0) {
      ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::memcpy, "memory_compaction", step_of(it));
      span.set_bytes(arena_.compact().bytes_moved);
    }
    auto spans = sh_.tracer.take(me_);
    if (sh_.session) {
      sh_.session->add_ops(spans);
      // the step row, its counters and the ids of the batches it trained, in one transaction
      std::vector<sessions::LoadCounter> load;
      load.reserve(load_.size() + fill_load_.size());
      for (const auto& [key, c] : load_) load.push_back(c);
      for (const auto& [key, c] : fill_load_) load.push_back(c);  // the pipeline's fill (rank.h)
      std::vector<sessions::IdHistogramBucket> histogram = std::exchange(histogram_pending_, {});
      // held while the step's distinct-row counts are on their way (rank_records.cpp)
      write_step_records({{step_of(it), me_, t0, t1, last_loss_, arena_.in_use(), arena_.peak()}, std::move(load),
                          std::move(histogram)});
      record_memory(step_of(it), "step", false);
    }
    // a session that can no longer be written (a full disk): stop here, the steps committed kept
    if (sh_.session && sh_.session->write_failed())
      if (auto f = sh_.session->write_failure()) throw sessions::SessionWriteError(f->error);
    if (sh_.on_step_end) sh_.on_step_end(me_, step_of(it), t0, t1);
    if (sh_.opt.keep_events) events.insert(events.end(), spans.begin(), spans.end());
    if (me_ == sh_.progress_rank && sh_.opt.on_step) {
      StepProgress p;
      p.total_steps = sh_.spec.steps;
      p.step = std::max<int64_t>(0, it - sh_.spec.warmup_steps + 1);
      p.warmup_done = std::min(it + 1, sh_.spec.warmup_steps);
      p.loss = losses.empty() ? 0.0 : losses.back();
      if (p.step > 0 && measured_ns > 0) {
        p.samples_per_s = static_cast<double>(samples_per_step * p.step) / (static_cast<double>(measured_ns) * 1e-9);
        p.eta_s = static_cast<double>(measured_ns) * 1e-9 / static_cast<double>(p.step) *
                  static_cast<double>(p.total_steps - p.step);
      }
      sh_.opt.on_step(p);
    }
    if (stop) {
      cancelled = true;
      break;
    }
    if (it >= sh_.spec.warmup_steps) after_step_rebalance(step_of(it), it + 1 == total);  // rank_rebalance.cpp
  }
  finish_deferred_counts();  // the last step's counts (a wait after the steps if none came) and its records
  if (sh_.spec.rebalance.enabled() && sh_.opt.process.rank >= 0) world_load_all_gather(current_step_.load());
  // the session's id histogram was written with each step's records (above): a batch input
  // ahead of a cancelled run's last step was not trained, and is not in it
  dense_.sync_params_to_host();  // resident: the trained parameters back for the run's result
  for (auto& ls : shards)  // host_cached: the cache's dirty rows back, so the host rows are every row's value
    if (ls.host) ls.host->flush(ls.weights.data());
  if (gpu_ && sh_.opt.keep_tables) {  // the weights' host copies back (released at setup), read from the device
    auto read_back = [&](LocalShard& ls) {
      if (ls.placement != TablePlacement::device) return;  // host memory already (flushed above)
      ls.weights.restore_host_copy();
      gpu_->to_host(ls.weights.data(), ls.weights.device_data(), static_cast<int64_t>(ls.weights.size() * sizeof(float)));
      ls.packed.restore_host_copy();  // reduced-precision rows (LocalShard::row decodes them)
      gpu_->to_host(ls.packed.data(), ls.packed.device_data(), static_cast<int64_t>(ls.packed.size()));
      if (ls.low_rank_dim > 0)  // B's host copy (kept) is its initial value: E = A B needs the trained one
        gpu_->to_host(ls.factor_b.data(), ls.factor_b.device_data(),
                      static_cast<int64_t>(ls.factor_b.size() * sizeof(float)));
    };
    for (auto& ls : shards) read_back(ls);
    for (auto& [t, ls] : hot_replicas) read_back(ls);
  }
  summary.rank = me_;
  // the pipeline's fill is step -1's, as its records (rank.h fill_phase_): out of the measured bytes
  summary.bytes_sent = bytes_sent() - (counter_base_.empty() ? 0 : counter_base_[0]) - fill_bytes_sent_.load();
  summary.bytes_received = bytes_received() - (counter_base_.empty() ? 0 : counter_base_[1]) - fill_bytes_received_.load();
  summary.memory_bytes = arena_.peak();
  summary.allocator_ns = arena_.allocator_ns();
}

// The executor does not know the pipelines nor the sharding types: it walks the step's
// schedule (program/step_program.h), each phase on the batch it names, and hands every op of
// the phase to its owner (run_op). The waits come from the program (rank.h).
bool Rank::step(int64_t it) {
  const WorkloadSpec& spec = sh_.spec;
  step_ = step_of(it);
  measured_ = it >= spec.warmup_steps;
  load_.clear();
  fill_load_.clear();
  stop_ = false;
  const Program& pr = program_of(it);
  op_done_.assign(pr.p.ops.size(), {});
  last_queued_ = -2;
  pending_.clear();  // what a failed step left unsent
  pending_batch_ = nullptr;
  for (const Phase& ph : pr.p.schedule) {
    const int64_t bi = it + ph.batch;
    Inflight& b = batch_at(bi);
    // a batch ahead that a pipeline started in an earlier step: what it queued there (its input
    // dist, or its lookup's output dist) is awaited before its first phase in this one
    if (b.seen_in >= 0 && b.seen_in != it) settle(b);
    b.seen_in = it;
    // a run without warm-up: the pipeline's fill goes to step -1 (rank.h fill_phase_)
    fill_phase_ = measured_ && it == 0 && program::pipeline_fill_phase(spec.pipeline, ph);
    fill_phase_live_ = fill_phase_;
    for (int i = ph.first_op; i < ph.first_op + ph.num_ops; ++i) {
      const ProgramOp& op = pr.p.ops[static_cast<size_t>(i)];
      if (op.launched_by >= 0) continue;  // run by the op that launches it (the DDP buckets)
      run_op(pr, op, b);
    }
    flush_queued();
    if (ph.sync) settle(b);  // the compute worker waits for the phase's collectives
    fill_phase_ = false;
    fill_phase_live_ = false;
    if (b.trained) inflight_.erase(bi);
  }
  current_ = nullptr;
  return stop_;
}

const Rank::Program& Rank::program_of(int64_t it) {
  // One program per place in the run (program::place_in_run).
  const int key = place_in_run(sh_.spec, it);
  auto found = programs_.find(key);
  if (found == programs_.end()) {
    validate_plan(sh_.spec, plan_, "sharding plan");
    Program pr;
    pr.p = program::build_step_program(sh_.spec, plan_, L_, me_, it, pr.owners);
    pr.launches.resize(pr.p.ops.size());
    for (const ProgramOp& op : pr.p.ops)
      if (op.launched_by >= 0) pr.launches[static_cast<size_t>(op.launched_by)].push_back(op.id);
    found = programs_.emplace(key, std::move(pr)).first;
  }
  return found->second;
}

Inflight& Rank::batch_at(int64_t bi) {
  auto& p = inflight_[bi];
  if (!p) {
    p = std::make_unique<Inflight>();
    p->it = bi;
  }
  return *p;
}

}  // namespace embedscope::engine::threaded
