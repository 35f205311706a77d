#pragma once
// CUDA embedding kernels (built with EMBEDSCOPE_WITH_CUDA; link embedscope::engine_cuda).
// Host API only: no CUDA header is needed to include this one. Device buffers are raw device
// pointers (or DeviceArray below); `stream` is a cudaStream_t passed as void* (nullptr: the
// legacy default stream). Every launch of our kernels goes through one checked launcher
// (launch_config.h): zero-size work is not launched, and a bad configuration or failed launch
// throws LaunchError naming the kernel and its shapes. Other CUDA runtime errors (CUB's and
// cuBLAS's launches included, checked by their return codes) throw CudaError. Kernel faults
// surface at the next synchronizing call.
//
// Kernels (CPU references in kernels.h and bucketize.h):
//  - tbe_forward: table-batched pooled lookup (FBGEMM's split_embedding_codegen_forward):
//    all tables of a rank in one launch, sum / mean, weights fp32 / fp16 / bf16, fp32
//    accumulation in id order (as pooled_lookup), any embedding_dim.
//  - tbe_forward_quantized: the same for one table of int8 / int4 rows (FBGEMM's fused row-wise
//    layouts); the update of reduced-precision rows is apply_row_optimizer_encoded_cuda
//    (cuda_encoded_update.h).
//  - tbe_backward_update: sparse gradient by radix sort (CUB) + segment reduce per distinct
//    row, then the fused row optimizer (sgd, rowwise_adagrad, adam) applied once per row, as
//    accumulate_sparse_grad + apply_row_optimizer. Deterministic: no atomics.
//  - bucketize_kjt_cuda: row-wise input bucketizing (bucketize_kjt).
//  - linear_forward_cuda / linear_backward_cuda: the dense layers with cuBLAS (linear_forward /
//    linear_backward in dense.h).

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/engine/input/bucketize.h"
#include "embedscope/engine/kernels/workspace.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::cuda {

/// A failed CUDA runtime call; what() names the call and cudaGetErrorString.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What cudaGetDeviceCount said: `count` devices, and `status` its text
/// ("cudaSuccess" or e.g. "cudaErrorNoDevice: no CUDA-capable device is detected").
struct DeviceCount {
  int count = 0;
  std::string status;
};
/// Asks cudaGetDeviceCount; never throws: on failure `count` is 0 and `status` says why.
DeviceCount device_count();

// ---- device memory -------------------------------------------------------------------------

void* device_malloc(size_t bytes);                          ///< cudaMalloc; nullptr for 0 bytes
void device_free(void* p) noexcept;                         ///< cudaFree
void copy_to_device(void* dst, const void* src, size_t bytes);  ///< synchronous cudaMemcpy
void copy_to_host(void* dst, const void* src, size_t bytes);    ///< synchronous cudaMemcpy
void device_zero(void* p, size_t bytes);                    ///< cudaMemset 0
void synchronize();                                         ///< cudaDeviceSynchronize

/// An owned device array of n trivially copyable T (cudaMalloc'ed, uninitialised).
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t n) : n_(n), p_(static_cast<T*>(device_malloc(n * sizeof(T)))) {}
  explicit DeviceArray(std::span<const T> host) : DeviceArray(host.size()) { upload(host); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept : n_(o.n_), p_(o.p_) { o.n_ = 0, o.p_ = nullptr; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      device_free(p_);
      n_ = o.n_, p_ = o.p_;
      o.n_ = 0, o.p_ = nullptr;
    }
    return *this;
  }
  ~DeviceArray() { device_free(p_); }

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  /// Copies host.size() elements (at most size()) to the start of the array.
  void upload(std::span<const T> host) {
    if (host.size() > n_) throw std::out_of_range("DeviceArray::upload: more elements than the array holds");
    copy_to_device(p_, host.data(), host.size() * sizeof(T));
  }
  /// Copies the whole array back to the host (synchronous).
  std::vector<T> download() const {
    std::vector<T> h(n_);
    copy_to_host(h.data(), p_, bytes());
    return h;
  }
  void zero() { device_zero(p_, bytes()); }

 private:
  size_t n_ = 0;
  T* p_ = nullptr;
};

// ---- precisions ----------------------------------------------------------------------------

/// Storage precision of embedding weights (FBGEMM SparseType names: FP32, FP16, BF16).
enum class WeightsPrecision : int32_t { fp32, fp16, bf16 };
/// Bytes per stored weight: 4 (fp32), 2 (fp16, bf16).
size_t element_bytes(WeightsPrecision p);
/// "fp32", "fp16" or "bf16".
const char* to_string(WeightsPrecision p);

/// Round-to-nearest-even conversions of host floats to the 16-bit storage formats (the bits of
/// __half / __nv_bfloat16) and back, as the kernels convert.
uint16_t float_to_fp16_bits(float f);
float fp16_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t h);

// ---- table-batched embedding (TBE) ---------------------------------------------------------

/// One table (or table shard) of a table-batched embedding. All offsets are in elements.
/// Plain data: the kernels read a device copy of it.
struct TbeTable {
  int64_t num_rows = 0;
  int64_t dim = 0;                ///< embedding_dim (columns of this shard), >= 1
  int64_t weights_offset = 0;     ///< row 0 in `weights` (elements of the weights precision)
  int64_t out_offset = 0;         ///< bag 0 in `out` / `grad_out` (floats)
  int64_t out_stride = 0;         ///< floats between consecutive bags in `out`, >= dim
  int64_t momentum1_offset = 0;   ///< row 0 in momentum1 (rowwise_adagrad: 1 float per row; adam: dim)
  int64_t momentum2_offset = 0;   ///< row 0 in momentum2 (adam: dim floats per row)
  int32_t pooling = 0;            ///< 0 sum, 1 mean (see Pooling)
  int32_t reserved = 0;
};

/// The tables of one rank, uploaded once (FBGEMM's weights_offsets / D_offsets /
/// hash_size_cumsum). The KJT of a batch has tables x batch_size bags, table-major.
/// Throws std::invalid_argument naming the table for dim < 1, num_rows < 0, a negative offset,
/// out_stride < dim, or a batch of more than 2^31 - 1 bags.
class TbePlan {
 public:
  TbePlan(std::vector<TbeTable> tables, int64_t batch_size, WeightsPrecision precision);
  const std::vector<TbeTable>& tables() const { return tables_; }
  int64_t batch_size() const { return batch_size_; }
  int64_t num_bags() const { return static_cast<int64_t>(tables_.size()) * batch_size_; }
  WeightsPrecision precision() const { return precision_; }
  int64_t total_rows() const { return total_rows_; }
  int64_t max_dim() const { return max_dim_; }
  const TbeTable* device_tables() const { return d_tables_.data(); }
  /// Prefix sums of num_rows (tables + 1 entries): table t's rows are [row_cumsum[t], row_cumsum[t+1]).
  const int64_t* device_row_cumsum() const { return d_row_cumsum_.data(); }

 private:
  std::vector<TbeTable> tables_;
  int64_t batch_size_;
  WeightsPrecision precision_;
  int64_t total_rows_ = 0, max_dim_ = 0;
  DeviceArray<TbeTable> d_tables_;
  DeviceArray<int64_t> d_row_cumsum_;
};

/// Forward pooled lookup of all tables in one launch:
///   out[tab.out_offset + b * tab.out_stride + c] = scale(t, b) * sum_{i in bag (t, b)} w(ids[i], c)
/// for table t, bag b < batch_size, c < tab.dim; bag (t, b) is ids[offsets[t*B + b] ..
/// offsets[t*B + b + 1]) (offsets: tables * B + 1 int64 on the device; offsets[0] may be > 0).
/// scale(t, b) = bag_scale[t*B + b] when bag_scale != nullptr (e.g. 1/full length for
/// row-wise partial bags), else 1 (sum) or 1/len (mean; an empty bag gives zeros either way).
/// Rows are summed in fp32 in id order from 0, as pooled_lookup. ids outside [0, num_rows)
/// contribute nothing (the input pipeline rejects them before).
///
/// `batch_size` >= 0 replaces the plan's batch size for this call (the plan's tables stay as
/// uploaded, so one plan built at setup serves every step's bag count: the count is a kernel
/// argument, nothing is uploaded); -1 keeps plan.batch_size(). Throws std::invalid_argument
/// for a batch_size below -1 or one giving more than 2^31 - 1 bags.
void tbe_forward(const TbePlan& plan, const void* weights, const int64_t* ids, const int64_t* offsets,
                 const float* bag_scale, float* out, void* stream = nullptr, int64_t batch_size = -1);

/// Pooled lookup of one table whose rows are stored in FBGEMM's fused row-wise layouts
/// (quant/row_codec.h): `type` int8 (dim uint8 codes, then the row's fp32 scale and bias: dim + 8
/// bytes a row; x = q * scale + bias) or int4 (dim / 2 bytes of 4-bit codes, low nibble first,
/// then fp16 scale and bias: dim / 2 + 4 bytes; x = scale * q + bias; dim even). `rows`: num_rows
/// such rows on the device; bag b (< num_bags) is ids[offsets[b] .. offsets[b + 1]);
///   out[b * out_stride + c] = s_b * sum over the bag's ids of x(id, c),  c < dim,
/// with s_b = bag_scale[b] when bag_scale != nullptr, else 1; rows are decoded and summed in fp32
/// in id order, so the result is bit-equal to pooled_lookup_encoded (kernels.h). ids outside
/// [0, num_rows) contribute nothing. One warp per bag on `stream` (a cudaStream_t; nullptr: the
/// legacy default stream). The cuda executor's lookup of int8 / int4 shards
/// (CudaRankDevice::lookup_encoded; their update: cuda_encoded_update.h), tested against the CPU
/// reference. Throws
/// std::invalid_argument for another type, dim <= 0, an odd dim with int4, negative counts or
/// out_stride < dim; LaunchError for a failed launch.
void tbe_forward_quantized(TableDataType type, const void* rows, int64_t num_rows, int64_t dim, const int64_t* ids,
                           const int64_t* offsets, int64_t num_bags, const float* bag_scale, float* out,
                           int64_t out_stride, void* stream = nullptr);

/// Backward of tbe_forward with the optimizer fused (FBGEMM's split_embedding_backward_codegen
/// *_exact kernels): the gradient of each distinct (table, row) of the batch is the sum, in
/// the order of the ids, of scale(t, b) * grad_out[bag row] over its occurrences (radix sort
/// by row, stable, then a segment reduce); then `opt` updates that row once with the formulas
/// of apply_row_optimizer (kernels.h), `iteration` counting from 1. `num_ids` =
/// offsets[tables*B] - offsets[0]. fp16 / bf16 weights are read to fp32, updated in fp32 and
/// rounded to nearest. momentum1 / momentum2: fp32 state at the tables' offsets (nullptr for
/// an optimizer that has none). Throws std::invalid_argument for a missing state array or
/// more than 2^31 - 1 ids.
/// Scratch (the radix sort's keys and positions, run-length encoding, CUB temporary storage):
/// from `workspace` when given (grown with GrowOnlyWorkspace's policy, then reused: after the
/// largest batch has been seen, no allocation at all), else from the device's stream-ordered
/// pool (cudaMallocAsync / cudaFreeAsync on `stream`, which never synchronizes the device).
/// The workspace's block must only be used on `stream`. `batch_size` as in tbe_forward.
void tbe_backward_update(const TbePlan& plan, void* weights, float* momentum1, float* momentum2,
                         const int64_t* ids, const int64_t* offsets, int64_t num_ids,
                         const float* bag_scale, const float* grad_out, const OptimizerSpec& opt,
                         int64_t iteration, void* stream = nullptr, GrowOnlyWorkspace* workspace = nullptr,
                         int64_t batch_size = -1);

// ---- input bucketizing ---------------------------------------------------------------------

/// bucketize_kjt (bucketize.h) on the device. values / offsets (num_features * batch_size + 1)
/// are device arrays; slots come from the host. Writes lengths (slots x batch_size), ids (at
/// most ids_capacity) and splits (per slot), all int64 on the device, and returns the number
/// of ids of the result (it synchronizes `stream` to read it). Scratch (the slots, the
/// (slot, bag) output offsets, CUB's scan storage): from `workspace` when given (grown with
/// GrowOnlyWorkspace's policy, then reused: once the largest batch has been seen no allocation
/// at all; its block only used on `stream`), else from the device's stream-ordered pool
/// (cudaMallocAsync / cudaFreeAsync on `stream`, one allocation a call). Throws
/// std::invalid_argument for a slot feature outside [0, num_features), and std::length_error
/// when the result does not fit ids_capacity (the ids are then incomplete). `device_slots`: the
/// same list as `slots` already in device memory (then not copied, nor given scratch); nullptr:
/// `slots` is copied into the scratch (one cudaMemcpyAsync a call). `slots` is validated either way.
int64_t bucketize_kjt_cuda(const int64_t* values, const int64_t* offsets, int64_t num_features,
                           int64_t batch_size, std::span<const BucketSlot> slots, int64_t* lengths,
                           int64_t* ids, int64_t ids_capacity, int64_t* splits, void* stream = nullptr,
                           GrowOnlyWorkspace* workspace = nullptr, const BucketSlot* device_slots = nullptr);

// ---- dense layers (cuBLAS) -----------------------------------------------------------------

/// A cuBLAS handle (cublasCreate) whose work goes to `stream`; fp32 math, no TF32
/// (CUBLAS_PEDANTIC_MATH), so results follow the CPU BLAS up to summation order.
class Blas {
 public:
  explicit Blas(void* stream = nullptr);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  void* handle() const { return handle_; }
  void* stream() const { return stream_; }

 private:
  void* handle_ = nullptr;
  void* stream_ = nullptr;
};

/// linear_forward (dense.h) on the device: y[B x out] = relu?(x[B x in] W^T + b), row-major,
/// W: out x in. One cublasSgemm and one bias (+ ReLU) kernel. Throws std::invalid_argument for
/// negative sizes or sizes above 2^31 - 1.
void linear_forward_cuda(Blas& blas, int64_t B, int64_t in, int64_t out, const float* x, const float* w,
                         const float* b, bool relu, float* y);

/// linear_backward (dense.h) on the device: with relu zeroes dy where y <= 0 (in place), then
/// dw = dy^T x, db = column sums of dy (in batch order, as the CPU loop), dx = dy W if dx != nullptr.
void linear_backward_cuda(Blas& blas, int64_t B, int64_t in, int64_t out, const float* x, const float* w,
                          const float* y, bool relu, float* dy, float* dw, float* db, float* dx);

}  // namespace embedscope::engine::cuda
