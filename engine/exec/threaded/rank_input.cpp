// The rank's ops of a batch's input: the batch, bucketizing, the KJT all-to-all, kjt_permute,
// the pooled lookup of every local shard (and the modules' local lookups), the prefetch.
#include "rank.h"
#include "embedscope/engine/input/bucketize.h"
#include "embedscope/sessions/analysis/counted_steps.h"
#include "embedscope/sessions/model/hot_row_replica.h"

namespace embedscope::engine::threaded {

sessions::LoadCounter& Rank::load_of(int table, int shard_index) {
  auto& c = (fill_lookup_ ? fill_load_ : load_)[{table, shard_index}];
  c.step = fill_lookup_ ? step_ - 1 : step_;  // the pipeline's fill: as a warm-up step (rank.h)
  c.rank = me_;
  c.table = table;
  c.shard = shard_index;
  return c;
}

void Rank::input(Inflight& b) {
  const WorkloadSpec& spec = sh_.spec;
  const int64_t it = b.it;
  // ---- input: this rank's batch, ids checked before anything is sent ----------------------
  ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::input, "input", step_);
  std::optional<Batch> given = sh_.opt.batch_source ? sh_.opt.batch_source(it, me_) : std::nullopt;
  b.batch = given ? std::move(*given) : sh_.source->make(it, me_);
  if (b.batch.skipped_lines > 0) {
    if (skipped_per_iteration.size() <= static_cast<size_t>(it)) skipped_per_iteration.resize(static_cast<size_t>(it) + 1, 0);
    skipped_per_iteration[static_cast<size_t>(it)] += b.batch.skipped_lines;
  }
  auto fixed = apply_invalid_id_policy(spec, b.batch.kjt, me_, b.batch.origin);
  if (measured_) summary.invalid_ids += std::accumulate(fixed.begin(), fixed.end(), int64_t{0});
  const auto collisions = apply_hashing(spec, b.batch.kjt);  // hashed tables' ids become their rows
  if (measured_) {
    if (hash_collisions.empty()) hash_collisions.assign(collisions.size(), 0);
    for (size_t t = 0; t < collisions.size(); ++t) hash_collisions[t] += collisions[t];
    summary.hash_collisions += std::accumulate(collisions.begin(), collisions.end(), int64_t{0});
  }
  b.off = b.batch.kjt.offsets();
  b.local = local_batch(b);  // what the sharding modules' ops read of it
  b.lengths = &b.batch.kjt.lengths;
  if (it >= spec.warmup_steps) id_histogram_.add(spec, b.batch.kjt);  // the live rebalance's: measured batches so far
  if (sh_.session) {  // the session's: counted with the step that looks the batch up (lookup(Inflight&))
    b.ids_histogram = histogram_written_.zeroed();
    b.ids_histogram->add(spec, b.batch.kjt);
  }
}

bool Rank::drain_step(int64_t step) const {
  const int64_t drain = sessions::drain_steps_left_out(
      sh_.spec.steps, sessions::pipeline_drain_steps(to_string(sh_.spec.pipeline)));
  return drain > 0 && step >= sh_.spec.steps - drain;
}

void Rank::bucketize(Inflight& b, bool again) {
  const int W = L_.world;
  const int64_t B = L_.B;
  auto& tr = sh_.tracer;
  const char* n_bucketize = again ? "reshard_bucketize" : "bucketize";

  // ---- input dist: KJT all-to-all (splits, lengths, ids) --------------------------------------
  const std::vector<int>& mine = L_.slots_to[static_cast<size_t>(me_)];
  const size_t nmine = mine.size();
  b.send_counts_splits.assign(static_cast<size_t>(W), 0);
  b.recv_counts_splits.assign(static_cast<size_t>(W), static_cast<int64_t>(nmine));
  b.send_ids_counts.assign(static_cast<size_t>(W), 0);
  b.kjt_dev = !again && input_dist_on_device();
  if (b.kjt_dev) {
    bucketize_on_device(b);
  } else {
    ScopedSpan span(tr, me_, Lane::compute, OpCategory::input, n_bucketize, step_);
    // hot rows' ids stay here (sharding/hot_rows.cpp): the input dist sends the others only
    std::vector<int64_t> cold_values, cold_off;
    if (!L_.hot_tables.empty()) drop_hot_ids(b, cold_values, cold_off, again);
    const auto& values = L_.hot_tables.empty() ? b.batch.kjt.values : cold_values;
    const auto& off = L_.hot_tables.empty() ? b.off : cold_off;
    std::vector<BucketSlot> slots;  // slots of rank 0, then rank 1, ...
    for (int d = 0; d < W; ++d) {
      const auto& to = L_.slots_to[static_cast<size_t>(d)];
      b.send_counts_splits[static_cast<size_t>(d)] = static_cast<int64_t>(to.size());
      for (int k : to) {
        const Slot& sl = L_.slots[static_cast<size_t>(k)];
        slots.push_back({sl.feature, sl.bucketize_by_rows, sl.s.row_offset, sl.s.num_rows});
      }
    }
    BucketizedKjt sent = bucketize_kjt(values, off, B, slots);
    size_t k = 0;
    for (int d = 0; d < W; ++d)
      for (size_t j = 0; j < L_.slots_to[static_cast<size_t>(d)].size(); ++j)
        b.send_ids_counts[static_cast<size_t>(d)] += sent.splits[k++];
    b.send_splits = std::move(sent.splits);
    b.send_lengths = std::move(sent.lengths);
    b.send_ids = std::move(sent.ids);
  }
  b.recv_splits.assign(nmine * static_cast<size_t>(W), 0);
  b.lsend.assign(static_cast<size_t>(W), 0);
  b.lrecv.assign(static_cast<size_t>(W), 0);
  for (int d = 0; d < W; ++d) {
    b.lsend[static_cast<size_t>(d)] = b.send_counts_splits[static_cast<size_t>(d)] * B;
    b.lrecv[static_cast<size_t>(d)] = static_cast<int64_t>(nmine) * B;
  }
  if (b.kjt_dev)  // received on the device, into the comm worker's memory (input_dist_job)
    b.recv_lengths_v = {};
  else
    b.recv_lengths_v.assign(nmine * static_cast<size_t>(W * B), 0);
  b.irecv.assign(static_cast<size_t>(W), 0);  // ids from each rank (the ids job counts them; a plan without slots has none)
}

void Rank::bucketize_on_device(Inflight& b) {
  const int W = L_.world;
  const int64_t B = L_.B;
  const auto F = static_cast<int64_t>(sh_.spec.features.size());
  ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::input, "bucketize", step_);
  std::vector<BucketSlot> slots;  // slots of rank 0, then rank 1, ...
  int64_t capacity = 0;           // every slot keeps at most its feature's ids
  for (int d = 0; d < W; ++d) {
    const auto& to = L_.slots_to[static_cast<size_t>(d)];
    b.send_counts_splits[static_cast<size_t>(d)] = static_cast<int64_t>(to.size());
    for (int k : to) {
      const Slot& sl = L_.slots[static_cast<size_t>(k)];
      slots.push_back({sl.feature, sl.bucketize_by_rows, sl.s.row_offset, sl.s.num_rows});
      capacity += b.off[static_cast<size_t>((sl.feature + 1) * B)] - b.off[static_cast<size_t>(sl.feature * B)];
    }
  }
  const auto n_slots = static_cast<int64_t>(slots.size());
  // the batch's values and offsets to the device: one copy
  const auto& values = b.batch.kjt.values;
  const auto nv = static_cast<int64_t>(values.size());
  // (device memory outside the arena: scratch_alloc, as kjt_send; see Inflight)
  std::vector<int64_t> host_in(values.begin(), values.end());
  host_in.insert(host_in.end(), b.off.begin(), b.off.end());
  const detail::RankDevice* dev = gpu_;
  auto scratch = [dev](int64_t words) {
    return std::shared_ptr<void>(dev->scratch_alloc(words * static_cast<int64_t>(sizeof(int64_t))),
                                 [dev](void* p) { dev->scratch_free(p); });
  };
  const std::shared_ptr<void> in = scratch(static_cast<int64_t>(host_in.size()));
  auto* d_in = static_cast<int64_t*>(in.get());
  gpu_->to_device(d_in, host_in.data(), static_cast<int64_t>(host_in.size() * sizeof(int64_t)));
  // send: lengths (slots x B) | splits (slots) | ids (capacity); only the splits come back
  b.kjt_send = scratch(n_slots * B + n_slots + capacity);
  auto* d_send = static_cast<int64_t*>(b.kjt_send.get());
  // the slot list depends on the plan only: on the device since the first batch under it (one
  // copy, counted), read there by every later bucketize
  const auto same = [](const BucketSlot& x, const BucketSlot& y) {
    return x.feature == y.feature && x.row_wise == y.row_wise && x.row_begin == y.row_begin && x.num_rows == y.num_rows;
  };
  if (!bucket_slots_dev_ || !std::equal(slots.begin(), slots.end(), bucket_slots_host_.begin(), bucket_slots_host_.end(), same)) {
    const auto bytes = static_cast<int64_t>(slots.size() * sizeof(BucketSlot));
    bucket_slots_dev_ = std::shared_ptr<void>(dev->scratch_alloc(bytes), [dev](void* p) { dev->scratch_free(p); });
    gpu_->to_device(bucket_slots_dev_.get(), slots.data(), bytes);
    bucket_slots_host_ = slots;
  }
  gpu_->bucketize(d_in, d_in + nv, F, B, slots, d_send, d_send + n_slots * B + n_slots, capacity, d_send + n_slots * B,
                  static_cast<const BucketSlot*>(bucket_slots_dev_.get()));
  b.send_splits.assign(static_cast<size_t>(n_slots), 0);
  gpu_->to_host(b.send_splits.data(), d_send + n_slots * B, n_slots * static_cast<int64_t>(sizeof(int64_t)));
  size_t k = 0;
  for (int d = 0; d < W; ++d)
    for (size_t j = 0; j < L_.slots_to[static_cast<size_t>(d)].size(); ++j)
      b.send_ids_counts[static_cast<size_t>(d)] += b.send_splits[k++];
  b.send_lengths = {};
  b.send_ids = {};
}

bool Rank::input_dist_on_device() const {
  // no slots (data_parallel only): nothing is sent, the batch need not cross
  if (!sh_.opt.device_input_dist || !dist_on_device() || !L_.hot_tables.empty() || L_.slots.empty()) return false;
  return std::none_of(sh_.spec.tables.begin(), sh_.spec.tables.end(), [](const TableSpec& t) {
    return t.placement != TablePlacement::device || t.prefetch_pipeline;
  });
}

bool Rank::slot_ids_on_host(size_t local_slot) const {
  const auto& mine = L_.slots_to[static_cast<size_t>(me_)];
  const Slot& sl = L_.slots[static_cast<size_t>(mine.at(local_slot))];
  // a shard several local slots read (a table read by two features) concatenates their ids on
  // the device (RankDevice::concat_bags): the same rule as one slot's
  for (const auto& ls : shards)
    if (ls.table == sl.table && ls.s.row_offset == sl.s.row_offset && ls.s.col_offset == sl.s.col_offset)
      return !accumulates_on_device(ls) ||
             std::any_of(shardings_.begin(), shardings_.end(),
                         [&](const auto& m) { return m->applies_shard_grads(L_, ls.table); });
  return true;
}

std::function<void()> Rank::input_dist_job(Inflight& b, int part, bool again) {
  const int W = L_.world;
  const size_t nmine = L_.slots_to[static_cast<size_t>(me_)].size();
  const int64_t step = fill_phase_ ? step_ - 1 : step_;  // the pipeline's fill: step -1 (rank.h fill_phase_)
  switch (part) {
    case 0:
      return [this, &b, step, n = again ? "reshard_input_dist/splits" : "input_dist/splits"] {
        on_comm_lane(*world_, n, step, [&] {
          world_->all_to_all_v(n, b.send_splits.data(), b.send_counts_splits, b.recv_splits.data(), b.recv_counts_splits,
                               sizeof(int64_t));
        });
      };
    case 1:
      return [this, &b, step, n = again ? "reshard_input_dist/lengths" : "input_dist/lengths"] {
        on_comm_lane(*world_, n, step, [&] {
          if (b.kjt_dev) {  // the bucketized lengths lead kjt_send
            const detail::RankDevice* dev = gpu_;
            const int64_t n_len = std::accumulate(b.lrecv.begin(), b.lrecv.end(), int64_t{0});
            b.recv_lengths_comm = std::shared_ptr<void>(dev->comm_alloc(n_len * static_cast<int64_t>(sizeof(int64_t))),
                                                        [dev](void* p) { dev->comm_free(p); });
            world_->all_to_all_v_device(n, b.kjt_send.get(), b.lsend, b.recv_lengths_comm.get(), b.lrecv,
                                        sizeof(int64_t));
          } else {
            world_->all_to_all_v(n, b.send_lengths.data(), b.lsend, b.recv_lengths_v.data(), b.lrecv, sizeof(int64_t));
          }
        });
      };
    default:
      return [this, &b, step, nmine, W, n = again ? "reshard_input_dist/ids" : "input_dist/ids"] {
        b.irecv.assign(static_cast<size_t>(W), 0);
        for (int s = 0; s < W; ++s)
          for (size_t k = 0; k < nmine; ++k)
            b.irecv[static_cast<size_t>(s)] += b.recv_splits[static_cast<size_t>(s) * nmine + k];
        const int64_t total = std::accumulate(b.irecv.begin(), b.irecv.end(), int64_t{0});
        if (b.kjt_dev) {  // into device memory of the comm worker's own (kjt_permute reads and frees it)
          const size_t sent = b.send_splits.size();  // kjt_send: lengths (sent x B) | splits (sent) | ids
          const int64_t* d_ids = static_cast<const int64_t*>(b.kjt_send.get()) + static_cast<int64_t>(sent) * (L_.B + 1);
          const detail::RankDevice* dev = gpu_;
          b.recv_ids_comm = std::shared_ptr<void>(dev->comm_alloc(total * static_cast<int64_t>(sizeof(int64_t))),
                                                  [dev](void* p) { dev->comm_free(p); });
          on_comm_lane(*world_, n, step, [&] {
            world_->all_to_all_v_device(n, d_ids, b.send_ids_counts, b.recv_ids_comm.get(), b.irecv, sizeof(int64_t));
          });
          return;
        }
        b.recv_ids_v.assign(static_cast<size_t>(total), 0);
        on_comm_lane(*world_, n, step, [&] {
          world_->all_to_all_v(n, b.send_ids.data(), b.send_ids_counts, b.recv_ids_v.data(), b.irecv, sizeof(int64_t));
        });
      };
  }
}

void Rank::input_dist_again(Inflight& b) {
  bucketize(b, true);
  comm_->run([&] {
    for (int part = 0; part < 3; ++part) input_dist_job(b, part, true)();
  });
}

void Rank::drop_hot_ids(const Inflight& b, std::vector<int64_t>& values, std::vector<int64_t>& off, bool again) {
  const auto& in = b.batch.kjt.values;
  const size_t bags = b.off.size() - 1;  // F x B, feature-major
  values.clear();
  values.reserve(in.size());
  off.assign(bags + 1, 0);
  if (hot_ids.empty()) hot_ids.assign(L_.hot_rows.size(), 0);
  const bool count = !again && b.it >= sh_.spec.warmup_steps;
  for (size_t i = 0; i < bags; ++i) {
    const int t = L_.table_of[i / static_cast<size_t>(L_.B)];
    const bool hot = !L_.hot_rows[static_cast<size_t>(t)].empty();
    for (int64_t k = b.off[i]; k < b.off[i + 1]; ++k)
      if (!hot || L_.hot_index(t, in[static_cast<size_t>(k)]) < 0)
        values.push_back(in[static_cast<size_t>(k)]);
      else if (count)
        ++hot_ids[static_cast<size_t>(t)];
    off[i + 1] = static_cast<int64_t>(values.size());
  }
}

void Rank::finish_input(Inflight& b) {
  settle(b);  // its input dist (queued in this step or, by a pipeline, in the step before)
  const int W = L_.world;
  const int64_t B = L_.B;
  const size_t nmine = L_.slots_to[static_cast<size_t>(me_)].size();
  // Per local slot: its W*B bags (source rank major), ids and offsets.
  b.slot_ids.assign(nmine, {});
  b.slot_off.assign(nmine, {});
  b.slot_len.assign(nmine, {});
  ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::input, "kjt_permute", step_);
  if (b.kjt_dev) {
    finish_input_on_device(b);
    return;
  }
  b.recv_lengths = buf<int64_t>("kjt", b.recv_lengths_v.size());
  b.recv_ids = buf<int64_t>("kjt", b.recv_ids_v.size());
  std::copy(b.recv_lengths_v.begin(), b.recv_lengths_v.end(), b.recv_lengths.data());
  std::copy(b.recv_ids_v.begin(), b.recv_ids_v.end(), b.recv_ids.data());
  b.recv_lengths_v = {};
  b.recv_ids_v = {};
  int64_t base = 0;
  for (int s = 0; s < W; ++s) {
    int64_t pos = base;
    for (size_t k = 0; k < nmine; ++k) {
      const int64_t n = b.recv_splits[static_cast<size_t>(s) * nmine + k];
      b.slot_ids[k].insert(b.slot_ids[k].end(), b.recv_ids.data() + pos, b.recv_ids.data() + pos + n);
      const int64_t* lp = b.recv_lengths.data() + (static_cast<size_t>(s) * nmine + k) * static_cast<size_t>(B);
      b.slot_len[k].insert(b.slot_len[k].end(), lp, lp + B);
      pos += n;
    }
    base += b.irecv[static_cast<size_t>(s)];
  }
  for (size_t k = 0; k < nmine; ++k) {
    b.slot_off[k].assign(static_cast<size_t>(W * B) + 1, 0);
    std::partial_sum(b.slot_len[k].begin(), b.slot_len[k].end(), b.slot_off[k].begin() + 1);
  }
}

void Rank::finish_input_on_device(Inflight& b) {
  const int W = L_.world;
  const int64_t B = L_.B, WB = W * B;
  const std::vector<int>& mine = L_.slots_to[static_cast<size_t>(me_)];
  const size_t nmine = mine.size();
  b.slot_n.assign(nmine, 0);
  b.slot_at.assign(nmine, 0);
  for (int s = 0; s < W; ++s)
    for (size_t k = 0; k < nmine; ++k) b.slot_n[k] += b.recv_splits[static_cast<size_t>(s) * nmine + k];
  for (size_t k = 1; k < nmine; ++k) b.slot_at[k] = b.slot_at[k - 1] + b.slot_n[k - 1];
  const int64_t total = std::accumulate(b.irecv.begin(), b.irecv.end(), int64_t{0});
  b.kjt_send.reset();  // the all-to-alls that read it have returned (settle)
  // in the arena as the host path's recv_lengths and recv_ids, in that order
  b.slot_off_dev = buf<int64_t>("kjt", nmine * static_cast<size_t>(WB + 1));
  b.slot_off_dev.release_host_copy();
  b.recv_ids = buf<int64_t>("kjt", static_cast<size_t>(total));
  b.recv_ids.release_host_copy();
  const auto* d_len = static_cast<const int64_t*>(b.recv_lengths_comm.get());
  gpu_->kjt_permute(W, static_cast<int64_t>(nmine), B, d_len, static_cast<const int64_t*>(b.recv_ids_comm.get()), total,
                    b.recv_ids.device_data(), b.slot_off_dev.device_data());
  // what the host still reads: every slot's lengths when a mean scale or a slot on the host
  // needs them (one copy), and the ids of the slots on the host (one copy each)
  b.slot_host.assign(nmine, 0);
  bool lengths = false;
  for (size_t k = 0; k < nmine; ++k) {
    const Slot& sl = L_.slots[static_cast<size_t>(mine[k])];
    b.slot_host[k] = slot_ids_on_host(k) ? 1 : 0;
    lengths = lengths || b.slot_host[k] || (sl.final_at_lookup && sharding::is_mean(sh_.spec, L_, sl.feature));
  }
  std::vector<int64_t> len;
  if (lengths) {
    len.assign(nmine * static_cast<size_t>(WB), 0);
    gpu_->to_host(len.data(), d_len, static_cast<int64_t>(len.size() * sizeof(int64_t)));
  }
  gpu_->comm_wait_compute();  // the comm worker's memory is freed on its stream after the permute read it
  b.recv_ids_comm.reset();
  b.recv_lengths_comm.reset();
  if (!lengths) return;
  for (int s = 0; s < W; ++s)
    for (size_t k = 0; k < nmine; ++k) {
      const int64_t* lp = len.data() + (static_cast<size_t>(s) * nmine + k) * static_cast<size_t>(B);
      b.slot_len[k].insert(b.slot_len[k].end(), lp, lp + B);
    }
  for (size_t k = 0; k < nmine; ++k) {
    b.slot_off[k].assign(static_cast<size_t>(WB) + 1, 0);
    std::partial_sum(b.slot_len[k].begin(), b.slot_len[k].end(), b.slot_off[k].begin() + 1);
    if (!b.slot_host[k]) continue;
    b.slot_ids[k].assign(static_cast<size_t>(b.slot_n[k]), 0);
    gpu_->to_host(b.slot_ids[k].data(), b.recv_ids.device_data() + b.slot_at[k],
                  b.slot_n[k] * static_cast<int64_t>(sizeof(int64_t)));
  }
}

void Rank::mean_scales(Inflight& b) const {
  const std::vector<int>& mine = L_.slots_to[static_cast<size_t>(me_)];
  b.slot_scale.assign(mine.size(), {});
  for (size_t k = 0; k < mine.size(); ++k) {
    const Slot& sl = L_.slots[static_cast<size_t>(mine[k])];
    if (sl.final_at_lookup && sharding::is_mean(sh_.spec, L_, sl.feature))
      b.slot_scale[k] = sharding::mean_scale(b.slot_len[k].data(), b.slot_len[k].size());
  }
}

bool Rank::pooled_on_device(int f) const {
  if (!dist_on_device()) return false;
  for (const Slot& sl : L_.slots)
    if (sl.feature == f)  // a feature's slots share its table's type
      // row-split tables: not in a plan with hot rows (hot_rows.cpp pools them into pooled[f] and
      // reads dpooled[f] on the host)
      return detail::is_a2a(sl.type) || (detail::is_rw(sl.type) && L_.hot_tables.empty());
  return false;  // replicated (data_parallel): no slot
}

bool Rank::slot_grad_on_device(size_t local_slot) const {
  if (!dist_on_device()) return false;
  const Slot& sl = L_.slots[static_cast<size_t>(L_.slots_to[static_cast<size_t>(me_)].at(local_slot))];
  for (const auto& ls : shards)
    if (ls.table == sl.table && ls.s.row_offset == sl.s.row_offset && ls.s.col_offset == sl.s.col_offset)
      return pooled_on_device(sl.feature) && accumulates_on_device(ls) &&
             std::none_of(shardings_.begin(), shardings_.end(),
                          [&](const auto& m) { return m->applies_shard_grads(L_, ls.table); });
  return false;
}

size_t Rank::local_slot(int slot) const {
  const auto& mine = L_.slots_to[static_cast<size_t>(me_)];
  for (size_t k = 0; k < mine.size(); ++k)
    if (mine[k] == slot) return k;
  throw std::logic_error("slot not local");
}

size_t Rank::local_slot_of_feature(int f) const {
  const auto& mine = L_.slots_to[static_cast<size_t>(me_)];
  for (size_t k = 0; k < mine.size(); ++k)
    if (L_.slots[static_cast<size_t>(mine[k])].feature == f) return k;
  throw std::logic_error("feature has no local slot");
}

void Rank::lookup(Inflight& b) {
  const WorkloadSpec& spec = sh_.spec;
  const int W = L_.world;
  const int64_t B = L_.B;
  const int F = static_cast<int>(spec.features.size());
  auto& tr = sh_.tracer;
  const std::vector<int>& mine = L_.slots_to[static_cast<size_t>(me_)];
  const size_t nmine = mine.size();
  b.slot_out.clear();
  b.slot_out.resize(nmine);
  mean_scales(b);
  b.looked_up = true;
  b.pooled.clear();
  b.pooled.resize(static_cast<size_t>(F));
  for (int f = 0; f < F; ++f) b.pooled[static_cast<size_t>(f)] = buf<float>("pooled_output", static_cast<size_t>(B * L_.dim[static_cast<size_t>(f)]));
  ScopedSpan span(tr, me_, Lane::compute, OpCategory::lookup, "lookup", step_);
  // semi_sync's lookup of the step's own batch happens in iteration 0 only (the fill; afterwards
  // each step looks up the next batch): in a measured step 0 it is counted as a warm-up's (rank.h)
  struct FillScope {
    bool& on;
    ~FillScope() { on = false; }
  } fill{fill_lookup_};
  fill_lookup_ = measured_ && spec.pipeline == PipelineKind::semi_sync && b.it == step_ + spec.warmup_steps;
  // The batch's ids go to the session's id histogram with the load counters of the step that
  // looks it up, where `stats` counts that step's lookups (sessions/analysis/counted_steps.h): a
  // measured step's, neither the pipeline's fill (counted as warm-up) nor a drain step's, so that
  // its ids per table are the counted steps' ids looked up (a semi_sync run of 10 steps counted
  // 10 batches, where stats and the Load page count the 8 looked up in steps 0-7). Once a batch.
  if (b.ids_histogram && measured_ && !fill_lookup_ && !drain_step(step_)) {
    auto changed = histogram_written_.add_changed(*b.ids_histogram, me_);
    histogram_pending_.insert(histogram_pending_.end(), changed.begin(), changed.end());
  }
  b.ids_histogram.reset();
  // Shards in host memory: ONE gather a batch over the ids of all the shard's local slots, as
  // FBGEMM looks up every feature of a TBE in one call: a row that two features of the batch name
  // is one hit or one miss, fetched once (model/host_cache.h; the simulated executor counts the
  // same, cost/cache_model.h). Its time and transfers go to the shard's load counter.
  std::map<std::pair<int, int>, std::vector<int64_t>> host_ids;
  std::vector<int64_t> gathered_at(nmine, -1);  // slot k's first id in its shard's host_ids
  for (size_t k = 0; k < nmine; ++k) {
    const Slot& sl = L_.slots[static_cast<size_t>(mine[k])];
    if (!shard_of(sl.table, sl.shard).host) continue;
    std::vector<int64_t>& v = host_ids[{sl.table, sl.shard}];
    gathered_at[k] = static_cast<int64_t>(v.size());
    const std::vector<int64_t>& off = b.slot_off[k];
    v.insert(v.end(), b.slot_ids[k].begin() + off.front(), b.slot_ids[k].begin() + off[static_cast<size_t>(W * B)]);
  }
  std::map<std::pair<int, int>, std::pair<DeviceBuffer<float>, std::vector<int64_t>>> gathered;
  for (auto& [key, v] : host_ids) {
    LocalShard& ls = shard_of(key.first, key.second);
    const int64_t t0 = tr.now_ns();
    auto& g = gathered[key];
    g.first = ls.host->gather(ls.weights.data(), v.data(), static_cast<int64_t>(v.size()), g.second);
    auto& c = load_of(key.first, key.second);
    c.lookup_ns += tr.now_ns() - t0;
    add_transfers(c, ls.host->take_counters());
  }
  for (size_t k = 0; k < nmine; ++k) {
    const Slot& sl = L_.slots[static_cast<size_t>(mine[k])];
    b.slot_out[k] = buf<float>("pooled_output", static_cast<size_t>(W * B * sl.s.num_cols));
    auto g = gathered.find({sl.table, sl.shard});
    // a slot whose output dist packs on the device (table_wise / column_wise, and the row-split
    // types without hot rows: pooled_on_device): its rows stay there
    const bool rows_stay = pooled_on_device(sl.feature);
    DeviceIds dev;  // the device input dist: the permuted ids and offsets, read on the device
    if (b.kjt_dev) {
      dev.ids = b.recv_ids.device_data() + b.slot_at[k];
      dev.offsets = b.slot_off_dev.device_data() + static_cast<int64_t>(k) * (W * B + 1);
      dev.num_ids = b.slot_n[k];
    }
    slot_lookup(sl.table, sl.shard, b.slot_ids[k].data(), b.slot_off[k].data(), W * B,
                b.slot_scale[k].empty() ? nullptr : b.slot_scale[k].data(), b.slot_out[k],
                g == gathered.end() ? nullptr : &g->second.first,
                g == gathered.end() ? nullptr : g->second.second.data() + gathered_at[k], !rows_stay,
                b.kjt_dev ? &dev : nullptr);
    const int64_t n_ids = b.kjt_dev ? b.slot_n[k] : static_cast<int64_t>(b.slot_ids[k].size());
    load_of(sl.table, sl.shard).bytes_in += (n_ids + W * B) * 8;  // ids and lengths
  }
  // what the modules look up outside the slots (replicated tables)
  const sharding::LocalBatch lb = local_batch(b);
  for (const auto& m : shardings_) m->local_lookup(*this, lb, b.pooled);
}

void Rank::lookup(int table, int shard_index, const int64_t* ids, const int64_t* off, int64_t n_bags, const float* scale,
                  DeviceBuffer<float>& out) {
  slot_lookup(table, shard_index, ids, off, n_bags, scale, out, nullptr, nullptr);
}

void Rank::slot_lookup(int table, int shard_index, const int64_t* ids, const int64_t* off, int64_t n_bags,
                       const float* scale, DeviceBuffer<float>& out, DeviceBuffer<float>* gathered,
                       const int64_t* gathered_ids, bool rows_to_host, const DeviceIds* dev) {
  LocalShard& ls = shard_of(table, shard_index);
  const int64_t t0 = sh_.tracer.now_ns();
  shard_lookup(ls, ids, off, n_bags, scale, out, gathered, gathered_ids, rows_to_host, dev);
  auto& c = load_of(table, shard_index);
  c.lookup_ns += sh_.tracer.now_ns() - t0;
  const int64_t n_ids = dev ? dev->num_ids : off[n_bags] - off[0];
  c.ids += n_ids;
  c.bytes_out += n_bags * ls.s.num_cols * 4;
  if (measured_ && !fill_lookup_) summary.ids_looked_up += n_ids;
  if (ls.host) add_transfers(c, ls.host->take_counters());
}

void Rank::add_transfers(sessions::LoadCounter& c, const HostTransferCounters& t) {
  c.cache_hits += t.cache_hits;
  c.cache_misses += t.cache_misses;
  c.rows_fetched += t.rows_fetched;
  c.bytes_h2d += t.bytes_h2d;
  c.bytes_d2h += t.bytes_d2h;
  if (!measured_) return;
  HostTransferCounters& m = table_transfers[c.table];
  m.cache_hits += t.cache_hits;
  m.cache_misses += t.cache_misses;
  m.rows_fetched += t.rows_fetched;
  m.bytes_h2d += t.bytes_h2d;
  m.bytes_d2h += t.bytes_d2h;
  m.prefetched_rows += t.prefetched_rows;
  m.prefetch_bytes_h2d += t.prefetch_bytes_h2d;
}

void Rank::prefetch(Inflight& b) {
  settle(b);  // its input dist: its ids are here (not yet permuted: kjt_permute stays in its lookup phase)
  const std::vector<int>& mine = L_.slots_to[static_cast<size_t>(me_)];
  const size_t nmine = mine.size();
  // per local shard of a prefetch_pipeline table: the ids of its slots, from the received buffer
  std::map<std::pair<int, int>, std::vector<int64_t>> ids;
  for (size_t k = 0; k < nmine; ++k) {
    const Slot& sl = L_.slots[static_cast<size_t>(mine[k])];
    if (sh_.spec.tables[static_cast<size_t>(sl.table)].prefetch_pipeline) ids[{sl.table, sl.shard}];
  }
  if (ids.empty()) return;
  ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::memcpy, "prefetch", step_);
  int64_t base = 0;
  for (int s = 0; s < L_.world; ++s) {  // the received ids: per source rank, per local slot (finish_input's order)
    int64_t pos = base;
    for (size_t k = 0; k < nmine; ++k) {
      const int64_t n = b.recv_splits[static_cast<size_t>(s) * nmine + k];
      const Slot& sl = L_.slots[static_cast<size_t>(mine[k])];
      if (auto it = ids.find({sl.table, sl.shard}); it != ids.end())
        it->second.insert(it->second.end(), b.recv_ids_v.begin() + pos, b.recv_ids_v.begin() + pos + n);
      pos += n;
    }
    base += b.irecv[static_cast<size_t>(s)];
  }
  int64_t bytes = 0;
  for (auto& [key, v] : ids) {
    LocalShard& ls = shard_of(key.first, key.second);
    if (!ls.host || ls.host->placement() != TablePlacement::host_cached) continue;
    ls.host->prefetch(ls.weights.data(), v.data(), static_cast<int64_t>(v.size()));
    const HostTransferCounters t = ls.host->take_counters();
    bytes += t.prefetch_bytes_h2d;
    add_transfers(load_of(key.first, key.second), t);
  }
  span.set_bytes(bytes);
}

void Rank::update(int table, int shard_index, int64_t iteration, const SparseGrad& g) {
  if (measured_) summary.unique_ids += static_cast<int64_t>(g.rows.size());
  load_of(table, shard_index).unique_ids = static_cast<int64_t>(g.rows.size());
  LocalShard& ls = shard_of(table, shard_index);
  shard_update(ls, iteration, g);
  if (ls.host) add_transfers(load_of(table, shard_index), ls.host->take_counters());
}

void Rank::replica_lookup(int table, const int64_t* ids, const int64_t* off, int64_t n_bags, const float* scale,
                          DeviceBuffer<float>& out) {
  // Counted where the rank served them (tester49 F8a): the load counter of the rank's replica
  // (sessions::kHotRowReplicaShard), so the session's ids, `stats` and RunResult's ids looked up
  // hold every id once (tester35 D1's rule: the load counters and the summary count the same ids)
  LocalShard& rep = hot_replicas.at(table);
  const int64_t t0 = sh_.tracer.now_ns();
  shard_lookup(rep, ids, off, n_bags, scale, out);
  auto& c = load_of(table, sessions::kHotRowReplicaShard);
  c.lookup_ns += sh_.tracer.now_ns() - t0;
  const int64_t n_ids = off[n_bags] - off[0];
  c.ids += n_ids;
  c.bytes_out += n_bags * rep.s.num_cols * 4;
  if (measured_ && !fill_lookup_) summary.ids_looked_up += n_ids;
}

void Rank::replica_update(int table, int64_t iteration, const SparseGrad& g) {
  if (measured_) summary.unique_ids += static_cast<int64_t>(g.rows.size());
  load_of(table, sessions::kHotRowReplicaShard).unique_ids = static_cast<int64_t>(g.rows.size());
  shard_update(hot_replicas.at(table), iteration, g);
}

std::pair<SparseGrad, SparseGrad> Rank::factor_grads(int table, int shard_index, const SparseGrad& g) {
  LocalShard& ls = shard_of(table, shard_index);
  if (measured_) summary.unique_ids += static_cast<int64_t>(g.rows.size());
  load_of(table, shard_index).unique_ids = static_cast<int64_t>(g.rows.size());
  if (gpu_) return device_low_rank_backward(ls, g);
  return low_rank_backward(ls.weights.data(), ls.low_rank_dim, ls.factor_b.data(), ls.s.num_cols, g);
}

void Rank::factor_update(int table, int shard_index, int64_t iteration, const SparseGrad& da, const SparseGrad& db) {
  LocalShard& ls = shard_of(table, shard_index);
  if (gpu_) {
    device_factor_update(ls, iteration, da, db);
    return;
  }
  if (!da.rows.empty()) apply_row_optimizer(sh_.spec.optimizer, iteration, ls.weights.data(), ls.low_rank_dim, ls.state(), da);
  if (!db.rows.empty()) apply_row_optimizer(sh_.spec.optimizer, iteration, ls.factor_b.data(), ls.s.num_cols, ls.b_state(), db);
}

void Rank::compute(OpCategory cat, const char* name, const std::function<void()>& fn) {
  ScopedSpan span(sh_.tracer, me_, Lane::compute, cat, name, step_);
  fn();
}

sharding::LocalBatch Rank::local_batch(const Inflight& b) {
  return {b.batch.kjt.values.data(), b.off.data(), b.batch.kjt.lengths.data(), b.it};
}


}  // namespace embedscope::engine::threaded
