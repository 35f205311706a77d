// The dense part resident on a device (DenseModel::make_resident, model/dense_device.h): the
// parameters, gradients and activations stay in device memory for the whole step; only the
// batch's inputs, the pooled embeddings, their gradients, the loss, the DDP buckets' gradients
// and the all-reduced gradients cross. The dot and cat interactions; DCN-v2 and the fixed
// projection keep DenseModel::LinearOps' per-call path (dense.cpp).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/model/dense_device.h"

namespace embedscope::engine {

namespace {

// The resident activation block's regions: offsets and widths in floats per sample (the region
// of width w at offset o is B x w floats at block + o B).
struct ResidentLayout {
  int64_t xd = 0;                    // dense features
  std::vector<int64_t> bottom;       // each bottom layer's output
  int64_t x0 = 0, r = -1;            // interaction input; r (dot only)
  std::vector<int64_t> top;          // each top layer's output (the last: the logits)
  int64_t labels = 0, g0 = 0, g1 = 0, dx0 = -1;
  int64_t inter_in = 0, inter_out = 0, d0 = 0;
  int64_t total = 0;
};

ResidentLayout resident_layout(const WorkloadSpec& spec, const std::vector<int64_t>& dims) {
  ResidentLayout L;
  if (!dense_resident_supported(spec)) return L;
  const DenseSpec& d = *spec.dense;
  const auto F = static_cast<int64_t>(dims.size());
  int64_t sum_dims = 0;
  for (const int64_t x : dims) sum_dims += x;
  int64_t at = 0;
  auto take = [&](int64_t w) {
    const int64_t o = at;
    at += w;
    return o;
  };
  L.xd = take(d.num_dense_features);
  int64_t in = d.num_dense_features, widest = 0;
  for (const int w : d.bottom_mlp) {
    L.bottom.push_back(take(w));
    widest = std::max<int64_t>(widest, w);
    in = w;
  }
  L.d0 = in;
  L.inter_in = in + sum_dims;
  const bool dot = d.interaction == Interaction::dot;
  L.inter_out = dot ? in + (F + 1) * F / 2 : L.inter_in;
  widest = std::max(widest, L.inter_out);
  L.x0 = take(L.inter_in);
  if (dot) L.r = take(L.inter_out);
  for (const int w : d.top_mlp) {
    L.top.push_back(take(w));
    widest = std::max<int64_t>(widest, w);
  }
  L.labels = take(1);
  L.g0 = take(widest);
  L.g1 = take(widest);
  if (dot) L.dx0 = take(L.inter_in);
  L.total = at;
  return L;
}

}  // namespace

bool dense_resident_supported(const WorkloadSpec& spec) {
  return spec.dense && (spec.dense->interaction == Interaction::dot || spec.dense->interaction == Interaction::cat);
}

int64_t dense_resident_activation_floats_per_sample(const WorkloadSpec& spec, const std::vector<int64_t>& feature_dims) {
  return resident_layout(spec, feature_dims).total;
}

int64_t DenseModel::resident_activation_floats(int64_t B) const {
  return B * dense_resident_activation_floats_per_sample(spec_, dims_);
}

void DenseModel::make_resident(const DenseDevice* device, float* device_params) {
  if (!dense_resident_supported(spec_))
    throw std::logic_error("DenseModel::make_resident: only a dense part with the dot or cat interaction is resident");
  if (precision() != DensePrecision::fp32)
    throw std::logic_error(std::string("DenseModel::make_resident: dense.precision ") + to_string(precision()) +
                           ": the resident dense part computes in fp32 only");
  if (device == nullptr || (device_params == nullptr && num_params_ > 0))
    throw std::logic_error("DenseModel::make_resident: no device or no device memory for the parameters");
  if (static_cast<int64_t>(params_.size()) != num_params_)
    throw std::logic_error("DenseModel::make_resident: a layout-only model has no parameters to upload");
  device_ = device;
  device_params_ = device_params;
  device_->copy(device_params_, params_.data(), num_params_ * 4, DenseCopy::host_to_device);
  host_params_stale_ = false;
}

double DenseModel::forward_backward_resident(int64_t B, float* act, const float* dense_x,
                                             std::span<const float* const> pooled, const float* labels,
                                             std::span<float* const> d_pooled,
                                             const std::function<void(int64_t)>& on_grads_ready,
                                             std::span<const uint8_t> pooled_on_device,
                                             std::span<const uint8_t> d_pooled_on_device) {
  if (!device_) throw std::logic_error("DenseModel::forward_backward_resident: the dense part is not resident");
  for (const auto& [flags, name] : {std::pair{pooled_on_device, "pooled_on_device"}, {d_pooled_on_device, "d_pooled_on_device"}})
    if (!flags.empty() && flags.size() != pooled.size())
      throw std::logic_error(std::string("DenseModel::forward_backward_resident: ") + name + " has " +
                             std::to_string(flags.size()) + " entries for " + std::to_string(pooled.size()) + " features");
  auto kind_in = [&](int64_t f) {
    return !pooled_on_device.empty() && pooled_on_device[static_cast<size_t>(f)] ? DenseCopy::device_to_device
                                                                                 : DenseCopy::host_to_device;
  };
  auto kind_out = [&](int64_t f) {
    return !d_pooled_on_device.empty() && d_pooled_on_device[static_cast<size_t>(f)] ? DenseCopy::device_to_device
                                                                                     : DenseCopy::device_to_host;
  };
  const DenseDevice& dv = *device_;
  const ResidentLayout L = resident_layout(spec_, dims_);
  const DenseSpec& ds = *spec_.dense;
  const auto F = static_cast<int64_t>(dims_.size());
  constexpr int64_t f4 = sizeof(float);
  auto at = [&](int64_t off) { return act + off * B; };
  auto ready = [&](size_t from) {
    if (on_grads_ready) on_grads_ready(static_cast<int64_t>(from));
  };
  float* P = device_params_;
  float* G = device_params_ + num_params_;
  // ---- inputs in
  dv.copy(at(L.xd), dense_x, B * ds.num_dense_features * f4, DenseCopy::host_to_device);
  dv.copy(at(L.labels), labels, B * f4, DenseCopy::host_to_device);
  // ---- forward
  const float* x = at(L.xd);
  for (size_t i = 0; i < bottom_.size(); ++i) {
    float* y = at(L.bottom[i]);
    dv.linear_forward(B, bottom_[i].in, bottom_[i].out, x, P + bottom_[i].w, P + bottom_[i].b, bottom_[i].relu, y);
    x = y;
  }
  // x0 = [z, pooled_0, ..., pooled_{F-1}] (B x inter_in): z placed on the device, the pooled
  // embeddings scattered into their columns from the host (or from the device: on_device)
  float* x0 = at(L.x0);
  const int64_t pitch = L.inter_in * f4;
  dv.copy_2d(x0, pitch, x, L.d0 * f4, L.d0 * f4, B, DenseCopy::device_to_device);
  int64_t off = L.d0;
  for (int64_t f = 0; f < F; ++f) {
    const int64_t d = dims_[static_cast<size_t>(f)];
    dv.copy_2d(x0 + off, pitch, pooled[static_cast<size_t>(f)], d * f4, d * f4, B, kind_in(f));
    off += d;
  }
  const float* r = x0;  // cat: the top MLP reads x0 itself (r = x0)
  if (ds.interaction == Interaction::dot) {
    dv.dot_forward(B, F, L.d0, x0, at(L.r));
    r = at(L.r);
  }
  x = r;
  for (size_t i = 0; i < top_.size(); ++i) {
    float* y = at(L.top[i]);
    dv.linear_forward(B, top_[i].in, top_[i].out, x, P + top_[i].w, P + top_[i].b, top_[i].relu, y);
    x = y;
  }
  float* g[2] = {at(L.g0), at(L.g1)};
  const double loss = dv.bce_loss(B, x, at(L.labels), g[0]);  // the logits are the last output
  // ---- backward: g[cur] holds d(output) of the layer, its d(input) goes to the other one
  int cur = 0;
  for (size_t i = top_.size(); i-- > 0;) {
    const float* xin = i > 0 ? at(L.top[i - 1]) : r;
    dv.linear_backward(B, top_[i].in, top_[i].out, xin, P + top_[i].w, at(L.top[i]), top_[i].relu, g[cur],
                       G + top_[i].w, G + top_[i].b, g[1 - cur]);
    ready(top_[i].w);
    cur = 1 - cur;
  }
  const float* dx0 = g[cur];  // cat: d x0 = d r
  if (ds.interaction == Interaction::dot) {
    dv.dot_backward(B, F, L.d0, x0, g[cur], at(L.dx0));
    dx0 = at(L.dx0);
  }
  // split d x0: d z stays on the device, d pooled goes to the host
  cur = 1 - cur;
  dv.copy_2d(g[cur], L.d0 * f4, dx0, pitch, L.d0 * f4, B, DenseCopy::device_to_device);
  off = L.d0;
  for (int64_t f = 0; f < F; ++f) {
    const int64_t d = dims_[static_cast<size_t>(f)];
    dv.copy_2d(d_pooled[static_cast<size_t>(f)], d * f4, dx0 + off, pitch, d * f4, B, kind_out(f));
    off += d;
  }
  for (size_t i = bottom_.size(); i-- > 0;) {
    const float* xin = i > 0 ? at(L.bottom[i - 1]) : at(L.xd);
    dv.linear_backward(B, bottom_[i].in, bottom_[i].out, xin, P + bottom_[i].w, at(L.bottom[i]), bottom_[i].relu,
                       g[cur], G + bottom_[i].w, G + bottom_[i].b, i > 0 ? g[1 - cur] : nullptr);
    ready(bottom_[i].w);
    cur = 1 - cur;
  }
  return loss;
}

void DenseModel::download_grads(int64_t lo, int64_t hi) {
  if (!device_ || hi <= lo) return;
  device_->copy(grads_.data() + lo, device_params_ + num_params_ + lo, (hi - lo) * 4, DenseCopy::device_to_host);
}

void DenseModel::sgd_step_resident(float lr, const float* grad) {
  float* G = device_params_ + num_params_;
  device_->copy(G, grad, num_params_ * 4, DenseCopy::host_to_device);
  device_->sgd_step(num_params_, lr, G, device_params_);
  host_params_stale_ = true;
}

void DenseModel::sync_params_to_host() {
  if (!device_ || !host_params_stale_) return;
  device_->copy(params_.data(), device_params_, num_params_ * 4, DenseCopy::device_to_host);
  host_params_stale_ = false;
}

}  // namespace embedscope::engine
