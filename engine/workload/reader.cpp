// WorkloadSpec from JSON: parse_workload() checks shape (types, unknown and required keys, enum
// spellings, the number-or-object forms) while it builds the typed spec, then runs the
// validator (validate.cpp), which checks every range and cross reference on the typed spec.
// Both report "<origin>: <pointer>: <reason>" with the same pointers, because the typed spec
// keeps the JSON order of tables and features (features that the JSON omits are appended after
// the listed ones).

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker.h"
#include "shared_tables.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {
namespace workload_detail {

using nlohmann::json;

namespace {

constexpr int64_t kDefaultMemoryBytes = int64_t{8} << 30;  // 8 GiB

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
  r.object(v, p,
           {"name", "num_embeddings", "embedding_dim", "pooling", "feature_names", "data_type", "hash_size",
            "optimizer_state_type", "low_rank_dim", "shared_with", "stochastic_rounding", "placement",
            "cache_load_factor", "cache_policy", "prefetch_pipeline"});
  TableSpec t;
  t.name = r.string(r.required(v, p, "name"), p + "/name");
  t.num_embeddings = r.integer(r.required(v, p, "num_embeddings"), p + "/num_embeddings");
  t.embedding_dim = r.integer(r.required(v, p, "embedding_dim"), p + "/embedding_dim");
  if (auto* a = Reader::optional(v, "pooling")) t.pooling = r.enumeration<Pooling>(*a, p + "/pooling");
  if (auto* a = Reader::optional(v, "data_type")) t.data_type = r.enumeration<TableDataType>(*a, p + "/data_type");
  if (auto* a = Reader::optional(v, "stochastic_rounding")) t.stochastic_rounding = r.boolean(*a, p + "/stochastic_rounding");
  if (auto* a = Reader::optional(v, "optimizer_state_type"))
    t.optimizer_state_type = r.enumeration<OptimizerStateType>(*a, p + "/optimizer_state_type");
  if (auto* a = Reader::optional(v, "placement")) t.placement = r.enumeration<TablePlacement>(*a, p + "/placement");
  // the cache's settings belong to a cached table: given for another they would be silently unused
  for (const char* key : {"cache_load_factor", "cache_policy", "prefetch_pipeline"})
    if (Reader::optional(v, key) && t.placement != TablePlacement::host_cached)
      r.fail(p + "/" + key, fmt::format("only allowed with placement \"host_cached\", not \"{}\"", enum_name(t.placement)));
  if (auto* a = Reader::optional(v, "cache_load_factor")) t.cache_load_factor = r.number(*a, p + "/cache_load_factor");
  if (auto* a = Reader::optional(v, "cache_policy")) t.cache_policy = r.enumeration<CachePolicy>(*a, p + "/cache_policy");
  if (auto* a = Reader::optional(v, "prefetch_pipeline")) t.prefetch_pipeline = r.boolean(*a, p + "/prefetch_pipeline");
  if (auto* a = Reader::optional(v, "low_rank_dim")) {
    t.low_rank_dim = r.integer(*a, p + "/low_rank_dim");
    // 0 in the typed spec means "a full table": given explicitly it is an error, not the default
    if (t.low_rank_dim == 0)
      r.fail(p + "/low_rank_dim", fmt::format("must be in [1, embedding_dim = {}), got 0 (leave it out for a full table)",
                                              t.embedding_dim));
  }
  if (auto* a = Reader::optional(v, "hash_size")) {
    // one message for every value out of range, with the bound that holds (validate.cpp's shape:
    // "must be in [1, num_embeddings = N], got V"); a value past int64 would otherwise name
    // int64's bound, not the table's (tester42 F15)
    const auto out_of_range = [&](const std::string& got, const char* why) {
      r.fail(p + "/hash_size", fmt::format("must be in [1, num_embeddings = {}], got {}{}", t.num_embeddings, got, why));
    };
    if (a->is_number_unsigned() && a->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      out_of_range(std::to_string(a->get<uint64_t>()), "");
    if (a->is_number_float() && std::isfinite(a->get<double>()) && a->get<double>() == std::floor(a->get<double>()) &&
        std::abs(a->get<double>()) >= 9223372036854775808.0)
      out_of_range(fmt::format("{:g}", a->get<double>()), "");
    t.hash_size = r.integer(*a, p + "/hash_size");
    // 0 in the typed spec means "no hashing": given explicitly it is an error, not the default
    if (t.hash_size == 0) out_of_range("0", " (leave it out for no hashing)");
  }
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
  r.object(v, p, {"num_dense_features", "bottom_mlp", "interaction", "top_mlp", "dcn", "bucket_cap_bytes", "precision"});
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
  if (auto* a = Reader::optional(v, "precision")) d.precision = r.enumeration<DensePrecision>(*a, p + "/precision");
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
      r.object(entry, ep, {"type", "ranks", "node", "hot_rows"});
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
        if (ts.type != ShardingType::table_row_wise && ts.type != ShardingType::table_column_wise) {
          r.fail(ep + "/node", fmt::format("only allowed for table_row_wise and table_column_wise, not {}", type));
        }
        ts.node = r.small_nonneg(*nd, ep + "/node");
      }
      if (auto* hr = Reader::optional(entry, "hot_rows")) {
        // row ids of the table (range, type and backend checked by validate); stored sorted
        const std::string hp = ep + "/hot_rows";
        if (hr->is_object()) {  // {"auto": true, "sample_steps": N}: chosen before the run
          r.object(*hr, hp, {"auto", "sample_steps"});
          const json& au = r.required(*hr, hp, "auto");
          if (!au.is_boolean()) r.type_error(au, hp + "/auto", "a boolean");
          if (!au.get<bool>())
            r.fail(hp + "/auto", "must be true (list the rows in an array instead, or leave hot_rows out)");
          ts.hot_rows_sample_steps =
              r.gt0(hp + "/sample_steps", r.integer(r.required(*hr, hp, "sample_steps"), hp + "/sample_steps"));
        } else {
        r.array(*hr, hp);
        std::map<int64_t, size_t> seen;  // row -> index of its first mention
        for (size_t k = 0; k < hr->size(); ++k) {
          const int64_t row = r.ge0(ptr_idx(hp, k), r.integer((*hr)[k], ptr_idx(hp, k)));
          if (auto [at, fresh] = seen.emplace(row, k); !fresh)
            r.fail(ptr_idx(hp, k), fmt::format("row {} is listed twice (also at {})", row, ptr_idx(hp, at->second)));
          ts.hot_rows.push_back(row);
        }
        std::sort(ts.hot_rows.begin(), ts.hot_rows.end());
        }
      }
      sh.per_table.emplace(tname, std::move(ts));
    }
  }
  return sh;
}

InputSpec read_input(const Reader& r, const json& v) {
  const std::string p = "/input";
  r.object(v, p, {"kind", "paths", "path", "malformed_lines", "on_short", "categorical"});
  InputSpec in;
  in.kind = r.enumeration<InputKind>(r.required(v, p, "kind"), p + "/kind");
  if (in.kind == InputKind::synthetic) {
    for (const char* key : {"paths", "path", "malformed_lines", "on_short", "categorical"})
      if (Reader::optional(v, key)) r.fail(ptr_key(p, key), "only allowed for a file source (kind criteo_tsv or kjt)");
    return in;
  }
  if (in.kind == InputKind::kjt) {
    for (const char* key : {"paths", "malformed_lines", "categorical"})
      if (Reader::optional(v, key)) r.fail(ptr_key(p, key), "not allowed for kind kjt (one \"path\"; ids are rows as recorded)");
    in.paths.push_back(r.string(r.required(v, p, "path"), p + "/path"));
    if (auto* a = Reader::optional(v, "on_short")) in.on_short = r.enumeration<ShortInputPolicy>(*a, p + "/on_short");
    return in;
  }
  if (Reader::optional(v, "path")) r.fail(p + "/path", "criteo_tsv takes \"paths\", an array");
  const json& paths = r.array(r.required(v, p, "paths"), p + "/paths");
  if (paths.empty()) r.fail(p + "/paths", "must not be empty");
  for (size_t k = 0; k < paths.size(); ++k) in.paths.push_back(r.string(paths[k], ptr_idx(p + "/paths", k)));
  if (auto* a = Reader::optional(v, "malformed_lines"))
    in.malformed_lines = r.enumeration<MalformedLinePolicy>(*a, p + "/malformed_lines");
  if (auto* a = Reader::optional(v, "on_short")) in.on_short = r.enumeration<ShortInputPolicy>(*a, p + "/on_short");
  if (auto* a = Reader::optional(v, "categorical"))
    in.categorical = r.enumeration<CategoricalMapping>(*a, p + "/categorical");
  return in;
}

}  // namespace
}  // namespace workload_detail

namespace detail {

/// Parses JSON text; syntax errors become SpecError "<origin>: line L, column C: <message>".
nlohmann::json parse_json_text(const std::string& text, const std::string& origin) {
  using nlohmann::json;
  // JSON allows a key twice in one object and nlohmann keeps the last; a workload that says
  // two things about one setting is a mistake, so it is refused, naming the key and its object.
  // A SAX pass checks the keys, then a plain parse builds the document: both linear (the
  // parser with a callback re-scans an array at the end of each of its objects, which is
  // quadratic in the number of tables).
  struct DuplicateKeys final : nlohmann::json_sax<json> {
    const std::string& origin;
    std::vector<std::pair<std::string, std::set<std::string>>> objects;  // (key of the object, keys seen)
    std::string last_key = "/";
    explicit DuplicateKeys(const std::string& o) : origin(o) {}
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override {
      objects.emplace_back(last_key, std::set<std::string>{});
      return true;
    }
    bool key(string_t& k) override {
      last_key = k;
      if (!objects.empty() && !objects.back().second.insert(last_key).second)
        throw SpecError(fmt::format("{}: key \"{}\" appears twice in the same object (in \"{}\")", origin, last_key,
                                    objects.back().first));
      return true;
    }
    bool end_object() override {
      if (!objects.empty()) objects.pop_back();
      return true;
    }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    // a syntax error: the plain parse below reports it, with its line and column
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
  };
  {
    DuplicateKeys check(origin);
    json::sax_parse(text, &check);
  }
  try {
    return json::parse(text);
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


}  // namespace detail

using nlohmann::json;
using namespace workload_detail;
using detail::parse_json_text;

WorkloadSpec parse_workload(const json& j, const std::string& origin) {
  const Reader r(origin);
  r.object(j, "", {"name", "description", "source", "tables", "features", "batch_size", "steps",
                   "warmup_steps", "seed", "devices", "optimizer", "dense", "sharding",
                   "invalid_ids", "collective_timeout_ms", "memory", "pipeline", "qcomms", "network", "input",
                   "rebalance"});
  WorkloadSpec s;
  s.name = "workload";
  if (auto* a = Reader::optional(j, "name")) s.name = r.string(*a, "/name");
  if (auto* a = Reader::optional(j, "description")) s.description = r.string(*a, "/description");
  if (auto* a = Reader::optional(j, "source")) s.source = r.string(*a, "/source");

  const json& tables = r.array(r.required(j, "", "tables"), "/tables");
  if (tables.empty()) r.fail("/tables", "must not be empty");
  std::vector<std::string> shared_with(tables.size());  // folded after validation (shared_tables.h)
  for (size_t t = 0; t < tables.size(); ++t) {
    s.tables.push_back(read_table(r, tables[t], ptr_idx("/tables", t)));
    s.tables.back().written_index = static_cast<int>(t);
    if (auto* a = Reader::optional(tables[t], "shared_with")) {
      shared_with[t] = r.string(*a, ptr_idx("/tables", t) + "/shared_with");
      if (shared_with[t].empty()) r.fail(ptr_idx("/tables", t) + "/shared_with", "must not be empty");
    }
  }
  if (auto* a = Reader::optional(j, "features")) {
    r.array(*a, "/features");
    for (size_t f = 0; f < a->size(); ++f) {
      s.features.push_back(read_feature(r, (*a)[f], ptr_idx("/features", f)));
    }
  }
  // Table features without an entry get the default FeatureSpec, in table order.
  {
    std::set<std::string> known;  // a set, not a scan per name: many tables stay O(n log n)
    for (const FeatureSpec& f : s.features) known.insert(f.name);
    for (const TableSpec& t : s.tables) {
      for (const std::string& n : t.feature_names) {
        if (known.insert(n).second) {
          FeatureSpec f;
          f.name = n;
          s.features.push_back(std::move(f));
        }
      }
    }
  }

  s.batch_size = r.integer(r.required(j, "", "batch_size"), "/batch_size");
  if (auto* a = Reader::optional(j, "steps")) s.steps = r.integer(*a, "/steps");
  if (auto* a = Reader::optional(j, "warmup_steps")) s.warmup_steps = r.integer(*a, "/warmup_steps");
  if (auto* a = Reader::optional(j, "seed")) s.seed = r.unsigned_integer(*a, "/seed");

  s.devices.memory_bytes = kDefaultMemoryBytes;
  if (auto* a = Reader::optional(j, "devices")) {
    r.object(*a, "/devices", {"count", "backend", "memory_bytes", "host_memory_bytes", "hardware", "ranks_per_gpu"});
    if (auto* b = Reader::optional(*a, "backend")) {
      s.devices.backend = r.enumeration<Backend>(*b, "/devices/backend");
    }
    if (auto* b = Reader::optional(*a, "count")) {
      const int max = s.devices.backend == Backend::simulated ? kMaxSimulatedDevices : kMaxDevices;
      s.devices.count = r.narrow("/devices/count", r.closed<int64_t>("/devices/count",
                                                                     r.integer(*b, "/devices/count"), 1, max));
    }
    if (auto* b = Reader::optional(*a, "hardware")) s.devices.hardware = r.string(*b, "/devices/hardware");
    if (auto* b = Reader::optional(*a, "memory_bytes")) {
      s.devices.memory_bytes = r.integer(*b, "/devices/memory_bytes");
    }
    if (auto* b = Reader::optional(*a, "host_memory_bytes"))
      s.devices.host_memory_bytes = r.integer(*b, "/devices/host_memory_bytes");
    if (auto* b = Reader::optional(*a, "ranks_per_gpu"))
      s.devices.ranks_per_gpu = r.narrow("/devices/ranks_per_gpu",
                                         r.closed<int64_t>("/devices/ranks_per_gpu", r.integer(*b, "/devices/ranks_per_gpu"),
                                                           0, kMaxDevices));
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
    r.object(*a, "/memory", {"allocator", "max_split_size", "compaction", "garbage_collection_threshold"});
    if (auto* b = Reader::optional(*a, "allocator")) s.memory.allocator = r.enumeration<AllocatorKind>(*b, "/memory/allocator");
    if (auto* b = Reader::optional(*a, "max_split_size")) s.memory.max_split_size = r.integer(*b, "/memory/max_split_size");
    if (auto* b = Reader::optional(*a, "compaction")) s.memory.compaction = r.integer(*b, "/memory/compaction");
    if (auto* b = Reader::optional(*a, "garbage_collection_threshold"))
      s.memory.garbage_collection_threshold = r.number(*b, "/memory/garbage_collection_threshold");
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
    // One rule and one message for the link fields whatever the JSON number's type (tester48
    // F14.1: 2^60 failed "must be <= 2^50", 1e30 "must be <= 2^63 - 1"): an integer value in
    // [lo, hi], 1e9 as 1000000000; "must be > 0" / ">= 0" below, "must be <= hi" above, "must be
    // an integer" for a fraction, "must be a number" for anything else.
    const auto link_field = [&r](const json& v, const std::string& ptr, int64_t lo, int64_t hi) -> int64_t {
      const auto below = [&](const std::string& got) {
        r.fail(ptr, fmt::format("{}, got {}", lo == 0 ? "must be >= 0" : "must be > 0", got));
      };
      if (!v.is_number()) r.fail(ptr, fmt::format("must be a number (an integer; 1e9 is accepted), got {}", v.type_name()));
      if (v.is_number_float()) {
        const double d = v.get<double>();
        if (!std::isfinite(d) || d != std::floor(d)) r.fail(ptr, fmt::format("must be an integer, got {}", d));
        const bool exact = std::fabs(d) < 9.2e18;  // shown as an integer when it is one
        const std::string got = exact ? fmt::format("{}", static_cast<int64_t>(d)) : fmt::format("{}", d);
        if (d > static_cast<double>(hi)) r.fail(ptr, fmt::format("must be <= {}, got {}", hi, got));
        if (d < static_cast<double>(lo)) below(got);
        return static_cast<int64_t>(d);
      }
      if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(hi)) r.fail(ptr, fmt::format("must be <= {}, got {}", hi, u));
        if (static_cast<int64_t>(u) < lo) below(fmt::format("{}", u));
        return static_cast<int64_t>(u);
      }
      const int64_t i = v.get<int64_t>();
      if (i > hi) r.fail(ptr, fmt::format("must be <= {}, got {}", hi, i));
      if (i < lo) below(fmt::format("{}", i));
      return i;
    };
    r.object(*a, "/network", {"intra_node", "inter_node"});
    for (const auto& [name, link] : {std::pair{"intra_node", &s.network.intra_node}, {"inter_node", &s.network.inter_node}}) {
      const json* b = Reader::optional(*a, name);
      if (!b) continue;
      const std::string p = ptr_key("/network", name);
      r.object(*b, p, {"bandwidth_bytes_per_s", "latency_ns"});
      if (auto* c = Reader::optional(*b, "bandwidth_bytes_per_s"))
        link->bandwidth_bytes_per_s = link_field(*c, p + "/bandwidth_bytes_per_s", 1, kMaxBandwidthBytesPerS);
      if (auto* c = Reader::optional(*b, "latency_ns")) link->latency_ns = link_field(*c, p + "/latency_ns", 0, kMaxLatencyNs);
    }
  }

  if (auto* a = Reader::optional(j, "input")) s.input = read_input(r, *a);
  if (auto* a = Reader::optional(j, "rebalance")) s.rebalance = read_rebalance(r, *a);

  validate_spec(s, r);
  fold_shared_tables(s, shared_with, r);
  return s;
}

namespace detail {
nlohmann::json read_json_file(const std::string& path, const char* what) {
  // a folder or an empty file is said as a session's is (SessionReader: "is a directory, not a
  // session file", "the file is empty (not a session)"), not as libc's read error or JSON's
  // "unexpected end of input" at line 1, column 1
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw SpecError(fmt::format("{}: is a directory, not a {}", path, what));
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
      throw SpecError(fmt::format("{}: larger than {} MiB; not a {}", path, kMaxWorkloadFileBytes >> 20, what));
    }
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw SpecError(fmt::format("{}: cannot read: {}", path, std::strerror(err)));
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw SpecError(text.empty() ? fmt::format("{}: the file is empty (not a {})", path, what)
                                 : fmt::format("{}: the file holds only blanks ({} bytes; not a {})", path, text.size(), what));
  // a binary file given for JSON (tester45 F12.10: `run --simulate s.db` answered "invalid
  // literal; last read: 'S'"): say what it is and what was expected
  if (text.rfind(std::string("SQLite format 3\0", 16), 0) == 0)
    throw SpecError(fmt::format("{}: an SQLite database (an embedscope session?), not a {} (JSON)", path, what));
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b)
    throw SpecError(fmt::format("{}: gzip data, not a {} (JSON)", path, what));
  return parse_json_text(text, path);
}
}  // namespace detail

WorkloadSpec load_workload_file(const std::string& path) {
  const json j = detail::read_json_file(path, "workload file");
  WorkloadSpec s = parse_workload(j, path);
  // input paths are relative to the workload file's folder
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  for (std::string& p : s.input.paths)
    if (!p.empty() && std::filesystem::path(p).is_relative()) p = (dir / p).lexically_normal().string();
  // and so is a hardware profile file (tester44 F16: it was read from the current directory, so a
  // workload shipped with its profile failed when run from elsewhere). A file, not a built-in name,
  // by load_hardware_profile's rule (cost/hardware_profile.h): a '/' in it, a name ending .json, or
  // an existing file (here: in the workload's folder).
  std::string& hw = s.devices.hardware;
  std::error_code ec;
  const bool hw_is_file = hw.find('/') != std::string::npos || (hw.size() > 5 && hw.ends_with(".json")) ||
                          (!hw.empty() && std::filesystem::is_regular_file(dir / hw, ec));
  if (hw_is_file && std::filesystem::path(hw).is_relative()) hw = (dir / hw).lexically_normal().string();
  // devices.backend simulated with devices.hardware P is what `--simulate P` asks for, memory
  // included: the devices' memory is the profile's gpu.memory_bytes unless the file gives
  // devices.memory_bytes (a profile that does not load is named by the checks that follow)
  const json* devices = j.is_object() && j.contains("devices") ? &j.at("devices") : nullptr;
  if (s.devices.backend == Backend::simulated && !hw.empty() && devices != nullptr && devices->is_object() &&
      !devices->contains("memory_bytes")) {
    try {
      s.devices.memory_bytes = load_hardware_profile(hw).gpu.memory_bytes;
    } catch (const SpecError&) {
    }
  }
  if (j.is_object() && !j.contains("name")) {
    const std::string stem = std::filesystem::path(path).stem().string();
    if (!stem.empty()) s.name = stem;
  }
  return s;
}

}  // namespace embedscope::engine
