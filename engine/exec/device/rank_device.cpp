#include "exec/device/rank_device.h"

#include <atomic>
#include <cstring>

#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/kernels/low_rank.h"

namespace embedscope::engine::detail {

namespace {

class HostRankDevice final : public RankDevice {
 public:
  explicit HostRankDevice(int device) : device_(device), comm_(host_intra_device_ops()) {}
  // The host kernels need no plan: the cache holds the shape itself, so that the stand-in checks
  // what the GPU relies on (every shard prepared at setup, no plan built in a step).
  void prepare_shard(int64_t rows, int64_t cols) const override { plans_.prepare({rows, cols}); }
  DeviceSyncCalls sync_calls() const override { return {0, 0, plans_.misses()}; }
  void* comm_alloc(int64_t bytes) const override { return comm_->comm_alloc(bytes); }
  void comm_free(void* p) const noexcept override { comm_->comm_free(p); }
  void comm_to_device(void* dst, const void* src, int64_t bytes) const override { comm_->comm_to_device(dst, src, bytes); }
  void comm_to_host(void* dst, const void* src, int64_t bytes) const override { comm_->comm_to_host(dst, src, bytes); }
  void comm_copy(void* dst, const void* src, int64_t bytes) const override { comm_->comm_copy(dst, src, bytes); }
  void comm_add(float* dst, const float* src, int64_t n) const override { comm_->comm_add(dst, src, n); }
  void comm_sync() const override {}
  std::string name() const override { return "host memory (emulated device " + std::to_string(device_) + ")"; }
  void bind_thread() const override {}
  std::unique_ptr<DeviceAllocator> make_allocator(AllocatorConfig config) const override {
    return DeviceAllocator::create(config);
  }
  void to_device(void* dst, const void* src, int64_t bytes) const override { copy(dst, src, bytes); }
  void to_host(void* dst, const void* src, int64_t bytes) const override { copy(dst, src, bytes); }
  void lookup(const float* weights, int64_t rows, int64_t cols, const int64_t* ids, const int64_t* offsets,
              int64_t n_bags, const float* scale, float* out) const override {
    if (n_bags > 0 && cols > 0) plans_.get({rows, cols});  // as the GPU, which returns before
    pooled_lookup(weights, rows, cols, ids, offsets, n_bags, scale, out, cols);
  }
  void update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1, float* momentum2,
              int64_t rows, int64_t cols, const int64_t* row_ids, const int64_t* offsets, int64_t n,
              const float* values) const override {
    if (n > 0 && cols > 0) plans_.get({rows, cols});
    SparseGrad g;
    g.dim = cols;
    for (int64_t i = 0; i < n; ++i) {  // one bag per row, as the GPU kernel reads them
      g.rows.push_back(row_ids[offsets[i]]);
      g.values.insert(g.values.end(), values + i * cols, values + (i + 1) * cols);
    }
    const auto [m1, m2] = optimizer_state_floats(opt.type, rows, cols);
    RowOptimizerState state;  // fp32 state (the device path runs fp32 optimizer state only)
    state.momentum1 = {momentum1, static_cast<size_t>(m1)};
    state.momentum2 = {momentum2, static_cast<size_t>(m2)};
    apply_row_optimizer(opt, iteration, weights, cols, state, g);
  }
  void linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, bool relu,
                      float* y) const override {
    engine::linear_forward(B, in, out, x, w, b, relu, y);
  }
  void linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y, bool relu,
                       float* dy, float* dw, float* db, float* dx) const override {
    engine::linear_backward(B, in, out, x, w, y, relu, dy, dw, db, dx);
  }
  double bce_loss(int64_t B, const float* logits, const float* labels, float* dlogits) const override {
    return engine::bce_with_logits(B, logits, labels, dlogits);
  }
  void sgd_step(int64_t n, float lr, const float* grad, float* params) const override {
    engine::sgd_step(n, lr, grad, params);
  }
  void dot_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) const override {
    engine::dot_interaction_forward(B, F, d0, x0, r);
  }
  void dot_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) const override {
    engine::dot_interaction_backward(B, F, d0, x0, dr, dx0);
  }
  void copy_on_device(void* dst, const void* src, int64_t bytes) const override { copy(dst, src, bytes); }
  // the host kernels themselves (bit for bit the cpu backend's); p is not needed there
  void low_rank_lookup(const float* a, int64_t rows, int64_t r, const float* b, int64_t dim, const int64_t* ids,
                       const int64_t* offsets, int64_t n_bags, const float* scale, float*, float* out) const override {
    if (n_bags > 0 && r > 0) plans_.get({rows, r});  // as the GPU's A lookup
    low_rank_pooled_lookup(a, rows, r, b, dim, ids, offsets, n_bags, scale, out, dim);
  }
  void low_rank_backward(const float* a, int64_t r, const float* b, int64_t dim, const int64_t* row_ids, int64_t n,
                         const float* g, float* da, float* db) const override {
    SparseGrad grad;
    grad.dim = dim;
    grad.rows.assign(row_ids, row_ids + n);
    grad.values.assign(g, g + n * dim);
    const auto [ga, gb] = engine::low_rank_backward(a, r, b, dim, grad);
    std::copy(ga.values.begin(), ga.values.end(), da);
    if (gb.values.empty()) std::fill_n(db, r * dim, 0.0f);
    else std::copy(gb.values.begin(), gb.values.end(), db);
  }

 private:
  int device_;
  std::unique_ptr<IntraDeviceOps> comm_;
  mutable ShardPlanCache<ShardShape> plans_{[](const ShardShape& s) { return std::make_unique<ShardShape>(s); }};
  static void copy(void* dst, const void* src, int64_t bytes) {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
};

}  // namespace

std::unique_ptr<RankDevice> host_rank_device(int device) { return std::make_unique<HostRankDevice>(device); }

namespace {
class RankCacheDevice final : public HostCacheDevice {
 public:
  explicit RankCacheDevice(const RankDevice& d) : d_(d) {}
  void to_device(void* dev, const void* host, int64_t bytes) const override { d_.to_device(dev, host, bytes); }
  void to_host(void* host, const void* dev, int64_t bytes) const override { d_.to_host(host, dev, bytes); }
  void on_device(void* dst, const void* src, int64_t bytes) const override { d_.copy_on_device(dst, src, bytes); }
  void update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1, float* momentum2,
              int64_t rows, int64_t cols, const int64_t* row_ids, const int64_t* offsets, int64_t n,
              const float* values) const override {
    d_.update(opt, iteration, weights, momentum1, momentum2, rows, cols, row_ids, offsets, n, values);
  }

 private:
  const RankDevice& d_;
};
}  // namespace

std::unique_ptr<HostCacheDevice> host_cache_device(const RankDevice& device) {
  return std::make_unique<RankCacheDevice>(device);
}

namespace {
std::atomic<int64_t> g_warmup_sync_calls{0}, g_measured_sync_calls{0};
}  // namespace

void add_step_sync_calls(bool measured, int64_t calls) {
  (measured ? g_measured_sync_calls : g_warmup_sync_calls).fetch_add(calls);
}

StepSyncCallTotals step_sync_call_totals() { return {g_warmup_sync_calls.load(), g_measured_sync_calls.load()}; }

}  // namespace embedscope::engine::detail
