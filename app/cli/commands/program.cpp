// `embedscope program`: the step program of one rank (engine program/step_program.h): every op
// of one training step on the compute and comm lanes, what it waits for, and the collectives it
// runs with their elements per peer, in the order the executors run them.

#include <algorithm>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "output/output.h"
#include "workload_args.h"

namespace embedscope::cli {

namespace es = embedscope::engine;

namespace {

struct ProgramState {
  WorkloadArgs args;
  int rank = 0;
  int64_t iteration = 0;
  CLI::Option* iteration_opt = nullptr;  // given: that iteration, checked (a negative one is bad input)
  std::string plan;
  bool json = false;
};

int cmd_program(ProgramState& s) {
  if (is_lm_args(s.args)) {  // "model": "lm_embedding": its program (program/lm_program.h); its plan is its sharding
    if (!s.plan.empty()) throw es::SpecError("--plan: not for an lm_embedding workload (its plan is its sharding)");
    const es::LmWorkloadSpec spec = load_lm(s.args);
    if (s.rank < 0 || s.rank >= spec.world_size)
      throw es::SpecError(fmt::format("--rank {}: the workload has ranks 0 to {}", s.rank, spec.world_size - 1));
    if (s.iteration_opt->count() > 0 && s.iteration < 0)
      throw es::SpecError(fmt::format("--iteration {}: must be >= 0", s.iteration));
    const es::StepProgram p = es::build_lm_step_program(spec, s.rank, s.iteration_opt->count() > 0 ? s.iteration : 0);
    std::cout << (s.json ? dump(es::to_json(p)) + "\n" : es::to_text(p));
    return 0;
  }
  refuse_flags_the_plan_overrides(s.args, s.plan);
  const es::WorkloadSpec spec = load(s.args);
  const es::ShardingPlan plan = s.plan.empty() ? with_origin(s.args.origin, [&] { return es::plan_sharding(spec); })
                                               : es::load_plan_file(spec, s.plan);
  // tables in host_cached memory: their caches start empty, so the host-link ops of the first
  // `cold` iterations move more rows than the steady state's (the program a run executes there,
  // and what --simulate times; tester55 F1: every iteration showed the steady state)
  const int64_t cold = es::cold_start_iterations(spec, plan), total = spec.warmup_steps + spec.steps;
  const int64_t steady = std::max(es::steady_iteration(spec), std::min(cold, total - 1));
  const int64_t it = s.iteration_opt->count() > 0 ? s.iteration : steady;
  const es::StepProgram p = es::build_step_program(spec, plan, s.rank, it, it < cold);
  const std::string cache_note =
      cold == 0 ? ""
      : it < cold
          ? fmt::format("the caches of the host_cached tables start empty: iterations 0-{} are built with the cache "
                        "model's cold-start expectation (the host-link ops move more rows than later){}",
                        cold - 1, cold < total ? fmt::format("; from iteration {} the steady state", cold) : std::string())
          : fmt::format("the caches of the host_cached tables are full from iteration {} on: this is the steady "
                        "state (iterations 0-{} move more rows while they fill)",
                        cold, cold - 1);
  // live rebalancing: the plan a run holds after its first move is decided by the load it
  // measures, so the program is the starting plan's (tester35 D3: nothing said so)
  const std::string rebalance_note =
      spec.rebalance.enabled()
          ? "the workload rebalances live (rebalance): this is the program of the plan the run starts with; after a "
            "move the run follows the plan it moved to, and the policy's own ops (rebalance_load_all_gather, reshard) "
            "are not part of the step program"
          : "";
  if (s.json) {
    auto j = es::to_json(p);
    if (!rebalance_note.empty()) j["note"] = rebalance_note;
    if (!cache_note.empty()) j["cache_note"] = cache_note;
    j["cold_start"] = it < cold;
    std::cout << dump(j) << "\n";
  } else {
    std::cout << es::to_text(p);
    if (!rebalance_note.empty()) std::cout << "note: " << rebalance_note << "\n";
    if (!cache_note.empty()) std::cout << "note: " << cache_note << "\n";
  }
  return 0;
}

}  // namespace

Command add_program_command(CLI::App& app) {
  auto s = std::make_shared<ProgramState>();
  auto* cmd = app.add_subcommand("program", "Print the step program of one rank: the ops of one training step, "
                                            "their lanes, dependencies and collectives");
  add_workload_options(cmd, s->args);
  cmd->add_option("--rank", s->rank, "The rank whose program to print (default 0)")->check(kInteger);
  s->iteration_opt = cmd->add_option("--iteration", s->iteration,
                  "The iteration, 0-based with warmup steps (default: the first steady-state one; pipelines start "
                  "and end differently, and the caches of host_cached tables start empty)")
      ->check(kInteger);
  cmd->add_option("--plan", s->plan, "A sharding plan file (as `embedscope plan --json` prints) instead of planning");
  cmd->add_flag("--json", s->json, "Print the program as JSON");
  return {cmd, [s] { return cmd_program(*s); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli
