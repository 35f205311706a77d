#pragma once
// The workload's enums and their spellings: one table of names per enum, which the spec
// parser and to_json, to_string, the *_from_string functions, the CLI's help and validators,
// and the workbench's combo boxes and plan model all read. A new value is one enumerator plus
// one row of its table.
//
// Each table lists every value once, in the order shown to users (help texts, combo boxes);
// the spelling is the one used in JSON and on the command line.

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

enum class Pooling { sum, mean };

/// TorchRec's sharding types (torchrec/distributed/types.py ShardingType), all seven:
/// table_column_wise is column_wise with the column shards on the ranks of one node (TorchRec's
/// TwCwPooledEmbeddingSharding); grid_shard splits the columns into blocks, each block
/// table_row_wise over the ranks of one node (GridPooledEmbeddingSharding).
enum class ShardingType { data_parallel, table_wise, row_wise, column_wise, table_row_wise, table_column_wise, grid_shard };

enum class OptimizerType { sgd, rowwise_adagrad, adam };

enum class IdDistributionKind { uniform, zipf };

/// What the input pipeline does with ids outside [0, num_embeddings).
enum class InvalidIdPolicy { error, clamp, drop };

/// Executor of a run: cpu (rank threads, Gloo), cuda (one GPU per rank, NCCL; exec/run.h lists
/// what it runs), auto (cuda when cudaGetDeviceCount reports a device, else cpu; backend.h),
/// simulated (the step programs timed by the cost model of devices.hardware: exec/simulated/).
enum class Backend { cpu, cuda, auto_, simulated };

/// dot: DLRM pairwise dot products (all dims equal the bottom MLP output); cat: concatenation;
/// dcn: DCN-v2 low-rank cross network over the concatenation (MLPerf DLRM-DCNv2).
enum class Interaction { dot, cat, dcn };
/// Training pipelines, named as TorchRec names them (torchrec.distributed.train_pipeline):
/// base = TrainPipelineBase (each phase waits for the previous one), sparse_dist =
/// TrainPipelineSparseDist (the input dist of batch i+1 runs while batch i computes), semi_sync
/// = TrainPipelineSemiSync (the output dist of batch i+1 runs while the dense part of batch i
/// computes; one step of staleness in the embedding weights, see exec/run.h).
enum class PipelineKind { base, sparse_dist, semi_sync };
/// Precision of a communicated tensor (TorchRec qcomms' CommType FP32 / FP16 / BF16).
enum class CommPrecision { fp32, fp16, bf16 };
/// Storage precision of an embedding table's rows (TorchRec/FBGEMM SparseType FP32, FP16, BF16,
/// INT8, INT4). int8 rows are FBGEMM's fused 8-bit row-wise layout: dim uint8 codes followed by
/// an fp32 scale and an fp32 bias per row; int4 rows its fused N-bit row-wise layout: dim / 2
/// bytes of packed 4-bit codes followed by an fp16 scale and an fp16 bias (quant/row_codec.h).
/// Lookups accumulate in fp32 whatever the storage; how training updates reduced-precision rows
/// (round to nearest, or stochastic rounding: TableSpec::stochastic_rounding) is described in
/// quant/row_codec.h.
enum class TableDataType { fp32, fp16, bf16, int8, int4 };
/// Storage precision of a table's optimizer state (FBGEMM TBE's momentum1 / momentum2 dtype,
/// TorchRec's optimizer state dtypes): fp32, or fp16 / bf16 2-byte codes. Every update decodes
/// the touched rows' state to fp32, applies the fp32 formula and stores it again rounded to
/// nearest even (kernels/kernels.h, apply_row_optimizer).
enum class OptimizerStateType { fp32, fp16, bf16 };
/// Precision of the dense part's matrix products (JSON "dense": {"precision"}; PyTorch AMP's
/// semantics): fp32 (the default: plain fp32 sgemm, PyTorch's default allow_tf32 = False), tf32
/// (inputs rounded to 10 mantissa bits, torch.backends.cuda.matmul.allow_tf32 = True), bf16 /
/// fp16 (inputs rounded to bf16 / fp16, torch.autocast). In every case the products accumulate
/// in fp32 and the weights, gradients and optimizer state stay fp32 (the master weights);
/// quant/dense_precision.h rounds, model/dense.h says where.
enum class DensePrecision { fp32, tf32, bf16, fp16 };
/// How a device's memory is managed (engine/allocator.h describes each).
enum class AllocatorKind { caching, expandable, direct, cuda_async };
/// Where the training batches come from (spec.input; engine/input/source.h): synthetic (the
/// seeded generator of input.h), criteo_tsv (Criteo Kaggle / Terabyte text files) or kjt
/// (recorded KJT batches, engine/input/kjt/FORMAT.md).
enum class InputKind { synthetic, criteo_tsv, kjt };
/// What a file source does with a line it cannot parse: error (stop naming file, line, field)
/// or skip (count it per step and go on).
enum class MalformedLinePolicy { error, skip };
/// What a file source does when the files hold fewer samples than the run needs: error (stop
/// naming how many were needed and found) or wrap (start again at the first file).
enum class ShortInputPolicy { error, wrap };
/// How a Criteo categorical value becomes a row: modulo (the hexadecimal value modulo the
/// table's num_embeddings, as DLRM's --max-ind-range does) or raw (the value used as the row
/// id itself, so ids outside the table reach the invalid_ids policy).
enum class CategoricalMapping { modulo, raw };
/// Where an embedding table's rows live (FBGEMM's EmbeddingLocation): device (DEVICE: rows and
/// optimizer state in device memory), host (HOST: rows and optimizer state in host memory; each
/// lookup's distinct rows are fetched into a device buffer and their updates written back) or
/// host_cached (MANAGED_CACHING: rows and state in host memory, a device cache of
/// TableSpec::cache_load_factor x rows rows in front of them; engine/model/host_cache.h).
enum class TablePlacement { device, host, host_cached };
/// Eviction rule of a host_cached table's device cache (FBGEMM's CacheAlgorithm LRU / LFU;
/// engine/model/host_cache.h states the rules).
enum class CachePolicy { lru, lfu };

/// The name table of enum E: `values`, an array of (value, spelling) pairs. Specialized below
/// for every enum of this header; a type without a specialization does not compile.
template <class E>
struct EnumNames;

template <>
struct EnumNames<Pooling> {
  static constexpr std::pair<Pooling, const char*> values[] = {{Pooling::sum, "sum"}, {Pooling::mean, "mean"}};
};
template <>
struct EnumNames<ShardingType> {
  static constexpr std::pair<ShardingType, const char*> values[] = {
      {ShardingType::data_parallel, "data_parallel"},
      {ShardingType::table_wise, "table_wise"},
      {ShardingType::row_wise, "row_wise"},
      {ShardingType::column_wise, "column_wise"},
      {ShardingType::table_row_wise, "table_row_wise"},
      {ShardingType::table_column_wise, "table_column_wise"},
      {ShardingType::grid_shard, "grid_shard"}};
};
template <>
struct EnumNames<OptimizerType> {
  static constexpr std::pair<OptimizerType, const char*> values[] = {
      {OptimizerType::sgd, "sgd"}, {OptimizerType::rowwise_adagrad, "rowwise_adagrad"}, {OptimizerType::adam, "adam"}};
};
template <>
struct EnumNames<IdDistributionKind> {
  static constexpr std::pair<IdDistributionKind, const char*> values[] = {{IdDistributionKind::uniform, "uniform"},
                                                                          {IdDistributionKind::zipf, "zipf"}};
};
template <>
struct EnumNames<InvalidIdPolicy> {
  static constexpr std::pair<InvalidIdPolicy, const char*> values[] = {
      {InvalidIdPolicy::error, "error"}, {InvalidIdPolicy::clamp, "clamp"}, {InvalidIdPolicy::drop, "drop"}};
};
template <>
struct EnumNames<Backend> {
  static constexpr std::pair<Backend, const char*> values[] = {
      {Backend::cpu, "cpu"}, {Backend::cuda, "cuda"}, {Backend::auto_, "auto"}, {Backend::simulated, "simulated"}};
};
template <>
struct EnumNames<Interaction> {
  static constexpr std::pair<Interaction, const char*> values[] = {
      {Interaction::dot, "dot"}, {Interaction::cat, "cat"}, {Interaction::dcn, "dcn"}};
};
template <>
struct EnumNames<PipelineKind> {
  static constexpr std::pair<PipelineKind, const char*> values[] = {
      {PipelineKind::base, "base"}, {PipelineKind::sparse_dist, "sparse_dist"}, {PipelineKind::semi_sync, "semi_sync"}};
};
template <>
struct EnumNames<CommPrecision> {
  static constexpr std::pair<CommPrecision, const char*> values[] = {
      {CommPrecision::fp32, "fp32"}, {CommPrecision::fp16, "fp16"}, {CommPrecision::bf16, "bf16"}};
};
template <>
struct EnumNames<TableDataType> {
  static constexpr std::pair<TableDataType, const char*> values[] = {{TableDataType::fp32, "fp32"},
                                                                     {TableDataType::fp16, "fp16"},
                                                                     {TableDataType::bf16, "bf16"},
                                                                     {TableDataType::int8, "int8"},
                                                                     {TableDataType::int4, "int4"}};
};
template <>
struct EnumNames<OptimizerStateType> {
  static constexpr std::pair<OptimizerStateType, const char*> values[] = {{OptimizerStateType::fp32, "fp32"},
                                                                          {OptimizerStateType::fp16, "fp16"},
                                                                          {OptimizerStateType::bf16, "bf16"}};
};
template <>
struct EnumNames<DensePrecision> {
  static constexpr std::pair<DensePrecision, const char*> values[] = {{DensePrecision::fp32, "fp32"},
                                                                      {DensePrecision::tf32, "tf32"},
                                                                      {DensePrecision::bf16, "bf16"},
                                                                      {DensePrecision::fp16, "fp16"}};
};
template <>
struct EnumNames<AllocatorKind> {
  static constexpr std::pair<AllocatorKind, const char*> values[] = {{AllocatorKind::caching, "caching"},
                                                                     {AllocatorKind::expandable, "expandable"},
                                                                     {AllocatorKind::direct, "direct"},
                                                                     {AllocatorKind::cuda_async, "cuda_async"}};
};

template <>
struct EnumNames<InputKind> {
  static constexpr std::pair<InputKind, const char*> values[] = {{InputKind::synthetic, "synthetic"},
                                                                 {InputKind::criteo_tsv, "criteo_tsv"},
                                                                 {InputKind::kjt, "kjt"}};
};
template <>
struct EnumNames<MalformedLinePolicy> {
  static constexpr std::pair<MalformedLinePolicy, const char*> values[] = {{MalformedLinePolicy::error, "error"},
                                                                           {MalformedLinePolicy::skip, "skip"}};
};
template <>
struct EnumNames<ShortInputPolicy> {
  static constexpr std::pair<ShortInputPolicy, const char*> values[] = {{ShortInputPolicy::error, "error"},
                                                                        {ShortInputPolicy::wrap, "wrap"}};
};
template <>
struct EnumNames<TablePlacement> {
  static constexpr std::pair<TablePlacement, const char*> values[] = {{TablePlacement::device, "device"},
                                                                      {TablePlacement::host, "host"},
                                                                      {TablePlacement::host_cached, "host_cached"}};
};
template <>
struct EnumNames<CachePolicy> {
  static constexpr std::pair<CachePolicy, const char*> values[] = {{CachePolicy::lru, "lru"}, {CachePolicy::lfu, "lfu"}};
};
template <>
struct EnumNames<CategoricalMapping> {
  static constexpr std::pair<CategoricalMapping, const char*> values[] = {{CategoricalMapping::modulo, "modulo"},
                                                                          {CategoricalMapping::raw, "raw"}};
};

/// The spelling of `e`; "?" for a value outside the table (a cast integer). O(table size).
template <class E>
constexpr const char* enum_name(E e) {
  for (const auto& [v, n] : EnumNames<E>::values)
    if (v == e) return n;
  return "?";
}

/// Every spelling of E, in table order, e.g. enum_names<PipelineKind>() ==
/// {"base", "sparse_dist", "semi_sync"} (for CLI11's IsMember and combo boxes).
template <class E>
std::vector<std::string> enum_names() {
  std::vector<std::string> out;
  for (const auto& [v, n] : EnumNames<E>::values) out.emplace_back(n);
  return out;
}

/// The spellings joined by `sep`, e.g. enum_names_joined<CommPrecision>() == "fp32, fp16, bf16"
/// (help texts and error messages).
template <class E>
std::string enum_names_joined(std::string_view sep = ", ") {
  std::string out;
  for (const auto& [v, n] : EnumNames<E>::values) {
    if (!out.empty()) out += sep;
    out += n;
  }
  return out;
}

/// The value spelled `s` (exact, case-sensitive), or nullopt.
template <class E>
constexpr std::optional<E> enum_from_name(std::string_view s) {
  for (const auto& [v, n] : EnumNames<E>::values)
    if (s == n) return v;
  return std::nullopt;
}

/// The message for a spelling not in E's table: "<where>: must be one of a, b, c, got \"s\"".
template <class E>
std::string enum_error(const std::string& s, const std::string& where) {
  return where + ": must be one of " + enum_names_joined<E>() + ", got \"" + s + "\"";
}

/// The value spelled `s`; throws SpecError(enum_error<E>(s, where)) otherwise. `where` is the
/// full message prefix ("file.json: /pointer" or "--flag").
template <class E>
E enum_from_string(const std::string& s, const std::string& where) {
  if (auto v = enum_from_name<E>(s)) return *v;
  throw SpecError(enum_error<E>(s, where));
}

inline const char* to_string(Pooling p) { return enum_name(p); }
inline const char* to_string(ShardingType s) { return enum_name(s); }
inline const char* to_string(OptimizerType o) { return enum_name(o); }
inline const char* to_string(IdDistributionKind k) { return enum_name(k); }
inline const char* to_string(InvalidIdPolicy p) { return enum_name(p); }
inline const char* to_string(Backend b) { return enum_name(b); }
inline const char* to_string(Interaction i) { return enum_name(i); }
inline const char* to_string(PipelineKind p) { return enum_name(p); }
inline const char* to_string(CommPrecision p) { return enum_name(p); }
inline const char* to_string(AllocatorKind k) { return enum_name(k); }
inline const char* to_string(TableDataType t) { return enum_name(t); }
inline const char* to_string(TablePlacement p) { return enum_name(p); }
inline const char* to_string(CachePolicy p) { return enum_name(p); }
inline const char* to_string(DensePrecision p) { return enum_name(p); }

/// Parses "base" | "sparse_dist" | "semi_sync"; throws SpecError naming `where`.
inline PipelineKind pipeline_from_string(const std::string& s, const std::string& where) {
  return enum_from_string<PipelineKind>(s, where);
}
/// Parses the spelling used in JSON and on the command line ("row_wise", ...).
/// Throws SpecError naming `where` and listing the accepted values.
inline ShardingType sharding_type_from_string(const std::string& s, const std::string& where) {
  return enum_from_string<ShardingType>(s, where);
}
/// "caching" | "expandable" | "direct" | "cuda_async"; throws std::invalid_argument naming
/// `where` (the allocator's callers are not all input readers).
inline AllocatorKind allocator_kind_from_string(const std::string& s, const std::string& where) {
  if (auto v = enum_from_name<AllocatorKind>(s)) return *v;
  throw std::invalid_argument(enum_error<AllocatorKind>(s, where));
}

}  // namespace embedscope::engine
