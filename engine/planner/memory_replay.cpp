// The memory estimate's replay of one rank's buffers (memory_replay.h), in the order the
// threaded executor takes and gives them back: exec/threaded/rank_setup.cpp (setup), rank_input.cpp and
// rank_shards.cpp (kjt_permute, lookup), the sharding modules' ops (output and grad dist, updates),
// rank_dist.cpp (the output dist's finish), rank_train.cpp (the train phase's own ops). A change to those allocations changes this file; the matrix test
// (tests/engine/planner/memory_matrix_test.cpp) compares the two.
#include "planner/memory_replay.h"

#include "embedscope/engine/input/realized_share.h"

#include "embedscope/engine/model/host_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "embedscope/engine/input/hashing.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/input/source.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/quant/dense_precision.h"
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/quant/row_codec.h"
#include "program/data_parallel_bytes.h"

namespace embedscope::engine::detail {

BagMoments bag_length_moments(const PoolingFactor& p) {
  if (p.mean <= 0) return {};
  if (p.fixed) return {std::floor(p.mean), 0.0};
  // Poisson(mean) clamped to max: P(k) for k < max, the rest of the mass at max
  double pk = std::exp(-p.mean), below = 0, m1 = 0, m2 = 0;
  for (int64_t k = 0; k < p.max; ++k) {
    below += pk;
    m1 += static_cast<double>(k) * pk;
    m2 += static_cast<double>(k) * static_cast<double>(k) * pk;
    pk *= p.mean / static_cast<double>(k + 1);
  }
  const double tail = std::max(0.0, 1.0 - below), mx = static_cast<double>(p.max);
  m1 += mx * tail;
  m2 += mx * mx * tail;
  return {m1, std::max(0.0, m2 - m1 * m1)};
}

double SlotShares::share(const WorkloadSpec& spec, const Slot& sl) const {
  const TableSpec& t = spec.tables[static_cast<size_t>(sl.table)];
  if (!sl.bucketize_by_rows || sl.s.num_rows == t.rows()) return 1.0;
  return realized_id_share(spec, t, sl.feature, sl.s.row_offset, sl.s.num_rows);
}

int64_t received_ids_quantile(const WorkloadSpec& spec, const Layout& L, const SlotShares& shares, int rank, double z) {
  const double bags = static_cast<double>(L.world) * static_cast<double>(L.B);  // every source rank's B bags
  double mean = 0, var = 0, most = 0;
  for (int k : L.slots_to[static_cast<size_t>(rank)]) {
    const Slot& sl = L.slots[static_cast<size_t>(k)];
    const FeatureSpec& f = spec.features[static_cast<size_t>(sl.feature)];
    const double p = shares.share(spec, sl);
    const BagMoments m = bag_length_moments(f.pooling_factor);
    // a bag's ids in the slot: its length thinned by p (each id independently in the range)
    mean += bags * m.mean * p;
    var += bags * (p * p * m.variance + p * (1 - p) * m.mean);
    most += bags * static_cast<double>(f.pooling_factor.fixed ? static_cast<int64_t>(f.pooling_factor.mean)
                                                              : f.pooling_factor.max);
  }
  return static_cast<int64_t>(std::ceil(std::min(most, mean + z * std::sqrt(var))));
}

namespace {
// A recorded input's batches (input kind kjt) as the replay needs them: per iteration (warm-up
// and measured) and feature, the rows of the global batch (every rank's bags), sorted, with
// duplicates and distinct: out-of-range ids clamped into the table (the invalid_ids policies drop
// or clamp them: at most this many) and hashed tables' ids hashed (input/hashing.h). Read once
// per file, batch size, world and iteration count (plan --auto replays many plans), under a lock.
struct RecordedRows {
  std::vector<std::vector<std::vector<int64_t>>> all, distinct;  // [iteration][feature]
};

std::shared_ptr<const RecordedRows> recorded_rows(const WorkloadSpec& spec) {
  static std::mutex lock;
  static std::map<std::string, std::shared_ptr<const RecordedRows>> cache;
  std::error_code ec;
  const std::string& path = spec.input.paths.front();
  const auto stamp = std::filesystem::last_write_time(path, ec).time_since_epoch().count();
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}", path, ec ? 0 : stamp, spec.batch_size, spec.devices.count,
                                spec.warmup_steps + spec.steps, spec.features.size());
  for (const auto& t : spec.tables) key += fmt::format("|{}:{}", t.num_embeddings, t.hash_size);
  const std::lock_guard<std::mutex> g(lock);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  auto out = std::make_shared<RecordedRows>();
  const std::vector<int> table_of = FeatureIndex(spec).table_of_feature();
  const std::unique_ptr<BatchSource> source = make_batch_source(spec);
  const int64_t iterations = spec.warmup_steps + spec.steps;
  for (int64_t it = 0; it < iterations; ++it) {
    std::vector<std::vector<int64_t>> rows(spec.features.size());
    for (int r = 0; r < spec.devices.count; ++r) {
      const Batch b = source->make(it, r);
      for (size_t f = 0; f < spec.features.size() && f < static_cast<size_t>(b.kjt.num_features); ++f) {
        const int t = table_of[f];
        const int64_t n = t >= 0 ? spec.tables[static_cast<size_t>(t)].num_embeddings : 1;
        const int64_t h = t >= 0 ? spec.tables[static_cast<size_t>(t)].hash_size : 0;
        const int64_t first = b.kjt.feature_offset(static_cast<int>(f));
        int64_t len = 0;
        for (int64_t k = 0; k < b.kjt.batch_size; ++k)
          len += b.kjt.lengths[f * static_cast<size_t>(b.kjt.batch_size) + static_cast<size_t>(k)];
        for (int64_t i = first; i < first + len; ++i) {
          const int64_t id = std::clamp<int64_t>(b.kjt.values[static_cast<size_t>(i)], 0, n - 1);
          rows[f].push_back(h > 0 ? hashed_row(id, h) : id);
        }
      }
    }
    std::vector<std::vector<int64_t>> distinct(rows.size());
    for (size_t f = 0; f < rows.size(); ++f) {
      std::sort(rows[f].begin(), rows[f].end());
      distinct[f] = rows[f];
      distinct[f].erase(std::unique(distinct[f].begin(), distinct[f].end()), distinct[f].end());
    }
    out->all.push_back(std::move(rows));
    out->distinct.push_back(std::move(distinct));
  }
  cache[key] = out;
  return out;
}

// Of the sorted `rows`, those a slot receives: every one, or those in its row range (bucketized).
int64_t rows_for_slot(const std::vector<int64_t>& rows, const Slot& sl) {
  if (!sl.bucketize_by_rows) return static_cast<int64_t>(rows.size());
  return std::lower_bound(rows.begin(), rows.end(), sl.s.row_offset + sl.s.num_rows) -
         std::lower_bound(rows.begin(), rows.end(), sl.s.row_offset);
}

// For recorded input: the most ids `rank` receives in one batch (its slots' ids of the global
// batch, the largest over the run's iterations), and per slot of the layout the most distinct
// rows it receives in one batch (a host table's fetch buffer, HostRowStore::gather). Measured,
// not a quantile: the file is what the run reads.
struct RecordedBound {
  int64_t ids = 0;
  std::vector<int64_t> distinct;  // per L.slots index (0 for another rank's)
};
// nullopt where the file cannot be read (the run reports that, naming the file): the estimate
// then falls back on the features' pooling factors, as for synthetic input.
std::optional<RecordedBound> recorded_bound(const WorkloadSpec& spec, const Layout& L, int rank) {
  std::shared_ptr<const RecordedRows> rec;
  try {
    rec = recorded_rows(spec);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  RecordedBound out;
  out.distinct.assign(L.slots.size(), 0);
  for (size_t it = 0; it < rec->all.size(); ++it) {
    int64_t ids = 0;
    for (int k : L.slots_to[static_cast<size_t>(rank)]) {
      const Slot& sl = L.slots[static_cast<size_t>(k)];
      ids += rows_for_slot(rec->all[it][static_cast<size_t>(sl.feature)], sl);
      out.distinct[static_cast<size_t>(k)] =
          std::max(out.distinct[static_cast<size_t>(k)], rows_for_slot(rec->distinct[it][static_cast<size_t>(sl.feature)], sl));
    }
    out.ids = std::max(out.ids, ids);
  }
  return out;
}

}  // namespace

double max_quantile_z(int64_t batches) {
  // P(some batch > mean + z sd) <= batches x P(one > z sd) = batches x erfc(z / sqrt 2) / 2
  // (the union bound); bisection for the z that makes it 5%
  const double target = 0.05 / static_cast<double>(std::max<int64_t>(1, batches));
  double lo = 0, hi = 40;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > target ? lo : hi) = mid;
  }
  return hi;
}

std::vector<std::vector<int64_t>> dense_device_calls(const WorkloadSpec& spec, const std::vector<int64_t>& dims, int64_t B) {
  std::vector<std::vector<int64_t>> calls;
  const std::vector<int64_t> loss{B, B, B};  // logits, labels, dlogits
  if (!spec.dense) {  // the fixed head: only the loss runs on the device
    calls.push_back(loss);
    return calls;
  }
  const DenseSpec& d = *spec.dense;
  const auto F = static_cast<int64_t>(dims.size());
  int64_t sum_dims = 0;
  for (const int64_t x : dims) sum_dims += x;
  struct Layer {
    int64_t in, out;
  };
  std::vector<Layer> bottom, top;
  int64_t in = d.num_dense_features;
  for (const int w : d.bottom_mlp) {
    bottom.push_back({in, w});
    in = w;
  }
  const int64_t d0 = in, inter_in = in + sum_dims;
  const int64_t inter_out = d.interaction == Interaction::dot ? d0 + (F + 1) * F / 2 : inter_in;
  in = inter_out;
  for (const int w : d.top_mlp) {
    top.push_back({in, w});
    in = w;
  }
  // forward: x, w, b copied in, y out
  auto forward = [&](const Layer& l) { calls.push_back({B * l.in, l.out * l.in, l.out, B * l.out}); };
  // backward: x, w, y, dy copied in; dw, db (and dx but for the first layer) out
  auto backward = [&](const Layer& l, bool dx) {
    std::vector<int64_t> c{B * l.in, l.out * l.in, B * l.out, B * l.out, l.out * l.in, l.out};
    if (dx) c.push_back(B * l.in);
    calls.push_back(std::move(c));
  };
  for (const Layer& l : bottom) forward(l);
  const bool dot = d.interaction == Interaction::dot;
  if (dot) calls.push_back({B * inter_in, B * inter_out});  // x0 in, r out
  for (const Layer& l : top) forward(l);
  calls.push_back(loss);
  for (size_t i = top.size(); i-- > 0;) backward(top[i], true);
  if (dot) calls.push_back({B * inter_in, B * inter_out, B * inter_in});  // x0, dr in; dx0 out
  for (size_t i = bottom.size(); i-- > 0;) backward(bottom[i], i > 0);
  return calls;
}

namespace {
// The bookkeeping allocator's config: capacity kMaxMemoryBytes, and a garbage-collection threshold
// scaled so that it collects above gc_threshold x device_bytes, the run's trigger (its threshold
// is a fraction of its own capacity, the device's).
AllocatorConfig replay_config(AllocatorKind kind, int64_t max_split_size, double gc_threshold, int64_t device_bytes) {
  if (!(gc_threshold >= 0 && gc_threshold < 1) || (gc_threshold > 0 && device_bytes <= 0))
    throw std::invalid_argument(fmt::format("AllocatorReplay: garbage_collection_threshold {} with a device of {} bytes",
                                            gc_threshold, device_bytes));
  AllocatorConfig c{kind, kMaxMemoryBytes, max_split_size, false};
  if (kind == AllocatorKind::caching && gc_threshold > 0)
    c.garbage_collection_threshold =
        gc_threshold * static_cast<double>(std::min(device_bytes, kMaxMemoryBytes)) / static_cast<double>(kMaxMemoryBytes);
  return c;
}
}  // namespace

AllocatorReplay::AllocatorReplay(AllocatorKind kind, int64_t max_split_size, double gc_threshold, int64_t device_bytes)
    : alloc_(DeviceAllocator::create(replay_config(kind == AllocatorKind::cuda_async ? AllocatorKind::caching : kind,
                                                   max_split_size, gc_threshold, device_bytes))),
      kind_(kind == AllocatorKind::cuda_async ? AllocatorKind::caching : kind),
      max_split_size_(max_split_size),
      gc_threshold_(gc_threshold) {}

int64_t AllocatorReplay::allocated() const { return add_bytes_saturating(alloc_->allocated_bytes(), beyond_live_); }

MemoryStats AllocatorReplay::stats() const {
  MemoryStats st = alloc_->stats();
  if (!beyond()) return st;
  st.allocated = add_bytes_saturating(st.allocated, beyond_live_);
  st.peak_allocated = std::max(st.peak_allocated, beyond_peak_);
  st.peak_reserved = std::max(st.peak_reserved, st.peak_allocated);
  return st;
}

ReplayShortfall AllocatorReplay::shortfall_at(int64_t capacity_bytes, AllocatorKind kind) const {
  AllocatorConfig config{kind, capacity_bytes, max_split_size_, false};
  if (kind == AllocatorKind::caching) config.garbage_collection_threshold = gc_threshold_;  // of this capacity
  const auto alloc = DeviceAllocator::create(config);
  std::vector<Allocation> live(ops_.size());  // per take: its block in this replay
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    if (op.bytes == 0) {
      alloc->free(live[op.take]);
      continue;
    }
    try {
      live[i] = alloc->allocate(op.bytes, "");
    } catch (const DeviceOutOfMemory& e) {
      return {op.bytes, op.what, op.iteration, e.fragmentation};
    }
  }
  return {};
}

Allocation AllocatorReplay::take(int64_t bytes) {
  if (bytes <= 0) return {};
  Allocation a;
  try {
    a = alloc_->allocate(bytes, "");
  } catch (const DeviceOutOfMemory&) {
    // more than kMaxMemoryBytes (the bookkeeping allocator's capacity, the most any device is
    // given) live at once (tester53 F6: one table of 2^40 x 65536 fp32 rows, 2^58 bytes, made
    // `plan` fail with this allocator's OOM): counted beside the allocator, so the replay goes on
    // and its figures say how far beyond any device the rank is
    a.size = round_size(bytes);
    a.requested = bytes;
    a.id = next_beyond_id_--;
    beyond_live_ = add_bytes_saturating(beyond_live_, a.size);
    beyond_peak_ = std::max(beyond_peak_, add_bytes_saturating(alloc_->allocated_bytes(), beyond_live_));
    op_of_id_[a.id] = ops_.size();
    ops_.push_back({bytes, 0, what_, iteration_});
    largest_block_ = std::max(largest_block_, a.size);
    return a;
  }
  if (beyond_live_ > 0) beyond_peak_ = std::max(beyond_peak_, add_bytes_saturating(alloc_->allocated_bytes(), beyond_live_));
  op_of_id_[a.id] = ops_.size();
  ops_.push_back({bytes, 0, what_, iteration_});
  largest_block_ = std::max(largest_block_, a.size);
  if (a.size <= kSmallSize) {
    small_live_ += a.size;
  } else {
    large_live_.insert(a.size);
    large_sum_ += a.size;
  }
  const auto pages = [](int64_t b, int64_t page) { return (b + page - 1) / page * page; };
  const int64_t largest = large_live_.empty() ? 0 : *large_live_.rbegin();
  const int64_t small_pages = pages(small_live_, expandable_page_size(true));  // 2 MiB segments or pages
  min_reserved_caching_ =
      std::max(min_reserved_caching_, std::max(largest > 0 ? segment_size_for(largest) : 0, large_sum_) + small_pages);
  // expandable: the large pool maps 20 MiB pages (PyTorch's kLargeBuffer pages)
  min_reserved_expandable_ =
      std::max(min_reserved_expandable_, pages(large_sum_, expandable_page_size(false)) + small_pages);
  return a;
}

void AllocatorReplay::give(Allocation& a) {
  if (a.size == 0) return;
  const auto it = op_of_id_.find(a.id);
  ops_.push_back({0, it->second, "", iteration_});
  op_of_id_.erase(it);
  if (a.id < 0) {  // counted beside the allocator (take)
    beyond_live_ -= a.size;
    a = {};
    return;
  }
  if (a.size <= kSmallSize) {
    small_live_ -= a.size;
  } else {
    large_live_.erase(large_live_.find(a.size));
    large_sum_ -= a.size;
  }
  alloc_->free(a);
  a = {};
}

namespace {

// One rank's replay: the allocator and the blocks of each batch in flight.
class Replay {
 public:
  Replay(const WorkloadSpec& spec, const ShardingPlan& plan, const Layout& L, int rank, const SlotShares& shares,
         bool step_ends = false)
      : spec_(spec), plan_(plan), L_(L), me_(rank), step_ends_(step_ends),
        mem_(spec.memory.allocator, spec.memory.max_split_size, spec.memory.garbage_collection_threshold,
             spec.devices.memory_bytes),
        mine_(L.slots_to[static_cast<size_t>(rank)]),
        recorded_(spec.input.kind == InputKind::kjt ? recorded_bound(spec, L, rank) : std::nullopt),
        recv_ids_(recorded_ ? recorded_->ids
                            : received_ids_quantile(spec, L, shares, rank, max_quantile_z(spec.warmup_steps + spec.steps))),
        device_path_(spec.devices.backend == Backend::cuda),
        resident_(device_path_ && dense_resident_supported(spec)),
        device_input_dist_(resident_ && spec.qcomms.forward_precision == CommPrecision::fp32 &&
                           spec.qcomms.backward_precision == CommPrecision::fp32 && L.hot_tables.empty() &&
                           !L.slots.empty() &&
                           std::none_of(spec.tables.begin(), spec.tables.end(),
                                        [](const TableSpec& t) {
                                          return t.placement != TablePlacement::device || t.prefetch_pipeline;
                                        })),
        dense_calls_(device_path_ && !resident_ ? dense_device_calls(spec, L.dim, L.B)
                                                : std::vector<std::vector<int64_t>>{}) {}

  ReplayedMemory run() {
    setup();
    const int64_t total = spec_.warmup_steps + spec_.steps;
    for (int64_t it = 0; it < std::min<int64_t>(total, 8); ++it) {
      mem_.set_context("buffers", it);
      for (const Phase& ph : step_schedule(spec_, it)) {
        const int64_t b = it + ph.batch;
        training_ = it;
        switch (ph.kind) {
          case PhaseKind::start_batch: break;  // the batch and its input dist are in host memory
          case PhaseKind::lookup: lookup(b); break;
          case PhaseKind::finish_output_dist: free_all(batches_[b].jobs); break;
          case PhaseKind::train: train(b); break;
          case PhaseKind::prefetch: break;  // rows copied straight into the cache: no device buffer
        }
      }
      if (step_ends_) out_.step_ends.push_back(mem_.stats());  // the step's end (ReplayedMemory::step_ends)
    }
    out_.peak = mem_.stats().peak_allocated;
    out_.largest_block = mem_.largest_block();
    out_.min_reserved_caching = mem_.min_reserved_caching();
    out_.min_reserved_expandable = mem_.min_reserved_expandable();
    out_.peak_reserved = mem_.stats().peak_reserved;
    // the run's allocator has the device's capacity: where the replay reserved more, replay it
    // at that capacity (tester48 F9: 36.7 MiB allocated, but the caching allocator's segments
    // needed 48 MiB of a 40 MiB device and the run ran out allocating the weights)
    if (spec_.memory.allocator != AllocatorKind::cuda_async && out_.peak_reserved > spec_.devices.memory_bytes)
      out_.shortfall = mem_.shortfall_at(spec_.devices.memory_bytes);
    if (out_.shortfall.request > 0) {  // what would serve it: the refusal's advice
      const auto serves = [&](AllocatorKind k) {
        return k == spec_.memory.allocator ? false : mem_.shortfall_at(spec_.devices.memory_bytes, k).request == 0;
      };
      out_.shortfall.expandable_serves = serves(AllocatorKind::expandable);
      out_.shortfall.direct_serves = serves(AllocatorKind::direct);
    }
    return out_;
  }

 private:
  struct Blocks {
    std::vector<Allocation> kjt, pooled, slot_out, jobs;
  };

  // A block of `bytes` (nothing for 0, as DeviceBuffer) of batch `batch` (-1: none).
  Allocation take(int64_t bytes, int64_t batch = -1) {
    Allocation a = mem_.take(bytes);
    if (a.size == 0) return a;
    batch_of_[a.id] = batch;
    by_batch_[batch] += a.size;
    if (mem_.allocated() > high_) {  // a new peak: what the batches ahead hold now
      high_ = mem_.allocated();
      out_.ahead_at_peak = 0;
      for (auto it = by_batch_.upper_bound(training_); it != by_batch_.end(); ++it) out_.ahead_at_peak += it->second;
    }
    return a;
  }
  void give(Allocation& a) {
    if (a.size == 0) return;
    const auto it = batch_of_.find(a.id);
    by_batch_[it->second] -= a.size;
    batch_of_.erase(it);
    mem_.give(a);
  }
  void free_all(std::vector<Allocation>& v) {  // a vector of buffers destroyed: first to last
    for (auto& a : v) give(a);
    v.clear();
  }
  // One call's device copies (floats each), taken in order and given back in reverse as the
  // call's DeviceBuffers go out of scope; returns the bytes of its blocks.
  int64_t staged(const std::vector<int64_t>& floats, int64_t bi) {
    std::vector<Allocation> blocks;
    int64_t bytes = 0;
    for (const int64_t n : floats) {
      blocks.push_back(take(n * 4, bi));
      bytes += blocks.back().size > 0 ? round_size(n * 4) : 0;  // asked for, not the block it got (below)
    }
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) give(*it);
    return bytes;
  }

  void setup() {
    for (const TablePlan& tp : plan_.tables)
      for (const Shard& s : tp.shards) {
        if (s.rank != me_) continue;
        const TableSpec& t = spec_.tables[static_cast<size_t>(tp.table)];
        const ShardBuffers b = shard_buffers(spec_.optimizer.type, t, s.num_rows, s.num_cols);
        if (t.placement != TablePlacement::device) {  // rows and state in host memory, the cache here
          out_.host = add_bytes_saturating(out_.host, b.weights[0] + b.state[0] + b.state[1]);
          if (t.placement != TablePlacement::host_cached || s.num_rows == 0 || s.num_cols == 0) continue;
          out_.host = add_bytes_saturating(out_.host, 8 * s.num_rows * (t.cache_policy == CachePolicy::lfu ? 2 : 1));  // row -> slot, lfu's counts

          const int64_t bytes = cache_slots(t.cache_load_factor, s.num_rows) * s.num_cols * 4;
          mem_.set_context("device cache", -1);
          out_.cache = add_bytes_saturating(out_.cache, take(bytes).size > 0 ? round_size(bytes) : 0);
          continue;
        }
        // the breakdown counts each buffer rounded to 512 B; an unsplit block remainder the
        // allocator adds stays in the peak (and so in DeviceMemoryEstimate::buffers)
        auto weights = [&](int64_t bytes) {
          mem_.set_context("weights", -1);
          out_.weights = add_bytes_saturating(out_.weights, take(bytes).size > 0 ? round_size(bytes) : 0);
        };
        auto state = [&](int64_t bytes) {
          mem_.set_context("optimizer state", -1);
          out_.optimizer_state = add_bytes_saturating(out_.optimizer_state, take(bytes).size > 0 ? round_size(bytes) : 0);
        };
        // rank_setup.cpp's order: fp32 rows, then the state; a low-rank or encoded table's rows after it
        const bool rows_first = t.data_type == TableDataType::fp32 && t.low_rank_dim == 0;
        if (rows_first) weights(b.weights[0]);
        state(b.state[0]);
        state(b.state[1]);
        if (!rows_first) {
          weights(b.weights[0]);
          weights(b.weights[1]);
          state(b.state[2]);
          state(b.state[3]);
        }
      }
    // hot-row replicas (rank_setup.cpp after the shards): fp32 rows, then the optimizer state
    for (const int t : L_.hot_tables) {
      const int64_t H = static_cast<int64_t>(L_.hot_rows[static_cast<size_t>(t)].size());
      const int64_t dim = spec_.tables[static_cast<size_t>(t)].embedding_dim;
      const auto [m1, m2] = optimizer_state_floats(spec_.optimizer.type, H, dim);
      mem_.set_context("hot-row replicas", -1);
      out_.weights += take(H * dim * 4).size > 0 ? round_size(H * dim * 4) : 0;
      out_.optimizer_state += take(m1 * 4).size > 0 ? round_size(m1 * 4) : 0;
      out_.optimizer_state += take(m2 * 4).size > 0 ? round_size(m2 * 4) : 0;
    }
    const DenseSizes d = dense_sizes(spec_, L_.dim);
    mem_.set_context("dense part", -1);
    // parameters + gradients. The dense column counts the bytes the dense part asks for (512 B
    // rounded, as weights and optimizer state), not the block the allocator serves: a reused free
    // block larger than the request (the caching allocator leaves a remainder under 1 MiB
    // unsplit) depends on what the plan allocated before, and went to dense (tester58 F7:
    // criteo_kaggle table_wise on 8 ranks, batch 512, ranks 6-7 +896 KiB); that slack is in buffers
    first_dense_ = take(2 * d.num_params * 4).size > 0 ? round_size(2 * d.num_params * 4) : 0;
    out_.dense = first_dense_;
    // a resident dense part (the cuda rank's dot / cat model, DenseModel::make_resident): its
    // activations' block holds every activation and activation gradient on the device
    // the host path's block at the dense part's precision (dense_activation_bytes: half-precision
    // activations and autocast's weight copies for bf16 / fp16; the resident path is fp32 only)
    activation_bytes_ = resident_ ? L_.B * dense_resident_activation_floats_per_sample(spec_, L_.dim) * 4
                                  : dense_activation_bytes(spec_, d, L_.B);
  }

  int64_t node_width(int node) const { return L_.node_width(node); }
  int64_t all_a2a_cols() const {
    int64_t c = 0;
    for (int r = 0; r < L_.world; ++r) c += L_.a2a_cols(r);
    return c;
  }
  int64_t all_node_widths() const {
    int64_t c = 0;
    for (int m = 0; m < L_.nodes; ++m) c += node_width(m);
    return c;
  }

  // kjt_permute, lookup and the modules' output dist ops (rank_input.cpp, the modules' run)
  void lookup(int64_t bi) {
    constexpr int64_t f32 = 4, i64 = 8;
    const int64_t W = L_.world, B = L_.B;
    Blocks& b = batches_[bi];
    b.kjt.push_back(take(static_cast<int64_t>(mine_.size()) * (W * B + (device_input_dist_ ? 1 : 0)) * i64,
                         bi));  // recv_lengths (the device input dist: the slots' offsets)
    b.kjt.push_back(take(recv_ids_ * i64, bi));  // recv_ids
    for (const int64_t d : L_.dim) b.pooled.push_back(take(B * d * f32, bi));
    for (int k : mine_) b.slot_out.push_back(take(W * B * L_.slots[static_cast<size_t>(k)].s.num_cols * f32, bi));
    host_fetch(bi, false);
    // the modules in embedding_shardings' order, each job's buffers in its allocation order
    b.jobs.push_back(take(W * B * L_.a2a_cols(me_) * f32, bi));  // table_wise / column_wise: send
    b.jobs.push_back(take(B * all_a2a_cols() * f32, bi));     // recv
    if (!L_.rw_features.empty()) {
      const int64_t width = L_.sum_dims(L_.rw_features);
      b.jobs.push_back(take(W * B * width * f32, bi));  // reduce-scatter send
      b.jobs.push_back(take(B * width * f32, bi));      // recv
    }
    if (L_.hierarchical) {
      const int64_t width = node_width(me_ / L_.local);
      b.jobs.push_back(take(L_.local * L_.nodes * B * width * f32, bi));  // node reduce-scatter send
      b.jobs.push_back(take(L_.nodes * B * width * f32, bi));             // its result
      b.jobs.push_back(take(L_.nodes * B * width * f32, bi));             // cross-node all-to-all send
      b.jobs.push_back(take(B * all_node_widths() * f32, bi));            // recv
    }
  }

  // The buffers of each local slot of a table in host memory, one slot at a time (model/host_cache.h:
  // HostRowStore::gather for a lookup, HostRowStore::update for an update): its distinct rows, at
  // most min(the ids the rank receives, the shard's rows) - an upper bound, the ids of every slot
  // of the rank - and for an update their optimizer state rows as well (on the cuda backend the
  // rows are the device's staging buffer, and an update stages its gradient and row ids too).
  void host_fetch(int64_t bi, bool update) {
    for (int k : mine_) {
      const Slot& sl = L_.slots[static_cast<size_t>(k)];
      const TableSpec& t = spec_.tables[static_cast<size_t>(sl.table)];
      if (t.placement == TablePlacement::device) continue;
      // recorded input: the slot's distinct rows of its largest batch (the run's gather)
      const int64_t received = recorded_ ? recorded_->distinct[static_cast<size_t>(k)] : recv_ids_;
      const int64_t rows = std::min(received, sl.s.num_rows), cols = sl.s.num_cols;
      const bool cuda = spec_.devices.backend == Backend::cuda;
      Allocation w = take(rows * cols * 4, bi);
      if (update) {
        const auto [m1, m2] = optimizer_state_floats(spec_.optimizer.type, rows, cols);
        Allocation s1 = take(m1 * 4, bi), s2 = take(m2 * 4, bi);
        if (cuda) {  // the device's update also stages the gradient and its index lists
          // (HostRowStore::update_on_device: values rows x cols; one upload of where each row is,
          // its row id, the offsets and its host row: 4 rows + 1 int64)
          Allocation v = take(rows * cols * 4, bi), idx = take((4 * rows + 1) * 8, bi);
          give(idx);
          give(v);
        }
        give(s2);
        give(s1);
      } else if (cuda) {  // the lookup's one index upload (gather_on_device): the rows' sources,
        // and under host_cached the victims' slots and rows and the insertions' rows and slots (<= 5 rows)
        Allocation idx = take((t.placement == TablePlacement::host_cached ? 5 : 1) * rows * 8, bi);
        give(idx);
      }
      give(w);
    }
  }

  // rank_train.cpp
  void train(int64_t bi) {
    constexpr int64_t f32 = 4;
    const int64_t W = L_.world, B = L_.B;
    Blocks& b = batches_[bi];
    std::vector<Allocation> dpooled, slot_grad;
    for (const int64_t d : L_.dim) dpooled.push_back(take(B * d * f32, bi));
    Allocation act = take(activation_bytes_, bi);
    const int64_t act_bytes = act.size > 0 ? round_size(activation_bytes_) : 0;  // asked for (setup's first_dense_)
    out_.dense = std::max(out_.dense, first_dense_ + act_bytes);
    if (device_path_ && !resident_)  // the cuda rank's copies of each dense call, under `act`
      for (const auto& call : dense_calls_) out_.dense = std::max(out_.dense, first_dense_ + act_bytes + staged(call, bi));
    give(act);
    free_all(b.pooled);
    for (int k : mine_) slot_grad.push_back(take(W * B * L_.slots[static_cast<size_t>(k)].s.num_cols * f32, bi));
    // the modules' grad dists: each function's send and receive buffers, freed in reverse
    auto pair = [&](int64_t send, int64_t recv) {
      Allocation s = take(send, bi), r = take(recv, bi);
      give(r);
      give(s);
    };
    pair(B * all_a2a_cols() * f32, W * B * L_.a2a_cols(me_) * f32);
    if (!L_.rw_features.empty()) {
      const int64_t width = L_.sum_dims(L_.rw_features);
      pair(B * width * f32, W * B * width * f32);
    }
    if (L_.hierarchical) {
      const int64_t width = node_width(me_ / L_.local);
      Allocation s = take(B * all_node_widths() * f32, bi), cross = take(L_.nodes * B * width * f32, bi),
                 gathered = take(L_.local * L_.nodes * B * width * f32, bi);
      give(gathered);
      give(cross);
      give(s);
    }
    host_fetch(bi, true);
    // data-parallel tables (sharding/data_parallel.cpp), after the fused optimizer: each table's
    // dense rows x dim gradient (a factorized table's: its factors' rows r + r dim,
    // program/data_parallel_bytes.h) and its rows touched flags, one table at a time, the flags
    // given back first, both before the table's update (whose cuda staging of the updated rows,
    // fewer than the gradient's, is not replayed)
    for (const int t : L_.dp_tables) {
      const TableSpec& ts = spec_.tables[static_cast<size_t>(t)];
      Allocation grad = take(program::dp_gradient_elements(ts.rows(), ts.embedding_dim, ts.low_rank_dim) * f32, bi),
                 flags = take(ts.rows() * f32, bi);
      give(flags);
      give(grad);
    }
    // hot rows (sharding/hot_rows.cpp): every hot table's rows x (dim + 1) block, one buffer
    if (!L_.hot_tables.empty()) {
      int64_t floats = 0;
      for (const int t : L_.hot_tables)
        floats += static_cast<int64_t>(L_.hot_rows[static_cast<size_t>(t)].size()) *
                  (spec_.tables[static_cast<size_t>(t)].embedding_dim + 1);
      Allocation block = take(floats * f32, bi);
      give(block);
    }
    // the dense optimizer, before the batch's gradients go (rank_train.cpp): on the cuda rank its
    // parameters and gradients copied to the device for sgd_step
    if (device_path_ && !resident_) {  // resident: the step runs on the "dense" block itself
      const int64_t n = dense_sizes(spec_, L_.dim).num_params;
      out_.dense = std::max(out_.dense, first_dense_ + staged({n, n}, bi));
    }
    free_all(slot_grad);  // the train phase's locals, the later declared first
    free_all(dpooled);
    // the batch leaves the pipeline (Inflight's members, the last declared first)
    free_all(b.slot_out);
    std::reverse(b.kjt.begin(), b.kjt.end());  // recv_ids, then recv_lengths
    free_all(b.kjt);
    batches_.erase(bi);
  }

  const WorkloadSpec& spec_;
  const ShardingPlan& plan_;
  const Layout& L_;
  int me_;
  bool step_ends_;  // record the allocator's figures at each iteration's end
  AllocatorReplay mem_;  // the rank's allocator (bookkeeping only)
  const std::vector<int>& mine_;
  std::optional<RecordedBound> recorded_;  // recorded (kjt) input: what its batches hold
  int64_t recv_ids_;  // ids received for the local slots in one batch
  bool device_path_;  // the cuda backend: the dense part's device copies (dense_device_calls)
  bool resident_;     // the cuda backend's resident dense part: no per-call copies
  // the KJT input dist on the device (threaded/rank_input.cpp Rank::input_dist_on_device, with
  // the default options): each local slot's W B + 1 offsets where the host path's W B lengths
  // were (its send and receive buffers are outside the allocator, as the staging they replace)
  bool device_input_dist_;
  std::vector<std::vector<int64_t>> dense_calls_;
  std::map<int64_t, Blocks> batches_;
  std::map<int64_t, int64_t> batch_of_;  // per live allocation id: its batch (-1: setup)
  std::map<int64_t, int64_t> by_batch_;  // per batch: the bytes of its live blocks
  int64_t training_ = 0, high_ = 0, activation_bytes_ = 0, first_dense_ = 0;
  ReplayedMemory out_;
};

}  // namespace

std::vector<ReplayedMemory> replay_memory(const WorkloadSpec& spec, const ShardingPlan& plan, const Layout& L) {
  return replay_memory(spec, plan, L, SlotShares(spec, L));
}

std::vector<ReplayedMemory> replay_memory(const WorkloadSpec& spec, const ShardingPlan& plan, const Layout& L,
                                          const SlotShares& shares, bool step_ends) {
  std::vector<ReplayedMemory> out;
  for (int r = 0; r < L.world; ++r) out.push_back(Replay(spec, plan, L, r, shares, step_ends).run());
  return out;
}

ReplayedMemory replay_rank_memory(const WorkloadSpec& spec, const ShardingPlan& plan, const Layout& L, int rank,
                                  const SlotShares& shares) {
  if (rank < 0 || rank >= L.world) throw std::out_of_range("replay_rank_memory: rank " + std::to_string(rank));
  return Replay(spec, plan, L, rank, shares).run();
}

PlanIndependentMemory plan_independent_memory(const WorkloadSpec& spec, int64_t batch_size) {
  const int64_t B = batch_size < 0 ? spec.batch_size : batch_size;
  std::vector<int64_t> dims;
  const std::vector<int> table_of = FeatureIndex(spec).table_of_feature();
  for (size_t f = 0; f < spec.features.size(); ++f) dims.push_back(spec.tables[static_cast<size_t>(table_of[f])].embedding_dim);
  const DenseSizes d = dense_sizes(spec, dims);
  // Replay::setup / train: the resident layout on the cuda backend where the dense part allows it
  const bool resident = spec.devices.backend == Backend::cuda && dense_resident_supported(spec);
  const int64_t act_floats = resident ? dense_resident_activation_floats_per_sample(spec, dims) : d.activation_floats_per_sample;
  const auto block = [](int64_t bytes) { return bytes > 0 ? round_size(bytes) : int64_t{0}; };
  PlanIndependentMemory m;
  m.dense_params = block(2 * d.num_params * 4);
  m.activations = block(resident ? B * act_floats * 4 : dense_activation_bytes(spec, d, B));
  int64_t dim_sum = 0;
  for (const int64_t dim : dims) {
    m.pooled += 2 * block(B * dim * 4);
    dim_sum += dim;
  }
  // activations at the dense part's width (the weight copies of bf16 / fp16 are not per sample)
  const int64_t act_width = resident || !spec.dense ? 4 : dense_activation_value_bytes(spec.dense->precision);
  m.bytes_per_sample = act_floats * act_width + 2 * dim_sum * 4;
  return m;
}

}  // namespace embedscope::engine::detail
