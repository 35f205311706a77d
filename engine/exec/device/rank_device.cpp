#include "exec/device/rank_device.h"

#include <atomic>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>
#include <string>

#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/kernels/low_rank.h"
#include "embedscope/engine/kernels/row_copy.h"
#include "embedscope/engine/kernels/sparse_grad_core.h"
#include "embedscope/engine/kernels/dist_pack_core.h"
#include "embedscope/engine/kernels/kjt_permute_core.h"
#include "embedscope/engine/kernels/bag_concat_core.h"

namespace embedscope::engine::detail {

namespace {

// The emulated device the calling thread is bound to (bind_thread; -1: none), as a GPU's current
// device (cudaSetDevice) is per thread: a kernel or an asynchronous copy issued on a stream of
// GPU d from a thread whose current device is another GPU fails there (cudaErrorInvalidResourceHandle
// or the work lands on the wrong device), so the stand-in refuses every op from a thread that did
// not bind to its device - the rank's thread and its comm worker both must.
thread_local int tl_bound_device = -1;

class HostRankDevice final : public RankDevice {
 public:
  explicit HostRankDevice(int device) : device_(device), comm_(host_intra_device_ops()) {}
  // The host kernels need no plan: the cache holds the shape itself, so that the stand-in checks
  // what the GPU relies on (every shard prepared at setup, no plan built in a step).
  void prepare_shard(int64_t rows, int64_t cols) const override { plans_.prepare({rows, cols}); }
  DeviceSyncCalls sync_calls() const override { return {0, 0, plans_.misses(), waits_made()}; }
  void* comm_alloc(int64_t bytes) const override {
    check_bound("comm_alloc");
    return comm_->comm_alloc(bytes);
  }
  void comm_free(void* p) const noexcept override { comm_->comm_free(p); }
  void comm_to_device(void* dst, const void* src, int64_t bytes) const override {
    check_bound("comm_to_device");
    count_copy(true, bytes);
    comm_->comm_to_device(dst, src, bytes);
  }
  void comm_to_host(void* dst, const void* src, int64_t bytes) const override {
    check_bound("comm_to_host");
    count_copy(false, bytes);
    comm_->comm_to_host(dst, src, bytes);
  }
  void comm_copy(void* dst, const void* src, int64_t bytes) const override {
    check_bound("comm_copy");
    comm_->comm_copy(dst, src, bytes);
  }
  void comm_add(float* dst, const float* src, int64_t n) const override {
    check_bound("comm_add");
    comm_->comm_add(dst, src, n);
  }
  void comm_sync() const override {
    check_bound("comm_sync");
  }
  void comm_wait_compute() const override { check_bound("comm_wait_compute"); }
  void comm_zero(void* dst, int64_t bytes) const override {
    check_bound("comm_zero");
    comm_->comm_zero(dst, bytes);
  }
  std::string name() const override { return "host memory (emulated device " + std::to_string(device_) + ")"; }
  void bind_thread() const override { tl_bound_device = device_; }
  std::unique_ptr<DeviceAllocator> make_allocator(AllocatorConfig config) const override {
    return DeviceAllocator::create(config);
  }
  void to_device(void* dst, const void* src, int64_t bytes) const override {
    check_bound("to_device");
    count_copy(true, bytes);
    copy(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, int64_t bytes) const override {
    check_bound("to_host");
    count_copy(false, bytes);
    copy(dst, src, bytes);
    if (bytes > 0) wait();  // as the GPU's cudaStreamSynchronize
  }
  // The copy is made at once (host memory), but counted as the GPU's: ready only after a wait
  // for the stream began later, so the stand-in checks where the GPU's bytes would be missing.
  void defer_to_host(const void* src, int64_t bytes) const override {
    check_bound("defer_to_host");
    if (deferred_) throw std::logic_error("defer_to_host: the last deferred copy was not taken");
    if (bytes < 0) throw std::invalid_argument("defer_to_host: " + std::to_string(bytes) + " bytes");
    count_copy(false, bytes);
    const auto* p = static_cast<const char*>(src);
    deferred_.emplace(p, p + bytes);
    deferred_mark_ = wait_mark();
  }
  bool deferred_ready() const override { return deferred_ && waited_since(deferred_mark_); }
  void take_deferred(void* dst) const override {
    check_bound("take_deferred");
    if (!deferred_) throw std::logic_error("take_deferred: no deferred copy is pending");
    if (!waited_since(deferred_mark_)) wait();
    if (!deferred_->empty()) std::memcpy(dst, deferred_->data(), deferred_->size());
    deferred_.reset();
  }
  void lookup(const float* weights, int64_t rows, int64_t cols, const int64_t* ids, const int64_t* offsets,
              int64_t n_bags, const float* scale, float* out) const override {
    check_bound("lookup");
    if (n_bags > 0 && cols > 0) plans_.get({rows, cols});  // as the GPU, which returns before
    pooled_lookup(weights, rows, cols, ids, offsets, n_bags, scale, out, cols);
  }
  void update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1, float* momentum2,
              int64_t rows, int64_t cols, const int64_t* row_ids, const int64_t* offsets, int64_t n,
              const float* values) const override {
    check_bound("update");
    if (n > 0 && cols > 0) plans_.get({rows, cols});
    SparseGrad g;
    g.dim = cols;
    for (int64_t i = 0; i < n; ++i) {  // one bag per row, as the GPU kernel reads them
      g.rows.push_back(row_ids[offsets[i]]);
      g.values.insert(g.values.end(), values + i * cols, values + (i + 1) * cols);
    }
    const auto [m1, m2] = optimizer_state_floats(opt.type, rows, cols);
    RowOptimizerState state;  // fp32 state (fp16 / bf16 state goes through update_encoded)
    state.momentum1 = {momentum1, static_cast<size_t>(m1)};
    state.momentum2 = {momentum2, static_cast<size_t>(m2)};
    apply_row_optimizer(opt, iteration, weights, cols, state, g);
  }
  void accumulate_update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1,
                         float* momentum2, int64_t rows, int64_t cols, const SparseGradInput& in,
                         int64_t* unique_count) const override {
    check_bound("accumulate_update");
    if (in.num_bags <= 0 || in.num_ids <= 0) {  // nothing to update, as the GPU's
      *unique_count = 0;
      return;
    }
    if (in.offsets[in.num_bags] != in.num_ids)
      throw std::invalid_argument("accumulate_update: num_ids " + std::to_string(in.num_ids) + " but offsets end at " +
                                  std::to_string(in.offsets[in.num_bags]));
    // the kernel's algorithm and arithmetic, on the host (sparse_grad_core.h)
    sparse_grad_core::Accumulated a = sparse_grad_core::accumulate_sorted(
        rows, cols, in.ids, in.offsets, in.num_bags, in.bags_per_part, in.scale, in.grad, in.grad_stride);
    *unique_count = static_cast<int64_t>(a.rows.size());
    if (a.rows.empty() || cols <= 0) return;
    plans_.get({rows, cols});  // as the GPU's tbe_backward_update
    SparseGrad g;
    g.dim = cols;
    g.rows = std::move(a.rows);
    g.values = std::move(a.values);
    const auto [m1, m2] = optimizer_state_floats(opt.type, rows, cols);
    RowOptimizerState state;
    state.momentum1 = {momentum1, momentum1 ? static_cast<size_t>(m1) : 0};
    state.momentum2 = {momentum2, momentum2 ? static_cast<size_t>(m2) : 0};
    apply_row_optimizer(opt, iteration, weights, cols, state, g);
  }
  // the stand-in's plans are shapes, whatever the type (the GPU's fp16 / bf16 plans are shapes too)
  void prepare_encoded_shard(int64_t rows, int64_t cols, TableDataType) const override { plans_.prepare({rows, cols}); }
  void lookup_encoded(TableDataType type, const uint8_t* rows, int64_t num_rows, int64_t cols, const int64_t* ids,
                      const int64_t* offsets, int64_t n_bags, const float* scale, float* out) const override {
    check_bound("lookup_encoded");
    if (n_bags > 0 && cols > 0) plans_.get({num_rows, cols});
    pooled_lookup_encoded(type, rows, num_rows, cols, ids, offsets, n_bags, scale, out, cols);
  }
  void update_encoded(const OptimizerSpec& opt, int64_t iteration, const EncodedShardView& sh, const int64_t* row_ids,
                      int64_t n, const float* values, QuantError* err) const override {
    check_bound("update_encoded");
    if (n > 0 && sh.cols > 0) plans_.get({sh.num_rows, sh.cols});
    SparseGrad g;
    g.dim = sh.cols;
    g.rows.assign(row_ids, row_ids + n);
    g.values.assign(values, values + n * sh.cols);
    const auto [m1, m2] = optimizer_state_floats(opt.type, sh.num_rows, sh.cols);
    RowOptimizerState state;
    state.type = sh.state_type;
    if (sh.state_type == OptimizerStateType::fp32) {
      state.momentum1 = {static_cast<float*>(sh.state1), sh.state1 ? static_cast<size_t>(m1) : 0};
      state.momentum2 = {static_cast<float*>(sh.state2), sh.state2 ? static_cast<size_t>(m2) : 0};
    } else {
      state.packed1 = {static_cast<uint8_t*>(sh.state1), sh.state1 ? static_cast<size_t>(2 * m1) : 0};
      state.packed2 = {static_cast<uint8_t*>(sh.state2), sh.state2 ? static_cast<size_t>(2 * m2) : 0};
    }
    apply_row_optimizer_encoded(opt, iteration, sh.data_type, sh.rows, sh.cols, state, g,
                                sh.data_type == TableDataType::fp32 ? nullptr : err, sh.sr);
    if (n > 0 && sh.cols > 0 && err && sh.data_type != TableDataType::fp32) {  // the GPU reads the errors back:
      count_copy(false, 2 * n * static_cast<int64_t>(sizeof(float)));        // 2 floats a row, one copy
      wait();                                                                  // for which it waits
    }
  }
  void linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, bool relu,
                      float* y) const override {
    check_bound("linear_forward");
    engine::linear_forward(B, in, out, x, w, b, relu, y);
  }
  void linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y, bool relu,
                       float* dy, float* dw, float* db, float* dx) const override {
    check_bound("linear_backward");
    engine::linear_backward(B, in, out, x, w, y, relu, dy, dw, db, dx);
  }
  double bce_loss(int64_t B, const float* logits, const float* labels, float* dlogits) const override {
    check_bound("bce_loss");
    count_copy(false, static_cast<int64_t>(sizeof(double)));  // the loss back, as the GPU's
    const double loss = engine::bce_with_logits(B, logits, labels, dlogits);
    wait();  // the GPU waits for the loss
    return loss;
  }
  void sgd_step(int64_t n, float lr, const float* grad, float* params) const override {
    check_bound("sgd_step");
    engine::sgd_step(n, lr, grad, params);
  }
  void dot_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) const override {
    check_bound("dot_forward");
    engine::dot_interaction_forward(B, F, d0, x0, r);
  }
  void dot_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) const override {
    check_bound("dot_backward");
    engine::dot_interaction_backward(B, F, d0, x0, dr, dx0);
  }
  void copy_on_device(void* dst, const void* src, int64_t bytes) const override { copy(dst, src, bytes); }
  void copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes, int64_t rows,
               CopyKind kind) const override {
    check_bound("copy_2d");
    if (rows <= 0 || width_bytes <= 0) return;
    if (kind != CopyKind::device_to_device) count_copy(kind == CopyKind::host_to_device, width_bytes * rows);
    if (dst_pitch < width_bytes || src_pitch < width_bytes)
      throw std::invalid_argument("copy_2d: a pitch below the width (" + std::to_string(width_bytes) + " B)");
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch,
                  static_cast<size_t>(width_bytes));
    if (kind == CopyKind::device_to_host) wait();  // as the GPU's
  }
  void scale_copy_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                     float s) const override {
    check_bound("scale_copy_2d");
    dist_pack_core::scale_copy_2d(rows, width, src, src_stride, dst, dst_stride, s);
  }
  void add_scale_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                         int64_t dst_stride, const float* row_scale, bool accumulate) const override {
    check_bound("add_scale_rows_2d");
    dist_pack_core::add_scale_rows_2d(rows, width, src, src_stride, dst, dst_stride, row_scale, accumulate);
  }
  void scale_copy_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                          int64_t dst_stride, float s, const float* row_scale) const override {
    check_bound("scale_copy_rows_2d");
    dist_pack_core::scale_copy_rows_2d(rows, width, src, src_stride, dst, dst_stride, s, row_scale);
  }
  void* scratch_alloc(int64_t bytes) const override {
    check_bound("scratch_alloc");
    return bytes > 0 ? new char[static_cast<size_t>(bytes)] : nullptr;
  }
  void scratch_free(void* p) const noexcept override { delete[] static_cast<char*>(p); }
  int64_t bucketize(const int64_t* values, const int64_t* offsets, int64_t num_features, int64_t batch_size,
                    std::span<const BucketSlot> slots, int64_t* lengths, int64_t* ids, int64_t ids_capacity,
                    int64_t* splits, const BucketSlot* device_slots) const override {
    check_bound("bucketize");
    if (device_slots) {  // the list kept on the device: the same as the host's (else a stale one)
      for (size_t s = 0; s < slots.size(); ++s) {
        const BucketSlot& d = device_slots[s];
        if (d.feature != slots[s].feature || d.row_wise != slots[s].row_wise || d.row_begin != slots[s].row_begin ||
            d.num_rows != slots[s].num_rows)
          throw std::logic_error("bucketize: slot " + std::to_string(s) +
                                 " of the list on the device differs from the host's (a list of another plan)");
      }
    } else {
      count_copy(true, static_cast<int64_t>(slots.size() * sizeof(BucketSlot)));  // the GPU copies the list
    }
    count_copy(false, static_cast<int64_t>(sizeof(int64_t)));  // the count read back, as the GPU's
    wait();                                                       // for which the GPU waits
    if (num_features < 0 || batch_size < 0)
      throw std::invalid_argument("bucketize: num_features " + std::to_string(num_features) + " and batch_size " +
                                  std::to_string(batch_size) + " must be >= 0");
    const int64_t bags = num_features * batch_size;
    const BucketizedKjt r = bucketize_kjt(std::span(values, static_cast<size_t>(offsets[bags])),
                                          std::span(offsets, static_cast<size_t>(bags + 1)), batch_size, slots);
    const auto n = static_cast<int64_t>(r.ids.size());
    if (n > ids_capacity)
      throw std::length_error("bucketize: " + std::to_string(n) + " ids do not fit ids_capacity " +
                              std::to_string(ids_capacity));
    std::copy(r.lengths.begin(), r.lengths.end(), lengths);
    std::copy(r.ids.begin(), r.ids.end(), ids);
    std::copy(r.splits.begin(), r.splits.end(), splits);
    return n;
  }
  void kjt_permute(int64_t W, int64_t P, int64_t B, const int64_t* lengths_in, const int64_t* ids_in, int64_t num_ids,
                   int64_t* ids_out, int64_t* offsets_out) const override {
    check_bound("kjt_permute");
    kjt_permute_core::permute(W, P, B, lengths_in, ids_in, num_ids, ids_out, offsets_out);
  }
  void concat_bags(std::span<const BagPart> parts, int64_t bags_per_part, int64_t* ids_out,
                   int64_t* offsets_out) const override {
    check_bound("concat_bags");
    bag_concat_core::concat(parts, bags_per_part, ids_out, offsets_out);
  }
  // host memory is the device's: nothing to pin, the rows copied by the CPU reference
  void* pin_host(void* host, int64_t, const std::string&) const override { return host; }
  void unpin_host(void*, int64_t) const noexcept override {}
  void copy_rows(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows, float* dst,
                 float* dst_alt, const int64_t* dst_rows, bool wait_for_it) const override {
    check_bound("copy_rows");
    engine::copy_rows(n, dim, src, src_alt, src_rows, dst, dst_alt, dst_rows);
    if (wait_for_it) wait();  // the GPU's cudaStreamSynchronize
  }
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
  // Throws std::logic_error when the calling thread is not bound to this device (tl_bound_device).
  void check_bound(const char* call) const {
    if (tl_bound_device != device_)
      throw std::logic_error(
          std::string(call) + " on emulated device " + std::to_string(device_) + " from a thread bound to " +
          (tl_bound_device < 0 ? std::string("no device") : "device " + std::to_string(tl_bound_device)) +
          " (RankDevice::bind_thread first: on a GPU its stream belongs to another current device)");
  }
  // A wait for the compute stream, counted as the GPU's (nothing to wait for: host memory).
  void wait() const { end_wait(begin_wait()); }
  int device_;
  std::unique_ptr<IntraDeviceOps> comm_;
  mutable std::optional<std::vector<char>> deferred_;  // defer_to_host's bytes until taken
  mutable int64_t deferred_mark_ = 0;
  mutable ShardPlanCache<ShardShape> plans_{[](const ShardShape& s) { return std::make_unique<ShardShape>(s); }};
  static void copy(void* dst, const void* src, int64_t bytes) {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
};

}  // namespace

std::unique_ptr<RankDevice> host_rank_device(int device) { return std::make_unique<HostRankDevice>(device); }

namespace {
std::atomic<int64_t> g_host_cache_copy_calls{0};

class RankCacheDevice final : public HostCacheDevice {
 public:
  explicit RankCacheDevice(const RankDevice& d) : d_(d) {}
  void to_device(void* dev, const void* host, int64_t bytes) const override {
    g_host_cache_copy_calls.fetch_add(1);
    d_.to_device(dev, host, bytes);
  }
  void to_host(void* host, const void* dev, int64_t bytes) const override {
    g_host_cache_copy_calls.fetch_add(1);
    d_.to_host(host, dev, bytes);
  }
  void on_device(void* dst, const void* src, int64_t bytes) const override {
    g_host_cache_copy_calls.fetch_add(1);
    d_.copy_on_device(dst, src, bytes);
  }
  void copy_rows(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows, float* dst,
                 float* dst_alt, const int64_t* dst_rows, bool wait) const override {
    g_host_cache_copy_calls.fetch_add(1);
    d_.copy_rows(n, dim, src, src_alt, src_rows, dst, dst_alt, dst_rows, wait);
  }
  void* pin_host(void* host, int64_t bytes, const std::string& what) const override {
    return d_.pin_host(host, bytes, what);
  }
  void unpin_host(void* host, int64_t bytes) const noexcept override { d_.unpin_host(host, bytes); }
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

int64_t host_cache_copy_calls() { return g_host_cache_copy_calls.load(); }

namespace {
std::atomic<int64_t> g_warmup_sync_calls{0}, g_measured_sync_calls{0}, g_warmup_waits{0}, g_measured_waits{0};
}  // namespace

void add_step_sync_calls(bool measured, int64_t calls, int64_t waits) {
  (measured ? g_measured_sync_calls : g_warmup_sync_calls).fetch_add(calls);
  (measured ? g_measured_waits : g_warmup_waits).fetch_add(waits);
}

StepSyncCallTotals step_sync_call_totals() {
  return {g_warmup_sync_calls.load(), g_measured_sync_calls.load(), g_warmup_waits.load(), g_measured_waits.load()};
}

namespace {
// Process-wide running CopyTotals.
class CopyCounter {
 public:
  void add(const CopyTotals& c) {
    h2d_.fetch_add(c.host_to_device);
    d2h_.fetch_add(c.device_to_host);
    h2d_bytes_.fetch_add(c.host_to_device_bytes);
    d2h_bytes_.fetch_add(c.device_to_host_bytes);
  }
  CopyTotals totals() const { return {h2d_.load(), d2h_.load(), h2d_bytes_.load(), d2h_bytes_.load()}; }

 private:
  std::atomic<int64_t> h2d_{0}, d2h_{0}, h2d_bytes_{0}, d2h_bytes_{0};
};
CopyCounter g_dense_copies, g_sparse_grad_copies, g_step_copies;
}  // namespace

void add_dense_copies(const DenseCopyTotals& step) { g_dense_copies.add(step); }
DenseCopyTotals dense_copy_totals() { return g_dense_copies.totals(); }
void add_sparse_grad_copies(const SparseGradCopyTotals& c) { g_sparse_grad_copies.add(c); }
SparseGradCopyTotals sparse_grad_copy_totals() { return g_sparse_grad_copies.totals(); }
void add_step_copies(const CopyTotals& step) { g_step_copies.add(step); }
CopyTotals step_copy_totals() { return g_step_copies.totals(); }

}  // namespace embedscope::engine::detail
