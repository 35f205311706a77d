// A rank's local shards: the lookup of a shard's bags and the update of its rows by a sparse
// gradient, on the host (the CPU kernels) or on the rank's device (RankDevice: the ids, offsets,
// scales and gradients copied there, the rows written back where the host reads them), for fp32,
// reduced-precision, low-rank and host / host_cached shards.
#include "rank.h"

#include <numeric>

namespace embedscope::engine::threaded {

void Rank::shard_lookup(LocalShard& ls, const int64_t* ids, const int64_t* off, int64_t n_bags, const float* scale,
                        DeviceBuffer<float>& out, DeviceBuffer<float>* pre, const int64_t* pre_ids, bool rows_to_host,
                        const DeviceIds* dev) {
  if (gpu_ && dev) {  // the device input dist's ids and offsets, read where they are (device placement only)
    if (ls.host) throw std::logic_error("a host / host_cached shard looked up from device ids");
    DeviceBuffer<float> d_scale;
    if (scale) {
      d_scale = buf<float>("kjt", static_cast<size_t>(n_bags));
      std::copy(scale, scale + n_bags, d_scale.data());
      to_gpu(d_scale);
    }
    const float* d_s = scale ? d_scale.device_data() : nullptr;
    if (ls.low_rank_dim > 0) {
      auto d_p = buf<float>("activations", static_cast<size_t>(n_bags * ls.low_rank_dim));
      gpu_->low_rank_lookup(ls.weights.device_data(), ls.s.num_rows, ls.low_rank_dim, ls.factor_b.device_data(),
                            ls.s.num_cols, dev->ids, dev->offsets, n_bags, d_s, d_p.device_data(), out.device_data());
    } else if (ls.data_type != TableDataType::fp32) {
      gpu_->lookup_encoded(ls.data_type, ls.packed.device_data(), ls.s.num_rows, ls.s.num_cols, dev->ids, dev->offsets,
                           n_bags, d_s, out.device_data());
    } else {
      gpu_->lookup(ls.weights.device_data(), ls.s.num_rows, ls.s.num_cols, dev->ids, dev->offsets, n_bags, d_s,
                   out.device_data());
    }
    if (rows_to_host) gpu_->to_host(out.data(), out.device_data(), static_cast<int64_t>(out.size() * sizeof(float)));
    return;
  }
  if (gpu_) {  // the bags' ids, offsets (rebased to 0) and scales to the GPU, the pooled rows back
    const int64_t base = off[0], n_ids = off[n_bags] - off[0];
    auto d_ids = buf<int64_t>("kjt", static_cast<size_t>(n_ids));
    auto d_off = buf<int64_t>("kjt", static_cast<size_t>(n_bags + 1));
    for (int64_t i = 0; i <= n_bags; ++i) d_off[static_cast<size_t>(i)] = off[i] - base;
    // host / host_cached: the batch's distinct rows gathered into a device buffer (fetched from
    // host memory or copied from their cache slots, model/host_cache.h), looked up there with the
    // ids remapped to the buffer's rows (the shard's plan: the ids are < its rows)
    const float* weights = ls.weights.device_data();
    const int64_t* bag_ids = ids + base;
    DeviceBuffer<float> gathered;
    std::vector<int64_t> local;
    if (ls.host && pre) {  // the batch's one gather of the shard (lookup(Inflight&))
      weights = pre->device_data();
      bag_ids = pre_ids;
    } else if (ls.host) {
      gathered = ls.host->gather(ls.weights.data(), bag_ids, n_ids, local);
      weights = gathered.device_data();
      bag_ids = local.data();
    }
    std::copy(bag_ids, bag_ids + n_ids, d_ids.data());
    to_gpu(d_ids);
    to_gpu(d_off);
    DeviceBuffer<float> d_scale;
    if (scale) {
      d_scale = buf<float>("kjt", static_cast<size_t>(n_bags));
      std::copy(scale, scale + n_bags, d_scale.data());
      to_gpu(d_scale);
    }
    if (ls.low_rank_dim > 0) {  // A's rows summed into p (n_bags x r), then p B (fp32 only: validate)
      auto d_p = buf<float>("activations", static_cast<size_t>(n_bags * ls.low_rank_dim));
      gpu_->low_rank_lookup(weights, ls.s.num_rows, ls.low_rank_dim, ls.factor_b.device_data(), ls.s.num_cols,
                            d_ids.device_data(), d_off.device_data(), n_bags, scale ? d_scale.device_data() : nullptr,
                            d_p.device_data(), out.device_data());
      if (rows_to_host) gpu_->to_host(out.data(), out.device_data(), static_cast<int64_t>(out.size() * sizeof(float)));
      return;
    }
    if (ls.data_type != TableDataType::fp32)  // reduced precision (device placement only: validate)
      gpu_->lookup_encoded(ls.data_type, ls.packed.device_data(), ls.s.num_rows, ls.s.num_cols, d_ids.device_data(),
                           d_off.device_data(), n_bags, scale ? d_scale.device_data() : nullptr, out.device_data());
    else
      gpu_->lookup(weights, ls.s.num_rows, ls.s.num_cols, d_ids.device_data(), d_off.device_data(), n_bags,
                   scale ? d_scale.device_data() : nullptr, out.device_data());
    if (rows_to_host) gpu_->to_host(out.data(), out.device_data(), static_cast<int64_t>(out.size() * sizeof(float)));
    return;
  }
  if (ls.host) {  // the distinct rows fetched (or found in the cache) into a device buffer, looked up there
    const int64_t base = off[0], n_ids = off[n_bags] - off[0];
    std::vector<int64_t> local;
    DeviceBuffer<float> own;
    if (!pre) own = ls.host->gather(ls.weights.data(), ids + base, n_ids, local);
    const DeviceBuffer<float>& rows = pre ? *pre : own;
    std::vector<int64_t> local_off(static_cast<size_t>(n_bags + 1));
    for (int64_t i = 0; i <= n_bags; ++i) local_off[static_cast<size_t>(i)] = off[i] - base;
    pooled_lookup(rows.data(), static_cast<int64_t>(rows.size()) / ls.s.num_cols, ls.s.num_cols,
                  pre ? pre_ids : local.data(), local_off.data(), n_bags, scale, out.data(), ls.s.num_cols);
    return;
  }
  if (ls.low_rank_dim > 0) {
    low_rank_pooled_lookup(ls.weights.data(), ls.s.num_rows, ls.low_rank_dim, ls.factor_b.data(), ls.s.num_cols, ids,
                           off, n_bags, scale, out.data(), ls.s.num_cols);
    return;
  }
  if (ls.data_type != TableDataType::fp32) {
    pooled_lookup_encoded(ls.data_type, ls.packed.data(), ls.s.num_rows, ls.s.num_cols, ids, off, n_bags, scale,
                          out.data(), ls.s.num_cols);
    return;
  }
  pooled_lookup(ls.weights.data(), ls.s.num_rows, ls.s.num_cols, ids, off, n_bags, scale, out.data(), ls.s.num_cols);
}

void Rank::shard_update(LocalShard& ls, int64_t iteration, const SparseGrad& g) {
  if (ls.host) {  // on a device too: the store gathers the rows there and runs its row optimizer (cache_device_)
    ls.host->update(sh_.spec.optimizer, iteration, ls.weights.data(), ls.state(), g);
    return;
  }
  if (gpu_ && (ls.data_type != TableDataType::fp32 || ls.state_type != OptimizerStateType::fp32)) {  // as the CPU below
    const auto n = g.rows.size();
    if (n == 0) return;
    auto d_rows = buf<int64_t>("gradients", n);
    auto d_vals = buf<float>("gradients", g.values.size());
    std::copy(g.rows.begin(), g.rows.end(), d_rows.data());
    std::copy(g.values.begin(), g.values.end(), d_vals.data());
    to_gpu(d_rows);
    to_gpu(d_vals);
    const bool fp32_state = ls.state_type == OptimizerStateType::fp32;
    detail::EncodedShardView v{ls.data_type,
                               ls.state_type,
                               ls.data_type == TableDataType::fp32 ? reinterpret_cast<uint8_t*>(ls.weights.device_data())
                                                                   : ls.packed.device_data(),
                               ls.s.num_rows,
                               ls.s.num_cols,
                               fp32_state ? static_cast<void*>(ls.momentum1.device_data()) : ls.packed_state1.device_data(),
                               fp32_state ? static_cast<void*>(ls.momentum2.device_data()) : ls.packed_state2.device_data(),
                               ls.stochastic_rounding ? &ls.sr_key : nullptr};
    gpu_->update_encoded(sh_.spec.optimizer, iteration, v, d_rows.device_data(), static_cast<int64_t>(n),
                         d_vals.device_data(), measured_ ? &ls.storage_error : nullptr);
    return;
  }
  if (gpu_ && ls.low_rank_dim > 0) {  // dA and dB on the device from A and B before the update, then both updated
    const auto [da, db] = device_low_rank_backward(ls, g);
    device_factor_update(ls, iteration, da, db);
    return;
  }
  if (gpu_) {
    device_update(iteration, ls.weights.device_data(), ls.momentum1.device_data(), ls.momentum2.device_data(),
                  ls.s.num_rows, ls.s.num_cols, g);
    return;
  }
  if (ls.low_rank_dim > 0) {  // dA and dB from A and B before the update, then both updated
    const auto [da, db] = low_rank_backward(ls.weights.data(), ls.low_rank_dim, ls.factor_b.data(), ls.s.num_cols, g);
    apply_row_optimizer(sh_.spec.optimizer, iteration, ls.weights.data(), ls.low_rank_dim, ls.state(), da);
    if (!db.rows.empty())
      apply_row_optimizer(sh_.spec.optimizer, iteration, ls.factor_b.data(), ls.s.num_cols, ls.b_state(), db);
    return;
  }
  if (ls.data_type != TableDataType::fp32) {
    apply_row_optimizer_encoded(sh_.spec.optimizer, iteration, ls.data_type, ls.packed.data(), ls.s.num_cols, ls.state(), g,
                                measured_ ? &ls.storage_error : nullptr, ls.stochastic_rounding ? &ls.sr_key : nullptr);
    return;
  }
  apply_row_optimizer(sh_.spec.optimizer, iteration, ls.weights.data(), ls.s.num_cols, ls.state(), g);
}

void Rank::device_update(int64_t iteration, float* weights, float* momentum1, float* momentum2, int64_t rows,
                         int64_t cols, const SparseGrad& g) {
  // the rows and their gradients to the GPU: one bag per row, each row once
  const auto n = g.rows.size();
  if (n == 0) return;
  auto d_rows = buf<int64_t>("gradients", n);
  auto d_off = buf<int64_t>("gradients", n + 1);
  auto d_vals = buf<float>("gradients", g.values.size());
  std::copy(g.rows.begin(), g.rows.end(), d_rows.data());
  std::iota(d_off.data(), d_off.data() + n + 1, int64_t{0});
  std::copy(g.values.begin(), g.values.end(), d_vals.data());
  to_gpu(d_rows);
  to_gpu(d_off);
  to_gpu(d_vals);
  if (measured_)
    detail::add_sparse_grad_copies({3, 0, static_cast<int64_t>((2 * n + 1) * sizeof(int64_t) + g.values.size() * sizeof(float)), 0});
  gpu_->update(sh_.spec.optimizer, iteration, weights, momentum1, momentum2, rows, cols, d_rows.device_data(),
               d_off.device_data(), static_cast<int64_t>(n), d_vals.device_data());
}

std::pair<SparseGrad, SparseGrad> Rank::device_low_rank_backward(LocalShard& ls, const SparseGrad& g) {
  const int64_t r = ls.low_rank_dim, dim = ls.s.num_cols;
  const auto n = static_cast<int64_t>(g.rows.size());
  SparseGrad da, db;  // as low_rank_backward: dA's rows those of g, dB every row of B (none when g has none)
  da.dim = r;
  db.dim = dim;
  da.rows = g.rows;
  if (n == 0) return {std::move(da), std::move(db)};
  auto d_rows = buf<int64_t>("gradients", static_cast<size_t>(n));
  auto d_g = buf<float>("gradients", g.values.size());
  auto d_da = buf<float>("gradients", static_cast<size_t>(n * r)), d_db = buf<float>("gradients", static_cast<size_t>(r * dim));
  std::copy(g.rows.begin(), g.rows.end(), d_rows.data());
  std::copy(g.values.begin(), g.values.end(), d_g.data());
  to_gpu(d_rows);
  to_gpu(d_g);
  gpu_->low_rank_backward(ls.weights.device_data(), r, ls.factor_b.device_data(), dim, d_rows.device_data(), n,
                          d_g.device_data(), d_da.device_data(), d_db.device_data());
  da.values.resize(static_cast<size_t>(n * r));
  db.values.resize(static_cast<size_t>(r * dim));
  db.rows.resize(static_cast<size_t>(r));
  std::iota(db.rows.begin(), db.rows.end(), int64_t{0});
  gpu_->to_host(da.values.data(), d_da.device_data(), n * r * 4);
  gpu_->to_host(db.values.data(), d_db.device_data(), r * dim * 4);
  return {std::move(da), std::move(db)};
}

void Rank::device_factor_update(LocalShard& ls, int64_t iteration, const SparseGrad& da, const SparseGrad& db) {
  device_update(iteration, ls.weights.device_data(), ls.momentum1.device_data(), ls.momentum2.device_data(),
                ls.s.num_rows, ls.low_rank_dim, da);
  device_update(iteration, ls.factor_b.device_data(), ls.b_momentum1.device_data(), ls.b_momentum2.device_data(),
                ls.low_rank_dim, ls.s.num_cols, db);
}

}  // namespace embedscope::engine::threaded
