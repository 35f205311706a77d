// A rank's setup before its first step: its allocator, its communication groups (Gloo, NCCL, the
// intra-device and hierarchical communicators), the session's rank, lanes and collective
// observer, its shards and hot-row replicas initialised from the seed, the dense part's buckets,
// parameters and device ops (resident, or the per-call layers of dense_layers_on_gpu).
#include "rank.h"

#include <mutex>
#include <numeric>

#include <fmt/format.h>

#include "embedscope/engine/exec/setup_note.h"

namespace embedscope::engine {
namespace {
std::mutex setup_note_mu;
std::function<void(const std::string&)>& setup_note_sink() {
  static std::function<void(const std::string&)> sink;
  return sink;
}
}  // namespace

void set_setup_note_sink(std::function<void(const std::string&)> sink) {
  std::lock_guard<std::mutex> lock(setup_note_mu);
  setup_note_sink() = std::move(sink);
}

void setup_note(const std::string& line) {
  std::lock_guard<std::mutex> lock(setup_note_mu);
  if (setup_note_sink()) setup_note_sink()(line);
}
}  // namespace embedscope::engine

namespace embedscope::engine::threaded {

std::unique_ptr<DeviceAllocator> Rank::make_allocator(Shared& sh, int rank) {
  AllocatorConfig config{sh.spec.memory.allocator, sh.spec.devices.memory_bytes, sh.spec.memory.max_split_size, true};
  config.garbage_collection_threshold = sh.spec.memory.garbage_collection_threshold;
  if (const detail::RankDevice* gpu = gpu_of(sh, rank)) return gpu->make_allocator(config);
  return DeviceAllocator::create(config);
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
  if (L_.world > 1)  // wait_for_every_rank_set_up's group: connected now, while every rank is here
    setup_group_ = std::make_unique<ProcessGroup>(sh_.rv, "setup", all, me_, std::chrono::milliseconds(kSetupTimeoutMs));
  if (any_twrw) {
    std::vector<int> node_members, cross_members;
    for (int i = 0; i < L_.local; ++i) node_members.push_back(node * L_.local + i);
    for (int m = 0; m < L_.nodes; ++m) cross_members.push_back(m * L_.local + l);
    if (!node_) node_ = group(fmt::format("node{}", node), node_members, l);
    if (!cross_) cross_ = group(fmt::format("cross{}", l), cross_members, node);
  }
  for (auto* g : {world_.get(), node_.get(), cross_.get()})
    if (g) g->set_flight_recorder(&flight_);
  arena_.set_warmup_steps(sh_.spec.warmup_steps);  // its OOM advice names warm-up steps as the output does
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
  // A long initialisation is said before it starts (and its time after): its peers wait for it
  // at wait_for_every_rank_set_up, without a collective timeout.
  int64_t init_rows = 0, init_bytes = 0;
  for (const TablePlan& tp : plan_.tables)
    for (const Shard& s : tp.shards)
      if (s.rank == me_) {
        const TableSpec& t = spec.tables[static_cast<size_t>(tp.table)];
        const auto [m1, m2] = optimizer_state_floats(spec.optimizer.type, s.num_rows, s.num_cols);
        init_rows += s.num_rows;
        init_bytes += s.num_rows * row_bytes(t.data_type, s.num_cols) + (m1 + m2) * int64_t{4};
      }
  const bool long_init = init_bytes >= kSetupNoteBytes;
  const auto init_start = std::chrono::steady_clock::now();
  if (long_init)
    setup_note(fmt::format("rank {}: initialising {} rows ({:.1f} GiB) of embedding tables before the first step",
                           me_, init_rows, static_cast<double>(init_bytes) / (1 << 30)));
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
  if (long_init)
    setup_note(fmt::format(
        "rank {}: tables initialised in {:.1f} s", me_,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - init_start).count()));
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

void Rank::wait_for_every_rank_set_up() {
  if (!setup_group_) return;
  float ready = 1.0f;
  setup_group_->all_reduce_sum("setup/every_rank_set_up", &ready, 1);
}

}  // namespace embedscope::engine::threaded
