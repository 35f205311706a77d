// WorkloadSpec validation: every range and cross reference, on the typed spec
// (docs/configuration.md lists each rule). parse_workload runs it after reading; validate()
// runs it again after command-line overrides.

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checker.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {
namespace workload_detail {

// A table placed in host memory (TableSpec::placement host / host_cached): what model/host_cache.h
// runs (fp32 rows and state, a full table, the cpu and cuda backends - or the simulated one, which
// times its host-link copies (program/step_program.h) - table_wise / row_wise / column_wise,
// no live rebalancing), a cache load factor in (0, 1], and rows that fit the host memory of the
// ranks at all (check_memory_fits checks each rank's share under the plan).
void validate_host_placement(const WorkloadSpec& s, const Checker& c, size_t t) {
  const TableSpec& tb = s.tables[t];
  const std::string p = ptr_idx("/tables", t);
  const char* where = enum_name(tb.placement);
  if (tb.placement == TablePlacement::host_cached && !(tb.cache_load_factor > 0.0 && tb.cache_load_factor <= 1.0))
    c.fail(p + "/cache_load_factor", fmt::format("must be in (0, 1] (the share of the rows the device cache holds), got {}",
                                                 tb.cache_load_factor));
  if (tb.prefetch_pipeline && tb.placement != TablePlacement::host_cached)
    c.fail(p + "/prefetch_pipeline", fmt::format("only allowed with placement \"host_cached\", not \"{}\" (table \"{}\"): "
                                                 "the prefetch fills the device cache", where, tb.name));
  if (tb.prefetch_pipeline && s.pipeline == PipelineKind::base)
    c.fail(p + "/prefetch_pipeline",
           fmt::format("needs pipeline sparse_dist or semi_sync (table \"{}\"; /pipeline is base): only they receive a "
                       "batch's ids a step before its lookup", tb.name));
  if (tb.data_type != TableDataType::fp32)
    c.fail(p + "/placement", fmt::format("{} with data_type {} (table \"{}\"): rows in host memory are fp32 only; "
                                         "leave data_type out or use placement device",
                                         where, enum_name(tb.data_type), tb.name));
  if (tb.optimizer_state_type != OptimizerStateType::fp32)
    c.fail(p + "/placement", fmt::format("{} with optimizer_state_type {} (table \"{}\"): the state in host memory "
                                         "is fp32 only", where, enum_name(tb.optimizer_state_type), tb.name));
  if (tb.low_rank_dim != 0)
    c.fail(p + "/placement", fmt::format("{} with low_rank_dim (table \"{}\"): a factorized table stays on the device",
                                         where, tb.name));
  // every backend: on cuda the rows stay in host memory, the cache in the GPU's arena, the rows
  // moved by its copies (model/host_cache.h HostCacheDevice; tested on the emulated device, not
  // yet run on a GPU); the simulated backend times it
  if (s.rebalance.enabled())
    c.fail(p + "/placement", fmt::format("{} (table \"{}\") with live rebalancing: moving rows in host memory is not "
                                         "supported; use placement device or leave rebalance out", where, tb.name));
  const auto it = s.sharding.per_table.find(tb.name);
  const ShardingType type = it != s.sharding.per_table.end() ? it->second.type : s.sharding.default_type;
  if (type != ShardingType::table_wise && type != ShardingType::row_wise && type != ShardingType::column_wise)
    c.fail(it != s.sharding.per_table.end() ? ptr_key("/sharding/tables", tb.name) + "/type" : std::string("/sharding/default"),
           fmt::format("{} for table \"{}\" with placement {} (/tables/{}/placement): a table in host memory is "
                       "sharded table_wise, row_wise or column_wise",
                       enum_name(type), tb.name, where, t));
  // fp32 rows and state (sgd none, rowwise_adagrad 1 a row, adam 2 dim a row), host_cached's
  // row -> slot index and lfu's count (8 bytes a row each), spread over every rank at best
  const double per_row = 4.0 * static_cast<double>(tb.embedding_dim) +
                         (s.optimizer.type == OptimizerType::rowwise_adagrad ? 4.0
                          : s.optimizer.type == OptimizerType::adam         ? 8.0 * static_cast<double>(tb.embedding_dim)
                                                                            : 0.0) +
                         (tb.placement == TablePlacement::host_cached ? (tb.cache_policy == CachePolicy::lfu ? 16.0 : 8.0) : 0.0);
  const double least = per_row * static_cast<double>(tb.rows()) / std::max(1, s.devices.count);
  if (s.devices.host_memory_bytes > 0 && least > static_cast<double>(s.devices.host_memory_bytes))
    c.fail(p + "/placement",
           fmt::format("{} (table \"{}\"): its rows and optimizer state need {:.0f} bytes of host memory a rank even "
                       "spread over all {} ranks, more than /devices/host_memory_bytes = {}",
                       where, tb.name, least, s.devices.count, s.devices.host_memory_bytes));
}

void validate_spec(const WorkloadSpec& s, const Checker& c) {
  if (s.name.empty()) c.fail("/name", "must not be empty");

  // Tables.
  if (s.tables.empty()) c.fail("/tables", "must not be empty");
  std::map<std::string, size_t> table_index;
  for (size_t t = 0; t < s.tables.size(); ++t) {
    const TableSpec& tb = s.tables[t];
    const std::string p = ptr_idx("/tables", t);
    if (tb.name.empty()) c.fail(p + "/name", "must not be empty");
    if (!table_index.emplace(tb.name, t).second) {
      c.fail(p + "/name", fmt::format("duplicate table name \"{}\"", tb.name));
    }
    c.gt0_max(p + "/num_embeddings", tb.num_embeddings, kMaxNumEmbeddings);
    c.gt0_max(p + "/embedding_dim", tb.embedding_dim, kMaxEmbeddingDim);
    if (tb.hash_size != 0 && (tb.hash_size < 1 || tb.hash_size > tb.num_embeddings))
      c.fail(p + "/hash_size",
             fmt::format("must be in [1, num_embeddings = {}], got {}", tb.num_embeddings, tb.hash_size));
    if (tb.data_type == TableDataType::int4 && tb.embedding_dim % 2 != 0)
      c.fail(p + "/embedding_dim", fmt::format("{} is odd with data_type int4 (table \"{}\"): int4 rows pack two 4-bit "
                                               "codes a byte (FBGEMM's fused 4-bit rows); use an even embedding_dim or "
                                               "another data_type",
                                               tb.embedding_dim, tb.name));
    if (tb.stochastic_rounding.value_or(false) && tb.data_type == TableDataType::fp32)
      c.fail(p + "/stochastic_rounding", fmt::format("true with data_type fp32 (table \"{}\"): fp32 rows are stored "
                                                     "unrounded; stochastic rounding needs fp16, bf16, int8 or int4",
                                                     tb.name));
    if (tb.optimizer_state_type != OptimizerStateType::fp32 && s.optimizer.type == OptimizerType::sgd)
      c.fail(p + "/optimizer_state_type",
             fmt::format("{} (table \"{}\") with /optimizer/type sgd, which keeps no state: leave it out (fp32) or "
                         "use rowwise_adagrad or adam",
                         enum_name(tb.optimizer_state_type), tb.name));
    if (tb.low_rank_dim != 0) {
      if (tb.low_rank_dim < 1 || tb.low_rank_dim >= tb.embedding_dim)
        c.fail(p + "/low_rank_dim", fmt::format("must be in [1, embedding_dim = {}), got {}", tb.embedding_dim,
                                                tb.low_rank_dim));
      if (tb.data_type != TableDataType::fp32)
        c.fail(p + "/data_type", fmt::format("{} with low_rank_dim (table \"{}\"): the factors A and B are stored "
                                             "in fp32; leave data_type out or drop low_rank_dim",
                                             enum_name(tb.data_type), tb.name));
      // cuda: A and B in the GPU's arena, looked up and trained by its kernels
      // (kernels/cuda_low_rank.h; tested on the emulated device, not yet run on a GPU)
      const auto it = s.sharding.per_table.find(tb.name);
      const ShardingType type = it != s.sharding.per_table.end() ? it->second.type : s.sharding.default_type;
      if (type != ShardingType::table_wise && type != ShardingType::data_parallel && type != ShardingType::row_wise)
        c.fail(it != s.sharding.per_table.end() ? ptr_key("/sharding/tables", tb.name) + "/type" : std::string("/sharding/default"),
               fmt::format("{} for table \"{}\" with low_rank_dim (/tables/{}/low_rank_dim): a factorized table is "
                           "sharded table_wise, row_wise (A's rows split, B copied to every rank) or data_parallel; {}",
                           enum_name(type), tb.name, t,
                           type == ShardingType::table_row_wise
                               ? "table_row_wise (rows split within a node, partial sums reduced there and sent "
                                 "across nodes) is not implemented for factorized tables: use row_wise"
                               : "split by columns, every block would need all of A (rows x r, the large factor), "
                                 "so column-wise sharding would save none of it"));
    }
    if (tb.placement != TablePlacement::device) validate_host_placement(s, c, t);
    else if (tb.prefetch_pipeline)
      c.fail(ptr_idx("/tables", t) + "/prefetch_pipeline",
             fmt::format("only allowed with placement \"host_cached\", not \"device\" (table \"{}\"): the prefetch "
                         "fills the device cache", tb.name));
    if (tb.feature_names.empty()) c.fail(p + "/feature_names", "must not be empty");
    for (size_t k = 0; k < tb.feature_names.size(); ++k) {
      if (tb.feature_names[k].empty()) c.fail(ptr_idx(p + "/feature_names", k), "must not be empty");
    }
  }

  // Features.
  std::map<std::string, size_t> feature_idx;
  for (size_t f = 0; f < s.features.size(); ++f) {
    const FeatureSpec& fs = s.features[f];
    const std::string p = ptr_idx("/features", f);
    if (fs.name.empty()) c.fail(p + "/name", "must not be empty");
    if (!feature_idx.emplace(fs.name, f).second) {
      c.fail(p + "/name", fmt::format("duplicate feature name \"{}\"", fs.name));
    }
    const PoolingFactor& pf = fs.pooling_factor;
    const std::string pp = p + "/pooling_factor";
    if (pf.fixed) {
      c.ge0_max(pp, pf.mean, static_cast<double>(kMaxPoolingFactor));
      if (pf.mean != std::floor(pf.mean)) {
        c.fail(pp, fmt::format("fixed pooling factor must be an integer, got {}", pf.mean));
      }
      if (static_cast<double>(pf.max) != pf.mean) {
        c.fail(pp, fmt::format("fixed pooling factor needs max == mean, got mean {} and max {}",
                               pf.mean, pf.max));
      }
    } else {
      c.ge0(pp + "/mean", pf.mean);
      c.ge0_max(pp + "/max", pf.max, kMaxPoolingFactor);
      if (pf.mean > static_cast<double>(pf.max)) {
        c.fail(pp + "/mean", fmt::format("must be <= max ({}), got {}", pf.max, pf.mean));
      }
    }
    c.gt0_max(p + "/ids/alpha", fs.ids.alpha, 100.0);
  }

  // Every table feature names a feature; every feature is used by exactly one table.
  // user[f]: the table and pointer of feature f's first use (-1: none); both uses are named,
  // since either may be the one the user added.
  std::vector<std::pair<int, std::string>> user(s.features.size(), {-1, ""});
  for (size_t t = 0; t < s.tables.size(); ++t) {
    const TableSpec& tb = s.tables[t];
    for (size_t k = 0; k < tb.feature_names.size(); ++k) {
      const std::string p = ptr_idx(ptr_idx("/tables", t) + "/feature_names", k);
      auto it = feature_idx.find(tb.feature_names[k]);
      if (it == feature_idx.end()) {
        c.fail(p, fmt::format("no feature named \"{}\"", tb.feature_names[k]));
      }
      auto& [first_table, first_ptr] = user[it->second];
      if (first_table >= 0) {
        c.fail(p, fmt::format("feature \"{}\" is already used by table \"{}\" ({}); a feature feeds one table",
                              tb.feature_names[k], s.tables[static_cast<size_t>(first_table)].name, first_ptr));
      }
      first_table = static_cast<int>(t);
      first_ptr = p;
    }
  }
  for (size_t f = 0; f < s.features.size(); ++f) {
    if (user[f].first < 0) {
      c.fail(ptr_idx("/features", f),
             fmt::format("feature \"{}\" is not used by any table", s.features[f].name));
    }
  }

  c.gt0_max("/batch_size", s.batch_size, kMaxBatchSize);
  c.gt0_max("/steps", s.steps, kMaxSteps);
  c.ge0_max("/warmup_steps", s.warmup_steps, kMaxSteps);

  const bool simulated = s.devices.backend == Backend::simulated;
  c.closed("/devices/count", s.devices.count, 1, simulated ? kMaxSimulatedDevices : kMaxDevices);
  if (simulated && s.devices.hardware.empty())
    c.fail("/devices/hardware", "backend simulated needs a hardware profile (a built-in name such as h100_sxm, or a "
                                "profile JSON file); embedscope run --simulate PROFILE sets it");
  if (simulated && s.network.limited())
    c.fail("/network", "a simulated cluster's links are its hardware profile's (devices.hardware); network emulation is "
                       "for the cpu backend");
  if (!simulated && !s.devices.hardware.empty())
    c.fail("/devices/hardware", fmt::format("a hardware profile is used by backend simulated only, got backend {}",
                                            enum_name(s.devices.backend)));
  c.gt0_max("/devices/memory_bytes", s.devices.memory_bytes, kMaxMemoryBytes);
  c.gt0_max("/devices/host_memory_bytes", s.devices.host_memory_bytes, kMaxMemoryBytes);
  if (s.devices.ranks_per_gpu != 0) {
    c.closed("/devices/ranks_per_gpu", s.devices.ranks_per_gpu, 0, s.devices.count);
    if (s.devices.backend == Backend::cpu || simulated)
      c.fail("/devices/ranks_per_gpu", fmt::format("ranks share a GPU on the cuda backend (or auto) only, got backend {}",
                                                   enum_name(s.devices.backend)));
  }

  const OptimizerSpec& o = s.optimizer;
  c.gt0_max("/optimizer/learning_rate", o.learning_rate, 1e30);
  c.gt0_max("/optimizer/eps", o.eps, 1e30);
  c.half_open("/optimizer/beta1", o.beta1, 0.0, 1.0);
  c.half_open("/optimizer/beta2", o.beta2, 0.0, 1.0);
  if (o.dense_learning_rate != -1.0) c.gt0_max("/optimizer/dense_learning_rate", o.dense_learning_rate, 1e30);

  if (s.dense) {
    const DenseSpec& d = *s.dense;
    c.gt0("/dense/num_dense_features", d.num_dense_features);
    if (d.bottom_mlp.empty()) c.fail("/dense/bottom_mlp", "must not be empty");
    for (size_t k = 0; k < d.bottom_mlp.size(); ++k) {
      c.gt0(ptr_idx("/dense/bottom_mlp", k), d.bottom_mlp[k]);
    }
    if (d.top_mlp.empty()) c.fail("/dense/top_mlp", "must not be empty");
    for (size_t k = 0; k < d.top_mlp.size(); ++k) {
      c.gt0(ptr_idx("/dense/top_mlp", k), d.top_mlp[k]);
    }
    if (d.top_mlp.back() != 1) {
      c.fail(ptr_idx("/dense/top_mlp", d.top_mlp.size() - 1),
             fmt::format("the last layer must have width 1 (one logit), got {}", d.top_mlp.back()));
    }
    if (d.interaction == Interaction::dcn) {
      c.ge("/dense/dcn/num_layers", d.dcn_num_layers, 1);
      c.ge("/dense/dcn/low_rank_dim", d.dcn_low_rank_dim, 1);
    }
    if (d.interaction == Interaction::dot) {
      // DLRM's pairwise dot products need the bottom MLP output and every pooled embedding
      // to have the same width.
      const int64_t want = d.bottom_mlp.back();
      for (const TableSpec& tb : s.tables) {
        if (tb.embedding_dim != want) {
          c.fail("/dense/interaction",
                 fmt::format("dot needs every table's embedding_dim to equal the last bottom_mlp "
                             "width ({}); table \"{}\" has embedding_dim {}",
                             want, tb.name, tb.embedding_dim));
        }
      }
    }
  }

  // Sharding.
  const ShardingSpec& sh = s.sharding;
  const int count = s.devices.count;
  c.ge0("/sharding/local_world_size", sh.local_world_size);
  if (sh.local_world_size > 0 && count % sh.local_world_size != 0) {
    c.fail("/sharding/local_world_size",
           fmt::format("must divide devices.count ({}), got {}", count, sh.local_world_size));
  }
  const int lws = sh.local_world_size == 0 ? count : sh.local_world_size;
  const int nodes = count / lws;
  for (const auto& [tname, ts] : sh.per_table) {
    const std::string p = ptr_key("/sharding/tables", tname);
    auto it = table_index.find(tname);
    if (it == table_index.end()) c.fail(p, fmt::format("no table named \"{}\"", tname));
    const TableSpec& tb = s.tables[it->second];
    const char* type = enum_name(ts.type);
    const size_t n = ts.ranks.size();
    switch (ts.type) {
      case ShardingType::table_wise:
        if (n > 1) {
          c.fail(p + "/ranks", fmt::format("table_wise takes exactly 1 rank, got {}", n));
        }
        break;
      case ShardingType::column_wise:
        if (static_cast<int64_t>(n) > tb.embedding_dim) {
          c.fail(p + "/ranks",
                 fmt::format("column_wise takes 1 to {} ranks (the table's embedding_dim), got {}",
                             tb.embedding_dim, n));
        }
        break;
      default:
        if (n > 0) c.fail(p + "/ranks", fmt::format("not allowed for {}", type));
        break;
    }
    const std::string note = fmt::format(" (devices.count is {})", count);
    for (size_t k = 0; k < n; ++k) c.half_open(ptr_idx(p + "/ranks", k), ts.ranks[k], 0, count, note);
    if (ts.node != -1) {
      if (ts.type != ShardingType::table_row_wise && ts.type != ShardingType::table_column_wise) {
        c.fail(p + "/node", fmt::format("only allowed for table_row_wise and table_column_wise, not {}", type));
      }
      c.half_open(p + "/node", ts.node, 0, nodes,
                  fmt::format(" ({} node(s) of local_world_size {})", nodes, lws));
    }
    if (ts.has_hot_rows()) {  // hot-row replication (TableSharding::hot_rows)
      const std::string hp = p + "/hot_rows";
      if (ts.hot_rows_sample_steps != 0) {
        if (!ts.hot_rows.empty())
          c.fail(hp, "either a list of rows or {\"auto\": true, \"sample_steps\": N}, not both");
        if (ts.hot_rows_sample_steps < 1 || ts.hot_rows_sample_steps > s.warmup_steps + s.steps)
          c.fail(hp + "/sample_steps", fmt::format("must be in [1, {}] (warmup_steps + steps: the run's iterations), got {}",
                                                   s.warmup_steps + s.steps, ts.hot_rows_sample_steps));
      }
      if (ts.type != ShardingType::row_wise && ts.type != ShardingType::table_row_wise &&
          ts.type != ShardingType::grid_shard)
        c.fail(hp, fmt::format("only allowed with {}/type row_wise, table_row_wise or grid_shard, not {} (hot-row "
                               "replication of tables not split by rows is not implemented)", p, type));
      if (tb.data_type != TableDataType::fp32)
        c.fail(hp, fmt::format("needs data_type fp32 (table \"{}\" has {} at /tables/{}/data_type)", tname,
                               enum_name(tb.data_type), it->second));
      if (tb.optimizer_state_type != OptimizerStateType::fp32)
        c.fail(hp, fmt::format("needs optimizer_state_type fp32 (table \"{}\" has {} at /tables/{}/optimizer_state_type)",
                               tname, enum_name(tb.optimizer_state_type), it->second));
      if (tb.low_rank_dim != 0)
        c.fail(hp, fmt::format("not allowed with low_rank_dim (table \"{}\" has {} at /tables/{}/low_rank_dim): the "
                               "replicas hold full rows", tname, tb.low_rank_dim, it->second));
      if (tb.placement != TablePlacement::device)
        c.fail(hp, fmt::format("needs placement device (table \"{}\" has {} at /tables/{}/placement): the replicas "
                               "live in device memory", tname, enum_name(tb.placement), it->second));
      if (s.devices.backend == Backend::cuda)
        c.fail(hp, "not supported on the cuda backend yet (/devices/backend): cpu and simulated only");
      if (s.rebalance.enabled())
        c.fail(hp, "not allowed with live rebalancing (/rebalance): the replicas do not move with a reshard");
      for (size_t k = 0; k < ts.hot_rows.size(); ++k) {
        c.half_open(ptr_idx(hp, k), ts.hot_rows[k], int64_t{0}, tb.rows(), fmt::format(" (the rows of table \"{}\")", tname));
        if (k > 0 && ts.hot_rows[k] <= ts.hot_rows[k - 1])
          c.fail(ptr_idx(hp, k), fmt::format("must be unique and in increasing order, got {} after {}", ts.hot_rows[k],
                                             ts.hot_rows[k - 1]));
      }
    }
  }

  c.closed("/collective_timeout_ms", s.collective_timeout_ms, kMinCollectiveTimeoutMs, kMaxCollectiveTimeoutMs);
  if (s.memory.max_split_size != 0 && (s.memory.max_split_size < kMinMaxSplitSizeBytes || s.memory.max_split_size > kMaxMemoryBytes))
    c.fail("/memory/max_split_size", fmt::format("must be 0 (unlimited) or in [{}, {}], got {}", kMinMaxSplitSizeBytes,
                                                  kMaxMemoryBytes, s.memory.max_split_size));
  c.ge0_max("/memory/compaction", s.memory.compaction, kMaxSteps);
  if (const double gc = s.memory.garbage_collection_threshold; gc != 0) {
    if (!(gc > 0 && gc < 1))
      c.fail("/memory/garbage_collection_threshold",
             fmt::format("must be > 0 and < 1 (a fraction of devices.memory_bytes, as PyTorch's "
                         "PYTORCH_CUDA_ALLOC_CONF takes it), or 0 for none; got {}",
                         gc));
    else if (s.memory.allocator != AllocatorKind::caching)
      c.fail("/memory/garbage_collection_threshold",
             fmt::format("applies to the caching allocator only, got memory.allocator {}: {}", to_string(s.memory.allocator),
                         s.memory.allocator == AllocatorKind::expandable
                             ? "an expandable range has no whole free segment to release (PyTorch collects none)"
                         : s.memory.allocator == AllocatorKind::direct ? "the direct allocator caches nothing"
                                                                         : "the cudaMallocAsync pool trims itself"));
  }
  if (s.dense) c.gt0_max("/dense/bucket_cap_bytes", s.dense->bucket_cap_bytes, kMaxMemoryBytes);
  for (const auto& [name, link] : {std::pair{"intra_node", &s.network.intra_node}, {"inter_node", &s.network.inter_node}}) {
    const std::string p = ptr_key("/network", name);
    if (link->bandwidth_bytes_per_s != 0)
      c.gt0_max(p + "/bandwidth_bytes_per_s", link->bandwidth_bytes_per_s, kMaxBandwidthBytesPerS);
    c.ge0_max(p + "/latency_ns", link->latency_ns, kMaxLatencyNs);
    // every collective over the link would time out (tester48 F14.8: found only when the first
    // collective hung); /collective_timeout_ms <= 1 day, so the product fits
    if (link->latency_ns >= s.collective_timeout_ms * 1'000'000)
      c.fail(p + "/latency_ns",
             fmt::format("must be below /collective_timeout_ms ({} ms = {} ns): every collective over this link would "
                         "time out, got {}", s.collective_timeout_ms, s.collective_timeout_ms * 1'000'000, link->latency_ns));
  }
  if (s.memory.allocator == AllocatorKind::cuda_async && s.devices.backend == Backend::cpu)
    c.fail("/memory/allocator", "cuda_async (cudaMallocAsync pools) needs devices.backend cuda, got cpu");
  if (s.input.kind == InputKind::criteo_tsv) {
    // docs/workloads.md "Your own data": the features in order are the 26 categorical columns.
    if (s.features.size() != 26)
      c.fail("/input", fmt::format("criteo_tsv has 26 categorical columns, mapped in order to the workload's features; "
                                   "the workload has {} feature(s)", s.features.size()));
    if (s.dense && s.dense->num_dense_features != 13)
      c.fail("/dense/num_dense_features",
             fmt::format("criteo_tsv has 13 integer (dense) columns, got num_dense_features {}", s.dense->num_dense_features));
    if (s.input.paths.empty()) c.fail("/input/paths", "must not be empty");
    for (size_t k = 0; k < s.input.paths.size(); ++k)
      if (s.input.paths[k].empty()) c.fail(ptr_idx("/input/paths", k), "must not be empty");
  } else if (s.input.kind == InputKind::kjt) {
    if (s.input.paths.size() != 1 || s.input.paths[0].empty()) c.fail("/input/path", "must be one non-empty path");
  } else if (!s.input.paths.empty()) {
    c.fail("/input/paths", fmt::format("only allowed for a file source, not {}", enum_name(s.input.kind)));
  }
  validate_rebalance(s, c);
  if (s.devices.backend == Backend::cuda) {
    // What the cuda executor does not run yet (docs/gpu.md): refused here, never a fallback.
    constexpr const char* kNotYet = "not supported on the cuda backend yet";
    // (every pipeline runs: sparse_dist's and semi_sync's batch ahead uses the rank's device from
    // its thread and its comm worker as base does, every exchange of data through host memory
    // after the stream it came from has finished - tests/engine/parity_test.cpp
    // DevicePipelineEqualsReference; not run on a GPU yet)
    // qcomms: the intra-device and hierarchical communicators quantize on the host as Gloo does; the flat
    // NCCL collectives (a GPU per rank) send fp32 only
    constexpr const char* kFp32Only = "(fp32 only: the NCCL collectives of ranks with a GPU each do not quantize)";
    if (s.qcomms.forward_precision != CommPrecision::fp32)
      c.fail("/qcomms/forward_precision",
             fmt::format("{} is {} {}", enum_name(s.qcomms.forward_precision), kNotYet, kFp32Only));
    if (s.qcomms.backward_precision != CommPrecision::fp32)
      c.fail("/qcomms/backward_precision",
             fmt::format("{} is {} {}", enum_name(s.qcomms.backward_precision), kNotYet, kFp32Only));
    if (s.network.limited()) c.fail("/network", fmt::format("network emulation is {}", kNotYet));
    // the cuda rank's dense part runs cuBLAS sgemm (and DCN's cross layers on the host) in fp32:
    // a reduced precision would be recorded but not run
    if (s.dense && s.dense->precision != DensePrecision::fp32)
      c.fail("/dense/precision", fmt::format("{} is {} (fp32 only: the cuda rank's dense GEMMs are fp32 cuBLAS sgemm; "
                                             "cpu emulates {}, simulated times it)",
                                             enum_name(s.dense->precision), kNotYet, enum_name(s.dense->precision)));
    if (s.memory.compaction > 0) c.fail("/memory/compaction", fmt::format("compaction is {}", kNotYet));
    // Reduced-precision tables (data_type, optimizer_state_type, stochastic_rounding) run on the
    // device (RankDevice::lookup_encoded / update_encoded), except under a live reshard, whose
    // moves carry fp32 rows and state between the ranks' host buffers only.
    if (s.rebalance.enabled())
      for (size_t t = 0; t < s.tables.size(); ++t) {
        const TableSpec& tb = s.tables[t];
        if (tb.data_type != TableDataType::fp32)
          c.fail(ptr_idx("/tables", t) + "/data_type",
                 fmt::format("{} (table \"{}\") with live rebalancing (/rebalance) is {} (fp32 only)",
                             enum_name(tb.data_type), tb.name, kNotYet));
        if (tb.optimizer_state_type != OptimizerStateType::fp32)
          c.fail(ptr_idx("/tables", t) + "/optimizer_state_type",
                 fmt::format("{} (table \"{}\") with live rebalancing (/rebalance) is {} (fp32 only)",
                             enum_name(tb.optimizer_state_type), tb.name, kNotYet));
      }
  }
}

}  // namespace workload_detail

void validate(const WorkloadSpec& spec, const std::string& origin) {
  workload_detail::validate_spec(spec, workload_detail::Checker(origin));
}


}  // namespace embedscope::engine
