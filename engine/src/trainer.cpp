#include "embedscope/engine/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <future>
#include <mutex>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "collectives.h"
#include "embedscope/engine/backend.h"
#include "embedscope/engine/bucketize.h"
#include "embedscope/engine/comm.h"
#include "embedscope/engine/dense.h"
#include "embedscope/engine/id_histogram.h"
#include "embedscope/engine/kernels.h"
#include "embedscope/engine/memory.h"
#include "embedscope/profiler/tracer.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "layout.h"
#include "rank_device.h"
#if EMBEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "cuda_executor.h"
#include "embedscope/engine/nccl_comm.h"
#include "embedscope/profiler/cupti_tracer.h"
#endif

namespace embedscope::engine {

const char* to_string(RunEnd e) {
  switch (e) {
    case RunEnd::complete: return "complete";
    case RunEnd::cancelled: return "cancelled";
    case RunEnd::crashed: return "crashed";
    case RunEnd::oom: return "oom";
    case RunEnd::hang: return "hang";
  }
  return "crashed";
}

namespace {

using detail::Collectives;
using detail::GlooCollectives;
using detail::Layout;
using detail::Slot;
using detail::is_a2a;
using detail::is_rw;
using sessions::Lane;
using sessions::OpCategory;
using profiler::ScopedSpan;

std::string host_name();

// ---- the comm worker: one thread per rank that runs its collectives -------------------------
class CommWorker {
 public:
  CommWorker() : thread_([this] { loop(); }) {}
  ~CommWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  /// Queues `fn` on the comm thread (jobs run one at a time, in the order queued); the
  /// future rethrows what it threw.
  std::future<void> submit(std::function<void()> fn) {
    std::packaged_task<void()> task(std::move(fn));
    auto fut = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_all();
    return fut;
  }
  /// Runs `fn` on the comm thread and waits for it.
  void run(std::function<void()> fn) { submit(std::move(fn)).get(); }

 private:
  void loop() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// ---- shared run state -------------------------------------------------------------------------
struct RankError {
  int rank = 0;
  int64_t time_ns = 0;
  RunEnd kind = RunEnd::crashed;
  bool bad_input = false;
  bool consequence = false;  // a peer's failure seen from here
  std::string message;
};

struct Shared {
  const WorkloadSpec& spec;
  const ShardingPlan& plan;
  const TrainerOptions& opt;
  Layout layout;
  BatchGenerator gen;
  profiler::Tracer tracer;
  std::shared_ptr<Rendezvous> rv = Rendezvous::in_process();
  sessions::SessionWriter* session = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<RankError> errors;
  // the device of each rank (cuda backend, or TrainerOptions::emulate_device); empty: none
  std::vector<std::unique_ptr<detail::RankDevice>> gpus;
#if EMBEDSCOPE_WITH_CUDA
  // cuda backend: the NCCL communicators of each rank (owned by run_training); every
  // collective record, for joining NCCL kernels with them (records_mu)
  std::vector<NcclComm*> nccl_world, nccl_node, nccl_cross;
  std::mutex records_mu;
  std::vector<sessions::CollectiveRecord> records;
#endif

  Shared(const WorkloadSpec& s, const ShardingPlan& p, const TrainerOptions& o)
      : spec(s), plan(p), opt(o), layout(s, p), gen(s), tracer(p.world_size, o.trace) {}
};

struct LocalShard {
  int table = 0;
  int shard_index = 0;  // index into TablePlan::shards
  Shard s;
  DeviceBuffer<float> weights;
  DeviceBuffer<float> momentum1, momentum2;  // optimizer state (FBGEMM layouts)
  RowOptimizerState state() {
    return {{momentum1.data(), momentum1.size()}, {momentum2.data(), momentum2.size()}};
  }
};

// ---- one batch on its way through the phases of a step ---------------------------------------
struct Inflight {
  int64_t it = -1;  // the batch's iteration (warmup included)
  Batch batch;
  std::vector<int64_t> off;
  // input dist: what is sent, and what is received (into host vectors on the comm thread)
  std::vector<int64_t> send_splits, send_counts_splits, recv_counts_splits, send_lengths, send_ids, send_ids_counts;
  std::vector<int64_t> lsend, lrecv, recv_splits, irecv, recv_lengths_v, recv_ids_v;
  std::future<void> input_dist;  // valid while the input dist runs unawaited
  DeviceBuffer<int64_t> recv_lengths, recv_ids;
  // per local slot: its W*B bags (source rank major)
  std::vector<std::vector<int64_t>> slot_ids, slot_off, slot_len;
  // lookup and output dist
  std::vector<DeviceBuffer<float>> slot_out;
  std::vector<std::vector<float>> slot_scale;  // per-bag scale used forward and backward
  std::vector<DeviceBuffer<float>> pooled;     // per feature: B x dim
  struct OutputDist {
    DeviceBuffer<float> a2a_send, a2a_recv, rw_send, rw_recv, tw_send, tw_rs, tw_a2a_send, tw_recv;
    std::vector<int64_t> a2a_scount, a2a_rcount, rw_counts, tw_counts, tw_scount, tw_rcount;
  } od;
  std::future<void> output_dist;  // valid while the output dist runs unawaited
};

// ---- one rank -------------------------------------------------------------------------------
class Rank {
 public:
  Rank(Shared& sh, int rank)
      : sh_(sh), L_(sh.layout), me_(rank), arena_(rank, make_allocator(sh, rank), gpu_of(sh, rank) != nullptr),
        dense_(sh.spec, sh.layout.dim) {}

  void main();

  RankSummary summary;
  struct StepWindow {
    int64_t step, start_ns, end_ns;
  };
  std::vector<StepWindow> windows;  // host time of every step run (GPU records take their step from it)
  std::vector<int64_t> step_ns;     // per measured step
  std::vector<double> losses;       // per measured step (global mean)
  std::vector<sessions::OpEvent> events;  // kept spans (TrainerOptions::keep_events)
  bool cancelled = false;
  QuantError fwd_error_, bwd_error_;  // qcomms: error of the values quantized (written on the comm thread)
  DenseModel& dense() { return dense_; }

 private:
  void setup();
  bool step(int64_t iteration);  // true: every rank agreed to stop (cancel)
  // The phases of one batch (see step() for how each pipeline orders them).
  std::unique_ptr<Inflight> start_batch(int64_t it, bool async);  // input, bucketize, input dist
  void finish_input(Inflight& b);                                 // waits for the input dist; kjt_permute
  void lookup(Inflight& b);
  void start_output_dist(Inflight& b, bool async);
  void finish_output_dist(Inflight& b);                           // waits; pooled outputs in place
  /// dense forward/backward, grad dist, embedding backward + optimizers, dense all-reduce;
  /// `before_dense` runs just before the dense part (the pipelines start the next batch there).
  bool train(Inflight& b, const std::function<void()>& before_dense);
  sessions::LoadCounter& load_of(int table, int shard_index);
  static std::vector<float> mean_scale(const int64_t* lens, size_t n);
  bool is_mean(int table) const;
  size_t local_slot(int slot) const;
  size_t slot_of_feature_on_me(int f) const;
  void scale_rows_mean(const Inflight& b, int f, float* rows, int64_t dim) const;
  template <class T>
  DeviceBuffer<T> buf(const char* tag, size_t n) {
    DeviceBuffer<T> b(&arena_, tag);
    b.assign(n);
    return b;
  }
  // Runs a collective (on the comm worker's thread) as a span on the comm lane.
  void on_comm_lane(Collectives& pg, const char* name, int64_t step, const std::function<void()>& fn) {
    ScopedSpan span(sh_.tracer, me_, Lane::comm, OpCategory::comm, name, step);
    const CommCounters before = pg.counters();
    const uint64_t next = pg.next_sequence();
    span.set_correlation(next);  // kept if the collective throws
    fn();
    span.set_correlation(pg.span_correlation(next));
    span.set_bytes(pg.counters().bytes_sent - before.bytes_sent + pg.counters().bytes_received - before.bytes_received);
  }
  // Runs a collective on the comm worker and waits for it.
  void comm(Collectives& pg, const char* name, int64_t step, const std::function<void()>& fn) {
    comm_->run([&] { on_comm_lane(pg, name, step, fn); });
  }
  LocalShard& shard_of(int table, int shard_index);
  int64_t step_of(int64_t iteration) const { return iteration - sh_.spec.warmup_steps; }
  // The executor-specific pieces: on a device (the cuda backend's GPU) the shard weights and
  // optimizer state live in its memory (the host copies of their DeviceBuffers are not kept
  // current), and the lookup, the row optimizer and the MLP layers run there.
  static std::unique_ptr<DeviceAllocator> make_allocator(Shared& sh, int rank);
  static const detail::RankDevice* gpu_of(const Shared& sh, int rank) {
    return sh.gpus.empty() ? nullptr : sh.gpus[static_cast<size_t>(rank)].get();
  }
  template <class T>
  void to_gpu(DeviceBuffer<T>& b) {
    if (gpu_) gpu_->to_device(b.device_data(), b.data(), static_cast<int64_t>(b.size() * sizeof(T)));
  }
  // A block of the arena (GPU memory) holding a copy of n host floats.
  DeviceBuffer<float> on_gpu(const char* tag, const float* host, int64_t n) {
    auto b = buf<float>(tag, static_cast<size_t>(n));
    gpu_->to_device(b.device_data(), host, n * static_cast<int64_t>(sizeof(float)));
    return b;
  }
  // The dense part's fully connected layers on cuBLAS, each with its inputs and parameters
  // copied to the GPU and its outputs back (the interaction and the loss stay on the host).
  void dense_layers_on_gpu();
  /// pooled_lookup of one local shard into `out` (n_bags x cols; ids indexed by `off`).
  void shard_lookup(LocalShard& ls, const int64_t* ids, const int64_t* off, int64_t n_bags, const float* scale,
                    DeviceBuffer<float>& out);
  /// apply_row_optimizer of one local shard.
  void shard_update(LocalShard& ls, int64_t iteration, const SparseGrad& g);

  Shared& sh_;
  const Layout& L_;
  int me_;
  const detail::RankDevice* gpu_ = gpu_of(sh_, me_);  // nullptr on the cpu backend
  DeviceArena arena_;  // declared before every buffer it accounts, so it outlives them

 public:
  std::vector<LocalShard> shards;

 private:
  DenseModel dense_;
  std::unique_ptr<CommWorker> comm_;
  std::unique_ptr<Collectives> world_, node_, cross_;
  DeviceBuffer<float> dense_params_;  // accounting for the dense part
  std::vector<int64_t> counter_base_;
  std::atomic<int64_t> current_step_{0};
  double last_loss_ = 0;
  std::map<std::pair<int, int>, sessions::LoadCounter> load_;  // this step's, by (table, shard index)
  IdHistogram id_histogram_{sh_.spec};  // ids over row buckets, measured steps
  int64_t step_ = 0;        // the step being run (spans, load counters)
  bool measured_ = false;   // it is a measured step (not warmup)
  std::unique_ptr<Inflight> next_;        // semi_sync: the next batch, looked up, output dist queued
  std::unique_ptr<Inflight> next_input_;  // the batch whose input dist was queued ahead
  // DDP buckets of the dense gradients: [begin, end) in parameter order, in launch order (the
  // last always exists and carries the loss), the reduce buffer and the launched buckets
  std::vector<std::pair<int64_t, int64_t>> buckets_;
  std::vector<float> red_;
  std::vector<std::future<void>> bucket_done_;
  void launch_bucket(size_t k, int64_t step);
  uint64_t last_layout_ = 0;                 // hash of the last snapshot's layout
  std::vector<sessions::MemoryEvent> mem_events_;  // allocator actions since the last flush

 public:
  // Memory counters of the step, and a snapshot when the layout changed (or `force`, at an OOM).
  void record_memory(int64_t step, const char* reason, bool force) {
    if (!sh_.session) return;
    sh_.session->add_memory_events(mem_events_);
    mem_events_.clear();
    const MemoryStats st = arena_.allocator().stats();
    sh_.session->add_memory({step, me_, st.allocated, st.reserved, st.peak_allocated, st.peak_reserved,
                             st.largest_free_block, st.rounding_loss, st.segments, st.external_fragmentation,
                             st.memviz_fragmentation});
    sessions::MemorySnapshot sn;
    sn.rank = me_;
    sn.step = step;
    sn.time_ns = sh_.tracer.now_ns();
    sn.reason = reason;
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (const auto& seg : arena_.allocator().snapshot())
      for (const auto& b : seg.blocks) {
        sn.blocks.push_back({seg.address, seg.size, b.address, b.size, b.requested, b.allocated, b.tag});
        h = mix64(h ^ static_cast<uint64_t>(b.address)) ^ mix64(static_cast<uint64_t>(b.size) * 2 + (b.allocated ? 1 : 0));
      }
    if (!force && h == last_layout_) return;  // steady state: the same layout every step
    last_layout_ = h;
    sh_.session->add_snapshot(std::move(sn));
  }

 private:

 public:
  friend RunResult run_training(const WorkloadSpec&, const TrainerOptions&);
  void teardown() {
    arena_.allocator().set_listener(nullptr);  // buffers freed after the run are not history
    arena_.set_oom_handler(nullptr);
    comm_.reset();
    cross_.reset();
    node_.reset();
    world_.reset();
  }
  int64_t bytes_sent() const {
    int64_t s = 0;
    for (auto* pg : {world_.get(), node_.get(), cross_.get()})
      if (pg) s += pg->counters().bytes_sent;
    return s;
  }
  int64_t bytes_received() const {
    int64_t s = 0;
    for (auto* pg : {world_.get(), node_.get(), cross_.get()})
      if (pg) s += pg->counters().bytes_received;
    return s;
  }
};

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
                        DeviceBuffer<float>& out) {
  if (gpu_) {  // the bags' ids, offsets (rebased to 0) and scales to the GPU, the pooled rows back
    const int64_t base = off[0], n_ids = off[n_bags] - off[0];
    auto d_ids = buf<int64_t>("kjt", static_cast<size_t>(n_ids));
    auto d_off = buf<int64_t>("kjt", static_cast<size_t>(n_bags + 1));
    for (int64_t i = 0; i <= n_bags; ++i) d_off[static_cast<size_t>(i)] = off[i] - base;
    std::copy(ids + base, ids + base + n_ids, d_ids.data());
    to_gpu(d_ids);
    to_gpu(d_off);
    DeviceBuffer<float> d_scale;
    if (scale) {
      d_scale = buf<float>("kjt", static_cast<size_t>(n_bags));
      std::copy(scale, scale + n_bags, d_scale.data());
      to_gpu(d_scale);
    }
    gpu_->lookup(ls.weights.device_data(), ls.s.num_rows, ls.s.num_cols, d_ids.device_data(), d_off.device_data(), n_bags,
                 scale ? d_scale.device_data() : nullptr, out.device_data());
    gpu_->to_host(out.data(), out.device_data(), static_cast<int64_t>(out.size() * sizeof(float)));
    return;
  }
  pooled_lookup(ls.weights.data(), ls.s.num_rows, ls.s.num_cols, ids, off, n_bags, scale, out.data(), ls.s.num_cols);
}

void Rank::shard_update(LocalShard& ls, int64_t iteration, const SparseGrad& g) {
  if (gpu_) {  // the rows and their gradients to the GPU: one bag per row, each row once
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
    gpu_->update(sh_.spec.optimizer, iteration, ls.weights.device_data(), ls.momentum1.device_data(),
                 ls.momentum2.device_data(), ls.s.num_rows, ls.s.num_cols, d_rows.device_data(), d_off.device_data(),
                 static_cast<int64_t>(n), d_vals.device_data());
    return;
  }
  apply_row_optimizer(sh_.spec.optimizer, iteration, ls.weights.data(), ls.s.num_cols, ls.state(), g);
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
  dense_.set_linear_ops(std::move(ops));
}

void Rank::setup() {
  const auto& spec = sh_.spec;
  current_step_ = step_of(0) - 1;  // setup's allocations belong to the step before the first
  const auto timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
  comm_ = std::make_unique<CommWorker>();
  std::vector<int> all(static_cast<size_t>(L_.world));
  std::iota(all.begin(), all.end(), 0);
  bool any_twrw = false;
  for (const auto& tp : sh_.plan.tables) any_twrw |= tp.type == ShardingType::table_row_wise;
  const int node = me_ / L_.local, l = me_ % L_.local;
#if EMBEDSCOPE_WITH_CUDA
  if (!sh_.nccl_world.empty()) {
    world_ = detail::nccl_collectives(*sh_.nccl_world[static_cast<size_t>(me_)]);
    if (any_twrw) {
      node_ = detail::nccl_collectives(*sh_.nccl_node[static_cast<size_t>(me_)]);
      cross_ = detail::nccl_collectives(*sh_.nccl_cross[static_cast<size_t>(me_)]);
    }
  }
#endif
  auto gloo = [&](std::string name, std::vector<int> members, int group_rank) {
    auto pg = std::make_unique<ProcessGroup>(sh_.rv, std::move(name), std::move(members), group_rank, timeout);
    pg->set_network(spec.network, L_.local);
    return pg;
  };
  if (!world_) {
    auto pg = gloo("world", all, me_);
    if (sh_.opt.vanish.rank == me_) pg->vanish_at(sh_.opt.vanish.sequence);
    world_ = std::make_unique<GlooCollectives>(std::move(pg));
    if (any_twrw) {
      std::vector<int> node_members, cross_members;
      for (int i = 0; i < L_.local; ++i) node_members.push_back(node * L_.local + i);
      for (int m = 0; m < L_.nodes; ++m) cross_members.push_back(m * L_.local + l);
      node_ = std::make_unique<GlooCollectives>(gloo(fmt::format("node{}", node), node_members, l));
      cross_ = std::make_unique<GlooCollectives>(gloo(fmt::format("cross{}", l), cross_members, node));
    }
  }
  if (sh_.session) {
    // the layout that could not hold the request, while every buffer is still alive
    arena_.set_oom_handler([this] { record_memory(current_step_.load(), "oom", true); });
    arena_.allocator().set_listener([this](const AllocatorEvent& e) {
      mem_events_.push_back({me_, sh_.tracer.now_ns(), current_step_.load(), to_string(e.kind), e.address, e.size,
                             e.requested, e.tag});
    });
    if (sh_.spec.devices.backend == Backend::cuda)  // CUPTI's lanes
      for (auto [lane, name] : {std::pair{Lane::gpu_compute, "gpu_compute"}, {Lane::gpu_comm, "gpu_comm"},
                                {Lane::gpu_copy, "gpu_copy"}})
        sh_.session->add_lane({me_, static_cast<int32_t>(lane), name, "stream"});
    sh_.session->add_rank({me_, host_name(), gpu_ ? gpu_->name() : std::string("cpu (thread)"),
                           arena_.allocator().config().capacity_bytes});
    sh_.session->add_lane({me_, static_cast<int32_t>(Lane::compute), "compute", "thread"});
    sh_.session->add_lane({me_, static_cast<int32_t>(Lane::comm), "comm", "thread"});
    for (auto* pg : {world_.get(), node_.get(), cross_.get()})
      if (pg)
        pg->set_observer(&sh_.tracer.clock(), [this](sessions::CollectiveRecord&& r) {
          r.step = current_step_.load();
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
  for (const TablePlan& tp : sh_.plan.tables) {
    const TableSpec& t = spec.tables[static_cast<size_t>(tp.table)];
    for (size_t si = 0; si < tp.shards.size(); ++si) {
      const Shard& s = tp.shards[si];
      if (s.rank != me_) continue;
      LocalShard ls;
      ls.table = tp.table;
      ls.shard_index = static_cast<int>(si);
      ls.s = s;
      ls.weights = DeviceBuffer<float>(&arena_, "weights");
      ls.weights.assign(static_cast<size_t>(s.num_rows * s.num_cols));
      const auto [m1, m2] = optimizer_state_floats(spec.optimizer.type, s.num_rows, s.num_cols);
      ls.momentum1 = DeviceBuffer<float>(&arena_, "optimizer_state");
      ls.momentum2 = DeviceBuffer<float>(&arena_, "optimizer_state");
      ls.momentum1.assign(static_cast<size_t>(m1));
      ls.momentum2.assign(static_cast<size_t>(m2));
      init_shard(spec.seed, tp.table, t.num_embeddings, s.row_offset, s.num_rows, s.col_offset, s.num_cols,
                 ls.weights.data());
      to_gpu(ls.weights);
      to_gpu(ls.momentum1);
      to_gpu(ls.momentum2);
      shards.push_back(std::move(ls));
    }
  }
  if (gpu_) dense_layers_on_gpu();
  buckets_ = dense_buckets(dense_.param_tensors(), spec.dense ? spec.dense->bucket_cap_bytes : int64_t{25} << 20);
  if (buckets_.empty()) buckets_.emplace_back(0, 0);  // no dense parameters: the loss alone
  dense_params_ = DeviceBuffer<float>(&arena_, "dense");
  dense_params_.assign(static_cast<size_t>(2 * dense_.num_params()));  // parameters + gradients
}

void Rank::main() {
  setup();
  const int64_t total = sh_.spec.warmup_steps + sh_.spec.steps;
  const int64_t samples_per_step = L_.B * L_.world;
  int64_t measured_ns = 0;
  for (int64_t it = 0; it < total; ++it) {
    if (it == sh_.spec.warmup_steps) {
      summary = {};
      summary.rank = me_;
      counter_base_ = {bytes_sent(), bytes_received()};
    }
    current_step_ = step_of(it);
    const int64_t t0 = sh_.tracer.now_ns();
    const bool stop = step(it);
    if (sh_.spec.memory.compaction > 0 && (it + 1) % sh_.spec.memory.compaction == 0) {
      ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::memcpy, "memory_compaction", step_of(it));
      span.set_bytes(arena_.compact().bytes_moved);
    }
    const int64_t t1 = sh_.tracer.now_ns();
    const int64_t dt = t1 - t0;
    windows.push_back({step_of(it), t0, t1});
    if (it >= sh_.spec.warmup_steps) {
      step_ns.push_back(dt);
      measured_ns += dt;
    }
    auto spans = sh_.tracer.take(me_);
    if (sh_.session) {
      sh_.session->add_ops(spans);
      sh_.session->add_step({step_of(it), me_, t0, t1, last_loss_, arena_.in_use(), arena_.peak()});
      for (const auto& [key, c] : load_) sh_.session->add_load(c);
      record_memory(step_of(it), "step", false);
    }
    if (sh_.opt.keep_events) events.insert(events.end(), spans.begin(), spans.end());
    if (me_ == 0 && sh_.opt.on_step) {
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
  }
  if (sh_.session) sh_.session->add_id_histogram(id_histogram_.buckets(me_));
  if (gpu_ && sh_.opt.keep_tables)
    for (auto& ls : shards)
      gpu_->to_host(ls.weights.data(), ls.weights.device_data(), static_cast<int64_t>(ls.weights.size() * sizeof(float)));
  summary.rank = me_;
  summary.bytes_sent = bytes_sent() - (counter_base_.empty() ? 0 : counter_base_[0]);
  summary.bytes_received = bytes_received() - (counter_base_.empty() ? 0 : counter_base_[1]);
  summary.memory_bytes = arena_.peak();
  summary.allocator_ns = arena_.allocator_ns();
}

bool Rank::step(int64_t it) {
  const WorkloadSpec& spec = sh_.spec;
  step_ = step_of(it);
  measured_ = it >= spec.warmup_steps;
  load_.clear();
  auto has = [&](int64_t i) { return i < spec.warmup_steps + spec.steps; };
  std::unique_ptr<Inflight> cur = std::move(next_);
  switch (spec.pipeline) {
    case PipelineKind::base:
      cur = start_batch(it, false);
      finish_input(*cur);
      lookup(*cur);
      start_output_dist(*cur, false);
      return train(*cur, [] {});
    case PipelineKind::sparse_dist:
      cur = next_input_ ? std::move(next_input_) : start_batch(it, false);  // the first: nothing prefetched
      finish_input(*cur);
      lookup(*cur);
      start_output_dist(*cur, false);
      // The input dist of the next batch runs on the comm worker under the dense part.
      return train(*cur, [&] {
        if (has(it + 1)) next_input_ = start_batch(it + 1, true);
      });
    case PipelineKind::semi_sync:
      if (!cur) {  // the first batch: its lookup and output dist run in this step
        cur = start_batch(it, false);
        finish_input(*cur);
        lookup(*cur);
        start_output_dist(*cur, false);
      }
      // The next batch is looked up now, before this batch's embedding update (one step of
      // staleness), and its output dist runs on the comm worker under this batch's dense part,
      // followed there by the input dist of the batch after it (as in sparse_dist).
      return train(*cur, [&] {
        if (!has(it + 1)) return;
        auto nb = next_input_ ? std::move(next_input_) : start_batch(it + 1, false);
        finish_input(*nb);
        lookup(*nb);
        start_output_dist(*nb, true);
        next_ = std::move(nb);
        if (has(it + 2)) next_input_ = start_batch(it + 2, true);
      });
  }
  return false;
}

sessions::LoadCounter& Rank::load_of(int table, int shard_index) {
  auto& c = load_[{table, shard_index}];
  c.step = step_;
  c.rank = me_;
  c.table = table;
  c.shard = shard_index;
  return c;
}

std::unique_ptr<Inflight> Rank::start_batch(int64_t it, bool async) {
  const WorkloadSpec& spec = sh_.spec;
  const int W = L_.world;
  const int64_t B = L_.B;
  auto& tr = sh_.tracer;
  auto bp = std::make_unique<Inflight>();
  Inflight& b = *bp;
  b.it = it;
  // ---- input: this rank's batch, ids checked before anything is sent ----------------------
  {
    ScopedSpan span(tr, me_, Lane::compute, OpCategory::input, "input", step_);
    std::optional<Batch> given = sh_.opt.batch_source ? sh_.opt.batch_source(it, me_) : std::nullopt;
    b.batch = given ? std::move(*given) : sh_.gen.make(it, me_);
    auto fixed = apply_invalid_id_policy(spec, b.batch.kjt, me_);
    if (measured_) summary.invalid_ids += std::accumulate(fixed.begin(), fixed.end(), int64_t{0});
    b.off = b.batch.kjt.offsets();
    if (it >= spec.warmup_steps) id_histogram_.add(spec, b.batch.kjt);  // the batch of a measured step
  }
  const auto& values = b.batch.kjt.values;
  const auto& off = b.off;

  // ---- input dist: KJT all-to-all (splits, lengths, ids) --------------------------------------
  const std::vector<int>& mine = L_.slots_to[static_cast<size_t>(me_)];
  const size_t nmine = mine.size();
  b.send_counts_splits.assign(static_cast<size_t>(W), 0);
  b.recv_counts_splits.assign(static_cast<size_t>(W), static_cast<int64_t>(nmine));
  b.send_ids_counts.assign(static_cast<size_t>(W), 0);
  {
    ScopedSpan span(tr, me_, Lane::compute, OpCategory::input, "bucketize", step_);
    std::vector<BucketSlot> slots;  // slots of rank 0, then rank 1, ...
    for (int d = 0; d < W; ++d) {
      const auto& to = L_.slots_to[static_cast<size_t>(d)];
      b.send_counts_splits[static_cast<size_t>(d)] = static_cast<int64_t>(to.size());
      for (int k : to) {
        const Slot& sl = L_.slots[static_cast<size_t>(k)];
        slots.push_back({sl.feature, is_rw(sl.type), sl.s.row_offset, sl.s.num_rows});
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
  b.recv_lengths_v.assign(nmine * static_cast<size_t>(W * B), 0);
  // The three collectives run on the comm worker (received into host vectors: the device
  // allocator belongs to this thread); ids counts come from the splits received first.
  const int64_t step = step_;
  auto job = [this, &b, nmine, W, step] {
    on_comm_lane(*world_, "input_dist/splits", step, [&] {
      world_->all_to_all_v("input_dist/splits", b.send_splits.data(), b.send_counts_splits, b.recv_splits.data(),
                           b.recv_counts_splits, sizeof(int64_t));
    });
    on_comm_lane(*world_, "input_dist/lengths", step, [&] {
      world_->all_to_all_v("input_dist/lengths", b.send_lengths.data(), b.lsend, b.recv_lengths_v.data(), b.lrecv,
                           sizeof(int64_t));
    });
    b.irecv.assign(static_cast<size_t>(W), 0);
    for (int s = 0; s < W; ++s)
      for (size_t k = 0; k < nmine; ++k) b.irecv[static_cast<size_t>(s)] += b.recv_splits[static_cast<size_t>(s) * nmine + k];
    b.recv_ids_v.assign(static_cast<size_t>(std::accumulate(b.irecv.begin(), b.irecv.end(), int64_t{0})), 0);
    on_comm_lane(*world_, "input_dist/ids", step, [&] {
      world_->all_to_all_v("input_dist/ids", b.send_ids.data(), b.send_ids_counts, b.recv_ids_v.data(), b.irecv,
                           sizeof(int64_t));
    });
  };
  if (async)
    b.input_dist = comm_->submit(std::move(job));
  else
    comm_->run(std::move(job));
  return bp;
}

void Rank::finish_input(Inflight& b) {
  if (b.input_dist.valid()) b.input_dist.get();
  const int W = L_.world;
  const int64_t B = L_.B;
  const size_t nmine = L_.slots_to[static_cast<size_t>(me_)].size();
  // Per local slot: its W*B bags (source rank major), ids and offsets.
  b.slot_ids.assign(nmine, {});
  b.slot_off.assign(nmine, {});
  b.slot_len.assign(nmine, {});
  ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::input, "kjt_permute", step_);
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
    if (measured_) summary.ids_looked_up += static_cast<int64_t>(b.slot_ids[k].size());
  }
}

std::vector<float> Rank::mean_scale(const int64_t* lens, size_t n) {
  std::vector<float> sc(n);
  for (size_t i = 0; i < n; ++i) sc[i] = lens[i] > 0 ? 1.0f / static_cast<float>(lens[i]) : 0.0f;
  return sc;
}

bool Rank::is_mean(int table) const { return sh_.spec.tables[static_cast<size_t>(table)].pooling == Pooling::mean; }

size_t Rank::local_slot(int slot) const {
  const auto& mine = L_.slots_to[static_cast<size_t>(me_)];
  for (size_t k = 0; k < mine.size(); ++k)
    if (mine[k] == slot) return k;
  throw std::logic_error("slot not local");
}

size_t Rank::slot_of_feature_on_me(int f) const {
  const auto& mine = L_.slots_to[static_cast<size_t>(me_)];
  for (size_t k = 0; k < mine.size(); ++k)
    if (L_.slots[static_cast<size_t>(mine[k])].feature == f) return k;
  throw std::logic_error("feature has no local slot");
}

void Rank::scale_rows_mean(const Inflight& b, int f, float* rows, int64_t dim) const {
  const int64_t B = L_.B;
  for (int64_t s = 0; s < B; ++s) {
    const int64_t len = b.batch.kjt.lengths[static_cast<size_t>(f * B + s)];
    const float sc = len > 0 ? 1.0f / static_cast<float>(len) : 0.0f;
    for (int64_t c = 0; c < dim; ++c) rows[s * dim + c] *= sc;
  }
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
  b.slot_scale.assign(nmine, {});
  b.pooled.clear();
  b.pooled.resize(static_cast<size_t>(F));
  for (int f = 0; f < F; ++f) b.pooled[static_cast<size_t>(f)] = buf<float>("pooled_output", static_cast<size_t>(B * L_.dim[static_cast<size_t>(f)]));
  ScopedSpan span(tr, me_, Lane::compute, OpCategory::lookup, "lookup", step_);
  for (size_t k = 0; k < nmine; ++k) {
    const Slot& sl = L_.slots[static_cast<size_t>(mine[k])];
    LocalShard& ls = shard_of(sl.table, sl.shard);
    b.slot_out[k] = buf<float>("pooled_output", static_cast<size_t>(W * B * sl.s.num_cols));
    if (is_a2a(sl.type) && is_mean(sl.table)) b.slot_scale[k] = mean_scale(b.slot_len[k].data(), b.slot_len[k].size());
    const int64_t t0 = tr.now_ns();
    shard_lookup(ls, b.slot_ids[k].data(), b.slot_off[k].data(), W * B,
                 b.slot_scale[k].empty() ? nullptr : b.slot_scale[k].data(), b.slot_out[k]);
    auto& c = load_of(ls.table, ls.shard_index);
    c.lookup_ns += tr.now_ns() - t0;
    c.ids += static_cast<int64_t>(b.slot_ids[k].size());
    c.bytes_in += static_cast<int64_t>(b.slot_ids[k].size() + b.slot_len[k].size()) * 8;
    c.bytes_out += W * B * ls.s.num_cols * 4;
  }
  // data-parallel tables: local lookup on the replica
  const auto& lengths = b.batch.kjt.lengths;
  for (int t : L_.dp_tables) {
    LocalShard& ls = shard_of(t, me_);
    for (const auto& fname : spec.tables[static_cast<size_t>(t)].feature_names) {
      const int f = spec.feature_index(fname);
      std::vector<float> sc;
      if (is_mean(t)) sc = mean_scale(lengths.data() + f * B, static_cast<size_t>(B));
      const int64_t t0 = tr.now_ns();
      shard_lookup(ls, b.batch.kjt.values.data(), b.off.data() + f * B, B, sc.empty() ? nullptr : sc.data(),
                   b.pooled[static_cast<size_t>(f)]);
      const int64_t ids = b.off[static_cast<size_t>((f + 1) * B)] - b.off[static_cast<size_t>(f * B)];
      auto& c = load_of(t, ls.shard_index);
      c.lookup_ns += tr.now_ns() - t0;
      c.ids += ids;
      c.bytes_out += B * ls.s.num_cols * 4;
      if (measured_) summary.ids_looked_up += ids;
    }
  }
}

void Rank::start_output_dist(Inflight& b, bool async) {
  const int W = L_.world;
  const int64_t B = L_.B;
  const CommPrecision prec = sh_.spec.qcomms.forward_precision;
  auto& od = b.od;
  const int64_t step = step_;
  std::vector<std::function<void()>> jobs;  // run in order on the comm worker
  {
    // table_wise / column_wise: all-to-all of B x cols blocks
    od.a2a_scount.assign(static_cast<size_t>(W), 0);
    od.a2a_rcount.assign(static_cast<size_t>(W), 0);
    const auto& my_a2a = L_.a2a_slots_to[static_cast<size_t>(me_)];
    int64_t my_cols = 0;
    for (int k : my_a2a) my_cols += L_.slots[static_cast<size_t>(k)].s.num_cols;
    for (int r = 0; r < W; ++r) {
      od.a2a_scount[static_cast<size_t>(r)] = B * my_cols;
      for (int k : L_.a2a_slots_to[static_cast<size_t>(r)]) od.a2a_rcount[static_cast<size_t>(r)] += B * L_.slots[static_cast<size_t>(k)].s.num_cols;
    }
    od.a2a_send = buf<float>("comm_buffer", static_cast<size_t>(W * B * my_cols));
    size_t p = 0;
    for (int r = 0; r < W; ++r)
      for (int k : my_a2a) {
        const size_t lk = local_slot(k);
        const int64_t cols = L_.slots[static_cast<size_t>(k)].s.num_cols;
        std::memcpy(od.a2a_send.data() + p, b.slot_out[lk].data() + r * B * cols, sizeof(float) * static_cast<size_t>(B * cols));
        p += static_cast<size_t>(B * cols);
      }
    od.a2a_recv = buf<float>("comm_buffer", static_cast<size_t>(std::accumulate(od.a2a_rcount.begin(), od.a2a_rcount.end(), int64_t{0})));
    jobs.push_back([this, &od, prec, step] {
      on_comm_lane(*world_, "output_dist/all_to_all", step, [&] {
        world_->all_to_all_q("output_dist/all_to_all", od.a2a_send.data(), od.a2a_scount, od.a2a_recv.data(),
                             od.a2a_rcount, prec, &fwd_error_);
      });
    });
    // row_wise: reduce-scatter of partial sums over the world
    const int64_t rw_width = L_.sum_dims(L_.rw_features);
    if (!L_.rw_features.empty()) {
      od.rw_send = buf<float>("comm_buffer", static_cast<size_t>(W * B * rw_width));
      p = 0;
      for (int j = 0; j < W; ++j)
        for (int f : L_.rw_features) {
          const size_t k = slot_of_feature_on_me(f);
          const int64_t dim = L_.dim[static_cast<size_t>(f)];
          std::memcpy(od.rw_send.data() + p, b.slot_out[k].data() + j * B * dim, sizeof(float) * static_cast<size_t>(B * dim));
          p += static_cast<size_t>(B * dim);
        }
      od.rw_recv = buf<float>("comm_buffer", static_cast<size_t>(B * rw_width));
      od.rw_counts.assign(static_cast<size_t>(W), B * rw_width);
      jobs.push_back([this, &od, prec, step] {
        on_comm_lane(*world_, "output_dist/reduce_scatter", step, [&] {
          world_->reduce_scatter_q("output_dist/reduce_scatter", od.rw_send.data(), od.rw_counts, od.rw_recv.data(), prec,
                                   &fwd_error_);
        });
      });
    }
    // table_row_wise: reduce-scatter inside the node, then all-to-all across nodes
    if (node_) {
      const int my_node = me_ / L_.local;
      const auto& feats = L_.twrw_features[static_cast<size_t>(my_node)];
      const int64_t width = L_.sum_dims(feats);
      // block for local rank l: [feature][node m][B x dim] rows of sample owner m*local + l
      od.tw_send = buf<float>("comm_buffer", static_cast<size_t>(L_.local * L_.nodes * B * width));
      p = 0;
      for (int l = 0; l < L_.local; ++l)
        for (int f : feats) {
          const size_t k = slot_of_feature_on_me(f);
          const int64_t dim = L_.dim[static_cast<size_t>(f)];
          for (int m = 0; m < L_.nodes; ++m) {
            std::memcpy(od.tw_send.data() + p, b.slot_out[k].data() + (m * L_.local + l) * B * dim, sizeof(float) * static_cast<size_t>(B * dim));
            p += static_cast<size_t>(B * dim);
          }
        }
      od.tw_rs = buf<float>("comm_buffer", static_cast<size_t>(L_.nodes * B * width));
      od.tw_counts.assign(static_cast<size_t>(L_.local), L_.nodes * B * width);
      od.tw_scount.assign(static_cast<size_t>(L_.nodes), B * width);
      od.tw_rcount.assign(static_cast<size_t>(L_.nodes), 0);
      for (int m = 0; m < L_.nodes; ++m) od.tw_rcount[static_cast<size_t>(m)] = B * L_.sum_dims(L_.twrw_features[static_cast<size_t>(m)]);
      od.tw_a2a_send = buf<float>("comm_buffer", od.tw_rs.size());
      od.tw_recv = buf<float>("comm_buffer", static_cast<size_t>(std::accumulate(od.tw_rcount.begin(), od.tw_rcount.end(), int64_t{0})));
      jobs.push_back([this, &od, &feats, B, prec, step] {
        on_comm_lane(*node_, "output_dist/reduce_scatter_intra_node", step, [&] {
          node_->reduce_scatter_q("output_dist/reduce_scatter_intra_node", od.tw_send.data(), od.tw_counts, od.tw_rs.data(),
                                  prec, &fwd_error_);
        });
        // rs: [feature][node m][B x dim] -> send block m to node m
        size_t q0 = 0;
        for (int m = 0; m < L_.nodes; ++m) {
          size_t q = 0;
          for (int f : feats) {
            const int64_t dim = L_.dim[static_cast<size_t>(f)];
            std::memcpy(od.tw_a2a_send.data() + q0, od.tw_rs.data() + q + static_cast<size_t>(m * B * dim), sizeof(float) * static_cast<size_t>(B * dim));
            q0 += static_cast<size_t>(B * dim);
            q += static_cast<size_t>(L_.nodes * B * dim);
          }
        }
        on_comm_lane(*cross_, "output_dist/all_to_all_cross_node", step, [&] {
          cross_->all_to_all_q("output_dist/all_to_all_cross_node", od.tw_a2a_send.data(), od.tw_scount, od.tw_recv.data(),
                               od.tw_rcount, prec, &fwd_error_);
        });
      });
    }
  }
  auto job = [jobs = std::move(jobs)] {
    for (const auto& j : jobs) j();
  };
  if (async)
    b.output_dist = comm_->submit(std::move(job));
  else
    comm_->run(std::move(job));
}

void Rank::finish_output_dist(Inflight& b) {
  if (b.output_dist.valid()) b.output_dist.get();
  const int W = L_.world;
  const int64_t B = L_.B;
  const int F = static_cast<int>(sh_.spec.features.size());
  auto& od = b.od;
  {
    size_t p = 0;
    for (int d = 0; d < W; ++d)
      for (int k : L_.a2a_slots_to[static_cast<size_t>(d)]) {
        const Slot& sl = L_.slots[static_cast<size_t>(k)];
        const int64_t dim = L_.dim[static_cast<size_t>(sl.feature)], cols = sl.s.num_cols;
        float* dst = b.pooled[static_cast<size_t>(sl.feature)].data();
        for (int64_t s = 0; s < B; ++s) std::memcpy(dst + s * dim + sl.s.col_offset, od.a2a_recv.data() + p + static_cast<size_t>(s * cols), sizeof(float) * static_cast<size_t>(cols));
        p += static_cast<size_t>(B * cols);
      }
    auto feature_table = [&](int f) { return sh_.spec.table_of_feature(static_cast<size_t>(f)); };
    p = 0;
    for (int f : L_.rw_features) {
      const int64_t dim = L_.dim[static_cast<size_t>(f)];
      std::memcpy(b.pooled[static_cast<size_t>(f)].data(), od.rw_recv.data() + p, sizeof(float) * static_cast<size_t>(B * dim));
      if (is_mean(feature_table(f))) scale_rows_mean(b, f, b.pooled[static_cast<size_t>(f)].data(), dim);
      p += static_cast<size_t>(B * dim);
    }
    if (node_) {
      p = 0;
      for (int m = 0; m < L_.nodes; ++m)
        for (int f : L_.twrw_features[static_cast<size_t>(m)]) {
          const int64_t dim = L_.dim[static_cast<size_t>(f)];
          std::memcpy(b.pooled[static_cast<size_t>(f)].data(), od.tw_recv.data() + p, sizeof(float) * static_cast<size_t>(B * dim));
          if (is_mean(feature_table(f))) scale_rows_mean(b, f, b.pooled[static_cast<size_t>(f)].data(), dim);
          p += static_cast<size_t>(B * dim);
        }
    }
  }
  od = {};  // the comm buffers go back to the allocator
  if (sh_.opt.on_pooled)
    for (int f = 0; f < F; ++f)
      sh_.opt.on_pooled(me_, b.it, f, b.pooled[static_cast<size_t>(f)].data(), B, L_.dim[static_cast<size_t>(f)]);
}

bool Rank::train(Inflight& b, const std::function<void()>& before_dense) {
  const WorkloadSpec& spec = sh_.spec;
  const int W = L_.world;
  const int64_t B = L_.B;
  const int F = static_cast<int>(spec.features.size());
  const int64_t step = step_;
  const int64_t it = b.it;
  auto& tr = sh_.tracer;
  const std::vector<int>& mine = L_.slots_to[static_cast<size_t>(me_)];
  const size_t nmine = mine.size();
  const CommPrecision prec = spec.qcomms.backward_precision;
  auto feature_table = [&](int f) { return spec.table_of_feature(static_cast<size_t>(f)); };
  const auto& lengths = b.batch.kjt.lengths;
  finish_output_dist(b);
  before_dense();

  // ---- dense forward / loss / backward --------------------------------------------------------
  std::vector<DeviceBuffer<float>> dpooled(static_cast<size_t>(F));
  for (int f = 0; f < F; ++f) dpooled[static_cast<size_t>(f)] = buf<float>("gradients", static_cast<size_t>(B * L_.dim[static_cast<size_t>(f)]));
  double loss = 0;
  {
    ScopedSpan span(tr, me_, Lane::compute, OpCategory::dense, "dense_forward_backward", step);
    DeviceBuffer<float> act(&arena_, "activations");
    act.assign(static_cast<size_t>(dense_.activation_bytes(B) / 4));
    std::vector<const float*> pp(static_cast<size_t>(F));
    std::vector<float*> dp(static_cast<size_t>(F));
    for (int f = 0; f < F; ++f) {
      pp[static_cast<size_t>(f)] = b.pooled[static_cast<size_t>(f)].data();
      dp[static_cast<size_t>(f)] = dpooled[static_cast<size_t>(f)].data();
    }
    // DDP: each bucket of dense gradients is all-reduced on the comm worker as soon as the
    // backward pass has produced it, under the rest of the backward pass
    red_.assign(static_cast<size_t>(dense_.num_params()) + 2, 0.0f);
    size_t next_bucket = 0;
    loss = dense_.forward_backward(B, b.batch.dense.data(), pp, b.batch.labels.data(), dp, [&](int64_t ready_from) {
      while (next_bucket + 1 < buckets_.size() && buckets_[next_bucket].first >= ready_from) launch_bucket(next_bucket++, step);
    });
    red_[0] = static_cast<float>(loss);
    red_[1] = sh_.opt.cancel && sh_.opt.cancel->load() ? 1.0f : 0.0f;
    while (next_bucket < buckets_.size()) launch_bucket(next_bucket++, step);
    // gradients of the global-batch mean loss
    const float inv_w = 1.0f / static_cast<float>(W);
    for (int f = 0; f < F; ++f)
      for (size_t i = 0; i < dpooled[static_cast<size_t>(f)].size(); ++i) dpooled[static_cast<size_t>(f)][i] *= inv_w;
  }
  b.pooled.clear();

  // ---- gradient dist ---------------------------------------------------------------------------
  std::vector<DeviceBuffer<float>> slot_grad(nmine);
  for (size_t k = 0; k < nmine; ++k)
    slot_grad[k] = buf<float>("gradients", static_cast<size_t>(W * B * L_.slots[static_cast<size_t>(mine[k])].s.num_cols));
  {  // table_wise / column_wise: reverse all-to-all
    std::vector<int64_t> scount(static_cast<size_t>(W), 0), rcount(static_cast<size_t>(W), 0);
    const auto& my_a2a = L_.a2a_slots_to[static_cast<size_t>(me_)];
    int64_t my_cols = 0;
    for (int k : my_a2a) my_cols += L_.slots[static_cast<size_t>(k)].s.num_cols;
    for (int d = 0; d < W; ++d) {
      rcount[static_cast<size_t>(d)] = B * my_cols;
      for (int k : L_.a2a_slots_to[static_cast<size_t>(d)]) scount[static_cast<size_t>(d)] += B * L_.slots[static_cast<size_t>(k)].s.num_cols;
    }
    auto sendb = buf<float>("comm_buffer", static_cast<size_t>(std::accumulate(scount.begin(), scount.end(), int64_t{0})));
    size_t p = 0;
    for (int d = 0; d < W; ++d)
      for (int k : L_.a2a_slots_to[static_cast<size_t>(d)]) {
        const Slot& sl = L_.slots[static_cast<size_t>(k)];
        const int64_t dim = L_.dim[static_cast<size_t>(sl.feature)], cols = sl.s.num_cols;
        const float* src = dpooled[static_cast<size_t>(sl.feature)].data();
        for (int64_t s = 0; s < B; ++s)
          std::memcpy(sendb.data() + p + static_cast<size_t>(s * cols), src + s * dim + sl.s.col_offset, sizeof(float) * static_cast<size_t>(cols));
        p += static_cast<size_t>(B * cols);
      }
    auto recvb = buf<float>("comm_buffer", static_cast<size_t>(W * B * my_cols));
    comm(*world_, "grad_dist/all_to_all", step, [&] {
      world_->all_to_all_q("grad_dist/all_to_all", sendb.data(), scount, recvb.data(), rcount, prec, &bwd_error_);
    });
    p = 0;
    for (int s = 0; s < W; ++s)
      for (int k : my_a2a) {
        const size_t lk = local_slot(k);
        const int64_t cols = L_.slots[static_cast<size_t>(k)].s.num_cols;
        std::memcpy(slot_grad[lk].data() + s * B * cols, recvb.data() + p, sizeof(float) * static_cast<size_t>(B * cols));
        p += static_cast<size_t>(B * cols);
      }
  }
  const int64_t rw_width = L_.sum_dims(L_.rw_features);
  if (!L_.rw_features.empty()) {  // row_wise: all-gather of the (mean-scaled) gradients
    auto sendb = buf<float>("comm_buffer", static_cast<size_t>(B * rw_width));
    size_t p = 0;
    for (int f : L_.rw_features) {
      const int64_t dim = L_.dim[static_cast<size_t>(f)];
      std::memcpy(sendb.data() + p, dpooled[static_cast<size_t>(f)].data(), sizeof(float) * static_cast<size_t>(B * dim));
      if (is_mean(feature_table(f))) scale_rows_mean(b, f, sendb.data() + p, dim);
      p += static_cast<size_t>(B * dim);
    }
    auto recvb = buf<float>("comm_buffer", static_cast<size_t>(W * B * rw_width));
    std::vector<int64_t> counts(static_cast<size_t>(W), B * rw_width);
    comm(*world_, "grad_dist/all_gather", step, [&] {
      world_->all_gather_q("grad_dist/all_gather", sendb.data(), recvb.data(), counts, prec, &bwd_error_);
    });
    p = 0;
    for (int s = 0; s < W; ++s)
      for (int f : L_.rw_features) {
        const int64_t dim = L_.dim[static_cast<size_t>(f)];
        std::memcpy(slot_grad[slot_of_feature_on_me(f)].data() + s * B * dim, recvb.data() + p, sizeof(float) * static_cast<size_t>(B * dim));
        p += static_cast<size_t>(B * dim);
      }
  }
  if (node_) {  // table_row_wise: all-to-all across nodes, then all-gather inside the node
    const int my_node = me_ / L_.local;
    const auto& feats = L_.twrw_features[static_cast<size_t>(my_node)];
    const int64_t width = L_.sum_dims(feats);
    std::vector<int64_t> scount(static_cast<size_t>(L_.nodes)), rcount(static_cast<size_t>(L_.nodes), B * width);
    std::vector<float> sendv;
    for (int m = 0; m < L_.nodes; ++m) {
      scount[static_cast<size_t>(m)] = B * L_.sum_dims(L_.twrw_features[static_cast<size_t>(m)]);
      for (int f : L_.twrw_features[static_cast<size_t>(m)]) {
        const int64_t dim = L_.dim[static_cast<size_t>(f)];
        const size_t at = sendv.size();
        sendv.insert(sendv.end(), dpooled[static_cast<size_t>(f)].data(), dpooled[static_cast<size_t>(f)].data() + B * dim);
        if (is_mean(feature_table(f))) scale_rows_mean(b, f, sendv.data() + at, dim);
      }
    }
    auto sendb = buf<float>("comm_buffer", sendv.size());
    std::copy(sendv.begin(), sendv.end(), sendb.data());
    auto cross_recv = buf<float>("comm_buffer", static_cast<size_t>(L_.nodes * B * width));  // [m][feature][B x dim]
    comm(*cross_, "grad_dist/all_to_all_cross_node", step, [&] {
      cross_->all_to_all_q("grad_dist/all_to_all_cross_node", sendb.data(), scount, cross_recv.data(), rcount, prec,
                           &bwd_error_);
    });
    auto gathered = buf<float>("comm_buffer", static_cast<size_t>(L_.local * L_.nodes * B * width));  // [l][m][feature][B x dim]
    std::vector<int64_t> counts(static_cast<size_t>(L_.local), L_.nodes * B * width);
    // the values are already rounded to `prec`: sending them in it again is exact
    comm(*node_, "grad_dist/all_gather_intra_node", step, [&] {
      node_->all_gather_q("grad_dist/all_gather_intra_node", cross_recv.data(), gathered.data(), counts, prec, nullptr);
    });
    size_t p = 0;
    for (int l = 0; l < L_.local; ++l)
      for (int m = 0; m < L_.nodes; ++m)
        for (int f : feats) {
          const int64_t dim = L_.dim[static_cast<size_t>(f)];
          const int owner = m * L_.local + l;
          std::memcpy(slot_grad[slot_of_feature_on_me(f)].data() + owner * B * dim, gathered.data() + p, sizeof(float) * static_cast<size_t>(B * dim));
          p += static_cast<size_t>(B * dim);
        }
  }
  // ---- embedding backward + fused optimizer ----------------------------------------------------
  {
    ScopedSpan span(tr, me_, Lane::compute, OpCategory::optimizer, "backward_fused_optimizer", step);
    for (auto& ls : shards) {
      if (sh_.plan.tables[static_cast<size_t>(ls.table)].type == ShardingType::data_parallel) continue;
      std::vector<SparseGrad> parts;
      for (size_t k = 0; k < nmine; ++k) {
        const Slot& sl = L_.slots[static_cast<size_t>(mine[k])];
        if (sl.table != ls.table || sl.s.row_offset != ls.s.row_offset || sl.s.col_offset != ls.s.col_offset) continue;
        parts.push_back(accumulate_sparse_grad(ls.s.num_cols, b.slot_ids[k].data(), b.slot_off[k].data(), W * B,
                                               b.slot_scale[k].empty() ? nullptr : b.slot_scale[k].data(),
                                               slot_grad[k].data(), ls.s.num_cols));
      }
      SparseGrad g = parts.size() == 1 ? std::move(parts[0]) : merge_sparse_grads(parts, ls.s.num_cols);
      if (measured_) summary.unique_ids += static_cast<int64_t>(g.rows.size());
      load_of(ls.table, ls.shard_index).unique_ids = static_cast<int64_t>(g.rows.size());
      shard_update(ls, it + 1, g);
    }
  }
  // data_parallel: sparse row gradients all-gathered, merged in rank order, applied on every replica
  for (int t : L_.dp_tables) {
    LocalShard& ls = shard_of(t, me_);
    const int64_t dim = ls.s.num_cols;
    SparseGrad local;
    {
      ScopedSpan span(tr, me_, Lane::compute, OpCategory::optimizer, "backward_data_parallel", step);
      std::vector<SparseGrad> parts;
      for (const auto& fname : spec.tables[static_cast<size_t>(t)].feature_names) {
        const int f = spec.feature_index(fname);
        std::vector<float> sc;
        if (is_mean(t)) sc = mean_scale(lengths.data() + f * B, static_cast<size_t>(B));
        parts.push_back(accumulate_sparse_grad(dim, b.batch.kjt.values.data(), b.off.data() + f * B, B, sc.empty() ? nullptr : sc.data(),
                                               dpooled[static_cast<size_t>(f)].data(), dim));
      }
      local = parts.size() == 1 ? std::move(parts[0]) : merge_sparse_grads(parts, dim);
    }
    std::vector<int64_t> n_rows(static_cast<size_t>(W)), one(static_cast<size_t>(W), 1);
    const int64_t mine_rows = static_cast<int64_t>(local.rows.size());
    comm(*world_, "grad_dist/data_parallel_counts", step, [&] {
      world_->all_gather_v("grad_dist/data_parallel_counts", &mine_rows, n_rows.data(), one, sizeof(int64_t));
    });
    const int64_t total_rows = std::accumulate(n_rows.begin(), n_rows.end(), int64_t{0});
    auto all_rows = buf<int64_t>("comm_buffer", static_cast<size_t>(total_rows));
    auto all_vals = buf<float>("comm_buffer", static_cast<size_t>(total_rows * dim));
    std::vector<int64_t> val_counts(static_cast<size_t>(W));
    for (int r = 0; r < W; ++r) val_counts[static_cast<size_t>(r)] = n_rows[static_cast<size_t>(r)] * dim;
    comm(*world_, "grad_dist/data_parallel_all_gather", step, [&] {
      world_->all_gather_v("grad_dist/data_parallel_rows", local.rows.data(), all_rows.data(), n_rows, sizeof(int64_t));
      world_->all_gather_v("grad_dist/data_parallel_values", local.values.data(), all_vals.data(), val_counts, sizeof(float));
    });
    ScopedSpan span(tr, me_, Lane::compute, OpCategory::optimizer, "optimizer_data_parallel", step);
    std::vector<SparseGrad> parts(static_cast<size_t>(W));
    int64_t at = 0;
    for (int r = 0; r < W; ++r) {
      auto& pr = parts[static_cast<size_t>(r)];
      pr.dim = dim;
      const int64_t n = n_rows[static_cast<size_t>(r)];
      pr.rows.assign(all_rows.data() + at, all_rows.data() + at + n);
      pr.values.assign(all_vals.data() + at * dim, all_vals.data() + (at + n) * dim);
      at += n;
    }
    SparseGrad g = merge_sparse_grads(parts, dim);
    if (measured_) summary.unique_ids += static_cast<int64_t>(g.rows.size());
    load_of(t, ls.shard_index).unique_ids = static_cast<int64_t>(g.rows.size());
    shard_update(ls, it + 1, g);
  }

  // ---- dense gradients (and the loss) all-reduced, averaged, applied -------------------------
  // The buckets launched during the backward pass ran on the comm worker before the gradient
  // dist (queue order); the last one, with the loss and the cancel vote, was queued after it.
  for (auto& f : bucket_done_) f.get();
  bucket_done_.clear();
  bool stop = false;
  const float mean_loss = red_[0] / static_cast<float>(W);
  {
    ScopedSpan span(tr, me_, Lane::compute, OpCategory::optimizer, "dense_optimizer", step);
    const float inv_w = 1.0f / static_cast<float>(W);
    stop = red_[1] > 0;
    for (size_t i = 2; i < red_.size(); ++i) red_[i] *= inv_w;
    const double lr = spec.optimizer.dense_learning_rate > 0 ? spec.optimizer.dense_learning_rate : spec.optimizer.learning_rate;
    dense_.sgd_step(static_cast<float>(lr), red_.data() + 2);
  }
  // The loss is all-reduced, so every rank sees the same value and stops at the same step.
  if (!std::isfinite(mean_loss))
    throw std::runtime_error(fmt::format("training diverged: the loss is {} at step {}", mean_loss, step));
  if (measured_) losses.push_back(static_cast<double>(mean_loss));
  last_loss_ = static_cast<double>(mean_loss);
  return stop;
}

void Rank::launch_bucket(size_t k, int64_t step) {
  // red_ = [loss, cancel vote, gradients...]; the last bucket (parameters from 0) takes the
  // loss and the vote with it
  const auto [lo, hi] = buckets_[k];
  const auto& g = dense_.grads();
  std::copy(g.begin() + lo, g.begin() + hi, red_.begin() + 2 + lo);
  const int64_t from = k + 1 == buckets_.size() ? 0 : 2 + lo;
  float* data = red_.data() + from;
  const int64_t count = 2 + hi - from;
  bucket_done_.push_back(comm_->submit([this, data, count, step] {
    on_comm_lane(*world_, "dense_all_reduce", step, [&] { world_->all_reduce_sum("dense_all_reduce", data, count); });
  }));
}

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown";
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

void write_run_metadata(sessions::SessionWriter& w, const WorkloadSpec& spec, const ShardingPlan& plan,
                        const profiler::RunClock& clock) {
  w.set_metadata(sessions::meta::kToolVersion, EMBEDSCOPE_VERSION);
  w.set_metadata(sessions::meta::kCreatedUnixNs, std::to_string(clock.wall_anchor_ns()));
  w.set_metadata(sessions::meta::kWallAnchorUnixNs, std::to_string(clock.wall_anchor_ns()));
  w.set_metadata(sessions::meta::kClock, "steady_clock ns since the run's start");
  w.set_metadata(sessions::meta::kHost, host_name());
  w.set_metadata(sessions::meta::kCpuName, cpu_name());
  w.set_metadata(sessions::meta::kGpuNames, "");
  w.set_metadata(sessions::meta::kGlooVersion, gloo_version());
  w.set_metadata(sessions::meta::kCudaVersion, "not used (cpu backend)");
  w.set_metadata(sessions::meta::kNcclVersion, "not used (cpu backend)");
  w.set_metadata(sessions::meta::kSimulated, "0");
  w.set_metadata(sessions::meta::kBackend, to_string(spec.devices.backend));
  w.set_metadata(sessions::meta::kWorkloadName, spec.name);
  constexpr auto replace = nlohmann::json::error_handler_t::replace;  // names may not be UTF-8
  w.set_metadata(sessions::meta::kWorkloadJson, to_json(spec).dump(-1, ' ', false, replace));
  w.set_metadata(sessions::meta::kShardingPlanJson, to_json(spec, plan).dump(-1, ' ', false, replace));
  w.set_metadata(sessions::meta::kWorldSize, std::to_string(spec.devices.count));
  w.set_metadata(sessions::meta::kBatchSize, std::to_string(spec.batch_size));
  w.set_metadata(sessions::meta::kSamplesPerStep, std::to_string(spec.batch_size * spec.devices.count));
  w.set_metadata(sessions::meta::kSteps, std::to_string(spec.steps));
  w.set_metadata(sessions::meta::kWarmupSteps, std::to_string(spec.warmup_steps));
  w.set_metadata(sessions::meta::kPipeline, to_string(spec.pipeline));
  w.set_metadata(sessions::meta::kQcommsForwardPrecision, to_string(spec.qcomms.forward_precision));
  w.set_metadata(sessions::meta::kQcommsBackwardPrecision, to_string(spec.qcomms.backward_precision));
  w.set_metadata(sessions::meta::kNetworkJson, to_json(spec)["network"].dump());
}

// The step of work before the first step (setup): as Rank::setup counts it.
[[maybe_unused]] int64_t step_of_setup(const WorkloadSpec& spec) { return -spec.warmup_steps - 1; }

int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

}  // namespace

RunResult run_training(const WorkloadSpec& requested, const TrainerOptions& options) {
  // auto becomes cpu or cuda; a cuda run without (enough) GPUs is refused here
  const WorkloadSpec spec = with_resolved_backend(requested, requested.name.empty() ? "workload" : requested.name);
  const bool on_cuda = spec.devices.backend == Backend::cuda;
  RunResult result;
  result.plan = plan_sharding(spec);
  const auto est = estimate_memory(spec, result.plan);
  check_memory_fits(spec, est);
  int64_t need = 0;
  for (const auto& e : est) need += e.total();
  if (const int64_t host = host_memory_bytes(); !on_cuda && host > 0 && need > host * 9 / 10)
    throw SpecError(fmt::format(
        "/devices: the cpu backend runs all {} ranks in this process and they need {} in all, but this machine "
        "has {}; use fewer devices, a smaller batch or a scaled preset",
        spec.devices.count, format_bytes(need), format_bytes(host)));

  Shared sh(spec, result.plan, options);
  const int W = spec.devices.count;
#if EMBEDSCOPE_WITH_CUDA
  // cuda backend: rank r on GPU r, one NCCL communicator per rank and group (ncclCommInitAll),
  // and CUPTI for the whole run, set up before the session file exists (an NCCL error throws).
  // Declared before the ranks, which use them, so they outlive them.
  std::vector<std::unique_ptr<NcclComm>> comms;
  std::unique_ptr<profiler::CuptiTracer> cupti;
  std::string cupti_error;
  if (on_cuda) {
    const auto timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
    for (int r = 0; r < W; ++r) sh.gpus.push_back(std::make_unique<detail::CudaRankDevice>(r));
    auto adopt = [&](std::vector<std::unique_ptr<NcclComm>> group, std::vector<NcclComm*>& of_rank,
                     const std::vector<int>& members) {
      of_rank.resize(static_cast<size_t>(W));
      for (size_t i = 0; i < group.size(); ++i) {
        of_rank[static_cast<size_t>(members[i])] = group[i].get();
        comms.push_back(std::move(group[i]));
      }
    };
    std::vector<int> all(static_cast<size_t>(W));
    std::iota(all.begin(), all.end(), 0);
    adopt(NcclComm::init_all(all, "world", timeout, all), sh.nccl_world, all);
    bool any_twrw = false;
    for (const auto& tp : result.plan.tables) any_twrw |= tp.type == ShardingType::table_row_wise;
    if (any_twrw) {  // the same groups as the cpu backend's (Rank::setup)
      const Layout& L = sh.layout;
      for (int n = 0; n < L.nodes; ++n) {
        std::vector<int> m;
        for (int i = 0; i < L.local; ++i) m.push_back(n * L.local + i);
        adopt(NcclComm::init_all(m, fmt::format("node{}", n), timeout, m), sh.nccl_node, m);
      }
      for (int l = 0; l < L.local; ++l) {
        std::vector<int> m;
        for (int n = 0; n < L.nodes; ++n) m.push_back(n * L.local + l);
        adopt(NcclComm::init_all(m, fmt::format("cross{}", l), timeout, m), sh.nccl_cross, m);
      }
    }
    if (options.trace && !options.session_path.empty()) {
      try {
        cupti = std::make_unique<profiler::CuptiTracer>(sh.tracer.clock());
        for (int r = 0; r < W; ++r) cupti->map_device(r, r);
        for (const auto& c : comms) {
          sh.gpus[static_cast<size_t>(c->device())]->bind_thread();
          try {  // NCCL's kernels are recognised by their names too: a stream CUPTI does not know yet is no loss
            cupti->map_stream(c->device(), c->stream(), Lane::gpu_comm);
          } catch (const std::runtime_error&) {
          }
        }
      } catch (const std::exception& e) {  // the run goes on; the session says why it has no GPU ops
        cupti.reset();
        cupti_error = e.what();
      }
    }
  }
#endif
  if (options.emulate_device && !on_cuda)
    for (int r = 0; r < W; ++r) sh.gpus.push_back(detail::host_rank_device());
  std::unique_ptr<sessions::SessionWriter> session;
  if (!options.session_path.empty()) {
    session = std::make_unique<sessions::SessionWriter>(options.session_path, options.session_overwrite);
    sh.session = session.get();
    result.session_path = options.session_path;
    write_run_metadata(*session, spec, result.plan, sh.tracer.clock());
  }
  std::vector<std::unique_ptr<Rank>> ranks;
  try {
    for (int r = 0; r < W; ++r) ranks.push_back(std::make_unique<Rank>(sh, r));
  } catch (const std::exception& e) {  // e.g. a GPU allocator that cannot be set up: the session says so
    if (session) session->close(to_string(RunEnd::crashed), e.what());
    throw;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < W; ++r) {
    threads.emplace_back([&, r] {
      Rank& rank = *ranks[static_cast<size_t>(r)];
      if (!sh.gpus.empty()) sh.gpus[static_cast<size_t>(r)]->bind_thread();
      auto record = [&](RunEnd kind, bool bad_input, bool consequence, const std::string& msg) {
        std::lock_guard<std::mutex> lock(sh.mu);
        sh.errors.push_back({r, sh.tracer.now_ns(), kind, bad_input, consequence, msg});
      };
      bool vanished = false;
      try {
        rank.main();
      } catch (const RankVanished&) {
        vanished = true;
      } catch (const InvalidIdsError& e) {
        record(RunEnd::crashed, true, false, e.what());
      } catch (const OomError& e) {
        record(RunEnd::oom, false, false, e.what());
      } catch (const SplitMismatchError& e) {
        record(RunEnd::crashed, false, false, e.what());
      } catch (const CollectiveError& e) {
        record(e.timed_out ? RunEnd::hang : RunEnd::crashed, false, !e.timed_out,
               fmt::format("rank {}: {}", r, e.what()));
      } catch (const std::exception& e) {
        record(RunEnd::crashed, false, false, fmt::format("rank {}: {}", r, e.what()));
      }
      std::unique_lock<std::mutex> lock(sh.mu);
      ++sh.finished;
      sh.cv.notify_all();
      // A vanished rank keeps its connections open (as a hung process would) until the others end.
      if (vanished) sh.cv.wait(lock, [&] { return sh.finished == W; });
      lock.unlock();
      rank.teardown();  // closing the sockets makes peers still waiting on this rank fail fast
    });
  }
  for (auto& t : threads) t.join();

  result.samples_per_step = spec.batch_size * W;
  if (!sh.errors.empty()) {
    auto errs = sh.errors;
    std::stable_sort(errs.begin(), errs.end(), [](const RankError& a, const RankError& b) {
      if (a.consequence != b.consequence) return !a.consequence;
      return a.time_ns < b.time_ns;
    });
    result.ended = errs.front().kind;
    result.bad_input = errs.front().bad_input;
    result.error = errs.front().message;
  }
  for (auto& r : ranks) result.ranks.push_back(r->summary);
  QuantError fwd, bwd;
  for (auto& r : ranks) {
    fwd.merge(r->fwd_error_);
    bwd.merge(r->bwd_error_);
  }
  result.qcomms_error = {fwd.max_abs_error, fwd.relative(), bwd.max_abs_error, bwd.relative()};
  if (result.ended == RunEnd::complete) {  // also cancelled runs: the steps that ran
    const size_t n = ranks[0]->step_ns.size();
    for (size_t i = 0; i < n; ++i) {
      int64_t m = 0;
      for (auto& r : ranks) m = std::max(m, r->step_ns[i]);
      result.step_time_ns.push_back(m);
    }
    result.loss = ranks[0]->losses;
  }
  for (auto& r : ranks) result.events.insert(result.events.end(), r->events.begin(), r->events.end());
  std::sort(result.events.begin(), result.events.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start_ns, a.rank, a.lane) < std::tie(b.start_ns, b.rank, b.lane);
  });
  if (result.ended == RunEnd::complete && ranks[0]->cancelled) result.ended = RunEnd::cancelled;
  result.tracer_overhead_ns = sh.tracer.overhead_ns();
  result.dropped_records = sh.tracer.dropped();
#if EMBEDSCOPE_WITH_CUDA
  if (on_cuda) {
    // a failed rank may have left its peers' kernels waiting: abort every communicator before
    // they are destroyed (ncclCommDestroy would wait for them)
    if (!sh.errors.empty())
      for (auto& c : comms) c->abort();
    for (auto& g : sh.gpus) {
      g->bind_thread();
      cudaDeviceSynchronize();
    }
    if (cupti) {
      std::vector<profiler::GpuOp> gpu_ops = cupti->stop();
      cupti->join_collectives(gpu_ops, sh.records);
      std::vector<sessions::OpEvent> ops;
      for (auto& g : gpu_ops) {
        // the step whose host time window holds the op's start (before the first: setup)
        const auto& win = ranks[static_cast<size_t>(std::clamp(g.op.rank, 0, W - 1))]->windows;
        g.op.step = win.empty() ? step_of_setup(spec) : win.front().step - 1;
        for (const auto& w : win)
          if (g.op.start_ns >= w.start_ns) g.op.step = w.step;
        ops.push_back(g.op);
      }
      if (session) {
        session->add_ops(ops);
        cupti->write_metadata(*session);
      }
    }
    if (session) {
      int runtime = 0;
      cudaRuntimeGetVersion(&runtime);
      session->set_metadata(sessions::meta::kCudaVersion, fmt::format("{}.{}", runtime / 1000, runtime % 1000 / 10));
      session->set_metadata(sessions::meta::kNcclVersion, nccl_version());
      std::string names;
      for (int r = 0; r < W; ++r) {
        const auto& n = profiler::cuda_devices().names;
        names += (r ? "," : "") + (static_cast<size_t>(r) < n.size() ? n[static_cast<size_t>(r)] : std::string("GPU"));
      }
      session->set_metadata(sessions::meta::kGpuNames, names);
      if (!cupti_error.empty()) session->set_metadata(sessions::meta::kGpuTraceError, cupti_error);
    }
  }
#endif
  if (session) {
    for (int r = 0; r < W; ++r) session->add_ops(sh.tracer.take(r));  // spans of a step that failed midway
    session->set_metadata(sessions::meta::kTracerOverheadNs, std::to_string(result.tracer_overhead_ns));
    session->set_metadata(sessions::meta::kDroppedRecords, std::to_string(result.dropped_records));
    session->set_metadata(sessions::meta::kSpansRecorded, std::to_string(sh.tracer.recorded()));
    const auto& q = result.qcomms_error;
    session->set_metadata(sessions::meta::kQcommsErrorJson, nlohmann::json{{"forward_max_abs_error", q.forward_max_abs},
                                                              {"forward_relative_error", q.forward_relative},
                                                              {"backward_max_abs_error", q.backward_max_abs},
                                                              {"backward_relative_error", q.backward_relative}}
                                                   .dump());
    session->close(to_string(result.ended), result.error);
  }
  if (options.keep_tables && result.ended == RunEnd::complete) {
    for (size_t t = 0; t < spec.tables.size(); ++t) {
      const TableSpec& ts = spec.tables[t];
      std::vector<float> full(static_cast<size_t>(ts.num_embeddings * ts.embedding_dim));
      const TablePlan& tp = result.plan.tables[t];
      for (const Shard& s : tp.shards) {
        if (tp.type == ShardingType::data_parallel && s.rank != 0) continue;
        for (auto& ls : ranks[static_cast<size_t>(s.rank)]->shards) {
          if (ls.table != static_cast<int>(t) || ls.s.row_offset != s.row_offset || ls.s.col_offset != s.col_offset) continue;
          for (int64_t r = 0; r < s.num_rows; ++r)
            std::memcpy(full.data() + (s.row_offset + r) * ts.embedding_dim + s.col_offset,
                        ls.weights.data() + r * s.num_cols, sizeof(float) * static_cast<size_t>(s.num_cols));
        }
      }
      result.tables.push_back(std::move(full));
    }
    result.dense_params = ranks[0]->dense().params();
  }
  return result;
}

}  // namespace embedscope::engine
