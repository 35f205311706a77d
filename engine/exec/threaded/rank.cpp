// The threaded executor's rank: devices and shards, setup, the step loop interpreting the step's
// program op by op, memory records.
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

std::unique_ptr<DeviceAllocator> Rank::make_allocator(Shared& sh, int rank) {
  const AllocatorConfig config{sh.spec.memory.allocator, sh.spec.devices.memory_bytes, sh.spec.memory.max_split_size, true};
  if (const detail::RankDevice* gpu = gpu_of(sh, rank)) return gpu->make_allocator(config);
  return DeviceAllocator::create(config);
}

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

void Rank::dense_layers_on_gpu() {
  constexpr int64_t f = sizeof(float);
  DenseModel::LinearOps ops;
  ops.forward = [this](int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, bool relu,
                       float* y) {
    auto d_x = on_gpu("activations", x, B * in), d_w = on_gpu("dense", w, out * in), d_b = on_gpu("dense", b, out);
    auto d_y = buf<float>("activations", static_cast<size_t>(B * out));
    gpu_->linear_forward(B, in, out, d_x.device_data(), d_w.device_data(), d_b.device_data(), relu, d_y.device_data());
    gpu_->to_host(y, d_y.device_data(), B * out * f);
  };
  ops.backward = [this](int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y, bool relu,
                        float* dy, float* dw, float* db, float* dx) {
    auto d_x = on_gpu("activations", x, B * in), d_w = on_gpu("dense", w, out * in);
    auto d_y = on_gpu("activations", y, B * out), d_dy = on_gpu("gradients", dy, B * out);
    auto d_dw = buf<float>("gradients", static_cast<size_t>(out * in)), d_db = buf<float>("gradients", static_cast<size_t>(out));
    DeviceBuffer<float> d_dx;
    if (dx) d_dx = buf<float>("gradients", static_cast<size_t>(B * in));
    gpu_->linear_backward(B, in, out, d_x.device_data(), d_w.device_data(), d_y.device_data(), relu, d_dy.device_data(),
                          d_dw.device_data(), d_db.device_data(), dx ? d_dx.device_data() : nullptr);
    gpu_->to_host(dy, d_dy.device_data(), B * out * f);  // ReLU-masked in place, as the CPU function does
    gpu_->to_host(dw, d_dw.device_data(), out * in * f);
    gpu_->to_host(db, d_db.device_data(), out * f);
    if (dx) gpu_->to_host(dx, d_dx.device_data(), B * in * f);
  };
  // the loss and the dense SGD step on the device too (bce_with_logits_cuda / sgd_step_cuda;
  // the host stand-in runs the host functions, bit for bit the cpu backend's)
  ops.loss = [this](int64_t B, const float* logits, const float* labels, float* dlogits) {
    auto d_z = on_gpu("activations", logits, B), d_y = on_gpu("activations", labels, B);
    auto d_dz = buf<float>("gradients", static_cast<size_t>(B));
    const double loss = gpu_->bce_loss(B, d_z.device_data(), d_y.device_data(), d_dz.device_data());
    gpu_->to_host(dlogits, d_dz.device_data(), B * f);
    return loss;
  };
  ops.sgd = [this](int64_t n, float lr, const float* grad, float* params) {
    auto d_p = on_gpu("dense", params, n), d_g = on_gpu("gradients", grad, n);
    gpu_->sgd_step(n, lr, d_g.device_data(), d_p.device_data());
    gpu_->to_host(params, d_p.device_data(), n * f);
  };
  // the dot interaction (dot_interaction_forward_cuda / _backward_cuda)
  ops.dot_forward = [this](int64_t B, int64_t F, int64_t d0, const float* x0, float* r) {
    const int64_t in_w = (F + 1) * d0, out_w = d0 + (F + 1) * F / 2;
    auto d_x0 = on_gpu("activations", x0, B * in_w);
    auto d_r = buf<float>("activations", static_cast<size_t>(B * out_w));
    gpu_->dot_forward(B, F, d0, d_x0.device_data(), d_r.device_data());
    gpu_->to_host(r, d_r.device_data(), B * out_w * f);
  };
  ops.dot_backward = [this](int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) {
    const int64_t in_w = (F + 1) * d0, out_w = d0 + (F + 1) * F / 2;
    auto d_x0 = on_gpu("activations", x0, B * in_w), d_dr = on_gpu("gradients", dr, B * out_w);
    auto d_dx0 = buf<float>("gradients", static_cast<size_t>(B * in_w));
    gpu_->dot_backward(B, F, d0, d_x0.device_data(), d_dr.device_data(), d_dx0.device_data());
    gpu_->to_host(dx0, d_dx0.device_data(), B * in_w * f);
  };
  dense_.set_linear_ops(std::move(ops));
}

void Rank::setup() {
  const auto& spec = sh_.spec;
  current_step_ = step_of(0) - 1;  // setup's allocations belong to the step before the first
  const auto timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
  comm_ = std::make_unique<CommWorker>();
  // the comm worker issues device work too (the intra-device communicator's staging, copies and
  // reductions on the rank's comm stream): its thread is bound to the rank's device as the rank's
  // own is (on a GPU a stream's work from a thread whose current device is another GPU fails)
  if (gpu_) comm_->run([this] { gpu_->bind_thread(); });
  if (sh_.on_thread_start) comm_->run([this] { sh_.on_thread_start(me_); });  // its CUDA calls are this rank's
  std::vector<int> all(static_cast<size_t>(L_.world));
  std::iota(all.begin(), all.end(), 0);
  const bool any_twrw = L_.hierarchical;  // node and cross groups
  const int node = me_ / L_.local, l = me_ % L_.local;
#if EMBEDSCOPE_WITH_CUDA
  // NCCL for the groups the cuda executor made communicators for (none for a group whose
  // members all share one GPU: the intra-device communicator below)
  auto nccl = [&](const std::vector<NcclComm*>& of_rank) -> std::unique_ptr<Collectives> {
    NcclComm* c = of_rank.empty() ? nullptr : of_rank[static_cast<size_t>(me_)];
    return c ? detail::nccl_collectives(*c, gpu_) : nullptr;
  };
  world_ = nccl(sh_.nccl_world);
  if (any_twrw) {
    node_ = nccl(sh_.nccl_node);
    cross_ = nccl(sh_.nccl_cross);
  }
#endif
  auto gloo = [&](std::string name, std::vector<int> members, int group_rank) {
    auto pg = std::make_unique<ProcessGroup>(sh_.rv, std::move(name), std::move(members), group_rank, timeout);
    pg->set_network(spec.network, L_.local);
    return pg;
  };
  // A group whose members all share one device (Shared::device_of_rank: several ranks on one
  // GPU, or on one emulated device) runs on the intra-device communicator (comm/local/), its
  // state shared through Shared::local_groups; the others on Gloo (cpu backend, emulated
  // devices) or NCCL (above).
  auto on_one_device = [&](const std::vector<int>& members) {
    if (sh_.device_of_rank.empty() || !gpu_) return false;
    for (int m : members)
      if (sh_.device_of_rank[static_cast<size_t>(m)] != sh_.device_of_rank[static_cast<size_t>(members.front())])
        return false;
    return true;
  };
  // A group spread over several devices with more than one member on some device (several
  // ranks per GPU on several GPUs; emulated devices likewise): the hierarchical communicator
  // (comm/hier/), its intra-device part on the intra-device communicator of the members on this
  // rank's device ("<name>/dev<d>"), its cross-device part - on the device's leader only - the
  // NCCL communicator of the group's leaders the cuda executor made (Shared::nccl_leaders) or a
  // Gloo group of the leaders ("<name>/leaders"). Null for a group that does not need it.
  auto hierarchical = [&](const std::string& name, const std::vector<int>& members,
                          int group_rank) -> std::unique_ptr<Collectives> {
    if (sh_.device_of_rank.empty() || !gpu_) return nullptr;
    std::vector<int> devs;
    for (int m : members) devs.push_back(sh_.device_of_rank[static_cast<size_t>(m)]);
    detail::HierShape shape = detail::hier_shape(devs);
    if (!shape.needs_hierarchy()) return nullptr;
    const int d = shape.device_of[static_cast<size_t>(group_rank)];
    const auto& mine = shape.on[static_cast<size_t>(d)];
    std::unique_ptr<Collectives> local, cross;
    if (mine.size() > 1) {
      std::vector<int> local_members;
      for (int m : mine) local_members.push_back(members[static_cast<size_t>(m)]);
      const std::string local_name = fmt::format("{}/dev{}", name, shape.device_id[static_cast<size_t>(d)]);
      std::shared_ptr<detail::LocalGroup> g;
      {
        std::lock_guard<std::mutex> lock(sh_.mu);
        auto& slot = sh_.local_groups[local_name];
        if (!slot) slot = std::make_shared<detail::LocalGroup>(local_name, local_members, timeout);
        g = slot;
      }
      local = std::make_unique<detail::LocalComm>(std::move(g), shape.local_rank(group_rank), *gpu_);
    }
    if (shape.is_leader(group_rank)) {
      std::vector<int> leaders;
      for (int e = 0; e < shape.devices(); ++e) leaders.push_back(members[static_cast<size_t>(shape.leader(e))]);
#if EMBEDSCOPE_WITH_CUDA
      if (spec.devices.backend == Backend::cuda) {
        const auto it = sh_.nccl_leaders.find(name);
        NcclComm* c = it == sh_.nccl_leaders.end() ? nullptr : it->second[static_cast<size_t>(me_)];
        if (!c)
          throw std::logic_error(fmt::format("group {}: rank {} leads GPU {} but the cuda executor made no NCCL "
                                             "communicator of the group's leaders", name, me_,
                                             shape.device_id[static_cast<size_t>(d)]));
        cross = detail::nccl_collectives(*c, gpu_);
      }
#endif
      if (!cross) cross = std::make_unique<GlooCollectives>(gloo(name + "/leaders", leaders, d));
    }
    std::shared_ptr<detail::HierArrivals> arrivals;
    {
      std::lock_guard<std::mutex> lock(sh_.mu);
      auto& slot = sh_.hier_arrivals[name];
      if (!slot) slot = std::make_shared<detail::HierArrivals>(static_cast<int>(members.size()));
      arrivals = slot;
    }
    auto h = std::make_unique<detail::HierComm>(name, members, group_rank, std::move(shape), std::move(local),
                                                std::move(cross), timeout, std::move(arrivals), gpu_);
    if (name == "world" && sh_.opt.vanish.rank == me_) h->vanish_at(sh_.opt.vanish.sequence);
    return h;
  };
  auto group = [&](const std::string& name, const std::vector<int>& members, int group_rank) -> std::unique_ptr<Collectives> {
    if (on_one_device(members)) {
      std::shared_ptr<detail::LocalGroup> g;
      {
        std::lock_guard<std::mutex> lock(sh_.mu);
        auto& slot = sh_.local_groups[name];
        if (!slot) slot = std::make_shared<detail::LocalGroup>(name, members, timeout);
        g = slot;
      }
      auto c = std::make_unique<detail::LocalComm>(std::move(g), group_rank, *gpu_);
      if (name == "world" && sh_.opt.vanish.rank == me_) c->vanish_at(sh_.opt.vanish.sequence);
      return c;
    }
    if (auto h = hierarchical(name, members, group_rank)) return h;
    auto pg = gloo(name, members, group_rank);
    if (name == "world" && sh_.opt.vanish.rank == me_) pg->vanish_at(sh_.opt.vanish.sequence);
    return std::make_unique<GlooCollectives>(std::move(pg));
  };
  if (!world_) world_ = group("world", all, me_);
  if (any_twrw) {
    std::vector<int> node_members, cross_members;
    for (int i = 0; i < L_.local; ++i) node_members.push_back(node * L_.local + i);
    for (int m = 0; m < L_.nodes; ++m) cross_members.push_back(m * L_.local + l);
    if (!node_) node_ = group(fmt::format("node{}", node), node_members, l);
    if (!cross_) cross_ = group(fmt::format("cross{}", l), cross_members, node);
  }
  for (auto* g : {world_.get(), node_.get(), cross_.get()})
    if (g) g->set_flight_recorder(&flight_);
  if (sh_.session) {
    // the layout that could not hold the request, while every buffer is still alive
    arena_.set_oom_handler([this] { record_memory(current_step_.load(), "oom", true); });
    arena_.allocator().set_listener([this](const AllocatorEvent& e) {
      mem_events_.push_back({me_, sh_.tracer.now_ns(), current_step_.load(), to_string(e.kind), e.address, e.size,
                             e.requested, e.tag});
    });
    if (sh_.spec.devices.backend == Backend::cuda) {  // CUPTI's lanes
      for (auto [lane, name] : {std::pair{Lane::gpu_compute, "gpu_compute"}, {Lane::gpu_comm, "gpu_comm"},
                                {Lane::gpu_copy, "gpu_copy"}})
        sh_.session->add_lane({me_, static_cast<int32_t>(lane), name, "stream"});
      // the host's waits for the device (CUPTI synchronization records; profiler::kSyncLane):
      // lane kind `sync`, neither compute nor comm in the analyses
      sh_.session->add_lane({me_, 5, "gpu_sync", "sync"});
    }
    sh_.session->add_rank({me_, host_name(), gpu_ ? gpu_->name() : std::string("cpu (thread)"),
                           arena_.allocator().config().capacity_bytes});
    sh_.session->add_lane({me_, static_cast<int32_t>(Lane::compute), "compute", "thread"});
    sh_.session->add_lane({me_, static_cast<int32_t>(Lane::comm), "comm", "thread"});
    for (auto* pg : {world_.get(), node_.get(), cross_.get()})
      if (pg)
        pg->set_observer(&sh_.tracer.clock(), [this](sessions::CollectiveRecord&& r) {
          r.step = current_step_.load();
          if (comm_fill_.load() || fill_phase_live_.load()) {  // the pipeline's fill: step -1 (rank.h)
            r.step -= 1;
            fill_bytes_sent_ += r.bytes_sent;
            fill_bytes_received_ += r.bytes_received;
          }
#if EMBEDSCOPE_WITH_CUDA
          if (!sh_.nccl_world.empty()) {
            std::lock_guard<std::mutex> lock(sh_.records_mu);
            sh_.records.push_back(r);
          }
#endif
          sh_.session->add_collective(std::move(r));
        });
  }
  // Shards of this rank: weights initialised from the seed, optimizer state zeroed.
  for (const TablePlan& tp : plan_.tables) {
    const TableSpec& t = spec.tables[static_cast<size_t>(tp.table)];
    for (size_t si = 0; si < tp.shards.size(); ++si) {
      const Shard& s = tp.shards[si];
      if (s.rank != me_) continue;
      LocalShard ls;
      ls.table = tp.table;
      ls.shard_index = static_cast<int>(si);
      ls.s = s;
      ls.data_type = t.data_type;
      ls.stochastic_rounding = t.uses_stochastic_rounding() && t.data_type != TableDataType::fp32;
      ls.sr_key = {spec.seed, tp.table, s.row_offset, s.col_offset};
      // fp32 rows in `weights`; other types are initialised in fp32 and encoded, a block of rows
      // at a time (no fp32 copy of the whole shard, not even on the host)
      // placement host / host_cached: the rows and the state in host memory (buffers without an
      // arena), the cache in the arena (model/host_cache.h)
      ls.placement = t.placement;
      // (with a device, the store's copies and row optimizer are the device's: cache_device_)
      DeviceArena* const home = t.placement == TablePlacement::device ? &arena_ : nullptr;
      ls.weights = DeviceBuffer<float>(home, "weights");
      if (ls.data_type == TableDataType::fp32 && t.low_rank_dim == 0)
        ls.weights.assign(static_cast<size_t>(s.num_rows * s.num_cols));
      ls.state_type = t.optimizer_state_type;
      ls.low_rank_dim = t.low_rank_dim;  // on a device: A, B and their state in its arena (device_low_rank_backward)
      const int64_t lr = ls.low_rank_dim;
      // A's state is that of a num_rows x r table; B's that of an r x num_cols one
      const auto [m1, m2] = optimizer_state_floats(spec.optimizer.type, s.num_rows, lr > 0 ? lr : s.num_cols);
      ls.momentum1 = DeviceBuffer<float>(home, "optimizer_state");
      ls.momentum2 = DeviceBuffer<float>(home, "optimizer_state");
      ls.packed_state1 = DeviceBuffer<uint8_t>(&arena_, "optimizer_state");
      ls.packed_state2 = DeviceBuffer<uint8_t>(&arena_, "optimizer_state");
      if (ls.state_type == OptimizerStateType::fp32) {
        ls.momentum1.assign(static_cast<size_t>(m1));
        ls.momentum2.assign(static_cast<size_t>(m2));
      } else {  // 2-byte codes; the code of 0.0 is 0 in fp16 and bf16
        ls.packed_state1.assign(static_cast<size_t>(m1 * 2));
        ls.packed_state2.assign(static_cast<size_t>(m2 * 2));
      }
      if (lr > 0) {  // A initialised as a rows() x r table, B by low_rank_initial_b (model/low_rank.h)
        ls.weights.assign(static_cast<size_t>(s.num_rows * lr));
        init_shard(spec.seed, tp.table, t.rows(), s.row_offset, s.num_rows, 0, lr, ls.weights.data());
        ls.factor_b = DeviceBuffer<float>(&arena_, "weights");
        ls.factor_b.assign(static_cast<size_t>(lr * s.num_cols));
        init_low_rank_b(spec.seed, tp.table, lr, s.num_cols, ls.factor_b.data());
        const auto [b1, b2] = optimizer_state_floats(spec.optimizer.type, lr, s.num_cols);
        for (auto* b : {&ls.b_momentum1, &ls.b_momentum2}) *b = DeviceBuffer<float>(&arena_, "optimizer_state");
        for (auto* b : {&ls.b_packed_state1, &ls.b_packed_state2}) *b = DeviceBuffer<uint8_t>(&arena_, "optimizer_state");
        if (ls.state_type == OptimizerStateType::fp32) {
          ls.b_momentum1.assign(static_cast<size_t>(b1));
          ls.b_momentum2.assign(static_cast<size_t>(b2));
        } else {
          ls.b_packed_state1.assign(static_cast<size_t>(b1 * 2));
          ls.b_packed_state2.assign(static_cast<size_t>(b2 * 2));
        }
      } else if (ls.data_type == TableDataType::fp32) {
        init_shard(spec.seed, tp.table, t.rows(), s.row_offset, s.num_rows, s.col_offset, s.num_cols, ls.weights.data());
      } else {
        const int64_t rb = row_bytes(ls.data_type, s.num_cols);
        ls.packed = DeviceBuffer<uint8_t>(&arena_, "weights");
        ls.packed.assign(static_cast<size_t>(s.num_rows * rb));
        constexpr int64_t kBlockRows = 4096;
        std::vector<float> block(static_cast<size_t>(std::min(s.num_rows, kBlockRows) * s.num_cols));
        for (int64_t r0 = 0; r0 < s.num_rows; r0 += kBlockRows) {
          const int64_t n = std::min(kBlockRows, s.num_rows - r0);
          init_shard(spec.seed, tp.table, t.rows(), s.row_offset + r0, n, s.col_offset, s.num_cols, block.data());
          for (int64_t r = 0; r < n; ++r)
            encode_row(ls.data_type, block.data() + r * s.num_cols, s.num_cols, ls.packed.data() + (r0 + r) * rb);
        }
      }
      if (t.placement != TablePlacement::device && s.num_rows > 0 && s.num_cols > 0)  // an empty shard moves nothing
        ls.host = std::make_unique<HostRowStore>(
            t.placement, t.cache_policy, spec.optimizer.type, s.num_rows, s.num_cols,
            t.placement == TablePlacement::host_cached ? cache_slots(t.cache_load_factor, s.num_rows) : 0, &arena_,
            cache_device_.get());
      if (ls.host && cache_device_)  // the host rows and state pinned for the device, once (refused if they cannot be)
        ls.host->pin(ls.weights.data(), ls.state(), fmt::format("table '{}' shard {}", t.name, si));
      if (home) {  // rows in host memory stay there
        to_gpu(ls.weights);
        to_gpu(ls.momentum1);
        to_gpu(ls.momentum2);
        to_gpu(ls.packed);  // reduced precision (data_type, state_type): the device path's update_encoded
        to_gpu(ls.packed_state1);
        to_gpu(ls.packed_state2);
      }
      prepare_on_gpu(ls);
      if (gpu_ && lr > 0) {  // B and its state on the device too, and the plans of A's and B's shapes
        to_gpu(ls.factor_b);
        to_gpu(ls.b_momentum1);
        to_gpu(ls.b_momentum2);
        gpu_->prepare_shard(s.num_rows, lr);
        gpu_->prepare_shard(lr, s.num_cols);
      }
      shards.push_back(std::move(ls));
    }
  }
  // Hot-row replicas (sharding/hot_rows.cpp): every rank holds the table's hot rows, initialised
  // as the table's rows are (fp32 only: validate), optimizer state zeroed.
  for (const int t : L_.hot_tables) {
    const TableSpec& ts = spec.tables[static_cast<size_t>(t)];
    const auto& hot = L_.hot_rows[static_cast<size_t>(t)];
    const auto H = static_cast<int64_t>(hot.size());
    LocalShard ls;
    ls.table = t;
    ls.shard_index = -1;
    ls.s = {me_, 0, H, 0, ts.embedding_dim};
    ls.weights = DeviceBuffer<float>(&arena_, "weights");
    ls.weights.assign(static_cast<size_t>(H * ts.embedding_dim));
    for (int64_t h = 0; h < H; ++h)
      init_shard(spec.seed, t, ts.rows(), hot[static_cast<size_t>(h)], 1, 0, ts.embedding_dim,
                 ls.weights.data() + h * ts.embedding_dim);
    const auto [m1, m2] = optimizer_state_floats(spec.optimizer.type, H, ts.embedding_dim);
    ls.momentum1 = DeviceBuffer<float>(&arena_, "optimizer_state");
    ls.momentum2 = DeviceBuffer<float>(&arena_, "optimizer_state");
    ls.momentum1.assign(static_cast<size_t>(m1));
    ls.momentum2.assign(static_cast<size_t>(m2));
    to_gpu(ls.weights);
    to_gpu(ls.momentum1);
    to_gpu(ls.momentum2);
    prepare_on_gpu(ls);
    hot_replicas.emplace(t, std::move(ls));
  }
  const bool resident = gpu_ && dense_resident_supported(spec);
  if (gpu_ && !resident) dense_layers_on_gpu();
  buckets_ = dense_buckets(dense_.param_tensors(), spec.dense ? spec.dense->bucket_cap_bytes : int64_t{25} << 20);
  if (buckets_.empty()) buckets_.emplace_back(0, 0);  // no dense parameters: the loss alone
  dense_params_ = DeviceBuffer<float>(&arena_, "dense");
  dense_params_.assign(static_cast<size_t>(2 * dense_.num_params()));  // parameters + gradients
  if (resident) {  // the dense part lives in that block for the whole run (its host copy is not read)
    dense_params_.release_host_copy();
    dense_device_ = std::make_unique<RankDenseDevice>(*gpu_);
    dense_.make_resident(dense_device_.get(), dense_params_.device_data());
  }
}

void Rank::main() {
  setup();
  const int64_t total = sh_.spec.warmup_steps + sh_.spec.steps;
  // The programs of every place in the run (first, steady state, last two), built before the
  // first step so that no step's time includes building one.
  for (int64_t it : {int64_t{0}, int64_t{1}, total - 2, total - 1})
    if (it >= 0 && it < total) program_of(it);
  const int64_t samples_per_step = L_.B * L_.world;
  int64_t measured_ns = 0;
  // the device-synchronizing calls and host waits each step's device ops made
  // (detail::add_step_sync_calls)
  int64_t sync_calls_seen = gpu_ ? gpu_->sync_calls().total() : 0;
  int64_t waits_seen = gpu_ ? gpu_->sync_calls().waits : 0;
  detail::DenseCopyTotals dense_copies_seen = dense_device_ ? dense_device_->counted() : detail::DenseCopyTotals{};
  detail::CopyTotals copies_seen = gpu_ ? gpu_->copies() : detail::CopyTotals{};
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
    // an earlier step's distinct-row counts not taken in this one (it ran no embedding backward
    // on the device): taken now, inside the step (a wait, counted, if the step made none)
    if (deferred_counts_ && deferred_counts_->step != step_of(it)) take_deferred_counts();
    if (gpu_) {
      const detail::DeviceSyncCalls now = gpu_->sync_calls();
      detail::add_step_sync_calls(it >= sh_.spec.warmup_steps, now.total() - sync_calls_seen, now.waits - waits_seen);
      sync_calls_seen = now.total();
      waits_seen = now.waits;
    }
    if (dense_device_) {  // the resident dense part's host<->device copies of a measured step
      const detail::DenseCopyTotals now = dense_device_->counted();
      if (it >= sh_.spec.warmup_steps)
        detail::add_dense_copies({now.host_to_device - dense_copies_seen.host_to_device,
                                  now.device_to_host - dense_copies_seen.device_to_host,
                                  now.host_to_device_bytes - dense_copies_seen.host_to_device_bytes,
                                  now.device_to_host_bytes - dense_copies_seen.device_to_host_bytes});
      dense_copies_seen = now;
    }
    if (gpu_) {  // every host<->device copy of the step (detail::step_copy_totals)
      const detail::CopyTotals now = gpu_->copies();
      if (it >= sh_.spec.warmup_steps)
        detail::add_step_copies({now.host_to_device - copies_seen.host_to_device, now.device_to_host - copies_seen.device_to_host,
                                 now.host_to_device_bytes - copies_seen.host_to_device_bytes,
                                 now.device_to_host_bytes - copies_seen.device_to_host_bytes});
      copies_seen = now;
    }
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
      // held while the step's distinct-row counts are on their way (rank_deferred.cpp)
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
