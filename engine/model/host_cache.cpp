// HostRowStore: rows in host memory, a device cache in front of them (model/host_cache.h).
#include "embedscope/engine/model/host_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace embedscope::engine {

int64_t cache_slots(double load_factor, int64_t num_rows) {
  if (!(load_factor > 0.0 && load_factor <= 1.0))
    throw std::invalid_argument(fmt::format("cache_load_factor must be in (0, 1], got {}", load_factor));
  if (num_rows < 1) throw std::invalid_argument(fmt::format("a cached shard needs rows, got {}", num_rows));
  const auto s = static_cast<int64_t>(std::ceil(load_factor * static_cast<double>(num_rows)));
  return std::clamp<int64_t>(s, 1, num_rows);
}

int64_t cache_device_bytes(double load_factor, int64_t num_rows, int64_t num_cols) {
  if (num_rows < 1 || num_cols < 1) return 0;
  return round_size(cache_slots(load_factor, num_rows) * num_cols * 4);
}

HostRowStore::HostRowStore(TablePlacement placement, CachePolicy policy, OptimizerType opt, int64_t num_rows,
                           int64_t dim, int64_t slots, DeviceArena* arena, const HostCacheDevice* device)
    : placement_(placement), policy_(policy), num_rows_(num_rows), dim_(dim), arena_(arena), dev_(device) {
  if (placement == TablePlacement::device)
    throw std::invalid_argument("HostRowStore: placement device keeps its rows on the device");
  if (num_rows < 1 || dim < 1)
    throw std::invalid_argument(fmt::format("HostRowStore: {} x {} rows (both must be >= 1)", num_rows, dim));
  const auto [m1, m2] = optimizer_state_floats(opt, 1, dim);
  state1_per_row_ = m1;
  state2_per_row_ = m2;
  if (placement != TablePlacement::host_cached) return;
  if (slots < 1 || slots > num_rows)
    throw std::invalid_argument(fmt::format("HostRowStore: {} cache slots for {} rows (must be in [1, rows])", slots, num_rows));
  cache_ = DeviceBuffer<float>(arena_, "embedding_cache");
  cache_.assign(static_cast<size_t>(slots * dim));
  cache_.release_host_copy();  // on a device: the slots live there only (nothing reads a host copy)
  slot_row_.assign(static_cast<size_t>(slots), -1);
  row_slot_.assign(static_cast<size_t>(num_rows), -1);
  last_use_.assign(static_cast<size_t>(slots), -1);
  dirty_.assign(static_cast<size_t>(slots), 0);
  pinned_.assign(static_cast<size_t>(slots), 0);
  if (policy == CachePolicy::lfu) lfu_count_.assign(static_cast<size_t>(num_rows), 0);
}

void HostRowStore::h2d(float* dst, const float* src, int64_t n) {
  if (dev_) dev_->to_device(dst, src, n * 4);
  else std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
}

void HostRowStore::d2h(float* dst, const float* src, int64_t n) {
  if (dev_) dev_->to_host(dst, src, n * 4);
  else std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
}

void HostRowStore::d2d(float* dst, const float* src, int64_t n) {
  if (dev_) dev_->on_device(dst, src, n * 4);
  else std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
}

int64_t HostRowStore::key(int64_t s) const {
  const auto k = static_cast<size_t>(s);
  return policy_ == CachePolicy::lru ? last_use_[k] : lfu_count_[static_cast<size_t>(slot_row_[k])];
}

int64_t HostRowStore::victim_for(int64_t row, float* host_rows, int64_t extra) {
  if (next_free_ < slots()) return next_free_++;  // an empty slot first (slots are never emptied again)
  if (unlocked_.empty()) return -1;               // every slot holds a row of this lookup
  const auto [victim_key, best] = *unlocked_.begin();
  const auto b = static_cast<size_t>(best);
  const int64_t old = slot_row_[b];
  if (policy_ == CachePolicy::lfu && lfu_count_[static_cast<size_t>(row)] + extra < victim_key)
    return -1;  // the cached row is the more frequent one: keep it
  unlocked_.erase(unlocked_.begin());
  if (dirty_[b]) {
    d2h(host_rows + old * dim_, cache_rows() + best * dim_, dim_);
    counters_.bytes_d2h += dim_ * 4;
    dirty_[b] = 0;
  }
  row_slot_[static_cast<size_t>(old)] = -1;
  slot_row_[b] = -1;
  return best;
}

DeviceBuffer<float> HostRowStore::gather(float* host_rows, const int64_t* ids, int64_t n_ids,
                                         std::vector<int64_t>& local) {
  // the distinct rows, ascending, how often each is named, and each id's place among them
  std::vector<int64_t> sorted(ids, ids + n_ids), uniq, times;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t r : sorted) {
    if (uniq.empty() || uniq.back() != r) {
      uniq.push_back(r);
      times.push_back(0);
    }
    times.back() += 1;
  }
  local.resize(static_cast<size_t>(n_ids));
  for (int64_t i = 0; i < n_ids; ++i)
    local[static_cast<size_t>(i)] = std::lower_bound(uniq.begin(), uniq.end(), ids[i]) - uniq.begin();
  const auto U = static_cast<int64_t>(uniq.size());
  DeviceBuffer<float> out(arena_, "host_fetch");
  out.assign(static_cast<size_t>(U * dim_));
  out.release_host_copy();  // on a device: its rows are written and read there only
  float* const rows = dev_ ? out.device_data() : out.data();
  auto fetch = [&](int64_t r, float* dst) {
    h2d(dst, host_rows + r * dim_, dim_);
    counters_.rows_fetched += 1;
    counters_.bytes_h2d += dim_ * 4;
  };
  if (placement_ == TablePlacement::host) {
    if (dev_ && U > 0) {  // the batch's rows staged in host memory, then one copy to the device buffer
      std::vector<float> staged(static_cast<size_t>(U * dim_));
      for (int64_t u = 0; u < U; ++u)
        std::memcpy(staged.data() + u * dim_, host_rows + uniq[static_cast<size_t>(u)] * dim_,
                    sizeof(float) * static_cast<size_t>(dim_));
      dev_->to_device(rows, staged.data(), U * dim_ * 4);
      counters_.rows_fetched += U;
      counters_.bytes_h2d += U * dim_ * 4;
    } else {
      for (int64_t u = 0; u < U; ++u) fetch(uniq[static_cast<size_t>(u)], rows + u * dim_);
    }
    counters_.cache_misses += U;
    return out;
  }
  ++tick_;
  // hits first: each is locked (out of unlocked_) before any miss picks a victim
  std::vector<int64_t> misses, locked;
  for (int64_t u = 0; u < U; ++u) {
    const int64_t r = uniq[static_cast<size_t>(u)];
    const int64_t s = row_slot_[static_cast<size_t>(r)];
    if (s < 0) {
      misses.push_back(u);
      continue;
    }
    unlocked_.erase({key(s), s});
    locked.push_back(s);
    d2d(rows + u * dim_, cache_rows() + s * dim_, dim_);
    counters_.cache_hits += 1;
  }
  if (policy_ == CachePolicy::lfu)  // every named row counts, cached or not (the locked ones are out of the set)
    for (int64_t u = 0; u < U; ++u) lfu_count_[static_cast<size_t>(uniq[static_cast<size_t>(u)])] += times[static_cast<size_t>(u)];
  for (int64_t u : misses) {
    const int64_t r = uniq[static_cast<size_t>(u)];
    counters_.cache_misses += 1;
    fetch(r, rows + u * dim_);
    const int64_t s = victim_for(r, host_rows);
    if (s < 0) continue;  // read from host memory for this lookup only
    const auto k = static_cast<size_t>(s);
    d2d(cache_rows() + s * dim_, rows + u * dim_, dim_);
    slot_row_[k] = r;
    row_slot_[static_cast<size_t>(r)] = s;
    dirty_[k] = 0;
    locked.push_back(s);
  }
  for (int64_t s : locked) {  // unlocked again (a prefetch's pin ends here), used now
    last_use_[static_cast<size_t>(s)] = tick_;
    pinned_[static_cast<size_t>(s)] = 0;
    unlocked_.insert({key(s), s});
    in_use_.push_back(s);
  }
  return out;
}

void HostRowStore::prefetch(float* host_rows, const int64_t* ids, int64_t n_ids) {
  if (placement_ != TablePlacement::host_cached)
    throw std::invalid_argument("HostRowStore::prefetch: only a host_cached shard has a cache to prefetch into");
  ++tick_;
  // the pins of an earlier prefetch that no lookup used end
  for (int64_t s = 0; s < slots(); ++s)
    if (pinned_[static_cast<size_t>(s)]) {
      pinned_[static_cast<size_t>(s)] = 0;
      unlocked_.insert({key(s), s});
    }
  // the rows of the batch in flight (the lookups since the last prefetch) are locked while it runs
  std::vector<int64_t> held;
  for (int64_t s : in_use_)
    if (unlocked_.erase({key(s), s}) > 0) held.push_back(s);
  in_use_.clear();
  std::vector<int64_t> sorted(ids, ids + n_ids);
  std::sort(sorted.begin(), sorted.end());
  auto pin = [&](int64_t s) {
    pinned_[static_cast<size_t>(s)] = 1;
    last_use_[static_cast<size_t>(s)] = tick_;
  };
  // the batch's distinct rows and their ids; the cached ones pinned first, so that no miss of
  // this batch evicts a row of it
  std::vector<std::pair<int64_t, int64_t>> misses;  // (row, ids of it)
  for (size_t i = 0; i < sorted.size();) {
    const int64_t r = sorted[i];
    size_t j = i;
    while (j < sorted.size() && sorted[j] == r) ++j;
    const auto times = static_cast<int64_t>(j - i);
    i = j;
    const int64_t cached = row_slot_[static_cast<size_t>(r)];
    if (cached < 0) {
      misses.emplace_back(r, times);
    } else if (!pinned_[static_cast<size_t>(cached)]) {
      unlocked_.erase({key(cached), cached});  // no-op for a held slot (out of the set already)
      pin(cached);
    }
  }
  for (const auto& [r, times] : misses) {
    const int64_t s = victim_for(r, host_rows, times);
    if (s < 0) continue;  // no room: the lookup fetches it
    h2d(cache_rows() + s * dim_, host_rows + r * dim_, dim_);
    counters_.rows_fetched += 1;
    counters_.bytes_h2d += dim_ * 4;
    counters_.prefetched_rows += 1;
    counters_.prefetch_bytes_h2d += dim_ * 4;
    slot_row_[static_cast<size_t>(s)] = r;
    row_slot_[static_cast<size_t>(r)] = s;
    dirty_[static_cast<size_t>(s)] = 0;
    pin(s);
  }
  for (int64_t s : held)  // the batch in flight's rows are victims again (unless this batch pinned them)
    if (!pinned_[static_cast<size_t>(s)]) unlocked_.insert({key(s), s});
}

void HostRowStore::update(const OptimizerSpec& opt, int64_t iteration, float* host_rows, RowOptimizerState host_state,
                          const SparseGrad& grad) {
  const auto G = static_cast<int64_t>(grad.rows.size());
  if (G == 0) return;
  if (host_state.type != OptimizerStateType::fp32)
    throw std::invalid_argument("HostRowStore: fp32 optimizer state only");
  if (dev_) {
    update_on_device(opt, iteration, host_rows, host_state, grad);
    return;
  }
  const size_t row_size = sizeof(float) * static_cast<size_t>(dim_);
  DeviceBuffer<float> rows(arena_, "host_fetch"), st1(arena_, "host_fetch"), st2(arena_, "host_fetch");
  rows.assign(static_cast<size_t>(G * dim_));
  st1.assign(static_cast<size_t>(G * state1_per_row_));
  st2.assign(static_cast<size_t>(G * state2_per_row_));
  std::vector<int64_t> slot(static_cast<size_t>(G), -1);
  for (int64_t u = 0; u < G; ++u) {
    const int64_t r = grad.rows[static_cast<size_t>(u)];
    const int64_t s = placement_ == TablePlacement::host_cached ? row_slot_[static_cast<size_t>(r)] : -1;
    slot[static_cast<size_t>(u)] = s;
    if (s >= 0) {
      std::memcpy(rows.data() + u * dim_, cache_.data() + s * dim_, row_size);
    } else {
      std::memcpy(rows.data() + u * dim_, host_rows + r * dim_, row_size);
      counters_.rows_fetched += 1;
      counters_.bytes_h2d += dim_ * 4;
    }
    std::copy_n(host_state.momentum1.data() + r * state1_per_row_, state1_per_row_, st1.data() + u * state1_per_row_);
    std::copy_n(host_state.momentum2.data() + r * state2_per_row_, state2_per_row_, st2.data() + u * state2_per_row_);
  }
  const int64_t state_bytes = G * (state1_per_row_ + state2_per_row_) * 4;
  counters_.bytes_h2d += state_bytes;
  // the optimizer on the gathered rows: row u of the buffers is grad.rows[u]
  SparseGrad local;
  local.dim = grad.dim;
  local.rows.resize(static_cast<size_t>(G));
  std::iota(local.rows.begin(), local.rows.end(), int64_t{0});
  local.values = grad.values;
  RowOptimizerState st{{st1.data(), st1.size()}, {st2.data(), st2.size()}, OptimizerStateType::fp32, {}, {}};
  apply_row_optimizer(opt, iteration, rows.data(), dim_, st, local);
  for (int64_t u = 0; u < G; ++u) {
    const int64_t r = grad.rows[static_cast<size_t>(u)];
    const int64_t s = slot[static_cast<size_t>(u)];
    if (s >= 0) {
      std::memcpy(cache_.data() + s * dim_, rows.data() + u * dim_, row_size);
      dirty_[static_cast<size_t>(s)] = 1;
    } else {
      std::memcpy(host_rows + r * dim_, rows.data() + u * dim_, row_size);
      counters_.bytes_d2h += dim_ * 4;
    }
    std::copy_n(st1.data() + u * state1_per_row_, state1_per_row_, host_state.momentum1.data() + r * state1_per_row_);
    std::copy_n(st2.data() + u * state2_per_row_, state2_per_row_, host_state.momentum2.data() + r * state2_per_row_);
  }
  counters_.bytes_d2h += state_bytes;
}

void HostRowStore::flush(float* host_rows) {
  for (int64_t s = 0; s < slots(); ++s) {
    const auto k = static_cast<size_t>(s);
    if (!dirty_[k]) continue;
    d2h(host_rows + slot_row_[k] * dim_, cache_rows() + s * dim_, dim_);
    counters_.bytes_d2h += dim_ * 4;
    dirty_[k] = 0;
  }
}

void HostRowStore::update_on_device(const OptimizerSpec& opt, int64_t iteration, float* host_rows,
                                    RowOptimizerState host_state, const SparseGrad& grad) {
  // as update(): the same rows fetched, the same counters; the gathered rows, their state, the
  // row ids 0..G-1 and the gradient in device buffers, the device's row optimizer on them
  const auto G = static_cast<int64_t>(grad.rows.size());
  const int64_t s1 = state1_per_row_, s2 = state2_per_row_;
  auto device_buffer = [&](auto zero, int64_t n) {
    DeviceBuffer<decltype(zero)> b(arena_, "host_fetch");
    b.assign(static_cast<size_t>(n));
    return b;
  };
  auto rows = device_buffer(0.0f, G * dim_), st1 = device_buffer(0.0f, G * s1), st2 = device_buffer(0.0f, G * s2),
       vals = device_buffer(0.0f, G * dim_);
  auto ids = device_buffer(int64_t{0}, G), off = device_buffer(int64_t{0}, G + 1);
  std::vector<int64_t> slot(static_cast<size_t>(G), -1);
  for (int64_t u = 0; u < G; ++u) {
    const int64_t r = grad.rows[static_cast<size_t>(u)];
    const int64_t s = placement_ == TablePlacement::host_cached ? row_slot_[static_cast<size_t>(r)] : -1;
    slot[static_cast<size_t>(u)] = s;
    if (s >= 0) {
      d2d(rows.device_data() + u * dim_, cache_rows() + s * dim_, dim_);
    } else {
      h2d(rows.device_data() + u * dim_, host_rows + r * dim_, dim_);
      counters_.rows_fetched += 1;
      counters_.bytes_h2d += dim_ * 4;
    }
  }
  // the state rows, the ids and the gradient staged in host vectors, one copy each
  std::vector<float> hs1(static_cast<size_t>(G * s1)), hs2(static_cast<size_t>(G * s2));
  for (int64_t u = 0; u < G; ++u) {
    const int64_t r = grad.rows[static_cast<size_t>(u)];
    std::copy_n(host_state.momentum1.data() + r * s1, s1, hs1.data() + u * s1);
    std::copy_n(host_state.momentum2.data() + r * s2, s2, hs2.data() + u * s2);
  }
  std::vector<int64_t> hid(static_cast<size_t>(G)), hoff(static_cast<size_t>(G + 1));
  std::iota(hid.begin(), hid.end(), int64_t{0});
  std::iota(hoff.begin(), hoff.end(), int64_t{0});
  dev_->to_device(st1.device_data(), hs1.data(), G * s1 * 4);
  dev_->to_device(st2.device_data(), hs2.data(), G * s2 * 4);
  dev_->to_device(ids.device_data(), hid.data(), G * 8);
  dev_->to_device(off.device_data(), hoff.data(), (G + 1) * 8);
  dev_->to_device(vals.device_data(), grad.values.data(), G * dim_ * 4);
  const int64_t state_bytes = G * (s1 + s2) * 4;
  counters_.bytes_h2d += state_bytes;
  // rows: the shard's row count, whose lookup / update plan the device prepared (the ids are < G)
  dev_->update(opt, iteration, rows.device_data(), s1 > 0 ? st1.device_data() : nullptr,
               s2 > 0 ? st2.device_data() : nullptr, num_rows_, dim_, ids.device_data(), off.device_data(), G,
               vals.device_data());
  std::vector<float> updated;  // the rows not cached, back to host memory
  for (int64_t u = 0; u < G; ++u) {
    const int64_t s = slot[static_cast<size_t>(u)];
    if (s >= 0) {
      d2d(cache_rows() + s * dim_, rows.device_data() + u * dim_, dim_);
      dirty_[static_cast<size_t>(s)] = 1;
      continue;
    }
    if (updated.empty()) {
      updated.resize(static_cast<size_t>(G * dim_));
      dev_->to_host(updated.data(), rows.device_data(), G * dim_ * 4);
    }
    std::memcpy(host_rows + grad.rows[static_cast<size_t>(u)] * dim_, updated.data() + u * dim_,
                sizeof(float) * static_cast<size_t>(dim_));
    counters_.bytes_d2h += dim_ * 4;
  }
  dev_->to_host(hs1.data(), st1.device_data(), G * s1 * 4);
  dev_->to_host(hs2.data(), st2.device_data(), G * s2 * 4);
  for (int64_t u = 0; u < G; ++u) {
    const int64_t r = grad.rows[static_cast<size_t>(u)];
    std::copy_n(hs1.data() + u * s1, s1, host_state.momentum1.data() + r * s1);
    std::copy_n(hs2.data() + u * s2, s2, host_state.momentum2.data() + r * s2);
  }
  counters_.bytes_d2h += state_bytes;
}

HostTransferCounters HostRowStore::take_counters() {
  HostTransferCounters c = counters_;
  counters_ = {};
  return c;
}

}  // namespace embedscope::engine
