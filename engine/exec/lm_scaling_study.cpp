// run_lm_scaling_study (exec/lm_scaling_study.h): an lm_embedding workload on simulated clusters
// of growing size, each point the step `plan --simulate` times.
#include "embedscope/engine/exec/lm_scaling_study.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/exec/write_room.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine {

namespace {

std::string point_name(LmSharding type, bool sp) {
  return std::string(to_string(type)) + (sp ? "+sp" : "");
}

}  // namespace

std::vector<LmScalingPoint> run_lm_scaling_study(const LmWorkloadSpec& base, const LmScalingStudyOptions& o) {
  const HardwareProfile hw = load_hardware_profile(o.hardware);
  if (o.shardings.empty()) throw SpecError("scaling study: no sharding types");
  if (o.gpus_per_node < 0) throw SpecError("scaling study: gpus per node must be positive");
  const int per_node = o.gpus_per_node > 0 ? o.gpus_per_node : hw.gpus_per_node;
  const std::vector<int> sizes = scaling_study_sizes(o.gpus, per_node);
  auto session_of = [&](LmSharding type, int gpus) {
    return (std::filesystem::path(o.session_dir) / fmt::format("{}_{}.db", to_string(type), gpus)).string();
  };
  if (!o.session_dir.empty()) {
    for (LmSharding type : o.shardings)
      for (int gpus : sizes) {
        const std::string path = session_of(type, gpus);
        if (o.overwrite) sessions::refuse_replacing_live_session(path);
        else if (std::filesystem::exists(path))
          throw SpecError(fmt::format("{}: already exists; choose another directory (-o) or allow replacing its sessions "
                                      "(--force-overwrite)", path));
      }
    std::filesystem::create_directories(o.session_dir);
  }
  std::string write_failed_at;
  auto run_point = [&](LmSharding type, int gpus) {
    LmScalingPoint p;
    p.sharding = type;
    p.sequence_parallel = type == LmSharding::vocab_parallel && o.sequence_parallel;
    p.gpus = gpus;
    p.device_memory_bytes = hw.gpu.memory_bytes;
    const int gpn = std::min(gpus, per_node);  // plan's and simulate_lm's node shape
    p.nodes = (gpus + gpn - 1) / gpn;
    if (!write_failed_at.empty() || (o.cancel && o.cancel->load())) {
      p.error = !write_failed_at.empty() ? fmt::format("not run ({}'s session could not be written)", write_failed_at)
                                         : "not run (cancelled)";
      return p;
    }
    LmWorkloadSpec spec = base;
    spec.world_size = gpus;
    spec.sharding = type;
    spec.sequence_parallel = p.sequence_parallel;
    try {
      validate(spec, fmt::format("{} at {} GPUs", point_name(type, p.sequence_parallel), gpus));
      const std::vector<LmMemoryEstimate> est = estimate_lm_memory(spec);
      for (const LmMemoryEstimate& e : est) {
        p.memory_bytes_per_gpu = std::max(p.memory_bytes_per_gpu, e.peak_allocated_bytes);
        p.memory_reserved_bytes_per_gpu = std::max(p.memory_reserved_bytes_per_gpu, e.peak_reserved_bytes);
      }
      // the check plan --simulate and run --simulate make (planner/lm_memory_estimate.h)
      if (LmGpuMemoryVerdict v = lm_gpu_memory_verdict(est, hw.gpu.memory_bytes, hw.gpu.name, spec.sharding); !v.fits()) {
        p.error = std::move(v.refusal);
        return p;
      }
      const LmSimulatedStep sim = simulate_lm_step(spec, hw, gpn);
      p.step_time_ns = sim.step_ns;
      p.tokens_per_step = spec.tokens_per_step();
      const double step = static_cast<double>(sim.step_ns);
      p.tokens_per_s = step > 0 ? static_cast<double>(p.tokens_per_step) * 1e9 / step : 0.0;
      p.comm_share = step > 0 ? static_cast<double>(sim.comm_ns) / step : 0.0;
      p.embedding_comm_share = step > 0 ? static_cast<double>(sim.embedding_comm_ns) / step : 0.0;
      p.wire_bytes_per_step = sim.bytes_sent_all_ranks + sim.split_check_bytes_all_ranks;
      p.split_check_bytes_per_step = sim.split_check_bytes_all_ranks;
      p.wire_bytes_per_token =
          static_cast<double>(sim.bytes_sent_all_ranks) / static_cast<double>(std::max<int64_t>(1, p.tokens_per_step));
      p.body_wire_bytes_per_token =
          static_cast<double>(sim.body_bytes_all_ranks) / static_cast<double>(std::max<int64_t>(1, p.tokens_per_step));
      p.body_compute_ns = sim.body_compute_ns;
      p.body_comm_ns = sim.body_comm_ns;
      if (!o.session_dir.empty()) {  // the session `run X --simulate P --devices N` writes
        p.session_path = session_of(type, gpus);
        LmSimulateOptions so;
        so.session_path = p.session_path;
        so.overwrite = true;
        so.hardware = o.hardware;
        so.gpus_per_node = gpn;
        so.cancel = o.cancel;
        const LmRunResult r = simulate_lm(spec, so);
        if (r.ended == RunEnd::cancelled) p.error = "cancelled";
      }
    } catch (const SpecError& e) {
      p.error = e.what();
    } catch (const LmRunError& e) {  // a full disk while the session was written
      p.error = fmt::format("write_failed: {}{}", e.what(), session_room_note(p.session_path));
      p.write_failed = true;
    } catch (const sessions::SessionError& e) {
      p.error = fmt::format("write_failed: {}{}; nothing was recorded", e.what(), session_room_note(p.session_path));
      p.write_failed = true;
    }
    if (p.write_failed) write_failed_at = fmt::format("{} {}", to_string(type), gpus);
    if (!p.error.empty()) p.session_path.clear();
    return p;
  };
  // The baseline first (the smallest size for every type, and the next while none ran), then the
  // points type-major, each handed out as soon as the points before it were, so that a long
  // study prints its rows as they come (a 1,024-GPU point times 1,024 rank programs)
  const size_t types = o.shardings.size();
  std::vector<std::optional<LmScalingPoint>> slot(types * sizes.size());  // type-major
  const auto at = [&](size_t type, size_t size) -> std::optional<LmScalingPoint>& { return slot[type * sizes.size() + size]; };
  std::optional<LmScalingBaseline> baseline;
  for (size_t g = 0; g < sizes.size() && !baseline; ++g) {
    std::vector<LmScalingPoint> here;
    for (size_t k = 0; k < types; ++k) here.push_back(*(at(k, g) = run_point(o.shardings[k], sizes[g])));
    baseline = lm_scaling_baseline(here);
  }
  std::vector<LmScalingPoint> out;
  for (size_t k = 0; k < types; ++k) {
    double own_first = 0;  // the type's per-GPU rate at its smallest size that ran
    for (size_t g = 0; g < sizes.size(); ++g) {
      if (!at(k, g)) at(k, g) = run_point(o.shardings[k], sizes[g]);
      LmScalingPoint p = std::move(*at(k, g));
      if (p.error.empty() && baseline && baseline->tokens_per_s_per_gpu > 0)
        p.scaling_efficiency = p.tokens_per_s / p.gpus / baseline->tokens_per_s_per_gpu;
      if (p.error.empty() && p.gpus > 0) {
        if (own_first <= 0) own_first = p.tokens_per_s / p.gpus;
        if (own_first > 0) p.type_scaling_efficiency = p.tokens_per_s / p.gpus / own_first;
      }
      if (o.on_point) o.on_point(p);
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::optional<LmScalingBaseline> lm_scaling_baseline(const std::vector<LmScalingPoint>& points) {
  std::optional<LmScalingBaseline> best;
  for (const LmScalingPoint& p : points) {
    if (!p.error.empty() || p.gpus < 1) continue;
    const double per_gpu = p.tokens_per_s / p.gpus;
    if (!best || p.gpus < best->gpus || (p.gpus == best->gpus && per_gpu > best->tokens_per_s_per_gpu))
      best = LmScalingBaseline{p.sharding, p.gpus, per_gpu};
  }
  return best;
}

nlohmann::json to_json(const LmScalingStudy& st) {
  nlohmann::json j = {{"batch_size_per_gpu", st.micro_batch_size},
                      {"model", "lm_embedding"},
                      {"workload", st.workload},
                      {"hardware", st.hardware},
                      {"simulated", true},
                      {"gpus_per_node", st.gpus_per_node},
                      {"sequence_length", st.sequence_length},
                      {"steps", st.steps},
                      {"vocab_size", st.vocab_size},
                      {"hidden_size", st.hidden_size},
                      {"device_name", st.device_name},
                      {"device_memory_bytes", st.device_memory_bytes},
                      {"points", nlohmann::json::array()}};
  if (const auto b = lm_scaling_baseline(st.points))
    j["efficiency_baseline"] = {{"sharding", to_string(b->sharding)}, {"gpus", b->gpus}, {"tokens_per_s_per_gpu", b->tokens_per_s_per_gpu}};
  else
    j["efficiency_baseline"] = nullptr;
  for (const LmScalingPoint& p : st.points) {
    nlohmann::json q = {{"sharding", to_string(p.sharding)},
                        {"sequence_parallel", p.sequence_parallel},
                        {"gpus", p.gpus},
                        {"nodes", p.nodes},
                        {"device_memory_bytes", p.device_memory_bytes}};
    if (!p.error.empty()) {
      q["error"] = p.error;
      if (p.write_failed) q["write_failed"] = true;
      if (p.memory_bytes_per_gpu > 0) {  // a memory refusal's need
        q["memory_bytes_per_gpu"] = p.memory_bytes_per_gpu;
        q["memory_reserved_bytes_per_gpu"] = p.memory_reserved_bytes_per_gpu;
      }
    } else {
      q.update({{"step_time_ns", p.step_time_ns},
                {"tokens_per_step", p.tokens_per_step},
                {"tokens_per_s", p.tokens_per_s},
                {"tokens_per_s_per_gpu", p.gpus > 0 ? p.tokens_per_s / p.gpus : 0.0},
                {"scaling_efficiency", p.scaling_efficiency},
                {"type_scaling_efficiency", p.type_scaling_efficiency},
                {"embedding_comm_share", p.embedding_comm_share},
                {"comm_share", p.comm_share},
                {"wire_bytes_per_step", p.wire_bytes_per_step},
                {"split_check_bytes_per_step", p.split_check_bytes_per_step},
                {"wire_bytes_per_token", p.wire_bytes_per_token},
                {"body_wire_bytes_per_token", p.body_wire_bytes_per_token},
                {"body_compute_ns", p.body_compute_ns},
                {"body_comm_ns", p.body_comm_ns},
                {"memory_bytes_per_gpu", p.memory_bytes_per_gpu},
                {"memory_reserved_bytes_per_gpu", p.memory_reserved_bytes_per_gpu}});
      if (!p.session_path.empty()) q["session"] = p.session_path;
    }
    j["points"].push_back(std::move(q));
  }
  return j;
}

// The reader of to_json's file (the workbench's scaling page opens it).

namespace {
// One JSON object of the file, at `ptr`, and its keys read with the type the study writes them
// as; a wrong one throws "<origin>: <ptr>/<key>: <reason>".
class Fields {
 public:
  Fields(const nlohmann::json& object, std::string ptr, const std::string& origin)
      : o_(object), ptr_(std::move(ptr)), origin_(origin) {
    if (!o_.is_object()) throw SpecError(fmt::format("{}: {}: must be an object", origin_, ptr_.empty() ? "/" : ptr_));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw SpecError(fmt::format("{}: {}/{}: {}", origin_, ptr_, key, why));
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

LmSharding lm_sharding(const Fields& q) {
  const std::string t = q.text("sharding");
  for (auto s : {LmSharding::vocab_parallel, LmSharding::data_parallel, LmSharding::row_wise})
    if (t == to_string(s)) return s;
  q.fail("sharding", fmt::format("\"{}\" is not a sharding type of an lm_embedding study (vocab_parallel, "
                                 "data_parallel, row_wise)",
                                 t));
}
}  // namespace

bool is_lm_scaling_study(const nlohmann::json& j) {
  return j.is_object() && j.contains("model") && j["model"] == "lm_embedding";
}

LmScalingStudy lm_scaling_study_from_json(const nlohmann::json& j, const std::string& origin) {
  const Fields top(j, "", origin);
  if (top.text("model") != "lm_embedding") top.fail("model", "must be \"lm_embedding\" for an LM scaling study");
  LmScalingStudy st;
  st.workload = top.text("workload");
  st.hardware = top.text("hardware");
  st.gpus_per_node = static_cast<int>(top.integer("gpus_per_node"));
  st.micro_batch_size = top.integer("batch_size_per_gpu");
  st.sequence_length = top.integer("sequence_length");
  st.steps = top.integer("steps");
  // recorded since the study said what it studied and on which device; older files lack them
  if (top.has("vocab_size")) st.vocab_size = top.integer("vocab_size");
  if (top.has("hidden_size")) st.hidden_size = top.integer("hidden_size");
  if (top.has("device_name")) st.device_name = top.text("device_name");
  if (top.has("device_memory_bytes")) st.device_memory_bytes = top.integer("device_memory_bytes");
  const auto& points = top.at("points");
  if (!points.is_array()) top.fail("points", "must be an array");
  for (size_t k = 0; k < points.size(); ++k) {
    const Fields q(points[k], fmt::format("/points/{}", k), origin);
    LmScalingPoint p;
    p.sharding = lm_sharding(q);
    p.sequence_parallel = q.flag("sequence_parallel");
    const int64_t gpus = q.integer("gpus");
    if (gpus < 1 || gpus > kMaxSimulatedRanks)
      q.fail("gpus", fmt::format("must be in [1, {}], got {}", kMaxSimulatedRanks, gpus));
    p.gpus = static_cast<int>(gpus);
    p.nodes = static_cast<int>(q.integer("nodes"));
    if (q.has("device_memory_bytes")) p.device_memory_bytes = q.integer("device_memory_bytes");
    if (q.has("error")) {
      p.error = q.text("error");
      p.write_failed = q.flag("write_failed");
      if (q.has("memory_bytes_per_gpu")) p.memory_bytes_per_gpu = q.integer("memory_bytes_per_gpu");
      if (q.has("memory_reserved_bytes_per_gpu")) p.memory_reserved_bytes_per_gpu = q.integer("memory_reserved_bytes_per_gpu");
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
      // written since the study said its own-type efficiency and the stand-in body's share
      if (q.has("type_scaling_efficiency")) p.type_scaling_efficiency = q.number("type_scaling_efficiency");
      if (q.has("body_wire_bytes_per_token")) p.body_wire_bytes_per_token = q.number("body_wire_bytes_per_token");
      if (q.has("body_compute_ns")) p.body_compute_ns = q.integer("body_compute_ns");
      if (q.has("body_comm_ns")) p.body_comm_ns = q.integer("body_comm_ns");
      p.memory_bytes_per_gpu = q.integer("memory_bytes_per_gpu");
      if (q.has("memory_reserved_bytes_per_gpu")) p.memory_reserved_bytes_per_gpu = q.integer("memory_reserved_bytes_per_gpu");
      if (q.has("session")) p.session_path = q.text("session");
    }
    st.points.push_back(std::move(p));
  }
  return st;
}

}  // namespace embedscope::engine
