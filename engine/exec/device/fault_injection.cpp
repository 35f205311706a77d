#include "exec/device/fault_injection.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/engine/kernels/cuda_kernels.h"

namespace embedscope::engine::detail {

namespace {

constexpr const char* kVar = "EMBEDSCOPE_INJECT_DEVICE_FAULT";

// cudaGetErrorString's texts of the errors a test may inject (CUDA runtime API, cudaError_t).
const std::map<std::string, std::string>& injectable_errors() {
  static const std::map<std::string, std::string> m{
      {"cudaErrorLaunchFailure", "unspecified launch failure"},
      {"cudaErrorIllegalAddress", "an illegal memory access was encountered"},
      {"cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable"},
      {"cudaErrorNoDevice", "no CUDA-capable device is detected"}};
  return m;
}

class FaultyDevice final : public RankDevice {
 public:
  FaultyDevice(std::unique_ptr<RankDevice> inner, DeviceFault fault) : in_(std::move(inner)), fault_(std::move(fault)) {}

  std::string name() const override { return in_->name(); }
  void bind_thread() const override { in_->bind_thread(); }
  std::unique_ptr<DeviceAllocator> make_allocator(AllocatorConfig config) const override {
    return in_->make_allocator(std::move(config));
  }
  void prepare_shard(int64_t rows, int64_t cols) const override { in_->prepare_shard(rows, cols); }
  DeviceSyncCalls sync_calls() const override { return in_->sync_calls(); }
  void to_device(void* dst, const void* src, int64_t bytes) const override {
    maybe_fail("to_device");
    in_->to_device(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, int64_t bytes) const override {
    maybe_fail("to_host");
    in_->to_host(dst, src, bytes);
  }
  // a copy back too (injectable as to_host); taking it is not injectable (its wait may fail on
  // a GPU as any wait does)
  void defer_to_host(const void* src, int64_t bytes) const override {
    maybe_fail("to_host");
    in_->defer_to_host(src, bytes);
  }
  bool deferred_ready() const override { return in_->deferred_ready(); }
  void take_deferred(void* dst) const override { in_->take_deferred(dst); }
  void lookup(const float* weights, int64_t rows, int64_t cols, const int64_t* ids, const int64_t* offsets,
              int64_t n_bags, const float* scale, float* out) const override {
    maybe_fail("lookup");
    in_->lookup(weights, rows, cols, ids, offsets, n_bags, scale, out);
  }
  void prepare_encoded_shard(int64_t rows, int64_t cols, TableDataType type) const override {
    in_->prepare_encoded_shard(rows, cols, type);
  }
  void lookup_encoded(TableDataType type, const uint8_t* rows, int64_t num_rows, int64_t cols, const int64_t* ids,
                      const int64_t* offsets, int64_t n_bags, const float* scale, float* out) const override {
    maybe_fail("lookup");
    in_->lookup_encoded(type, rows, num_rows, cols, ids, offsets, n_bags, scale, out);
  }
  void update_encoded(const OptimizerSpec& opt, int64_t iteration, const EncodedShardView& shard,
                      const int64_t* row_ids, int64_t n, const float* values, QuantError* err) const override {
    maybe_fail("update");
    in_->update_encoded(opt, iteration, shard, row_ids, n, values, err);
  }
  void update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1, float* momentum2,
              int64_t rows, int64_t cols, const int64_t* row_ids, const int64_t* offsets, int64_t n,
              const float* values) const override {
    maybe_fail("update");
    in_->update(opt, iteration, weights, momentum1, momentum2, rows, cols, row_ids, offsets, n, values);
  }
  void accumulate_update(const OptimizerSpec& opt, int64_t iteration, float* weights, float* momentum1,
                         float* momentum2, int64_t rows, int64_t cols, const SparseGradInput& in,
                         int64_t* unique_count) const override {
    maybe_fail("update");
    in_->accumulate_update(opt, iteration, weights, momentum1, momentum2, rows, cols, in, unique_count);
  }
  void linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, bool relu,
                      float* y) const override {
    maybe_fail("linear_forward");
    in_->linear_forward(B, in, out, x, w, b, relu, y);
  }
  void linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y, bool relu,
                       float* dy, float* dw, float* db, float* dx) const override {
    maybe_fail("linear_backward");
    in_->linear_backward(B, in, out, x, w, y, relu, dy, dw, db, dx);
  }
  // not injectable (injectable_device_calls): the copies around them are
  double bce_loss(int64_t B, const float* logits, const float* labels, float* dlogits) const override {
    return in_->bce_loss(B, logits, labels, dlogits);
  }
  void sgd_step(int64_t n, float lr, const float* grad, float* params) const override {
    in_->sgd_step(n, lr, grad, params);
  }
  void dot_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r) const override {
    in_->dot_forward(B, F, d0, x0, r);
  }
  void dot_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0) const override {
    in_->dot_backward(B, F, d0, x0, dr, dx0);
  }
  void copy_on_device(void* dst, const void* src, int64_t bytes) const override { in_->copy_on_device(dst, src, bytes); }
  void copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width_bytes, int64_t rows,
               CopyKind kind) const override {
    in_->copy_2d(dst, dst_pitch, src, src_pitch, width_bytes, rows, kind);
  }
  void scale_copy_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                     float s) const override {
    in_->scale_copy_2d(rows, width, src, src_stride, dst, dst_stride, s);
  }
  void add_scale_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                         int64_t dst_stride, const float* row_scale, bool accumulate) const override {
    in_->add_scale_rows_2d(rows, width, src, src_stride, dst, dst_stride, row_scale, accumulate);
  }
  void scale_copy_rows_2d(int64_t rows, int64_t width, const float* src, int64_t src_stride, float* dst,
                          int64_t dst_stride, float s, const float* row_scale) const override {
    in_->scale_copy_rows_2d(rows, width, src, src_stride, dst, dst_stride, s, row_scale);
  }
  void* scratch_alloc(int64_t bytes) const override { return in_->scratch_alloc(bytes); }
  void scratch_free(void* p) const noexcept override { in_->scratch_free(p); }
  int64_t bucketize(const int64_t* values, const int64_t* offsets, int64_t num_features, int64_t batch_size,
                    std::span<const BucketSlot> slots, int64_t* lengths, int64_t* ids, int64_t ids_capacity,
                    int64_t* splits, const BucketSlot* device_slots) const override {
    return in_->bucketize(values, offsets, num_features, batch_size, slots, lengths, ids, ids_capacity, splits,
                          device_slots);
  }
  void kjt_permute(int64_t W, int64_t P, int64_t B, const int64_t* lengths_in, const int64_t* ids_in, int64_t num_ids,
                   int64_t* ids_out, int64_t* offsets_out) const override {
    in_->kjt_permute(W, P, B, lengths_in, ids_in, num_ids, ids_out, offsets_out);
  }
  void concat_bags(std::span<const BagPart> parts, int64_t bags_per_part, int64_t* ids_out,
                   int64_t* offsets_out) const override {
    in_->concat_bags(parts, bags_per_part, ids_out, offsets_out);
  }
  void* pin_host(void* host, int64_t bytes, const std::string& what) const override {
    return in_->pin_host(host, bytes, what);
  }
  void unpin_host(void* host, int64_t bytes) const noexcept override { in_->unpin_host(host, bytes); }
  void copy_rows(int64_t n, int64_t dim, const float* src, const float* src_alt, const int64_t* src_rows, float* dst,
                 float* dst_alt, const int64_t* dst_rows, bool wait) const override {
    in_->copy_rows(n, dim, src, src_alt, src_rows, dst, dst_alt, dst_rows, wait);
  }
  void low_rank_lookup(const float* a, int64_t rows, int64_t r, const float* b, int64_t dim, const int64_t* ids,
                       const int64_t* offsets, int64_t n_bags, const float* scale, float* p, float* out) const override {
    in_->low_rank_lookup(a, rows, r, b, dim, ids, offsets, n_bags, scale, p, out);
  }
  void low_rank_backward(const float* a, int64_t r, const float* b, int64_t dim, const int64_t* row_ids, int64_t n,
                         const float* g, float* da, float* db) const override {
    in_->low_rank_backward(a, r, b, dim, row_ids, n, g, da, db);
  }
  void* comm_alloc(int64_t bytes) const override { return in_->comm_alloc(bytes); }
  void comm_free(void* p) const noexcept override { in_->comm_free(p); }
  void comm_to_device(void* dst, const void* src, int64_t bytes) const override { in_->comm_to_device(dst, src, bytes); }
  void comm_to_host(void* dst, const void* src, int64_t bytes) const override {
    maybe_fail("comm_to_host");
    in_->comm_to_host(dst, src, bytes);
  }
  void comm_copy(void* dst, const void* src, int64_t bytes) const override {
    maybe_fail("comm_copy");
    in_->comm_copy(dst, src, bytes);
  }
  void comm_add(float* dst, const float* src, int64_t n) const override {
    maybe_fail("comm_add");
    in_->comm_add(dst, src, n);
  }
  void comm_zero(void* dst, int64_t bytes) const override { in_->comm_zero(dst, bytes); }
  void comm_sync() const override {
    maybe_fail("comm_sync");
    in_->comm_sync();
  }
  void comm_wait_compute() const override { in_->comm_wait_compute(); }
  CopyTotals copies() const override { return in_->copies(); }

 private:
  // The rank's device is used by its worker and its comm worker: count calls atomically.
  void maybe_fail(const char* call) const {
    if (fault_.call != call) return;
    if (calls_.fetch_add(1) + 1 != fault_.nth) return;
    throw cuda::CudaError(fmt::format("{} failed: {} ({}) [injected: {}={}:{}:{}:{}]", call, fault_.error,
                                      injectable_errors().at(fault_.error), kVar, fault_.rank, fault_.call, fault_.nth,
                                      fault_.error));
  }

  std::unique_ptr<RankDevice> in_;
  DeviceFault fault_;
  mutable std::atomic<int64_t> calls_{0};
};

}  // namespace

const std::vector<std::string>& injectable_device_calls() {
  static const std::vector<std::string> v{"lookup",  "update",       "linear_forward", "linear_backward", "to_device",
                                          "to_host", "comm_copy",    "comm_add",       "comm_to_host",    "comm_sync"};
  return v;
}

DeviceFault parse_device_fault(const std::string& value, int world_size) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument(fmt::format("{}={}: {} (expected RANK:CALL:N[:ERROR])", kVar, value, why));
  };
  std::vector<std::string> parts;
  for (size_t from = 0;;) {
    const size_t colon = value.find(':', from);
    parts.push_back(value.substr(from, colon == std::string::npos ? std::string::npos : colon - from));
    if (colon == std::string::npos) break;
    from = colon + 1;
  }
  if (parts.size() < 3 || parts.size() > 4) throw bad(fmt::format("{} field(s)", parts.size()));
  auto whole = [&](const std::string& s, const char* what) -> int64_t {
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (s.empty() || used != s.size()) throw bad(fmt::format("{} '{}' is not a whole number", what, s));
    return v;
  };
  DeviceFault f;
  const int64_t rank = whole(parts[0], "RANK");
  if (rank < 0 || rank >= world_size)
    throw bad(fmt::format("rank {} is not a rank of this run (0 to {})", rank, world_size - 1));
  f.rank = static_cast<int>(rank);
  f.call = parts[1];
  const auto& calls = injectable_device_calls();
  if (std::find(calls.begin(), calls.end(), f.call) == calls.end())
    throw bad(fmt::format("'{}' is not a device call ({})", f.call, fmt::join(calls, ", ")));
  f.nth = whole(parts[2], "N");
  if (f.nth < 1) throw bad(fmt::format("N {} is not >= 1 (the first call is 1)", f.nth));
  if (parts.size() == 4) {
    if (!injectable_errors().count(parts[3])) {
      std::vector<std::string> names;
      for (const auto& [k, v] : injectable_errors()) names.push_back(k);
      throw bad(fmt::format("'{}' is not an error that can be injected ({})", parts[3], fmt::join(names, ", ")));
    }
    f.error = parts[3];
  }
  return f;
}

std::optional<DeviceFault> device_fault_from_env(int world_size) {
  const char* v = std::getenv(kVar);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return parse_device_fault(v, world_size);
}

void inject_device_fault(std::vector<std::unique_ptr<RankDevice>>& devices, const DeviceFault& fault) {
  auto& d = devices.at(static_cast<size_t>(fault.rank));
  if (d) d = std::make_unique<FaultyDevice>(std::move(d), fault);  // null: the rank runs in another process
}

}  // namespace embedscope::engine::detail
