#pragma once
// The threaded executor's rank: the compute worker of one rank (its own thread) with its comm
// worker, its device arena and local shards, interpreting each step's program
// (program/step_program.h) op by op. Shared by the cpu backend (Gloo, host memory) and the cuda
// backend (NCCL, a RankDevice). Rank::step walks the step's schedule and hands every op to its
// owner (program_sink.h OpOwner, recorded when the op was emitted): the rank's own handlers
// (run_own: input, input dist, lookup, dense part, optimizers) or sharding module k
// (EmbeddingSharding::run); it never names a sharding type. The waits come from the program:
// a compute op first waits for the queued comm ops its waits_for names, a sync phase ends with
// its batch's queued comm ops awaited (and the batch's output dist finished: the pooled
// embeddings unpacked), and a batch carried over from an earlier step (a pipeline's batch
// ahead) has what it queued there awaited before its first phase in this one. Comm ops queued
// one after another (a batch's input dist, its output dist) go to the comm worker as one job.
// The files: rank_state.h (the run's shared state, a local shard, a batch in flight), rank.cpp
// (the step loop, the step's device counters: rank_step_counts.h), rank_setup.cpp (the groups,
// the session's lanes and observers, the shards, the dense part's device ops), rank_shards.cpp
// (a local shard's lookup and update, on the host or the device), rank_dist.cpp (the dispatch
// to the owners, queueing comm ops, sync points, the output dist's finish), rank_input.cpp
// (input, input dist, kjt_permute, lookup, prefetch), rank_train.cpp (dense part, DDP buckets,
// embedding and dense optimizers), rank_records.cpp (the step's session records, held while the
// embedding backward's distinct-row counts come from the device; memory counters and snapshots;
// the flight recorder's dumps) and rank_rebalance.cpp (live rebalancing).

#include "exec/threaded/rank_state.h"
#include "exec/threaded/rank_step_counts.h"

namespace embedscope::engine::threaded {

// ---- one rank -------------------------------------------------------------------------------
class Rank final : public sharding::RankContext {
 public:
  Rank(Shared& sh, int rank)
      : sh_(sh), plan_(sh.plan), layout_(sh.layout), L_(layout_), me_(rank), arena_(rank, make_allocator(sh, rank), gpu_of(sh, rank) != nullptr),
        dense_(sh.spec, sh.layout.dim) {}

  void main();

  RankSummary summary;
  struct StepWindow {
    int64_t step, start_ns, end_ns;
  };
  std::vector<StepWindow> windows;  // host time of every step run (GPU records take their step from it)
  /// The step the rank is in or was in when it ended (after setup: its first step's number).
  int64_t step_in_progress() const { return current_step_.load(); }
  /// When the step in progress began (ns, the run's clock); -1 before the first step.
  int64_t step_in_progress_start_ns() const { return step_start_ns_.load(); }
  std::vector<int64_t> step_ns;     // per measured step
  std::vector<double> losses;       // per measured step (global mean)
  std::vector<int64_t> skipped_per_iteration;  // malformed input lines skipped, per iteration (warmup included)
  std::vector<sessions::OpEvent> events;  // kept spans (TrainerOptions::keep_events)
  bool cancelled = false;
  std::vector<int64_t> hash_collisions;  // per table, measured steps (input/hashing.h)
  std::map<int, HostTransferCounters> table_transfers;  // per table in host memory: its shards', measured steps
  QuantError fwd_error_, bwd_error_;  // qcomms: error of the values quantized (written on the comm thread)
  DenseModel& dense() { return dense_; }
  /// The plan this rank runs now: the run's, or the last live rebalance's (rank_rebalance.cpp).
  const ShardingPlan& plan() const { return plan_; }
  /// Live rebalances this rank took part in (its own time and memory; the executor merges the
  /// ranks'), and the tables each moved, in order.
  std::vector<sessions::RebalanceRecord> rebalances;
  std::vector<sessions::PlanChangeRecord> plan_changes;
  /// The live rebalance whose move this rank is in (its record, outcome unset) and the phase it
  /// reached ("allocating the new shards", "in the reshard all-to-all", ...): set before the
  /// move, cleared once its new shards are in place, so a run that ends during the move says
  /// how far each rank got (ThreadedExecutor). Unset when no move is under way.
  struct MoveInProgress {
    sessions::RebalanceRecord record;
    std::string phase;
    ShardingPlan before;  ///< the plan the move started from (what stays when it fails)
  };
  std::optional<MoveInProgress> moving;
  /// The load this rank had per measured step, in the policy's measure (rebalance.balance): the sum
  /// of its load counters' ids, or of their lookup_ns (what merge_rebalances' imbalance_after uses).
  std::vector<int64_t> ids_per_step;
  /// One rank per process (TrainerOptions::process) with live rebalancing: every rank's
  /// ids_per_step, all-gathered after the last step (world_load_all_gather), so that the
  /// rebalances' imbalance_after is the world's, as with threads; empty otherwise.
  std::vector<std::vector<int64_t>> world_ids_per_step;

 private:
  /// Before the first step (rank_setup.cpp): the groups, the session's lanes and observers, the
  /// shards and hot-row replicas, the dense part.
  void setup();
  /// After setup(), before the first step: waits until every rank of the run has set up, on a
  /// group of its own ("setup", Gloo, recorded nowhere) whose timeout is kSetupTimeoutMs (exec/setup_note.h), not the
  /// workload's collective_timeout_ms: a rank initialising a large table (about 200 s for 13 GiB
  /// of rows on a loaded machine) made its peers' first collective time out as a "hang", and in a
  /// run that finished its setup time showed up as the first step's exposed communication. A
  /// rank that fails (close_connections) or a process that dies releases the others at once.
  /// Throws CollectiveError as a collective does.
  void wait_for_every_rank_set_up();
  bool step(int64_t iteration);  // true: every rank agreed to stop (cancel)
  // ---- the interpreter (rank.cpp, rank_dist.cpp) ----------------------------------------------
  /// A step program with the owner of each op (program_sink.h OpOwner) and, per op, the ops it
  /// launches (launched_by: the DDP buckets of dense_forward_backward).
  struct Program {
    StepProgram p;
    std::vector<program::OpOwner> owners;
    std::vector<std::vector<int>> launches;
  };
  /// The program of iteration `it` under the current plan (one per place in the run, built once).
  const Program& program_of(int64_t it);
  /// The batch of iteration `bi`, made when a phase first names it.
  Inflight& batch_at(int64_t bi);
  /// Runs op `op` of the current program on batch b: a compute-thread op (lanes compute,
  /// gpu_copy) first waits for the queued ops its waits_for names; then its owner runs it.
  void run_op(const Program& pr, const ProgramOp& op, Inflight& b);
  /// The rank's own ops (OpOwner::owner -1, kind a program::RankOp).
  void run_own(const Program& pr, const ProgramOp& op, const program::OpOwner& tag, Inflight& b);
  /// A sync point of b: waits for the comm ops it queued (the pending ones handed over first),
  /// in order, and finishes its output dist once it has been looked up (finish_output_dist).
  void settle(Inflight& b);
  /// What a train op that failed held (the modules' scratch, the gradients), freed in the order
  /// the locals of the one train function were when an exception left it.
  static void release_train_buffers(Inflight& b);
  // ---- the rank's own ops (rank_input.cpp, rank_train.cpp) ------------------------------------
  void input(Inflight& b);  // this rank's batch, its ids checked and hashed
  /// Bucketizes b's batch for the current layout (span `bucketize`, or `reshard_bucketize` when
  /// `again`) and sizes the input dist's buffers.
  void bucketize(Inflight& b, bool again);
  /// bucketize on the device (input_dist_on_device; its send buffers in Inflight::kjt_send).
  void bucketize_on_device(Inflight& b);
  /// finish_input of a batch whose input dist ran on the device: kjt_permute there, and what the
  /// host still reads copied back (Inflight::slot_host, the lengths when needed).
  void finish_input_on_device(Inflight& b);
  /// Part `part` (0 splits, 1 lengths, 2 ids) of b's KJT all-to-all, as a job for the comm
  /// thread (received into host vectors: the device allocator belongs to the compute thread);
  /// the ids' counts come from the splits received first. `again`: named `reshard_input_dist/...`.
  std::function<void()> input_dist_job(Inflight& b, int part, bool again);
  /// A batch started under the plan before a live rebalance, sent again under the new one:
  /// bucketize and the three all-to-alls in one comm job, waited for.
  void input_dist_again(Inflight& b);
  /// b's batch without the ids of hot rows (Layout::hot_rows): its values and F x B + 1 offsets.
  /// Counts the dropped ids in hot_ids when the batch is a measured step's (not when `again`).
  void drop_hot_ids(const Inflight& b, std::vector<int64_t>& values, std::vector<int64_t>& off, bool again);
  /// Per local slot, the per-bag scales of mean pooling applied at the lookup (empty where none).
  void mean_scales(Inflight& b) const;
  void finish_input(Inflight& b);                                 // waits for the input dist; kjt_permute
  void lookup(Inflight& b);
  /// The prefetch op (TableSpec::prefetch_pipeline): waits for b's input dist, and fetches
  /// the rows of b's ids that miss the caches of this rank's prefetch_pipeline shards into them
  /// (HostRowStore::prefetch), as span `prefetch` (compute lane, category memcpy, bytes fetched),
  /// its transfers added to the shards' load counters of this step. b's ids stay unpermuted
  /// (kjt_permute runs in its lookup phase, as without prefetch).
  void prefetch(Inflight& b);
  void finish_output_dist(Inflight& b);                           // waits; pooled outputs in place
  /// Dense forward/backward (after finish_output_dist of the batch), launching the DDP buckets
  /// (`pr.launches[op.id]`) as their gradients are final; allocates b.slot_grad for the grad dist.
  void dense_forward_backward(const Program& pr, const ProgramOp& op, Inflight& b);
  /// The embedding backward with the fused optimizer of every local shard (the shards whose
  /// module applies their gradients itself get them in b.shard_grads).
  void backward_fused_optimizer(Inflight& b);
  /// The dense gradients (and the loss) all-reduced, averaged, applied; the batch's gradients
  /// freed. Sets stop_ (the cancel vote) and b.trained; throws when the loss is not finite.
  void dense_optimizer(Inflight& b);
  // ---- the embedding backward's distinct-row counts, read without a wait (rank_records.cpp) ---
  /// A step's session records: its row, its load counters, the id-histogram buckets it changed.
  struct StepRecords {
    sessions::StepMetric row;
    std::vector<sessions::LoadCounter> load;
    std::vector<sessions::IdHistogramBucket> histogram;
  };
  /// The counts of distinct rows of one step's shards accumulated on the device (their load
  /// counters' unique_ids), copied back by RankDevice::defer_to_host once the embedding backward
  /// is queued and taken where the host waits for the device anyway: in the next step's
  /// embedding backward (after its first wait), else at that step's end or the run's end. The
  /// step's records wait here when the step ended first.
  struct DeferredCounts {
    int64_t step = 0;
    bool measured = false;
    std::vector<std::tuple<size_t, int, int>> shards;  // (index into the counts, table, shard index)
    size_t num_counts = 0;
    std::optional<StepRecords> records;
  };
  std::optional<DeferredCounts> deferred_counts_;
  std::vector<StepRecords> records_ready_;  // held records whose counts came, to be written in order
  /// Queues the read of `counts` (device memory; `shards` says whose count is where) after
  /// taking an earlier step's (take_deferred_counts).
  void defer_counts(DeviceBuffer<int64_t>& counts, std::vector<std::tuple<size_t, int, int>> shards);
  /// Takes the pending counts, if any (RankDevice::take_deferred: waits only when the host made
  /// no wait since they were queued): each shard's load counter's unique_ids (in the held records,
  /// else this step's counter) and, in a measured step, summary.unique_ids.
  void take_deferred_counts();
  /// Writes the records ready (records_ready_), then `rec` unless its step's counts are pending
  /// (then held until taken). With a session only.
  void write_step_records(StepRecords rec);
  /// After the last step: take_deferred_counts and the records ready written.
  void finish_deferred_counts();
  void write_ready_records();  // records_ready_ into the session (if any), in order
  sessions::LoadCounter& load_of(int table, int shard_index);
  /// Adds a host / host_cached shard's transfers (model/host_cache.h) to its load counter, and
  /// in a measured step to table_transfers.
  void add_transfers(sessions::LoadCounter& c, const HostTransferCounters& t);
  // ---- live rebalancing (rank_rebalance.cpp) ---------------------------------------------------
  /// After measured step `step` (0-based): keeps this step's ids per shard; unless it is the
  /// `last` step, when the policy may
  /// fire, all-gathers the ranks' ids over its window, and if should_rebalance fires and the
  /// proposal is worth it, moves the tables (reshard). The same decision on every rank.
  void after_step_rebalance(int64_t step, bool last);
  /// One rank per process: all-gathers every rank's ids_per_step into world_ids_per_step (a
  /// collective of the world group, `rebalance_load_all_gather` on the comm lane at `step`).
  void world_load_all_gather(int64_t step);
  /// Turns the current plan into `next`: the rows of every changed table (rebalance/reshard.h
  /// row_transfers: table_wise moves, table_wise -> row_wise splits) go with their optimizer
  /// state to their new shards in one all-to-all (local blocks are copied), the old shards are
  /// freed after the new ones are allocated, and the layout, the sharding modules and the step
  /// programs are rebuilt for `next`.
  void reshard(const ShardingPlan& next, int64_t step);
  /// Before a reshard under a pipeline (sparse_dist, semi_sync): the batches started ahead under
  /// the old plan finish what they began there - their input dist is awaited, and a batch already
  /// looked up (semi_sync) finishes its output dist, so its pooled outputs (values of the tables
  /// before the move, which the move does not change) are final and need no shard.
  void settle_inflight();
  /// After a reshard: every batch started ahead is bucketized and input-dist'ed again under the
  /// new plan (its ids to the new shards); one already looked up also gets its per-slot ids and
  /// mean scales for the new shards now, for its backward in the next step. Its lookup is not
  /// repeated: under semi_sync it read the tables before the last update, as it must.
  void replan_inflight();
  std::vector<std::vector<int64_t>> shard_ids_per_step_;  // measured steps x flat shard (plan order)
  int64_t last_rebalance_ = -1;                           // the step after which the last one ran
  /// The window load (per table, shard) the last proposal saw when it moved nothing; unset when
  /// none fired yet or the last one moved tables (after_step_rebalance: not proposed again while
  /// the load stays within rebalance::kReproposeShift of it).
  std::optional<std::vector<std::vector<int64_t>>> unmoved_load_;
  /// The refusals recorded under the current plan, each once, as "table|from|cause"
  /// (RefusedMove::cause), and "nothing worth moving"; cleared when a rebalance moves tables.
  std::set<std::string> said_refusals_;
  static sharding::LocalBatch local_batch(const Inflight& b);
  // ---- sharding::RankContext: what the sharding modules use ------------------------------------
 public:
  int rank() const override { return me_; }
  const WorkloadSpec& spec() const override { return sh_.spec; }
  const Layout& layout() const override { return L_; }
  DeviceBuffer<float> buffer(const char* tag, size_t n) override { return buf<float>(tag, n); }
  Collectives& group(sharding::GroupKind g) override {
    return g == sharding::GroupKind::world ? *world_ : g == sharding::GroupKind::node ? *node_ : *cross_;
  }
  void on_comm_lane(sharding::GroupKind g, const char* name, const std::function<void()>& fn) override {
    on_comm_lane(group(g), name, comm_step_, fn);
  }
  void comm(sharding::GroupKind g, const char* name, const std::function<void()>& fn) override {
    flush_queued();  // what was queued before runs before it
    const bool fill = fill_phase_;
    comm_->run([&] {
      comm_fill_ = fill;
      struct Reset {
        std::atomic<bool>& f;
        ~Reset() { f = false; }
      } reset{comm_fill_};
      on_comm_lane(group(g), name, fill ? step_ - 1 : step_, fn);
    });
  }
  void queue(const ProgramOp& op, std::function<void()> fn) override;
  QuantError* forward_error() override { return &fwd_error_; }
  QuantError* backward_error() override { return &bwd_error_; }
  size_t local_slot(int slot) const override;
  size_t local_slot_of_feature(int f) const override;
  DeviceBuffer<int64_t> index_buffer(const char* tag, size_t n) override { return buf<int64_t>(tag, n); }
  void compute(OpCategory cat, const char* name, const std::function<void()>& fn) override;
  void lookup(int table, int shard_index, const int64_t* ids, const int64_t* off, int64_t n_bags, const float* scale,
              DeviceBuffer<float>& out) override;
  void update(int table, int shard_index, int64_t iteration, const SparseGrad& g) override;
  void replica_lookup(int table, const int64_t* ids, const int64_t* off, int64_t n_bags, const float* scale,
                      DeviceBuffer<float>& out) override;
  void replica_update(int table, int64_t iteration, const SparseGrad& g) override;
  std::pair<SparseGrad, SparseGrad> factor_grads(int table, int shard_index, const SparseGrad& g) override;
  void factor_update(int table, int shard_index, int64_t iteration, const SparseGrad& da, const SparseGrad& db) override;
  bool dist_on_device() const override {
    return gpu_ != nullptr && sh_.opt.device_dist && dense_.resident() && !sh_.opt.on_pooled &&
           sh_.spec.qcomms.forward_precision == CommPrecision::fp32 &&
           sh_.spec.qcomms.backward_precision == CommPrecision::fp32;
  }
  bool slot_grad_on_device(size_t local_slot) const override;
  /// Whether the KJT input dist runs on the device (issue 14): dist_on_device, some slot (not
  /// data_parallel only: nothing to send), no hot rows (their
  /// ids are dropped on the host before the bucketizing), no host / host_cached table (their
  /// gather and prefetch read the ids on the host). The same on every rank (spec and options
  /// only), as the all-to-all variant must be. Then bucketize copies the batch's values and
  /// offsets to the device once and bucketizes there, only the splits come back to the host
  /// (the all-to-all sizes), the lengths and ids all-to-alls run on device buffers, kjt_permute
  /// regroups them on the device and the lookup reads them there (Inflight::kjt_dev). A batch
  /// sent again after a live rebalance (input_dist_again) takes the host path.
  bool input_dist_on_device() const;
  /// With the device input dist: whether local slot k's ids and offsets are copied back to the
  /// host (Inflight::slot_host): unless its shard accumulates its gradients on the device
  /// (accumulates_on_device, no module applies its gradients; from one local slot or several),
  /// the backward builds the slot's sparse gradient from host ids.
  bool slot_ids_on_host(size_t local_slot) const;
  void device_copy(void* dst, const void* src, int64_t bytes) override { device_or_throw().copy_on_device(dst, src, bytes); }
  void device_copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes,
                      int64_t rows) override {
    device_or_throw().copy_2d(dst, dst_pitch, src, src_pitch, width_bytes, rows,
                              detail::RankDevice::CopyKind::device_to_device);
  }
  void device_scale_copy_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                            int64_t dst_stride, float s) override {
    device_or_throw().scale_copy_2d(rows, width, src, src_stride, dst, dst_stride, s);
  }
  void device_to_host(void* dst, const void* src, int64_t bytes) override {
    device_or_throw().to_host(dst, src, bytes);
    if (measured_) detail::add_sparse_grad_copies({0, 1, 0, bytes});
  }
  /// Whether feature f's pooled embeddings and their gradients stay on the device
  /// (dist_on_device and f is served by table_wise / column_wise slots: the pooled all-to-all's;
  /// or by row_wise / table_row_wise / grid_shard slots in a plan without hot rows).
  bool pooled_on_device(int f) const override;
  void host_to_device(void* dst, const void* src, int64_t bytes) override { device_or_throw().to_device(dst, src, bytes); }
  void device_add_scale_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                                int64_t dst_stride, const float* row_scale, bool accumulate) override {
    device_or_throw().add_scale_rows_2d(rows, width, src, src_stride, dst, dst_stride, row_scale, accumulate);
  }
  void device_scale_copy_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                                 int64_t dst_stride, float s, const float* row_scale) override {
    device_or_throw().scale_copy_rows_2d(rows, width, src, src_stride, dst, dst_stride, s, row_scale);
  }

 private:
  const detail::RankDevice& device_or_throw() const {
    if (!gpu_) throw std::logic_error("a device copy on a rank without a device (the cpu backend)");
    return *gpu_;
  }
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
  // ---- the local shards' lookup and update, host or device (rank_shards.cpp, rank_setup.cpp) ---
  // The executor-specific pieces: on a device (the cuda backend's GPU) the shard weights and
  // optimizer state live in its memory (the host copies of their DeviceBuffers are not kept
  // current), and the lookup, the row optimizer and the MLP layers run there.
  static std::unique_ptr<DeviceAllocator> make_allocator(Shared& sh, int rank);
  static const detail::RankDevice* gpu_of(const Shared& sh, int rank) {
    return sh.gpus.empty() ? nullptr : sh.gpus[static_cast<size_t>(rank)].get();
  }
  // After the shard's upload (setup): its lookup / update plan built on the device now
  // (RankDevice::prepare_shard), and the host copies of its weights and optimizer state
  // released - the host does not read them until the end (keep_tables restores the weights'),
  // so a GPU plan needs no host memory of the same size (issue 14: no host mirror).
  void prepare_on_gpu(LocalShard& ls) {
    if (!gpu_) return;
    if (ls.s.num_cols > 0) gpu_->prepare_encoded_shard(ls.s.num_rows, ls.s.num_cols, ls.data_type);
    ls.weights.release_host_copy();
    ls.momentum1.release_host_copy();
    ls.momentum2.release_host_copy();
    ls.packed.release_host_copy();  // reduced-precision rows and state (data_type, state_type)
    ls.packed_state1.release_host_copy();
    ls.packed_state2.release_host_copy();
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
  // The per-call path of a dense part that is not resident (DCN-v2, or "dense": null's fixed
  // projection): its fully connected layers, loss and SGD step on the device, each call with its
  // inputs and parameters copied to the GPU and its outputs back (DCN's cross layers and the
  // fixed projection stay on the host). A dot / cat dense part is resident instead
  // (DenseModel::make_resident on dense_device_, setup).
  void dense_layers_on_gpu();
  /// pooled_lookup of one local shard into `out` (n_bags x cols; ids indexed by `off`). A shard
  /// in host memory gathers the ids' rows itself (HostRowStore::gather), unless `gathered` (the
  /// rows one gather of the batch fetched for all the shard's slots, lookup(Inflight&)) is given
  /// with `gathered_ids`: ids[off[0] + i]'s row in it, for i < off[n_bags] - off[0]. On a
  /// device the rows are written to out's device memory and copied to its host copy unless
  /// !rows_to_host (a table_wise / column_wise slot whose output dist runs on the device).
  /// `dev` (the device input dist's permuted ids of a slot, a shard in device memory only): the
  /// bags' ids and offsets are read there, nothing copied; ids / off are then unused.
  struct DeviceIds {
    const int64_t* ids = nullptr;      ///< device memory, the slot's ids
    const int64_t* offsets = nullptr;  ///< device memory, n_bags + 1 from 0
    int64_t num_ids = 0;
  };
  void shard_lookup(LocalShard& ls, const int64_t* ids, const int64_t* off, int64_t n_bags, const float* scale,
                    DeviceBuffer<float>& out, DeviceBuffer<float>* gathered = nullptr,
                    const int64_t* gathered_ids = nullptr, bool rows_to_host = true, const DeviceIds* dev = nullptr);
  /// lookup(table, shard, ...) with shard_lookup's `gathered` rows (nullptr: none), `rows_to_host` and `dev`.
  void slot_lookup(int table, int shard_index, const int64_t* ids, const int64_t* off, int64_t n_bags,
                   const float* scale, DeviceBuffer<float>& out, DeviceBuffer<float>* gathered,
                   const int64_t* gathered_ids, bool rows_to_host = true, const DeviceIds* dev = nullptr);
  /// apply_row_optimizer of one local shard.
  void shard_update(LocalShard& ls, int64_t iteration, const SparseGrad& g);
  /// On the device (gpu_): apply_row_optimizer of g's rows of a rows x cols table whose weights
  /// and state are device memory (RankDevice::update with the rows x cols plan; g on the host).
  void device_update(int64_t iteration, float* weights, float* momentum1, float* momentum2, int64_t rows, int64_t cols,
                     const SparseGrad& g);
  /// Whether the embedding backward of `ls` runs on the device from the pooled-output
  /// gradients (device_accumulate_update): on a device, fp32 rows and state, device placement,
  /// not factorized (the others build their SparseGrad on the host: reduced precision, host
  /// tables, low-rank factors and the modules that apply their shards' gradients themselves).
  bool accumulates_on_device(const LocalShard& ls) const {
    return gpu_ != nullptr && !ls.host && ls.low_rank_dim == 0 && ls.data_type == TableDataType::fp32 &&
           ls.state_type == OptimizerStateType::fp32 && ls.s.num_cols > 0;
  }
  /// On the device (issue 14): the slots `ks` of b that read shard ls (their ids, offsets,
  /// scales and pooled-output gradients) packed into one buffer and copied to the device once,
  /// then RankDevice::accumulate_update (accumulation and row optimizer there) with the shard's
  /// count of distinct rows written to *d_count (device memory; the caller reads every shard's
  /// count with one copy after the loop, which does not wait: defer_counts). Slots whose
  /// gradients the gradient dist left on the
  /// device (slot_grad_on_device) are copied there device to device: only ids, offsets and
  /// scales cross. Bit-equal to accumulate_sparse_grad per slot,
  /// merge_sparse_grads and apply_row_optimizer.
  void device_accumulate_update(LocalShard& ls, const std::vector<size_t>& ks, Inflight& b, int64_t iteration,
                                int64_t* d_count);
  /// device_accumulate_update of a shard read by local slots `ks` whose ids and offsets the
  /// device input dist left on the device (Inflight::kjt_dev, !slot_host[k]): one slot's are read
  /// where kjt_permute wrote them; several slots' are concatenated there (RankDevice::concat_bags)
  /// into the block the host path packs. The gradients are read or copied where the gradient dist
  /// left them (slot_grad_on_device); only the scales (mean pooling) and host gradients cross, in
  /// one copy.
  void device_accumulate_update_from_device_ids(LocalShard& ls, const std::vector<size_t>& ks, Inflight& b,
                                                int64_t iteration, int64_t* d_count);
  /// On the device: low_rank_backward of a factorized shard (RankDevice::low_rank_backward from
  /// A and B there); returns {dA, dB} on the host, as low_rank_backward does.
  std::pair<SparseGrad, SparseGrad> device_low_rank_backward(LocalShard& ls, const SparseGrad& g);
  /// On the device: A updated with da (num_rows x r plan), B with db (r x num_cols plan).
  void device_factor_update(LocalShard& ls, int64_t iteration, const SparseGrad& da, const SparseGrad& db);

  Shared& sh_;
  ShardingPlan plan_;  // the current plan (changes at a live rebalance)
  Layout layout_;      // of plan_
  const Layout& L_;
  int me_;
  // the last collectives of this rank's groups, Gloo or NCCL (comm/flight_recorder.h), and its dumps so far
  FlightRecorder flight_{me_, flight_recorder_default_capacity(), &sh_.tracer.clock()};
  std::atomic<int32_t> flight_dumps_{0};
  const detail::RankDevice* gpu_ = gpu_of(sh_, me_);  // nullptr on the cpu backend
  // the stores of host / host_cached shards move their rows through it (nullptr without gpu_)
  std::unique_ptr<HostCacheDevice> cache_device_ = gpu_ ? detail::host_cache_device(*gpu_) : nullptr;
  DeviceArena arena_;  // declared before every buffer it accounts, so it outlives them

 public:
  std::vector<LocalShard> shards;
  /// Per table with hot rows (Layout::hot_tables): this rank's replica of them, row h = the
  /// table's row Layout::hot_rows[table][h] (sharding/hot_rows.cpp trains it).
  std::map<int, LocalShard> hot_replicas;
  /// Per table: ids of its hot rows this rank kept off the input dist in measured steps.
  std::vector<int64_t> hot_ids;

 private:
  DenseModel dense_;
  std::unique_ptr<CommWorker> comm_;
  std::unique_ptr<Collectives> world_, node_, cross_;
  std::unique_ptr<ProcessGroup> setup_group_;  // wait_for_every_rank_set_up's group
  std::vector<std::unique_ptr<sharding::EmbeddingSharding>> shardings_ = sharding::embedding_shardings(L_);
  int64_t comm_step_ = 0;  // the step of the job the comm worker runs (written and read on the comm thread)
  DeviceBuffer<float> dense_params_;  // the dense part's parameters + gradients (resident: their device copy)
  // with gpu_ and a dot / cat dense part: the device the dense part is resident on (setup)
  std::unique_ptr<RankDenseDevice> dense_device_;
  std::vector<int64_t> counter_base_;
  /// With the device input dist: bucketize's slot list (every rank's slots, rank 0's first) in
  /// device memory outside the allocator (RankDevice::scratch_alloc), copied once per plan - at
  /// the first bucketize_on_device, and again when the list changes (a live rebalance) - and
  /// bucket_slots_host_, the list it holds. Freed at teardown.
  std::shared_ptr<void> bucket_slots_dev_;
  std::vector<BucketSlot> bucket_slots_host_;
  std::atomic<int64_t> current_step_{0};
  std::atomic<int64_t> step_start_ns_{-1};  // step_in_progress_start_ns
  double last_loss_ = 0;
  std::map<std::pair<int, int>, sessions::LoadCounter> load_;  // this step's, by (table, shard index)
  // The semi_sync pipeline's fill in a run without warm-up (tester49 F4): measured step 0 looks
  // up batch 0 and, as every step does, the next batch; batch 0's lookup is what a warm-up step
  // holds in a run with one, so its counters go to step -1 (no step counts it), not step 0, whose
  // ids were two batches'. fill_lookup_: lookup(Inflight&) is running that lookup.
  std::map<std::pair<int, int>, sessions::LoadCounter> fill_load_;
  bool fill_lookup_ = false;
  // Likewise its collectives (trace50): in a run without warm-up, the phases only iteration 0
  // runs (program/pipeline_fill.h pipeline_fill_phase: sparse_dist's start_batch 0, semi_sync's start_batch 0, lookup 0
  // and start_batch 1) start the batches that a warm-up step would have started; their comm
  // spans and collective records go to step -1, so measured step 0 holds the collectives of a
  // steady step (semi_sync's step 0 held three batches' input dists and two output dists).
  // fill_phase_: the compute worker runs such a phase (fill_phase_live_: the same, for the record
  // observer: NCCL's records come when the work is waited for, on the compute worker too);
  // comm_fill_: the comm worker runs one of its jobs (gloo and the intra-device communicator
  // record on that thread).
  bool fill_phase_ = false;
  std::atomic<bool> fill_phase_live_{false};
  std::atomic<bool> comm_fill_{false};
  std::atomic<int64_t> fill_bytes_sent_{0}, fill_bytes_received_{0};  // the fill's records' bytes
  IdHistogram id_histogram_{sh_.spec};  // ids over row buckets, measured steps
  // the session's id histogram: the totals so far of the batches looked up in counted steps, and
  // the buckets those lookups changed in this step, written with the step's records (tester49 F16)
  IdHistogram histogram_written_ = id_histogram_.zeroed();
  std::vector<sessions::IdHistogramBucket> histogram_pending_;
  // whether measured step `step` is one of the pipeline's drain steps, which `stats` leaves out of
  // every count: the last pipeline_drain_steps of the planned steps, when there are more
  // (sessions/analysis/counted_steps.h drain_steps_left_out)
  bool drain_step(int64_t step) const;
  int64_t step_ = 0;        // the step being run (spans, load counters)
  bool measured_ = false;   // it is a measured step (not warmup)
  std::map<int64_t, std::unique_ptr<Inflight>> inflight_;  // batches started, by iteration
  std::map<int, Program> programs_;                         // by place in the run (program_of)
  // the step being interpreted: the queued comm ops' futures by op id, the batch whose op runs,
  // and the ops queued one after another in the program (a batch's input dist, its output
  // dist), not yet handed to the comm worker: they run there as one job, in order, so one that
  // fails ends the job and the rest do not run (flush_queued), the last one's id
  std::vector<std::shared_future<void>> op_done_;
  Inflight* current_ = nullptr;
  std::vector<std::pair<int, std::function<void()>>> pending_;
  Inflight* pending_batch_ = nullptr;
  int last_queued_ = -2;
  /// Hands the pending queued ops to the comm worker as one job; their futures go to op_done_
  /// and to their batch's queued ops. Nothing when none is pending.
  void flush_queued();
  bool stop_ = false;  // the step's cancel vote (dense_optimizer)
  // DDP buckets of the dense gradients: [begin, end) in parameter order, in launch order (the
  // last always exists and carries the loss) and the reduce buffer
  std::vector<std::pair<int64_t, int64_t>> buckets_;
  std::vector<float> red_;
  /// Queues bucket k's all-reduce (program op `op`) on the comm worker.
  void launch_bucket(size_t k, int64_t step, int op);
  uint64_t last_layout_ = 0;                 // hash of the last snapshot's layout
  int64_t memory_step_ = std::numeric_limits<int64_t>::min();  // the step of the last counters written
  /// The allocator history since the last flush and the counters of `step` into the session.
  void record_counters(int64_t step);
  std::vector<sessions::MemoryEvent> mem_events_;  // allocator actions since the last flush

 public:
  /// Memory counters of the step, and a snapshot when the layout changed (or `force`, at an
  /// OOM). Nothing without a session.
  void record_memory(int64_t step, const char* reason, bool force);
  /// After a failed run: the counts still pending taken if the device can (else the held
  /// records keep 0 distinct rows for those shards) and the held records written. Never throws.
  void write_held_records_at_failure() noexcept;
  /// After a failed run (this rank's error or another's): the counters and the allocator
  /// history of the step the rank was in, unless they were written (at the step's end or at its
  /// OOM). Without them a rank that held its weights when another rank ran out of memory in the
  /// warm-up had no counter at all, and the summary read "peak reserved 0 B" for it.
  void record_memory_at_failure();
  /// Writes this rank's collective flight recorder into the session as its next dump, with
  /// `reason`; nothing without a session or before the rank's first collective. Any thread.
  void dump_flight_recorder(const std::string& reason);

 public:
  void teardown() {
    arena_.allocator().set_listener(nullptr);  // buffers freed after the run are not history
    arena_.set_oom_handler(nullptr);
    bucket_slots_dev_.reset();  // on the rank's thread, bound to its device
    comm_.reset();
    cross_.reset();
    node_.reset();
    world_.reset();
    setup_group_.reset();
  }
  /// Closes this rank's connections in every group it belongs to (Collectives::close_connections)
  /// while keeping the groups and their counters: peers blocked on this rank fail at once.
  void close_connections() noexcept {
    for (auto* g : {world_.get(), node_.get(), cross_.get()})
      if (g) g->close_connections();
    if (setup_group_) setup_group_->close_connections();
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


}  // namespace embedscope::engine::threaded
