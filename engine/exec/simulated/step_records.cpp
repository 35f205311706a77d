// What a simulated run records besides its ops' times (exec/simulated/step_records.h).
#include "step_records.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "embedscope/engine/cost/cache_model.h"
#include "embedscope/engine/model/host_cache.h"
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/sessions/model/hot_row_replica.h"
#include "program/program_sink.h"

namespace embedscope::engine::simulated {

std::vector<RunResult::TableStorage> planned_table_storage(const WorkloadSpec& spec, const ShardingPlan& plan,
                                                           const detail::Layout& layout, int W) {
  std::vector<RunResult::TableStorage> out(spec.tables.size());
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    const TableSpec& ts_spec = spec.tables[t];
    RunResult::TableStorage& ts = out[t];
    ts.name = ts_spec.name;
    ts.data_type = ts_spec.data_type;
    ts.stochastic_rounding = ts_spec.uses_stochastic_rounding() && ts.data_type != TableDataType::fp32;
    ts.optimizer_state_type = ts_spec.optimizer_state_type;
    ts.placement = ts_spec.placement;
    if (ts.placement == TablePlacement::host_cached) {
      ts.cache_policy = ts_spec.cache_policy;
      ts.cache_load_factor = ts_spec.cache_load_factor;
      ts.prefetch_pipeline = ts_spec.prefetch_pipeline;
    }
    ts.hash_size = ts_spec.hash_size;
    ts.low_rank_dim = ts_spec.low_rank_dim;
    for (auto* v : {&ts.weight_bytes, &ts.optimizer_state_bytes, &ts.host_bytes, &ts.cache_bytes})
      v->assign(static_cast<size_t>(W), 0);
    const size_t hot = layout.hot_rows[t].size();
    if (hot > 0) {  // a replica of the hot rows on every rank (sharding/hot_rows.cpp)
      ts.hot_rows = static_cast<int64_t>(hot);
      ts.hot_all_reduce_bytes = ts.hot_rows * (ts_spec.embedding_dim + 1) * 4;
      for (int r = 0; r < W; ++r) {
        ts.weight_bytes[static_cast<size_t>(r)] += ts.hot_rows * ts_spec.embedding_dim * 4;
        ts.optimizer_state_bytes[static_cast<size_t>(r)] +=
            shard_optimizer_state_bytes(spec.optimizer.type, ts_spec, ts.hot_rows, ts_spec.embedding_dim);
      }
    }
  }
  for (const TablePlan& tp : plan.tables) {
    const TableSpec& t = spec.tables[static_cast<size_t>(tp.table)];
    RunResult::TableStorage& ts = out[static_cast<size_t>(tp.table)];
    for (const Shard& sh : tp.shards) {
      const auto r = static_cast<size_t>(sh.rank);
      const int64_t wb = shard_weight_bytes(t, sh.num_rows, sh.num_cols);
      const int64_t sb = shard_optimizer_state_bytes(spec.optimizer.type, t, sh.num_rows, sh.num_cols);
      ts.weight_bytes[r] += wb;
      ts.optimizer_state_bytes[r] += sb;
      if (t.placement != TablePlacement::device) ts.host_bytes[r] += wb + sb;
      if (t.placement == TablePlacement::host_cached) {
        ts.cache_bytes[r] += cache_device_bytes(t.cache_load_factor, sh.num_rows, sh.num_cols);
        // the cache's row -> slot index and LFU's counts, 8 B a row each (model/host_cache.h
        // host_side_bytes, as the memory estimate counts them: tester35 D8)
        ts.host_bytes[r] += 8 * sh.num_rows * (t.cache_policy == CachePolicy::lfu ? 2 : 1);
      }
    }
  }
  return out;
}

// The memory counter of rank `r`'s end of iteration `it` (tester51 F7): the planner's replay of
// the rank's allocator (planner/memory_replay.h ReplayedMemory::step_ends) at that iteration's
// end - allocated, reserved, segments, largest free block, fragmentation, as a run's rank records
// its allocator (threaded/memory_records.h) - or at the last replayed one's for an iteration after
// the replayed first min(iterations, 8) (the steady state's; a pipeline's drain in the last two is
// not replayed). The peaks are the whole replay's at every step, as before: peak allocated the
// estimate's total (`plan`'s total, the step rows' figure), peak reserved the replay's
// peak_reserved (`plan --json`'s reserved_bytes).
void fill_replayed_counter(sessions::MemoryCounter& m, const detail::ReplayedMemory& rm, const DeviceMemoryEstimate& e,
                           int64_t it) {
  m.allocated = m.reserved = m.peak_allocated = m.peak_reserved = e.total();
  if (rm.step_ends.empty()) return;
  const MemoryStats& s = rm.step_ends[static_cast<size_t>(std::min<int64_t>(it, static_cast<int64_t>(rm.step_ends.size()) - 1))];
  m.allocated = s.allocated;
  m.reserved = s.reserved;
  m.peak_reserved = std::max(e.peak_reserved, e.total());
  m.largest_free_block = s.largest_free_block;
  m.rounding_loss = s.rounding_loss;
  m.segments = s.segments;
  m.external_fragmentation = s.external_fragmentation;
  m.memviz_fragmentation = s.memviz_fragmentation;
}

std::vector<sessions::LoadCounter> expected_load_counters(const WorkloadSpec& spec, const detail::Layout& layout, int r,
                                                          int64_t it, int64_t step, int64_t cold_iterations,
                                                          const StepLookups& lk, bool measured, CacheMemo& cache_memo,
                                                          std::vector<RunResult::TableStorage>& storage) {
  const int W = spec.devices.count;
  // expected load of every local shard (program/program_sink.h expected_slot_ids)
  std::map<std::pair<int, int>, sessions::LoadCounter> load;
  std::map<std::pair<int, int>, std::vector<std::pair<int, double>>> host_ids;  // shards in host memory
  std::map<std::pair<int, int>, Shard> host_shard;
  std::map<std::pair<int, int>, double> lookup_bytes;  // each shard's share of the lookups' memory traffic
  // The slots' expected ids rounded cumulatively (each gets round(sum so far) - round(sum
  // before it)): the rank's counters of a step add up to round(its expected ids), the
  // program's lookup rows (and RunResult's ids_looked_up), not to a sum of roundings, which
  // drifted by up to half an id per slot (crit42 / tester42 F2: stats 257700 against run's
  // 257680 on rank 4 of a 16-rank row_wise criteo_kaggle).
  double ids_so_far = 0;
  for (int k : layout.slots_to[static_cast<size_t>(r)]) {
    const detail::Slot& sl = layout.slots[static_cast<size_t>(k)];
    bool exact = true;
    const double ids = static_cast<double>(W) * program::expected_slot_ids(spec, sl, exact);
    lookup_bytes[{sl.table, sl.shard}] += program::ProgramSink::lookup_bytes(
        ids, spec.tables[static_cast<size_t>(sl.table)], sl.s.num_cols, static_cast<double>(W * spec.batch_size));
    if (spec.tables[static_cast<size_t>(sl.table)].placement != TablePlacement::device) {
      host_ids[{sl.table, sl.shard}].emplace_back(sl.feature, ids);
      host_shard[{sl.table, sl.shard}] = sl.s;
    }
    auto& c = load[{sl.table, sl.shard}];
    c.step = step;
    c.rank = r;
    c.table = sl.table;
    c.shard = sl.shard;
    c.ids += std::llround(ids_so_far + ids) - std::llround(ids_so_far);
    ids_so_far += ids;
    // the slot's ids and its W x B bags' lengths, int64 each, as the cpu executor counts them
    // (threaded/rank_input.cpp: slot_ids + slot_len; tester51 F2)
    c.bytes_in += std::llround(ids * 8) + W * spec.batch_size * 8;
    c.bytes_out += W * spec.batch_size * sl.s.num_cols * 4;
  }
  // the ids the rank looks up outside the slots, in its own batch (tester49 F8a: they were in
  // the lookup op's rows, RunResult's ids, but in no load counter): a data_parallel table's
  // replica (shard r, sharding/data_parallel.cpp) and a table's hot-row replica
  // (sessions::kHotRowReplicaShard, sharding/hot_rows.cpp), the modules' local_lookup_work
  auto local_load = [&](int t, int shard, double ids) {
    auto& c = load[{t, shard}];
    c.step = step;
    c.rank = r;
    c.table = t;
    c.shard = shard;
    c.ids += std::llround(ids_so_far + ids) - std::llround(ids_so_far);
    ids_so_far += ids;
    const int64_t bags = layout.B * static_cast<int64_t>(layout.table_features[static_cast<size_t>(t)].size());
    const TableSpec& ts = spec.tables[static_cast<size_t>(t)];
    c.bytes_out += bags * ts.embedding_dim * 4;
    lookup_bytes[{t, shard}] += program::ProgramSink::lookup_bytes(ids, ts, ts.embedding_dim, static_cast<double>(bags));
  };
  for (const int t : layout.dp_tables) {
    double ids = 0;
    for (const int f : layout.table_features[static_cast<size_t>(t)])
      ids += static_cast<double>(layout.B) * spec.features[static_cast<size_t>(f)].pooling_factor.mean;
    local_load(t, r, ids);
  }
  for (const int t : layout.hot_tables) {
    double ids = 0;
    for (const int f : layout.table_features[static_cast<size_t>(t)])
      ids += static_cast<double>(layout.B) * spec.features[static_cast<size_t>(f)].pooling_factor.mean *
             program::hot_id_share(spec, t, f, 0, spec.tables[static_cast<size_t>(t)].rows());
    local_load(t, sessions::kHotRowReplicaShard, ids);
  }
  // tables in host memory: the cache model's expected lookups and transfers (cost/cache_model.h,
  // the figures of the program's host-link ops); a batch prefetched the step before hits
  for (const auto& [key, feats] : host_ids) {
    const TableSpec& t = spec.tables[static_cast<size_t>(key.first)];
    // the steady state, or the cold start while the caches fill (the lookup of batch `it`
    // follows `it` lookups; cost/cache_model.h)
    const int64_t before = it < cold_iterations ? it : -1;
    auto memo = cache_memo.find({r, key.first, key.second, before});
    if (memo == cache_memo.end())
      memo = cache_memo.emplace(std::tuple{r, key.first, key.second, before},
                                estimate_cache(spec, t, host_shard[key], feats, before))
                 .first;
    const CacheEstimate& e = memo->second;
    const bool prefetched = t.prefetch_pipeline && t.placement == TablePlacement::host_cached &&
                            spec.pipeline != PipelineKind::base && it > 0;
    const HostTraffic tr = host_traffic(t, spec.optimizer.type, host_shard[key].num_cols, e, prefetched);
    const double row = 4.0 * static_cast<double>(host_shard[key].num_cols);
    auto& c = load[key];
    c.cache_misses = std::llround(tr.lookup_h2d / row);  // a prefetched batch: what its prefetch could not move
    c.cache_hits = t.placement == TablePlacement::host_cached ? std::llround(e.distinct_rows) - c.cache_misses : 0;
    // the step's unique misses, lookup and prefetch (the update's reads are bytes only: cache_model.h)
    c.rows_fetched = std::llround((tr.lookup_h2d + tr.prefetch_h2d) / row);
    c.bytes_h2d = std::llround(tr.lookup_h2d + tr.prefetch_h2d + tr.update_h2d);
    c.bytes_d2h = std::llround(tr.update_d2h);
    if (measured && lk.own > 0) {  // the run's totals (RunResult::TableStorage: measured steps, all ranks)
      RunResult::TableStorage& ts = storage[static_cast<size_t>(key.first)];
      ts.cache_hits += c.cache_hits;
      ts.cache_misses += c.cache_misses;
      ts.rows_fetched += c.rows_fetched;
      ts.bytes_h2d += c.bytes_h2d;
      ts.bytes_d2h += c.bytes_d2h;
      if (prefetched) {
        ts.prefetched_rows += std::llround(tr.prefetch_h2d / row);
        ts.prefetch_bytes_h2d += std::llround(tr.prefetch_h2d);
      }
    }
  }
  // lookup_ns: the rank's simulated lookup time shared by each shard's bytes (the cost model's
  // lookup is memory-bound: cost/cost_model.h), so the lookup-time load metric has figures
  double all_bytes = 0;
  for (const auto& [key, b] : lookup_bytes) all_bytes += b;
  for (auto& [key, c] : load)
    if (all_bytes > 0) c.lookup_ns = std::llround(static_cast<double>(lk.ns) * lookup_bytes[key] / all_bytes);
  std::vector<sessions::LoadCounter> counters;
  counters.reserve(load.size() * (lk.fill > 0 ? 2 : 1));
  for (const auto& [key, c] : load) {
    if (lk.own > 0) {
      counters.push_back(c);
    } else {  // nothing looked up: the shard's counter, empty
      sessions::LoadCounter none;
      none.step = c.step;
      none.rank = c.rank;
      none.table = c.table;
      none.shard = c.shard;
      counters.push_back(none);
    }
    if (lk.fill > 0) {
      sessions::LoadCounter f = c;
      f.step = step - 1;
      f.lookup_ns = all_bytes > 0 ? std::llround(static_cast<double>(lk.fill_ns) * lookup_bytes[key] / all_bytes) : 0;
      counters.push_back(f);
    }
  }
  return counters;
}

}  // namespace embedscope::engine::simulated
