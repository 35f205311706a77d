// The workload options shared by run and plan (workload_args.h).

#include "workload_args.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/rebalance/policy_reach.h"
#include "embedscope/engine/workload/state_precision.h"
#include "embedscope/engine/workload/hash_warnings.h"
#include "embedscope/engine/sharding/sharding.h"  // segment_shortfall
#include "embedscope/engine/workload/presets.h"

namespace embedscope::cli {

namespace es = embedscope::engine;

std::string preset_list_text() {
  return fmt::format("{}; lm_embedding (run, plan, program and scaling only): {}", fmt::join(es::preset_names(), ", "),
                     fmt::join(es::lm_preset_names(), ", "));
}

namespace {
/// A link bandwidth in bytes/s from 1 to `max`, written as a number ("1e9", "1000000000"), its
/// refusals named as --network-latency's are: "--network-bandwidth: not a number of bytes/s (got
/// 'abc'); give e.g. 1e9" (CLI::Number said "Failed parsing abc as a FLOAT"; nan, which passes
/// every range, is refused the same way), "--network-bandwidth: 0 bytes/s is out of range: give 1
/// to 1.13e+15 bytes/s, e.g. 1e9" (CLI::Range said "Value 0 not in range 1.000000 to
/// 1125899906842624.000000"; inf too).
CLI::Validator bandwidth_value(double max) {
  return CLI::Validator(
      [max](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || std::isnan(v))
          return fmt::format("not a number of bytes/s (got '{}'); give e.g. 1e9", text);
        if (!(v >= 1.0 && v <= max))
          return fmt::format("{} bytes/s is out of range: give 1 to {:.3g} bytes/s, e.g. 1e9", text, max);
        return "";
      },
      "", "BANDWIDTH");
}
}  // namespace

CLI::Validator latency_ns_value(int64_t max) {
  return CLI::Validator(
      [max](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || std::isnan(v))
          return fmt::format("not a number of ns (got '{}'); give e.g. 50000 or 5e4", text);
        if (!(v >= 0.0 && v <= static_cast<double>(max)))  // inf too
          return fmt::format("{} ns is out of range: give 0 to {:.3g} ns ({} s), e.g. 5e4", text, static_cast<double>(max),
                             static_cast<double>(max) / 1e9);
        if (v != std::floor(v))
          return fmt::format("{} ns is not a whole number of ns; give e.g. {:.0f}", text, std::floor(v));
        text = std::to_string(static_cast<int64_t>(v));  // what the int64 option then reads: 1e6 -> 1000000
        return "";
      },
      "", "LATENCY_NS");
}

void add_workload_options(CLI::App* cmd, WorkloadArgs& a) {
  const std::string names = preset_list_text();
  a.given["workload"] = cmd->add_option("workload", a.file, "Workload JSON file (see docs/configuration.md)");
  a.given["--preset"] =
      cmd->add_option("--preset", a.preset, fmt::format("Built-in workload: {} (default {})", names, kDefaultPreset))
          // `--preset -o x.db` took -o as the preset and x.db as a workload file to read
          ->check(CLI::Validator(
              [](const std::string& v) {
                return !v.empty() && v[0] == '-'
                           ? fmt::format("1 required TEXT missing ('{}' is an option, not a preset name: e.g. --preset tiny)", v)
                           : std::string();
              },
              "NAME"));
  a.given["--devices"] = cmd->add_option("--devices", a.devices, "Number of ranks (devices.count; 1-64, simulated 1-1024)")
                             ->check(kInteger)
                             ->check(CLI::Range(1, es::kMaxSimulatedRanks));
  a.given["--sharding"] = cmd->add_option("--sharding", a.sharding,
                                          "Sharding type for every table (drops per-table overrides): " +
                                              es::enum_names_joined<es::ShardingType>());
  a.given["--local-world-size"] =
      cmd->add_option("--local-world-size", a.local_world_size,
                      "Ranks per node (sharding.local_world_size; divides --devices): the node in which table_row_wise, "
                      "table_column_wise and grid_shard place a table's shards, and the nodes of --network-* emulation")
          ->check(kInteger)->check(CLI::Range(1, 64));
  a.given["--steps"] = cmd->add_option("--steps", a.steps, "Measured steps")
                           ->check(kInteger)
                           ->check(CLI::Range(int64_t{1}, es::kMaxSteps));
  a.given["--warmup-steps"] = cmd->add_option("--warmup-steps", a.warmup, "Steps run before measuring")
                                  ->check(kInteger)->check(CLI::Range(int64_t{0}, es::kMaxSteps));
  a.given["--batch-size"] = cmd->add_option("--batch-size", a.batch_size, "Samples per rank per step")
                                ->check(kInteger)->check(CLI::Range(int64_t{1}, es::kMaxBatchSize));
  a.given["--backend"] = cmd->add_option("--backend", a.backend,
                                         "Executor (devices.backend): cpu, cuda (a GPU per rank, or ranks sharing one: "
                                         "devices.ranks_per_gpu), auto (cuda when a GPU is present), simulated (a modelled "
                                         "cluster: give --simulate PROFILE)")
                             ->check(CLI::IsMember(es::enum_names<es::Backend>()));
  a.given["--pipeline"] = cmd->add_option("--pipeline", a.pipeline,
                                          "Training pipeline (pipeline): " + es::enum_names_joined<es::PipelineKind>());
  a.given["--qcomms"] = cmd->add_option("--qcomms", a.qcomms,
                                        "Precision of the output dist and gradient dist (qcomms.forward_precision and "
                                        "backward_precision): " + es::enum_names_joined<es::CommPrecision>())
                            ->check(CLI::IsMember(es::enum_names<es::CommPrecision>()));
  a.given["--dense-precision"] =
      cmd->add_option("--dense-precision", a.dense_precision,
                      "Precision of the dense part's matrix products (dense.precision; PyTorch AMP: inputs rounded, "
                      "fp32 accumulation and weights): " + es::enum_names_joined<es::DensePrecision>())
          ->check(CLI::IsMember(es::enum_names<es::DensePrecision>()));
  a.given["--simulate"] = cmd->add_option("--simulate", a.simulate,
                                          "Simulate a cluster of this hardware profile (devices.backend simulated, "
                                          "devices.hardware): " +
                                              fmt::format("{}", fmt::join(es::hardware_profile_names(), ", ")) +
                                              ", or a profile JSON file; device memory from the profile");
  a.given["--nodes"] = cmd->add_option("--nodes", a.nodes, "With --simulate: nodes of the cluster (devices.count = nodes x "
                                                           "GPUs per node)")
                           ->check(kInteger)->check(CLI::Range(1, es::kMaxSimulatedRanks));
  a.given["--gpus-per-node"] =
      cmd->add_option("--gpus-per-node", a.gpus_per_node,
                      "With --simulate: GPUs per node (sharding.local_world_size; default the profile's)")
          ->check(kInteger)->check(CLI::Range(1, es::kMaxSimulatedRanks));
  a.given["--network-bandwidth"] =
      cmd->add_option("--network-bandwidth", a.network_bandwidth,
                      "Emulated link bandwidth in bytes/s, within and across nodes "
                      "(network.intra_node/inter_node.bandwidth_bytes_per_s), e.g. 1e9")
          ->check(bandwidth_value(static_cast<double>(es::kMaxBandwidthBytesPerS)));
  a.given["--network-latency"] =
      cmd->add_option("--network-latency", a.network_latency,
                      "Emulated latency per collective in ns, within and across nodes (network.*.latency_ns), "
                      "e.g. 50000 or 5e4")
          ->transform(latency_ns_value(es::kMaxLatencyNs));  // tester51 F12: 1e6 as --network-bandwidth takes 1e9
  // one option, two names: --no-sequence-parallel sets it false, whatever the workload says
  a.given["--sequence-parallel"] = cmd->add_flag(
      "--sequence-parallel,!--no-sequence-parallel", a.sequence_parallel,
      "lm_embedding workloads with vocab_parallel: reduce-scatter the lookup into token slices and all-gather before "
      "the output projection (sharding.sequence_parallel); --no-sequence-parallel: without, whatever the workload says");
}

void hide_workload_options(CLI::App* cmd, WorkloadArgs& a, const std::vector<std::string>& flags) {
  for (const std::string& flag : flags) {
    const auto it = a.given.find(flag);
    if (it == a.given.end()) continue;
    cmd->remove_option(it->second);
    std::string& text = a.hidden_values[flag];
    // an empty group hides an option from --help; it is still parsed
    it->second = flag == "--sequence-parallel" ? cmd->add_flag("--sequence-parallel,!--no-sequence-parallel")->group("")
                                               : cmd->add_option(flag, text, std::string())->group("");
  }
}

void refuse_hidden_workload_options(const WorkloadArgs& a, const std::vector<std::string>& flags, const std::string& why) {
  for (const std::string& flag : flags)
    if (a.was_given(flag)) throw es::SpecError(fmt::format("{}: {}", flag, why));
}

namespace {
// The simulated cluster --nodes, --gpus-per-node and --devices ask for, asked for once: {nodes,
// GPUs per node} (the profile's GPUs per node by default). --gpus-per-node G alone keeps the
// workload's `workload_ranks` (its devices.count) in nodes of G (tester45 F2); --local-world-size
// L stands for --gpus-per-node L (the same field), refused beside a different G. Throws SpecError
// naming the flags when they disagree, when the ranks are not whole nodes, or past
// kMaxSimulatedRanks ranks.
std::pair<int, int> simulated_cluster(const WorkloadArgs& a, const es::HardwareProfile& hw, int workload_ranks) {
  // --local-world-size is the same field (sharding.local_world_size): a node's size, applied as
  // --gpus-per-node is, or refused when the two disagree (tester45 F2: it was dropped silently)
  const bool lws = a.was_given("--local-world-size");
  if (lws && a.was_given("--gpus-per-node") && a.local_world_size != a.gpus_per_node)
    throw es::SpecError(fmt::format("--local-world-size {} disagrees with --gpus-per-node {}: a simulated node's GPUs "
                                    "are its ranks (both set sharding.local_world_size); give one of them",
                                    a.local_world_size, a.gpus_per_node));
  const int per_node = a.was_given("--gpus-per-node") ? a.gpus_per_node : lws ? a.local_world_size : hw.gpus_per_node;
  const char* per_node_flag = a.was_given("--gpus-per-node") ? "--gpus-per-node" : lws ? "--local-world-size" : "--gpus-per-node";
  int nodes = a.was_given("--nodes") ? a.nodes : 1;
  const bool ranks_from_workload = !a.was_given("--devices") && !a.was_given("--nodes");
  if (a.was_given("--devices") || ranks_from_workload) {  // N ranks in nodes of G: N / G nodes; with --nodes they must agree
    const int ranks = ranks_from_workload ? workload_ranks : a.devices;
    const std::string what = ranks_from_workload ? fmt::format("the workload's devices.count {}", ranks)
                                                 : fmt::format("--devices {}", ranks);
    if (a.was_given("--nodes") && static_cast<int64_t>(a.nodes) * per_node != ranks)
      throw es::SpecError(fmt::format("--devices {} disagrees with --nodes {} x {} GPUs per node ({} ranks); give the "
                                      "ranks once", ranks, a.nodes, per_node, static_cast<int64_t>(a.nodes) * per_node));
    if (per_node <= 0 || ranks % per_node != 0)
      throw es::SpecError(fmt::format("{} is not a whole number of nodes of {} {}{}", what, per_node_flag, per_node,
                                      ranks_from_workload ? " (give --devices or --nodes)" : ""));
    nodes = ranks / per_node;
  }
  if (static_cast<int64_t>(nodes) * per_node > es::kMaxSimulatedRanks)
    throw es::SpecError(fmt::format("--nodes {} x {} {} is {} ranks; a simulated cluster has at most {}",
                                    nodes, per_node_flag, per_node, static_cast<int64_t>(nodes) * per_node, es::kMaxSimulatedRanks));
  return {nodes, per_node};
}
}  // namespace

bool is_lm_args(const WorkloadArgs& a) {
  if (!a.file.empty()) return es::is_lm_workload_file(a.file);
  return !a.preset.empty() && es::is_lm_preset(a.preset);
}

es::HardwareProfile simulate_profile(const WorkloadArgs& a) {
  try {
    return es::load_hardware_profile(a.simulate);
  } catch (const es::SpecError& e) {
    const std::string what = e.what(), pointer = "/devices/hardware: ";
    if (!what.starts_with(pointer)) throw;
    throw es::SpecError(fmt::format("--simulate {}: {}", a.simulate, what.substr(pointer.size())));
  }
}

es::LmWorkloadSpec load_lm(WorkloadArgs& a, bool simulate_flags) {
  if (!a.file.empty() && !a.preset.empty()) throw es::SpecError("give either a workload file or --preset, not both");
  es::LmWorkloadSpec spec = !a.file.empty() ? es::load_lm_workload_file(a.file) : es::load_lm_preset(a.preset);
  a.origin = !a.file.empty() ? a.file : "preset " + a.preset;
  const bool simulated = simulate_flags && a.was_given("--simulate");
  // run's one-rank-per-process flags (run_process.h; registered in a.given by `run` only): this
  // process runs every rank as a thread, so a rank per process would train the whole job in each
  for (const char* flag : {"--rank", "--world-size", "--rendezvous", "--run-id", "--host"})
    if (a.was_given(flag))
      throw es::SpecError(fmt::format("{}: not for an lm_embedding workload ({}): {}", flag, a.origin, kLmRanksAreThreads));
  for (const char* flag : {"--local-world-size", "--warmup-steps", "--backend", "--pipeline", "--qcomms", "--simulate",
                           "--nodes", "--gpus-per-node", "--network-bandwidth", "--network-latency", "--dense-precision"}) {
    const std::string_view f(flag);
    if (!a.was_given(flag) || (simulate_flags && f == "--simulate")) continue;
    if (simulated && (f == "--nodes" || f == "--gpus-per-node")) continue;
    if (simulate_flags && (f == "--nodes" || f == "--gpus-per-node"))
      throw es::SpecError(fmt::format("{}: only with --simulate PROFILE (a modelled cluster)", flag));
    // where the run happens: a simulated cluster under --simulate, else CPU ranks (retest49 R5:
    // "runs on CPU ranks" was said under --simulate h100_sxm too)
    const std::string where = simulated ? fmt::format("is simulated on {}'s modelled cluster", a.simulate)
                                        : std::string("runs on CPU ranks");
    // --dense-precision: dense.precision is a DLRM workload's (its dense part's GEMMs, spec.h)
    const std::string why =
        f == "--dense-precision" ? "; dense.precision is a DLRM workload's, for its dense part's GEMMs" : "";
    throw es::SpecError(fmt::format("{}: not for an lm_embedding workload ({} {}{}; its flags: --devices, "
                                    "--sharding, --sequence-parallel, --steps, --batch-size, --simulate, --nodes, "
                                    "--gpus-per-node; {})",
                                    flag, a.origin, where, why, kLmRanksAreThreads));
  }
  std::vector<std::pair<std::string, std::string>> set_by;
  if (a.was_given("--devices")) {
    spec.world_size = a.devices;
    set_by.emplace_back("/devices/count", "--devices");
  }
  if (simulated && (a.was_given("--nodes") || a.was_given("--gpus-per-node"))) {
    // the cluster as the DLRM runs ask for it; simulate_lm places rank r on node r / gpus_per_node
    const auto [nodes, per_node] = simulated_cluster(a, simulate_profile(a), spec.world_size);
    spec.world_size = nodes * per_node;
    a.gpus_per_node = per_node;
    set_by.emplace_back("/devices/count", a.was_given("--nodes") ? "--nodes" : "--devices");
  }
  if (a.world_size > 0) throw es::SpecError("--world-size: an lm_embedding workload runs its ranks as threads of one process");
  if (a.was_given("--sharding")) {
    if (a.sharding == "vocab_parallel") spec.sharding = es::LmSharding::vocab_parallel;
    else if (a.sharding == "data_parallel") spec.sharding = es::LmSharding::data_parallel;
    else if (a.sharding == "row_wise") spec.sharding = es::LmSharding::row_wise;
    else
      throw es::SpecError(fmt::format("--sharding: \"{}\" is not a sharding type of an lm_embedding workload; valid: "
                                      "vocab_parallel, data_parallel, row_wise", a.sharding));
    if (spec.sharding != es::LmSharding::vocab_parallel) spec.sequence_parallel = false;
    set_by.emplace_back("/sharding", "--sharding");
  }
  if (a.was_given("--sequence-parallel")) {
    spec.sequence_parallel = a.sequence_parallel;
    set_by.emplace_back("/sharding/sequence_parallel", a.sequence_parallel ? "--sequence-parallel" : "--no-sequence-parallel");
  }
  if (a.was_given("--steps")) spec.steps = a.steps;
  if (a.was_given("--batch-size")) {
    spec.micro_batch_size = a.batch_size;
    set_by.emplace_back("/micro_batch_size", "--batch-size");
  }
  try {
    es::validate(spec, a.origin);
  } catch (const es::SpecError& e) {
    std::string msg = e.what();
    // every flag that set the pointer named or one above it, once: "(set by --sharding and
    // --sequence-parallel)" (tester43 F19: "(set by --sharding) (set by --sequence-parallel)")
    std::vector<std::string> flags;
    for (const auto& [ptr, flag] : set_by)
      if ((msg.find(": " + ptr + ":") != std::string::npos || msg.find(": " + ptr + "/") != std::string::npos) &&
          std::find(flags.begin(), flags.end(), flag) == flags.end())
        flags.push_back(flag);
    if (!flags.empty()) msg += fmt::format(" (set by {})", fmt::join(flags, " and "));
    throw es::SpecError(msg);
  }
  return spec;
}

es::WorkloadSpec load(WorkloadArgs& a) {
  if (a.was_given("--sequence-parallel"))
    throw es::SpecError(fmt::format("{}: only for lm_embedding workloads (model \"lm_embedding\")",
                                    a.sequence_parallel ? "--sequence-parallel" : "--no-sequence-parallel"));
  if (a.was_given("workload") && a.file.empty()) throw es::SpecError("the workload file name is empty");
  if (a.was_given("--preset") && a.preset.empty())
    throw es::SpecError(fmt::format("--preset: empty; known presets: {}", preset_list_text()));
  if (!a.preset.empty() && !es::is_lm_preset(a.preset)) {  // one list, the empty and the unknown case (tester46 F3)
    const auto dlrm = es::preset_names();
    if (std::find(dlrm.begin(), dlrm.end(), a.preset) == dlrm.end())
      throw es::SpecError(fmt::format("--preset {}: unknown; known presets: {}", a.preset, preset_list_text()));
  }
  if (!a.file.empty() && !a.preset.empty()) throw es::SpecError("give either a workload file or --preset, not both");
  // run, plan, program and scaling read lm_embedding workloads themselves; the other commands would misread
  // one as a DLRM workload (an unknown key, an unknown preset: tester33 D7)
  if (is_lm_args(a))
    throw es::SpecError(fmt::format("{}: an lm_embedding workload (\"model\": \"lm_embedding\"); this command reads DLRM "
                                    "workloads (pooled embedding bags) - run, plan, program and scaling take lm_embedding ones",
                                    !a.file.empty() ? a.file : "preset " + a.preset));
  es::WorkloadSpec spec = !a.file.empty() ? es::load_workload_file(a.file)
                                          : es::load_preset(a.preset.empty() ? kDefaultPreset : a.preset);
  a.origin = !a.file.empty() ? a.file : "preset " + (a.preset.empty() ? kDefaultPreset : a.preset);
  std::vector<std::pair<std::string, std::string>> set_by;  // JSON pointer, flag
  if (a.was_given("--devices")) {
    spec.devices.count = a.devices;
    set_by.emplace_back("/devices/count", "--devices");
  }
  if (a.world_size > 0) {  // one rank per process: the world is the processes
    if (a.was_given("--devices") && a.devices != a.world_size)
      throw es::SpecError(fmt::format("--devices {} but {} {}: give one of them, or the same number",
                                      a.devices, a.world_size_from, a.world_size));
    spec.devices.count = a.world_size;
    set_by.emplace_back("/devices/count", a.world_size_from);
  }
  if (a.was_given("--sharding")) {
    if (a.sharding == "vocab_parallel")  // tester43 F19: the list of DLRM types alone did not say where it belongs
      throw es::SpecError(fmt::format("--sharding: vocab_parallel is a sharding type of lm_embedding workloads ({} is a "
                                      "DLRM workload; its types: data_parallel, table_wise, row_wise, column_wise, "
                                      "table_row_wise, table_column_wise, grid_shard)",
                                      a.origin));
    spec.sharding.default_type = es::sharding_type_from_string(a.sharding, "--sharding");
    spec.sharding.per_table.clear();
  }
  if (a.was_given("--local-world-size")) {
    spec.sharding.local_world_size = a.local_world_size;
    set_by.emplace_back("/sharding/local_world_size", "--local-world-size");
  } else if (!a.local_world_size_from.empty()) {
    spec.sharding.local_world_size = a.local_world_size;
    set_by.emplace_back("/sharding/local_world_size", a.local_world_size_from);
  }
  if (a.was_given("--pipeline")) spec.pipeline = es::pipeline_from_string(a.pipeline, "--pipeline");
  if (a.was_given("--backend")) {
    spec.devices.backend = es::enum_from_string<es::Backend>(a.backend, "--backend");  // IsMember checked it
    set_by.emplace_back("/devices/backend", "--backend");
  }
  if (a.was_given("--simulate")) {
    // one cluster, asked for once: a flag that another would silently override is refused (tester33 D3)
    // `--backend simulated --simulate P` agree (run --help says to give both; tester39)
    if (a.was_given("--backend") && spec.devices.backend != es::Backend::simulated)
      throw es::SpecError(fmt::format("--backend {}: --simulate {} runs the workload on a modelled cluster, not on a "
                                      "backend; give one or the other", a.backend, a.simulate));
    const es::HardwareProfile hw = simulate_profile(a);
    spec.devices.backend = es::Backend::simulated;
    spec.devices.hardware = a.simulate;
    spec.devices.memory_bytes = hw.gpu.memory_bytes;
    // the devices' memory is the profile's now: a GPU too small for one segment is the profile's
    // fault, named by its file and pointer, not the workload's /devices/memory_bytes (tester54 F8)
    if (const std::string shortfall = es::segment_shortfall(spec); !shortfall.empty())
      throw es::SpecError(fmt::format("{}: /gpu/memory_bytes: {} (the workload's memory.allocator); give the profile's "
                                      "GPU more memory, or use \"memory\": {{\"allocator\": \"direct\"}} in the workload ({})",
                                      es::hardware_profile_is_file(a.simulate) ? a.simulate
                                                                               : "hardware profile " + a.simulate,
                                      shortfall, a.origin));
    set_by.emplace_back("/devices/hardware", "--simulate");
    if (a.was_given("--nodes") || a.was_given("--gpus-per-node")) {
      const auto [nodes, per_node] = simulated_cluster(a, hw, static_cast<int>(spec.devices.count));
      spec.devices.count = nodes * per_node;
      spec.sharding.local_world_size = per_node;
      // only the flags given (tester44 F8: "(set by --devices) (set by --nodes)" without --nodes)
      if (a.was_given("--nodes")) set_by.emplace_back("/devices/count", "--nodes");
      if (a.was_given("--gpus-per-node")) set_by.emplace_back("/sharding/local_world_size", "--gpus-per-node");
    }
  } else {
    for (const char* flag : {"--nodes", "--gpus-per-node"})
      if (a.was_given(flag)) throw es::SpecError(fmt::format("{}: only with --simulate PROFILE (a modelled cluster)", flag));
  }
  if (a.was_given("--qcomms")) {
    const auto p = es::enum_from_string<es::CommPrecision>(a.qcomms, "--qcomms");  // IsMember checked it
    spec.qcomms.forward_precision = spec.qcomms.backward_precision = p;
  }
  if (a.was_given("--dense-precision")) {
    if (!spec.dense)
      throw es::SpecError(fmt::format("--dense-precision {}: {} has no dense part (\"dense\": null: the logit is a fixed "
                                      "projection, no matrix product to run in another precision)",
                                      a.dense_precision, a.origin));
    spec.dense->precision = es::enum_from_string<es::DensePrecision>(a.dense_precision, "--dense-precision");
    set_by.emplace_back("/dense/precision", "--dense-precision");
  }
  if (a.was_given("--network-bandwidth"))
    spec.network.intra_node.bandwidth_bytes_per_s = spec.network.inter_node.bandwidth_bytes_per_s =
        static_cast<int64_t>(std::llround(a.network_bandwidth));
  if (a.was_given("--network-latency"))
    spec.network.intra_node.latency_ns = spec.network.inter_node.latency_ns = a.network_latency;
  if (a.was_given("--steps")) spec.steps = a.steps;
  if (a.was_given("--warmup-steps")) spec.warmup_steps = a.warmup;
  if (a.was_given("--batch-size")) {
    spec.batch_size = a.batch_size;
    set_by.emplace_back("/batch_size", "--batch-size");
  }
  try {
    es::validate(spec, a.origin);
    // a policy that cannot fire within the run: valid, but say so (tester42 F7)
    if (const std::string never = es::rebalance::rebalance_never_fires(spec); !never.empty())
      fmt::print(stderr, "warning: {}: {}\n", a.origin, never);
    // fp16 optimizer state that underflows: valid, but it costs accuracy (workload/state_precision.h)
    for (const std::string& w : es::state_precision_warnings(spec)) fmt::print(stderr, "warning: {}: {}\n", a.origin, w);
    // hash_size = num_embeddings: valid, but it saves nothing and adds collisions (workload/hash_warnings.h)
    for (const std::string& w : es::hash_size_warnings(spec)) fmt::print(stderr, "warning: {}: {}\n", a.origin, w);
    // auto becomes cpu or cuda here, so that plan and run say which; cuda without GPUs is refused
    a.requested_backend = spec.devices.backend;
    if (a.resolve_backend)
      spec = with_origin(a.origin, [&] { return es::with_resolved_backend(spec, a.origin, a.world_size > 0); });
  } catch (const es::SpecError& e) {
    std::string msg = e.what();
    std::vector<std::string> flags;  // each flag once, in one bracket ("set by --devices and --nodes")
    for (const auto& [ptr, flag] : set_by)
      if ((msg.find(": " + ptr + ":") != std::string::npos || msg.find(": " + ptr + "/") != std::string::npos) &&
          std::find(flags.begin(), flags.end(), flag) == flags.end())
        flags.push_back(flag);
    for (size_t k = 0; k < flags.size(); ++k)
      msg += fmt::format("{}{}{}", k == 0 ? " (set by " : k + 1 == flags.size() ? " and " : ", ", flags[k],
                         k + 1 == flags.size() ? ")" : "");
    throw es::SpecError(msg);
  }
  return spec;
}

std::string auto_backend_note(const WorkloadArgs& a, const es::WorkloadSpec& resolved) {
  if (a.requested_backend != es::Backend::auto_) return "";
  const auto& d = profiler::cuda_devices();
  if (resolved.devices.backend == es::Backend::cuda)
    return fmt::format("auto picked cuda: {} CUDA device{}", d.count, d.count == 1 ? "" : "s");
  // d.error says "built without CUDA (EMBEDSCOPE_WITH_CUDA=OFF)" in a build without CUDA
  return fmt::format("auto picked cpu: no CUDA device here ({})",
                     d.error.empty() ? std::string("cudaGetDeviceCount reported 0 devices") : d.error);
}

void refuse_flags_the_plan_overrides(const WorkloadArgs& a, const std::string& plan_file) {
  if (plan_file.empty()) return;
  for (const char* flag : {"--sharding", "--local-world-size"})
    if (a.was_given(flag))
      throw es::SpecError(fmt::format("{}: cannot be combined with --plan {} (the plan gives every table's sharding "
                                      "type and local_world_size; edit the plan instead)",
                                      flag, plan_file));
}

}  // namespace embedscope::cli
