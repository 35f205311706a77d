#include "exec/device/cuda_rank_device.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unistd.h>
#include <utility>
#include <vector>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "embedscope/engine/kernels/cuda_dense_ops.h"
#include "embedscope/engine/kernels/cuda_encoded_update.h"
#include "embedscope/engine/kernels/cuda_sparse_grad.h"
#include "embedscope/engine/kernels/cuda_kernels.h"
#include "embedscope/engine/kernels/cuda_low_rank.h"
#include "embedscope/engine/kernels/cuda_row_copy.h"
#include "embedscope/engine/kernels/cuda_reduce.h"
#include "embedscope/engine/kernels/cuda_kjt.h"
#include "embedscope/engine/kernels/cuda_bag_concat.h"
#include "embedscope/engine/memory/cuda_memory.h"
#include "embedscope/profiler/device/cuda_device.h"

namespace embedscope::engine::detail {

namespace {

void check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess)
    throw cuda::CudaError(fmt::format("{} failed: {} ({})", call, cudaGetErrorName(rc), cudaGetErrorString(rc)));
}

// The single-table TBE plan of a shard of rows x cols values of `precision` (its batch size is
// each call's argument: 0 here).
std::unique_ptr<cuda::TbePlan> shard_plan_of(const ShardShape& shape, cuda::WeightsPrecision precision) {
  cuda::TbeTable t;
  t.num_rows = shape.rows;
  t.dim = shape.cols;
  t.out_stride = shape.cols;
  t.pooling = 0;  // sum; the mean scale comes as a per-bag scale, as pooled_lookup takes it
  return std::make_unique<cuda::TbePlan>(std::vector<cuda::TbeTable>{t}, 0, precision);
}
std::unique_ptr<cuda::TbePlan> shard_plan(const ShardShape& shape) {
  return shard_plan_of(shape, cuda::WeightsPrecision::fp32);
}

}  // namespace

CudaRankDevice::CudaRankDevice(int device) : device_(device) {
  bind_thread();
  // a blocking stream: it waits for the legacy default stream, on which TbePlan uploads its tables
  check(cudaStreamCreate(&stream_), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (comm)");
  blas_ = std::make_unique<cuda::Blas>(stream_);
  plans_ = std::make_unique<ShardPlanCache<cuda::TbePlan>>(shard_plan);
  fp16_plans_ = std::make_unique<ShardPlanCache<cuda::TbePlan>>(
      [](const ShardShape& s) { return shard_plan_of(s, cuda::WeightsPrecision::fp16); });
  bf16_plans_ = std::make_unique<ShardPlanCache<cuda::TbePlan>>(
      [](const ShardShape& s) { return shard_plan_of(s, cuda::WeightsPrecision::bf16); });
  workspace_ = std::make_unique<GrowOnlyWorkspace>(
      [](size_t bytes) {
        void* p = nullptr;
        check(cudaMalloc(&p, bytes), "cudaMalloc (TBE backward workspace)");
        return p;
      },
      [](void* p) { cudaFree(p); });  // synchronizes the device: the stream's work on the block is done
  grad_workspace_ = std::make_unique<GrowOnlyWorkspace>(
      [](size_t bytes) {
        void* p = nullptr;
        check(cudaMalloc(&p, bytes), "cudaMalloc (sparse gradient workspace)");
        return p;
      },
      [](void* p) { cudaFree(p); });
  check(cudaMalloc(reinterpret_cast<void**>(&loss_), sizeof(double)), "cudaMalloc (loss)");
  deferred_staging_ = std::make_unique<GrowOnlyWorkspace>(
      [](size_t bytes) {
        void* p = nullptr;
        check(cudaMallocHost(&p, bytes), "cudaMallocHost (deferred copy staging)");
        return p;
      },
      [](void* p) { cudaFreeHost(p); });  // only when no deferred copy is pending (defer_to_host)
}

CudaRankDevice::~CudaRankDevice() {
  cudaSetDevice(device_);
  blas_.reset();
  if (stream_) cudaStreamSynchronize(stream_);  // before the plans and the workspace go
  plans_.reset();
  fp16_plans_.reset();
  bf16_plans_.reset();
  workspace_.reset();
  grad_workspace_.reset();
  deferred_staging_.reset();
  if (loss_) cudaFree(loss_);
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  if (comm_stream_) {
    cudaStreamSynchronize(comm_stream_);
    cudaStreamDestroy(comm_stream_);
  }
}

void* CudaRankDevice::comm_alloc(int64_t bytes) const {
  if (bytes <= 0) return nullptr;
  void* p = nullptr;
  check(cudaMallocAsync(&p, static_cast<size_t>(bytes), comm_stream_), "cudaMallocAsync (intra-device staging)");
  return p;
}

void CudaRankDevice::comm_free(void* p) const noexcept {
  if (p) cudaFreeAsync(p, comm_stream_);
}

void CudaRankDevice::comm_to_device(void* dst, const void* src, int64_t bytes) const {
  if (bytes <= 0) return;
  count_copy(true, bytes);
  check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, comm_stream_),
        "cudaMemcpyAsync host to device (comm stream)");
}

void CudaRankDevice::comm_to_host(void* dst, const void* src, int64_t bytes) const {
  if (bytes <= 0) return;
  count_copy(false, bytes);
  check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, comm_stream_),
        "cudaMemcpyAsync device to host (comm stream)");
  check(cudaStreamSynchronize(comm_stream_), "cudaStreamSynchronize (comm stream)");
}

void CudaRankDevice::comm_copy(void* dst, const void* src, int64_t bytes) const {
  if (bytes <= 0) return;
  check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, comm_stream_),
        "cudaMemcpyAsync device to device (comm stream)");
}

void CudaRankDevice::comm_add(float* dst, const float* src, int64_t n) const {
  cuda::add_f32_cuda(dst, src, n, comm_stream_);
}

void CudaRankDevice::comm_zero(void* dst, int64_t bytes) const {
  if (bytes <= 0) return;
  check(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), comm_stream_), "cudaMemsetAsync (comm stream)");
}

void CudaRankDevice::comm_sync() const { check(cudaStreamSynchronize(comm_stream_), "cudaStreamSynchronize (comm stream)"); }

void CudaRankDevice::comm_wait_compute() const {
  cudaEvent_t ready = nullptr;
  check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags (comm after compute)");
  cudaError_t e = cudaEventRecord(ready, stream_);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(comm_stream_, ready, 0);
  cudaEventDestroy(ready);  // released once it completed; the wait is already enqueued
  check(e, "ordering the comm stream after the compute stream");
}

std::string CudaRankDevice::name() const {
  const auto& names = profiler::cuda_devices().names;
  return fmt::format("{} (cuda:{})", static_cast<size_t>(device_) < names.size() ? names[static_cast<size_t>(device_)] : "GPU",
                     device_);
}

void CudaRankDevice::bind_thread() const { check(cudaSetDevice(device_), "cudaSetDevice"); }

std::unique_ptr<DeviceAllocator> CudaRankDevice::make_allocator(AllocatorConfig config) const {
  bind_thread();
  config.capacity_bytes = std::min(config.capacity_bytes, cuda_free_memory());
  config.back_with_memory = true;
  switch (config.kind) {
    case AllocatorKind::cuda_async: return create_cuda_async_allocator(config, device_, stream_);
    case AllocatorKind::expandable: return DeviceAllocator::create(config, cuda_vmm_source(device_));
    case AllocatorKind::caching:
    case AllocatorKind::direct: break;
  }
  return DeviceAllocator::create(config, cuda_malloc_source());
}

void CudaRankDevice::to_device(void* dst, const void* src, int64_t bytes) const {
  if (bytes <= 0) return;
  count_copy(true, bytes);
  check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync host to device");
}

void CudaRankDevice::to_host(void* dst, const void* src, int64_t bytes) const {
  if (bytes <= 0) return;
  count_copy(false, bytes);
  check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync device to host");
  wait_stream("cudaStreamSynchronize");
}

void CudaRankDevice::wait_stream(const char* what) const {
  const int64_t ticket = begin_wait();
  check(cudaStreamSynchronize(stream_), what);
  end_wait(ticket);
}

void CudaRankDevice::defer_to_host(const void* src, int64_t bytes) const {
  std::lock_guard lock(deferred_mutex_);
  if (deferred_bytes_ >= 0) throw std::logic_error("defer_to_host: the last deferred copy was not taken");
  if (bytes < 0) throw std::invalid_argument(fmt::format("defer_to_host: {} bytes", bytes));
  if (bytes > 0) {
    // pinned, so that the copy is asynchronous (into pageable memory it would wait)
    void* staging = deferred_staging_->reserve(static_cast<size_t>(bytes));
    count_copy(false, bytes);
    check(cudaMemcpyAsync(staging, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync device to host (deferred)");
  }
  deferred_bytes_ = bytes;
  deferred_mark_ = wait_mark();
}

bool CudaRankDevice::deferred_ready() const {
  std::lock_guard lock(deferred_mutex_);
  return deferred_bytes_ >= 0 && waited_since(deferred_mark_);
}

void CudaRankDevice::take_deferred(void* dst) const {
  std::lock_guard lock(deferred_mutex_);
  if (deferred_bytes_ < 0) throw std::logic_error("take_deferred: no deferred copy is pending");
  if (!waited_since(deferred_mark_)) wait_stream("cudaStreamSynchronize (deferred copy)");
  if (deferred_bytes_ > 0)
    std::memcpy(dst, deferred_staging_->reserve(static_cast<size_t>(deferred_bytes_)), static_cast<size_t>(deferred_bytes_));
  deferred_bytes_ = -1;
}

void CudaRankDevice::copy_on_device(void* dst, const void* src, int64_t bytes) const {
  if (bytes <= 0) return;
  check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync device to device");
}

void CudaRankDevice::copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes,
                             int64_t rows, CopyKind kind) const {
  if (rows <= 0 || width_bytes <= 0) return;
  if (kind != CopyKind::device_to_device) count_copy(kind == CopyKind::host_to_device, width_bytes * rows);
  const cudaMemcpyKind k = kind == CopyKind::host_to_device   ? cudaMemcpyHostToDevice
                           : kind == CopyKind::device_to_host ? cudaMemcpyDeviceToHost
                                                              : cudaMemcpyDeviceToDevice;
  // cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, stream)
  check(cudaMemcpy2DAsync(dst, static_cast<size_t>(dst_pitch), src, static_cast<size_t>(src_pitch),
                          static_cast<size_t>(width_bytes), static_cast<size_t>(rows), k, stream_),
        "cudaMemcpy2DAsync");
  if (kind == CopyKind::device_to_host) wait_stream("cudaStreamSynchronize");
}

void CudaRankDevice::scale_copy_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                                   int64_t dst_stride, float s) const {
  cuda::scale_copy_2d_cuda(rows, width, src, src_stride, dst, dst_stride, s, stream_);
}

void CudaRankDevice::add_scale_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                                       int64_t dst_stride, const float* row_scale, bool accumulate) const {
  cuda::add_scale_rows_2d_cuda(rows, width, src, src_stride, dst, dst_stride, row_scale, accumulate, stream_);
}

void CudaRankDevice::scale_copy_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                                        int64_t dst_stride, float s, const float* row_scale) const {
  cuda::scale_copy_rows_2d_cuda(rows, width, src, src_stride, dst, dst_stride, s, row_scale, stream_);
}

void* CudaRankDevice::scratch_alloc(int64_t bytes) const {
  if (bytes <= 0) return nullptr;
  void* p = nullptr;
  check(cudaMallocAsync(&p, static_cast<size_t>(bytes), stream_), "cudaMallocAsync (input dist scratch)");
  return p;
}

void CudaRankDevice::scratch_free(void* p) const noexcept {
  if (p) cudaFreeAsync(p, stream_);
}

int64_t CudaRankDevice::bucketize(const int64_t* values, const int64_t* offsets, int64_t num_features,
                                  int64_t batch_size, std::span<const BucketSlot> slots, int64_t* lengths, int64_t* ids,
                                  int64_t ids_capacity, int64_t* splits, const BucketSlot* device_slots) const {
  if (!device_slots) count_copy(true, static_cast<int64_t>(slots.size() * sizeof(BucketSlot)));  // the kernel copies them
  count_copy(false, static_cast<int64_t>(sizeof(int64_t)));  // the kernel's count, read back
  std::lock_guard lock(workspace_mutex_);
  const int64_t ticket = begin_wait();  // bucketize_kjt_cuda waits for the stream to read the count
  const int64_t n = cuda::bucketize_kjt_cuda(values, offsets, num_features, batch_size, slots, lengths, ids,
                                             ids_capacity, splits, stream_, workspace_.get(), device_slots);
  end_wait(ticket);
  return n;
}

void CudaRankDevice::concat_bags(std::span<const BagPart> parts, int64_t bags_per_part, int64_t* ids_out,
                                 int64_t* offsets_out) const {
  cuda::concat_bags_cuda(parts, bags_per_part, ids_out, offsets_out, stream_);
}

void CudaRankDevice::kjt_permute(int64_t W, int64_t P, int64_t B, const int64_t* lengths_in, const int64_t* ids_in,
                                 int64_t num_ids, int64_t* ids_out, int64_t* offsets_out) const {
  std::lock_guard lock(workspace_mutex_);
  cuda::kjt_permute_cuda(W, P, B, lengths_in, ids_in, num_ids, ids_out, offsets_out, *workspace_, stream_);
}

namespace {

// The host memory pinned for the device (pin_host), process-wide: cudaHostRegister works on whole
// pages and refuses a page that is registered already, while the host rows and state of small
// tables share pages (and ranks of one process pin tables side by side). So the registry keeps
// disjoint page-aligned registrations and the pins (their page-aligned ranges); a pin registers
// only the gaps, and a registration is dropped when no pin overlaps it.
struct PinRegistry {
  std::mutex m;
  std::map<uintptr_t, uintptr_t> regs;       // start -> end, page-aligned, disjoint
  std::multimap<uintptr_t, uintptr_t> pins;  // page-aligned lo -> hi of each pin_host
};
PinRegistry& pin_registry() {
  static PinRegistry* r = new PinRegistry;  // never destroyed: unpins may run at exit
  return *r;
}
std::pair<uintptr_t, uintptr_t> page_range(const void* host, int64_t bytes) {
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(host);
  return {a / page * page, (a + static_cast<uintptr_t>(bytes) + page - 1) / page * page};
}
bool overlaps(uintptr_t a0, uintptr_t a1, uintptr_t b0, uintptr_t b1) { return a0 < b1 && b0 < a1; }

}  // namespace

void* CudaRankDevice::pin_host(void* host, int64_t bytes, const std::string& what) const {
  if (bytes <= 0) return host;
  bind_thread();
  int host_ptr_ok = 0;
  check(cudaDeviceGetAttribute(&host_ptr_ok, cudaDevAttrCanUseHostPointerForRegisteredMem, device_),
        "cudaDeviceGetAttribute (CanUseHostPointerForRegisteredMem)");
  auto& r = pin_registry();
  const auto [lo, hi] = page_range(host, bytes);
  std::lock_guard<std::mutex> lock(r.m);
  std::vector<uintptr_t> made;  // registrations of this call (undone if one fails)
  uintptr_t cur = lo;
  if (auto it = r.regs.upper_bound(cur); it != r.regs.begin() && std::prev(it)->second > cur) cur = std::prev(it)->second;
  while (cur < hi) {
    const auto next = r.regs.lower_bound(cur);  // the first registration at or after cur
    const uintptr_t gap_end = next == r.regs.end() ? hi : std::min(hi, next->first);
    if (gap_end > cur) {
      const cudaError_t rc = cudaHostRegister(reinterpret_cast<void*>(cur), static_cast<size_t>(gap_end - cur),
                                              cudaHostRegisterMapped | cudaHostRegisterPortable);
      if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        for (uintptr_t m : made) {
          cudaHostUnregister(reinterpret_cast<void*>(m));
          r.regs.erase(m);
        }
        throw cuda::CudaError(fmt::format(
            "{}: cannot pin {} bytes of host memory for {} (cudaHostRegister of {} bytes: {}: {}); the zero-copy "
            "row gather of host / host_cached tables needs its host rows pinned: free host memory or raise the "
            "locked-memory limit (ulimit -l), or use placement device",
            what, bytes, name(), gap_end - cur, cudaGetErrorName(rc), cudaGetErrorString(rc)));
      }
      r.regs.emplace(cur, gap_end);
      made.push_back(cur);
    }
    if (next == r.regs.end() || next->first >= hi) break;
    cur = next->second;
  }
  r.pins.emplace(lo, hi);
  if (host_ptr_ok) return host;  // unified addressing: the host pointer is the device's
  void* dev = nullptr;
  const cudaError_t rc = cudaHostGetDevicePointer(&dev, host, 0);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda::CudaError(fmt::format("{}: the {} pinned bytes have no device pointer on {} (cudaHostGetDevicePointer: {})",
                                      what, bytes, name(), cudaGetErrorName(rc)));
  }
  return dev;
}

void CudaRankDevice::unpin_host(void* host, int64_t bytes) const noexcept {
  if (bytes <= 0) return;
  auto& r = pin_registry();
  const auto [lo, hi] = page_range(host, bytes);
  std::lock_guard<std::mutex> lock(r.m);
  auto [b, e] = r.pins.equal_range(lo);
  for (auto it = b; it != e; ++it)
    if (it->second == hi) {
      r.pins.erase(it);
      break;
    }
  for (auto it = r.regs.begin(); it != r.regs.end();) {
    const auto [s, t] = *it;
    bool used = !overlaps(s, t, lo, hi);  // only the registrations under this pin may go
    for (auto p = r.pins.begin(); !used && p != r.pins.end(); ++p) used = overlaps(s, t, p->first, p->second);
    if (used) {
      ++it;
      continue;
    }
    cudaHostUnregister(reinterpret_cast<void*>(s));
    it = r.regs.erase(it);
  }
}

void CudaRankDevice::copy_rows(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows,
                               float* dst, float* dst_alt, const int64_t* dst_rows, bool wait) const {
  cuda::copy_rows_cuda(n, dim, src, src_alt, src_rows, dst, dst_alt, dst_rows, stream_);
  if (wait) wait_stream("cudaStreamSynchronize (host rows written)");
}

void CudaRankDevice::low_rank_lookup(const float* a, int64_t rows, int64_t r, const float* b, int64_t dim,
                                     const int64_t* ids, const int64_t* offsets, int64_t n_bags, const float* scale,
                                     float* p, float* out) const {
  if (n_bags <= 0 || dim <= 0) return;
  lookup(a, rows, r, ids, offsets, n_bags, scale, p);
  cuda::low_rank_project_cuda(n_bags, r, dim, p, b, out, stream_);
}

void CudaRankDevice::low_rank_backward(const float* a, int64_t r, const float* b, int64_t dim, const int64_t* row_ids,
                                       int64_t n, const float* g, float* da, float* db) const {
  cuda::low_rank_backward_cuda(n, r, dim, a, row_ids, b, g, da, db, stream_);
}

void CudaRankDevice::prepare_shard(int64_t rows, int64_t cols) const {
  bind_thread();
  plans_->prepare({rows, cols});
}

DeviceSyncCalls CudaRankDevice::sync_calls() const {
  std::scoped_lock lock(workspace_mutex_, deferred_mutex_);
  return {workspace_->allocs() + grad_workspace_->allocs() + deferred_staging_->allocs(),
          workspace_->frees() + grad_workspace_->frees() + deferred_staging_->frees(),
          plans_->misses() + fp16_plans_->misses() + bf16_plans_->misses(), waits_made()};
}

void CudaRankDevice::lookup(const float* weights, int64_t rows, int64_t cols, const int64_t* ids, const int64_t* offsets,
                            int64_t n_bags, const float* scale, float* out) const {
  if (n_bags <= 0 || cols <= 0) return;
  // the plan lives as long as the device (the kernel may still read it after this returns)
  cuda::tbe_forward(plans_->get({rows, cols}), weights, ids, offsets, scale, out, stream_, n_bags);
}

void CudaRankDevice::update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1,
                            float* momentum2, int64_t rows, int64_t cols, const int64_t* row_ids, const int64_t* offsets,
                            int64_t n, const float* values) const {
  if (n <= 0 || cols <= 0) return;
  const cuda::TbePlan& plan = plans_->get({rows, cols});
  std::lock_guard lock(workspace_mutex_);
  cuda::tbe_backward_update(plan, weights, momentum1, momentum2, row_ids, offsets, n, nullptr, values, opt, iteration,
                            stream_, workspace_.get(), n);
}

void CudaRankDevice::accumulate_update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1,
                                       float* momentum2, int64_t rows, int64_t cols, const SparseGradInput& in,
                                       int64_t* unique_count) const {
  const int64_t n = in.num_bags > 0 ? in.num_ids : 0;
  std::lock_guard lock(workspace_mutex_);
  if (n <= 0 || cols <= 0) {  // no rows: the count only
    check(cudaMemsetAsync(unique_count, 0, sizeof(int64_t), stream_), "cudaMemsetAsync (unique count)");
    return;
  }
  const cuda::TbePlan& plan = plans_->get({rows, cols});
  const auto un = static_cast<size_t>(n);
  ScratchLayout sizing;
  sizing.take(un * 8);                                  // rows
  sizing.take((un + 1) * 8);                            // one-row offsets
  sizing.take(un * static_cast<size_t>(cols) * 4);      // values
  ScratchLayout placed(static_cast<char*>(grad_workspace_->reserve(sizing.need())));
  auto* g_rows = reinterpret_cast<int64_t*>(placed.take(un * 8));
  auto* g_off = reinterpret_cast<int64_t*>(placed.take((un + 1) * 8));
  auto* g_vals = reinterpret_cast<float*>(placed.take(un * static_cast<size_t>(cols) * 4));
  cuda::accumulate_sparse_grad_cuda(rows, cols, in.ids, in.offsets, in.num_bags, in.bags_per_part, n, in.scale, in.grad,
                                    in.grad_stride, g_rows, g_off, g_vals, unique_count, *workspace_, stream_);
  cuda::tbe_backward_update(plan, weights, momentum1, momentum2, g_rows, g_off, n, nullptr, g_vals, opt, iteration,
                            stream_, workspace_.get(), n);
}

void CudaRankDevice::prepare_encoded_shard(int64_t rows, int64_t cols, TableDataType type) const {
  bind_thread();
  if (type == TableDataType::fp32) plans_->prepare({rows, cols});
  if (type == TableDataType::fp16) fp16_plans_->prepare({rows, cols});
  if (type == TableDataType::bf16) bf16_plans_->prepare({rows, cols});
}

void CudaRankDevice::lookup_encoded(TableDataType type, const uint8_t* rows, int64_t num_rows, int64_t cols,
                                    const int64_t* ids, const int64_t* offsets, int64_t n_bags, const float* scale,
                                    float* out) const {
  if (n_bags <= 0 || cols <= 0) return;
  switch (type) {
    case TableDataType::fp32:
      lookup(reinterpret_cast<const float*>(rows), num_rows, cols, ids, offsets, n_bags, scale, out);
      return;
    case TableDataType::fp16:
      cuda::tbe_forward(fp16_plans_->get({num_rows, cols}), rows, ids, offsets, scale, out, stream_, n_bags);
      return;
    case TableDataType::bf16:
      cuda::tbe_forward(bf16_plans_->get({num_rows, cols}), rows, ids, offsets, scale, out, stream_, n_bags);
      return;
    case TableDataType::int8:
    case TableDataType::int4:
      cuda::tbe_forward_quantized(type, rows, num_rows, cols, ids, offsets, n_bags, scale, out, cols, stream_);
      return;
  }
}

void CudaRankDevice::update_encoded(const OptimizerSpec& opt, int64_t iteration, const EncodedShardView& sh,
                                    const int64_t* row_ids, int64_t n, const float* values, QuantError* err) const {
  if (n <= 0 || sh.cols <= 0) return;
  if (sh.data_type == TableDataType::fp32) err = nullptr;  // not measured (0), as on the CPU
  const size_t scratch_bytes = GrowOnlyWorkspace::round_up(static_cast<size_t>(n * sh.cols) * sizeof(float));
  // the errors' room is reserved whether or not they are asked for (warm-up steps do not ask),
  // so that the workspace reaches its size in warm-up and measured steps allocate nothing
  const size_t error_bytes = static_cast<size_t>(2 * n) * sizeof(float);
  std::vector<float> errors(err ? static_cast<size_t>(2 * n) : 0);
  {
    std::lock_guard lock(workspace_mutex_);
    auto* base = static_cast<char*>(workspace_->reserve(scratch_bytes + error_bytes));
    float* row_errors = err ? reinterpret_cast<float*>(base + scratch_bytes) : nullptr;
    cuda::apply_row_optimizer_encoded_cuda(opt, iteration, sh.data_type, sh.rows, sh.num_rows, sh.cols, sh.state_type,
                                           sh.state1, sh.state2, row_ids, n, values, sh.sr,
                                           reinterpret_cast<float*>(base), row_errors, stream_);
    if (err) to_host(errors.data(), row_errors, static_cast<int64_t>(error_bytes));
  }
  for (int64_t u = 0; u < n && err; ++u)
    err->merge({errors[static_cast<size_t>(2 * u)], errors[static_cast<size_t>(2 * u + 1)]});
}

void CudaRankDevice::linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b,
                                    bool relu, float* y) const {
  cuda::linear_forward_cuda(*blas_, B, in, out, x, w, b, relu, y);
}

void CudaRankDevice::linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y,
                                     bool relu, float* dy, float* dw, float* db, float* dx) const {
  cuda::linear_backward_cuda(*blas_, B, in, out, x, w, y, relu, dy, dw, db, dx);
}

double CudaRankDevice::bce_loss(int64_t B, const float* logits, const float* labels, float* dlogits) const {
  cuda::bce_with_logits_cuda(B, logits, labels, dlogits, loss_, stream_);
  double loss = 0;
  to_host(&loss, loss_, static_cast<int64_t>(sizeof(double)));
  return loss;
}

void CudaRankDevice::sgd_step(int64_t n, float lr, const float* grad, float* params) const {
  cuda::sgd_step_cuda(n, lr, grad, params, stream_);
}

void CudaRankDevice::dot_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) const {
  cuda::dot_interaction_forward_cuda(B, F, d0, x0, r, stream_);
}

void CudaRankDevice::dot_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) const {
  cuda::dot_interaction_backward_cuda(B, F, d0, x0, dr, dx0, stream_);
}

namespace {

class NcclCollectives final : public Collectives {
 public:
  NcclCollectives(NcclComm& comm, const IntraDeviceOps* device) : comm_(comm), device_(device) {
    check(cudaSetDevice(comm.device()), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  ~NcclCollectives() override {
    cudaSetDevice(comm_.device());
    cudaStreamSynchronize(copy_);
    cudaStreamDestroy(copy_);
  }
  uint64_t next_sequence() const override { return comm_.sequence() + 1; }
  // an all-to-all's split check takes a sequence number of its own before the data collective
  uint64_t span_correlation(uint64_t) const override { return comm_.sequence(); }
  const CommCounters& counters() const override { return comm_.counters(); }
  void set_observer(const profiler::RunClock* clock, ProcessGroup::Observer observer) override {
    comm_.set_observer(clock, std::move(observer));
  }
  void set_flight_recorder(FlightRecorder* recorder) override { comm_.set_flight_recorder(recorder); }

  void all_to_all_v(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                    std::span<const int64_t> recv_counts, size_t elem_size) override {
    const int64_t sb = total(send_counts) * static_cast<int64_t>(elem_size);
    const int64_t rb = total(recv_counts) * static_cast<int64_t>(elem_size);
    stage_in(send, sb, rb);
    finish(comm_.all_to_all_v(op_name, copy_, send_.data(), send_counts, recv_.data(), recv_counts, elem_size), recv, rb);
  }
  void all_to_all_v_device(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                           std::span<const int64_t> recv_counts, size_t elem_size) override {
    if (!device_)
      throw std::logic_error(fmt::format("all_to_all '{}' on device buffers: the NCCL collectives of group {} were made "
                                         "without the rank's device",
                                         op_name, comm_.name()));
    check(cudaSetDevice(comm_.device()), "cudaSetDevice");  // the calling thread may be the comm worker
    // the send buffer was written on the rank's compute stream: wait for that work (the
    // collective is then ordered after copy_, which has nothing queued)
    device_->comm_wait_compute();
    device_->comm_sync();
    comm_.all_to_all_v(op_name, copy_, send, send_counts, recv, recv_counts, elem_size).synchronize();
  }
  // The row-split dists' collectives on device pointers, ordered as all_to_all_v_device.
  void reduce_scatter_device(const char* op_name, const float* send, std::span<const int64_t> counts,
                             float* recv) override {
    after_compute("reduce_scatter", op_name);
    comm_.reduce_scatter(op_name, copy_, send, counts, recv).synchronize();
  }
  void all_gather_v_device(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                           size_t elem_size) override {
    after_compute("all_gather", op_name);
    comm_.all_gather_v(op_name, copy_, send, recv, counts, elem_size).synchronize();
  }
  void all_gather_v(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                    size_t elem_size) override {
    const int64_t sb = counts[static_cast<size_t>(comm_.rank())] * static_cast<int64_t>(elem_size);
    const int64_t rb = total(counts) * static_cast<int64_t>(elem_size);
    stage_in(send, sb, rb);
    finish(comm_.all_gather_v(op_name, copy_, send_.data(), recv_.data(), counts, elem_size), recv, rb);
  }
  void all_reduce_sum(const char* op_name, float* data, int64_t count) override {
    const int64_t b = count * static_cast<int64_t>(sizeof(float));
    stage_in(data, 0, b);
    check(cudaMemcpyAsync(recv_.data(), data, static_cast<size_t>(b), cudaMemcpyHostToDevice, copy_), "cudaMemcpyAsync");
    finish(comm_.all_reduce_sum(op_name, copy_, reinterpret_cast<float*>(recv_.data()), count), data, b);
  }
  void all_to_all_q(const char* op_name, const float* send, std::span<const int64_t> send_counts, float* recv,
                    std::span<const int64_t> recv_counts, CommPrecision p, QuantError*) override {
    fp32_only(p, op_name);
    all_to_all_v(op_name, send, send_counts, recv, recv_counts, sizeof(float));
  }
  void reduce_scatter_q(const char* op_name, const float* send, std::span<const int64_t> counts, float* recv,
                        CommPrecision p, QuantError*) override {
    fp32_only(p, op_name);
    const int64_t sb = total(counts) * static_cast<int64_t>(sizeof(float));
    const int64_t rb = counts[static_cast<size_t>(comm_.rank())] * static_cast<int64_t>(sizeof(float));
    stage_in(send, sb, rb);
    finish(comm_.reduce_scatter(op_name, copy_, reinterpret_cast<const float*>(send_.data()), counts,
                                reinterpret_cast<float*>(recv_.data())),
           recv, rb);
  }
  void all_gather_q(const char* op_name, const float* send, float* recv, std::span<const int64_t> counts, CommPrecision p,
                    QuantError*) override {
    fp32_only(p, op_name);
    all_gather_v(op_name, send, recv, counts, sizeof(float));
  }

 private:
  static int64_t total(std::span<const int64_t> c) { return std::accumulate(c.begin(), c.end(), int64_t{0}); }
  // A device variant's start: the rank's device is known (std::logic_error naming the call
  // otherwise), and the work issued on its compute stream (the packing of `send`) is done.
  void after_compute(const char* kind, const char* op_name) {
    if (!device_)
      throw std::logic_error(fmt::format("{} '{}' on device buffers: the NCCL collectives of group {} were made "
                                         "without the rank's device",
                                         kind, op_name, comm_.name()));
    check(cudaSetDevice(comm_.device()), "cudaSetDevice");  // the calling thread may be the comm worker
    device_->comm_wait_compute();
    device_->comm_sync();
  }
  static void fp32_only(CommPrecision p, const char* op_name) {
    if (p != CommPrecision::fp32)
      throw std::logic_error(fmt::format("{}: qcomms {} on the cuda backend (the spec should have refused it)", op_name,
                                         to_string(p)));
  }
  // Grows the staging buffers (never shrinks) and copies `send_bytes` of `send` in, on the copy
  // stream, which the collective waits for (it is the collective's `compute` stream).
  void stage_in(const void* send, int64_t send_bytes, int64_t recv_bytes) {
    check(cudaSetDevice(comm_.device()), "cudaSetDevice");  // the calling thread may be the comm worker
    // at least one byte, so that the buffers are valid pointers for empty collectives
    if (send_.size() < static_cast<size_t>(std::max<int64_t>(send_bytes, 1)))
      send_ = cuda::DeviceArray<char>(static_cast<size_t>(std::max<int64_t>(send_bytes, 1)));
    if (recv_.size() < static_cast<size_t>(std::max<int64_t>(recv_bytes, 1)))
      recv_ = cuda::DeviceArray<char>(static_cast<size_t>(std::max<int64_t>(recv_bytes, 1)));
    if (send_bytes > 0)
      check(cudaMemcpyAsync(send_.data(), send, static_cast<size_t>(send_bytes), cudaMemcpyHostToDevice, copy_),
            "cudaMemcpyAsync host to device");
  }
  // Waits for the collective (CollectiveError on an NCCL error or the timeout) and copies the
  // result back to the host.
  void finish(NcclWork work, void* recv, int64_t recv_bytes) {
    work.synchronize();
    if (recv_bytes <= 0) return;
    check(cudaMemcpyAsync(recv, recv_.data(), static_cast<size_t>(recv_bytes), cudaMemcpyDeviceToHost, copy_),
          "cudaMemcpyAsync device to host");
    check(cudaStreamSynchronize(copy_), "cudaStreamSynchronize");
  }

  NcclComm& comm_;
  const IntraDeviceOps* device_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cuda::DeviceArray<char> send_, recv_;
};

}  // namespace

std::unique_ptr<Collectives> nccl_collectives(NcclComm& comm, const IntraDeviceOps* device) {
  return std::make_unique<NcclCollectives>(comm, device);
}

}  // namespace embedscope::engine::detail
