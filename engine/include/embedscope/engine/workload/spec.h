#pragma once
// WorkloadSpec: the validated, typed form of a workload JSON file (engine/workload: the
// reader and validator in reader.cpp / validate.cpp, to_json in to_json.cpp; the enums and
// their spellings in enums.h; the built-in presets in presets.h).
//
// The JSON schema (every key, its unit and default) is documented in
// docs/configuration.md; parse_workload() is the only way to build a spec
// from JSON and rejects unknown keys. Names follow TorchRec (EmbeddingBagConfig,
// ShardingType) and FBGEMM (optimizers).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/workload/enums.h"
#include "embedscope/engine/workload/rebalance_spec.h"
#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

/// Upper bounds that keep every size computation inside 64 bits (a workload beyond them is
/// rejected naming the field rather than overflowing).
constexpr int64_t kMaxNumEmbeddings = int64_t{1} << 40;   ///< 1.1e12 rows
constexpr int64_t kMaxEmbeddingDim = 65536;
constexpr int64_t kMaxBatchSize = int64_t{1} << 24;       ///< samples per rank
constexpr int64_t kMaxPoolingFactor = int64_t{1} << 20;   ///< ids per bag
constexpr int64_t kMaxSteps = 1'000'000'000;
constexpr int64_t kMaxMemoryBytes = int64_t{1} << 50;     ///< 1 PiB per device
/// devices.host_memory_bytes when absent: 64 GiB of host memory per rank for the tables placed
/// in host memory (TableSpec::placement host / host_cached).
constexpr int64_t kDefaultHostMemoryBytes = int64_t{64} << 30;
constexpr int64_t kMinCollectiveTimeoutMs = 100;
constexpr int64_t kMaxCollectiveTimeoutMs = 86'400'000;   ///< one day
constexpr int64_t kMaxBandwidthBytesPerS = int64_t{1} << 50;  ///< 1 PiB/s
constexpr int64_t kMaxLatencyNs = 10'000'000'000;              ///< 10 s
constexpr size_t kMaxWorkloadFileBytes = size_t{64} << 20;
/// Ranks of a simulated cluster (devices.backend simulated); the real executors run at most 64.
constexpr int kMaxSimulatedRanks = 1024;
/// The smallest non-zero memory.max_split_size, in bytes: 20 MiB, PyTorch's rule (its caching
/// allocator's kLargeBuffer, engine/allocator.h; tests/engine/workload checks they agree).
constexpr int64_t kMinMaxSplitSizeBytes = int64_t{20} << 20;

/// Ids per bag of one feature. fixed: every bag has `mean` ids (max == mean).
/// Otherwise lengths are Poisson(mean) clamped to [0, max] (so empty bags happen).
struct PoolingFactor {
  bool fixed = true;
  double mean = 1.0;   ///< ids per bag, >= 0
  int64_t max = 1;     ///< upper bound, >= mean
};

/// How ids of one feature are drawn over [0, num_embeddings).
/// zipf: P(k-th hottest) ~ 1/k^alpha; the k-th hottest row is row perm(k), where perm is a
/// seeded affine permutation of the row range (so hot rows are spread, as in real data).
struct IdDistribution {
  IdDistributionKind kind = IdDistributionKind::uniform;
  double alpha = 1.15;       ///< zipf exponent, > 0 (FBGEMM TBE bench: 1.15 training)
  uint64_t permute_seed = 0; ///< seed of the hot-row permutation; 0 = derive from spec seed
  bool permute = true;       ///< false: hottest row is row 0
};

struct FeatureSpec {
  std::string name;
  PoolingFactor pooling_factor;
  IdDistribution ids;
};

/// TorchRec EmbeddingBagConfig. One table may serve several features (feature_names).
struct TableSpec {
  std::string name;
  int64_t num_embeddings = 0;  ///< rows, > 0
  int64_t embedding_dim = 0;   ///< columns, > 0
  Pooling pooling = Pooling::sum;
  std::vector<std::string> feature_names;  ///< each names an entry of WorkloadSpec::features
  /// Precision the rows are stored in (JSON "data_type", default fp32): fp16 / bf16 take 2
  /// bytes a value, int8 1 byte a value plus 8 bytes a row, int4 half a byte a value plus 4
  /// bytes a row (an even embedding_dim and even column shards only; quant/row_codec.h). The cpu
  /// backend and the cuda backend run every type (on cuda through the device's typed lookup and
  /// row update, with the cpu backend's rounding; exec/device/rank_device.h).
  TableDataType data_type = TableDataType::fp32;
  /// How updated rows are rounded to data_type (JSON "stochastic_rounding", FBGEMM TBE's name):
  /// true = stochastic rounding with counter-based random numbers, false = round to nearest
  /// (quant/row_codec.h says how and why). Absent: true for int4 (at 16 levels round to nearest
  /// loses almost every update), false for the other types. true needs a reduced-precision
  /// data_type (not fp32).
  std::optional<bool> stochastic_rounding{};
  /// Whether updates of this table's rows round stochastically: stochastic_rounding, or when it
  /// is absent, data_type == int4.
  bool uses_stochastic_rounding() const { return stochastic_rounding.value_or(data_type == TableDataType::int4); }
  /// The hashing trick (JSON "hash_size"; 0 = absent, no hashing): ids stay drawn over
  /// [0, num_embeddings) but the table has hash_size rows, and id i is looked up in row
  /// hashed_row(i, hash_size) (input/hashing.h: xxHash64, seed kIdHashSeed). In [1, num_embeddings].
  int64_t hash_size = 0;
  /// Precision of the table's optimizer state (JSON "optimizer_state_type", default fp32):
  /// fp16 / bf16 store rowwise_adagrad's momentum1 (one value a row) and adam's momentum1 and
  /// momentum2 (dim values a row each) as 2-byte codes, half the bytes; updated in fp32 and
  /// rounded to nearest even when stored (enums.h). Not allowed with sgd (no state).
  OptimizerStateType optimizer_state_type = OptimizerStateType::fp32;
  /// Low-rank factorization (JSON "low_rank_dim" r; 0 = absent, a full table): the table is
  /// A (rows() x r) times B (r x embedding_dim), both fp32 and trained (model/low_rank.h;
  /// ALBERT's factorized embedding parameterization). In [1, embedding_dim); fp32 data_type
  /// only; sharding table_wise or data_parallel only; cpu and cuda backends (on cuda A's lookup and
  /// the product with B run on the device).
  int64_t low_rank_dim = 0;
  /// Tables folded into this one by "shared_with" (JSON: a table {"name": "b", ...,
  /// "shared_with": "a"} uses a's rows): TorchRec's one table config with several
  /// feature_names. Their features are in feature_names after the table's own; the table is
  /// stored, placed and counted once. Kept so that to_json writes them back as they were given.
  struct SharedTable {
    std::string name;
    std::vector<std::string> feature_names;
    int written_index = -1;  ///< its index in the workload's /tables as written (see below)
  };
  std::vector<SharedTable> shared_tables{};
  /// The table's index in the workload's /tables as written, before shared_with tables were
  /// folded (reader.cpp); -1 for a spec built in code (then its index in WorkloadSpec::tables).
  /// The generator's teacher labels an id by this index (input/input.h), so a run that folds
  /// a shared table trains on the same labels as the run that keeps it separate.
  int written_index = -1;
  /// Where the rows live (JSON "placement", default device; FBGEMM's EmbeddingLocation, enums.h):
  /// host and host_cached keep the rows and the optimizer state in host memory
  /// (devices.host_memory_bytes per rank); host_cached adds a device cache of
  /// ceil(cache_load_factor x the shard's rows) rows (engine/model/host_cache.h). Not device:
  /// fp32 data_type and optimizer state, no low_rank_dim, sharding table_wise, row_wise or
  /// column_wise, the cpu or cuda backend (on cuda the cache slots in the device's memory; the
  /// simulated backend times its host-link copies), no live rebalancing.
  TablePlacement placement = TablePlacement::device;
  /// host_cached only (JSON "cache_load_factor", in (0, 1], default 0.2 as FBGEMM's): the share
  /// of each shard's rows the device cache holds.
  double cache_load_factor = 0.2;
  /// host_cached only (JSON "cache_policy", default lru as FBGEMM's): the cache's eviction rule.
  CachePolicy cache_policy = CachePolicy::lru;
  /// host_cached only (JSON "prefetch_pipeline", default false; TorchRec's
  /// CacheParams.prefetch_pipeline and FBGEMM TBE's prefetch_pipeline): under pipeline
  /// sparse_dist or semi_sync, which receive a batch's ids a step ahead of its lookup, the rows of
  /// that batch (sparse_dist: the next one, semi_sync: the one after it) missing from the cache
  /// are fetched into it during the current step (op `prefetch`, program/step_program.h) and
  /// pinned there until its lookup, which then hits (model/host_cache.h, HostRowStore::prefetch).
  bool prefetch_pipeline = false;
  /// Rows the table stores: hash_size when hashing, else num_embeddings. Every shard, plan and
  /// memory figure counts these rows; the ids (and invalid_ids) range over num_embeddings.
  int64_t rows() const { return hash_size > 0 ? hash_size : num_embeddings; }
};

/// Per-table sharding override.
struct TableSharding {
  ShardingType type = ShardingType::table_wise;
  /// table_wise: exactly one rank. column_wise: one rank per column shard (the shard count).
  /// row_wise / data_parallel / table_row_wise / table_column_wise / grid_shard: must be empty
  /// (they use every rank / a node / one node per column block).
  std::vector<int> ranks;
  /// table_row_wise and table_column_wise only: which node (group of local_world_size ranks);
  /// -1 = planner picks.
  int node = -1;
  /// Hot-row replication (JSON "hot_rows": row ids; issue 17, HugeCTR's hybrid embedding with
  /// its "frequent" categories): these rows of the table are replicated on every rank and
  /// trained data-parallel (each rank looks up its own batch's ids of them locally, their
  /// gradients are all-reduced as a dense hot_rows x (dim + 1) block, and every replica applies
  /// the same fused optimizer update); the table's other ids stay on the model-parallel path.
  /// row_wise / table_row_wise / grid_shard; rows in [0, TableSpec::rows()), unique, sorted; fp32
  /// data_type and optimizer_state_type, no low_rank_dim, cpu or simulated backend, no live
  /// rebalancing. Empty: none.
  std::vector<int64_t> hot_rows{};
  /// Hot rows chosen automatically (JSON "hot_rows": {"auto": true, "sample_steps": N}; 0 = the
  /// hot_rows listed): before the run, the ids of its first N iterations on every rank (the
  /// batches it will train on, after the invalid_ids policy and hashing) are counted per row, and
  /// the rows with more than W x (dim + 1) ids a step become hot_rows (choose_hot_rows,
  /// rebalance/hot_rows.h: the all-to-all vs all-reduce byte cost). In [1, warmup_steps + steps];
  /// hot_rows must then be empty. The same conditions as hot_rows.
  int64_t hot_rows_sample_steps = 0;
  /// Whether the table replicates hot rows (listed or automatic).
  bool has_hot_rows() const { return !hot_rows.empty() || hot_rows_sample_steps > 0; }
};

struct ShardingSpec {
  ShardingType default_type = ShardingType::table_wise;
  std::map<std::string, TableSharding> per_table;  ///< key: table name
  /// Ranks per node for table_row_wise (hierarchical); must divide devices.count.
  /// 0 = devices.count (one node).
  int local_world_size = 0;
};

struct DevicesSpec {
  int count = 1;                  ///< ranks, 1..64 (backend simulated: 1..1024)
  Backend backend = Backend::cpu;
  int64_t memory_bytes = 0;       ///< capacity per device in bytes, > 0 (per rank where ranks share a GPU)
  /// Ranks placed on one GPU (JSON "ranks_per_gpu"), 0..count; 0 = automatic: ceil(count /
  /// GPUs visible). Block placement: rank r runs on GPU r / ranks_per_gpu (exec/gpu_placement.h).
  /// Backend cuda / auto only (validate refuses it on cpu and simulated; the host stand-in of
  /// TrainerOptions::emulate_device places ranks with TrainerOptions::emulated_devices).
  int ranks_per_gpu = 0;
  /// Host memory per rank for the tables placed in host memory (JSON "host_memory_bytes",
  /// default kDefaultHostMemoryBytes = 64 GiB), bytes, > 0: the host rows, optimizer state and
  /// LFU counters of every host / host_cached shard of the rank must fit in it.
  int64_t host_memory_bytes = kDefaultHostMemoryBytes;
  /// backend simulated only (required there): the hardware profile the cluster is modelled on,
  /// a built-in name (resources/hardware/*.json, e.g. "h100_sxm") or a path to a profile JSON
  /// (engine/cost/hardware_profile.h). Ranks per node: sharding.local_world_size.
  std::string hardware;
};

struct OptimizerSpec {
  OptimizerType type = OptimizerType::sgd;
  double learning_rate = 0.01;
  double eps = 1e-8;              ///< rowwise_adagrad and adam
  double beta1 = 0.9;             ///< adam
  double beta2 = 0.999;           ///< adam
  /// Learning rate of the dense part (plain SGD); defaults to learning_rate.
  double dense_learning_rate = -1.0;
};

/// DLRM-style dense part: bottom MLP over dense features, interaction with the pooled
/// embeddings, top MLP ending in one logit (BCE loss).
struct DenseSpec {
  int num_dense_features = 13;
  std::vector<int> bottom_mlp;    ///< layer widths after the input, e.g. {512,256,64,16}
  Interaction interaction = Interaction::dot;
  int dcn_num_layers = 3;         ///< dcn: cross layers
  int dcn_low_rank_dim = 512;     ///< dcn: rank of each cross layer's W = U V^T
  std::vector<int> top_mlp;       ///< layer widths, last must be 1, e.g. {512,256,1}
  /// Dense gradients are all-reduced in buckets of at most this many bytes (PyTorch DDP's
  /// bucket_cap_mb, in bytes; default 25 MiB as DDP), each started as soon as the backward pass
  /// has produced its gradients (reverse layer order).
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  /// Precision of the dense part's matrix products (JSON "precision", default fp32; enums.h
  /// DensePrecision): tf32 / bf16 / fp16 round every GEMM's inputs (and the dot interaction's) to
  /// the precision, accumulate in fp32 and keep fp32 weights (model/dense.h); the memory estimate
  /// keeps activations at the precision's width; the simulated backend times the GEMMs at the
  /// profile's rate for it (cost/dense_gemm_rate.h). cpu and simulated backends (cuda: fp32 only).
  DensePrecision precision = DensePrecision::fp32;
};

/// How each device's memory is managed (engine/allocator.h; memory.max_split_size >= kMinMaxSplitSizeBytes).
struct MemorySpec {
  AllocatorKind allocator = AllocatorKind::caching;
  int64_t max_split_size = 0;  ///< bytes; 0 = unlimited, else >= 20 MiB (PyTorch's rule)
  int64_t compaction = 0;      ///< pack each device every N steps (0 = never)
  /// PyTorch's garbage_collection_threshold, a fraction of devices.memory_bytes: 0 = off, else
  /// 0 < t < 1, caching allocator only (AllocatorConfig::garbage_collection_threshold).
  double garbage_collection_threshold = 0;
};

/// One link class of the slow-network emulation (comm/gloo_process_group.h: ProcessGroup::set_network).
struct LinkSpec {
  int64_t bandwidth_bytes_per_s = 0;  ///< bytes per second, > 0; 0 = unlimited
  int64_t latency_ns = 0;             ///< added once per collective, >= 0
  bool limited() const { return bandwidth_bytes_per_s > 0 || latency_ns > 0; }
};
/// Emulated network: links within a node (ranks r, s with r / local_world_size ==
/// s / local_world_size, as table_row_wise groups them) and across nodes. Absent = unlimited.
struct NetworkSpec {
  LinkSpec intra_node;
  LinkSpec inter_node;
  bool limited() const { return intra_node.limited() || inter_node.limited(); }
};
/// TorchRec qcomms (QCommsConfig): the precision of the embedding output dist (forward) and of
/// the gradient dist (backward). Values are quantized before the collective and dequantized
/// after it, so fp16 / bf16 send half the bytes of fp32.
struct QCommsSpec {
  CommPrecision forward_precision = CommPrecision::fp32;
  CommPrecision backward_precision = CommPrecision::fp32;
};

/// Where the batches come from ("input" in the workload JSON; engine/input/source.h reads it).
/// synthetic: the seeded generator (features' pooling_factor and ids). criteo_tsv: the Criteo
/// Kaggle / Terabyte text format (engine/input/criteo/FORMAT.md): the workload's features, in
/// order, are the 26 categorical columns (so a criteo_tsv workload has exactly 26 features;
/// their pooling_factor and ids are not used: each bag holds the sample's one id, or none for
/// an empty field), the 13 integer columns are the dense features (dense.num_dense_features
/// must be 13) and the label column the labels. kjt: recorded batches ("path": one file,
/// engine/input/kjt/FORMAT.md), features matched by name; on_short applies, malformed_lines
/// and categorical do not.
struct InputSpec {
  InputKind kind = InputKind::synthetic;
  /// criteo_tsv: the files, read in order; kjt: one file (JSON "path") as one stream (plain text or gzip, told apart by
  /// zlib); relative paths are resolved against the workload file's folder when the spec is
  /// read from a file (load_workload_file), else against the working directory.
  std::vector<std::string> paths;
  MalformedLinePolicy malformed_lines = MalformedLinePolicy::error;
  ShortInputPolicy on_short = ShortInputPolicy::error;
  CategoricalMapping categorical = CategoricalMapping::modulo;
};

struct WorkloadSpec {
  std::string name;
  std::string description;
  std::string source;              ///< where the figures come from (presets)
  std::vector<TableSpec> tables;
  std::vector<FeatureSpec> features;
  int64_t batch_size = 0;          ///< samples per rank per step, > 0
  int64_t steps = 10;              ///< measured steps, > 0
  int64_t warmup_steps = 0;        ///< steps run before measuring, >= 0
  uint64_t seed = 0;
  DevicesSpec devices;
  OptimizerSpec optimizer;
  std::optional<DenseSpec> dense;  ///< nullopt: "dense": null (fixed projection head)
  ShardingSpec sharding;
  MemorySpec memory;
  InvalidIdPolicy invalid_ids = InvalidIdPolicy::error;
  int64_t collective_timeout_ms = 30000;
  PipelineKind pipeline = PipelineKind::base;
  QCommsSpec qcomms;
  NetworkSpec network;
  InputSpec input;
  /// Rebalancing while training (issue 17): off by default (rebalance_spec.h).
  RebalanceSpec rebalance;

  /// Index of the table that serves feature `f` (-1 if none), and the feature index of a name
  /// (-1 if absent). Each is a linear scan: O(tables x features) or O(features) per call; code
  /// that asks for every feature or table builds a FeatureIndex once instead.
  int table_of_feature(size_t f) const;
  int feature_index(const std::string& name) const;  ///< -1 if absent
};

/// The feature <-> table maps of a spec, built once in O(n log n) (n = tables + features), with
/// the answers of WorkloadSpec::table_of_feature and feature_index (the first match where a
/// name repeats). A snapshot: edits of the spec after construction are not seen.
class FeatureIndex {
 public:
  explicit FeatureIndex(const WorkloadSpec& spec);
  /// WorkloadSpec::feature_index in O(log n).
  int feature_index(const std::string& name) const;
  /// Per feature: the table serving it, -1 if none (WorkloadSpec::table_of_feature).
  const std::vector<int>& table_of_feature() const { return table_of_feature_; }
  /// Per table: the feature index of each of its feature_names, in order (-1 for a name
  /// without a feature).
  const std::vector<std::vector<int>>& features_of_table() const { return features_of_table_; }

 private:
  std::map<std::string, int> by_name_;
  std::vector<int> table_of_feature_;
  std::vector<std::vector<int>> features_of_table_;
};

/// Parses and validates a workload JSON document. `origin` names the file (or "preset NAME")
/// in error messages. Throws SpecError "<origin>: <json pointer>: <reason>" on the first
/// problem (type errors, unknown keys, ranges, dangling feature names, sharding overrides
/// that name unknown tables or invalid ranks).
WorkloadSpec parse_workload(const nlohmann::json& j, const std::string& origin);
/// Reads and parses a file; SpecError names the file (and the line for JSON syntax errors).
WorkloadSpec load_workload_file(const std::string& path);
/// Serializes back to JSON (round-trips through parse_workload).
nlohmann::json to_json(const WorkloadSpec& spec);

/// Re-validates a spec after command-line overrides (devices, sharding, steps).
void validate(const WorkloadSpec& spec, const std::string& origin);

}  // namespace embedscope::engine
