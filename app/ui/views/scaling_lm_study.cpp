#include "views/scaling_lm_study.h"

#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::ui {

namespace {
// One JSON object of the file, at `ptr`, and its keys read with the type the study writes them
// as; a wrong one throws "<origin>: <ptr>/<key>: <reason>".
class Fields {
 public:
  Fields(const nlohmann::json& object, std::string ptr, const std::string& origin)
      : o_(object), ptr_(std::move(ptr)), origin_(origin) {
    if (!o_.is_object()) throw engine::SpecError(fmt::format("{}: {}: must be an object", origin_, ptr_.empty() ? "/" : ptr_));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw engine::SpecError(fmt::format("{}: {}/{}: {}", origin_, ptr_, key, why));
  }
  bool has(const char* key) const { return o_.contains(key); }
  const nlohmann::json& at(const char* key) const {
    const auto it = o_.find(key);
    if (it == o_.end()) fail(key, "is missing");
    return *it;
  }
  int64_t integer(const char* key) const {
    const auto& v = at(key);
    if (!v.is_number_integer()) fail(key, "must be an integer");
    return v.get<int64_t>();
  }
  double number(const char* key) const {
    const auto& v = at(key);
    if (!v.is_number()) fail(key, "must be a number");
    return v.get<double>();
  }
  std::string text(const char* key) const {
    const auto& v = at(key);
    if (!v.is_string()) fail(key, "must be a string");
    return v.get<std::string>();
  }
  bool flag(const char* key) const {
    if (!has(key)) return false;
    const auto& v = at(key);
    if (!v.is_boolean()) fail(key, "must be true or false");
    return v.get<bool>();
  }

 private:
  const nlohmann::json& o_;
  std::string ptr_;
  const std::string& origin_;
};

engine::LmSharding lm_sharding(const Fields& q) {
  const std::string t = q.text("sharding");
  for (auto s : {engine::LmSharding::vocab_parallel, engine::LmSharding::data_parallel, engine::LmSharding::row_wise})
    if (t == engine::to_string(s)) return s;
  q.fail("sharding", fmt::format("\"{}\" is not a sharding type of an lm_embedding study (vocab_parallel, "
                                 "data_parallel, row_wise)",
                                 t));
}
}  // namespace

bool is_lm_scaling_study(const nlohmann::json& j) {
  return j.is_object() && j.contains("model") && j["model"] == "lm_embedding";
}

engine::LmScalingStudy lm_scaling_study_from_json(const nlohmann::json& j, const std::string& origin) {
  const Fields top(j, "", origin);
  if (top.text("model") != "lm_embedding") top.fail("model", "must be \"lm_embedding\" for an LM scaling study");
  engine::LmScalingStudy st;
  st.workload = top.text("workload");
  st.hardware = top.text("hardware");
  st.gpus_per_node = static_cast<int>(top.integer("gpus_per_node"));
  st.micro_batch_size = top.integer("batch_size_per_gpu");
  st.sequence_length = top.integer("sequence_length");
  st.steps = top.integer("steps");
  const auto& points = top.at("points");
  if (!points.is_array()) top.fail("points", "must be an array");
  for (size_t k = 0; k < points.size(); ++k) {
    const Fields q(points[k], fmt::format("/points/{}", k), origin);
    engine::LmScalingPoint p;
    p.sharding = lm_sharding(q);
    p.sequence_parallel = q.flag("sequence_parallel");
    const int64_t gpus = q.integer("gpus");
    if (gpus < 1 || gpus > engine::kMaxSimulatedRanks)
      q.fail("gpus", fmt::format("must be in [1, {}], got {}", engine::kMaxSimulatedRanks, gpus));
    p.gpus = static_cast<int>(gpus);
    p.nodes = static_cast<int>(q.integer("nodes"));
    if (q.has("error")) {
      p.error = q.text("error");
      p.write_failed = q.flag("write_failed");
    } else {
      p.step_time_ns = q.integer("step_time_ns");
      p.tokens_per_step = q.integer("tokens_per_step");
      p.tokens_per_s = q.number("tokens_per_s");
      p.scaling_efficiency = q.number("scaling_efficiency");
      p.embedding_comm_share = q.number("embedding_comm_share");
      p.comm_share = q.number("comm_share");
      p.wire_bytes_per_step = q.integer("wire_bytes_per_step");
      p.split_check_bytes_per_step = q.integer("split_check_bytes_per_step");
      p.wire_bytes_per_token = q.number("wire_bytes_per_token");
      p.memory_bytes_per_gpu = q.integer("memory_bytes_per_gpu");
      if (q.has("session")) p.session_path = q.text("session");
    }
    st.points.push_back(std::move(p));
  }
  return st;
}

}  // namespace embedscope::ui
