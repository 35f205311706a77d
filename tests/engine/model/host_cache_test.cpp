// HostRowStore (model/host_cache.h) by hand: which rows the lru and lfu caches keep, when a
// dirty row goes back to host memory, what each lookup and update counts, and that the rows a
// lookup or an update sees are bit for bit those of the shard in place.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "embedscope/engine/model/host_cache.h"

namespace es = embedscope::engine;

namespace {

constexpr int64_t kHcMiB = int64_t{1} << 20;

es::DeviceArena host_cache_arena() { return es::DeviceArena(0, es::AllocatorConfig{es::AllocatorKind::direct, 64 * kHcMiB, 0, true}); }

// rows x 2: row r = {r, 10 r}
std::vector<float> ramp_rows(int64_t rows) {
  std::vector<float> h;
  for (int64_t r = 0; r < rows; ++r) {
    h.push_back(static_cast<float>(r));
    h.push_back(static_cast<float>(10 * r));
  }
  return h;
}

std::vector<float> as_vector(es::DeviceBuffer<float>& b) { return {b.data(), b.data() + b.size()}; }

TEST(HostCache, CacheSlotsIsTheCeilingOfTheLoadFactorTimesTheRows) {
  EXPECT_EQ(es::cache_slots(0.2, 1000), 200);
  EXPECT_EQ(es::cache_slots(0.3, 7), 3);  // ceil(2.1)
  EXPECT_EQ(es::cache_slots(0.001, 10), 1);
  EXPECT_EQ(es::cache_slots(1.0, 10), 10);
  EXPECT_THROW(es::cache_slots(0.0, 10), std::invalid_argument);
  EXPECT_THROW(es::cache_slots(1.5, 10), std::invalid_argument);
}

// 6 rows, 2 slots, lru, sgd lr 0.5: the trace in the comments is the hand computation.
TEST(HostCache, LruEvictsTheLeastRecentlyUsedUnlockedSlotAndWritesDirtyRowsBack) {
  auto arena = host_cache_arena();
  std::vector<float> host = ramp_rows(6);
  es::HostRowStore store(es::TablePlacement::host_cached, es::CachePolicy::lru, es::OptimizerType::sgd, 6, 2, 2, &arena);
  EXPECT_EQ(store.cache_bytes(), 512);  // 2 x 2 x 4 = 16 B of rows in the allocator's 512 B block
  EXPECT_GE(arena.in_use(), 16);  // the cache is in the arena
  std::vector<int64_t> local;
  // lookup 1: rows 0, 1 miss and fill the two empty slots
  const int64_t ids1[] = {0, 1, 0};
  auto b1 = store.gather(host.data(), ids1, 3, local);
  EXPECT_EQ(local, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(as_vector(b1), (std::vector<float>{0, 0, 1, 10}));
  EXPECT_EQ(store.row_in_slot(0), 0);
  EXPECT_EQ(store.row_in_slot(1), 1);
  es::HostTransferCounters c = store.take_counters();
  EXPECT_EQ(c.cache_hits, 0);
  EXPECT_EQ(c.cache_misses, 2);
  EXPECT_EQ(c.rows_fetched, 2);
  EXPECT_EQ(c.bytes_h2d, 2 * 2 * 4);
  EXPECT_EQ(c.bytes_d2h, 0);
  // lookup 2: row 2 misses; both slots last used at lookup 1, the tie goes to slot 0 (row 0, clean)
  const int64_t ids2[] = {2};
  store.gather(host.data(), ids2, 1, local);
  EXPECT_EQ(store.slot_of(0), -1);
  EXPECT_EQ(store.slot_of(2), 0);
  EXPECT_EQ(store.take_counters().bytes_d2h, 0);
  // update rows 1 and 2 (both cached): updated in their slots, host memory unchanged
  es::OptimizerSpec sgd;
  sgd.type = es::OptimizerType::sgd;
  sgd.learning_rate = 0.5;
  es::SparseGrad g;
  g.dim = 2;
  g.rows = {1, 2};
  g.values = {1, 1, 2, 2};
  store.update(sgd, 1, host.data(), {}, g);
  EXPECT_TRUE(store.dirty(0));
  EXPECT_TRUE(store.dirty(1));
  EXPECT_EQ(host[2], 1.0f);  // row 1 still {1, 10} in host memory
  EXPECT_EQ(host[4], 2.0f);  // row 2 still {2, 20}
  c = store.take_counters();
  EXPECT_EQ(c.rows_fetched, 0);
  EXPECT_EQ(c.bytes_h2d, 0);  // sgd keeps no state
  EXPECT_EQ(c.bytes_d2h, 0);
  // lookup 3: row 1 hits (slot 1, locked now); row 3 misses and evicts slot 0 (row 2, dirty):
  // row 2 = {2 - 0.5 x 2, 20 - 0.5 x 2} = {1, 19} goes back to host memory first
  const int64_t ids3[] = {3, 1};
  auto b3 = store.gather(host.data(), ids3, 2, local);
  EXPECT_EQ(local, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(as_vector(b3), (std::vector<float>{0.5f, 9.5f, 3, 30}));  // row 1 from its slot, updated
  EXPECT_EQ(host[4], 1.0f);
  EXPECT_EQ(host[5], 19.0f);
  EXPECT_EQ(store.slot_of(3), 0);
  EXPECT_FALSE(store.dirty(0));
  c = store.take_counters();
  EXPECT_EQ(c.cache_hits, 1);
  EXPECT_EQ(c.cache_misses, 1);
  EXPECT_EQ(c.rows_fetched, 1);
  EXPECT_EQ(c.bytes_h2d, 8);
  EXPECT_EQ(c.bytes_d2h, 8);  // the dirty row 2
  // flush: row 1 (dirty in slot 1) back to host memory
  store.flush(host.data());
  EXPECT_EQ(host[2], 0.5f);
  EXPECT_EQ(host[3], 9.5f);
  EXPECT_FALSE(store.dirty(1));
  EXPECT_EQ(store.take_counters().bytes_d2h, 8);
}

// More distinct rows in one lookup than slots: the rows that find no unlocked slot are read
// from host memory for that lookup only.
TEST(HostCache, RowsBeyondTheSlotsOfOneLookupAreReadFromHostMemory) {
  auto arena = host_cache_arena();
  std::vector<float> host = ramp_rows(6);
  es::HostRowStore store(es::TablePlacement::host_cached, es::CachePolicy::lru, es::OptimizerType::sgd, 6, 2, 2, &arena);
  std::vector<int64_t> local;
  const int64_t ids[] = {4, 0, 2};
  auto b = store.gather(host.data(), ids, 3, local);
  EXPECT_EQ(as_vector(b), (std::vector<float>{0, 0, 2, 20, 4, 40}));
  EXPECT_EQ(local, (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(store.slot_of(0), 0);
  EXPECT_EQ(store.slot_of(2), 1);
  EXPECT_EQ(store.slot_of(4), -1);  // both slots locked by rows 0 and 2
  const es::HostTransferCounters c = store.take_counters();
  EXPECT_EQ(c.cache_misses, 3);
  EXPECT_EQ(c.rows_fetched, 3);
  // an update of the uncached row goes straight back to host memory
  es::OptimizerSpec sgd;
  sgd.learning_rate = 1.0;
  es::SparseGrad g{2, {4}, {1, 1}};
  store.update(sgd, 1, host.data(), {}, g);
  EXPECT_EQ(host[8], 3.0f);
  EXPECT_EQ(host[9], 39.0f);
  const es::HostTransferCounters u = store.take_counters();
  EXPECT_EQ(u.rows_fetched, 0);  // read in place: bytes, not a row fetched (FBGEMM's unique misses count lookups)
  EXPECT_EQ(u.bytes_h2d, 8);
  EXPECT_EQ(u.bytes_d2h, 8);
}

// lfu, one slot: a row is inserted only when it has been named at least as often as the row it
// would evict.
TEST(HostCache, LfuKeepsTheMoreFrequentRow) {
  auto arena = host_cache_arena();
  std::vector<float> host = ramp_rows(4);
  es::HostRowStore store(es::TablePlacement::host_cached, es::CachePolicy::lfu, es::OptimizerType::sgd, 4, 2, 1, &arena);
  EXPECT_EQ(store.host_side_bytes(), 4 * 8 + 4 * 8);  // the row -> slot index and a count, int64 a row each
  std::vector<int64_t> local;
  const int64_t three_zeros[] = {0, 0, 0};
  store.gather(host.data(), three_zeros, 3, local);  // count(0) = 3: into the empty slot
  EXPECT_EQ(store.row_in_slot(0), 0);
  const int64_t one[] = {1};
  auto b = store.gather(host.data(), one, 1, local);  // count(1) = 1 < 3: read from host, not inserted
  EXPECT_EQ(as_vector(b), (std::vector<float>{1, 10}));
  EXPECT_EQ(store.row_in_slot(0), 0);
  const int64_t three_ones[] = {1, 1, 1};
  store.gather(host.data(), three_ones, 3, local);  // count(1) = 4 >= 3: evicts row 0
  EXPECT_EQ(store.row_in_slot(0), 1);
  const es::HostTransferCounters c = store.take_counters();
  EXPECT_EQ(c.cache_hits, 0);
  EXPECT_EQ(c.cache_misses, 3);
  // an lru cache in its place would have taken row 1 at the second lookup
  es::HostRowStore lru(es::TablePlacement::host_cached, es::CachePolicy::lru, es::OptimizerType::sgd, 4, 2, 1, &arena);
  lru.gather(host.data(), three_zeros, 3, local);
  lru.gather(host.data(), one, 1, local);
  EXPECT_EQ(lru.row_in_slot(0), 1);
}

// placement host: every distinct row of a lookup is fetched; an update moves rows and state
// both ways (rowwise_adagrad: one state value a row).
TEST(HostCache, HostPlacementFetchesEveryRowAndMovesTheState) {
  auto arena = host_cache_arena();
  std::vector<float> host = ramp_rows(5), m1(5, 0.0f);
  es::HostRowStore store(es::TablePlacement::host, es::CachePolicy::lru, es::OptimizerType::rowwise_adagrad, 5, 2, 0,
                         &arena);
  EXPECT_EQ(store.cache_bytes(), 0);
  EXPECT_EQ(arena.in_use(), 0);
  std::vector<int64_t> local;
  const int64_t ids[] = {3, 1, 3, 3};
  auto b = store.gather(host.data(), ids, 4, local);
  EXPECT_EQ(as_vector(b), (std::vector<float>{1, 10, 3, 30}));
  EXPECT_EQ(local, (std::vector<int64_t>{1, 0, 1, 1}));
  es::HostTransferCounters c = store.take_counters();
  EXPECT_EQ(c.cache_misses, 2);
  EXPECT_EQ(c.rows_fetched, 2);
  EXPECT_EQ(c.bytes_h2d, 16);
  es::OptimizerSpec opt;
  opt.type = es::OptimizerType::rowwise_adagrad;
  es::SparseGrad g{2, {1, 3}, {1, 1, 2, 2}};
  std::vector<float> m2;
  store.update(opt, 1, host.data(), {{m1.data(), m1.size()}, {m2.data(), m2.size()}, es::OptimizerStateType::fp32, {}, {}},
               g);
  EXPECT_FLOAT_EQ(m1[1], 1.0f);  // mean of g^2 over the columns
  EXPECT_FLOAT_EQ(m1[3], 4.0f);
  c = store.take_counters();
  EXPECT_EQ(c.rows_fetched, 0);  // the update's reads are bytes, not rows fetched (host_cache.h)
  EXPECT_EQ(c.bytes_h2d, 2 * (2 + 1) * 4);
  EXPECT_EQ(c.bytes_d2h, 2 * (2 + 1) * 4);
}

// Random lookups and adam updates through a small lru cache give the rows and state of
// apply_row_optimizer on the shard in place, bit for bit.
TEST(HostCache, RowsAndStateEqualTheShardUpdatedInPlace) {
  for (es::CachePolicy policy : {es::CachePolicy::lru, es::CachePolicy::lfu}) {
    constexpr int64_t kRows = 40, kDim = 3;
    auto arena = host_cache_arena();
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> host(kRows * kDim), ref;
    for (auto& v : host) v = u(rng);
    ref = host;
    std::vector<float> m1(kRows * kDim), m2(kRows * kDim), r1(m1), r2(m2);
    es::OptimizerSpec adam;
    adam.type = es::OptimizerType::adam;
    es::HostRowStore store(es::TablePlacement::host_cached, policy, es::OptimizerType::adam, kRows, kDim, 7, &arena);
    std::uniform_int_distribution<int64_t> row(0, kRows - 1);
    for (int64_t it = 1; it <= 30; ++it) {
      std::vector<int64_t> ids(9), local;
      for (auto& i : ids) i = row(rng);
      auto b = store.gather(host.data(), ids.data(), 9, local);
      for (size_t i = 0; i < ids.size(); ++i)
        for (int64_t c = 0; c < kDim; ++c)
          ASSERT_EQ(b[static_cast<size_t>(local[i] * kDim + c)], ref[static_cast<size_t>(ids[i] * kDim + c)])
              << "iteration " << it;
      std::vector<int64_t> rows = ids;
      std::sort(rows.begin(), rows.end());
      rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
      es::SparseGrad g{kDim, rows, {}};
      for (size_t k = 0; k < rows.size() * kDim; ++k) g.values.push_back(u(rng));
      store.update(adam, it, host.data(), {{m1.data(), m1.size()}, {m2.data(), m2.size()}, es::OptimizerStateType::fp32, {}, {}}, g);
      es::apply_row_optimizer(adam, it, ref.data(), kDim,
                              {{r1.data(), r1.size()}, {r2.data(), r2.size()}, es::OptimizerStateType::fp32, {}, {}}, g);
    }
    store.flush(host.data());
    EXPECT_EQ(host, ref);
    EXPECT_EQ(m1, r1);
    EXPECT_EQ(m2, r2);
  }
}

TEST(HostCache, RefusesWhatItCannotHold) {
  auto arena = host_cache_arena();
  EXPECT_THROW(es::HostRowStore(es::TablePlacement::device, es::CachePolicy::lru, es::OptimizerType::sgd, 4, 2, 1, &arena),
               std::invalid_argument);
  EXPECT_THROW(es::HostRowStore(es::TablePlacement::host_cached, es::CachePolicy::lru, es::OptimizerType::sgd, 4, 2, 5, &arena),
               std::invalid_argument);
  EXPECT_THROW(es::HostRowStore(es::TablePlacement::host_cached, es::CachePolicy::lru, es::OptimizerType::sgd, 4, 2, 0, &arena),
               std::invalid_argument);
}

}  // namespace
