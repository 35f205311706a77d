// embedscope: the headless command line (no Qt). Exit codes: 0 ok, 1 the job failed
// (OOM, hang, divergence), 2 bad input (config, file, flags).

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding.h"
#include "embedscope/engine/spec.h"
#include "embedscope/engine/trainer.h"
#include "embedscope/sessions/stats.h"

namespace es = embedscope::engine;
using nlohmann::json;

namespace {

constexpr const char* kDefaultPreset = "criteo_kaggle";

struct WorkloadArgs {
  std::string file;
  std::string preset;
  int devices = 0;
  std::string sharding;
  int64_t steps = 0;
  int64_t warmup = -1;
  int64_t batch_size = 0;
  int local_world_size = -1;
};

void add_workload_options(CLI::App* cmd, WorkloadArgs& a) {
  std::string names;
  for (const auto& n : es::preset_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("workload", a.file, "Workload JSON file (see README: Configuration reference)");
  cmd->add_option("--preset", a.preset, fmt::format("Built-in workload: {} (default {})", names, kDefaultPreset));
  cmd->add_option("--devices", a.devices, "Number of ranks (devices.count)")->check(CLI::Range(1, 64));
  cmd->add_option("--sharding", a.sharding,
                  "Sharding type for every table (drops per-table overrides): data_parallel, table_wise, "
                  "row_wise, column_wise, table_row_wise");
  cmd->add_option("--local-world-size", a.local_world_size,
                  "Ranks per node for table_row_wise (sharding.local_world_size)")->check(CLI::Range(1, 64));
  cmd->add_option("--steps", a.steps, "Measured steps")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup-steps", a.warmup, "Steps run before measuring")->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch-size", a.batch_size, "Samples per rank per step")->check(CLI::PositiveNumber);
}

es::WorkloadSpec load(const WorkloadArgs& a) {
  if (!a.file.empty() && !a.preset.empty())
    throw es::SpecError("give either a workload file or --preset, not both");
  es::WorkloadSpec spec = !a.file.empty() ? es::load_workload_file(a.file)
                                          : es::load_preset(a.preset.empty() ? kDefaultPreset : a.preset);
  const std::string origin = !a.file.empty() ? a.file : "preset " + (a.preset.empty() ? kDefaultPreset : a.preset);
  if (a.devices > 0) spec.devices.count = a.devices;
  if (!a.sharding.empty()) {
    spec.sharding.default_type = es::sharding_type_from_string(a.sharding, "--sharding");
    spec.sharding.per_table.clear();
  }
  if (a.local_world_size > 0) spec.sharding.local_world_size = a.local_world_size;
  if (a.steps > 0) spec.steps = a.steps;
  if (a.warmup >= 0) spec.warmup_steps = a.warmup;
  if (a.batch_size > 0) spec.batch_size = a.batch_size;
  es::validate(spec, origin);
  return spec;
}

std::string ms(double ns) { return fmt::format("{:.2f} ms", ns / 1e6); }

std::string plan_table(const es::WorkloadSpec& spec, const es::ShardingPlan& plan) {
  std::string out = fmt::format("{:<24} {:<15} {}\n", "table", "sharding", "shards (rank: rows x cols @ row,col)");
  for (const auto& tp : plan.tables) {
    std::string shards;
    for (const auto& s : tp.shards)
      shards += fmt::format("{}{}: {}x{} @{},{}", shards.empty() ? "" : "  ", s.rank, s.num_rows, s.num_cols,
                            s.row_offset, s.col_offset);
    out += fmt::format("{:<24} {:<15} {}\n", spec.tables[static_cast<size_t>(tp.table)].name, es::to_string(tp.type),
                       shards);
  }
  return out;
}

int cmd_plan(const WorkloadArgs& a, bool as_json) {
  const es::WorkloadSpec spec = load(a);
  const es::ShardingPlan plan = es::plan_sharding(spec);
  const auto est = es::estimate_memory(spec, plan);
  if (as_json) {
    json j = es::to_json(spec, plan);
    j["memory"] = json::array();
    for (const auto& e : est)
      j["memory"].push_back({{"rank", e.rank}, {"weights_bytes", e.weights}, {"optimizer_state_bytes", e.optimizer_state},
                             {"dense_bytes", e.dense}, {"buffers_bytes", e.buffers}, {"total_bytes", e.total()},
                             {"capacity_bytes", spec.devices.memory_bytes}});
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << plan_table(spec, plan) << "\n";
    std::cout << fmt::format("{:<5} {:>12} {:>16} {:>12} {:>12} {:>12} {:>12}\n", "rank", "weights", "optimizer state",
                             "dense", "buffers", "total", "capacity");
    for (const auto& e : est)
      std::cout << fmt::format("{:<5} {:>12} {:>16} {:>12} {:>12} {:>12} {:>12}\n", e.rank, es::format_bytes(e.weights),
                               es::format_bytes(e.optimizer_state), es::format_bytes(e.dense),
                               es::format_bytes(e.buffers), es::format_bytes(e.total()),
                               es::format_bytes(spec.devices.memory_bytes));
  }
  es::check_memory_fits(spec, est);
  return 0;
}

int cmd_run(const WorkloadArgs& a, bool as_json) {
  const es::WorkloadSpec spec = load(a);
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::string sharding = es::to_string(spec.sharding.default_type);
  if (!spec.sharding.per_table.empty()) sharding += " + per-table overrides";
  fmt::print(stderr, "embedscope run: {} on {} {} ranks, {}, batch {} per rank, {} steps (+{} warmup)\n", spec.name,
             spec.devices.count, es::to_string(spec.devices.backend), sharding, spec.batch_size, spec.steps,
             spec.warmup_steps);
  es::TrainerOptions opt;
  const int64_t every = std::max<int64_t>(1, spec.steps / 10);
  opt.on_step = [&](const es::StepProgress& p) {
    if (p.step == 0) {
      fmt::print(stderr, "{}warmup {}/{}{}", tty ? "\r" : "", p.warmup_done, spec.warmup_steps, tty ? "" : "\n");
      return;
    }
    if (!tty && p.step % every != 0 && p.step != p.total_steps) return;
    fmt::print(stderr, "{}step {}/{}  {:.0f} samples/s  ETA {:.1f} s  loss {:.4f}{}", tty ? "\r\033[K" : "", p.step,
               p.total_steps, p.samples_per_s, p.eta_s, p.loss, tty ? "" : "\n");
  };
  const es::RunResult r = es::run_training(spec, opt);
  if (tty) fmt::print(stderr, "\n");
  if (r.ended != es::RunEnd::complete) {
    fmt::print(stderr, "error: run ended {}: {}\n", es::to_string(r.ended), r.error);
    if (as_json)
      std::cout << json{{"ended", es::to_string(r.ended)}, {"error", r.error}}.dump() << "\n";
    return r.bad_input ? 2 : 1;
  }
  const auto d = embedscope::sessions::summarize(r.step_time_ns);
  const double sps = d.mean > 0 ? static_cast<double>(r.samples_per_step) / (d.mean * 1e-9) : 0.0;
  int64_t invalid = 0;
  for (const auto& rk : r.ranks) invalid += rk.invalid_ids;
  if (invalid > 0)
    fmt::print(stderr, "warning: {} ids outside their table were {} (invalid_ids policy)\n", invalid,
               spec.invalid_ids == es::InvalidIdPolicy::clamp ? "clamped" : "dropped");
  if (as_json) {
    json j{{"ended", "complete"},
           {"workload", spec.name},
           {"backend", es::to_string(spec.devices.backend)},
           {"world_size", spec.devices.count},
           {"sharding", es::to_json(spec, r.plan)},
           {"steps", static_cast<int64_t>(r.step_time_ns.size())},
           {"samples_per_step", r.samples_per_step},
           {"step_time_ns", {{"mean", d.mean}, {"p50", d.p50}, {"p99", d.p99}, {"min", d.min}, {"max", d.max}}},
           {"samples_per_s", sps},
           {"loss_first", r.loss.front()},
           {"loss_last", r.loss.back()},
           {"loss", r.loss},
           {"invalid_ids", invalid},
           {"ranks", json::array()}};
    for (const auto& rk : r.ranks)
      j["ranks"].push_back({{"rank", rk.rank}, {"ids_looked_up", rk.ids_looked_up}, {"unique_ids", rk.unique_ids},
                            {"bytes_sent", rk.bytes_sent}, {"bytes_received", rk.bytes_received},
                            {"memory_bytes", rk.memory_bytes}});
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << "sharding plan\n" << plan_table(spec, r.plan) << "\n";
  std::cout << fmt::format("steps        {} measured, {} samples each ({} per rank x {} ranks)\n", r.step_time_ns.size(),
                           r.samples_per_step, spec.batch_size, spec.devices.count);
  std::cout << fmt::format("step time    mean {}  p50 {}  p99 {}\n", ms(d.mean), ms(static_cast<double>(d.p50)),
                           ms(static_cast<double>(d.p99)));
  std::cout << fmt::format("throughput   {:.0f} samples/s\n", sps);
  std::cout << fmt::format("loss         first {:.4f}  last {:.4f}\n\n", r.loss.front(), r.loss.back());
  std::cout << fmt::format("{:<5} {:>14} {:>12} {:>14} {:>14} {:>12}\n", "rank", "ids looked up", "unique rows",
                           "bytes sent", "bytes received", "memory peak");
  for (const auto& rk : r.ranks)
    std::cout << fmt::format("{:<5} {:>14} {:>12} {:>14} {:>14} {:>12}\n", rk.rank, rk.ids_looked_up, rk.unique_ids,
                             es::format_bytes(rk.bytes_sent), es::format_bytes(rk.bytes_received),
                             es::format_bytes(rk.memory_bytes));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"embedscope: sharded embedding training workloads, profiled (headless CLI)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "embedscope 0.1.0");
  WorkloadArgs run_args, plan_args;
  bool run_json = false, plan_json = false;
  auto* run = app.add_subcommand("run", "Run a workload on CPU ranks (Gloo) and print a summary");
  add_workload_options(run, run_args);
  run->add_flag("--json", run_json, "Print the summary as one JSON object on stdout");
  auto* plan = app.add_subcommand("plan", "Show the sharding plan and the memory each device needs, without running");
  add_workload_options(plan, plan_args);
  plan->add_flag("--json", plan_json, "Print the plan as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    if (*run) return cmd_run(run_args, run_json);
    if (*plan) return cmd_plan(plan_args, plan_json);
  } catch (const es::SpecError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
