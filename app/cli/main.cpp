// embedscope: the headless command line (no Qt). Exit codes: 0 ok, 1 the job failed
// (OOM, hang, divergence), 2 bad input (config, file, flags).

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/backend.h"
#include "embedscope/engine/replay.h"
#include "embedscope/engine/sharding.h"
#include "embedscope/engine/spec.h"
#include "embedscope/engine/trainer.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/store/session.h"
#include "embedscope/sessions/analysis/stats.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"

namespace es = embedscope::engine;
namespace ss = embedscope::sessions;
using nlohmann::json;

namespace {
// Checked before a CLI::Range, which alone calls a word "not in range" ("--steps: Value abc not in
// range 1 to ..."): a non-number is named as such.
const CLI::Validator kInteger = CLI::TypeValidator<int64_t>("INTEGER");

constexpr const char* kDefaultPreset = "criteo_kaggle";

std::atomic<bool> g_cancel{false};
extern "C" void on_sigint(int) {
  g_cancel = true;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
  static constexpr char kSaid[] = "\ncancelling after the current step (Ctrl-C again stops at once)\n";
  [[maybe_unused]] const auto n = write(STDERR_FILENO, kSaid, sizeof kSaid - 1);  // async-signal-safe
}

// embedscope-YYYYmmdd-HHMMSS.db, or -2, -3, ... when a run of the same second has it.
std::string default_session_name() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "embedscope-%Y%m%d-%H%M%S", std::localtime(&t));
  std::string name = std::string(buf) + ".db";
  for (int i = 2; access(name.c_str(), F_OK) == 0; ++i) name = fmt::format("{}-{}.db", buf, i);
  return name;
}

// JSON text that survives invalid UTF-8 in file names and messages.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

struct WorkloadArgs {
  std::string file;
  std::string preset;
  int devices = 0;
  std::string sharding;
  int64_t steps = 0;
  int64_t warmup = -1;
  int64_t batch_size = 0;
  int local_world_size = -1;
  std::string pipeline, qcomms, backend;
  double network_bandwidth = 0;  // a double so that 1e9 is accepted
  int64_t network_latency = 0;
  std::map<std::string, CLI::Option*> given;  // flag -> option, to tell "absent" from "empty"
  std::string origin;                         // set by load(): the file or "preset NAME"
  bool was_given(const std::string& flag) const {
    auto it = given.find(flag);
    return it != given.end() && it->second->count() > 0;
  }
};

void add_workload_options(CLI::App* cmd, WorkloadArgs& a) {
  std::string names;
  for (const auto& n : es::preset_names()) names += (names.empty() ? "" : ", ") + n;
  a.given["workload"] = cmd->add_option("workload", a.file, "Workload JSON file (see README: Configuration reference)");
  a.given["--preset"] =
      cmd->add_option("--preset", a.preset, fmt::format("Built-in workload: {} (default {})", names, kDefaultPreset));
  a.given["--devices"] = cmd->add_option("--devices", a.devices, "Number of ranks (devices.count)")
                             ->check(kInteger)
                             ->check(CLI::Range(1, 64));
  a.given["--sharding"] = cmd->add_option("--sharding", a.sharding,
                                          "Sharding type for every table (drops per-table overrides): data_parallel, "
                                          "table_wise, row_wise, column_wise, table_row_wise");
  a.given["--local-world-size"] =
      cmd->add_option("--local-world-size", a.local_world_size, "Ranks per node for table_row_wise (sharding.local_world_size)")
          ->check(kInteger)->check(CLI::Range(1, 64));
  a.given["--steps"] = cmd->add_option("--steps", a.steps, "Measured steps")
                           ->check(kInteger)
                           ->check(CLI::Range(int64_t{1}, es::kMaxSteps));
  a.given["--warmup-steps"] = cmd->add_option("--warmup-steps", a.warmup, "Steps run before measuring")
                                  ->check(kInteger)->check(CLI::Range(int64_t{0}, es::kMaxSteps));
  a.given["--batch-size"] = cmd->add_option("--batch-size", a.batch_size, "Samples per rank per step")
                                ->check(kInteger)->check(CLI::Range(int64_t{1}, es::kMaxBatchSize));
  a.given["--backend"] = cmd->add_option("--backend", a.backend,
                                         "Executor (devices.backend): cpu, cuda (one GPU per rank), auto (cuda when a GPU "
                                         "is present)")
                             ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  a.given["--pipeline"] = cmd->add_option("--pipeline", a.pipeline,
                                          "Training pipeline (pipeline): base, sparse_dist, semi_sync");
  a.given["--qcomms"] = cmd->add_option("--qcomms", a.qcomms,
                                        "Precision of the output dist and gradient dist (qcomms.forward_precision and "
                                        "backward_precision): fp32, fp16, bf16")
                            ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  a.given["--network-bandwidth"] =
      cmd->add_option("--network-bandwidth", a.network_bandwidth,
                      "Emulated link bandwidth in bytes/s, within and across nodes "
                      "(network.intra_node/inter_node.bandwidth_bytes_per_s), e.g. 1e9")
          ->check(CLI::Number)->check(CLI::Range(1.0, static_cast<double>(es::kMaxBandwidthBytesPerS)));
  a.given["--network-latency"] =
      cmd->add_option("--network-latency", a.network_latency,
                      "Emulated latency per collective in ns, within and across nodes (network.*.latency_ns)")
          ->check(kInteger)->check(CLI::Range(int64_t{0}, es::kMaxLatencyNs));
}

// One line: "intra_node 1.00 GB/s, 5000 ns; inter_node unlimited".
std::string network_text(const es::NetworkSpec& n) {
  auto link = [](const es::LinkSpec& l) {
    if (!l.limited()) return std::string("unlimited");
    const std::string bw = l.bandwidth_bytes_per_s > 0
                               ? fmt::format("{:.3g} GB/s", static_cast<double>(l.bandwidth_bytes_per_s) / 1e9)
                               : std::string("unlimited bandwidth");
    return fmt::format("{}, {} ns latency", bw, l.latency_ns);
  };
  return fmt::format("intra_node {}; inter_node {}", link(n.intra_node), link(n.inter_node));
}

// The overlap settings of a workload, for plan and run.
std::string pipeline_text(const es::WorkloadSpec& spec) {
  return fmt::format("pipeline     {}; qcomms forward {} backward {}\nnetwork      {}\n", es::to_string(spec.pipeline),
                     es::to_string(spec.qcomms.forward_precision), es::to_string(spec.qcomms.backward_precision),
                     network_text(spec.network));
}

json pipeline_json(const es::WorkloadSpec& spec) {
  const json w = es::to_json(spec);
  return {{"pipeline", w.at("pipeline")}, {"qcomms", w.at("qcomms")}, {"network", w.at("network")}};
}

// Runs f; a SpecError that starts with a JSON pointer (plan, memory and backend errors name
// pointers only) is rethrown with the workload's origin in front ("x.json: /devices/count: ...").
template <class F>
auto with_origin(const std::string& origin, F&& f) {
  try {
    return f();
  } catch (const es::SpecError& e) {
    const std::string msg = e.what();
    if (!msg.empty() && msg[0] == '/') throw es::SpecError(origin + ": " + msg);
    throw;
  }
}

// Loads the workload and applies the flags. A validation error about a field that a flag set
// names the flag too.
es::WorkloadSpec load(WorkloadArgs& a) {
  if (a.was_given("workload") && a.file.empty()) throw es::SpecError("the workload file name is empty");
  if (a.was_given("--preset") && a.preset.empty())
    throw es::SpecError(fmt::format("--preset: empty; known presets: {}", fmt::join(es::preset_names(), ", ")));
  if (!a.file.empty() && !a.preset.empty()) throw es::SpecError("give either a workload file or --preset, not both");
  es::WorkloadSpec spec = !a.file.empty() ? es::load_workload_file(a.file)
                                          : es::load_preset(a.preset.empty() ? kDefaultPreset : a.preset);
  a.origin = !a.file.empty() ? a.file : "preset " + (a.preset.empty() ? kDefaultPreset : a.preset);
  std::vector<std::pair<std::string, std::string>> set_by;  // JSON pointer, flag
  if (a.was_given("--devices")) {
    spec.devices.count = a.devices;
    set_by.emplace_back("/devices/count", "--devices");
  }
  if (a.was_given("--sharding")) {
    spec.sharding.default_type = es::sharding_type_from_string(a.sharding, "--sharding");
    spec.sharding.per_table.clear();
  }
  if (a.was_given("--local-world-size")) {
    spec.sharding.local_world_size = a.local_world_size;
    set_by.emplace_back("/sharding/local_world_size", "--local-world-size");
  }
  if (a.was_given("--pipeline")) spec.pipeline = es::pipeline_from_string(a.pipeline, "--pipeline");
  if (a.was_given("--backend")) {
    spec.devices.backend = a.backend == "cuda" ? es::Backend::cuda : a.backend == "auto" ? es::Backend::auto_ : es::Backend::cpu;
    set_by.emplace_back("/devices/backend", "--backend");
  }
  if (a.was_given("--qcomms")) {
    const auto p = a.qcomms == "bf16" ? es::CommPrecision::bf16
                   : a.qcomms == "fp16" ? es::CommPrecision::fp16 : es::CommPrecision::fp32;
    spec.qcomms.forward_precision = spec.qcomms.backward_precision = p;
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
    // auto becomes cpu or cuda here, so that plan and run say which; cuda without GPUs is refused
    spec = with_origin(a.origin, [&] { return es::with_resolved_backend(spec, a.origin); });
  } catch (const es::SpecError& e) {
    std::string msg = e.what();
    for (const auto& [ptr, flag] : set_by)
      if (msg.find(": " + ptr + ":") != std::string::npos || msg.find(": " + ptr + "/") != std::string::npos)
        msg += fmt::format(" (set by {})", flag);
    throw es::SpecError(msg);
  }
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

int cmd_plan(WorkloadArgs& a, bool as_json) {
  const es::WorkloadSpec spec = load(a);
  const es::ShardingPlan plan = with_origin(a.origin, [&] { return es::plan_sharding(spec); });
  const auto est = es::estimate_memory(spec, plan);
  if (as_json) {
    json j = es::to_json(spec, plan);
    j.update(pipeline_json(spec));
    j["memory"] = json::array();
    for (const auto& e : est)
      j["memory"].push_back({{"rank", e.rank}, {"weights_bytes", e.weights}, {"optimizer_state_bytes", e.optimizer_state},
                             {"dense_bytes", e.dense}, {"buffers_bytes", e.buffers}, {"total_bytes", e.total()},
                             {"capacity_bytes", spec.devices.memory_bytes}});
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << plan_table(spec, plan) << "\n" << pipeline_text(spec) << "\n";
    std::cout << fmt::format("{:<5} {:>12} {:>16} {:>12} {:>12} {:>12} {:>12}\n", "rank", "weights", "optimizer state",
                             "dense", "buffers", "total", "capacity");
    for (const auto& e : est)
      std::cout << fmt::format("{:<5} {:>12} {:>16} {:>12} {:>12} {:>12} {:>12}\n", e.rank, ss::format_bytes(e.weights),
                               ss::format_bytes(e.optimizer_state), ss::format_bytes(e.dense),
                               ss::format_bytes(e.buffers), ss::format_bytes(e.total()),
                               ss::format_bytes(spec.devices.memory_bytes));
  }
  with_origin(a.origin, [&] { es::check_memory_fits(spec, est); });
  return 0;
}

int cmd_run(WorkloadArgs& a, bool as_json, std::string output, bool overwrite) {
  const es::WorkloadSpec spec = load(a);
  if (output.empty()) output = default_session_name();
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::string sharding = es::to_string(spec.sharding.default_type);
  if (!spec.sharding.per_table.empty()) sharding += " + per-table overrides";
  fmt::print(stderr, "embedscope run: {} on {} {} ranks, {}, batch {} per rank, {} steps (+{} warmup), {} pipeline\n",
             spec.name, spec.devices.count, es::to_string(spec.devices.backend), sharding, spec.batch_size, spec.steps,
             spec.warmup_steps, es::to_string(spec.pipeline));
  if (spec.network.limited()) fmt::print(stderr, "network: {}\n", network_text(spec.network));
  es::TrainerOptions opt;
  opt.session_path = output;
  opt.session_overwrite = overwrite;
  opt.keep_events = false;
  opt.cancel = &g_cancel;
  std::signal(SIGINT, on_sigint);
  const int64_t every = std::max<int64_t>(1, spec.steps / 10);
  auto last_print = std::chrono::steady_clock::now();
  opt.on_step = [&](const es::StepProgress& p) {
    if (p.step == 0) {
      fmt::print(stderr, "{}warmup {}/{}{}", tty ? "\r" : "", p.warmup_done, spec.warmup_steps, tty ? "" : "\n");
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!tty && p.step % every != 0 && p.step != p.total_steps && now - last_print < std::chrono::seconds(2)) return;
    last_print = now;
    fmt::print(stderr, "{}step {}/{}  {:.0f} samples/s  ETA {:.1f} s  loss {:.4f}{}", tty ? "\r\033[K" : "", p.step,
               p.total_steps, p.samples_per_s, p.eta_s, p.loss, tty ? "" : "\n");
  };
  const es::RunResult r = with_origin(a.origin, [&] { return es::run_training(spec, opt); });
  if (tty) fmt::print(stderr, "\n");
  if (r.ended != es::RunEnd::complete && r.ended != es::RunEnd::cancelled) {
    fmt::print(stderr, "error: run ended {}: {}\nsession: {}\n", es::to_string(r.ended), r.error, r.session_path);
    if (as_json)
      std::cout << dump(json{{"ended", es::to_string(r.ended)}, {"error", r.error}, {"session", r.session_path}})
                << "\n";
    return r.bad_input ? 2 : 1;
  }
  if (r.step_time_ns.empty()) {
    fmt::print(stderr, "run cancelled before the first measured step\nsession: {}\n", r.session_path);
    if (as_json) std::cout << dump(json{{"ended", "cancelled"}, {"session", r.session_path}}) << "\n";
    return 0;
  }
  const auto d = embedscope::sessions::summarize(r.step_time_ns);
  const double sps = d.mean > 0 ? static_cast<double>(r.samples_per_step) / (d.mean * 1e-9) : 0.0;
  int64_t invalid = 0;
  for (const auto& rk : r.ranks) invalid += rk.invalid_ids;
  if (invalid > 0)
    fmt::print(stderr, "warning: {} ids outside their table were {} (invalid_ids policy)\n", invalid,
               spec.invalid_ids == es::InvalidIdPolicy::clamp ? "clamped" : "dropped");
  if (as_json) {
    const json overlap = pipeline_json(spec);  // pipeline, qcomms, network
    json j{{"ended", es::to_string(r.ended)},
           {"session", r.session_path},
           {"workload", spec.name},
           {"backend", es::to_string(spec.devices.backend)},
           {"world_size", spec.devices.count},
           {"sharding", es::to_json(spec, r.plan)},
           {"pipeline", es::to_string(spec.pipeline)},
           {"qcomms", overlap.at("qcomms")},
           {"network", overlap.at("network")},
           {"steps", static_cast<int64_t>(r.step_time_ns.size())},
           {"samples_per_step", r.samples_per_step},
           {"step_time_ns", {{"mean", d.mean}, {"p50", d.p50}, {"p99", d.p99}, {"min", d.min}, {"max", d.max}}},
           {"samples_per_s", sps},
           {"loss_first", r.loss.front()},
           {"loss_last", r.loss.back()},
           {"loss", r.loss},
           {"invalid_ids", invalid},
           {"qcomms_error", {{"forward_max_abs_error", r.qcomms_error.forward_max_abs},
                             {"forward_relative_error", r.qcomms_error.forward_relative},
                             {"backward_max_abs_error", r.qcomms_error.backward_max_abs},
                             {"backward_relative_error", r.qcomms_error.backward_relative}}},
           {"ranks", json::array()}};
    for (const auto& rk : r.ranks)
      j["ranks"].push_back({{"rank", rk.rank}, {"ids_looked_up", rk.ids_looked_up}, {"unique_ids", rk.unique_ids},
                            {"bytes_sent", rk.bytes_sent}, {"bytes_received", rk.bytes_received},
                            {"memory_bytes", rk.memory_bytes}});
    std::cout << dump(j) << "\n";
    return 0;
  }
  std::cout << "sharding plan\n" << plan_table(spec, r.plan) << "\n" << pipeline_text(spec);
  std::cout << fmt::format("steps        {} measured, {} samples each ({} per rank x {} ranks)\n", r.step_time_ns.size(),
                           r.samples_per_step, spec.batch_size, spec.devices.count);
  std::cout << fmt::format("step time    mean {}  p50 {}  p99 {}\n", ms(d.mean), ms(static_cast<double>(d.p50)),
                           ms(static_cast<double>(d.p99)));
  std::cout << fmt::format("throughput   {:.0f} samples/s\n", sps);
  std::cout << fmt::format("loss         first {:.4f}  last {:.4f}\n", r.loss.front(), r.loss.back());
  if (spec.qcomms.forward_precision != es::CommPrecision::fp32 || spec.qcomms.backward_precision != es::CommPrecision::fp32)
    std::cout << fmt::format("qcomms error forward max abs {:.3g} (relative {:.3g}); backward max abs {:.3g} (relative {:.3g})\n",
                             r.qcomms_error.forward_max_abs, r.qcomms_error.forward_relative,
                             r.qcomms_error.backward_max_abs, r.qcomms_error.backward_relative);
  std::cout << "\n";
  std::cout << fmt::format("{:<5} {:>14} {:>12} {:>14} {:>14} {:>12}\n", "rank", "ids looked up", "unique rows",
                           "bytes sent", "bytes received", "memory peak");
  for (const auto& rk : r.ranks)
    std::cout << fmt::format("{:<5} {:>14} {:>12} {:>14} {:>14} {:>12}\n", rk.rank, rk.ids_looked_up, rk.unique_ids,
                             ss::format_bytes(rk.bytes_sent), ss::format_bytes(rk.bytes_received),
                             ss::format_bytes(rk.memory_bytes));
  std::cout << fmt::format("\n{}session: {}\n", r.ended == es::RunEnd::cancelled ? "cancelled; " : "", r.session_path);
  return 0;
}

std::string ms(int64_t ns) { return ms(static_cast<double>(ns)); }

int cmd_stats(const std::string& file, bool as_json) {
  const ss::SessionReader session(file);
  const ss::RunStats st = ss::analyze(session);
  if (as_json) {
    json j{{"session", file},
           {"ended", st.ended},
           {"simulated", st.simulated},
           {"workload", session.meta(ss::meta::kWorkloadName)},
           {"world_size", st.ranks.size()},
           {"steps", st.steps},
           {"pipeline", session.meta(ss::meta::kPipeline, "base")},
           {"qcomms", {{"forward_precision", session.meta(ss::meta::kQcommsForwardPrecision, "fp32")},
                       {"backward_precision", session.meta(ss::meta::kQcommsBackwardPrecision, "fp32")}}},
           {"network", json::parse(session.meta(ss::meta::kNetworkJson, "{}"), nullptr, false)},
           {"samples_per_step", st.samples_per_step},
           {"step_time_ns", {{"mean", st.step_time_ns.mean}, {"p50", st.step_time_ns.p50}, {"p99", st.step_time_ns.p99},
                             {"min", st.step_time_ns.min}, {"max", st.step_time_ns.max}}},
           {"samples_per_s", st.samples_per_s},
           {"overlap_pct", st.overlap_pct},
           {"exposed_comm_ns", st.exposed_comm_ns},
           {"imbalance", {{"lookups_max_over_mean", st.lookups_max_over_mean},
                          {"lookup_time_max_over_mean", st.lookup_time_max_over_mean}}},
           {"loss", st.loss},
           {"peak_allocated_bytes", st.peak_allocated_bytes},
           {"peak_reserved_bytes", st.peak_reserved_bytes},
           {"tracer_overhead_ns", std::strtoll(session.meta(ss::meta::kTracerOverheadNs, "0").c_str(), nullptr, 10)},
           {"dropped_records", std::strtoll(session.meta(ss::meta::kDroppedRecords, "0").c_str(), nullptr, 10)},
           {"ranks", json::array()}};
    for (const auto& r : st.ranks) {
      json cats = json::object();
      for (int c = 0; c < ss::kNumCategories; ++c)
        cats[ss::to_string(static_cast<ss::OpCategory>(c))] = r.by_category_ns[static_cast<size_t>(c)];
      j["ranks"].push_back({{"rank", r.rank}, {"compute_ns", r.compute_ns}, {"comm_ns", r.comm_ns},
                            {"overlap_ns", r.overlap_ns}, {"exposed_comm_ns", r.exposed_comm_ns}, {"idle_ns", r.idle_ns},
                            {"overlap_pct", r.overlap_pct}, {"ids_looked_up", r.ids_looked_up},
                            {"lookup_ns", r.lookup_ns}, {"bytes_sent", r.bytes_sent},
                            {"bytes_received", r.bytes_received}, {"by_category_ns", cats},
                            {"peak_allocated_bytes", r.peak_allocated_bytes}, {"peak_reserved_bytes", r.peak_reserved_bytes},
                            {"fragmentation", r.fragmentation}, {"memviz_fragmentation", r.memviz_fragmentation}});
    }
    const auto name_of = [&](int32_t id) { return id < 0 ? std::string("(gap)") : session.name(id); };
    j["critical_path"] = {{"total_ns", st.critical_path_ns}, {"ops", json::array()}};
    for (const auto& e : st.critical_path)
      j["critical_path"]["ops"].push_back({{"name", name_of(e.name_id)}, {"category", e.name_id < 0 ? "gap" : ss::to_string(e.category)},
                                           {"ns", e.ns}, {"share", e.share}, {"top_rank", e.top_rank},
                                           {"steps_bounded", e.steps_bounded}});
    j["collectives"] = json::array();
    for (const auto& c : st.collectives)
      j["collectives"].push_back({{"name", name_of(c.name_id)}, {"count", c.count}, {"bytes", c.bytes}, {"time_ns", c.time_ns},
                                  {"exposed_ns", c.exposed_ns}, {"wait_ns", c.wait_ns}});
    if (!session.meta(ss::meta::kEndMessage).empty()) j["end_message"] = session.meta(ss::meta::kEndMessage);
    std::cout << dump(j) << "\n";
    return 0;
  }
  std::cout << fmt::format("session      {} ({}, {})\n", file, st.ended, st.simulated ? "SIMULATED" : "measured");
  if (!session.meta(ss::meta::kEndMessage).empty()) std::cout << fmt::format("             {}\n", session.meta(ss::meta::kEndMessage));
  std::cout << fmt::format("workload     {} on {} {} ranks, {} measured steps of {} samples\n",
                           session.meta(ss::meta::kWorkloadName), st.ranks.size(), session.meta(ss::meta::kBackend), st.steps,
                           st.samples_per_step);
  if (!session.meta(ss::meta::kWorkloadJson).empty()) try {  // the workload as run: pipeline, comm precisions, network
    std::cout << pipeline_text(es::parse_workload(json::parse(session.meta(ss::meta::kWorkloadJson)), file + ": workload_json"));
  } catch (const std::exception& e) {
    std::cout << fmt::format("pipeline     {} (the stored workload is unreadable: {})\n", session.meta(ss::meta::kPipeline, "base"),
                             e.what());
  }
  if (st.steps == 0) {
    std::cout << "no measured steps: nothing to analyse (the run ended before its first measured step)\n";
    return 0;
  }
  std::cout << fmt::format("step time    mean {}  p50 {}  p99 {}\n", ms(st.step_time_ns.mean), ms(st.step_time_ns.p50),
                           ms(st.step_time_ns.p99));
  std::cout << fmt::format("throughput   {:.0f} samples/s\n", st.samples_per_s);
  std::cout << fmt::format("overlap      {:.1f}% of communication ran while the rank computed; exposed communication "
                           "{} per rank ({} per step)\n",
                           st.overlap_pct, ms(st.exposed_comm_ns), ms(st.exposed_comm_ns / st.steps));
  std::cout << fmt::format("imbalance    ids looked up max/mean {:.2f}; lookup time max/mean {:.2f}\n\n",
                           st.lookups_max_over_mean, st.lookup_time_max_over_mean);
  std::cout << fmt::format("{:<5} {:>11} {:>11} {:>13} {:>11} {:>9} {:>14} {:>12} {:>14}\n", "rank", "compute", "comm",
                           "exposed comm", "idle", "overlap", "ids looked up", "bytes sent", "bytes received");
  for (const auto& r : st.ranks)
    std::cout << fmt::format("{:<5} {:>11} {:>11} {:>13} {:>11} {:>8.1f}% {:>14} {:>12} {:>14}\n", r.rank,
                             ms(r.compute_ns), ms(r.comm_ns), ms(r.exposed_comm_ns), ms(r.idle_ns), r.overlap_pct,
                             r.ids_looked_up, ss::format_bytes(r.bytes_sent), ss::format_bytes(r.bytes_received));
  std::cout << fmt::format("\n{:<5} {:>16} {:>16} {:>15} {:>8}\n", "rank", "peak allocated", "peak reserved",
                           "fragmentation", "memviz");
  for (const auto& r : st.ranks)
    std::cout << fmt::format("{:<5} {:>16} {:>16} {:>14.1f}% {:>8.3f}\n", r.rank, ss::format_bytes(r.peak_allocated_bytes),
                             ss::format_bytes(r.peak_reserved_bytes), 100 * r.fragmentation, r.memviz_fragmentation);
  std::cout << "\nstep time by op category (all ranks, union per category)\n";
  for (int c = 0; c < ss::kNumCategories; ++c) {
    int64_t total = 0;
    for (const auto& r : st.ranks) total += r.by_category_ns[static_cast<size_t>(c)];
    if (total > 0)
      std::cout << fmt::format("  {:<10} {:>12}\n", ss::to_string(static_cast<ss::OpCategory>(c)), ms(total));
  }
  std::cout << fmt::format("\ncritical path: what bounded the steps (dependencies inferred), {} over {} steps\n",
                           ms(st.critical_path_ns), st.steps);
  std::cout << fmt::format("  {:<28} {:<10} {:>11} {:>7} {:>9} {:>14}\n", "op", "category", "on path", "share", "top rank",
                           "steps bounded");
  for (const auto& e : st.critical_path)
    std::cout << fmt::format("  {:<28} {:<10} {:>11} {:>6.1f}% {:>9} {:>14}\n",
                             e.name_id < 0 ? std::string("(gap: untraced)") : session.name(e.name_id),
                             e.name_id < 0 ? "-" : ss::to_string(e.category), ms(e.ns), 100 * e.share, e.top_rank,
                             e.steps_bounded);
  if (!st.collectives.empty()) {
    std::cout << "\ncollectives, per step (summed over ranks)\n";
    std::cout << fmt::format("  {:<28} {:>7} {:>12} {:>11} {:>11} {:>17}\n", "name", "count", "bytes", "time",
                             "exposed", "waiting for peers");
    for (const auto& c : st.collectives)
      std::cout << fmt::format("  {:<28} {:>7.1f} {:>12} {:>11} {:>11} {:>17}\n", session.name(c.name_id),
                               static_cast<double>(c.count) / static_cast<double>(st.steps),
                               ss::format_bytes(c.bytes / st.steps), ms(c.time_ns / st.steps),
                               ms(c.exposed_ns / st.steps), ms(c.wait_ns / st.steps));
  }
  return 0;
}

int cmd_export(const std::string& file, const std::string& format, const std::string& out) {
  const ss::SessionReader session(file);
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(file, out, ec))
    throw es::SpecError(fmt::format("{}: is the session being exported; choose another output", out));
  if (format == "chrome") {
    // Written beside the target and renamed at the end: a failed export leaves nothing behind.
    const std::string tmp = out + ".partial";
    {
      std::ofstream f(tmp);
      if (!f) throw es::SpecError(fmt::format("{}: cannot write: {}", out, std::strerror(errno)));
      ss::export_chrome_trace(session, f);
      f.close();
      if (!f) {
        std::filesystem::remove(tmp, ec);
        throw es::SpecError(fmt::format("{}: write failed: {}", out, std::strerror(errno)));
      }
    }
    std::filesystem::rename(tmp, out, ec);
    if (ec) {
      std::filesystem::remove(tmp, ec);
      throw es::SpecError(fmt::format("{}: cannot write: {}", out, ec.message()));
    }
    fmt::print(stderr, "wrote {} (open it in https://ui.perfetto.dev or chrome://tracing)\n", out);
  } else {
    for (const auto& p : ss::export_csv(session, ss::analyze(session), out)) fmt::print(stderr, "wrote {}\n", p);
  }
  return 0;
}

int cmd_replay(const std::string& file, const std::string& allocators, int64_t max_split, int64_t capacity,
               bool as_json) {
  const es::MemoryTrace trace = es::load_memory_trace(file);
  const int64_t cap = capacity > 0 ? capacity : trace.capacity_bytes;
  if (cap <= 0) throw es::SpecError(fmt::format("{}: no capacity: give --capacity or \"capacity_bytes\" in the trace", file));
  std::vector<es::AllocatorConfig> settings;
  std::string list = allocators.empty() ? "caching,expandable,direct" : allocators;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    es::AllocatorKind kind;
    try {
      kind = es::allocator_kind_from_string(name, "--allocator");
    } catch (const std::invalid_argument& e) {
      throw es::SpecError(e.what());
    }
    if (kind == es::AllocatorKind::cuda_async)
      throw es::SpecError("--allocator: cuda_async cannot be replayed: its cudaMallocAsync pool needs a GPU and hides its "
                          "layout; replay caching, expandable or direct");
    settings.push_back({kind, cap, 0, false});
    if (kind != es::AllocatorKind::direct && max_split > 0) settings.push_back({kind, cap, max_split, false});
    start = comma + 1;
  }
  std::vector<es::ReplayResult> results;
  for (const auto& c : settings) results.push_back(es::replay(trace, c, file));
  if (as_json) {
    json j = json::array();
    for (const auto& r : results)
      j.push_back({{"allocator", es::to_string(r.config.kind)}, {"max_split_size", r.config.max_split_size},
                   {"oom", r.oom}, {"oom_action", r.oom_action}, {"oom_message", r.oom_message},
                   {"peak_allocated_bytes", r.peak_allocated}, {"peak_reserved_bytes", r.peak_reserved},
                   {"fragmentation_at_peak", r.fragmentation_at_peak}, {"memviz_fragmentation_at_peak", r.memviz_at_peak},
                   {"segments_at_peak", r.segments_at_peak}, {"final_reserved_bytes", r.final_reserved}});
    std::cout << dump(json{{"trace", file}, {"actions", trace.actions.size()}, {"capacity_bytes", cap}, {"results", j}})
              << "\n";
    return 0;
  }
  std::cout << fmt::format("trace {}: {} actions, device capacity {}\n\n", file, trace.actions.size(), ss::format_bytes(cap));
  std::cout << fmt::format("{:<36} {:>14} {:>14} {:>14} {:>10} {:>9}  {}\n", "allocator", "peak allocated",
                           "peak reserved", "frag at peak", "memviz", "segments", "result");
  for (const auto& r : results)
    std::cout << fmt::format("{:<36} {:>14} {:>14} {:>13.1f}% {:>10.3f} {:>9}  {}\n", r.label,
                             ss::format_bytes(r.peak_allocated), ss::format_bytes(r.peak_reserved),
                             100 * r.fragmentation_at_peak, r.memviz_at_peak, r.segments_at_peak,
                             r.oom ? fmt::format("OOM at action {}", r.oom_action) : std::string("ok"));
  for (const auto& r : results)
    if (r.oom) std::cout << fmt::format("\n{}: {}\n", r.label, r.oom_message);
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
  std::string run_output;
  run->add_option("-o,--output", run_output,
                  "Session file to write (default: embedscope-YYYYmmdd-HHMMSS.db in the current directory)");
  bool run_overwrite = false;
  run->add_flag("--force-overwrite", run_overwrite, "Replace the session file if it exists");
  auto* plan = app.add_subcommand("plan", "Show the sharding plan and the memory each device needs, without running");
  add_workload_options(plan, plan_args);
  plan->add_flag("--json", plan_json, "Print the plan as JSON");
  std::string stats_file, export_file, export_format, export_out;
  bool stats_json = false;
  auto* stats = app.add_subcommand("stats", "Step time, overlap, exposed communication and load imbalance of a session");
  stats->add_option("session", stats_file, "Session file (.db)")->required();
  stats->add_flag("--json", stats_json, "Print the figures as one JSON object on stdout");
  std::string replay_file, replay_allocators;
  int64_t replay_max_split = 0, replay_capacity = 0;
  bool replay_json = false;
  auto* rep = app.add_subcommand("replay-memory",
                                 "Replay alloc/free actions through allocator settings and compare reserved, peak "
                                 "and fragmentation");
  rep->add_option("trace", replay_file, "Trace JSON: {\"capacity_bytes\": N, \"actions\": [{\"action\": "
                                        "\"alloc\"|\"free\", \"id\", \"size\", \"stream\", \"tag\"}]}")
      ->required();
  rep->add_option("--allocator", replay_allocators, "Comma-separated: caching, expandable, direct (default: all)");
  rep->add_option("--max-split-size", replay_max_split,
                  "Also replay caching/expandable with this max_split_size (bytes, >= 20 MiB as PyTorch requires)")
      ->check(kInteger)->check(CLI::Range(es::kLargeBuffer, es::kMaxMemoryBytes));
  rep->add_option("--capacity", replay_capacity, "Device capacity in bytes (default: the trace's capacity_bytes)")
      ->check(kInteger)->check(CLI::Range(int64_t{1}, es::kMaxMemoryBytes));
  rep->add_flag("--json", replay_json, "Print the comparison as JSON");
  auto* exp = app.add_subcommand("export", "Export a session as Chrome trace JSON (Perfetto) or CSV");
  exp->add_option("session", export_file, "Session file (.db)")->required();
  exp->add_option("--format", export_format, "chrome: Trace Event JSON; csv: a folder of CSV files")
      ->required()
      ->check(CLI::IsMember({"chrome", "csv"}));
  exp->add_option("-o,--output", export_out, "Output file (chrome) or folder (csv)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::RequiredError& e) {
    const std::string first = argc > 1 ? argv[1] : "";
    if (!first.empty() && first[0] != '-' && first != "run" && first != "plan" && first != "stats" &&
        first != "export" && first != "replay-memory") {  // `embedscope frobnicate`
      fmt::print(stderr, "error: unknown command '{}'; commands: run, plan, stats, export, replay-memory (see --help)\n", first);
      return 2;
    }
    app.exit(e);
    return 2;
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
  const bool wants_json = (*run && run_json) || (*plan && plan_json) || (*stats && stats_json) || (*rep && replay_json);
  try {
    if (*run) return cmd_run(run_args, run_json, run_output, run_overwrite);
    if (*plan) return cmd_plan(plan_args, plan_json);
    if (*stats) return cmd_stats(stats_file, stats_json);
    if (*exp) return cmd_export(export_file, export_format, export_out);
    if (*rep) return cmd_replay(replay_file, replay_allocators, replay_max_split, replay_capacity, replay_json);
  } catch (const es::SpecError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    if (wants_json) std::cout << dump(json{{"ended", "bad_input"}, {"error", e.what()}}) << "\n";
    return 2;
  } catch (const ss::SessionError& e) {
    if (wants_json) std::cout << dump(json{{"ended", "bad_input"}, {"error", e.what()}}) << "\n";
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
