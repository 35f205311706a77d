// LmWorkloadSpec from JSON and back (lm_spec.h): shape checks while reading (types, unknown and
// required keys), range and divisibility checks in validate(), both through workload_detail's
// Checker so that every message is "<origin>: <json pointer>: <reason>".

#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/lm_spec.h"
#include "workload/checker.h"

namespace embedscope::engine {

using nlohmann::json;
using workload_detail::Checker;
using workload_detail::ptr_key;

const char* to_string(LmSharding s) {
  switch (s) {
    case LmSharding::vocab_parallel: return "vocab_parallel";
    case LmSharding::data_parallel: return "data_parallel";
    case LmSharding::row_wise: return "row_wise";
  }
  return "?";
}
const char* to_string(LmOptimizer o) { return o == LmOptimizer::adam ? "adam" : "sgd"; }
const char* to_string(LmDataType t) {
  switch (t) {
    case LmDataType::fp32: return "fp32";
    case LmDataType::bf16: return "bf16";
    case LmDataType::fp16: return "fp16";
  }
  return "?";
}

int64_t LmWorkloadSpec::padded_vocab_size() const {
  const int64_t m = make_vocab_size_divisible_by * tensor_parallel_size();
  if (make_vocab_size_divisible_by <= 1) return vocab_size;
  return (vocab_size + m - 1) / m * m;
}

namespace {

constexpr int64_t kMaxVocab = int64_t{1} << 31;
constexpr int64_t kMaxHidden = 65536;
constexpr int64_t kMaxTokens = int64_t{1} << 24;  // B x S per rank

// Keys of a DLRM table entry (workload/reader.cpp read_table) that an lm_embedding workload has
// no counterpart for, with the docs/configuration.md section that describes them, or the
// lm_embedding key that says the same.
std::string dlrm_table_key_hint(std::string_view key) {
  static constexpr std::pair<std::string_view, std::string_view> kKeys[] = {
      {"hash_size", "a DLRM table option (docs/configuration.md, \"Smaller tables\")"},
      {"stochastic_rounding", "a DLRM table option (docs/configuration.md, \"Smaller tables\")"},
      {"optimizer_state_type", "a DLRM table option (docs/configuration.md, \"Smaller tables\")"},
      {"low_rank_dim", "a DLRM table option (docs/configuration.md, \"Smaller tables\")"},
      {"shared_with", "a DLRM table option (docs/configuration.md, \"Smaller tables\")"},
      {"placement", "a DLRM table option (docs/configuration.md, \"Tables in host memory\")"},
      {"cache_load_factor", "a DLRM table option (docs/configuration.md, \"Tables in host memory\")"},
      {"cache_policy", "a DLRM table option (docs/configuration.md, \"Tables in host memory\")"},
      {"prefetch_pipeline", "a DLRM table option (docs/configuration.md, \"Tables in host memory\")"},
      {"num_embeddings", "a DLRM table's key; an lm_embedding table has vocab_size rows"},
      {"embedding_dim", "a DLRM table's key; an lm_embedding table's rows have hidden_size values"},
      {"pooling", "a DLRM table's key; an lm_embedding lookup is one row per token (no pooling)"},
      {"feature_names", "a DLRM table's key; an lm_embedding table has one input, the tokens"},
      {"tables", "a DLRM workload's key; an lm_embedding workload is one vocabulary table"},
  };
  for (const auto& [k, hint] : kKeys)
    if (k == key) return std::string(hint);
  return "";
}

class LmReader : public Checker {
 public:
  using Checker::Checker;
  void object(const json& v, const std::string& ptr, std::initializer_list<std::string_view> allowed) const {
    if (!v.is_object()) fail(ptr, fmt::format("must be an object, got {}", v.type_name()));
    for (const auto& [key, value] : v.items()) {
      bool ok = false;
      for (std::string_view a : allowed) ok = ok || key == a;
      if (ok) continue;
      std::string valid;
      for (std::string_view a : allowed) valid += fmt::format("{}{}", valid.empty() ? "" : ", ", a);
      // the top level: a DLRM table's key says what it is (lm59a: a bare "unknown key" for hash_size)
      const std::string hint = ptr.empty() ? dlrm_table_key_hint(key) : "";
      if (!hint.empty())
        fail(ptr_key(ptr, key), fmt::format("not an lm_embedding key: \"{}\" is {}; valid keys: {}", key, hint, valid));
      fail(ptr_key(ptr, key), fmt::format("unknown key; valid keys: {}", valid));
    }
  }
  static const json* optional(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  const json& required(const json& obj, const std::string& ptr, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail(ptr_key(ptr, key), "required");
    return *it;
  }
  std::string string(const json& v, const std::string& ptr) const {
    if (!v.is_string()) fail(ptr, fmt::format("must be a string, got {}", v.type_name()));
    return v.get<std::string>();
  }
  bool boolean(const json& v, const std::string& ptr) const {
    if (!v.is_boolean()) fail(ptr, fmt::format("must be a boolean, got {}", v.type_name()));
    return v.get<bool>();
  }
  double number(const json& v, const std::string& ptr) const {
    if (!v.is_number()) fail(ptr, fmt::format("must be a number, got {}", v.type_name()));
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(ptr, fmt::format("must be a finite number, got {}", d));
    return d;
  }
  /// An integer in int64 (integral floats such as 1e6 accepted).
  int64_t integer(const json& v, const std::string& ptr) const {
    if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > uint64_t{1} << 62) fail(ptr, fmt::format("must be <= {}, got {}", uint64_t{1} << 62, u));
      return static_cast<int64_t>(u);
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 4e18)
        fail(ptr, fmt::format("must be an integer, got {}", d));
      return static_cast<int64_t>(d);
    }
    fail(ptr, fmt::format("must be an integer, got {}", v.type_name()));
  }
  template <class E>
  E choice(const json& v, const std::string& ptr, std::initializer_list<std::pair<E, const char*>> names) const {
    const std::string s = string(v, ptr);
    std::string valid;
    for (const auto& [e, n] : names) {
      if (s == n) return e;
      valid += valid.empty() ? "" : ", ";
      valid += n;
    }
    fail(ptr, fmt::format("unknown value \"{}\"; valid: {}", s, valid));
  }
};

}  // namespace

bool is_lm_workload(const json& j) {
  if (!j.is_object()) return false;
  auto it = j.find("model");
  return it != j.end() && it->is_string() && it->get<std::string>() == "lm_embedding";
}

namespace {

// What a reading is for: a workload to run (every check, the token file read) or one a session
// stored (the recorded fields as recorded, no file opened: parse_stored_lm_workload).
enum class LmReading { input, stored };

LmWorkloadSpec read_lm_workload(const json& j, const std::string& origin, const std::string& base_dir, LmReading mode) {
  const bool stored = mode == LmReading::stored;
  const LmReader r(origin);
  bool dtype_given = false;        // /token_ids/dtype is in the file
  std::string token_file_written;  // /token_ids/file as written (the messages name it so)
  r.object(j, "", {"model", "name", "description", "source", "vocab_size", "hidden_size", "sequence_length",
                   "micro_batch_size", "data_type", "tie_word_embeddings", "padding_id", "body_layers",
                   "token_ids", "sharding", "devices", "optimizer", "steps", "seed"});
  if (r.string(r.required(j, "", "model"), "/model") != "lm_embedding")
    r.fail("/model", fmt::format("must be \"lm_embedding\" here, got \"{}\"", j["model"].get<std::string>()));
  LmWorkloadSpec s;
  if (auto* a = LmReader::optional(j, "name")) s.name = r.string(*a, "/name");
  if (auto* a = LmReader::optional(j, "description")) s.description = r.string(*a, "/description");
  if (auto* a = LmReader::optional(j, "source")) s.source = r.string(*a, "/source");
  s.vocab_size = r.integer(r.required(j, "", "vocab_size"), "/vocab_size");
  s.hidden_size = r.integer(r.required(j, "", "hidden_size"), "/hidden_size");
  s.sequence_length = r.integer(r.required(j, "", "sequence_length"), "/sequence_length");
  if (auto* a = LmReader::optional(j, "micro_batch_size")) s.micro_batch_size = r.integer(*a, "/micro_batch_size");
  if (auto* a = LmReader::optional(j, "data_type"))
    s.data_type = r.choice<LmDataType>(
        *a, "/data_type", {{LmDataType::fp32, "fp32"}, {LmDataType::bf16, "bf16"}, {LmDataType::fp16, "fp16"}});
  if (auto* a = LmReader::optional(j, "tie_word_embeddings")) s.tie_word_embeddings = r.boolean(*a, "/tie_word_embeddings");
  if (auto* a = LmReader::optional(j, "padding_id")) s.padding_id = r.integer(*a, "/padding_id");
  if (auto* a = LmReader::optional(j, "body_layers")) {
    const int64_t n = r.integer(*a, "/body_layers");
    s.body_layers = static_cast<int>(r.closed<int64_t>("/body_layers", n, 0, 64));
  }
  if (auto* a = LmReader::optional(j, "token_ids")) {
    r.object(*a, "/token_ids", {"distribution", "alpha", "file", "dtype"});
    if (auto* b = LmReader::optional(*a, "distribution"))
      r.choice<int>(*b, "/token_ids/distribution", {{0, "zipf"}});
    if (auto* b = LmReader::optional(*a, "alpha")) s.token_zipf_alpha = r.number(*b, "/token_ids/alpha");
    if (auto* b = LmReader::optional(*a, "file")) {
      if (a->contains("distribution") || a->contains("alpha"))
        r.fail("/token_ids/file", "a token file replaces the Zipf distribution: drop distribution and alpha");
      std::filesystem::path p = r.string(*b, "/token_ids/file");
      token_file_written = p.string();
      if (p.empty()) r.fail("/token_ids/file", "must not be empty");
      if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
      s.token_file = stored ? p.string() : p.lexically_normal().string();
    }
    if (auto* b = LmReader::optional(*a, "dtype")) {
      dtype_given = true;
      if (s.token_file.empty()) r.fail("/token_ids/dtype", "only with a token file (/token_ids/file)");
      // stored: as recorded, a .npy's own dtype too (to_json wrote to_string of any of the four)
      s.token_file_dtype =
          stored ? r.choice<TokenDtype>(*b, "/token_ids/dtype",
                                        {{TokenDtype::uint16, "uint16"}, {TokenDtype::uint32, "uint32"},
                                         {TokenDtype::int32, "int32"}, {TokenDtype::int64, "int64"}})
                 : r.choice<TokenDtype>(*b, "/token_ids/dtype",
                                        {{TokenDtype::uint16, "uint16"}, {TokenDtype::uint32, "uint32"}});
    }
    // a raw file does not say its dtype: read as uint16, a uint32 file (what `tokenize` writes for a
    // vocabulary > 65,536) gives id, 0, id, 0, ..., every id valid (tester47 F1); a .npy says its
    // own (read_token_file reads a path ending in .npy as one). A rule of the input: a stored
    // workload is not read again
    if (!stored && !s.token_file.empty() && !a->contains("dtype") &&
        std::filesystem::path(s.token_file).extension() != ".npy")
      r.fail("/token_ids/dtype", "required with a raw .bin file (uint16 or uint32; `embedscope tokenize` prints the "
                                 "one it wrote); a .npy file says its own");
  }
  if (auto* a = LmReader::optional(j, "sharding")) {
    r.object(*a, "/sharding", {"type", "sequence_parallel", "make_vocab_size_divisible_by"});
    if (auto* b = LmReader::optional(*a, "type"))
      s.sharding = r.choice<LmSharding>(*b, "/sharding/type",
                                        {{LmSharding::vocab_parallel, "vocab_parallel"},
                                         {LmSharding::data_parallel, "data_parallel"},
                                         {LmSharding::row_wise, "row_wise"}});
    if (auto* b = LmReader::optional(*a, "sequence_parallel"))
      s.sequence_parallel = r.boolean(*b, "/sharding/sequence_parallel");
    if (auto* b = LmReader::optional(*a, "make_vocab_size_divisible_by"))
      s.make_vocab_size_divisible_by = r.integer(*b, "/sharding/make_vocab_size_divisible_by");
  }
  if (auto* a = LmReader::optional(j, "devices")) {
    r.object(*a, "/devices", {"count", "backend"});
    if (auto* b = LmReader::optional(*a, "count")) {
      const int64_t n = r.integer(*b, "/devices/count");
      s.world_size = static_cast<int>(r.closed<int64_t>("/devices/count", n, 1, kMaxSimulatedRanks));
    }
    if (auto* b = LmReader::optional(*a, "backend")) r.choice<int>(*b, "/devices/backend", {{0, "cpu"}});
  }
  if (auto* a = LmReader::optional(j, "optimizer")) {
    r.object(*a, "/optimizer", {"type", "learning_rate", "beta1", "beta2", "eps"});
    if (auto* b = LmReader::optional(*a, "type"))
      s.optimizer = static_cast<LmOptimizer>(r.choice<int>(*b, "/optimizer/type", {{0, "sgd"}, {1, "adam"}}));
    if (auto* b = LmReader::optional(*a, "learning_rate")) s.learning_rate = r.number(*b, "/optimizer/learning_rate");
    for (auto [key, field] : {std::pair{"beta1", &s.adam_beta1}, {"beta2", &s.adam_beta2}, {"eps", &s.adam_eps}})
      if (auto* b = LmReader::optional(*a, key)) {
        if (s.optimizer != LmOptimizer::adam)
          r.fail(std::string("/optimizer/") + key, "only with optimizer type adam");
        *field = r.number(*b, std::string("/optimizer/") + key);
      }
  }
  if (auto* a = LmReader::optional(j, "steps")) s.steps = r.integer(*a, "/steps");
  if (auto* a = LmReader::optional(j, "seed")) {
    const int64_t v = r.integer(*a, "/seed");
    s.seed = static_cast<uint64_t>(r.ge0<int64_t>("/seed", v));
  }
  validate(s, origin);
  // a stored workload: the token file may have moved, changed or be gone since the run; what the
  // session recorded is what it was (fixa49, tester49 F-A)
  if (!stored && !s.token_file.empty()) {
    std::string disagreement;  // said after the file's own errors
    try {
      std::shared_ptr<std::vector<int64_t>> ids;
      if (std::filesystem::path(s.token_file).extension() == ".npy") {
        // a .npy says its own dtype: a `dtype` beside it that says another is refused (retest47
        // R3: it was ignored without a word), and the run's header names the file's own
        TokenDtype own = TokenDtype::uint16;
        std::string descr;
        ids = std::make_shared<std::vector<int64_t>>(read_token_npy(s.token_file, &own, &descr));
        if (dtype_given && own != s.token_file_dtype)
          disagreement = fmt::format("{} disagrees with {}'s own {} ({}); a .npy says its own dtype: leave dtype out",
                                     to_string(s.token_file_dtype), token_file_written, descr, to_string(own));
        s.token_file_dtype = own;
      } else {
        ids = std::make_shared<std::vector<int64_t>>(read_token_file(s.token_file, s.token_file_dtype));
      }
      check_token_ids(*ids, s.vocab_size, s.token_file, s.token_file_dtype);
      s.token_file_ids = std::move(ids);
    } catch (const SpecError& e) {
      r.fail("/token_ids/file", e.what());
    }
    if (!disagreement.empty()) r.fail("/token_ids/dtype", disagreement);
  }
  return s;
}

}  // namespace

LmWorkloadSpec parse_lm_workload(const json& j, const std::string& origin, const std::string& base_dir) {
  return read_lm_workload(j, origin, base_dir, LmReading::input);
}

LmWorkloadSpec parse_stored_lm_workload(const json& j, const std::string& origin) {
  return read_lm_workload(j, origin, "", LmReading::stored);
}

void validate(const LmWorkloadSpec& s, const std::string& origin) {
  const Checker c(origin);
  if (s.vocab_size < 2 || s.vocab_size > kMaxVocab)
    c.fail("/vocab_size", fmt::format("must be in [2, {}], got {}", kMaxVocab, s.vocab_size));
  c.gt0_max<int64_t>("/hidden_size", s.hidden_size, kMaxHidden);
  c.gt0_max<int64_t>("/sequence_length", s.sequence_length, kMaxTokens);
  c.gt0_max<int64_t>("/micro_batch_size", s.micro_batch_size, kMaxTokens);
  if (s.micro_batch_size * s.sequence_length > kMaxTokens)
    c.fail("/micro_batch_size", fmt::format("micro_batch_size x sequence_length must be <= {} tokens, got {}",
                                            kMaxTokens, s.micro_batch_size * s.sequence_length));
  if (s.padding_id < -1 || s.padding_id >= s.vocab_size)
    c.fail("/padding_id", fmt::format("must be -1 (none) or in [0, {}), got {}", s.vocab_size, s.padding_id));
  c.closed<int>("/body_layers", s.body_layers, 0, 64);
  if (!(s.token_zipf_alpha > 0) || s.token_zipf_alpha > 10)
    c.fail("/token_ids/alpha", fmt::format("must be in (0, 10], got {}", s.token_zipf_alpha));
  c.closed<int>("/devices/count", s.world_size, 1, kMaxSimulatedRanks);
  c.closed<int64_t>("/sharding/make_vocab_size_divisible_by", s.make_vocab_size_divisible_by, 1, 1 << 20);
  if (!(s.learning_rate > 0)) c.fail("/optimizer/learning_rate", fmt::format("must be > 0, got {}", s.learning_rate));
  if (!(s.adam_beta1 >= 0 && s.adam_beta1 < 1)) c.fail("/optimizer/beta1", fmt::format("must be in [0, 1), got {}", s.adam_beta1));
  if (!(s.adam_beta2 >= 0 && s.adam_beta2 < 1)) c.fail("/optimizer/beta2", fmt::format("must be in [0, 1), got {}", s.adam_beta2));
  if (!(s.adam_eps > 0)) c.fail("/optimizer/eps", fmt::format("must be > 0, got {}", s.adam_eps));
  c.gt0_max<int64_t>("/steps", s.steps, 1'000'000'000);
  const int p = s.world_size;
  if (s.sequence_parallel) {
    if (s.sharding != LmSharding::vocab_parallel)
      c.fail("/sharding/sequence_parallel",
             fmt::format("only with sharding type vocab_parallel (got {})", to_string(s.sharding)));
    if (s.sequence_length % p != 0)
      c.fail("/sequence_length",
             fmt::format("sequence_parallel splits each sequence over the {} ranks: must be a multiple of {} "
                         "(e.g. {} or {}), got {}",
                         p, p, s.sequence_length / p * p == 0 ? p : s.sequence_length / p * p,
                         (s.sequence_length / p + 1) * p, s.sequence_length));
  }
  if (s.sharding != LmSharding::data_parallel && s.padded_vocab_size() < p)
    c.fail("/devices/count", fmt::format("{} splits the {} vocabulary rows over the ranks: at most {} ranks, got {}",
                                         to_string(s.sharding), s.padded_vocab_size(), s.padded_vocab_size(), p));
}

json to_json(const LmWorkloadSpec& s) {
  json j = {{"model", "lm_embedding"},
            {"name", s.name},
            {"vocab_size", s.vocab_size},
            {"hidden_size", s.hidden_size},
            {"sequence_length", s.sequence_length},
            {"micro_batch_size", s.micro_batch_size},
            {"data_type", to_string(s.data_type)},
            {"tie_word_embeddings", s.tie_word_embeddings},
            {"padding_id", s.padding_id},
            {"body_layers", s.body_layers},
            {"token_ids", s.token_file.empty() ? json{{"distribution", "zipf"}, {"alpha", s.token_zipf_alpha}}
                                               // a .npy says its own dtype (and a dtype beside it is checked)
                                               : std::filesystem::path(s.token_file).extension() == ".npy"
                                                   ? json{{"file", s.token_file}}
                                                   : json{{"file", s.token_file}, {"dtype", to_string(s.token_file_dtype)}}},
            {"sharding",
             {{"type", to_string(s.sharding)},
              {"sequence_parallel", s.sequence_parallel},
              {"make_vocab_size_divisible_by", s.make_vocab_size_divisible_by}}},
            {"devices", {{"count", s.world_size}, {"backend", "cpu"}}},
            {"optimizer", {{"type", to_string(s.optimizer)}, {"learning_rate", s.learning_rate}}},
            {"steps", s.steps},
            {"seed", s.seed}};
  if (s.optimizer == LmOptimizer::adam) {
    j["optimizer"]["beta1"] = s.adam_beta1;
    j["optimizer"]["beta2"] = s.adam_beta2;
    j["optimizer"]["eps"] = s.adam_eps;
  }
  if (!s.description.empty()) j["description"] = s.description;
  if (!s.source.empty()) j["source"] = s.source;
  return j;
}

LmWorkloadSpec load_lm_workload_file(const std::string& path) {
  const json j = detail::read_json_file(path, "workload file");
  LmWorkloadSpec s = parse_lm_workload(j, path, std::filesystem::path(path).parent_path().string());
  if (!j.contains("name")) {
    const std::string stem = std::filesystem::path(path).stem().string();
    if (!stem.empty()) s.name = stem;
  }
  return s;
}

}  // namespace embedscope::engine
