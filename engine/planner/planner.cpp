#include "embedscope/engine/sharding/sharding.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/model/host_cache.h"
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"
#include "planner/memory_replay.h"
#include "planner/rank_lines.h"
#include "sharding/layout.h"

namespace embedscope::engine {

std::vector<int64_t> even_split(int64_t n, int parts) {
  if (parts < 1) throw std::invalid_argument("even_split: parts must be >= 1");
  std::vector<int64_t> out(static_cast<size_t>(parts), n / parts);
  for (int64_t i = 0; i < n % parts; ++i) ++out[static_cast<size_t>(i)];
  return out;
}

std::vector<int64_t> row_wise_split(int64_t rows, int parts) {
  if (parts < 1) throw std::invalid_argument("row_wise_split: parts must be >= 1");
  if (rows < 0) throw std::invalid_argument(fmt::format("row_wise_split: {} rows", rows));
  std::vector<int64_t> out(static_cast<size_t>(parts), 0);
  if (rows == 0) return out;
  const int64_t block = rows / parts + (rows % parts != 0 ? 1 : 0);  // ceil(rows / parts)
  const int64_t full = rows / block;                                  // ranks with a whole block
  for (int64_t r = 0; r < parts; ++r)
    out[static_cast<size_t>(r)] = r < full ? block : r == full ? rows - block * full : 0;
  return out;
}

std::vector<int64_t> column_split(int64_t dim, int parts) {
  if (parts < 1 || parts > dim)
    throw std::invalid_argument(fmt::format("column_split: {} shards of {} columns", parts, dim));
  const int64_t blocks = dim / 4;
  if (blocks >= parts) {
    auto out = even_split(blocks, parts);
    for (auto& w : out) w *= 4;
    out.back() += dim % 4;
    return out;
  }
  return even_split(dim, parts);
}

namespace {

// Device bytes of `cols` columns of every row of t as stored (its data_type; quant/row_codec.h).
// A low-rank table: A and B (model/low_rank.h). A table in host memory: its device cache
// (host_cached: ceil(cache_load_factor x rows) fp32 rows in a 512 B-rounded block, cache_device_bytes in
// model/host_cache.h) or nothing (host).
int64_t stored_bytes(const TableSpec& t, int64_t rows, int64_t cols) {
  if (t.placement == TablePlacement::host) return 0;
  if (t.placement == TablePlacement::host_cached) return cache_device_bytes(t.cache_load_factor, rows, cols);
  return shard_weight_bytes(t, rows, cols);
}
int64_t table_bytes(const TableSpec& t) { return stored_bytes(t, t.rows(), t.embedding_dim); }

int argmin_load(const std::vector<int64_t>& load, const std::vector<int>& exclude = {}) {
  int best = -1;
  for (int r = 0; r < static_cast<int>(load.size()); ++r) {
    if (std::find(exclude.begin(), exclude.end(), r) != exclude.end()) continue;
    if (best < 0 || load[static_cast<size_t>(r)] < load[static_cast<size_t>(best)]) best = r;
  }
  return best;
}

}  // namespace

ShardingPlan plan_sharding(const WorkloadSpec& spec) {
  ShardingPlan plan;
  const int world = spec.devices.count;
  plan.world_size = world;
  plan.local_world_size = spec.sharding.local_world_size > 0 ? spec.sharding.local_world_size : world;
  if (world % plan.local_world_size != 0)
    throw SpecError(fmt::format("/sharding/local_world_size: {} does not divide devices.count {}",
                                plan.local_world_size, world));
  const int num_nodes = world / plan.local_world_size;
  plan.tables.resize(spec.tables.size());
  // Each rank's planned device bytes, every shard counted on the rank that holds it: a
  // table_row_wise / grid_shard table's rows split over its node's ranks add to those ranks as
  // soon as its node is known, so the tables placed after it see them (a table_row_wise hot
  // table pinned or placed first used to leave its node's ranks looking empty).
  std::vector<int64_t> load(static_cast<size_t>(world), 0);
  const int lws = plan.local_world_size;
  // t's columns [.., + cols) split by rows over node n's ranks (row_wise_split, as the shards are made below)
  auto add_node_rows = [&](const TableSpec& t, int n, int64_t cols) {
    const auto rows = row_wise_split(t.rows(), lws);
    for (int l = 0; l < lws; ++l)
      load[static_cast<size_t>(n * lws + l)] += stored_bytes(t, rows[static_cast<size_t>(l)], cols);
  };

  // Pass 1: types and everything whose placement is fixed.
  std::vector<size_t> open;  // tables placed greedily in pass 2
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    const TableSpec& t = spec.tables[i];
    TablePlan& tp = plan.tables[i];
    tp.table = static_cast<int>(i);
    TableSharding ts{spec.sharding.default_type, {}, -1};
    if (auto it = spec.sharding.per_table.find(t.name); it != spec.sharding.per_table.end())
      ts = it->second;
    tp.type = ts.type;
    const std::string where = fmt::format("/sharding/tables/{}", t.name);
    for (int r : ts.ranks)
      if (r < 0 || r >= world)
        throw SpecError(fmt::format("{}/ranks: rank {} is outside [0, {})", where, r, world));
    switch (ts.type) {
      case ShardingType::data_parallel:
        for (int r = 0; r < world; ++r) tp.shards.push_back({r, 0, t.rows(), 0, t.embedding_dim});
        for (auto& l : load) l += table_bytes(t);
        break;
      case ShardingType::row_wise: {
        auto rows = row_wise_split(t.rows(), world);
        int64_t off = 0;
        for (int r = 0; r < world; ++r) {
          tp.shards.push_back({r, off, rows[static_cast<size_t>(r)], 0, t.embedding_dim});
          load[static_cast<size_t>(r)] += stored_bytes(t, rows[static_cast<size_t>(r)], t.embedding_dim);
          off += rows[static_cast<size_t>(r)];
        }
        break;
      }
      case ShardingType::table_wise:
        if (ts.ranks.size() > 1)
          throw SpecError(fmt::format("{}/ranks: table_wise takes one rank, got {}", where, ts.ranks.size()));
        if (ts.ranks.size() == 1) {
          tp.shards.push_back({ts.ranks[0], 0, t.rows(), 0, t.embedding_dim});
          load[static_cast<size_t>(ts.ranks[0])] += table_bytes(t);
        } else {
          open.push_back(i);
        }
        break;
      case ShardingType::column_wise:
        if (static_cast<int64_t>(ts.ranks.size()) > t.embedding_dim)
          throw SpecError(fmt::format("{}/ranks: {} column shards but the table has {} columns",
                                      where, ts.ranks.size(), t.embedding_dim));
        if (!ts.ranks.empty()) {
          auto cols = column_split(t.embedding_dim, static_cast<int>(ts.ranks.size()));
          if (t.data_type == TableDataType::int4)
            for (int64_t w : cols)
              if (w % 2 != 0)
                throw SpecError(fmt::format("{}/ranks: {} column shards of table \"{}\" ({} columns, data_type int4) "
                                            "are {} columns wide: an int4 column shard needs an even width (two 4-bit "
                                            "codes a byte); use fewer column shards",
                                            where, cols.size(), t.name, t.embedding_dim, fmt::join(cols, ", ")));
          int64_t off = 0;
          for (size_t s = 0; s < cols.size(); ++s) {
            tp.shards.push_back({ts.ranks[s], 0, t.rows(), off, cols[s]});
            load[static_cast<size_t>(ts.ranks[s])] += stored_bytes(t, t.rows(), cols[s]);
            off += cols[s];
          }
        } else {
          open.push_back(i);
        }
        break;
      case ShardingType::table_row_wise:
        if (ts.node >= num_nodes)
          throw SpecError(fmt::format("{}/node: node {} is outside [0, {})", where, ts.node, num_nodes));
        tp.node = ts.node;
        if (ts.node < 0) {
          open.push_back(i);
        } else {
          add_node_rows(t, ts.node, t.embedding_dim);
        }
        break;
      case ShardingType::table_column_wise:  // the node given or not, its ranks chosen in pass 2
        if (ts.node >= num_nodes)
          throw SpecError(fmt::format("{}/node: node {} is outside [0, {})", where, ts.node, num_nodes));
        tp.node = ts.node;
        open.push_back(i);
        break;
      case ShardingType::grid_shard: open.push_back(i); break;
    }
  }
  // A node's planned bytes: its ranks' shards (table_row_wise and grid_shard rows included).
  auto node_total = [&](int n) {
    int64_t b = 0;
    for (int l = 0; l < lws; ++l) b += load[static_cast<size_t>(n * lws + l)];
    return b;
  };
  auto argmin_node = [&](const std::vector<int>& exclude) {
    int best = -1;
    for (int n = 0; n < num_nodes; ++n) {
      if (std::find(exclude.begin(), exclude.end(), n) != exclude.end()) continue;
      if (best < 0 || node_total(n) < node_total(best)) best = n;
    }
    return best;
  };
  // Pass 2: greedy placement, largest tables first (ties by table order).
  std::stable_sort(open.begin(), open.end(), [&](size_t a, size_t b) {
    return table_bytes(spec.tables[a]) > table_bytes(spec.tables[b]);
  });
  for (size_t i : open) {
    const TableSpec& t = spec.tables[i];
    TablePlan& tp = plan.tables[i];
    if (tp.type == ShardingType::table_wise) {
      int r = argmin_load(load);
      tp.shards.push_back({r, 0, t.rows(), 0, t.embedding_dim});
      load[static_cast<size_t>(r)] += table_bytes(t);
    } else if (tp.type == ShardingType::column_wise) {
      int parts = static_cast<int>(std::min<int64_t>(world, std::max<int64_t>(1, t.embedding_dim / 4)));
      auto cols = column_split(t.embedding_dim, parts);
      std::vector<int> used;
      int64_t off = 0;
      for (int64_t w : cols) {
        int r = argmin_load(load, used);
        used.push_back(r);
        tp.shards.push_back({r, 0, t.rows(), off, w});
        load[static_cast<size_t>(r)] += stored_bytes(t, t.rows(), w);
        off += w;
      }
    } else if (tp.type == ShardingType::table_column_wise) {
      // TorchRec's TWCW: column shards (as column_wise counts them, at most one per rank of the
      // node) on the least-loaded ranks of one node, the least-loaded node unless given
      if (tp.node < 0) tp.node = argmin_node({});
      const int parts = static_cast<int>(std::min<int64_t>(lws, std::max<int64_t>(1, t.embedding_dim / 4)));
      std::vector<bool> taken(static_cast<size_t>(lws), false);  // O(ranks per node) a shard
      int64_t off = 0;
      for (int64_t w : column_split(t.embedding_dim, parts)) {
        int r = -1;
        for (int l = 0; l < lws; ++l) {
          const int c = tp.node * lws + l;
          if (!taken[static_cast<size_t>(l)] && (r < 0 || load[static_cast<size_t>(c)] < load[static_cast<size_t>(r)])) r = c;
        }
        taken[static_cast<size_t>(r - tp.node * lws)] = true;
        tp.shards.push_back({r, 0, t.rows(), off, w});
        load[static_cast<size_t>(r)] += stored_bytes(t, t.rows(), w);
        off += w;
      }
    } else if (tp.type == ShardingType::grid_shard) {
      // TorchRec's grid: column blocks (as column_wise counts them, at most one per node), each
      // on the least-loaded node still free and split by rows over its ranks (table_row_wise)
      const int parts = static_cast<int>(std::min<int64_t>(num_nodes, std::max<int64_t>(1, t.embedding_dim / 4)));
      std::vector<int> used;
      int64_t off = 0;
      for (int64_t w : column_split(t.embedding_dim, parts)) {
        const int n = argmin_node(used);
        used.push_back(n);
        const auto rows = row_wise_split(t.rows(), lws);
        int64_t row_off = 0;
        for (int l = 0; l < lws; ++l) {
          tp.shards.push_back({n * lws + l, row_off, rows[static_cast<size_t>(l)], off, w});
          row_off += rows[static_cast<size_t>(l)];
        }
        add_node_rows(t, n, w);
        off += w;
      }
    } else {  // table_row_wise without a node
      const int n = argmin_node({});
      tp.node = n;
      add_node_rows(t, n, t.embedding_dim);
    }
  }
  // table_row_wise shards: rows split over the ranks of the table's node.
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    TablePlan& tp = plan.tables[i];
    if (tp.type != ShardingType::table_row_wise) continue;
    const TableSpec& t = spec.tables[i];
    auto rows = row_wise_split(t.rows(), plan.local_world_size);
    int64_t off = 0;
    for (int l = 0; l < plan.local_world_size; ++l) {
      tp.shards.push_back({tp.node * plan.local_world_size + l, off, rows[static_cast<size_t>(l)], 0,
                           t.embedding_dim});
      off += rows[static_cast<size_t>(l)];
    }
  }
  return plan;
}

std::map<std::string, TableSharding> plan_overrides(const WorkloadSpec& spec, const ShardingPlan& plan) {
  if (plan.tables.size() != spec.tables.size())
    throw std::invalid_argument(fmt::format("plan_overrides: a plan of {} tables for a workload of {}",
                                            plan.tables.size(), spec.tables.size()));
  std::map<std::string, TableSharding> out;
  for (const TablePlan& tp : plan.tables) {
    TableSharding ts{tp.type, {}, -1};
    if (tp.type == ShardingType::table_wise && !tp.shards.empty()) {
      ts.ranks = {tp.shards.front().rank};
    } else if (tp.type == ShardingType::column_wise) {
      std::vector<Shard> by_col = tp.shards;
      std::sort(by_col.begin(), by_col.end(), [](const Shard& a, const Shard& b) { return a.col_offset < b.col_offset; });
      for (const Shard& s : by_col) ts.ranks.push_back(s.rank);
    } else if (tp.type == ShardingType::table_row_wise || tp.type == ShardingType::table_column_wise) {
      ts.node = tp.node;
    }
    out[spec.tables[static_cast<size_t>(tp.table)].name] = std::move(ts);
  }
  return out;
}

int64_t min_reservation(AllocatorKind kind, const DeviceMemoryEstimate& e) {
  return kind == AllocatorKind::caching      ? e.min_reserved_caching
         : kind == AllocatorKind::expandable ? e.min_reserved_expandable
                                             : 0;
}

namespace detail {
void check_plan_independent_memory(const WorkloadSpec& spec) {
  const PlanIndependentMemory m = plan_independent_memory(spec);
  const int64_t cap = spec.devices.memory_bytes;
  if (m.total() <= cap) return;
  // the most samples a rank for which this part fits (it grows with the batch): none when the
  // parameters and gradients alone fill the device, or when one sample's blocks do not fit
  const auto fits = [&](int64_t b) { return plan_independent_memory(spec, b).total() <= cap; };
  int64_t lo = 0, hi = spec.batch_size;  // fits(lo) or lo == 0; !fits(hi)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  const std::string lower =
      m.dense_params > cap
          ? fmt::format("the dense parameters and their gradients alone need {}: a smaller dense part (dense.bottom_mlp, "
                        "dense.top_mlp) or devices with more memory",
                        format_bytes(m.dense_params))
      : lo == 0 ? fmt::format("not one sample a rank fits ({} for one): give the devices more memory",
                              format_bytes(plan_independent_memory(spec, 1).total()))
                : fmt::format("lower the batch size (--batch-size, /batch_size; now {} samples a rank): this part allows "
                              "at most {} samples a rank, and the shards and their buffers need more",
                              spec.batch_size, lo);
  throw SpecError(fmt::format("/devices/memory_bytes: what every rank holds under any sharding plan or storage option "
                              "does not fit a device: the dense part {} (parameters and gradients {}, activations {}) and "
                              "the pooled embeddings with their gradients {} need {} > {}; no sharding type or storage "
                              "option can fit it: {}",
                              format_bytes(m.dense_params + m.activations), format_bytes(m.dense_params),
                              format_bytes(m.activations), format_bytes(m.pooled), format_bytes(m.total()),
                              format_bytes(cap), lower));
}
}  // namespace detail

bool allocator_runs_out(const WorkloadSpec& spec, const DeviceMemoryEstimate& e, ShortfallScope scope) {
  if (e.shortfall_request <= 0 || spec.memory.allocator == AllocatorKind::cuda_async) return false;
  if (e.shortfall_iteration < 0) return true;  // setup: the shards and the dense part
  return scope == ShortfallScope::plan && spec.memory.compaction == 0;
}

namespace {
// The refusal's line of a rank whose bytes fit but whose allocator replay runs out (tester48 F9).
std::string shortfall_line(const WorkloadSpec& spec, const DeviceMemoryEstimate& e) {
  const int64_t cap = spec.devices.memory_bytes;
  const std::string where =
      e.shortfall_iteration < 0
          ? fmt::format("allocating {} for the {} before the first step", format_bytes(e.shortfall_request),
                        e.shortfall_what)
          : fmt::format("allocating {} for a step's {} in step {}{}", format_bytes(e.shortfall_request), e.shortfall_what,
                        e.shortfall_iteration - spec.warmup_steps,
                        e.shortfall_iteration < spec.warmup_steps ? " (warm-up)" : "");
  const std::string rules =
      spec.memory.allocator == AllocatorKind::caching
          ? "PyTorch's segments: requests of 1-10 MiB share 20 MiB segments, larger ones get their own, rounded up to "
            "2 MiB; "
      : spec.memory.allocator == AllocatorKind::expandable
          ? "expandable segments: pages of 20 MiB for requests above 1 MiB, of 2 MiB for smaller ones, a pool each; "
                                                           : "";
  std::vector<std::string> use;
  if (e.expandable_serves) use.emplace_back("the expandable allocator");
  if (e.direct_serves) use.emplace_back("the direct allocator");
  const std::string alternatives = use.empty() ? std::string()
                                   : use.size() == 1 ? use[0] + " or "
                                                     : use[0] + ", " + use[1] + " or ";
  return fmt::format("fits in bytes ({} of {}: weights {}, optimizer state {}, {}dense {}, buffers {}), but the {} "
                     "allocator reserves {} for its buffers in the run's order "
                     "({}the replay of planner/memory_replay.h): at {} it runs out {}{}; use {}devices "
                     "of at least {}",
                     format_bytes(e.total()), format_bytes(cap), format_bytes(e.weights),
                     format_bytes(e.optimizer_state),
                     e.cache > 0 ? fmt::format("device cache {}, ", format_bytes(e.cache)) : std::string(),
                     format_bytes(e.dense), format_bytes(e.buffers), to_string(spec.memory.allocator),
                     format_bytes(e.peak_reserved), rules, format_bytes(cap), where,
                     e.shortfall_fragmentation ? " (fragmentation: free bytes, but not where a segment can be made)"
                                               : "",
                     alternatives, format_bytes(e.peak_reserved));
}
}  // namespace

std::string segment_shortfall(const WorkloadSpec& spec) {
  if (spec.memory.allocator == AllocatorKind::direct || spec.memory.allocator == AllocatorKind::cuda_async ||
      spec.devices.memory_bytes >= kSmallBuffer)
    return "";
  return fmt::format("{} is smaller than one {} segment of the {} allocator", format_bytes(spec.devices.memory_bytes),
                     format_bytes(kSmallBuffer), to_string(spec.memory.allocator));
}

void check_memory_fits(const WorkloadSpec& spec, const std::vector<DeviceMemoryEstimate>& est, ShortfallScope scope) {
  if (const std::string shortfall = segment_shortfall(spec); !shortfall.empty())
    throw SpecError(fmt::format("/devices/memory_bytes: {}; give the devices more memory or use \"memory\": "
                                "{{\"allocator\": \"direct\"}}",
                                shortfall));
  detail::check_plan_independent_memory(spec);  // what no plan changes: one line, not one a rank
  detail::RankLines host_lines;  // tables in host memory: each rank's host side first
  for (const auto& e : est)
    if (e.host > spec.devices.host_memory_bytes)
      host_lines.add(e.rank,
                     fmt::format("its tables in host memory (placement host / host_cached) need {} > {}",
                                 format_bytes(e.host), format_bytes(spec.devices.host_memory_bytes)),
                     e.host);
  if (!host_lines.empty())
    throw SpecError("/devices/host_memory_bytes: the tables placed in host memory do not fit under this sharding plan:" +
                    host_lines.str());
  // one line per run of consecutive ranks that need the same (tester46 F10: 1,024 identical lines
  // on a large cluster): "ranks 0-1023: needs ... > ... each", at most a few lines (RankLines)
  detail::RankLines lines;
  for (const auto& e : est) {
    if (e.total() <= spec.devices.memory_bytes) continue;
    // both sides the same when rounded ("needs 30.4 MiB > 30.4 MiB"): the bytes, and how many short
    const int64_t have = spec.devices.memory_bytes;
    const bool same = format_bytes(e.total()) == format_bytes(have);
    const std::string need_text = same ? fmt::format("{} ({} bytes)", format_bytes(e.total()), e.total())
                                       : format_bytes(e.total());
    const std::string have_text = same ? fmt::format("{} ({} bytes: {} bytes short)", format_bytes(have), have,
                                                     e.total() - have)
                                       : format_bytes(have);
    lines.add(e.rank,
              fmt::format("needs {} (weights {}, optimizer state {}, {}dense {}, buffers {}{}) > {}",
                          need_text, format_bytes(e.weights), format_bytes(e.optimizer_state),
                          e.cache > 0 ? fmt::format("device cache {}, ", format_bytes(e.cache)) : std::string(),
                          format_bytes(e.dense), format_bytes(e.buffers),
                          e.pipeline_buffers > 0
                              ? fmt::format(", of which {} for the batch the {} pipeline keeps ahead",
                                            format_bytes(e.pipeline_buffers), to_string(spec.pipeline))
                              : std::string(),
                          have_text),
              e.total());
  }
  // The bytes fit, but no layout of the allocator's segments can hold the step: PyTorch's rules
  // reserve a 20 MiB segment for a request of 1-10 MiB (caching; larger ones round up to 2 MiB;
  // expandable segments map 20 MiB pages for them) and 2 MiB for the small pool, so on such a device every run
  // fails at the same allocation. Fragmentation - free bytes in the wrong places, which depends
  // on the order of the step's buffers - is left to the run, which shows it (its snapshot).
  detail::RankLines segments;  // the least the allocator must reserve, a rank
  if (spec.memory.allocator == AllocatorKind::caching || spec.memory.allocator == AllocatorKind::expandable)
    for (const auto& e : est) {
      const int64_t need = min_reservation(spec.memory.allocator, e);
      if (e.total() > spec.devices.memory_bytes || need <= spec.devices.memory_bytes) continue;
      const AllocatorKind other =
          spec.memory.allocator == AllocatorKind::caching ? AllocatorKind::expandable : AllocatorKind::caching;
      const bool other_fits = min_reservation(other, e) <= spec.devices.memory_bytes;
      // exact bytes where the rounded figures read the same (never "20.0 MiB > 20.0 MiB")
      const bool same = format_bytes(need) == format_bytes(spec.devices.memory_bytes);
      const auto shown = [&](int64_t b) { return same ? fmt::format("{} B", b) : format_bytes(b); };
      const char* rules = spec.memory.allocator == AllocatorKind::caching
                              ? "PyTorch's segments: requests of 1-10 MiB are served from 20 MiB segments, larger ones "
                                "round up to 2 MiB, requests of 1 MiB or less from 2 MiB segments"
                              : "PyTorch's expandable segments: requests above 1 MiB are served from pages of 20 MiB, "
                                "requests of 1 MiB or less from pages of 2 MiB";
      segments.add(e.rank, fmt::format("the {} allocator must reserve at least {} at once for the step's buffers "
                         "({}; largest buffer {}) > {}; "
                         "give the devices at least {}, or use the {}direct allocator (it reserves only what is asked for)",
                         to_string(spec.memory.allocator), shown(need), rules, format_bytes(e.largest_block),
                         shown(spec.devices.memory_bytes), format_bytes(need),
                         other_fits ? fmt::format("{} allocator or the ", to_string(other)) : std::string()),
                need);
    }
  // The bytes fit and some layout of segments could hold the step, but the allocator, serving
  // the buffers in the run's order, runs out (tester48 F9): the replay at the device's capacity
  // says where, as the run would.
  detail::RankLines replayed;
  for (const auto& e : est) {
    if (e.total() > spec.devices.memory_bytes || !allocator_runs_out(spec, e, scope)) continue;
    if ((spec.memory.allocator == AllocatorKind::caching || spec.memory.allocator == AllocatorKind::expandable) &&
        min_reservation(spec.memory.allocator, e) > spec.devices.memory_bytes)
      continue;  // said above
    replayed.add(e.rank, shortfall_line(spec, e), e.peak_reserved);
  }
  // what to try when the bytes do not fit (tester58 F5), one line after the ranks'
  std::string remedy;
  if (!lines.empty()) {
    size_t largest = 0;
    for (size_t i = 1; i < spec.tables.size(); ++i)
      if (table_bytes(spec.tables[i]) > table_bytes(spec.tables[largest])) largest = i;
    remedy = fmt::format(
        "\n  to try: `plan --auto` (a plan that fits, if one does; with --allow-storage fp16,bf16_state,int8,host_cached "
        "it may also store the largest tables or their optimizer state smaller, or the tables in host memory), row_wise or column_wise for the largest table{}, more "
        "devices (--devices), or a larger devices.memory_bytes",
        spec.tables.empty() ? std::string()
                            : fmt::format(" (\"{}\", {})", spec.tables[largest].name,
                                          format_bytes(table_bytes(spec.tables[largest]))));
  }
  if (!lines.empty() || !segments.empty() || !replayed.empty())
    throw SpecError("/devices/memory_bytes: the workload does not fit on the devices under this "
                    "sharding plan:" + lines.str() + remedy + segments.str() + replayed.str());
}

nlohmann::json to_json(const WorkloadSpec& spec, const ShardingPlan& plan) {
  nlohmann::json j;
  j["world_size"] = plan.world_size;
  j["local_world_size"] = plan.local_world_size;
  auto& tables = j["tables"] = nlohmann::json::array();
  for (const TablePlan& tp : plan.tables) {
    nlohmann::json t;
    t["name"] = spec.tables[static_cast<size_t>(tp.table)].name;
    t["sharding_type"] = to_string(tp.type);
    if (tp.node >= 0) t["node"] = tp.node;
    auto& shards = t["shards"] = nlohmann::json::array();
    for (const Shard& s : tp.shards)
      shards.push_back({{"rank", s.rank}, {"row_offset", s.row_offset}, {"num_rows", s.num_rows},
                        {"col_offset", s.col_offset}, {"num_cols", s.num_cols}});
    tables.push_back(std::move(t));
  }
  return j;
}

}  // namespace embedscope::engine
