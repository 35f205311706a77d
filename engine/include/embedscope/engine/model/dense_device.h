#pragma once
// The device a resident dense part runs on (DenseModel::make_resident, model/dense.h): the
// copies between host and device memory and the dense part's kernels on device pointers. The
// cuda executor implements it on its rank's device (exec/threaded/rank_setup.cpp: a GPU, or the host
// stand-in of TrainerOptions::emulate_device, whose kernels are the host functions of dense.h).
// Every call comes from a thread bound to the device (RankDevice::bind_thread).

#include <cstdint>

namespace embedscope::engine {

/// The direction of a DenseDevice copy.
enum class DenseCopy { host_to_device, device_to_host, device_to_device };

class DenseDevice {
 public:
  virtual ~DenseDevice() = default;
  /// `bytes` from src to dst; `kind` says which side is device memory. In order with the
  /// device's work; device_to_host returns when the bytes are on the host (waits), the others
  /// need not (host_to_device returns once the host bytes may be reused).
  virtual void copy(void* dst, const void* src, int64_t bytes, DenseCopy kind) const = 0;
  /// A 2-D copy (cudaMemcpy2DAsync's semantics): `rows` rows of `width_bytes` bytes, row r from
  /// src + r src_pitch to dst + r dst_pitch (pitches in bytes). Waits as copy() does.
  virtual void copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes,
                       int64_t rows, DenseCopy kind) const = 0;
  /// linear_forward / linear_backward (dense.h) on device memory; asynchronous on a GPU.
  virtual void linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b,
                              bool relu, float* y) const = 0;
  virtual void linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y,
                               bool relu, float* dy, float* dw, float* db, float* dx) const = 0;
  /// bce_with_logits (dense.h) on device memory (logits, labels, dlogits: B floats there); the
  /// mean loss comes back to the host (one device-to-host copy of a double, waited for).
  virtual double bce_loss(int64_t B, const float* logits, const float* labels, float* dlogits) const = 0;
  /// sgd_step (dense.h) on n device floats; asynchronous on a GPU.
  virtual void sgd_step(int64_t n, float lr, const float* grad, float* params) const = 0;
  /// dot_interaction_forward / _backward (dense.h) on device memory; asynchronous on a GPU.
  virtual void dot_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) const = 0;
  virtual void dot_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) const = 0;
};

}  // namespace embedscope::engine
