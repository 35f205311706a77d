// The rank's ops of a batch's train phase: dense forward/backward with the DDP bucket
// all-reduces it launches, the embedding backward with the fused optimizer, the dense
// optimizer. The gradient dist and the modules' own updates between them are the sharding
// modules' ops (sharding/embedding_sharding.h).
#include "rank.h"

#include "exec/threaded/grad_pack.h"

namespace embedscope::engine::threaded {

void Rank::dense_forward_backward(const Program& pr, const ProgramOp& op, Inflight& b) {
  const int W = L_.world;
  const int64_t B = L_.B;
  const int F = static_cast<int>(sh_.spec.features.size());
  const int64_t step = step_;
  const std::vector<int>& mine = L_.slots_to[static_cast<size_t>(me_)];
  const size_t nmine = mine.size();
  const std::vector<int>& bucket_ops = pr.launches[static_cast<size_t>(op.id)];
  if (bucket_ops.size() != buckets_.size())
    throw std::logic_error(fmt::format("dense_forward_backward launches {} all-reduce op(s); the model has {} DDP bucket(s)",
                                       bucket_ops.size(), buckets_.size()));

  // ---- dense forward / loss / backward --------------------------------------------------------
  b.dpooled.clear();
  b.dpooled.resize(static_cast<size_t>(F));
  for (int f = 0; f < F; ++f)
    b.dpooled[static_cast<size_t>(f)] = buf<float>("gradients", static_cast<size_t>(B * L_.dim[static_cast<size_t>(f)]));
  std::vector<DeviceBuffer<float>>& dpooled = b.dpooled;
  {
    ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::dense, "dense_forward_backward", step);
    // the activations' block; resident (dense_.resident()): the device memory of every activation
    // and activation gradient of the step (DenseModel::forward_backward_resident's layout)
    DeviceBuffer<float> act(&arena_, "activations");
    // (the host path's block: activation_bytes rounded up to whole floats; bf16 / fp16 hold 2-byte values)
    act.assign(static_cast<size_t>(dense_.resident() ? dense_.resident_activation_floats(B) : (dense_.activation_bytes(B) + 3) / 4));
    if (dense_.resident()) act.release_host_copy();
    std::vector<const float*> pp(static_cast<size_t>(F));
    std::vector<float*> dp(static_cast<size_t>(F));
    // features whose pooled embeddings the output dist left on the device (b.pooled_dev, as the
    // layout was when it finished) are read there; those whose gradient dist packs on the device
    // (pooled_on_device, the layout now: the same unless a live rebalance changed a table's type
    // in between, which only the cpu backend runs today) get their gradients written there, not
    // scaled here (the packing scales them by 1 / W)
    std::vector<uint8_t> in_dev(static_cast<size_t>(F), 0), out_dev(static_cast<size_t>(F), 0);
    for (int f = 0; f < F; ++f) {
      const auto fu = static_cast<size_t>(f);
      in_dev[fu] = dense_.resident() && fu < b.pooled_dev.size() && b.pooled_dev[fu] ? 1 : 0;
      out_dev[fu] = dense_.resident() && pooled_on_device(f) ? 1 : 0;
      pp[fu] = in_dev[fu] ? b.pooled[fu].device_data() : b.pooled[fu].data();
      dp[fu] = out_dev[fu] ? dpooled[fu].device_data() : dpooled[fu].data();
    }
    // DDP: each bucket of dense gradients is all-reduced on the comm worker as soon as the
    // backward pass has produced it, under the rest of the backward pass
    red_.assign(static_cast<size_t>(dense_.num_params()) + 2, 0.0f);
    size_t next_bucket = 0;
    auto on_grads_ready = [&](int64_t ready_from) {
      while (next_bucket + 1 < buckets_.size() && buckets_[next_bucket].first >= ready_from) {
        launch_bucket(next_bucket, step, bucket_ops[next_bucket]);
        ++next_bucket;
      }
    };
    const double loss =
        dense_.resident()
            ? dense_.forward_backward_resident(B, act.device_data(), b.batch.dense.data(), pp, b.batch.labels.data(), dp,
                                               on_grads_ready, in_dev, out_dev)
            : dense_.forward_backward(B, b.batch.dense.data(), pp, b.batch.labels.data(), dp, on_grads_ready);
    red_[0] = static_cast<float>(loss);
    red_[1] = sh_.opt.cancel && sh_.opt.cancel->load() ? 1.0f : 0.0f;
    for (; next_bucket < buckets_.size(); ++next_bucket) launch_bucket(next_bucket, step, bucket_ops[next_bucket]);
    // gradients of the global-batch mean loss
    const float inv_w = 1.0f / static_cast<float>(W);
    for (int f = 0; f < F; ++f)
      if (!out_dev[static_cast<size_t>(f)])
        for (size_t i = 0; i < dpooled[static_cast<size_t>(f)].size(); ++i) dpooled[static_cast<size_t>(f)][i] *= inv_w;
  }
  b.pooled.clear();
  // what the grad dist ops write: per local slot, every rank's gradients of its bags
  b.slot_grad.clear();
  b.slot_grad.resize(nmine);
  for (size_t k = 0; k < nmine; ++k)
    b.slot_grad[k] = buf<float>("gradients", static_cast<size_t>(W * B * L_.slots[static_cast<size_t>(mine[k])].s.num_cols));
  b.scratch.clear();
  b.scratch.resize(shardings_.size());
  b.shard_grads.assign(shardings_.size(), {});
}

void Rank::backward_fused_optimizer(Inflight& b) {
  const int W = L_.world;
  const int64_t B = L_.B;
  const std::vector<int>& mine = L_.slots_to[static_cast<size_t>(me_)];
  const size_t nmine = mine.size();
  // ---- embedding backward + fused optimizer ----------------------------------------------------
  // shards whose module applies their gradients itself (its update ops), per module
  ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::optimizer, "backward_fused_optimizer", step_);
  // shards accumulated and updated on the device (accumulates_on_device): their counts of
  // distinct rows land in `counts` (device memory, one per shard), read with one copy at the end
  // that does not wait (defer_counts)
  DeviceBuffer<int64_t> counts;
  std::vector<size_t> on_device;  // indices into shards
  for (size_t si = 0; si < shards.size(); ++si) {
    LocalShard& ls = shards[si];
    std::vector<size_t> ks;  // the slots reading the shard, in slot order (the parts' order)
    for (size_t k = 0; k < nmine; ++k) {
      const Slot& sl = L_.slots[static_cast<size_t>(mine[k])];
      if (sl.table != ls.table || sl.s.row_offset != ls.s.row_offset || sl.s.col_offset != ls.s.col_offset) continue;
      ks.push_back(k);
    }
    if (ks.empty()) continue;  // a shard no slot reads (a replica: its module updates it)
    const auto m = std::find_if(shardings_.begin(), shardings_.end(),
                                [&](const auto& x) { return x->applies_shard_grads(L_, ls.table); });
    if (m == shardings_.end() && accumulates_on_device(ls)) {
      if (counts.size() == 0) counts = buf<int64_t>("gradients", shards.size());
      device_accumulate_update(ls, ks, b, b.it + 1, counts.device_data() + si);
      on_device.push_back(si);
      continue;
    }
    std::vector<SparseGrad> parts;
    for (const size_t k : ks)
      parts.push_back(accumulate_sparse_grad(ls.s.num_cols, b.slot_ids[k].data(), b.slot_off[k].data(), W * B,
                                             b.slot_scale[k].empty() ? nullptr : b.slot_scale[k].data(),
                                             b.slot_grad[k].data(), ls.s.num_cols));
    SparseGrad g = parts.size() == 1 ? std::move(parts[0]) : merge_sparse_grads(parts, ls.s.num_cols);
    if (m != shardings_.end()) {
      b.shard_grads[static_cast<size_t>(m - shardings_.begin())].push_back({ls.table, ls.shard_index, std::move(g)});
      continue;
    }
    update(ls.table, ls.shard_index, b.it + 1, std::move(g));
  }
  if (on_device.empty()) return;
  // the distinct rows of the device's shards (the load counters' unique ids), after every
  // shard's work is queued: copied back without a wait, taken where the host waits anyway
  std::vector<std::tuple<size_t, int, int>> whose;
  for (const size_t si : on_device) whose.emplace_back(si, shards[si].table, shards[si].shard_index);
  defer_counts(counts, std::move(whose));
}

void Rank::device_accumulate_update(LocalShard& ls, const std::vector<size_t>& ks, Inflight& b,
                                    int64_t iteration, int64_t* d_count) {
  const int64_t WB = static_cast<int64_t>(L_.world) * L_.B, cols = ls.s.num_cols;
  if (b.kjt_dev && std::none_of(ks.begin(), ks.end(), [&](size_t k) { return b.slot_host[k] != 0; })) {
    device_accumulate_update_from_device_ids(ls, ks, b, iteration, d_count);
    return;
  }
  const auto P = static_cast<int64_t>(ks.size());
  const int64_t bags = P * WB;
  int64_t num_ids = 0;
  bool scaled = false;
  for (const size_t k : ks) {
    num_ids += b.slot_off[k][static_cast<size_t>(WB)] - b.slot_off[k][0];
    scaled = scaled || !b.slot_scale[k].empty();
  }
  if (num_ids == 0) {  // no rows to update: the count (0) only, nothing copied
    detail::RankDevice::SparseGradInput none;
    none.num_bags = 0;
    none.grad_stride = cols;
    gpu_->accumulate_update(sh_.spec.optimizer, iteration, ls.weights.device_data(), ls.momentum1.device_data(),
                            ls.momentum2.device_data(), ls.s.num_rows, cols, none, d_count);
    return;
  }
  // one buffer, one copy: ids, offsets, scales and gradients (GradPackLayout). The gradients of
  // slots the gradient dist left on the device (slot_grad_on_device) are copied there device to
  // device instead: then only the head (ids, offsets, scales) crosses.
  const GradPackLayout layout{num_ids, bags, cols, scaled};
  const int64_t words = layout.words();
  auto pack = buf<int64_t>("gradients", static_cast<size_t>(words));
  int64_t* ids = layout.ids(pack.data());
  int64_t* off = layout.offsets(pack.data());
  float* scale = layout.scale(pack.data());
  float* grad = layout.grad(pack.data());
  const int64_t grad_at = layout.grad_at();  // bytes
  bool grads_on_device = true;
  for (const size_t k : ks) grads_on_device = grads_on_device && slot_grad_on_device(k);
  int64_t at = 0, bag = 0;
  off[0] = 0;
  for (const size_t k : ks) {
    const int64_t* so = b.slot_off[k].data();
    std::copy(b.slot_ids[k].data() + so[0], b.slot_ids[k].data() + so[WB], ids + at);
    for (int64_t i = 1; i <= WB; ++i) off[bag + i] = at + so[i] - so[0];
    at += so[WB] - so[0];
    if (!grads_on_device)
      std::memcpy(grad + bag * cols, b.slot_grad[k].data(), static_cast<size_t>(WB * cols) * sizeof(float));
    if (scaled) {
      if (b.slot_scale[k].empty()) std::fill_n(scale + bag, WB, 1.0f);
      else std::copy_n(b.slot_scale[k].data(), WB, scale + bag);
    }
    bag += WB;
  }
  const int64_t crossing = grads_on_device ? grad_at : words * static_cast<int64_t>(sizeof(int64_t));
  gpu_->to_device(pack.device_data(), pack.data(), crossing);
  if (grads_on_device) {
    float* d_dst = layout.grad(pack.device_data());
    bag = 0;
    for (const size_t k : ks) {
      gpu_->copy_on_device(d_dst + bag * cols, b.slot_grad[k].device_data(),
                           WB * cols * static_cast<int64_t>(sizeof(float)));
      bag += WB;
    }
  }
  if (measured_) detail::add_sparse_grad_copies({1, 0, crossing, 0});
  const int64_t* d_pack = pack.device_data();
  const int64_t* d_ids = layout.ids(d_pack);
  const int64_t* d_off = layout.offsets(d_pack);
  const float* d_scale = layout.scale(d_pack);
  const float* d_grad = layout.grad(d_pack);
  detail::RankDevice::SparseGradInput in;
  in.ids = d_ids;
  in.offsets = d_off;
  in.num_bags = bags;
  in.bags_per_part = WB;
  in.num_ids = num_ids;
  in.scale = d_scale;
  in.grad = d_grad;
  in.grad_stride = cols;
  gpu_->accumulate_update(sh_.spec.optimizer, iteration, ls.weights.device_data(), ls.momentum1.device_data(),
                          ls.momentum2.device_data(), ls.s.num_rows, cols, in, d_count);
}

void Rank::device_accumulate_update_from_device_ids(LocalShard& ls, const std::vector<size_t>& ks, Inflight& b,
                                                    int64_t iteration, int64_t* d_count) {
  const int64_t WB = static_cast<int64_t>(L_.world) * L_.B, cols = ls.s.num_cols;
  const auto P = static_cast<int64_t>(ks.size());
  const int64_t bags = P * WB;
  int64_t num_ids = 0;
  bool scaled = false, grads_on_device = true;
  for (const size_t k : ks) {
    num_ids += b.slot_n[k];
    scaled = scaled || !b.slot_scale[k].empty();
    grads_on_device = grads_on_device && slot_grad_on_device(k);  // a table's features share its type
  }
  detail::RankDevice::SparseGradInput in;
  in.num_ids = num_ids;
  in.num_bags = num_ids == 0 ? 0 : bags;  // no ids: the count (0) only, as device_accumulate_update
  in.bags_per_part = WB;
  in.grad_stride = cols;
  auto ids_of = [&](size_t k) { return b.recv_ids.device_data() + b.slot_at[k]; };  // kjt_permute's
  auto offsets_of = [&](size_t k) { return b.slot_off_dev.device_data() + static_cast<int64_t>(k) * (WB + 1); };
  if (P == 1 || in.num_bags == 0) {
    // one slot: its ids and offsets where the lookup read them; what crosses: the scales (mean
    // pooling) and the gradients unless the gradient dist left them on the device, in one copy
    const size_t k = ks[0];
    in.ids = ids_of(k);
    in.offsets = offsets_of(k);
    const int64_t floats = (scaled ? WB : 0) + (grads_on_device ? 0 : WB * cols);
    DeviceBuffer<float> pack;
    if (in.num_bags > 0 && floats > 0) {
      pack = buf<float>("gradients", static_cast<size_t>(floats));
      if (scaled) std::copy_n(b.slot_scale[k].data(), WB, pack.data());
      if (!grads_on_device) std::memcpy(pack.data() + (scaled ? WB : 0), b.slot_grad[k].data(),
                                        static_cast<size_t>(WB * cols) * sizeof(float));
      const auto bytes = floats * static_cast<int64_t>(sizeof(float));
      gpu_->to_device(pack.device_data(), pack.data(), bytes);
      if (measured_) detail::add_sparse_grad_copies({1, 0, bytes, 0});
    }
    in.scale = scaled ? pack.device_data() : nullptr;
    in.grad = grads_on_device ? b.slot_grad[k].device_data() : pack.device_data() + (scaled ? WB : 0);
    gpu_->accumulate_update(sh_.spec.optimizer, iteration, ls.weights.device_data(), ls.momentum1.device_data(),
                            ls.momentum2.device_data(), ls.s.num_rows, cols, in, d_count);
    return;
  }
  // several slots read the shard: the pack device_accumulate_update builds on the host (ids,
  // offsets, scales, gradients; the same block), its ids and offsets concatenated on the device
  // from the slots' (RankDevice::concat_bags), the gradients the gradient dist left there copied
  // device to device; only the scales and host gradients cross, in one copy
  const GradPackLayout layout{num_ids, bags, cols, scaled};
  auto pack = buf<int64_t>("gradients", static_cast<size_t>(layout.words()));
  int64_t* d_ids = layout.ids(pack.device_data());
  int64_t* d_off = layout.offsets(pack.device_data());
  std::vector<detail::BagPart> parts;
  for (const size_t k : ks) parts.push_back({ids_of(k), offsets_of(k), b.slot_n[k]});
  gpu_->concat_bags(parts, WB, d_ids, d_off);
  const int64_t head = layout.head_bytes();  // bytes before the floats
  float* scale = layout.scale(pack.data());
  float* grad = layout.grad(pack.data());
  float* d_scale = layout.scale(pack.device_data());
  float* d_grad = layout.grad(pack.device_data());
  int64_t bag = 0;
  for (const size_t k : ks) {
    if (scaled) {
      if (b.slot_scale[k].empty()) std::fill_n(scale + bag, WB, 1.0f);
      else std::copy_n(b.slot_scale[k].data(), WB, scale + bag);
    }
    if (grads_on_device)
      gpu_->copy_on_device(d_grad + bag * cols, b.slot_grad[k].device_data(),
                           WB * cols * static_cast<int64_t>(sizeof(float)));
    else
      std::memcpy(grad + bag * cols, b.slot_grad[k].data(), static_cast<size_t>(WB * cols) * sizeof(float));
    bag += WB;
  }
  // the scales and host gradients: from the head to the gradients' end, or to their start
  const int64_t crossing = (grads_on_device ? layout.grad_at() : layout.grads_end()) - head;
  if (crossing > 0) {
    gpu_->to_device(reinterpret_cast<char*>(pack.device_data()) + head, reinterpret_cast<char*>(pack.data()) + head,
                    crossing);
    if (measured_) detail::add_sparse_grad_copies({1, 0, crossing, 0});
  }
  in.ids = d_ids;
  in.offsets = d_off;
  in.scale = d_scale;
  in.grad = d_grad;
  gpu_->accumulate_update(sh_.spec.optimizer, iteration, ls.weights.device_data(), ls.momentum1.device_data(),
                          ls.momentum2.device_data(), ls.s.num_rows, cols, in, d_count);
}

void Rank::dense_optimizer(Inflight& b) {
  const WorkloadSpec& spec = sh_.spec;
  const int W = L_.world;
  // ---- dense gradients (and the loss) all-reduced, averaged, applied -------------------------
  // The buckets launched during the backward pass (this op waits for them: its waits_for) ran
  // on the comm worker before the gradient dist (queue order).
  bool stop = false;
  const float mean_loss = red_[0] / static_cast<float>(W);
  {
    ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::optimizer, "dense_optimizer", step_);
    const float inv_w = 1.0f / static_cast<float>(W);
    stop = red_[1] > 0;
    for (size_t i = 2; i < red_.size(); ++i) red_[i] *= inv_w;
    const double lr = spec.optimizer.dense_learning_rate > 0 ? spec.optimizer.dense_learning_rate : spec.optimizer.learning_rate;
    dense_.sgd_step(static_cast<float>(lr), red_.data() + 2);
  }
  release_train_buffers(b);  // the batch's gradients go back to the allocator
  // The loss is all-reduced, so every rank sees the same value and stops at the same step.
  throw_if_diverged(static_cast<double>(mean_loss), step_);
  if (measured_) losses.push_back(static_cast<double>(mean_loss));
  last_loss_ = static_cast<double>(mean_loss);
  stop_ = stop;
  b.trained = true;
}

void Rank::launch_bucket(size_t k, int64_t step, int op) {
  // red_ = [loss, cancel vote, gradients...]; the last bucket (parameters from 0) takes the
  // loss and the vote with it
  const auto [lo, hi] = buckets_[k];
  dense_.download_grads(lo, hi);  // resident: the bucket's gradients from the device (one copy)
  const auto& g = dense_.grads();
  std::copy(g.begin() + lo, g.begin() + hi, red_.begin() + 2 + lo);
  const int64_t from = k + 1 == buckets_.size() ? 0 : 2 + lo;
  float* data = red_.data() + from;
  const int64_t count = 2 + hi - from;
  op_done_[static_cast<size_t>(op)] = comm_
                                          ->submit([this, data, count, step] {
                                            on_comm_lane(*world_, "dense_all_reduce", step,
                                                         [&] { world_->all_reduce_sum("dense_all_reduce", data, count); });
                                          })
                                          .share();
}

}  // namespace embedscope::engine::threaded
