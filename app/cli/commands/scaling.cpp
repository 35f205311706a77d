// `embedscope scaling`: a scaling study (engine/exec/scaling_study.h) - one workload on simulated
// clusters of growing size, per sharding type: step time, throughput, weak-scaling efficiency,
// the embedding communication share of the step, memory per GPU.

#include <algorithm>
#include <map>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "output_guard.h"
#include "profile_trust_text.h"
#include "embedscope/engine/cost/profile_trust.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/sharding/idle_ranks.h"
#include "embedscope/sessions/model/units.h"
#include "interrupt.h"
#include "output/output.h"
#include "scaling_lm.h"
#include "workload_args.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;

namespace {

// The workload flags the study sets itself for every point: hidden from its --help, refused
// naming the study's own flags (hide_workload_options).
const std::vector<std::string> kScalingSets = {"--devices", "--nodes", "--sharding", "--local-world-size", "--backend"};

struct ScalingState {
  WorkloadArgs args;
  std::vector<int> gpus = {8, 16, 32, 64, 128, 256, 512, 1024};
  std::vector<std::string> shardings = {"table_wise", "row_wise", "table_row_wise"};
  std::string output;
  bool json = false;
  bool overwrite = false;
  CLI::Option* shardings_option = nullptr;  // given or not: an lm_embedding workload has its own default
};

std::string point_row(const es::ScalingPoint& p) {
  const std::string head = fmt::format("{:<17} {:>5} {:>5}", es::to_string(p.sharding), p.gpus, p.nodes);
  if (!p.error.empty()) return fmt::format("{}  {}", head, p.error);
  return fmt::format("{} {:>11} {:>12.0f} {:>9.0f} {:>7.1f}% {:>8.1f}% {:>6.1f}% {:>11} {:>11}  {}", head, ms(p.step_time_ns),
                     p.samples_per_s, p.samples_per_s / p.gpus, 100 * p.scaling_efficiency,
                     100 * p.embedding_comm_share, 100 * p.comm_share, sessions::format_bytes(p.wire_bytes_per_step),
                     sessions::format_bytes(p.memory_bytes_per_gpu),
                     p.placement == "greedy" ? "bytes" : "time");
}

// At most this many measured steps when the study runs again on the corners (a simulated step
// of a GPU profile repeats itself; a study of 100,000,000 steps is not run three times).
constexpr int64_t kCornerSteps = 10;

// The study run again, after it ran, on each corner of the profile's assumed figures
// (cost/profile_trust.h assumption_corner; tester63d F6) for the points that ran: (sharding, gpus)
// -> {fast, slow} step p50, ns. Empty when the profile has no assumed figure or the study was
// cancelled.
std::map<std::pair<es::ShardingType, int>, std::pair<int64_t, int64_t>> assumption_ranges(
    es::WorkloadSpec spec, const es::ScalingStudyOptions& o, const es::HardwareProfile& hw,
    const std::vector<es::ScalingPoint>& ran) {
  std::map<std::pair<es::ShardingType, int>, std::pair<int64_t, int64_t>> out;
  if (es::assumed_figures(hw).empty() || (o.cancel && o.cancel->load())) return out;
  spec.steps = std::min(spec.steps, kCornerSteps);
  for (const bool slow : {false, true}) {
    es::ScalingStudyOptions corner = o;
    corner.session_dir.clear();
    corner.on_point = {};
    corner.gpus.clear();
    corner.shardings.clear();
    for (const auto& p : ran) {
      if (!p.error.empty()) continue;
      if (std::find(corner.gpus.begin(), corner.gpus.end(), p.gpus) == corner.gpus.end()) corner.gpus.push_back(p.gpus);
      if (std::find(corner.shardings.begin(), corner.shardings.end(), p.sharding) == corner.shardings.end())
        corner.shardings.push_back(p.sharding);
    }
    if (corner.gpus.empty()) return out;
    std::sort(corner.gpus.begin(), corner.gpus.end());
    const std::string file = write_temporary_profile(es::assumption_corner(hw, slow), slow ? "scaling_slow" : "scaling_fast");
    corner.hardware = file;
    std::vector<es::ScalingPoint> points;
    try {
      points = es::run_scaling_study(spec, corner);
    } catch (...) {
      std::remove(file.c_str());
      throw;
    }
    std::remove(file.c_str());
    for (const auto& p : points)
      if (p.error.empty()) (slow ? out[{p.sharding, p.gpus}].second : out[{p.sharding, p.gpus}].first) = p.step_time_ns;
  }
  return out;
}

void set_range(es::ScalingPoint& p,
               const std::map<std::pair<es::ShardingType, int>, std::pair<int64_t, int64_t>>& ranges) {
  const auto it = ranges.find({p.sharding, p.gpus});
  if (!p.error.empty() || it == ranges.end() || it->second.first <= 0 || it->second.second <= 0) return;
  p.step_time_low_ns = std::min({it->second.first, it->second.second, p.step_time_ns});
  p.step_time_high_ns = std::max({it->second.first, it->second.second, p.step_time_ns});
}

int cmd_scaling(ScalingState& s) {
  WorkloadArgs& a = s.args;
  if (!a.was_given("--simulate"))
    throw es::SpecError("--simulate PROFILE is required: the study runs on modelled clusters (e.g. --simulate h100_sxm)");
  refuse_hidden_workload_options(a, kScalingSets,
                                 "the scaling study sets it for every point (use --gpus, --gpus-per-node, --shardings)");
  if (is_lm_args(a))  // an lm_embedding workload: its own study (exec/lm_scaling_study.h)
    return cmd_scaling_lm(a, {s.gpus, s.shardings_option->count() > 0 ? s.shardings : std::vector<std::string>{},
                              s.output, s.overwrite, s.json});
  const es::WorkloadSpec spec = load(a);
  es::ScalingStudyOptions o;
  o.hardware = a.simulate;
  o.gpus = s.gpus;
  for (const std::string& t : s.shardings) o.shardings.push_back(es::sharding_type_from_string(t, "--shardings"));
  if (a.was_given("--gpus-per-node")) o.gpus_per_node = a.gpus_per_node;
  o.session_dir = s.output;
  // Ctrl-C or SIGTERM: the point running stops after its current step, the rest are listed "not
  // run (cancelled)", exit 0, as `scenario` (crit42 / tester42 F22: SIGTERM left a half-written session)
  o.cancel = &cancel_on_sigint_or_sigterm("\ncancelling after the current step (Ctrl-C again stops at once)\n");
  o.overwrite = s.overwrite;
  const es::HardwareProfile hw = simulate_profile(a);
  const int per_node = o.gpus_per_node > 0 ? o.gpus_per_node : hw.gpus_per_node;
  // how far to trust the study's times (tester63d F1, F3, F6): the calibrated profile's error band
  // and the assumed figures (above the table); each point's step with them moved (after it)
  const std::string note = es::profile_trust_json(hw)["note"].get<std::string>();
  if (!s.json) {
    // the header with the first point, so that a study refused before any point runs prints
    // only its error (tester44 F9)
    const std::string header =
        fmt::format("scaling study: {} on simulated {} ({} GPU{} per node); {} samples per GPU per step (weak scaling), {} "
                    "measured steps\n",
                    spec.name, hw.name, per_node, per_node == 1 ? "" : "s", spec.batch_size, spec.steps) +
        (note.empty() ? std::string() : "trust: " + note + "\n") +
        fmt::format("{:<17} {:>5} {:>5} {:>11} {:>12} {:>9} {:>8} {:>9} {:>7} {:>11} {:>11}  {}\n", "sharding", "GPUs", "nodes",
                    "step p50", "samples/s", "per GPU", "scaling", "emb comm", "comm", "wire/step", "memory/GPU", "placed by");
    o.on_point = [header, n_tables = spec.tables.size(), printed = false](const es::ScalingPoint& p) mutable {
      if (!printed) std::cout << header;
      printed = true;
      std::cout << point_row(p) << std::endl;
      // the tables the search did not give the point's type (tester44 F4), under the row
      if (!p.other_types.empty()) {
        std::string names;
        for (const auto& [name, t] : p.other_types) names += fmt::format("{}{} {}", names.empty() ? "" : ", ", name, es::to_string(t));
        std::cout << fmt::format("  {} at {} GPUs: {} table(s) not {}: {} (fewer rows than the ranks a row split "
                                 "needs; `run --sharding {}` splits them into empty shards instead)\n",
                                 es::to_string(p.sharding), p.gpus, p.other_types.size(), es::to_string(p.sharding), names,
                                 es::to_string(p.sharding));
      }
      // tables whose row split leaves ranks an empty shard, as `run --sharding TYPE` splits them (tester49 F6)
      if (!p.empty_shard_tables.empty()) {
        std::string names;
        for (const auto& name : p.empty_shard_tables) names += fmt::format("{}{}", names.empty() ? "" : ", ", name);
        std::cout << fmt::format("  {} at {} GPUs: {} table(s) split into empty shards: {} (too few rows for a block of "
                                 "ceil(rows / ranks) on every rank: the last ranks hold none, as `run --sharding {}` "
                                 "splits them - `plan --auto --sharding-types {}` keeps a table with fewer rows than "
                                 "ranks table_wise, which adds a pooled all-to-all)\n",
                                 es::to_string(p.sharding), p.gpus, p.empty_shard_tables.size(), names,
                                 es::to_string(p.sharding), es::to_string(p.sharding));
      }
      // ranks with no embedding rows still join every collective (tester58 F4)
      if (!p.ranks_without_rows.empty())
        std::cout << fmt::format("  {} at {} GPUs: {} ({} of {}) {} no embedding rows ({} tables): {} nothing up but "
                                 "still {} every collective; try row_wise or table_row_wise for the largest tables, or "
                                 "fewer GPUs\n",
                                 es::to_string(p.sharding), p.gpus, es::format_rank_list(p.ranks_without_rows),
                                 p.ranks_without_rows.size(), p.gpus, p.ranks_without_rows.size() == 1 ? "holds" : "hold",
                                 n_tables, p.ranks_without_rows.size() == 1 ? "it looks" : "they look",
                                 p.ranks_without_rows.size() == 1 ? "joins" : "join");
    };
  }
  auto points = es::run_scaling_study(spec, o);
  const auto ranges = assumption_ranges(spec, o, hw, points);
  for (auto& p : points) set_range(p, ranges);
  // a point whose session could not be written (a full disk) fails the study: exit 1, after its
  // table, naming the file, the reason and the sessions that were written (tester50 F5: exit 2
  // with SQLite's bare text at the first point, exit 0 at a later one)
  const auto failed = std::find_if(points.begin(), points.end(), [](const es::ScalingPoint& p) { return p.write_failed; });
  const auto write_failure = [&] {
    std::string written;
    for (const auto& p : points)
      if (!p.session_path.empty()) written += (written.empty() ? "" : ", ") + p.session_path;
    fmt::print(stderr, "error: scaling: {} at {} GPUs: {}\nsessions written: {}\n", es::to_string(failed->sharding),
               failed->gpus, failed->error, written.empty() ? "none" : written);
    return 1;
  };
  if (s.json) {
    json j = es::to_json(es::ScalingStudy{spec.name, hw.name, per_node, spec.batch_size, spec.steps, points, note});
    j["profile_trust"] = es::profile_trust_json(hw);
    std::cout << dump(j) << "\n";
    return failed != points.end() ? write_failure() : 0;
  }
  // one baseline for every type (tester55 F3: each type's own first point made column_wise, which
  // cannot run on 1 GPU, read twice table_wise's efficiency at equal per-GPU throughput)
  const auto baseline = es::scaling_baseline(points);
  std::cout << (baseline ? fmt::format("scaling: samples/s per GPU over the baseline, the best at the smallest size any "
                                       "type ran: {} at {} GPU{}, {:.0f} per GPU (one baseline for every type: equal "
                                       "per-GPU throughput, equal scaling; 100% = the baseline's rate)",
                                       es::to_string(baseline->sharding), baseline->gpus, baseline->gpus == 1 ? "" : "s",
                                       baseline->samples_per_s_per_gpu)
                         : std::string("scaling: no point ran, so no baseline"));
  std::cout << "; emb comm: the input, output and gradient dists' share of the step (EMBark's figure), comm: "
               "every collective's; placed by: the planner's placement of that sharding type (time: by estimated time, LPT; bytes: "
               "largest tables first onto the fewest bytes, when its estimate was shorter); all SIMULATED\n";
  if (!ranges.empty()) {
    std::string list;
    for (const auto& p : points)
      if (p.step_time_high_ns > 0)
        list += fmt::format("{}{} {}: {:.3g} .. {:.3g} ms", list.empty() ? "" : "; ", es::to_string(p.sharding), p.gpus,
                            static_cast<double>(p.step_time_low_ns) / 1e6, static_cast<double>(p.step_time_high_ns) / 1e6);
    std::cout << fmt::format("step p50 with each assumed figure x{:g} .. x{:g} (efficiencies at most 1; the study run again "
                             "on both ends, at most {} steps): {}\n",
                             1 / es::kAssumptionFactor, es::kAssumptionFactor, kCornerSteps, list);
  }
  if (!s.output.empty()) std::cout << "sessions: " << s.output << "/<sharding>_<gpus>.db\n";
  return failed != points.end() ? write_failure() : 0;
}

}  // namespace

Command add_scaling_command(CLI::App& app) {
  auto s = std::make_shared<ScalingState>();
  auto* cmd = app.add_subcommand("scaling",
                                 "A scaling study on simulated clusters: one workload over growing GPU counts per sharding "
                                 "type (step time, throughput, scaling efficiency, embedding comm share, bytes on the "
                                 "wire, memory per GPU); DLRM and lm_embedding workloads");
  add_workload_options(cmd, s->args);
  hide_workload_options(cmd, s->args, kScalingSets);
  cmd->add_option("--gpus", s->gpus, "Cluster sizes, comma-separated (default 8,16,32,64,128,256,512,1024)")
      ->delimiter(',')
      ->allow_extra_args(false)  // one value a use: `--opt a,b work.json` leaves the file positional (tester44 F13)
      ->check(kInteger)
      ->check(CLI::Range(1, es::kMaxSimulatedRanks));
  s->shardings_option =
      cmd->add_option("--shardings", s->shardings,
                      "Sharding types, comma-separated, each applied to every table (default table_wise,row_wise,"
                      "table_row_wise; lm_embedding workloads: vocab_parallel,data_parallel,row_wise)");
  s->shardings_option->delimiter(',')
      ->allow_extra_args(false);  // one value a use: `--opt a,b work.json` leaves the file positional (tester44 F13)
  cmd->add_option("-o,--output", s->output, "Write each point's simulated session to DIR/<sharding>_<gpus>.db")
      ->check(CLI::Validator(
          [](const std::string& v) { return empty_output_name_refusal(v, "leave -o out to write no sessions"); }, "NAME"));
  cmd->add_flag("--force-overwrite", s->overwrite, "Replace the sessions of an earlier study in the -o directory");
  cmd->add_flag("--json", s->json, "Print the points as JSON");
  return {cmd, [s] { return cmd_scaling(*s); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli
