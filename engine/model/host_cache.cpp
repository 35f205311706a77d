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

namespace {
// The evictions a call deferred (slot, host row), appended to the call's index upload as their
// slots, then their rows (the write-back's src and dst indices), and forgotten.
void take_evictions(std::vector<std::pair<int64_t, int64_t>>& pending, std::vector<int64_t>& idx) {
  for (const auto& [slot, row] : pending) idx.push_back(slot);
  for (const auto& [slot, row] : pending) idx.push_back(row);
  pending.clear();
}
}  // namespace

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
  in_flight_.assign(static_cast<size_t>(slots), 0);
  if (policy == CachePolicy::lfu) lfu_count_.assign(static_cast<size_t>(num_rows), 0);
}

HostRowStore::~HostRowStore() {
  if (!dev_) return;
  if (rows_host_) dev_->unpin_host(rows_host_, rows_bytes_);
  if (m1_host_) dev_->unpin_host(m1_host_, m1_bytes_);
  if (m2_host_) dev_->unpin_host(m2_host_, m2_bytes_);
}

float* HostRowStore::pinned_ptr(float*& pinned_host, float*& pinned_dev, int64_t& pinned_bytes, float* host, int64_t bytes,
                            const char* what) {
  if (pinned_host == host && pinned_bytes == bytes) return pinned_dev;
  if (pinned_host)
    throw std::logic_error(fmt::format("HostRowStore ({}): the {} passed are not the ones pinned", what_, what));
  pinned_dev = static_cast<float*>(dev_->pin_host(host, bytes, fmt::format("{}: {}", what_, what)));
  pinned_host = host;
  pinned_bytes = bytes;
  return pinned_dev;
}

void HostRowStore::pin(float* host_rows, RowOptimizerState state, const std::string& what) {
  if (!dev_) return;
  what_ = what;
  pinned_ptr(rows_host_, rows_dev_, rows_bytes_, host_rows, num_rows_ * dim_ * 4, "host rows");
  if (state.type != OptimizerStateType::fp32) return;  // refused with a device (update)
  if (!state.momentum1.empty())
    pinned_ptr(m1_host_, m1_dev_, m1_bytes_, state.momentum1.data(), static_cast<int64_t>(state.momentum1.size()) * 4,
           "optimizer state (momentum1)");
  if (!state.momentum2.empty())
    pinned_ptr(m2_host_, m2_dev_, m2_bytes_, state.momentum2.data(), static_cast<int64_t>(state.momentum2.size()) * 4,
           "optimizer state (momentum2)");
}

DeviceBuffer<int64_t> HostRowStore::upload(const std::vector<int64_t>& idx) {
  DeviceBuffer<int64_t> b(arena_, "host_fetch");
  b.assign(idx.size());
  b.release_host_copy();  // written and read on the device only
  dev_->to_device(b.device_data(), idx.data(), static_cast<int64_t>(idx.size()) * 8);
  return b;
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
    if (dev_) pending_evict_.emplace_back(best, old);  // written back by the caller's batched copy
    else d2h(host_rows + old * dim_, cache_rows() + best * dim_, dim_);
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
  if (dev_) return gather_on_device(host_rows, uniq, times);
  const auto U = static_cast<int64_t>(uniq.size());
  DeviceBuffer<float> out(arena_, "host_fetch");
  out.assign(static_cast<size_t>(U * dim_));
  out.release_host_copy();  // on a device: its rows are written and read there only
  float* const rows = out.data();
  auto fetch = [&](int64_t r, float* dst) {
    h2d(dst, host_rows + r * dim_, dim_);
    counters_.rows_fetched += 1;
    counters_.bytes_h2d += dim_ * 4;
  };
  if (placement_ == TablePlacement::host) {
    for (int64_t u = 0; u < U; ++u) fetch(uniq[static_cast<size_t>(u)], rows + u * dim_);
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
    in_flight_[static_cast<size_t>(s)] = 1;
  }
  return out;
}

DeviceBuffer<float> HostRowStore::gather_on_device(float* host_rows, const std::vector<int64_t>& uniq,
                                                   const std::vector<int64_t>& times) {
  // the same decisions and counters as gather() on the host; then the data in 2-4 copies
  const auto U = static_cast<int64_t>(uniq.size());
  DeviceBuffer<float> out(arena_, "host_fetch");
  out.assign(static_cast<size_t>(U * dim_));
  out.release_host_copy();  // written and read on the device only
  if (U == 0) return out;
  float* const host = pinned_ptr(rows_host_, rows_dev_, rows_bytes_, host_rows, num_rows_ * dim_ * 4, "host rows");
  // src[u]: row u of the buffer comes from slot src[u] (>= 0) or host row -1 - src[u]
  std::vector<int64_t> src(static_cast<size_t>(U)), ins_u, ins_slot;
  for (int64_t u = 0; u < U; ++u) src[static_cast<size_t>(u)] = -1 - uniq[static_cast<size_t>(u)];
  counters_.cache_misses += placement_ == TablePlacement::host ? U : 0;
  if (placement_ == TablePlacement::host) {
    counters_.rows_fetched += U;
    counters_.bytes_h2d += U * dim_ * 4;
  } else {
    ++tick_;
    std::vector<int64_t> misses, locked;  // hits first, each locked before any miss picks a victim
    for (int64_t u = 0; u < U; ++u) {
      const int64_t s = row_slot_[static_cast<size_t>(uniq[static_cast<size_t>(u)])];
      if (s < 0) {
        misses.push_back(u);
        continue;
      }
      unlocked_.erase({key(s), s});
      locked.push_back(s);
      src[static_cast<size_t>(u)] = s;
      counters_.cache_hits += 1;
    }
    if (policy_ == CachePolicy::lfu)
      for (int64_t u = 0; u < U; ++u)
        lfu_count_[static_cast<size_t>(uniq[static_cast<size_t>(u)])] += times[static_cast<size_t>(u)];
    for (int64_t u : misses) {
      const int64_t r = uniq[static_cast<size_t>(u)];
      counters_.cache_misses += 1;
      counters_.rows_fetched += 1;
      counters_.bytes_h2d += dim_ * 4;
      const int64_t s = victim_for(r, host_rows);
      if (s < 0) continue;  // read from host memory for this lookup only
      const auto k = static_cast<size_t>(s);
      ins_u.push_back(u);
      ins_slot.push_back(s);
      slot_row_[k] = r;
      row_slot_[static_cast<size_t>(r)] = s;
      dirty_[k] = 0;
      locked.push_back(s);
    }
    for (int64_t s : locked) {
      last_use_[static_cast<size_t>(s)] = tick_;
      pinned_[static_cast<size_t>(s)] = 0;
      unlocked_.insert({key(s), s});
      in_flight_[static_cast<size_t>(s)] = 1;
    }
  }
  // one upload: [src U][victim slots E][victim rows E][inserted buffer rows I][their slots I]
  const auto E = static_cast<int64_t>(pending_evict_.size()), I = static_cast<int64_t>(ins_u.size());
  std::vector<int64_t> idx = src;
  take_evictions(pending_evict_, idx);
  idx.insert(idx.end(), ins_u.begin(), ins_u.end());
  idx.insert(idx.end(), ins_slot.begin(), ins_slot.end());
  DeviceBuffer<int64_t> d_idx = upload(idx);
  const int64_t* const di = d_idx.device_data();
  float* const cache = slots() > 0 ? cache_rows() : nullptr;
  // dirty victims back to their host rows before anything is inserted over them (lxu_cache_flush)
  if (E > 0) dev_->copy_rows(E, dim_, cache, nullptr, di + U, host, nullptr, di + U + E, false);
  // hits from their slots, misses from the host rows (FBGEMM's UVM-caching forward)
  dev_->copy_rows(U, dim_, cache, host, di, out.device_data(), nullptr, nullptr, false);
  // the inserted rows into their slots (lxu_cache_populate)
  if (I > 0) dev_->copy_rows(I, dim_, out.device_data(), nullptr, di + U + 2 * E, cache, nullptr, di + U + 2 * E + I, false);
  return out;
}

void HostRowStore::prefetch(float* host_rows, const int64_t* ids, int64_t n_ids) {
  if (placement_ != TablePlacement::host_cached)
    throw std::invalid_argument("HostRowStore::prefetch: only a host_cached shard has a cache to prefetch into");
  ++tick_;
  // one pass over the slots: the pins of an earlier prefetch that no lookup used end, and the
  // rows of the batch in flight (the lookups since the last prefetch) are locked while it runs
  std::vector<int64_t> held;
  for (int64_t s = 0; s < slots(); ++s) {
    const auto k = static_cast<size_t>(s);
    if (pinned_[k]) {
      pinned_[k] = 0;
      unlocked_.insert({key(s), s});
    }
    if (in_flight_[k]) {
      in_flight_[k] = 0;
      if (unlocked_.erase({key(s), s}) > 0) held.push_back(s);
    }
  }
  auto pin = [&](int64_t s) {
    pinned_[static_cast<size_t>(s)] = 1;
    last_use_[static_cast<size_t>(s)] = tick_;
  };
  // the batch's distinct rows and their ids; the cached ones pinned first, so that no miss of
  // this batch evicts a row of it
  std::vector<int64_t> sorted(ids, ids + n_ids);
  std::sort(sorted.begin(), sorted.end());
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
  // the misses' slots: the decisions and counters, once for both paths (dirty victims are
  // written back by victim_for, or deferred to the batched copy with a device)
  std::vector<int64_t> rows, slots_of;
  for (const auto& [r, times] : misses) {
    const int64_t s = victim_for(r, host_rows, times);
    if (s < 0) continue;  // no room: the lookup fetches it
    counters_.rows_fetched += 1;
    counters_.bytes_h2d += dim_ * 4;
    counters_.prefetched_rows += 1;
    counters_.prefetch_bytes_h2d += dim_ * 4;
    slot_row_[static_cast<size_t>(s)] = r;
    row_slot_[static_cast<size_t>(r)] = s;
    dirty_[static_cast<size_t>(s)] = 0;
    pin(s);
    rows.push_back(r);
    slots_of.push_back(s);
  }
  if (dev_) {
    prefetch_on_device(host_rows, rows, slots_of);
  } else {
    for (size_t m = 0; m < rows.size(); ++m) h2d(cache_rows() + slots_of[m] * dim_, host_rows + rows[m] * dim_, dim_);
  }
  for (int64_t s : held)  // the batch in flight's rows are victims again (unless this batch pinned them)
    if (!pinned_[static_cast<size_t>(s)]) unlocked_.insert({key(s), s});
}

void HostRowStore::prefetch_on_device(float* host_rows, const std::vector<int64_t>& rows,
                                      const std::vector<int64_t>& slots_of) {
  // prefetch()'s copies: the victims written back and the rows fetched, one copy each
  const auto E = static_cast<int64_t>(pending_evict_.size()), M = static_cast<int64_t>(rows.size());
  if (E + M == 0) return;
  float* const host = pinned_ptr(rows_host_, rows_dev_, rows_bytes_, host_rows, num_rows_ * dim_ * 4, "host rows");
  std::vector<int64_t> idx;  // [victim slots E][victim rows E][fetched rows M][their slots M]
  take_evictions(pending_evict_, idx);
  idx.insert(idx.end(), rows.begin(), rows.end());
  idx.insert(idx.end(), slots_of.begin(), slots_of.end());
  DeviceBuffer<int64_t> d_idx = upload(idx);
  const int64_t* const di = d_idx.device_data();
  if (E > 0) dev_->copy_rows(E, dim_, cache_rows(), nullptr, di, host, nullptr, di + E, false);
  if (M > 0) dev_->copy_rows(M, dim_, host, nullptr, di + 2 * E, cache_rows(), nullptr, di + 2 * E + M, false);
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
    } else {  // read (and written back below) in place: bytes, not a row fetched (model/host_cache.h)
      std::memcpy(rows.data() + u * dim_, host_rows + r * dim_, row_size);
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
  if (dev_) {  // every dirty row in one copy, waited for (the host reads host_rows next)
    std::vector<int64_t> idx, rows;
    for (int64_t s = 0; s < slots(); ++s) {
      const auto k = static_cast<size_t>(s);
      if (!dirty_[k]) continue;
      idx.push_back(s);
      rows.push_back(slot_row_[k]);
      counters_.bytes_d2h += dim_ * 4;
      dirty_[k] = 0;
    }
    const auto E = static_cast<int64_t>(idx.size());
    if (E == 0) return;
    float* const host = pinned_ptr(rows_host_, rows_dev_, rows_bytes_, host_rows, num_rows_ * dim_ * 4, "host rows");
    idx.insert(idx.end(), rows.begin(), rows.end());
    DeviceBuffer<int64_t> d_idx = upload(idx);
    dev_->copy_rows(E, dim_, cache_rows(), nullptr, d_idx.device_data(), host, nullptr, d_idx.device_data() + E, true);
    return;
  }
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
  // as update(): the same rows fetched, the same counters; the rows (slot or host rows) and their
  // state rows gathered into device buffers by copy_rows, the device's row optimizer on them with
  // row ids 0..G-1, then written back: 4 + 2 ([s1 > 0] + [s2 > 0]) copies (the header)
  const auto G = static_cast<int64_t>(grad.rows.size());
  const int64_t s1 = state1_per_row_, s2 = state2_per_row_;
  float* const host = pinned_ptr(rows_host_, rows_dev_, rows_bytes_, host_rows, num_rows_ * dim_ * 4, "host rows");
  float* const hm1 = s1 > 0 ? pinned_ptr(m1_host_, m1_dev_, m1_bytes_, host_state.momentum1.data(),
                                     static_cast<int64_t>(host_state.momentum1.size()) * 4, "optimizer state (momentum1)")
                            : nullptr;
  float* const hm2 = s2 > 0 ? pinned_ptr(m2_host_, m2_dev_, m2_bytes_, host_state.momentum2.data(),
                                     static_cast<int64_t>(host_state.momentum2.size()) * 4, "optimizer state (momentum2)")
                            : nullptr;
  auto device_buffer = [&](int64_t n) {
    DeviceBuffer<float> b(arena_, "host_fetch");
    b.assign(static_cast<size_t>(n));
    b.release_host_copy();
    return b;
  };
  auto rows = device_buffer(G * dim_), st1 = device_buffer(G * s1), st2 = device_buffer(G * s2),
       vals = device_buffer(G * dim_);
  // one upload: [where each row is: slot, or -1 - host row; G][row ids 0..G-1][offsets 0..G][host rows G]
  std::vector<int64_t> idx(static_cast<size_t>(4 * G + 1));
  for (int64_t u = 0; u < G; ++u) {
    const int64_t r = grad.rows[static_cast<size_t>(u)];
    const int64_t s = placement_ == TablePlacement::host_cached ? row_slot_[static_cast<size_t>(r)] : -1;
    idx[static_cast<size_t>(u)] = s >= 0 ? s : -1 - r;
    if (s < 0) counters_.bytes_h2d += dim_ * 4;  // bytes, not a row fetched (as update())
    idx[static_cast<size_t>(G + u)] = u;
    idx[static_cast<size_t>(2 * G + u)] = u;
    idx[static_cast<size_t>(3 * G + 1 + u)] = r;
  }
  idx[static_cast<size_t>(3 * G)] = G;
  DeviceBuffer<int64_t> d_idx = upload(idx);
  const int64_t* const where = d_idx.device_data();
  const int64_t* const ids = where + G;
  const int64_t* const off = where + 2 * G;
  const int64_t* const host_of = where + 3 * G + 1;
  dev_->to_device(vals.device_data(), grad.values.data(), G * dim_ * 4);
  float* const cache = slots() > 0 ? cache_rows() : nullptr;
  dev_->copy_rows(G, dim_, cache, host, where, rows.device_data(), nullptr, nullptr, false);
  if (s1 > 0) dev_->copy_rows(G, s1, hm1, nullptr, host_of, st1.device_data(), nullptr, nullptr, false);
  if (s2 > 0) dev_->copy_rows(G, s2, hm2, nullptr, host_of, st2.device_data(), nullptr, nullptr, false);
  const int64_t state_bytes = G * (s1 + s2) * 4;
  counters_.bytes_h2d += state_bytes;
  // rows: the shard's row count, whose lookup / update plan the device prepared (the ids are < G)
  dev_->update(opt, iteration, rows.device_data(), s1 > 0 ? st1.device_data() : nullptr,
               s2 > 0 ? st2.device_data() : nullptr, num_rows_, dim_, ids, off, G, vals.device_data());
  // the rows back where they came from (a cached row stays in its slot, now dirty); the last
  // copy waits, so that the host memory holds them when this returns
  dev_->copy_rows(G, dim_, rows.device_data(), nullptr, nullptr, cache, host, where, s1 == 0 && s2 == 0);
  for (int64_t u = 0; u < G; ++u) {
    const int64_t s = idx[static_cast<size_t>(u)];
    if (s >= 0) dirty_[static_cast<size_t>(s)] = 1;
    else counters_.bytes_d2h += dim_ * 4;
  }
  if (s1 > 0) dev_->copy_rows(G, s1, st1.device_data(), nullptr, nullptr, hm1, nullptr, host_of, s2 == 0);
  if (s2 > 0) dev_->copy_rows(G, s2, st2.device_data(), nullptr, nullptr, hm2, nullptr, host_of, true);
  counters_.bytes_d2h += state_bytes;
}

HostTransferCounters HostRowStore::take_counters() {
  HostTransferCounters c = counters_;
  counters_ = {};
  return c;
}

}  // namespace embedscope::engine
