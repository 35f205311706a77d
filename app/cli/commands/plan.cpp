// `embedscope plan`: the sharding plan and the memory each device needs, without running.

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "lm.h"
#include "embedscope/engine/planner/host_placement.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/gpu_placement.h"
#include "embedscope/engine/exec/host_memory_check.h"
#include "embedscope/engine/planner/host_memory.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/planner/storage_fallback.h"
#include "embedscope/engine/rebalance/reshard.h"
#include "embedscope/engine/sharding/idle_ranks.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/sharding/sharding.h"
#include "output/output.h"
#include "profile_trust_text.h"
#include "workload_args.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;

namespace {

// The memory each rank's device needs (planner/memory estimate), one object per rank, bytes:
// `plan --json`'s and `plan --auto --json`'s "memory"; "reserved_bytes" the most its allocator
// reserves (segments) replaying the run's buffers in the run's order (DeviceMemoryEstimate::
// peak_reserved: above the capacity, check_memory_fits replays it at the capacity).
json memory_json(const es::WorkloadSpec& spec, const std::vector<es::DeviceMemoryEstimate>& est) {
  json out = json::array();
  for (const auto& e : est)
    out.push_back({{"rank", e.rank}, {"weights_bytes", e.weights}, {"optimizer_state_bytes", e.optimizer_state},
                   {"dense_bytes", e.dense}, {"buffers_bytes", e.buffers},
                   {"pipeline_buffers_bytes", e.pipeline_buffers}, {"cache_bytes", e.cache},
                   {"total_bytes", e.total()}, {"reserved_bytes", e.peak_reserved},
                   {"capacity_bytes", spec.devices.memory_bytes},
                   {"host_bytes", e.host}, {"host_capacity_bytes", spec.devices.host_memory_bytes}});
  return out;
}

// The same as a table, a line per rank; tables in host memory add the device cache (in the
// total) and the host side (not) as columns of their own. `reserved`: what the allocator setting
// must reserve for it (segments or pages, DeviceMemoryEstimate::peak_reserved), the figure that
// decides whether it fits the capacity (tester59 F6: only --json had it).
std::string memory_text(const es::WorkloadSpec& spec, const std::vector<es::DeviceMemoryEstimate>& est) {
  const bool host = std::any_of(spec.tables.begin(), spec.tables.end(),
                                [](const es::TableSpec& t) { return t.placement != es::TablePlacement::device; });
  std::string out = fmt::format("{:<5} {:>12} {:>16} {:>12} {:>12} {:>12} {:>12} {:>12}", "rank", "weights",
                                "optimizer state", "dense", "buffers", "total", "reserved", "capacity");
  out += host ? fmt::format(" {:>12} {:>12} {:>14}\n", "device cache", "host", "host capacity") : std::string("\n");
  for (const auto& e : est) {
    out += fmt::format("{:<5} {:>12} {:>16} {:>12} {:>12} {:>12} {:>12} {:>12}", e.rank, es::format_bytes(e.weights),
                       es::format_bytes(e.optimizer_state), es::format_bytes(e.dense), es::format_bytes(e.buffers),
                       es::format_bytes(e.total()), es::format_bytes(e.peak_reserved),
                       es::format_bytes(spec.devices.memory_bytes));
    out += host ? fmt::format(" {:>12} {:>12} {:>14}\n", es::format_bytes(e.cache), es::format_bytes(e.host),
                              es::format_bytes(spec.devices.host_memory_bytes))
                : std::string("\n");
  }
  return out;
}

// This machine's memory as `run` checks it before it starts (tester46 F4: plan said nothing of
// the 125.2 GiB that run refuses on a 23.5 GiB machine; tester52 F3: nor did `plan --auto` of the
// plan it chose): said, not refused, since a plan of a large workload is what plan is for. Only
// for a measured backend (cpu, cuda); a simulated plan is a cluster's.
struct HostVerdict {
  bool measured = false;   // the backend runs on this machine
  es::HostMemory machine;  // /proc/meminfo now
  std::string refusal;     // run's refusal (exec/host_memory_check.h); "" when it fits
  int64_t need = 0;        // bytes the ranks keep in this process (host_bytes_of_rank summed)
};

HostVerdict host_verdict(const es::WorkloadSpec& spec, const std::vector<es::DeviceMemoryEstimate>& est) {
  HostVerdict v;
  v.measured = spec.devices.backend != es::Backend::simulated;
  if (!v.measured) return v;
  v.machine = es::this_host_memory();
  v.refusal = es::detail::host_memory_refusal(spec, est, -1, v.machine);
  for (const auto& e : est) v.need = es::add_bytes_saturating(v.need, es::detail::host_bytes_of_rank(spec.devices.backend, e));
  return v;
}

// `plan --json`'s "host_memory" key (one key, which plan_from_json ignores: `plan --json` is
// also a plan file); nothing for a simulated plan.
void add_host_verdict_json(json& j, const HostVerdict& v) {
  if (!v.measured) return;
  json h{{"needed_bytes", v.need},
         {"fits", v.refusal.empty()},
         {"machine_memory_bytes", v.machine.total_bytes},
         {"available_memory_bytes", v.machine.available_bytes}};
  if (!v.refusal.empty()) h["refusal"] = v.refusal;
  j["host_memory"] = h;
}

// The line "this machine fits: ..." / "this machine DOES NOT FIT: ..."; "" for a simulated plan.
std::string host_verdict_text(const es::WorkloadSpec& spec, const HostVerdict& v) {
  if (!v.measured) return "";
  return fmt::format("this machine {}: a {} run's {} ranks keep {} in this process; this machine has {}{}\n",
                     v.refusal.empty() ? "fits" : "DOES NOT FIT", es::to_string(spec.devices.backend), spec.devices.count,
                     es::format_bytes(v.need), es::host_memory_text(v.machine),
                     v.refusal.empty() ? "" : "; `run` refuses it (--simulate PROFILE plans a cluster)");
}

// `plan --auto`: the planner's search (planner/search.h) and TorchRec's planner statistics of
// the plan it chose (planner/stats.h). No plan fitting is a SpecError naming the rank and term.
// `plan --auto --allow-storage`: the tables whose storage the planner changed (planner/
// storage_fallback.h), as JSON keys of the plan document and as a text block. Kept apart from the
// rest of the printout.
void add_storage_json(json& j, const es::StoragePlanResult& sr) { j.update(es::storage_changes_json(sr)); }
std::string storage_block_text(const es::StoragePlanResult& sr) {
  const std::string t = es::storage_changes_text(sr);
  return t.empty() ? t : t + "\n";
}

int cmd_plan_auto(WorkloadArgs& a, bool as_json, const std::vector<std::string>& sharding_types,
                  const std::vector<std::string>& allow_storage) {
  if (a.was_given("--sharding"))
    throw es::SpecError("--sharding: cannot be combined with --auto (the search picks every table's type; fix a "
                        "table's type with a sharding.tables override in the workload, or give --sharding-types)");
  es::PlanSearchOptions options;
  // a long search says where it is on stderr, once a second (stdout, --json's too, unchanged)
  options.progress = [](const es::SearchProgress& p) {
    fmt::print(stderr, "plan --auto: {:.0f} s, {} proposal(s), {} scored; best so far: {}\n", p.seconds, p.proposals,
               p.scored,
               p.best_proposer.empty() ? std::string("none fits yet")
                                       : fmt::format("{} ({} {:.3f} ms)", p.best_proposer,
                                                     p.best_scored ? "critical path" : "estimated", p.best_ns / 1e6));
  };
  for (const std::string& t : sharding_types)
    options.sharding_types.push_back(es::sharding_type_from_string(t, "--sharding-types"));
  const std::vector<es::StorageOption> allowed = es::storage_options_from_strings(allow_storage);
  const es::WorkloadSpec written = load(a);
  const es::StoragePlanResult sr = with_origin(
      a.origin, [&] { return es::plan_search_with_storage(written, es::planning_profile(written), options, allowed); });
  const es::WorkloadSpec& spec = sr.spec;  // with the planner's storage changes, if any
  const es::PlanSearchResult& r = sr.search;
  const auto est = es::estimate_memory(spec, r.plan);
  const HostVerdict host = host_verdict(spec, est);  // of the chosen plan, as plain plan's (tester52 F3)
  // how far to trust the critical path (tester63d F1, F3, F6): the profile's error band or assumed
  // figures, and the chosen plan's critical path with them moved (plan_stats on each corner)
  const es::HardwareProfile hw = es::planning_profile(spec);
  const StepTrust trust = step_trust(hw, r.stats.critical_path_ns, [&](const es::HardwareProfile& corner) {
    return es::plan_stats(spec, r.plan, corner).critical_path_ns;
  });
  if (as_json) {
    json j = es::to_json(spec, r.plan);
    j["table_storage"] = table_storage_estimate_json(spec, r.plan);
    j["fits"] = r.stats.fits;
    j.update(pipeline_json(spec));
    j["search"] = {{"proposer", r.proposer},     {"proposals", r.proposals},
                   {"feasible", r.feasible},     {"seconds", r.seconds},
                   {"critical_path_ns", r.stats.critical_path_ns}, {"max_hbm_bytes", r.max_hbm_bytes}};
    // the best other plan the full estimate scored (null when none other fits)
    j["search"]["runner_up"] = r.runner_up_proposer.empty()
                                   ? json(nullptr)
                                   : json{{"proposer", r.runner_up_proposer},
                                          {"critical_path_ns", r.runner_up_critical_path_ns},
                                          {"max_hbm_bytes", r.runner_up_max_hbm_bytes}};
    j["stats"] = es::to_json(r.stats);
    j["memory"] = memory_json(spec, est);
    j["ranks_without_rows"] = es::ranks_without_rows(r.plan);  // as plan's: they still join every collective
    j["backend"] = es::to_string(spec.devices.backend);  // what auto became, as plan's
    j["backend_requested"] = es::to_string(a.requested_backend);
    add_host_verdict_json(j, host);
    add_storage_json(j, sr);
    j["profile_trust"] = step_trust_json(hw, trust);
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::cout << storage_block_text(sr);
  std::cout << plan_table(spec, r.plan) << "\n" << table_storage_text(spec, r.plan) << "\n" << pipeline_text(spec)
            << "\n" << memory_text(spec, est) << host_verdict_text(spec, host);
  // the chosen plan's ranks with no embedding rows, as plain plan names them (--sharding-types
  // table_wise with more ranks than tables leaves some)
  if (const std::string note = es::idle_ranks_note(r.plan); !note.empty()) std::cout << note << "\n";
  std::cout << "\n";
  std::cout << fmt::format("planner search: evaluated {} proposal(s), found {} possible plan(s), ran for {:.2f} s; best: "
                           "{} (critical path {:.3f} ms)",
                           r.proposals, r.feasible, r.seconds, r.proposer, 1e-6 * static_cast<double>(r.stats.critical_path_ns));
  if (r.runner_up_proposer.empty())
    std::cout << "; runner-up: none (no other distinct plan that fits was scored)\n";
  else if (std::abs(static_cast<double>(r.runner_up_critical_path_ns - r.stats.critical_path_ns)) <=
           es::kCriticalPathTie * static_cast<double>(std::min(r.stats.critical_path_ns, r.runner_up_critical_path_ns)))
    // a tie, which goes to the plan with less memory on its fullest device (search.h kCriticalPathTie)
    std::cout << fmt::format("; runner-up: {} (critical path {:.3f} ms, {:+} ns: a tie within {:g}%, which goes to "
                             "less memory on the fullest device: the best's {} against {})\n",
                             r.runner_up_proposer, 1e-6 * static_cast<double>(r.runner_up_critical_path_ns),
                             r.runner_up_critical_path_ns - r.stats.critical_path_ns, 100 * es::kCriticalPathTie,
                             es::format_bytes(r.max_hbm_bytes), es::format_bytes(r.runner_up_max_hbm_bytes));
  else
    std::cout << fmt::format("; runner-up: {} (critical path {:.3f} ms, +{:.3f} ms)\n", r.runner_up_proposer,
                             1e-6 * static_cast<double>(r.runner_up_critical_path_ns),
                             1e-6 * static_cast<double>(r.runner_up_critical_path_ns - r.stats.critical_path_ns));
  std::cout << es::to_text(r.stats);
  std::cout << step_trust_text(hw, trust, "critical path");  // "profile ..." / "assumed ...": its trust
  if (spec.devices.backend != es::Backend::simulated && spec.devices.hardware.empty())
    std::cout << fmt::format("(cpu ranks: the times are relative costs from hardware profile {}, not this machine's)\n",
                             es::kDefaultPlanningProfile);
  return 0;
}

int cmd_plan(WorkloadArgs& a, bool as_json, bool auto_plan, const std::vector<std::string>& sharding_types,
             const std::vector<std::string>& allow_storage, const std::string& plan_file) {
  if (!plan_file.empty() && auto_plan)
    throw es::SpecError(fmt::format("--plan {}: not with --auto (the search makes its own plan)", plan_file));
  if (!allow_storage.empty() && !auto_plan)
    throw es::SpecError("--allow-storage: only with --auto (the storage options the search may use when nothing fits "
                        "as written)");
  if (!sharding_types.empty() && !auto_plan)
    throw es::SpecError("--sharding-types: only with --auto (it restricts the search; --sharding sets one type for every "
                        "table without a search)");
  if (is_lm_args(a)) {  // "model": "lm_embedding" (issue 19)
    if (auto_plan) throw es::SpecError("--auto: not for an lm_embedding workload (no search over its sharding types yet)");
    return cmd_plan_lm(a, as_json);
  }
  if (!plan_file.empty() && is_lm_args(a))
    throw es::SpecError("--plan: not for an lm_embedding workload (its plan is its sharding)");
  if (auto_plan) return cmd_plan_auto(a, as_json, sharding_types, allow_storage);
  refuse_flags_the_plan_overrides(a, plan_file);
  es::WorkloadSpec spec = load(a);
  // what `run` refuses before it starts, `plan` refuses too (exit 2): a live rebalancing policy
  // the backend or the tables cannot follow
  if (spec.rebalance.enabled())
    with_origin(a.origin, [&] {
      if (const std::string why = es::rebalance::live_rebalance_unsupported(spec, es::to_string(spec.devices.backend));
          !why.empty())
        throw es::SpecError(why);
    });
  // a written plan (`run --plan FILE`'s): its storage changes applied to the workload, then the
  // plan validated against it as run does; else the greedy planner's
  if (!plan_file.empty()) es::apply_plan_file_storage(spec, plan_file);
  const es::ShardingPlan plan = plan_file.empty() ? with_origin(a.origin, [&] { return es::plan_sharding(spec); })
                                                  : es::load_plan_file(spec, plan_file);
  // a hot table in host memory that the greedy plan puts beside other tables (planner/host_placement.h)
  if (plan_file.empty())
    for (const std::string& w : es::host_table_placement_warnings(spec, plan))
      fmt::print(stderr, "warning: {}: {}\n", a.origin, w);
  const auto est = es::estimate_memory(spec, plan);
  // A plan that does not fit is still printed (what each device would need), then refused
  // (exit 2); with --json as one document that carries the error ("ended": "bad_input").
  std::string does_not_fit;
  try {
    with_origin(a.origin, [&] {
      es::check_memory_fits(spec, est);
      // simulated cpu ranks share their node's memory (tester44 F12)
      if (spec.devices.backend == es::Backend::simulated)
        es::check_node_memory_fits(est, plan.local_world_size, es::planning_profile(spec));
    });
  } catch (const es::SpecError& e) {
    does_not_fit = e.what();
  }
  const HostVerdict host = host_verdict(spec, est);  // this machine's memory as `run` checks it
  // cuda: the GPU each rank runs on (load already refused a placement that does not work)
  std::string placement_text;
  json placement_json = json::array();
  if (spec.devices.backend == es::Backend::cuda) {
    const auto& gpus = profiler::cuda_devices();
    const es::GpuPlacement p = es::check_cuda_placement(spec, gpus);
    placement_text = "backend cuda, GPUs: " + es::describe_placement(p, gpus.names) + "\n";
    if (const std::string note = auto_backend_note(a, spec); !note.empty()) placement_text += "             (" + note + ")\n";
    for (int g = 0; g < p.devices_used(); ++g)
      placement_json.push_back({{"gpu", g},
                                {"name", static_cast<size_t>(g) < gpus.names.size() ? gpus.names[static_cast<size_t>(g)] : ""},
                                {"ranks", p.ranks_on(g)}});
  } else if (const std::string note = auto_backend_note(a, spec); !note.empty()) {
    // auto on a machine without a GPU planned for cpu ranks: say so (tester39 F11), as the
    // cuda case says "backend cuda, GPUs: ..."
    placement_text = fmt::format("backend      {} ({})\n", es::to_string(spec.devices.backend), note);
  }
  if (as_json) {
    json j = es::to_json(spec, plan);
    j["backend"] = es::to_string(spec.devices.backend);  // what auto became
    j["backend_requested"] = es::to_string(a.requested_backend);
    j["table_storage"] = table_storage_estimate_json(spec, plan);
    if (!placement_json.empty()) j["gpu_placement"] = placement_json;
    j["fits"] = does_not_fit.empty();
    if (!does_not_fit.empty()) {
      j["ended"] = "bad_input";
      j["error"] = does_not_fit;
    }
    j.update(pipeline_json(spec));
    j["memory"] = memory_json(spec, est);
    j["ranks_without_rows"] = es::ranks_without_rows(plan);  // tester58 F4: they still join every collective
    add_host_verdict_json(j, host);
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << plan_table(spec, plan) << "\n" << table_storage_text(spec, plan) << "\n" << pipeline_text(spec)
              << "\n";
    // a refused plan: its refusal on stdout too, in place of "this machine fits" (tester59 F6)
    std::cout << memory_text(spec, est) << placement_text
              << (does_not_fit.empty() || !host.refusal.empty() ? host_verdict_text(spec, host)
                                                                 : "the devices DO NOT FIT this plan: " + does_not_fit + "\n");
    if (const std::string note = es::idle_ranks_note(plan); !note.empty()) std::cout << note << "\n";
  }
  if (!does_not_fit.empty()) {
    fmt::print(stderr, "error: {}\n", does_not_fit);
    return 2;
  }
  return 0;
}

struct PlanState {
  WorkloadArgs args;
  std::string plan_file;
  bool json = false;
  bool auto_plan = false;
  std::vector<std::string> sharding_types;
  std::vector<std::string> allow_storage;
};

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto s = std::make_shared<PlanState>();
  auto* plan = app.add_subcommand("plan", "Show the sharding plan and the memory each device needs, without running");
  add_workload_options(plan, s->args);
  plan->add_flag("--json", s->json, "Print the plan as JSON");
  plan->add_flag("--auto", s->auto_plan,
                 "Search for the plan with the shortest estimated critical path that fits (proposers greedy, uniform, "
                 "balanced, grid; LPT partitioner) and print TorchRec's planner statistics of it");
  plan->add_option("--sharding-types", s->sharding_types,
                   "With --auto: the sharding types the search may give tables, comma-separated (TorchRec's "
                   "sharding_types constraint), e.g. table_wise: every table table-wise, placed by estimated time")
      ->delimiter(',')
      ->allow_extra_args(false);  // one value a use: `--opt a,b work.json` leaves the file positional (tester44 F13)
  plan->add_option("--allow-storage", s->allow_storage,
                   "With --auto: when no plan of the workload as written fits, the storage the search may give the "
                   "largest tables, comma-separated, tried in this order: fp16 (data_type), bf16_state "
                   "(optimizer_state_type bf16), int8 (data_type), host_cached (placement, with a cache_load_factor that fits); the plan says which tables changed and why")
      ->delimiter(',')
      ->allow_extra_args(false);  // one value a use: `--opt a,b work.json` leaves the file positional (tester44 F13)
  plan->add_option("--plan", s->plan_file,
                   "Show this sharding plan (the JSON `embedscope plan --json` or `rebalance --plan-out` writes, as "
                   "`run --plan` takes it) instead of planning: its memory per device and everything plan prints, "
                   "without running; `--plan auto` is --auto");
  return {plan, [s] {
            const bool auto_plan = s->auto_plan || s->plan_file == "auto";
            return cmd_plan(s->args, s->json, auto_plan, s->sharding_types, s->allow_storage,
                            s->plan_file == "auto" ? std::string() : s->plan_file);
          },
          [s] { return s->json; }};
}

}  // namespace embedscope::cli
