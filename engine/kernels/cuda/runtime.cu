// Device queries, device memory, precision conversions and TbePlan (cuda_kernels.h).

#include <array>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.cuh"

namespace embedscope::engine::cuda {

namespace detail {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  throw CudaError(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

const LaunchLimits& device_limits() {
  constexpr int kMaxDevices = 64;
  static std::array<LaunchLimits, kMaxDevices> limits;
  static std::array<bool, kMaxDevices> known{};
  static std::mutex m;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev < 0 || dev >= kMaxDevices) throw CudaError("device " + std::to_string(dev) + " beyond the 64 supported");
  std::lock_guard lock(m);
  if (!known[static_cast<size_t>(dev)]) {
    auto attr = [&](cudaDeviceAttr a, const char* name) {
      int v = 0;
      check(cudaDeviceGetAttribute(&v, a, dev), name);
      return static_cast<int64_t>(v);
    };
    LaunchLimits& l = limits[static_cast<size_t>(dev)];
    l.max_grid_x = attr(cudaDevAttrMaxGridDimX, "cudaDevAttrMaxGridDimX");
    l.max_grid_yz = std::min(attr(cudaDevAttrMaxGridDimY, "cudaDevAttrMaxGridDimY"),
                             attr(cudaDevAttrMaxGridDimZ, "cudaDevAttrMaxGridDimZ"));
    l.max_threads_per_block = attr(cudaDevAttrMaxThreadsPerBlock, "cudaDevAttrMaxThreadsPerBlock");
    l.max_block_z = attr(cudaDevAttrMaxBlockDimZ, "cudaDevAttrMaxBlockDimZ");
    l.max_shared_bytes = attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, "cudaDevAttrMaxSharedMemoryPerBlockOptin");
    known[static_cast<size_t>(dev)] = true;
  }
  return limits[static_cast<size_t>(dev)];
}

Scratch::Scratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
  constexpr int kMaxDevices = 64;
  static std::array<std::once_flag, kMaxDevices> pool_once;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev >= 0 && dev < kMaxDevices)
    std::call_once(pool_once[static_cast<size_t>(dev)], [dev] {
      cudaMemPool_t pool;
      check(cudaDeviceGetDefaultMemPool(&pool, dev), "cudaDeviceGetDefaultMemPool");
      uint64_t keep = UINT64_MAX;
      check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
            "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)");
    });
  if (bytes > 0) check(cudaMallocAsync(&p_, bytes, stream_), "cudaMallocAsync (scratch)");
}

Scratch::~Scratch() {
  if (p_ != nullptr) cudaFreeAsync(p_, stream_);
}

}  // namespace detail

using detail::check;

DeviceCount device_count() {
  DeviceCount d;
  const cudaError_t e = cudaGetDeviceCount(&d.count);
  if (e == cudaSuccess) {
    d.status = "cudaSuccess";
  } else {
    d.count = 0;
    d.status = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    cudaGetLastError();  // reset the last-error state (this error is not sticky)
  }
  return d;
}

void* device_malloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), ("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str());
  return p;
}
void device_free(void* p) noexcept {
  if (p != nullptr) cudaFree(p);
}
void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
}
void device_zero(void* p, size_t bytes) {
  if (bytes > 0) check(cudaMemset(p, 0, bytes), "cudaMemset");
}
void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

size_t element_bytes(WeightsPrecision p) { return p == WeightsPrecision::fp32 ? 4 : 2; }
const char* to_string(WeightsPrecision p) {
  switch (p) {
    case WeightsPrecision::fp32: return "fp32";
    case WeightsPrecision::fp16: return "fp16";
    case WeightsPrecision::bf16: return "bf16";
  }
  return "?";
}

uint16_t float_to_fp16_bits(float f) { return __half_as_ushort(__float2half_rn(f)); }
float fp16_bits_to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
uint16_t float_to_bf16_bits(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
float bf16_bits_to_float(uint16_t h) { return __bfloat162float(__ushort_as_bfloat16(h)); }

TbePlan::TbePlan(std::vector<TbeTable> tables, int64_t batch_size, WeightsPrecision precision)
    : tables_(std::move(tables)), batch_size_(batch_size), precision_(precision) {
  if (batch_size_ < 0) throw std::invalid_argument("TbePlan: batch_size " + std::to_string(batch_size_) + " < 0");
  std::vector<int64_t> cumsum{0};
  for (size_t t = 0; t < tables_.size(); ++t) {
    const TbeTable& tab = tables_[t];
    const std::string where = "TbePlan: table " + std::to_string(t) + ": ";
    if (tab.dim < 1) throw std::invalid_argument(where + "dim " + std::to_string(tab.dim) + " < 1");
    if (tab.num_rows < 0) throw std::invalid_argument(where + "num_rows " + std::to_string(tab.num_rows) + " < 0");
    if (tab.weights_offset < 0 || tab.out_offset < 0 || tab.momentum1_offset < 0 || tab.momentum2_offset < 0)
      throw std::invalid_argument(where + "negative offset");
    if (tab.out_stride < tab.dim)
      throw std::invalid_argument(where + "out_stride " + std::to_string(tab.out_stride) + " < dim " +
                                  std::to_string(tab.dim));
    if (tab.pooling != 0 && tab.pooling != 1)
      throw std::invalid_argument(where + "pooling " + std::to_string(tab.pooling) + " (0 sum, 1 mean)");
    cumsum.push_back(cumsum.back() + tab.num_rows);
    max_dim_ = std::max(max_dim_, tab.dim);
  }
  total_rows_ = cumsum.back();
  if (num_bags() > INT32_MAX)
    throw std::invalid_argument("TbePlan: " + std::to_string(num_bags()) + " bags (tables x batch_size) > 2^31 - 1");
  d_tables_ = DeviceArray<TbeTable>(std::span<const TbeTable>(tables_));
  d_row_cumsum_ = DeviceArray<int64_t>(std::span<const int64_t>(cumsum));
}

}  // namespace embedscope::engine::cuda
