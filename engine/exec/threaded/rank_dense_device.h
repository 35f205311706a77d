#pragma once
// The DenseDevice (model/dense_device.h) of a cuda rank: the resident dense part's copies and
// kernels on the rank's RankDevice (a GPU, or the host stand-in), its host<->device copies
// counted (detail::DenseCopyTotals). Internal to the threaded executor.

#include "embedscope/engine/model/dense_device.h"
#include "exec/device/rank_device.h"

namespace embedscope::engine::threaded {

class RankDenseDevice final : public DenseDevice {
 public:
  /// `gpu` outlives this object.
  explicit RankDenseDevice(const detail::RankDevice& gpu) : gpu_(gpu) {}
  /// host_to_device: RankDevice::to_device; device_to_host: to_host (waits); device_to_device:
  /// copy_on_device.
  void copy(void* dst, const void* src, int64_t bytes, DenseCopy kind) const override {
    count(kind, bytes);
    switch (kind) {
      case DenseCopy::host_to_device: gpu_.to_device(dst, src, bytes); return;
      case DenseCopy::device_to_host: gpu_.to_host(dst, src, bytes); return;
      case DenseCopy::device_to_device: gpu_.copy_on_device(dst, src, bytes); return;
    }
  }
  /// RankDevice::copy_2d (device_to_host waits).
  void copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes, int64_t rows,
               DenseCopy kind) const override {
    count(kind, width_bytes * rows);
    using K = detail::RankDevice::CopyKind;
    gpu_.copy_2d(dst, dst_pitch, src, src_pitch, width_bytes, rows,
                 kind == DenseCopy::host_to_device   ? K::host_to_device
                 : kind == DenseCopy::device_to_host ? K::device_to_host
                                                     : K::device_to_device);
  }
  void linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, bool relu,
                      float* y) const override {
    gpu_.linear_forward(B, in, out, x, w, b, relu, y);
  }
  void linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y, bool relu,
                       float* dy, float* dw, float* db, float* dx) const override {
    gpu_.linear_backward(B, in, out, x, w, y, relu, dy, dw, db, dx);
  }
  /// RankDevice::bce_loss; its loss coming back counts as one device-to-host copy of 8 bytes.
  double bce_loss(int64_t B, const float* logits, const float* labels, float* dlogits) const override {
    count(DenseCopy::device_to_host, static_cast<int64_t>(sizeof(double)));
    return gpu_.bce_loss(B, logits, labels, dlogits);
  }
  void sgd_step(int64_t n, float lr, const float* grad, float* params) const override {
    gpu_.sgd_step(n, lr, grad, params);
  }
  void dot_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) const override {
    gpu_.dot_forward(B, F, d0, x0, r);
  }
  void dot_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) const override {
    gpu_.dot_backward(B, F, d0, x0, dr, dx0);
  }
  /// The copies counted so far (the rank's thread only calls this object).
  const detail::DenseCopyTotals& counted() const { return counted_; }

 private:
  void count(DenseCopy kind, int64_t bytes) const {
    if (kind == DenseCopy::host_to_device) {
      ++counted_.host_to_device;
      counted_.host_to_device_bytes += bytes;
    } else if (kind == DenseCopy::device_to_host) {
      ++counted_.device_to_host;
      counted_.device_to_host_bytes += bytes;
    }
  }
  const detail::RankDevice& gpu_;
  mutable detail::DenseCopyTotals counted_;
};

}  // namespace embedscope::engine::threaded
