// run_scaling_study (exec/scaling_study.h): the workload on simulated clusters of growing size.
#include "embedscope/engine/exec/scaling_study.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/exec/write_room.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/sharding/idle_ranks.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/sessions/analysis/stats.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine {

namespace {

// the steady-state steps' median: the pipeline's drain steps left out (tester46 F21), the
// nearest-rank p50 that run and stats print (tester46 F13)
int64_t median(const std::vector<int64_t>& step_times, PipelineKind pipeline) {
  return sessions::median_nearest_rank(
      sessions::steady_state_steps(step_times, sessions::pipeline_drain_steps(to_string(pipeline))).counted);
}

// The measured steps' comm time per rank, embedding collectives and all of them, over the
// measured time (the sum of the slowest rank's step times); the steady steps only, as the step
// time (the pipeline's drain steps left out).
void comm_shares(const RunResult& r, int gpus, PipelineKind pipeline, ScalingPoint& p) {
  const auto steady = sessions::steady_state_steps(r.step_time_ns, sessions::pipeline_drain_steps(to_string(pipeline)));
  const auto counted = static_cast<int64_t>(steady.counted.size());
  int64_t measured = 0;
  for (int64_t t : steady.counted) measured += t;
  if (measured <= 0 || gpus <= 0) return;
  std::vector<int64_t> emb(static_cast<size_t>(gpus), 0), all(static_cast<size_t>(gpus), 0);
  for (const auto& e : r.events) {
    if (e.category != sessions::OpCategory::comm || e.step < 0 || e.step >= counted || e.rank < 0 || e.rank >= gpus) continue;
    const int64_t d = std::max<int64_t>(0, e.end_ns - e.start_ns);
    all[static_cast<size_t>(e.rank)] += d;
    if (std::string_view(e.name) != "dense_all_reduce") emb[static_cast<size_t>(e.rank)] += d;
  }
  double se = 0, sa = 0;
  for (int k = 0; k < gpus; ++k) {
    se += static_cast<double>(emb[static_cast<size_t>(k)]) / static_cast<double>(measured);
    sa += static_cast<double>(all[static_cast<size_t>(k)]) / static_cast<double>(measured);
  }
  p.embedding_comm_share = std::min(1.0, se / gpus);
  p.comm_share = std::min(1.0, sa / gpus);
}
// A refusal lists every rank that does not fit (1,024 lines on a big cluster): the first line,
// the first two ranks and how many more.
std::string abbreviate(const std::string& error) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at <= error.size()) {
    const size_t nl = error.find('\n', at);
    lines.push_back(error.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  if (lines.size() <= 4) return error;
  return fmt::format("{}\n{}\n{}\n  ... and {} more ranks", lines[0], lines[1], lines[2], lines.size() - 3);
}
}  // namespace

std::vector<int> scaling_study_sizes(const std::vector<int>& gpus, int per_node) {
  if (gpus.empty()) throw SpecError("scaling study: no cluster sizes (give at least one number of GPUs)");
  for (int g : gpus)
    if (g < 1 || g > kMaxSimulatedRanks)
      throw SpecError(fmt::format("scaling study: {} GPUs is outside [1, {}]", g, kMaxSimulatedRanks));
  std::vector<int> sizes = gpus;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (int g : sizes)
    if (g > per_node && g % per_node != 0)
      throw SpecError(fmt::format("scaling study: {} GPUs are not whole nodes of {} GPUs; give multiples of {} above one "
                                  "node (or set the node shape: --gpus-per-node)", g, per_node, per_node));
  return sizes;
}

std::vector<ScalingPoint> run_scaling_study(const WorkloadSpec& base, const ScalingStudyOptions& o) {
  const HardwareProfile hw = load_hardware_profile(o.hardware);
  if (o.shardings.empty()) throw SpecError("scaling study: no sharding types");
  if (o.gpus_per_node < 0) throw SpecError("scaling study: gpus per node must be positive");
  const int per_node = o.gpus_per_node > 0 ? o.gpus_per_node : hw.gpus_per_node;
  const std::vector<int> sizes = scaling_study_sizes(o.gpus, per_node);
  auto session_of = [&](ShardingType type, int gpus) {
    return (std::filesystem::path(o.session_dir) / fmt::format("{}_{}.db", to_string(type), gpus)).string();
  };
  // before any point runs: a session there is replaced only when allowed, and never one a live
  // run writes (SessionError, as run refuses it; retest54 R2: it was the point's write failure)
  if (!o.session_dir.empty())
    for (ShardingType type : o.shardings)
      for (int gpus : sizes) {
        const std::string path = session_of(type, gpus);
        if (o.overwrite) sessions::refuse_replacing_live_session(path);
        else if (std::filesystem::exists(path))
          throw SpecError(fmt::format("{}: already exists; choose another directory (-o) or allow replacing its sessions "
                                      "(--force-overwrite)", path));
      }
  if (!o.session_dir.empty()) std::filesystem::create_directories(o.session_dir);
  std::optional<std::string> write_failed_at;  // the point whose session could not be written
  // One point, its figures but the scaling efficiency (set below, from the common baseline).
  auto run_point = [&](ShardingType type, int gpus) -> ScalingPoint {
    ScalingPoint p;
    p.sharding = type;
    p.gpus = gpus;
    const int local = std::min(gpus, per_node);
    p.nodes = (gpus + local - 1) / local;
    WorkloadSpec spec = base;
    spec.devices.backend = Backend::simulated;
    spec.devices.hardware = o.hardware;
    spec.devices.memory_bytes = hw.gpu.memory_bytes;
    spec.devices.count = gpus;
    spec.sharding.local_world_size = local;
    spec.sharding.default_type = type;
    spec.sharding.per_table.clear();
    if (write_failed_at || (o.cancel && o.cancel->load())) {  // Ctrl-C / SIGTERM: the points after it are not run
      p.error = write_failed_at ? fmt::format("not run ({}'s session could not be written)", *write_failed_at)
                                : "not run (cancelled)";
      return p;
    }
    try {
      validate(spec, "scaling study");
      // TorchRec's planner with sharding_types = {type}: placed by estimated time, not bytes
      const PlanSearchResult searched = plan_search(spec, hw, PlanSearchOptions{{type}});
      ShardingPlan plan = searched.plan;
      p.placement = searched.proposer;
      // A table with fewer rows than the ranks a row split needs: the search keeps it
      // table_wise (plan42), which adds a pooled all-to-all to a row_wise point (tester49 F6:
      // criteo_kaggle row_wise on 8 H100s 0.338 ms a step against 0.280 ms split into empty
      // shards). The point is the type it is labelled: such a table gets the type too, split
      // as `run --sharding TYPE` splits it (plan_sharding: some ranks hold no rows).
      const ShardingPlan uniform = plan_sharding(spec);
      for (TablePlan& tp : plan.tables) {
        if (tp.type == type) continue;
        const auto u = std::find_if(uniform.tables.begin(), uniform.tables.end(),
                                    [&](const TablePlan& x) { return x.table == tp.table; });
        const std::string& name = spec.tables[static_cast<size_t>(tp.table)].name;
        if (u != uniform.tables.end() && u->type == type) tp = *u;
        else p.other_types.emplace_back(name, tp.type);
      }
      // Every table of the point's type with a shard of no rows, in table order: those split
      // above, and those the search split itself whose rows TorchRec's split (row_wise_split:
      // blocks of ceil(rows / ranks), the remainder, then none) leaves the last ranks without
      // (10 rows over 8 ranks: 2 each on ranks 0-4, none on 5-7).
      std::vector<int> empty;
      for (const TablePlan& tp : plan.tables)
        if (tp.type == type &&
            std::any_of(tp.shards.begin(), tp.shards.end(), [](const Shard& sh) { return sh.num_rows == 0; }))
          empty.push_back(tp.table);
      std::sort(empty.begin(), empty.end());
      for (const int t : empty) p.empty_shard_tables.push_back(spec.tables[static_cast<size_t>(t)].name);
      p.ranks_without_rows = ranks_without_rows(plan);
      TrainerOptions opt;
      opt.cancel = o.cancel;
      if (!o.session_dir.empty()) {
        p.session_path = session_of(type, gpus);
        opt.session_path = p.session_path;
        opt.session_overwrite = true;
      }
      const RunResult r = run_training(spec, plan, opt);
      if (r.ended == RunEnd::cancelled) {
        p.error = r.error.empty() ? "cancelled" : fmt::format("cancelled: {}", r.error);
      } else if (r.ended != RunEnd::complete) {
        p.error = fmt::format("{}: {}", to_string(r.ended), r.error);
        p.write_failed = r.ended == RunEnd::write_failed;
        if (p.write_failed) p.error += session_room_note(p.session_path);
      } else {
        p.step_time_ns = median(r.step_time_ns, spec.pipeline);
        p.samples_per_s = p.step_time_ns > 0 ? static_cast<double>(r.samples_per_step) * 1e9 / static_cast<double>(p.step_time_ns) : 0;
        for (const auto& rk : r.ranks) p.memory_bytes_per_gpu = std::max(p.memory_bytes_per_gpu, rk.memory_bytes);
        comm_shares(r, gpus, spec.pipeline, p);
        if (!r.step_time_ns.empty()) {  // every rank's bytes sent over the measured steps, per step
          int64_t sent = 0;
          for (const auto& rk : r.ranks) sent += rk.bytes_sent;
          p.wire_bytes_per_step = sent / static_cast<int64_t>(r.step_time_ns.size());
        }
      }
    } catch (const SpecError& e) {
      p.error = e.what();
    } catch (const sessions::SessionError& e) {
      // the session file could not be made or its first records not written (a full disk:
      // tester50 F5 read the bare SQLite text, exit 2); the path was checked above
      p.error = fmt::format("write_failed: {}{}; nothing was recorded", e.what(), session_room_note(p.session_path));
      p.write_failed = true;
    }
    if (p.write_failed) write_failed_at = fmt::format("{} {}", to_string(type), gpus);
    if (!p.error.empty()) {
      p.error = abbreviate(p.error);
      p.session_path.clear();
    }
    return p;
  };
  // The baseline of every type's efficiency (tester55 F3): the best samples/s per GPU at the
  // smallest size any type ran. So the smallest size runs for every type first (and the next
  // size, for every type, while none ran); the points are handed out in type-major order, each
  // as soon as the points before it were: a point that ran once the baseline is known, one with
  // an error at once (a 1-GPU refusal prints while the next size runs: the sigterm test waits on it).
  const size_t types = o.shardings.size();
  std::vector<std::optional<ScalingPoint>> slot(types * sizes.size());  // type-major
  const auto at = [&](size_t type, size_t size) -> std::optional<ScalingPoint>& { return slot[type * sizes.size() + size]; };
  std::optional<ScalingBaseline> baseline;
  bool baseline_known = false;
  std::vector<ScalingPoint> out;
  const auto hand_out = [&] {
    while (out.size() < slot.size()) {
      std::optional<ScalingPoint>& next = slot[out.size()];
      if (!next || (next->error.empty() && !baseline_known)) return;
      ScalingPoint p = std::move(*next);
      if (p.error.empty() && baseline && baseline->samples_per_s_per_gpu > 0 && p.gpus > 0)
        p.scaling_efficiency = p.samples_per_s / p.gpus / baseline->samples_per_s_per_gpu;
      if (o.on_point) o.on_point(p);
      out.push_back(std::move(p));
    }
  };
  for (size_t g = 0; g < sizes.size() && !baseline_known; ++g) {
    std::vector<ScalingPoint> here;
    for (size_t k = 0; k < types; ++k) {
      at(k, g) = run_point(o.shardings[k], sizes[g]);
      here.push_back(*at(k, g));
      hand_out();
    }
    baseline = scaling_baseline(here);
    baseline_known = baseline.has_value() || g + 1 == sizes.size();
  }
  baseline_known = true;
  hand_out();
  for (size_t k = 0; k < types; ++k)
    for (size_t g = 0; g < sizes.size(); ++g) {
      if (!at(k, g)) at(k, g) = run_point(o.shardings[k], sizes[g]);
      hand_out();
    }
  return out;
}

std::optional<ScalingBaseline> scaling_baseline(const std::vector<ScalingPoint>& points) {
  std::optional<ScalingBaseline> best;
  for (const ScalingPoint& p : points) {
    if (!p.error.empty() || p.gpus < 1) continue;
    const double per_gpu = p.samples_per_s / p.gpus;
    if (!best || p.gpus < best->gpus || (p.gpus == best->gpus && per_gpu > best->samples_per_s_per_gpu))
      best = ScalingBaseline{p.sharding, p.gpus, per_gpu};
  }
  return best;
}

nlohmann::json to_json(const ScalingStudy& st) {
  nlohmann::json j = {{"workload", st.workload},       {"hardware", st.hardware},
                      {"simulated", true},             {"gpus_per_node", st.gpus_per_node},
                      {"batch_size_per_gpu", st.batch_size_per_gpu}, {"steps", st.steps},
                      {"points", nlohmann::json::array()}};
  if (!st.profile_note.empty()) j["profile_note"] = st.profile_note;
  // the efficiencies' common baseline (tester55 F3); null when no point ran. Not "baseline": the
  // keys are dumped sorted, and a study is recognised by its first key, "batch_size_per_gpu"
  // (workload/json_kind.cpp, the workbench's is_scaling_study_file)
  if (const auto b = scaling_baseline(st.points))
    j["efficiency_baseline"] = {{"sharding", to_string(b->sharding)}, {"gpus", b->gpus}, {"samples_per_s_per_gpu", b->samples_per_s_per_gpu}};
  else
    j["efficiency_baseline"] = nullptr;
  for (const ScalingPoint& p : st.points) {
    nlohmann::json q = {{"sharding", to_string(p.sharding)}, {"gpus", p.gpus}, {"nodes", p.nodes}};
    if (!p.error.empty()) {
      q["error"] = p.error;
      if (p.write_failed) q["write_failed"] = true;
    } else {
      q.update({{"step_time_ns", p.step_time_ns},
                {"samples_per_s", p.samples_per_s},
                {"samples_per_s_per_gpu", p.gpus > 0 ? p.samples_per_s / p.gpus : 0.0},
                {"scaling_efficiency", p.scaling_efficiency},
                {"embedding_comm_share", p.embedding_comm_share},
                {"comm_share", p.comm_share},
                {"memory_bytes_per_gpu", p.memory_bytes_per_gpu},
                {"wire_bytes_per_step", p.wire_bytes_per_step}});
      if (!p.placement.empty()) q["placement"] = p.placement;
      if (p.step_time_high_ns > 0) q["step_time_range_ns"] = {p.step_time_low_ns, p.step_time_high_ns};
      if (!p.other_types.empty()) {
        q["other_types"] = nlohmann::json::array();
        for (const auto& [name, t] : p.other_types) q["other_types"].push_back({{"table", name}, {"sharding", to_string(t)}});
      }
      if (!p.empty_shard_tables.empty()) q["empty_shard_tables"] = p.empty_shard_tables;
      if (!p.ranks_without_rows.empty()) q["ranks_without_rows"] = p.ranks_without_rows;
      if (!p.session_path.empty()) q["session"] = p.session_path;
    }
    j["points"].push_back(std::move(q));
  }
  return j;
}

ScalingStudy scaling_study_from_json(const nlohmann::json& j, const std::string& origin) {
  using nlohmann::json;
  auto fail = [&](const std::string& ptr, const std::string& why) -> void {
    throw SpecError(fmt::format("{}: {}: {}", origin, ptr.empty() ? "/" : ptr, why));
  };
  auto get = [&](const json& o, const std::string& ptr, const char* key, json::value_t type) -> const json& {
    if (!o.is_object()) fail(ptr, "must be an object");
    const auto it = o.find(key);
    if (it == o.end()) fail(ptr + "/" + key, "is missing");
    const bool number = type == json::value_t::number_float;
    if (number ? !it->is_number() : (type == json::value_t::number_integer ? !it->is_number_integer() : it->type() != type))
      fail(ptr + "/" + key, number ? "must be a number" : type == json::value_t::number_integer ? "must be an integer"
                                   : type == json::value_t::string ? "must be a string" : "must be an array");
    return *it;
  };
  using V = json::value_t;
  // an lm_embedding study (exec/lm_scaling_study.h) has tokens, not samples, and LM sharding types
  if (j.is_object() && j.contains("model") && j["model"] == "lm_embedding")
    fail("/model", "an lm_embedding scaling study (tokens/s, bytes per token, LM sharding types), not a DLRM one: "
                   "read it with lm_scaling_study_from_json");
  ScalingStudy st;
  st.workload = get(j, "", "workload", V::string).get<std::string>();
  st.hardware = get(j, "", "hardware", V::string).get<std::string>();
  st.gpus_per_node = get(j, "", "gpus_per_node", V::number_integer).get<int>();
  st.batch_size_per_gpu = get(j, "", "batch_size_per_gpu", V::number_integer).get<int64_t>();
  st.steps = get(j, "", "steps", V::number_integer).get<int64_t>();
  if (j.contains("profile_note")) st.profile_note = get(j, "", "profile_note", V::string).get<std::string>();
  const json& points = get(j, "", "points", V::array);
  for (size_t k = 0; k < points.size(); ++k) {
    const std::string ptr = fmt::format("/points/{}", k);
    const json& q = points[k];
    ScalingPoint p;
    const std::string type = get(q, ptr, "sharding", V::string).get<std::string>();
    p.sharding = sharding_type_from_string(type, origin + ": " + ptr + "/sharding");
    p.gpus = get(q, ptr, "gpus", V::number_integer).get<int>();
    if (p.gpus < 1 || p.gpus > kMaxSimulatedRanks) fail(ptr + "/gpus", fmt::format("must be in [1, {}], got {}", kMaxSimulatedRanks, p.gpus));
    p.nodes = get(q, ptr, "nodes", V::number_integer).get<int>();
    if (q.contains("error")) {
      p.error = get(q, ptr, "error", V::string).get<std::string>();
      p.write_failed = q.contains("write_failed") && q["write_failed"].is_boolean() && q["write_failed"].get<bool>();
    } else {
      p.step_time_ns = get(q, ptr, "step_time_ns", V::number_integer).get<int64_t>();
      p.samples_per_s = get(q, ptr, "samples_per_s", V::number_float).get<double>();
      p.scaling_efficiency = get(q, ptr, "scaling_efficiency", V::number_float).get<double>();
      p.embedding_comm_share = get(q, ptr, "embedding_comm_share", V::number_float).get<double>();
      p.comm_share = get(q, ptr, "comm_share", V::number_float).get<double>();
      p.memory_bytes_per_gpu = get(q, ptr, "memory_bytes_per_gpu", V::number_integer).get<int64_t>();
      if (q.contains("wire_bytes_per_step"))  // absent from studies written before it was recorded
        p.wire_bytes_per_step = get(q, ptr, "wire_bytes_per_step", V::number_integer).get<int64_t>();
      if (q.contains("step_time_range_ns")) {
        const auto& r = get(q, ptr, "step_time_range_ns", V::array);
        if (r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer() || r[0].get<int64_t>() > r[1].get<int64_t>())
          fail(ptr + "/step_time_range_ns", "must be [low, high], integers (ns), low <= high");
        p.step_time_low_ns = r[0].get<int64_t>();
        p.step_time_high_ns = r[1].get<int64_t>();
      }
      if (q.contains("placement")) p.placement = get(q, ptr, "placement", V::string).get<std::string>();
      if (q.contains("session")) p.session_path = get(q, ptr, "session", V::string).get<std::string>();
      if (q.contains("empty_shard_tables")) {
        const auto& e = get(q, ptr, "empty_shard_tables", V::array);
        for (size_t i = 0; i < e.size(); ++i) {
          if (!e[i].is_string()) fail(fmt::format("{}/empty_shard_tables/{}", ptr, i), "must be a string (a table's name)");
          p.empty_shard_tables.push_back(e[i].get<std::string>());
        }
      }
      if (q.contains("ranks_without_rows")) {
        const auto& e = get(q, ptr, "ranks_without_rows", V::array);
        for (size_t i = 0; i < e.size(); ++i) {
          if (!e[i].is_number_integer() || e[i].get<int64_t>() < 0 || e[i].get<int64_t>() >= p.gpus)
            fail(fmt::format("{}/ranks_without_rows/{}", ptr, i), fmt::format("must be a rank in [0, {})", p.gpus));
          p.ranks_without_rows.push_back(e[i].get<int>());
        }
      }
      if (q.contains("other_types")) {
        const auto& o = get(q, ptr, "other_types", V::array);
        for (size_t k = 0; k < o.size(); ++k) {
          const std::string op = fmt::format("{}/other_types/{}", ptr, k);
          if (!o[k].is_object()) fail(op, "must be an object {\"table\", \"sharding\"}");
          const std::string name = get(o[k], op, "table", V::string).get<std::string>();
          p.other_types.emplace_back(name, sharding_type_from_string(get(o[k], op, "sharding", V::string).get<std::string>(),
                                                                     origin + ": " + op + "/sharding"));
        }
      }
    }
    st.points.push_back(std::move(p));
  }
  return st;
}

}  // namespace embedscope::engine
