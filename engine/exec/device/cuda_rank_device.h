#pragma once
// The device side of the cuda executor (exec/threaded/ runs the step program; built with
// EMBEDSCOPE_WITH_CUDA, defined in cuda_executor.cpp of embedscope_engine_cuda). Internal.
//
// One CudaRankDevice per rank (several may share a GPU): its GPU, a compute stream for its
// kernels and copies, a comm stream for the intra-device communicator's copies, the
// allocator of its device memory, the lookup (tbe_forward) and the fused row optimizer
// (tbe_backward_update) on the shard weights held there, and the rank's NCCL collectives.

#include <cstdint>
#include <memory>
#include <mutex>

#include <cuda_runtime_api.h>

#include "comm/collectives.h"
#include "exec/device/rank_device.h"
#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/kernels/workspace.h"
#include "embedscope/engine/comm/nccl_comm.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::cuda {
class Blas;
class TbePlan;
}

namespace embedscope::engine::detail {

class CudaRankDevice final : public RankDevice {
 public:
  /// Creates the compute stream on `device` (the calling thread's current device becomes it).
  explicit CudaRankDevice(int device);
  ~CudaRankDevice() override;
  CudaRankDevice(const CudaRankDevice&) = delete;
  CudaRankDevice& operator=(const CudaRankDevice&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  /// "NVIDIA H200 (cuda:0)".
  std::string name() const override;
  /// cudaSetDevice(device()) on the calling thread.
  void bind_thread() const override;
  /// The allocator of this GPU for `config` (capacity capped at the GPU's free memory): caching
  /// and direct on cudaMalloc segments, expandable on CUDA VMM, cuda_async on a memory pool.
  std::unique_ptr<DeviceAllocator> make_allocator(AllocatorConfig config) const override;
  /// Builds the one-table TbePlan of a rows x cols shard (cudaMalloc + cudaMemcpy of its two
  /// descriptor arrays), once per shape: every later lookup / update reuses it.
  void prepare_shard(int64_t rows, int64_t cols) const override;
  /// Workspace growths (cudaMalloc, and the cudaFree of the block it replaces) and plans built
  /// in a step (not prepared at setup).
  DeviceSyncCalls sync_calls() const override;
  /// Copies on the compute stream; to_host waits for it (to_device returns once the host bytes
  /// are staged: the source may be reused at once).
  void to_device(void* dst, const void* src, int64_t bytes) const override;
  void to_host(void* dst, const void* src, int64_t bytes) const override;
  /// cudaMemcpyAsync on the compute stream into pinned staging (cudaMallocHost, grow-only:
  /// counted in sync_calls() when it grows); does not wait. take_deferred copies it out of the
  /// staging, after a cudaStreamSynchronize only when no wait began since (deferred_ready).
  void defer_to_host(const void* src, int64_t bytes) const override;
  bool deferred_ready() const override;
  void take_deferred(void* dst) const override;
  /// tbe_forward with the shard's prepared one-table plan and n_bags as the call's batch size
  /// (sum, the scale per bag), on the compute stream; does not wait (to_host does).
  void lookup(const float* weights, int64_t rows, int64_t cols, const int64_t* ids, const int64_t* offsets, int64_t n_bags,
              const float* scale, float* out) const override;
  /// tbe_backward_update with the shard's prepared plan and n one-row bags, its scratch from the
  /// rank's GrowOnlyWorkspace (grows in warm-up, then reused), on the compute stream; does not wait.
  void update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1, float* momentum2,
              int64_t rows, int64_t cols, const int64_t* row_ids, const int64_t* offsets, int64_t n,
              const float* values) const override;
  /// accumulate_sparse_grad_cuda (cuda_sparse_grad.h; its sort scratch from the rank's
  /// workspace, its output rows, one-row offsets and values from a second grow-only workspace),
  /// then tbe_backward_update over those num_ids one-row bags (the -1 rows past the count are
  /// skipped) with the shard's prepared plan; on the compute stream, does not wait.
  void accumulate_update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1,
                         float* momentum2, int64_t rows, int64_t cols, const SparseGradInput& in,
                         int64_t* unique_count) const override;
  /// fp16 / bf16: the one-table TbePlan of that precision (as prepare_shard); int8 / int4: none.
  void prepare_encoded_shard(int64_t rows, int64_t cols, TableDataType type) const override;
  /// fp16 / bf16: tbe_forward with the shard's prepared plan of that precision; int8 / int4:
  /// tbe_forward_quantized; fp32: lookup. On the compute stream; does not wait.
  void lookup_encoded(TableDataType type, const uint8_t* rows, int64_t num_rows, int64_t cols, const int64_t* ids,
                      const int64_t* offsets, int64_t n_bags, const float* scale, float* out) const override;
  /// apply_row_optimizer_encoded_cuda (cuda_encoded_update.h) with its scratch (n x cols floats,
  /// and n x 2 floats of errors, reserved whether or not err asks for them, so that the workspace
  /// is sized by the warm-up steps) from the rank's GrowOnlyWorkspace, on the compute stream;
  /// waits only to read the errors back (err not null: measured steps).
  void update_encoded(const OptimizerSpec& opt, int64_t iteration, const EncodedShardView& shard,
                      const int64_t* row_ids, int64_t n, const float* values, QuantError* err) const override;
  /// linear_forward_cuda / linear_backward_cuda (cuBLAS) on the compute stream; do not wait
  /// (the outputs reach the host through to_host, which waits).
  void linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, bool relu,
                      float* y) const override;
  void linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y, bool relu,
                       float* dy, float* dw, float* db, float* dx) const override;
  /// bce_with_logits_cuda on the compute stream into a one-double buffer of the device (made at
  /// construction: no allocation in the step), then the loss copied back (waits for the stream).
  double bce_loss(int64_t B, const float* logits, const float* labels, float* dlogits) const override;
  /// sgd_step_cuda on the compute stream; does not wait.
  void sgd_step(int64_t n, float lr, const float* grad, float* params) const override;
  /// dot_interaction_forward_cuda / dot_interaction_backward_cuda on the compute stream; do not wait.
  void dot_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) const override;
  void dot_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) const override;
  /// cudaMemcpyAsync device to device on the compute stream; does not wait.
  void copy_on_device(void* dst, const void* src, int64_t bytes) const override;
  /// cudaMemcpy2DAsync on the compute stream (cudaMemcpyHostToDevice / DeviceToHost /
  /// DeviceToDevice by `kind`); device_to_host then waits for the stream (cudaStreamSynchronize).
  void copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes, int64_t rows,
               CopyKind kind) const override;
  /// scale_copy_2d_cuda on the compute stream; does not wait.
  void scale_copy_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                     float s) const override;
  /// add_scale_rows_2d_cuda / scale_copy_rows_2d_cuda on the compute stream; do not wait.
  void add_scale_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                         int64_t dst_stride, const float* row_scale, bool accumulate) const override;
  void scale_copy_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                          int64_t dst_stride, float s, const float* row_scale) const override;
  /// cudaMallocAsync / cudaFreeAsync on the compute stream.
  void* scratch_alloc(int64_t bytes) const override;
  void scratch_free(void* p) const noexcept override;
  /// bucketize_kjt_cuda on the compute stream, its scratch from the rank's workspace (grow-only:
  /// no allocation once warm); waits for it (its 8-byte count read back, counted; the wait too).
  /// Without device_slots the slot list is copied to the device first (counted).
  int64_t bucketize(const int64_t* values, const int64_t* offsets, int64_t num_features, int64_t batch_size,
                    std::span<const BucketSlot> slots, int64_t* lengths, int64_t* ids, int64_t ids_capacity,
                    int64_t* splits, const BucketSlot* device_slots = nullptr) const override;
  /// kjt_permute_cuda on the compute stream, scratch from the backward's workspace; does not wait.
  void kjt_permute(int64_t W, int64_t P, int64_t B, const int64_t* lengths_in, const int64_t* ids_in, int64_t num_ids,
                   int64_t* ids_out, int64_t* offsets_out) const override;
  /// concat_bags_cuda (cuda_bag_concat.h) on the compute stream; no scratch, does not wait.
  void concat_bags(std::span<const BagPart> parts, int64_t bags_per_part, int64_t* ids_out,
                   int64_t* offsets_out) const override;
  /// tbe_forward of A (its prepared rows x r plan) into p, then low_rank_project_cuda into out;
  /// on the compute stream, does not wait.
  void low_rank_lookup(const float* a, int64_t rows, int64_t r, const float* b, int64_t dim, const int64_t* ids,
                       const int64_t* offsets, int64_t n_bags, const float* scale, float* p, float* out) const override;
  /// low_rank_backward_cuda on the compute stream; does not wait.
  void low_rank_backward(const float* a, int64_t r, const float* b, int64_t dim, const int64_t* row_ids, int64_t n,
                         const float* g, float* da, float* db) const override;
  /// cudaHostRegister (mapped, portable) of the pages of [host, host + bytes) not already
  /// pinned by an earlier call (a process-wide count per page: small tables share pages, and a
  /// page registered twice is an error to CUDA); returns `host`, the device pointer of mapped
  /// memory under unified addressing (refused with std::runtime_error where the device cannot
  /// use host pointers of registered memory). Throws std::runtime_error naming `what` and bytes.
  void* pin_host(void* host, int64_t bytes, const std::string& what) const override;
  /// Drops the pages' counts; cudaHostUnregister of a registration none of whose pages are in use.
  void unpin_host(void* host, int64_t bytes) const noexcept override;
  /// copy_rows_cuda on the compute stream; with `wait`, then cudaStreamSynchronize.
  void copy_rows(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows, float* dst,
                 float* dst_alt, const int64_t* dst_rows, bool wait) const override;
  /// The rank's comm stream (the intra-device communicator's copies and reductions).
  cudaStream_t comm_stream() const { return comm_stream_; }
  /// Staging for the intra-device communicator: cudaMallocAsync / cudaFreeAsync on the comm
  /// stream (no device-wide synchronization, as cudaFree would make).
  void* comm_alloc(int64_t bytes) const override;
  void comm_free(void* p) const noexcept override;
  /// cudaMemcpyAsync on the comm stream; comm_to_host waits for it.
  void comm_to_device(void* dst, const void* src, int64_t bytes) const override;
  void comm_to_host(void* dst, const void* src, int64_t bytes) const override;
  /// cudaMemcpyAsync device to device (another rank's staging on this GPU) on the comm stream.
  void comm_copy(void* dst, const void* src, int64_t bytes) const override;
  /// add_f32_cuda (cuda_reduce.h) on the comm stream.
  void comm_add(float* dst, const float* src, int64_t n) const override;
  /// cudaStreamSynchronize(comm stream).
  void comm_sync() const override;
  /// cudaMemsetAsync on the comm stream.
  void comm_zero(void* dst, int64_t bytes) const override;
  /// An event recorded on the compute stream, cudaStreamWaitEvent on the comm stream.
  void comm_wait_compute() const override;

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  std::unique_ptr<cuda::Blas> blas_;  // on stream_
  std::unique_ptr<ShardPlanCache<cuda::TbePlan>> plans_;
  std::unique_ptr<ShardPlanCache<cuda::TbePlan>> fp16_plans_, bf16_plans_;  // fp16 / bf16 shards' lookups
  mutable std::mutex workspace_mutex_;             // reserve() may grow it: one op at a time
  std::unique_ptr<GrowOnlyWorkspace> workspace_;   // tbe_backward_update's scratch, on stream_
  std::unique_ptr<GrowOnlyWorkspace> grad_workspace_;  // accumulate_update's gradient rows, on stream_
  double* loss_ = nullptr;  // bce_loss's result (cudaMalloc at construction), on stream_
  // defer_to_host's pinned staging (grow-only), the bytes pending (-1: none) and the waits begun
  // when it was queued (RankDevice::wait_mark)
  mutable std::mutex deferred_mutex_;
  std::unique_ptr<GrowOnlyWorkspace> deferred_staging_;
  mutable int64_t deferred_bytes_ = -1;
  mutable int64_t deferred_mark_ = 0;
  // cudaStreamSynchronize(stream_), counted as a wait (begin_wait / end_wait); throws CudaError
  // naming `what`
  void wait_stream(const char* what) const;
};

/// Collectives on host buffers over an NCCL communicator: each call copies the send buffer to
/// a device staging buffer (outside the rank's allocator), runs the collective on the
/// communicator's comm stream after the copy (an event orders them), waits for it and copies
/// the result back. fp32 qcomms only (the spec refuses others on the cuda backend).
/// all_to_all_v_device: no staging; ncclSend / ncclRecv on the rank's device pointers, after the
/// work `device` (the rank's device, outliving the result) issued so far on its compute stream
/// (comm_wait_compute + comm_sync on the comm worker's thread). `device` null: that variant
/// throws std::logic_error.
std::unique_ptr<Collectives> nccl_collectives(NcclComm& comm, const IntraDeviceOps* device = nullptr);

}  // namespace embedscope::engine::detail
