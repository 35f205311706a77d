// WorkloadSpec: JSON parsing, validation and serialization.
//
// parse_workload() checks shape (types, unknown and required keys, enum spellings, the
// number-or-object forms) while it builds the typed spec, then runs validate(), which checks
// every range and cross reference on the typed spec. Both report "<origin>: <pointer>: <reason>"
// with the same pointers, because the typed spec keeps the JSON order of tables and features
// (features that the JSON omits are appended after the listed ones).

#include "embedscope/engine/spec.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace embedscope::engine {

using nlohmann::json;

namespace {

constexpr int64_t kDefaultMemoryBytes = int64_t{8} << 30;  // 8 GiB
constexpr int kMaxDevices = 64;

// ---- enum spellings ---------------------------------------------------------------------

template <class E>
struct EnumNames;

template <>
struct EnumNames<Pooling> {
  static constexpr std::pair<Pooling, const char*> values[] = {{Pooling::sum, "sum"},
                                                               {Pooling::mean, "mean"}};
};
template <>
struct EnumNames<ShardingType> {
  static constexpr std::pair<ShardingType, const char*> values[] = {
      {ShardingType::data_parallel, "data_parallel"},
      {ShardingType::table_wise, "table_wise"},
      {ShardingType::row_wise, "row_wise"},
      {ShardingType::column_wise, "column_wise"},
      {ShardingType::table_row_wise, "table_row_wise"}};
};
template <>
struct EnumNames<OptimizerType> {
  static constexpr std::pair<OptimizerType, const char*> values[] = {
      {OptimizerType::sgd, "sgd"},
      {OptimizerType::rowwise_adagrad, "rowwise_adagrad"},
      {OptimizerType::adam, "adam"}};
};
template <>
struct EnumNames<IdDistributionKind> {
  static constexpr std::pair<IdDistributionKind, const char*> values[] = {
      {IdDistributionKind::uniform, "uniform"}, {IdDistributionKind::zipf, "zipf"}};
};
template <>
struct EnumNames<InvalidIdPolicy> {
  static constexpr std::pair<InvalidIdPolicy, const char*> values[] = {
      {InvalidIdPolicy::error, "error"},
      {InvalidIdPolicy::clamp, "clamp"},
      {InvalidIdPolicy::drop, "drop"}};
};
template <>
struct EnumNames<Backend> {
  static constexpr std::pair<Backend, const char*> values[] = {{Backend::cpu, "cpu"}, {Backend::cuda, "cuda"}, {Backend::auto_, "auto"}};
};
template <>
struct EnumNames<Interaction> {
  static constexpr std::pair<Interaction, const char*> values[] = {
      {Interaction::dot, "dot"}, {Interaction::cat, "cat"}, {Interaction::dcn, "dcn"}};
};

template <>
struct EnumNames<PipelineKind> {
  static constexpr std::pair<PipelineKind, const char*> values[] = {{PipelineKind::base, "base"},
                                                                    {PipelineKind::sparse_dist, "sparse_dist"},
                                                                    {PipelineKind::semi_sync, "semi_sync"}};
};
template <>
struct EnumNames<CommPrecision> {
  static constexpr std::pair<CommPrecision, const char*> values[] = {
      {CommPrecision::fp32, "fp32"}, {CommPrecision::fp16, "fp16"}, {CommPrecision::bf16, "bf16"}};
};

template <>
struct EnumNames<AllocatorKind> {
  static constexpr std::pair<AllocatorKind, const char*> values[] = {{AllocatorKind::caching, "caching"},
                                                                     {AllocatorKind::expandable, "expandable"},
                                                                     {AllocatorKind::direct, "direct"},
                                                                     {AllocatorKind::cuda_async, "cuda_async"}};
};

template <class E>
const char* enum_name(E e) {
  for (const auto& [v, n] : EnumNames<E>::values) {
    if (v == e) return n;
  }
  return "?";
}

/// `where` is the full message prefix ("file.json: /pointer" or "--flag").
template <class E>
E enum_from_string(const std::string& s, const std::string& where) {
  std::string accepted;
  for (const auto& [v, n] : EnumNames<E>::values) {
    if (s == n) return v;
    if (!accepted.empty()) accepted += ", ";
    accepted += n;
  }
  throw SpecError(fmt::format("{}: must be one of {}, got \"{}\"", where, accepted, s));
}

// ---- JSON pointers ------------------------------------------------------------------------

/// Appends one reference token (RFC 6901: "~" -> "~0", "/" -> "~1").
std::string ptr_key(const std::string& base, std::string_view key) {
  std::string out = base;
  out += '/';
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}
std::string ptr_idx(const std::string& base, size_t i) { return fmt::format("{}/{}", base, i); }
/// The root pointer is "" in RFC 6901; messages show it as "/" so they stay readable.
const char* shown(const std::string& ptr) { return ptr.empty() ? "/" : ptr.c_str(); }

// ---- checks shared by parse_workload and validate -----------------------------------------

class Checker {
 public:
  explicit Checker(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string& ptr, const std::string& reason) const {
    throw SpecError(fmt::format("{}: {}: {}", origin_, shown(ptr), reason));
  }
  std::string where(const std::string& ptr) const {
    return fmt::format("{}: {}", origin_, shown(ptr));
  }

  template <class T>
  T gt0(const std::string& ptr, T v) const {
    if (!(v > 0)) fail(ptr, fmt::format("must be > 0, got {}", v));
    return v;
  }
  template <class T>
  T ge0(const std::string& ptr, T v) const {
    if (!(v >= 0)) fail(ptr, fmt::format("must be >= 0, got {}", v));
    return v;
  }
  template <class T>
  T ge(const std::string& ptr, T v, T lo) const {
    if (!(v >= lo)) fail(ptr, fmt::format("must be >= {}, got {}", lo, v));
    return v;
  }
  /// 0 < v <= hi ("must be > 0" below, "must be <= hi" above)
  template <class T>
  T gt0_max(const std::string& ptr, T v, T hi) const {
    gt0(ptr, v);
    if (!(v <= hi)) fail(ptr, fmt::format("must be <= {}, got {}", hi, v));
    return v;
  }
  /// 0 <= v <= hi
  template <class T>
  T ge0_max(const std::string& ptr, T v, T hi) const {
    ge0(ptr, v);
    if (!(v <= hi)) fail(ptr, fmt::format("must be <= {}, got {}", hi, v));
    return v;
  }
  /// lo <= v <= hi
  template <class T>
  T closed(const std::string& ptr, T v, T lo, T hi) const {
    if (!(v >= lo && v <= hi)) fail(ptr, fmt::format("must be in [{}, {}], got {}", lo, hi, v));
    return v;
  }
  /// lo <= v < hi
  template <class T>
  T half_open(const std::string& ptr, T v, T lo, T hi, std::string_view note = {}) const {
    if (!(v >= lo && v < hi)) {
      fail(ptr, fmt::format("must be in [{}, {}), got {}{}", lo, hi, v, note));
    }
    return v;
  }
  /// For fields stored as int: the lower bound was checked by the caller.
  int narrow(const std::string& ptr, int64_t v) const {
    if (v > INT_MAX) fail(ptr, fmt::format("must be <= {}, got {}", INT_MAX, v));
    if (v < INT_MIN) fail(ptr, fmt::format("must be >= {}, got {}", INT_MIN, v));
    return static_cast<int>(v);
  }

 private:
  std::string origin_;
};

void validate_impl(const WorkloadSpec& s, const Checker& c) {
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
  std::vector<int> user(s.features.size(), -1);
  for (size_t t = 0; t < s.tables.size(); ++t) {
    const TableSpec& tb = s.tables[t];
    for (size_t k = 0; k < tb.feature_names.size(); ++k) {
      const std::string p = ptr_idx(ptr_idx("/tables", t) + "/feature_names", k);
      auto it = feature_idx.find(tb.feature_names[k]);
      if (it == feature_idx.end()) {
        c.fail(p, fmt::format("no feature named \"{}\"", tb.feature_names[k]));
      }
      int& u = user[it->second];
      if (u >= 0) {
        c.fail(p, fmt::format("feature \"{}\" is already used by table \"{}\"",
                              tb.feature_names[k], s.tables[static_cast<size_t>(u)].name));
      }
      u = static_cast<int>(t);
    }
  }
  for (size_t f = 0; f < s.features.size(); ++f) {
    if (user[f] < 0) {
      c.fail(ptr_idx("/features", f),
             fmt::format("feature \"{}\" is not used by any table", s.features[f].name));
    }
  }

  c.gt0_max("/batch_size", s.batch_size, kMaxBatchSize);
  c.gt0_max("/steps", s.steps, kMaxSteps);
  c.ge0_max("/warmup_steps", s.warmup_steps, kMaxSteps);

  c.closed("/devices/count", s.devices.count, 1, kMaxDevices);
  c.gt0_max("/devices/memory_bytes", s.devices.memory_bytes, kMaxMemoryBytes);

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
      if (ts.type != ShardingType::table_row_wise) {
        c.fail(p + "/node", fmt::format("only allowed for table_row_wise, not {}", type));
      }
      c.half_open(p + "/node", ts.node, 0, nodes,
                  fmt::format(" ({} node(s) of local_world_size {})", nodes, lws));
    }
  }

  c.closed("/collective_timeout_ms", s.collective_timeout_ms, kMinCollectiveTimeoutMs, kMaxCollectiveTimeoutMs);
  if (s.memory.max_split_size != 0 && (s.memory.max_split_size < kLargeBuffer || s.memory.max_split_size > kMaxMemoryBytes))
    c.fail("/memory/max_split_size", fmt::format("must be 0 (unlimited) or in [{}, {}], got {}", kLargeBuffer,
                                                  kMaxMemoryBytes, s.memory.max_split_size));
  c.ge0_max("/memory/compaction", s.memory.compaction, kMaxSteps);
  if (s.dense) c.gt0_max("/dense/bucket_cap_bytes", s.dense->bucket_cap_bytes, kMaxMemoryBytes);
  for (const auto& [name, link] : {std::pair{"intra_node", &s.network.intra_node}, {"inter_node", &s.network.inter_node}}) {
    const std::string p = ptr_key("/network", name);
    if (link->bandwidth_bytes_per_s != 0)
      c.gt0_max(p + "/bandwidth_bytes_per_s", link->bandwidth_bytes_per_s, kMaxBandwidthBytesPerS);
    c.ge0_max(p + "/latency_ns", link->latency_ns, kMaxLatencyNs);
  }
  if (s.memory.allocator == AllocatorKind::cuda_async && s.devices.backend == Backend::cpu)
    c.fail("/memory/allocator", "cuda_async (cudaMallocAsync pools) needs devices.backend cuda, got cpu");
  if (s.devices.backend == Backend::cuda) {
    // What the cuda executor does not run yet (README: GPU path): refused here, never a fallback.
    constexpr const char* kNotYet = "not supported on the cuda backend yet";
    if (s.pipeline != PipelineKind::base)
      c.fail("/pipeline", fmt::format("{} is {} (base only)", enum_name(s.pipeline), kNotYet));
    if (s.qcomms.forward_precision != CommPrecision::fp32)
      c.fail("/qcomms/forward_precision", fmt::format("{} is {} (fp32 only)", enum_name(s.qcomms.forward_precision), kNotYet));
    if (s.qcomms.backward_precision != CommPrecision::fp32)
      c.fail("/qcomms/backward_precision", fmt::format("{} is {} (fp32 only)", enum_name(s.qcomms.backward_precision), kNotYet));
    if (s.network.limited()) c.fail("/network", fmt::format("network emulation is {}", kNotYet));
    if (s.memory.compaction > 0) c.fail("/memory/compaction", fmt::format("compaction is {}", kNotYet));
  }
}

// ---- JSON readers ---------------------------------------------------------------------------

/// Reads JSON values with type checks; every error names the pointer.
class Reader : public Checker {
 public:
  using Checker::Checker;

  [[noreturn]] void type_error(const json& v, const std::string& ptr, const char* expected) const {
    fail(ptr, fmt::format("must be {}, got {}", expected, v.type_name()));
  }

  /// Checks that `v` is an object whose keys are all in `allowed`.
  void object(const json& v, const std::string& ptr,
              std::initializer_list<std::string_view> allowed) const {
    if (!v.is_object()) type_error(v, ptr, "an object");
    for (const auto& [key, value] : v.items()) {
      bool ok = false;
      for (std::string_view a : allowed) ok = ok || key == a;
      if (!ok) fail(ptr_key(ptr, key), "unknown key");
    }
  }
  /// The member `key` of object `obj`, or throws "required".
  const json& required(const json& obj, const std::string& ptr, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail(ptr_key(ptr, key), "required");
    return *it;
  }
  static const json* optional(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  std::string string(const json& v, const std::string& ptr) const {
    if (!v.is_string()) type_error(v, ptr, "a string");
    return v.get<std::string>();
  }
  bool boolean(const json& v, const std::string& ptr) const {
    if (!v.is_boolean()) type_error(v, ptr, "a boolean");
    return v.get<bool>();
  }
  double number(const json& v, const std::string& ptr) const {
    if (!v.is_number()) type_error(v, ptr, "a number");
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(ptr, fmt::format("must be a finite number, got {}", d));
    return d;
  }
  /// An integer; integral floats such as 1e6 are accepted.
  int64_t integer(const json& v, const std::string& ptr) const {
    if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(ptr, fmt::format("must be <= {}, got {}", std::numeric_limits<int64_t>::max(), u));
      }
      return static_cast<int64_t>(u);
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!std::isfinite(d) || d != std::floor(d)) {
        fail(ptr, fmt::format("must be an integer, got {}", d));
      }
      // 2^63 is exactly representable; everything below it converts exactly.
      if (d >= 9223372036854775808.0) {
        fail(ptr, fmt::format("must be <= {}, got {}", std::numeric_limits<int64_t>::max(), d));
      }
      if (d < -9223372036854775808.0) {
        fail(ptr, fmt::format("must be >= {}, got {}", std::numeric_limits<int64_t>::min(), d));
      }
      return static_cast<int64_t>(d);
    }
    type_error(v, ptr, "an integer");
  }
  uint64_t unsigned_integer(const json& v, const std::string& ptr) const {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!std::isfinite(d) || d != std::floor(d)) {
        fail(ptr, fmt::format("must be an integer, got {}", d));
      }
      ge0(ptr, d);
      if (d >= 18446744073709551616.0) {
        fail(ptr, fmt::format("must be <= {}, got {}", std::numeric_limits<uint64_t>::max(), d));
      }
      return static_cast<uint64_t>(d);
    }
    if (v.is_number_integer()) return static_cast<uint64_t>(ge0(ptr, v.get<int64_t>()));
    type_error(v, ptr, "an integer");
  }
  /// An int field whose lower bound is >= 0: checks `>= 0` (or `> 0`) before narrowing so that
  /// out-of-range values get the field's own message.
  int small_nonneg(const json& v, const std::string& ptr) const {
    return narrow(ptr, ge0(ptr, integer(v, ptr)));
  }
  int small_positive(const json& v, const std::string& ptr) const {
    return narrow(ptr, gt0(ptr, integer(v, ptr)));
  }
  const json& array(const json& v, const std::string& ptr) const {
    if (!v.is_array()) type_error(v, ptr, "an array");
    return v;
  }
  std::vector<int> widths(const json& v, const std::string& ptr) const {
    std::vector<int> out;
    array(v, ptr);
    for (size_t k = 0; k < v.size(); ++k) out.push_back(small_positive(v[k], ptr_idx(ptr, k)));
    return out;
  }
  template <class E>
  E enumeration(const json& v, const std::string& ptr) const {
    return enum_from_string<E>(string(v, ptr), where(ptr));
  }
};

PoolingFactor read_pooling_factor(const Reader& r, const json& v, const std::string& p) {
  PoolingFactor pf;
  if (v.is_number()) {
    // A plain number: every bag has exactly that many ids.
    const double d = r.number(v, p);
    if (d != std::floor(d)) {
      r.fail(p, fmt::format("a fixed pooling factor must be an integer (use {{\"mean\": {}, "
                            "\"max\": N}} for bags of varying length), got {}",
                            d, d));
    }
    pf.fixed = true;
    pf.max = r.ge0(p, r.integer(v, p));
    pf.mean = static_cast<double>(pf.max);
  } else if (v.is_object()) {
    r.object(v, p, {"mean", "max"});
    pf.fixed = false;
    pf.mean = r.ge0(p + "/mean", r.number(r.required(v, p, "mean"), p + "/mean"));
    pf.max = r.ge0(p + "/max", r.integer(r.required(v, p, "max"), p + "/max"));
  } else {
    r.type_error(v, p, "a number or an object {\"mean\", \"max\"}");
  }
  return pf;
}

IdDistribution read_ids(const Reader& r, const json& v, const std::string& p) {
  IdDistribution ids;
  if (v.is_string()) {
    ids.kind = r.enumeration<IdDistributionKind>(v, p);
  } else if (v.is_object()) {
    r.object(v, p, {"distribution", "alpha", "permute", "permute_seed"});
    ids.kind = r.enumeration<IdDistributionKind>(r.required(v, p, "distribution"),
                                                 p + "/distribution");
    if (auto* a = Reader::optional(v, "alpha")) ids.alpha = r.gt0(p + "/alpha", r.number(*a, p + "/alpha"));
    if (auto* a = Reader::optional(v, "permute")) ids.permute = r.boolean(*a, p + "/permute");
    if (auto* a = Reader::optional(v, "permute_seed")) {
      ids.permute_seed = r.unsigned_integer(*a, p + "/permute_seed");
    }
  } else {
    r.type_error(v, p, "a string or an object");
  }
  return ids;
}

TableSpec read_table(const Reader& r, const json& v, const std::string& p) {
  r.object(v, p, {"name", "num_embeddings", "embedding_dim", "pooling", "feature_names"});
  TableSpec t;
  t.name = r.string(r.required(v, p, "name"), p + "/name");
  t.num_embeddings = r.integer(r.required(v, p, "num_embeddings"), p + "/num_embeddings");
  t.embedding_dim = r.integer(r.required(v, p, "embedding_dim"), p + "/embedding_dim");
  if (auto* a = Reader::optional(v, "pooling")) t.pooling = r.enumeration<Pooling>(*a, p + "/pooling");
  const std::string fp = p + "/feature_names";
  const json& fn = r.array(r.required(v, p, "feature_names"), fp);
  for (size_t k = 0; k < fn.size(); ++k) {
    const std::string name = r.string(fn[k], ptr_idx(fp, k));
    if (name.empty()) r.fail(ptr_idx(fp, k), "must not be empty");
    t.feature_names.push_back(name);
  }
  return t;
}

FeatureSpec read_feature(const Reader& r, const json& v, const std::string& p) {
  r.object(v, p, {"name", "pooling_factor", "ids"});
  FeatureSpec f;
  f.name = r.string(r.required(v, p, "name"), p + "/name");
  if (auto* a = Reader::optional(v, "pooling_factor")) {
    f.pooling_factor = read_pooling_factor(r, *a, p + "/pooling_factor");
  }
  if (auto* a = Reader::optional(v, "ids")) f.ids = read_ids(r, *a, p + "/ids");
  return f;
}

DenseSpec read_dense(const Reader& r, const json& v) {
  const std::string p = "/dense";
  r.object(v, p, {"num_dense_features", "bottom_mlp", "interaction", "top_mlp", "dcn", "bucket_cap_bytes"});
  DenseSpec d;
  if (auto* a = Reader::optional(v, "num_dense_features")) {
    d.num_dense_features = r.small_positive(*a, p + "/num_dense_features");
  }
  d.bottom_mlp = r.widths(r.required(v, p, "bottom_mlp"), p + "/bottom_mlp");
  if (auto* a = Reader::optional(v, "interaction")) {
    d.interaction = r.enumeration<Interaction>(*a, p + "/interaction");
  }
  d.top_mlp = r.widths(r.required(v, p, "top_mlp"), p + "/top_mlp");
  if (auto* a = Reader::optional(v, "bucket_cap_bytes")) {
    d.bucket_cap_bytes = r.gt0(p + "/bucket_cap_bytes", r.integer(*a, p + "/bucket_cap_bytes"));
  }
  if (auto* a = Reader::optional(v, "dcn")) {
    if (d.interaction != Interaction::dcn) {
      r.fail(p + "/dcn", fmt::format("only allowed when interaction is \"dcn\", not \"{}\"",
                                     enum_name(d.interaction)));
    }
    const std::string dp = p + "/dcn";
    r.object(*a, dp, {"num_layers", "low_rank_dim"});
    if (auto* b = Reader::optional(*a, "num_layers")) {
      d.dcn_num_layers = r.narrow(dp + "/num_layers",
                                  r.ge<int64_t>(dp + "/num_layers", r.integer(*b, dp + "/num_layers"), 1));
    }
    if (auto* b = Reader::optional(*a, "low_rank_dim")) {
      d.dcn_low_rank_dim = r.narrow(
          dp + "/low_rank_dim", r.ge<int64_t>(dp + "/low_rank_dim", r.integer(*b, dp + "/low_rank_dim"), 1));
    }
  }
  return d;
}

ShardingSpec read_sharding(const Reader& r, const json& v) {
  const std::string p = "/sharding";
  r.object(v, p, {"default", "local_world_size", "tables"});
  ShardingSpec sh;
  if (auto* a = Reader::optional(v, "default")) {
    sh.default_type = sharding_type_from_string(r.string(*a, p + "/default"), r.where(p + "/default"));
  }
  if (auto* a = Reader::optional(v, "local_world_size")) {
    sh.local_world_size = r.small_nonneg(*a, p + "/local_world_size");
  }
  if (auto* a = Reader::optional(v, "tables")) {
    const std::string tp = p + "/tables";
    if (!a->is_object()) r.type_error(*a, tp, "an object");
    for (const auto& [tname, entry] : a->items()) {
      const std::string ep = ptr_key(tp, tname);
      r.object(entry, ep, {"type", "ranks", "node"});
      TableSharding ts;
      ts.type = sharding_type_from_string(r.string(r.required(entry, ep, "type"), ep + "/type"),
                                          r.where(ep + "/type"));
      const char* type = enum_name(ts.type);
      if (auto* rk = Reader::optional(entry, "ranks")) {
        const std::string rp = ep + "/ranks";
        // An absent "ranks" lets the planner choose; a present one must be usable.
        if (ts.type != ShardingType::table_wise && ts.type != ShardingType::column_wise) {
          r.fail(rp, fmt::format("not allowed for {}", type));
        }
        r.array(*rk, rp);
        if (rk->empty()) {
          r.fail(rp, ts.type == ShardingType::table_wise
                         ? std::string("table_wise takes exactly 1 rank, got 0")
                         : std::string("column_wise takes at least 1 rank, got 0"));
        }
        for (size_t k = 0; k < rk->size(); ++k) {
          ts.ranks.push_back(r.small_nonneg((*rk)[k], ptr_idx(rp, k)));
        }
      }
      if (auto* nd = Reader::optional(entry, "node")) {
        if (ts.type != ShardingType::table_row_wise) {
          r.fail(ep + "/node", fmt::format("only allowed for table_row_wise, not {}", type));
        }
        ts.node = r.small_nonneg(*nd, ep + "/node");
      }
      sh.per_table.emplace(tname, std::move(ts));
    }
  }
  return sh;
}

/// Parses JSON text; syntax errors become SpecError "<origin>: line L, column C: <message>".
json parse_text(const std::string& text, const std::string& origin) {
  // JSON allows a key twice in one object and nlohmann keeps the last; a workload that says
  // two things about one setting is a mistake, so it is refused, naming the key and its object.
  std::vector<std::pair<std::string, std::set<std::string>>> objects;  // (key of the object, keys seen)
  std::string last_key = "/";
  const json::parser_callback_t no_duplicates = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      objects.emplace_back(last_key, std::set<std::string>{});
    } else if (event == json::parse_event_t::object_end) {
      if (!objects.empty()) objects.pop_back();
    } else if (event == json::parse_event_t::key) {
      last_key = parsed.get<std::string>();
      if (!objects.empty() && !objects.back().second.insert(last_key).second)
        throw SpecError(fmt::format("{}: key \"{}\" appears twice in the same object (in \"{}\")", origin, last_key,
                                    objects.back().first));
    }
    return true;
  };
  try {
    return json::parse(text, no_duplicates);
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based count of characters read; the offending one is at index byte - 1
    // (index text.size() when the input ended early).
    const size_t idx = e.byte == 0 ? 0 : static_cast<size_t>(e.byte - 1);
    const size_t end = std::min(idx, text.size());
    size_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    const size_t column = idx - line_start + 1;
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: ".
    std::string msg = e.what();
    if (auto pos = msg.find("] "); pos != std::string::npos) msg = msg.substr(pos + 2);
    if (msg.rfind("parse error", 0) == 0) {
      if (auto pos = msg.find(": "); pos != std::string::npos) msg = msg.substr(pos + 2);
    }
    throw SpecError(fmt::format("{}: line {}, column {}: {}", origin, line, column, msg));
  } catch (const json::exception& e) {  // e.g. out_of_range 406: a number that overflows a double
    std::string msg = e.what();
    if (auto pos = msg.find("] "); pos != std::string::npos) msg = msg.substr(pos + 2);
    throw SpecError(fmt::format("{}: {}", origin, msg));
  }
}

}  // namespace

// ---- public API -----------------------------------------------------------------------------

const char* to_string(Pooling p) { return enum_name(p); }
const char* to_string(ShardingType s) { return enum_name(s); }
const char* to_string(OptimizerType o) { return enum_name(o); }
const char* to_string(IdDistributionKind k) { return enum_name(k); }
const char* to_string(InvalidIdPolicy p) { return enum_name(p); }
const char* to_string(Backend b) { return enum_name(b); }
const char* to_string(Interaction i) { return enum_name(i); }
const char* to_string(PipelineKind p) { return enum_name(p); }
const char* to_string(CommPrecision p) { return enum_name(p); }
PipelineKind pipeline_from_string(const std::string& s, const std::string& where) {
  return enum_from_string<PipelineKind>(s, where);
}

ShardingType sharding_type_from_string(const std::string& s, const std::string& where) {
  return enum_from_string<ShardingType>(s, where);
}

int WorkloadSpec::table_of_feature(size_t f) const {
  if (f >= features.size()) return -1;
  const std::string& name = features[f].name;
  for (size_t t = 0; t < tables.size(); ++t) {
    for (const std::string& n : tables[t].feature_names) {
      if (n == name) return static_cast<int>(t);
    }
  }
  return -1;
}

int WorkloadSpec::feature_index(const std::string& name) const {
  for (size_t f = 0; f < features.size(); ++f) {
    if (features[f].name == name) return static_cast<int>(f);
  }
  return -1;
}

WorkloadSpec parse_workload(const json& j, const std::string& origin) {
  const Reader r(origin);
  r.object(j, "", {"name", "description", "source", "tables", "features", "batch_size", "steps",
                   "warmup_steps", "seed", "devices", "optimizer", "dense", "sharding",
                   "invalid_ids", "collective_timeout_ms", "memory", "pipeline", "qcomms", "network"});
  WorkloadSpec s;
  s.name = "workload";
  if (auto* a = Reader::optional(j, "name")) s.name = r.string(*a, "/name");
  if (auto* a = Reader::optional(j, "description")) s.description = r.string(*a, "/description");
  if (auto* a = Reader::optional(j, "source")) s.source = r.string(*a, "/source");

  const json& tables = r.array(r.required(j, "", "tables"), "/tables");
  if (tables.empty()) r.fail("/tables", "must not be empty");
  for (size_t t = 0; t < tables.size(); ++t) {
    s.tables.push_back(read_table(r, tables[t], ptr_idx("/tables", t)));
  }
  if (auto* a = Reader::optional(j, "features")) {
    r.array(*a, "/features");
    for (size_t f = 0; f < a->size(); ++f) {
      s.features.push_back(read_feature(r, (*a)[f], ptr_idx("/features", f)));
    }
  }
  // Table features without an entry get the default FeatureSpec, in table order.
  for (const TableSpec& t : s.tables) {
    for (const std::string& n : t.feature_names) {
      if (s.feature_index(n) < 0) {
        FeatureSpec f;
        f.name = n;
        s.features.push_back(std::move(f));
      }
    }
  }

  s.batch_size = r.integer(r.required(j, "", "batch_size"), "/batch_size");
  if (auto* a = Reader::optional(j, "steps")) s.steps = r.integer(*a, "/steps");
  if (auto* a = Reader::optional(j, "warmup_steps")) s.warmup_steps = r.integer(*a, "/warmup_steps");
  if (auto* a = Reader::optional(j, "seed")) s.seed = r.unsigned_integer(*a, "/seed");

  s.devices.memory_bytes = kDefaultMemoryBytes;
  if (auto* a = Reader::optional(j, "devices")) {
    r.object(*a, "/devices", {"count", "backend", "memory_bytes"});
    if (auto* b = Reader::optional(*a, "count")) {
      s.devices.count = r.narrow("/devices/count", r.closed<int64_t>("/devices/count",
                                                                     r.integer(*b, "/devices/count"),
                                                                     1, kMaxDevices));
    }
    if (auto* b = Reader::optional(*a, "backend")) {
      s.devices.backend = r.enumeration<Backend>(*b, "/devices/backend");
    }
    if (auto* b = Reader::optional(*a, "memory_bytes")) {
      s.devices.memory_bytes = r.integer(*b, "/devices/memory_bytes");
    }
  }

  if (auto* a = Reader::optional(j, "optimizer")) {
    const std::string p = "/optimizer";
    r.object(*a, p, {"type", "learning_rate", "eps", "beta1", "beta2", "dense_learning_rate"});
    OptimizerSpec& o = s.optimizer;
    if (auto* b = Reader::optional(*a, "type")) o.type = r.enumeration<OptimizerType>(*b, p + "/type");
    if (auto* b = Reader::optional(*a, "learning_rate")) o.learning_rate = r.number(*b, p + "/learning_rate");
    if (auto* b = Reader::optional(*a, "eps")) o.eps = r.number(*b, p + "/eps");
    if (auto* b = Reader::optional(*a, "beta1")) o.beta1 = r.number(*b, p + "/beta1");
    if (auto* b = Reader::optional(*a, "beta2")) o.beta2 = r.number(*b, p + "/beta2");
    if (auto* b = Reader::optional(*a, "dense_learning_rate")) {
      o.dense_learning_rate = r.gt0(p + "/dense_learning_rate", r.number(*b, p + "/dense_learning_rate"));
    }
  }
  // Resolved here so that consumers never see the "same as learning_rate" sentinel.
  if (s.optimizer.dense_learning_rate == -1.0) {
    s.optimizer.dense_learning_rate = s.optimizer.learning_rate;
  }

  if (auto* a = Reader::optional(j, "dense"); a && !a->is_null()) s.dense = read_dense(r, *a);
  if (auto* a = Reader::optional(j, "sharding")) s.sharding = read_sharding(r, *a);
  if (auto* a = Reader::optional(j, "invalid_ids")) {
    s.invalid_ids = r.enumeration<InvalidIdPolicy>(*a, "/invalid_ids");
  }
  if (auto* a = Reader::optional(j, "collective_timeout_ms")) {
    s.collective_timeout_ms = r.integer(*a, "/collective_timeout_ms");
  }
  if (auto* a = Reader::optional(j, "memory")) {
    r.object(*a, "/memory", {"allocator", "max_split_size", "compaction"});
    if (auto* b = Reader::optional(*a, "allocator")) s.memory.allocator = r.enumeration<AllocatorKind>(*b, "/memory/allocator");
    if (auto* b = Reader::optional(*a, "max_split_size")) s.memory.max_split_size = r.integer(*b, "/memory/max_split_size");
    if (auto* b = Reader::optional(*a, "compaction")) s.memory.compaction = r.integer(*b, "/memory/compaction");
  }
  if (auto* a = Reader::optional(j, "pipeline")) s.pipeline = r.enumeration<PipelineKind>(*a, "/pipeline");
  if (auto* a = Reader::optional(j, "qcomms")) {
    r.object(*a, "/qcomms", {"forward_precision", "backward_precision"});
    if (auto* b = Reader::optional(*a, "forward_precision"))
      s.qcomms.forward_precision = r.enumeration<CommPrecision>(*b, "/qcomms/forward_precision");
    if (auto* b = Reader::optional(*a, "backward_precision"))
      s.qcomms.backward_precision = r.enumeration<CommPrecision>(*b, "/qcomms/backward_precision");
  }
  if (auto* a = Reader::optional(j, "network")) {
    r.object(*a, "/network", {"intra_node", "inter_node"});
    for (const auto& [name, link] : {std::pair{"intra_node", &s.network.intra_node}, {"inter_node", &s.network.inter_node}}) {
      const json* b = Reader::optional(*a, name);
      if (!b) continue;
      const std::string p = ptr_key("/network", name);
      r.object(*b, p, {"bandwidth_bytes_per_s", "latency_ns"});
      if (auto* c = Reader::optional(*b, "bandwidth_bytes_per_s"))
        link->bandwidth_bytes_per_s = r.gt0(p + "/bandwidth_bytes_per_s", r.integer(*c, p + "/bandwidth_bytes_per_s"));
      if (auto* c = Reader::optional(*b, "latency_ns")) link->latency_ns = r.integer(*c, p + "/latency_ns");
    }
  }

  validate_impl(s, r);
  return s;
}

WorkloadSpec load_workload_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw SpecError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  std::string text;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxWorkloadFileBytes) {
      std::fclose(f);
      throw SpecError(fmt::format("{}: larger than {} MiB; not a workload file", path, kMaxWorkloadFileBytes >> 20));
    }
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw SpecError(fmt::format("{}: cannot read: {}", path, std::strerror(err)));

  const json j = parse_text(text, path);
  WorkloadSpec s = parse_workload(j, path);
  if (j.is_object() && !j.contains("name")) {
    const std::string stem = std::filesystem::path(path).stem().string();
    if (!stem.empty()) s.name = stem;
  }
  return s;
}

namespace detail {
// Used by presets.cpp (not part of the public header).
json parse_json_text(const std::string& text, const std::string& origin) {
  return parse_text(text, origin);
}
}  // namespace detail

json to_json(const WorkloadSpec& s) {
  json j;
  j["name"] = s.name;
  j["description"] = s.description;
  j["source"] = s.source;

  json tables = json::array();
  for (const TableSpec& t : s.tables) {
    tables.push_back({{"name", t.name},
                      {"num_embeddings", t.num_embeddings},
                      {"embedding_dim", t.embedding_dim},
                      {"pooling", to_string(t.pooling)},
                      {"feature_names", t.feature_names}});
  }
  j["tables"] = std::move(tables);

  json features = json::array();
  for (const FeatureSpec& f : s.features) {
    json pf;
    if (f.pooling_factor.fixed) {
      pf = f.pooling_factor.max;
    } else {
      pf = {{"mean", f.pooling_factor.mean}, {"max", f.pooling_factor.max}};
    }
    features.push_back({{"name", f.name},
                        {"pooling_factor", std::move(pf)},
                        {"ids",
                         {{"distribution", to_string(f.ids.kind)},
                          {"alpha", f.ids.alpha},
                          {"permute", f.ids.permute},
                          {"permute_seed", f.ids.permute_seed}}}});
  }
  j["features"] = std::move(features);

  j["batch_size"] = s.batch_size;
  j["steps"] = s.steps;
  j["warmup_steps"] = s.warmup_steps;
  j["seed"] = s.seed;
  j["devices"] = {{"count", s.devices.count},
                  {"backend", to_string(s.devices.backend)},
                  {"memory_bytes", s.devices.memory_bytes}};
  const OptimizerSpec& o = s.optimizer;
  j["optimizer"] = {{"type", to_string(o.type)}, {"learning_rate", o.learning_rate},
                    {"eps", o.eps},              {"beta1", o.beta1},
                    {"beta2", o.beta2}};
  if (o.dense_learning_rate != -1.0) j["optimizer"]["dense_learning_rate"] = o.dense_learning_rate;

  if (s.dense) {
    const DenseSpec& d = *s.dense;
    j["dense"] = {{"num_dense_features", d.num_dense_features},
                  {"bottom_mlp", d.bottom_mlp},
                  {"interaction", to_string(d.interaction)},
                  {"top_mlp", d.top_mlp},
                  {"bucket_cap_bytes", d.bucket_cap_bytes}};
    if (d.interaction == Interaction::dcn) {
      j["dense"]["dcn"] = {{"num_layers", d.dcn_num_layers}, {"low_rank_dim", d.dcn_low_rank_dim}};
    }
  } else {
    j["dense"] = nullptr;
  }

  json per_table = json::object();
  for (const auto& [name, ts] : s.sharding.per_table) {
    json e = {{"type", to_string(ts.type)}};
    if (!ts.ranks.empty()) e["ranks"] = ts.ranks;
    if (ts.node != -1) e["node"] = ts.node;
    per_table[name] = std::move(e);
  }
  j["sharding"] = {{"default", to_string(s.sharding.default_type)},
                   {"local_world_size", s.sharding.local_world_size},
                   {"tables", std::move(per_table)}};
  j["invalid_ids"] = to_string(s.invalid_ids);
  j["collective_timeout_ms"] = s.collective_timeout_ms;
  j["memory"] = {{"allocator", enum_name(s.memory.allocator)},
                 {"max_split_size", s.memory.max_split_size},
                 {"compaction", s.memory.compaction}};
  j["pipeline"] = enum_name(s.pipeline);
  j["qcomms"] = {{"forward_precision", enum_name(s.qcomms.forward_precision)},
                 {"backward_precision", enum_name(s.qcomms.backward_precision)}};
  j["network"] = json::object();
  for (const auto& [name, link] : {std::pair{"intra_node", &s.network.intra_node}, {"inter_node", &s.network.inter_node}}) {
    if (!link->limited()) continue;  // absent = unlimited
    json l = json::object();
    if (link->bandwidth_bytes_per_s > 0) l["bandwidth_bytes_per_s"] = link->bandwidth_bytes_per_s;
    l["latency_ns"] = link->latency_ns;
    j["network"][name] = std::move(l);
  }
  return j;
}

void validate(const WorkloadSpec& spec, const std::string& origin) {
  validate_impl(spec, Checker(origin));
}

}  // namespace embedscope::engine
