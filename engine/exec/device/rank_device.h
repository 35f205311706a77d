#pragma once
// The device of one rank of the cuda executor, as the threaded executor (exec/threaded/) uses it: its
// memory (an allocator whose blocks the host cannot touch: DeviceBuffer keeps host copies),
// copies (2-D ones too), the shard lookup and row optimizer, and the MLP layers (the resident
// dense part's kernels: exec/threaded/rank_dense_device.h). Implementations: the GPU
// (CudaRankDevice, cuda_executor.h) and host memory standing in for one
// (host_rank_device: TrainerOptions::emulate_device, so the device path is tested without a
// GPU). Internal to the engine.

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "comm/local/local_comm.h"
#include "exec/device/shard_plan_cache.h"
#include "embedscope/engine/input/bucketize.h"
#include "embedscope/engine/kernels/bag_concat_core.h"
#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/quant/quant.h"
#include "embedscope/engine/quant/row_codec.h"
#include "embedscope/engine/model/host_cache.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::detail {

/// A shard whose rows or optimizer state are stored in reduced precision (LocalShard: data_type,
/// state_type), in device memory: `rows` num_rows x row_bytes(data_type, cols) bytes
/// (quant/row_codec.h layouts); state1 / state2 the optimizer state (FBGEMM layouts) as fp32
/// floats (state_type fp32) or 2-byte fp16 / bf16 codes, nullptr where the optimizer has none;
/// `sr` the stochastic-rounding key of the shard, nullptr to round to nearest.
struct EncodedShardView {
  TableDataType data_type = TableDataType::fp32;
  OptimizerStateType state_type = OptimizerStateType::fp32;
  uint8_t* rows = nullptr;
  int64_t num_rows = 0;
  int64_t cols = 0;
  void* state1 = nullptr;
  void* state2 = nullptr;
  const StochasticRoundingKey* sr = nullptr;
};

/// One part of RankDevice::concat_bags: a slot's ids and offsets on the device.
using BagPart = bag_concat_core::Part;

/// Host<->device copies and their bytes, counted by kind (the two totals below).
struct CopyTotals {
  int64_t host_to_device = 0;        ///< copies
  int64_t device_to_host = 0;        ///< copies
  int64_t host_to_device_bytes = 0;  ///< bytes
  int64_t device_to_host_bytes = 0;  ///< bytes
};

/// The intra-device communicator's copies and reduction (IntraDeviceOps, comm/local/local_comm.h)
/// are part of every device: collectives between ranks placed on one device run on them.
class RankDevice : public IntraDeviceOps {
 public:
  /// Every host<->device copy made through this device so far, with its bytes: to_device,
  /// to_host, copy_2d across host and device, comm_to_device / comm_to_host (the intra-device
  /// communicator's staging of host buffers) and bce_loss's loss (8 bytes); calls of 0 bytes not
  /// counted. Thread-safe (the rank's thread and its comm worker both copy). NCCL's staging
  /// (nccl_collectives) does not go through the device and is not counted. Rank::main adds a
  /// measured step's increase to step_copy_totals().
  virtual CopyTotals copies() const {
    return {h2d_.load(), d2h_.load(), h2d_bytes_.load(), d2h_bytes_.load()};
  }
  ~RankDevice() override = default;
  /// What the session's ranks table shows, e.g. "NVIDIA H200 (cuda:0)".
  virtual std::string name() const = 0;
  /// Makes the device current on the calling thread (cudaSetDevice). Every thread that issues the
  /// device's work (the rank's thread, its comm worker) calls it first.
  virtual void bind_thread() const = 0;
  /// The allocator of the device's memory for `config` (its capacity may be capped).
  virtual std::unique_ptr<DeviceAllocator> make_allocator(AllocatorConfig config) const = 0;
  /// Host to device; in order with the device's work.
  virtual void to_device(void* dst, const void* src, int64_t bytes) const = 0;
  /// Device to host; returns when the bytes are there (a wait for the compute stream, counted
  /// in sync_calls().waits; nothing for bytes <= 0).
  virtual void to_host(void* dst, const void* src, int64_t bytes) const = 0;
  /// A device-to-host copy that does not wait: `bytes` of src (device memory) go to a host
  /// staging buffer of the device, in order with the device's work so far (on a GPU
  /// cudaMemcpyAsync on the compute stream into pinned memory of a grow-only block, whose growth
  /// counts in sync_calls() as a workspace's). Counted in copies() now. The bytes are read with
  /// take_deferred, which waits only when the host has not waited for the compute stream since
  /// (deferred_ready()): the embedding backward's distinct-row counts are read where the host
  /// waits anyway (the next step's first wait), not with a wait of their own. One at a time:
  /// throws std::logic_error while an earlier one is not taken, or for bytes < 0.
  virtual void defer_to_host(const void* src, int64_t bytes) const = 0;
  /// Whether the deferred copy is on the host: a wait for the compute stream (to_host,
  /// bucketize, ...) began after it was queued and has ended. false when none is pending.
  virtual bool deferred_ready() const = 0;
  /// The deferred copy's bytes into dst, which ends it; waits for the compute stream first
  /// unless deferred_ready() (that wait counted in sync_calls().waits). Throws std::logic_error
  /// when none is pending.
  virtual void take_deferred(void* dst) const = 0;
  /// Builds the lookup / update plan of a shard of rows x cols (ShardPlanCache) at setup, so
  /// that no step builds one; the rank calls it for every shard it holds before the first step.
  virtual void prepare_shard(int64_t rows, int64_t cols) const = 0;
  /// The device-synchronizing calls made inside lookup / update / the linear layers so far
  /// (DeviceSyncCalls: scratch cudaMalloc / cudaFree, plans built in a step). After warm-up a
  /// step adds none (Rank::main records the steps' increments: step_sync_call_totals). Its
  /// `waits`: every host wait for the compute stream so far - to_host, a copy_2d to the host,
  /// bce_loss's loss, bucketize's count, copy_rows with `wait`, update_encoded's errors and a
  /// take_deferred that had to wait (the comm worker's waits for the comm stream are not counted).
  virtual DeviceSyncCalls sync_calls() const = 0;
  /// pooled_lookup (kernels.h) of one shard: every pointer is device memory; offsets n_bags + 1
  /// from 0; out: n_bags x cols; scale: per bag or nullptr. Asynchronous on a GPU: ordered
  /// before the device's later work (to_host waits for it); the plan is the prepared one.
  virtual void lookup(const float* weights, int64_t rows, int64_t cols, const int64_t* ids, const int64_t* offsets,
                      int64_t n_bags, const float* scale, float* out) const = 0;
  /// apply_row_optimizer (kernels.h) to the rows of a sparse gradient: row_ids (n distinct local
  /// rows), offsets (0, 1, ..., n) and values (n x cols) are device memory, as are the weights
  /// and the optimizer state (FBGEMM layouts; nullptr where the optimizer has none).
  /// Asynchronous on a GPU, as lookup.
  virtual void update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1, float* momentum2,
                      int64_t rows, int64_t cols, const int64_t* row_ids, const int64_t* offsets, int64_t n,
                      const float* values) const = 0;
  /// The pooled-output gradients of one fp32 shard's slots, packed for accumulate_update: every
  /// pointer is device memory. `num_bags` bags, `bags_per_part` of them per slot (part), bag b
  /// reading ids[offsets[b] .. offsets[b + 1]) (offsets from 0, num_bags + 1 of them; num_ids =
  /// offsets[num_bags], also given here because the host knows it); grad num_bags x grad_stride
  /// floats; scale one float per bag, nullptr for 1.
  struct SparseGradInput {
    const int64_t* ids = nullptr;
    const int64_t* offsets = nullptr;
    int64_t num_bags = 0;
    int64_t bags_per_part = 1;
    int64_t num_ids = 0;
    const float* scale = nullptr;
    const float* grad = nullptr;
    int64_t grad_stride = 0;
  };
  /// accumulate_sparse_grad of each part + merge_sparse_grads of the parts (kernels.h), then
  /// apply_row_optimizer with the result, all on the device (issue 14: the gradient rows are
  /// never built on the host): summation in id, then part, then bag order, every product and sum
  /// rounded on its own (sparse_grad_core.h), so bit-equal to the CPU code. The number of
  /// distinct rows is written to *unique_count (one int64 of device memory; the caller reads it
  /// when it needs it). On a GPU accumulate_sparse_grad_cuda (scratch and output rows from the
  /// rank's grow-only workspaces) and tbe_backward_update with its one-row bags, on the compute
  /// stream, without waiting; the stand-in: sparse_grad_core::accumulate_sorted and
  /// apply_row_optimizer. Weights and state as update.
  virtual void accumulate_update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1,
                                 float* momentum2, int64_t rows, int64_t cols, const SparseGradInput& in,
                                 int64_t* unique_count) const = 0;
  /// prepare_shard for a shard stored as `type` (fp16 / bf16: the lookup plan of that precision;
  /// int8 / int4 need none; fp32 = prepare_shard).
  virtual void prepare_encoded_shard(int64_t rows, int64_t cols, TableDataType type) const = 0;
  /// pooled_lookup_encoded (kernels.h) of one shard stored as `type`: `rows` is device memory
  /// (rows x row_bytes(type, cols) bytes), the rest as lookup. Rows decoded and summed in fp32 in
  /// id order (on a GPU tbe_forward with an fp16 / bf16 plan, tbe_forward_quantized for int8 /
  /// int4: bit-equal to the CPU kernel). Asynchronous on a GPU, as lookup.
  virtual void lookup_encoded(TableDataType type, const uint8_t* rows, int64_t num_rows, int64_t cols, const int64_t* ids,
                              const int64_t* offsets, int64_t n_bags, const float* scale, float* out) const = 0;
  /// apply_row_optimizer_encoded (kernels.h) to the n distinct local rows row_ids[0, n) with
  /// gradients values (n x cols) of a shard stored as `shard` says (all device memory): decode,
  /// the fp32 formula, encode (to nearest, or stochastically with shard.sr), bit-equal to the CPU
  /// kernel (on a GPU apply_row_optimizer_encoded_cuda). The encoding error of the updated rows
  /// is merged into *err when err is not null (then the call waits for the device; fp32 rows: not
  /// measured, as on the CPU). Asynchronous on a GPU otherwise, as update.
  virtual void update_encoded(const OptimizerSpec& opt, int64_t iteration, const EncodedShardView& shard,
                              const int64_t* row_ids, int64_t n, const float* values, QuantError* err) const = 0;
  /// linear_forward / linear_backward (dense.h) on device memory; asynchronous on a GPU, as lookup.
  virtual void linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b,
                              bool relu, float* y) const = 0;
  virtual void linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y,
                               bool relu, float* dy, float* dw, float* db, float* dx) const = 0;
  /// bce_with_logits (dense.h) on device memory: logits, labels, dlogits are B floats there;
  /// returns the mean loss to the host (on a GPU bce_with_logits_cuda, then waits for the one
  /// double; dlogits stay on the device, ordered before later work).
  virtual double bce_loss(int64_t B, const float* logits, const float* labels, float* dlogits) const = 0;
  /// sgd_step (dense.h) on n parameters in device memory: params -= lr * grad; asynchronous on a
  /// GPU (sgd_step_cuda), as lookup.
  virtual void sgd_step(int64_t n, float lr, const float* grad, float* params) const = 0;
  /// dot_interaction_forward / dot_interaction_backward (dense.h) on device memory (x0: B x
  /// (F + 1) d0, r and dr: B x (d0 + (F + 1) F / 2), dx0 overwritten); asynchronous on a GPU
  /// (dot_interaction_forward_cuda / _backward_cuda), as lookup.
  virtual void dot_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) const = 0;
  virtual void dot_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) const = 0;
  /// Device to device, `bytes` from src to dst (both device memory), in order with the device's
  /// work (on a GPU cudaMemcpyAsync on the compute stream; does not wait). The cache of a
  /// host_cached table moves its hits and insertions with it (model/host_cache.h).
  virtual void copy_on_device(void* dst, const void* src, int64_t bytes) const = 0;
  /// The direction of a copy_2d.
  enum class CopyKind { host_to_device, device_to_host, device_to_device };
  /// A 2-D copy (cudaMemcpy2DAsync's semantics): `rows` rows of `width_bytes` bytes, row r from
  /// src + r * src_pitch to dst + r * dst_pitch (pitches in bytes, >= width_bytes). `kind` says
  /// which side is device memory. On a GPU cudaMemcpy2DAsync on the compute stream, in order
  /// with the device's work; device_to_host waits for it (the host may read dst on return), the
  /// others do not (host_to_device returns once the host bytes are staged). The stand-in: a loop
  /// of memcpy. Nothing for rows or width_bytes <= 0. Used by the resident dense part
  /// (model/dense_device.h) to scatter the pooled embeddings into the interaction input's
  /// columns and gather their gradients out.
  virtual void copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes,
                       int64_t rows, CopyKind kind) const = 0;
  /// dist_pack_core::scale_copy_2d (kernels/dist_pack_core.h) on device memory: `rows` rows of
  /// `width` floats, dst[r * dst_stride + c] = src[r * src_stride + c] * s (strides in floats).
  /// The packing of the table_wise / column_wise gradient dist on the device (the 1 / W of the
  /// global-batch mean fused in; sharding/pooled_all_to_all.cpp). On a GPU scale_copy_2d_cuda on
  /// the compute stream, asynchronous, as lookup; the stand-in: the core's host loop. Throws
  /// std::invalid_argument for a negative size or a stride below width.
  virtual void scale_copy_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                             int64_t dst_stride, float s) const = 0;
  /// dist_pack_core::add_scale_rows_2d (kernels/dist_pack_core.h) on device memory: `rows` rows of
  /// `width` floats of src added into dst ((accumulate ? dst : 0) + src), each row then times
  /// row_scale[r] (device memory; nullptr: none). The unpacking of the row_wise / table_row_wise
  /// output dist into the pooled output with the mean scaling (sharding/row_wise.cpp,
  /// table_row_wise.cpp). On a GPU add_scale_rows_2d_cuda on the compute stream, asynchronous;
  /// the stand-in: the core's loop. Throws std::invalid_argument for a negative size or a stride
  /// below width.
  virtual void add_scale_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                                 int64_t dst_stride, const float* row_scale, bool accumulate) const = 0;
  /// dist_pack_core::scale_copy_rows_2d on device memory: dst = (src * s) * row_scale[r] (no
  /// row_scale: src * s). The packing of the row_wise / table_row_wise gradient dist (1 / W and
  /// the mean scale fused in). GPU: scale_copy_rows_2d_cuda on the compute stream; as above.
  virtual void scale_copy_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                                  int64_t dst_stride, float s, const float* row_scale) const = 0;
  /// bucketize_kjt (input/bucketize.h) on device memory: values (offsets[num_features *
  /// batch_size] ids) and offsets (num_features * batch_size + 1, from 0) of the batch's KJT;
  /// `slots` from the host. Writes lengths (slots x batch_size), ids (slot-major, then bag, then
  /// input order; at most ids_capacity) and splits (per slot: its ids), all int64 device memory,
  /// and returns the number of ids written. The input dist on the device (issue 14,
  /// exec/threaded/rank_input.cpp). On a GPU bucketize_kjt_cuda on the compute stream, its
  /// scratch from the rank's grow-only workspace (no allocation once warm), which waits for it
  /// to read that number back (one 8-byte copy, counted in copies(), and one wait); the stand-in:
  /// bucketize_kjt, the host reference. `device_slots`: the same list already in device memory
  /// (the rank keeps it there across steps: it depends on the plan only), read there; nullptr:
  /// the call copies `slots` to the device itself (one copy, counted in copies(), on the
  /// stand-in too). Throws std::invalid_argument for a slot feature outside [0, num_features),
  /// std::length_error when the ids do not fit ids_capacity, and (the stand-in, which can read
  /// device memory) std::logic_error when device_slots differs from `slots`.
  virtual int64_t bucketize(const int64_t* values, const int64_t* offsets, int64_t num_features, int64_t batch_size,
                            std::span<const BucketSlot> slots, int64_t* lengths, int64_t* ids, int64_t ids_capacity,
                            int64_t* splits, const BucketSlot* device_slots = nullptr) const = 0;
  /// Device memory of `bytes` outside the rank's allocator, ordered on the compute stream (on a
  /// GPU cudaMallocAsync on it; the stand-in: host memory), nullptr for 0 bytes: the device input
  /// dist's send buffers, which replace the intra-device communicator's staging of the host
  /// input dist (outside the allocator too, so the memory estimate's replay is unchanged).
  /// Throws std::runtime_error (the GPU's) when it cannot be had.
  virtual void* scratch_alloc(int64_t bytes) const = 0;
  /// Frees a scratch_alloc block after the compute stream's work so far (cudaFreeAsync); the
  /// caller has waited for any other stream that read it. nullptr: nothing. Never throws.
  virtual void scratch_free(void* p) const noexcept = 0;
  /// kjt_permute_core::permute (kernels/kjt_permute_core.h) on device memory: the ids and lengths
  /// the input dist's all-to-alls received from W ranks for P local slots of B bags, regrouped
  /// per slot (ids_out: num_ids; offsets_out: P x (W * B + 1), each slot's from 0), which the
  /// lookup reads there. On a GPU kjt_permute_cuda on the compute stream (scratch from the
  /// rank's grow-only workspace), asynchronous, as lookup; the stand-in: permute(). Throws
  /// std::invalid_argument for a negative shape (the stand-in also for lengths that do not add
  /// up to num_ids).
  virtual void kjt_permute(int64_t W, int64_t P, int64_t B, const int64_t* lengths_in, const int64_t* ids_in,
                           int64_t num_ids, int64_t* ids_out, int64_t* offsets_out) const = 0;
  /// bag_concat_core::concat (kernels/bag_concat_core.h) on device memory: the parts' ids (each
  /// part's bags_per_part bags, its offsets from 0 - one slot's, as kjt_permute left them)
  /// concatenated into ids_out (the parts' num_ids together) and offsets_out (parts x
  /// bags_per_part + 1, from 0, each part's rebased by the ids before it): the ids and offsets
  /// accumulate_update reads for a shard that several local slots read. On a GPU
  /// concat_bags_cuda on the compute stream, asynchronous, as lookup; the stand-in: concat(),
  /// which also checks that each part's offsets run from 0 to its num_ids (std::invalid_argument
  /// otherwise; the GPU does not check). Throws std::invalid_argument for a negative size.
  virtual void concat_bags(std::span<const BagPart> parts, int64_t bags_per_part, int64_t* ids_out,
                           int64_t* offsets_out) const = 0;
  /// low_rank_pooled_lookup (kernels/low_rank.h) of a factorized shard on device memory: A
  /// (rows x r) looked up into p (n_bags x r: the scaled sums of A rows; the shard's prepared
  /// rows x r plan), then out = p B (B: r x dim; out: n_bags x dim). On a GPU tbe_forward and
  /// low_rank_project_cuda; asynchronous, as lookup.
  virtual void low_rank_lookup(const float* a, int64_t rows, int64_t r, const float* b, int64_t dim, const int64_t* ids,
                               const int64_t* offsets, int64_t n_bags, const float* scale, float* p, float* out) const = 0;
  /// low_rank_backward (kernels/low_rank.h) on device memory: from g (n x dim, the gradient of
  /// A's rows row_ids[0, n)) and A, B before their update, da (n x r) and db (r x dim, every row
  /// of B). On a GPU low_rank_backward_cuda; asynchronous, as lookup.
  virtual void low_rank_backward(const float* a, int64_t r, const float* b, int64_t dim, const int64_t* row_ids,
                                 int64_t n, const float* g, float* da, float* db) const = 0;
  /// Pins `bytes` of host memory at `host` (a table's host rows or optimizer state, allocated
  /// once at setup) for the device and returns the pointer the device's kernels use for it: on
  /// a GPU cudaHostRegister (mapped, portable; whole pages, a page already pinned by another
  /// call shared and counted) and the host pointer, which with unified addressing is the mapped
  /// device pointer (cudaDevAttrCanUseHostPointerForRegisteredMem, checked); on the host
  /// stand-in nothing is pinned and `host` is returned. Throws std::runtime_error naming `what`,
  /// the bytes and the CUDA error when the memory cannot be pinned (the caller refuses the run:
  /// model/host_cache.h). bytes <= 0: returns `host`, pins nothing.
  virtual void* pin_host(void* host, int64_t bytes, const std::string& what) const = 0;
  /// Ends a pin_host of `host` (the same bytes); the memory must outlive it. Never throws.
  virtual void unpin_host(void* host, int64_t bytes) const noexcept = 0;
  /// copy_rows (kernels/row_copy.h) on the device: every base is device memory or a pin_host
  /// pointer, the index arrays device memory. One kernel on a GPU (copy_rows_cuda on the compute
  /// stream, in order with its work); `wait`: returns when the rows are written (the host is to
  /// read host memory it wrote). Throws what copy_rows throws.
  virtual void copy_rows(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows,
                         float* dst, float* dst_alt, const int64_t* dst_rows, bool wait) const = 0;

 protected:
  /// Counts one copy of `bytes` (> 0) host to device (to_device) or back (copies()).
  void count_copy(bool to_device, int64_t bytes) const {
    if (bytes <= 0) return;
    (to_device ? h2d_ : d2h_).fetch_add(1);
    (to_device ? h2d_bytes_ : d2h_bytes_).fetch_add(bytes);
  }
  /// A host wait for the compute stream: begin_wait() right before blocking, end_wait(its
  /// ticket) once the stream's work is done. Counted in waits_made(); any copy queued on the
  /// stream before begin_wait is then on the host (waited_since).
  int64_t begin_wait() const { return wait_begun_.fetch_add(1) + 1; }
  void end_wait(int64_t ticket) const {
    int64_t done = wait_done_.load();
    while (done < ticket && !wait_done_.compare_exchange_weak(done, ticket)) {
    }
    waits_.fetch_add(1);
  }
  /// The waits begun so far: a deferred copy queued now is on the host once waited_since(mark).
  int64_t wait_mark() const { return wait_begun_.load(); }
  /// A wait that began after `mark` (wait_mark()) has ended.
  bool waited_since(int64_t mark) const { return wait_done_.load() > mark; }
  /// The waits ended so far (DeviceSyncCalls::waits).
  int64_t waits_made() const { return waits_.load(); }

 private:
  mutable std::atomic<int64_t> h2d_{0}, d2h_{0}, h2d_bytes_{0}, d2h_bytes_{0};
  // waits begun (each one's ticket), the largest ticket of an ended one, the waits ended
  mutable std::atomic<int64_t> wait_begun_{0}, wait_done_{0}, waits_{0};
};

/// The HostCacheDevice (model/host_cache.h) of a rank's device: its to_device / to_host /
/// copy_on_device / copy_rows / pin_host / update, so that a host / host_cached table's store
/// moves its rows through `device` (which outlives the result). Every copy it makes (to_device,
/// to_host, on_device, copy_rows) is counted in host_cache_copy_calls().
std::unique_ptr<HostCacheDevice> host_cache_device(const RankDevice& device);

/// The copies (HostCacheDevice to_device / to_host / on_device / copy_rows calls) that the
/// stores of host / host_cached tables made through host_cache_device adapters, process-wide,
/// since the process began (a test reads it before and after a run). Issue 16 / 14: per step a
/// constant (model/host_cache.h), whatever the number of rows.
int64_t host_cache_copy_calls();

/// Host memory standing in for GPU `device` (the emulated device the rank is placed on,
/// exec/gpu_placement.h; its name() is "host memory (emulated device <device>)"): the allocators
/// on host segments, copies as memcpy, the CPU kernels (pooled_lookup, apply_row_optimizer,
/// linear_forward / linear_backward), the communicator's staging in host memory
/// (host_intra_device_ops: memcpy, a CPU loop for the reduction). As a GPU's current device is
/// per thread, every op but the allocator's (copies, kernels, the communicator's) throws
/// std::logic_error naming the call when the calling thread has not called bind_thread() on this
/// device (or bound another one since): the rank's thread and its comm worker must both bind.
std::unique_ptr<RankDevice> host_rank_device(int device = 0);

/// The device-synchronizing calls (DeviceSyncCalls::total) the steps of this process's runs
/// added, over every rank's device: `warmup` in warm-up steps (the plans and workspaces may
/// still grow there), `measured` in measured steps (0 when every step reuses what warm-up set
/// up: the check of issue 14's "no cudaMalloc / cudaFree in the step"); `warmup_waits` and
/// `measured_waits` the same for the host's waits for the compute stream (DeviceSyncCalls::waits).
/// Process-wide running totals: a test reads them before and after a run.
struct StepSyncCallTotals {
  int64_t warmup = 0;
  int64_t measured = 0;
  int64_t warmup_waits = 0;
  int64_t measured_waits = 0;
};
/// Adds `calls` and `waits` to the warm-up or the measured totals (Rank::main, after each step).
void add_step_sync_calls(bool measured, int64_t calls, int64_t waits = 0);
StepSyncCallTotals step_sync_call_totals();

/// The host<->device copies a resident dense part (model/dense_device.h) made in the measured
/// steps of this process's runs, over every rank (counted by the rank's DenseDevice,
/// exec/threaded/rank_dense_device.h: each copy / copy_2d call across host and device is one;
/// the device's bce_loss counts one device-to-host copy of its 8-byte loss; device-to-device
/// copies are not counted). Process-wide running totals: a test reads them before and after a run.
using DenseCopyTotals = CopyTotals;
/// The host<->device copies of the embedding update on the device path in the measured steps of
/// this process's runs, over every rank (Rank::device_update, Rank::device_accumulate_updates):
/// each to_device / to_host / defer_to_host call one. Before issue 14's device accumulation every
/// shard update copied its gradient rows, offsets and values (3 copies); now one packed copy per
/// shard and one read of the steps' distinct-row counts (deferred: no wait of its own).
/// Process-wide running totals (a test reads them before and after a run).
using SparseGradCopyTotals = CopyTotals;
/// Adds copies (Rank, in measured steps).
void add_sparse_grad_copies(const SparseGradCopyTotals& c);
SparseGradCopyTotals sparse_grad_copy_totals();

/// Adds one rank's measured step's copies (Rank::main, after each measured step).
void add_dense_copies(const DenseCopyTotals& step);
DenseCopyTotals dense_copy_totals();

/// Every host<->device copy the ranks' devices made (RankDevice::copies: the lookups' ids and
/// rows, the output / gradient dists, the dense part, the embedding update, the intra-device
/// communicator's staging) in the measured steps of this process's runs, over every rank.
/// Process-wide running totals (a test reads them before and after a run); Rank::main adds each
/// measured step's increase of its device's copies(). Issue 14: the table_wise / column_wise
/// dists on the device remove the looked-up rows' copies back, the pooled embeddings' copies in,
/// their gradients' copies out, the gradients' copies in and the communicator's staging.
void add_step_copies(const CopyTotals& step);
CopyTotals step_copy_totals();

}  // namespace embedscope::engine::detail
