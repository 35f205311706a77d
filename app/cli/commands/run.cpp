// `embedscope run`: runs a workload, writes its session, prints a summary (text or --json).

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "interrupt.h"
#include "lm.h"
#include "embedscope/engine/planner/host_placement.h"
#include "embedscope/engine/sharding/idle_ranks.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/exec/launch/rank_env.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/exec/setup_note.h"
#include "embedscope/engine/exec/table_storage_json.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/storage_fallback.h"
#include "embedscope/sessions/analysis/counted_steps.h"  // drain_steps_run
#include "embedscope/sessions/analysis/stats.h"
#include "embedscope/sessions/store/session.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_rate
#include "embedscope/sessions/store/end_mark.h"
#include "output/output.h"
#include "output/rebalance_text.h"
#include "output_guard.h"
#include "profile_trust_text.h"
#include "run_common.h"
#include "run_process.h"
#include "workload_args.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;

std::string default_session_name() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "embedscope-%Y%m%d-%H%M%S", std::localtime(&t));
  std::string name = std::string(buf) + ".db";
  for (int i = 2; access(name.c_str(), F_OK) == 0; ++i) name = fmt::format("{}-{}.db", buf, i);
  return name;
}

namespace {

int cmd_run(WorkloadArgs& a, bool as_json, std::string output, bool overwrite, const std::string& plan_file,
            ProcessArgs& proc, int64_t held_out_batches, bool held_out_given, const std::vector<std::string>& allow_storage) {
  // The signal handling first, before the command reads, plans or creates anything (fixc49): from
  // here on a SIGINT or SIGTERM cancels (a second one stops at once), and one that comes before
  // the run starts ends the command without a session ("cancelled before the run started"). The
  // same handler has been in since the process's first code (main.cpp: take_stop_signals_early,
  // before the shared libraries' initialisers); a signal in the dynamic loader's time before it
  // ends the process by its default action (exit 130 / 143) and leaves no file.
  // The second-signal handling is installed before the first signal's handler: from the moment
  // that handler can print "Ctrl-C again stops at once", a second signal is this one's
  // (retest47 R2: a second SIGTERM in the window between the two killed the run, rc 143, no JSON).
  // A second signal records the stop in the session (tester41 #21; run_common.h), once set_session
  // named it.
  StopAtOnce& stop = StopAtOnce::install(as_json);
  std::atomic<bool>& cancel = cancel_on_sigint(kRunCancelling);
  const es::FlightDumpRequest& flight = flight_dump_on_signals();  // SIGTERM cancels as SIGINT does
  // the session never replaces the workload, the plan or the profile it is run from (tester45 F7)
  refuse_output_that_is_an_input(output, "-o", {a.file, plan_file, a.simulate}, "run");
  // a flag that does nothing is refused, as the other DLRM-only flags are (tester47 F14.1)
  if (held_out_given && !a.simulate.empty())
    throw es::SpecError("--held-out-batches: not with --simulate (a simulated run trains no model to evaluate)");
  if (is_lm_args(a)) {  // "model": "lm_embedding" (issue 19): its own runner
    if (!plan_file.empty()) throw es::SpecError("--plan: not for an lm_embedding workload (its plan is its sharding)");
    if (held_out_given)
      throw es::SpecError("--held-out-batches: not for an lm_embedding workload (its run has no held-out evaluation)");
    // started as one rank of several by mpirun, srun or torchrun (rank_env.h): every process
    // would train the whole job (tester43 F18). A world of one is the whole job: it runs.
    std::optional<es::launch::LaunchEnv> env;
    try {
      env = es::launch::launch_from_environment(es::launch::launcher_environment());
    } catch (const es::SpecError&) {  // variables this workload never reads
    }
    if (env && env->world_size > 1)
      throw es::SpecError(fmt::format("{}: rank {} of {} from {}'s environment: {}",
                                      !a.file.empty() ? a.file : "preset " + a.preset, env->rank, env->world_size,
                                      env->launcher, kLmRanksAreThreads));
    return cmd_run_lm(a, as_json, output, overwrite, cancel, flight);
  }
  const bool auto_plan = plan_file == "auto";
  if (auto_plan && a.was_given("--sharding"))
    throw es::SpecError("--sharding: cannot be combined with --plan auto (the planner's search picks every table's "
                        "type; fix a table's type with a sharding.tables override in the workload instead)");
  if (!auto_plan) refuse_flags_the_plan_overrides(a, plan_file);
  if (!allow_storage.empty() && !auto_plan)
    throw es::SpecError("--allow-storage: only with --plan auto (a plan file carries its own storage changes)");
  const std::vector<es::StorageOption> allowed = es::storage_options_from_strings(allow_storage);
  const std::string process_from = resolve_process(proc, a);
  es::WorkloadSpec spec = load(a);
  // a given plan runs exactly as written (validated against the workload); `auto`: the best plan of
  // the planner's search (planner/search.h); else the greedy planner's
  std::string auto_proposer;
  const es::ShardingPlan plan = [&] {
    if (auto_plan)
      return with_origin(a.origin, [&] {
        es::StoragePlanResult r = es::plan_search_with_storage(spec, es::planning_profile(spec), {}, allowed);
        auto_proposer = r.search.proposer;
        if (!r.changes.empty()) fmt::print(stderr, "{}", es::storage_changes_text(r));
        spec = std::move(r.spec);  // with the planner's storage changes, if any
        return r.search.plan;
      });
    if (!plan_file.empty()) es::apply_plan_file_storage(spec, plan_file);
    return plan_file.empty() ? with_origin(a.origin, [&] { return es::plan_sharding(spec); })
                             : es::load_plan_file(spec, plan_file);
  }();
  // a hot table in host memory that the greedy plan puts beside other tables (planner/host_placement.h)
  if (!auto_plan && plan_file.empty())
    for (const std::string& w : es::host_table_placement_warnings(spec, plan))
      fmt::print(stderr, "warning: {}: {}\n", a.origin, w);
  if (!process_from.empty()) output = rank_output(output, proc);
  if (output.empty()) output = default_session_name();
  embedscope::sessions::SessionWriter::check_path(output, overwrite);  // refuse before announcing the run
  make_output_folder(output, "-o");  // -o runs/a.db in an empty folder makes runs/, as scenario -o does
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::string sharding = es::to_string(spec.sharding.default_type);
  if (!spec.sharding.per_table.empty()) sharding += " + per-table overrides";
  if (!plan_file.empty()) sharding = "the plan in " + plan_file;
  if (auto_plan) sharding = "the planner's search (plan --auto; best proposal: " + auto_proposer + ")";
  fmt::print(stderr, "embedscope run: {} on {} {} ranks, {}, batch {} per rank, {} step{} (+{} warmup), {} pipeline\n",
             spec.name, spec.devices.count, es::to_string(spec.devices.backend), sharding, spec.batch_size, spec.steps,
             spec.steps == 1 ? "" : "s", spec.warmup_steps, es::to_string(spec.pipeline));
  if (const std::string note = auto_backend_note(a, spec); !note.empty()) fmt::print(stderr, "backend: {}\n", note);
  if (!process_from.empty())
    fmt::print(stderr, "this process: rank {} of {} (from {}), rendezvous {} (run id {})\n", proc.rank, proc.world_size,
               process_from, proc.rendezvous, proc.run_id);
  if (spec.network.limited()) fmt::print(stderr, "network: {}\n", network_text(spec.network));
  // ranks with no embedding rows still join every collective (tester58 F4); one process of a launch says it
  if (const std::string note = es::idle_ranks_note(plan); !note.empty() && (process_from.empty() || proc.rank == 0))
    fmt::print(stderr, "{}\n", note);
  const bool simulated = spec.devices.backend == es::Backend::simulated;
  if (simulated) {
    const int nodes = spec.devices.count / spec.sharding.local_world_size;
    fmt::print(stderr, "SIMULATED: {} node{} x {} GPU{} of hardware profile {}; every time below is the cost model's\n",
               nodes, nodes == 1 ? "" : "s", spec.sharding.local_world_size,
               spec.sharding.local_world_size == 1 ? "" : "s", spec.devices.hardware);
  }
  es::TrainerOptions opt;
  opt.session_path = output;
  opt.session_overwrite = overwrite;
  opt.keep_events = false;
  opt.held_out_batches = held_out_batches;
  // a line now and then during a long evaluation (tester46 F14: ~2 min without a word), and
  // what Ctrl-C / SIGTERM does then
  opt.held_out_progress = [last = std::chrono::steady_clock::now(), said = false](int64_t done, int64_t all) mutable {
    const auto now = std::chrono::steady_clock::now();
    if (done < all && now - last < std::chrono::seconds(5)) return;
    last = now;
    if (done == all && !said) return;  // a short evaluation: nothing to say
    fmt::print(stderr, "held-out evaluation: {}/{} batches{}\n", done, all,
               said ? "" : " (Ctrl-C or SIGTERM skips the rest; the training is complete)");
    said = true;
  };
  if (!process_from.empty())
    opt.process = {proc.rank, proc.rendezvous, proc.run_id, proc.host, proc.node, proc.local_rank};
  // a second Ctrl-C stops at once: say so naming the session, and record it as the user's stop
  // rather than leave it to read "crashed" (tester41 #21; run_common.h, as an lm_embedding run's)
  stop.set_session(output);
  const StopAtOnce::RunGuard run_guard(stop);  // however cmd_run leaves, a stop under way ends first
  opt.cancel = &cancel;
  // a rank `launch` started: its launcher going away cancels it, without EPIPE (tester46 F5)
  const long launcher = process_from.empty() ? 0 : watch_launcher(cancel);
  opt.flight_dump = &flight;
  // "step N/M  R samples/s  ETA  loss" (the same lines as an lm_embedding run's: run_common.h)
  StepLinesSpec lines;
  lines.steps = spec.steps;
  lines.warmup_steps = spec.warmup_steps;
  lines.simulated = simulated;
  lines.steps_done = &stop.steps_done;
  opt.on_step = [progress = step_progress_lines(lines), launcher, &stop](const es::StepProgress& p) {
    if (launcher_gone()) {  // its pipe has no reader: a line would fail with EPIPE
      if (p.step > 0 && p.step >= p.total_steps) stop.steps_done = true;
      return;
    }
    try {
      progress(p);
    } catch (const std::system_error& e) {  // the launcher died just now; the watch cancels the run
      if (launcher == 0 || e.code().value() != EPIPE) throw;
    }
  };
  // a long table initialisation, said on stderr (the first step waits for every rank's setup)
  es::set_setup_note_sink([](const std::string& line) {
    if (!launcher_gone()) fmt::print(stderr, "{}\n", line);
  });
  // a signal while it loaded or planned; one rank of several processes goes on to the rendezvous,
  // which a cancel ends on every rank (run_training)
  if (cancel && process_from.empty()) return report_cancelled_before_run(as_json);
  const es::RunResult r = with_origin(a.origin, [&] { return es::run_training(spec, plan, opt); });
  stop.end_run();  // the session is closed, its end recorded: a stop from here on leaves it as it is
  if (launcher_gone() && r.ended == es::RunEnd::cancelled && !r.session_path.empty()) {
    // nobody reads this process's output any more: the session says what happened (tester46 F5)
    std::string all_ranks = proc.output_pattern;
    for (auto at = all_ranks.find("{rank}"); at != std::string::npos; at = all_ranks.find("{rank}"))
      all_ranks.replace(at, 6, "*");
    embedscope::sessions::mark_session_ended(
        r.session_path, "cancelled",
        fmt::format("launcher (pid {}) went away: output pipe closed; rank {} cancelled after the current step. Merge "
                    "the rank sessions: embedscope merge {} -o {}",
                    launcher, proc.rank, all_ranks, merged_output(proc.output_pattern)));
    return 0;
  }
  if (tty) fmt::print(stderr, "\n");
  if (r.ended != es::RunEnd::complete && r.ended != es::RunEnd::cancelled) {
    return report_failed_run(es::to_string(r.ended), r.error, r.session_path, as_json, r.bad_input);
  }
  if (r.ended == es::RunEnd::cancelled && r.session_path.empty() && !r.error.empty()) {  // in the rendezvous
    fmt::print(stderr, "embedscope run: {}; no session was written\n", r.error);
    if (as_json) std::cout << dump(json{{"ended", "cancelled"}, {"error", r.error}, {"session", nullptr}}) << "\n";
    return 0;
  }
  if (r.step_time_ns.empty()) {
    fmt::print(stderr, "run cancelled before the first measured step\nsession: {}\n", r.session_path);
    if (as_json) std::cout << dump(json{{"ended", "cancelled"}, {"session", r.session_path}}) << "\n";
    return 0;
  }
  // the pipeline's drain steps (its last 1-2: no next batch to start) stay recorded but are not
  // counted, as stats counts them (tester46 F21); a run cancelled before them drained nothing
  // (counted_steps.h drain_steps_run; retest49 R2)
  const auto steady = embedscope::sessions::steady_state_steps(
      r.step_time_ns, embedscope::sessions::drain_steps_run(es::to_string(spec.pipeline), es::to_string(r.ended), spec.steps,
                                                            static_cast<int64_t>(r.step_time_ns.size()) - 1));
  const auto d = embedscope::sessions::summarize(steady.counted);
  const double sps = d.mean > 0 ? static_cast<double>(r.samples_per_step) / (d.mean * 1e-9) : 0.0;
  int64_t invalid = 0;
  for (const auto& rk : r.ranks) invalid += rk.invalid_ids;
  if (invalid > 0)
    fmt::print(stderr, "warning: {} ids outside their table were {} (invalid_ids policy)\n", invalid,
               spec.invalid_ids == es::InvalidIdPolicy::clamp ? "clamped" : "dropped");
  int64_t skipped = 0;
  for (const auto& rk : r.ranks) skipped += rk.skipped_lines;
  if (skipped > 0)
    fmt::print(stderr, "warning: {} malformed input line(s) skipped (input.malformed_lines skip), per step: {}\n", skipped,
               fmt::join(r.skipped_lines_per_step, " "));
  // how far to trust a simulated step (tester63d F1, F3, F6): the calibrated profile's error band,
  // the built-in profile's assumed figures and the step with them moved (the simulator run again)
  std::optional<StepTrust> trust;
  std::optional<es::HardwareProfile> trust_hw;
  if (simulated) {
    trust_hw = es::load_hardware_profile(spec.devices.hardware);
    // the corners only after a complete run, and of at most 10 steps (a simulated GPU step repeats itself)
    const bool corners = r.ended == es::RunEnd::complete;
    trust = step_trust(*trust_hw, d.p50, !corners ? std::function<int64_t(const es::HardwareProfile&)>() : [&](const es::HardwareProfile& corner) {
      const std::string file = write_temporary_profile(corner, "run_assumed");
      es::WorkloadSpec again = spec;
      again.steps = std::min<int64_t>(spec.steps, 10);
      again.devices.hardware = file;
      es::TrainerOptions quiet;
      quiet.keep_events = false;
      es::RunResult c;
      try {
        c = es::run_training(again, plan, quiet);
      } catch (...) {
        std::remove(file.c_str());
        throw;
      }
      std::remove(file.c_str());
      const auto counted = embedscope::sessions::steady_state_steps(
          c.step_time_ns, embedscope::sessions::drain_steps_run(es::to_string(spec.pipeline), es::to_string(c.ended),
                                                                again.steps,
                                                                static_cast<int64_t>(c.step_time_ns.size()) - 1));
      return embedscope::sessions::summarize(counted.counted).p50;
    });
  }
  if (as_json) {
    const json overlap = pipeline_json(spec);  // pipeline, qcomms, network
    json j{{"ended", es::to_string(r.ended)},
           {"session", r.session_path},
           {"workload", spec.name},
           {"backend", es::to_string(spec.devices.backend)},
           {"world_size", spec.devices.count},
           {"sharding", es::to_json(spec, r.plan)},  // the plan the run started with
           {"final_sharding", es::to_json(spec, r.final_plan)},  // and ended with (live rebalances)
           {"pipeline", es::to_string(spec.pipeline)},
           {"qcomms", overlap.at("qcomms")},
           {"network", overlap.at("network")},
           {"dense_precision", spec.dense ? json(es::to_string(spec.dense->precision)) : json()},
           {"steps", static_cast<int64_t>(r.step_time_ns.size())},
           {"samples_per_step", r.samples_per_step},
           {"step_time_ns", {{"mean", d.mean}, {"p50", d.p50}, {"p99", d.p99}, {"min", d.min}, {"max", d.max}}},
           {"samples_per_s", sps},
           {"drain_steps", steady.drain_left_out},
           {"simulated", simulated},
           {"profile_trust", trust ? step_trust_json(*trust_hw, *trust) : json()},
           {"loss_first", r.loss.empty() ? json() : json(r.loss.front())},
           {"loss_last", r.loss.empty() ? json() : json(r.loss.back())},
           {"loss", r.loss},
           {"held_out", es::held_out_json(r)},
           {"invalid_ids", invalid},
           {"input", es::enum_name(spec.input.kind)},
           {"skipped_lines", skipped},
           {"skipped_lines_per_step", r.skipped_lines_per_step},
           {"qcomms_error", simulated ? json()  // nothing was quantized
                                      : json{{"forward_max_abs_error", r.qcomms_error.forward_max_abs},
                                             {"forward_relative_error", r.qcomms_error.forward_relative},
                                             {"backward_max_abs_error", r.qcomms_error.backward_max_abs},
                                             {"backward_relative_error", r.qcomms_error.backward_relative}}},
           {"ranks", json::array()}};
    j["tables"] = es::table_storage_json(r.table_storage, !simulated);
    // the live rebalances (stats --json gives the same objects, with the step times around them)
    j["rebalances"] = json::array();
    for (const auto& rb : r.rebalances) j["rebalances"].push_back(rebalance_json(rb));
    j["plan_changes"] = json::array();
    for (const auto& c : r.plan_changes)
      j["plan_changes"].push_back({{"step", c.step}, {"table", c.table_name}, {"shard_index", c.shard_index},
                                   {"from_rank", c.from_rank}, {"to_rank", c.to_rank}, {"from_type", c.from_type},
                                   {"to_type", c.to_type}, {"row_offset", c.row_offset}, {"num_rows", c.num_rows},
                                   {"col_offset", c.col_offset}, {"num_cols", c.num_cols}, {"bytes", c.bytes}});
    if (!process_from.empty()) j["process_rank"] = proc.rank;
    for (const auto& rk : r.ranks)
      j["ranks"].push_back({{"rank", rk.rank}, {"ids_looked_up", rk.ids_looked_up}, {"unique_ids", simulated ? json() : json(rk.unique_ids)},
                            {"bytes_sent", rk.bytes_sent}, {"bytes_received", rk.bytes_received},
                            {"memory_bytes", rk.memory_bytes}, {"hash_collisions", simulated ? json() : json(rk.hash_collisions)}});
    std::cout << dump(j) << "\n";
    return 0;
  }
  std::cout << (r.plan_changes.empty() ? std::string("sharding plan\n")
                                       : "sharding plan (as the run started; the live rebalances below changed it)\n")
            << plan_table(spec, r.plan) << "\n" << pipeline_text(spec);
  std::cout << fmt::format("steps        {} measured, {} samples each ({} per rank x {} ranks)\n", r.step_time_ns.size(),
                           r.samples_per_step, spec.batch_size, spec.devices.count);
  std::cout << fmt::format("step time    mean {}  p50 {}  p99 {}\n", ms(d.mean), ms(static_cast<double>(d.p50)),
                           ms(static_cast<double>(d.p99)));
  std::cout << embedscope::sessions::drain_steps_text(es::to_string(spec.pipeline), static_cast<int64_t>(r.step_time_ns.size()),
                                                      steady.drain_left_out, steady.all_drain);
  std::cout << fmt::format("throughput   {} samples/s{}\n", embedscope::sessions::format_rate(sps), simulated ? " (SIMULATED)" : "");
  if (trust) std::cout << step_trust_text(*trust_hw, *trust);
  if (r.loss.empty())
    std::cout << "loss         none (simulated: nothing is trained)\n";
  else
    std::cout << fmt::format("loss         first {:.4f}  last {:.4f}\n", r.loss.front(), r.loss.back());
  std::cout << held_out_text(es::held_out_json(r));
  if (simulated && (spec.qcomms.forward_precision != es::CommPrecision::fp32 || spec.qcomms.backward_precision != es::CommPrecision::fp32))
    std::cout << "qcomms error not measured (simulated: the cost model sends the quantized bytes, nothing is quantized)\n";
  else if (spec.qcomms.forward_precision != es::CommPrecision::fp32 || spec.qcomms.backward_precision != es::CommPrecision::fp32)
    std::cout << fmt::format("qcomms error forward max abs {:.3g} (relative {:.3g}); backward max abs {:.3g} (relative {:.3g})\n",
                             r.qcomms_error.forward_max_abs, r.qcomms_error.forward_relative,
                             r.qcomms_error.backward_max_abs, r.qcomms_error.backward_relative);
  // one line each: what moved (and where), or what was refused and why
  std::cout << rebalances_block(r.rebalances, r.plan_changes, spec.rebalance.balance == es::RebalanceBalance::lookup_time);
  std::cout << "\n";
  if (std::any_of(spec.tables.begin(), spec.tables.end(),
                  [](const auto& t) {
                    return t.data_type != es::TableDataType::fp32 || t.hash_size > 0 || t.low_rank_dim > 0 ||
                           t.optimizer_state_type != es::OptimizerStateType::fp32;
                  })) {
    // table storage: bytes over all ranks, the stored rows' error against their fp32 values,
    // and the hash collisions per measured step (every rank's batch); a simulation has the
    // plan's bytes only ("-": nothing stored, no batch hashed)
    const auto steps = static_cast<double>(r.step_time_ns.size());
    const auto figure = [simulated](double v, const char* f) { return simulated ? std::string("-") : fmt::format(fmt::runtime(f), v); };
    std::cout << fmt::format("{:<20} {:<9} {:<10} {:<5} {:>10} {:>8} {:>12} {:>16} {:>12} {:>14} {:>10} {:>16}\n",
                             "table", "data_type", "rounding", "state", "hash_size", "low_rank", "weights", "optimizer state", "master copy", "max abs error",
                             "relative", "collisions/step");
    for (size_t t = 0; t < r.table_storage.size(); ++t) {
      const auto& ts = r.table_storage[t];
      std::cout << fmt::format("{:<20} {:<9} {:<10} {:<5} {:>10} {:>8} {:>12} {:>16} {:>12} {:>14} {:>10} {:>16}\n",
                               ts.name, es::to_string(ts.data_type),
                               ts.data_type == es::TableDataType::fp32 ? "-"
                               : ts.stochastic_rounding                ? "stochastic"
                                                                       : "nearest",
                               es::enum_name(ts.optimizer_state_type),
                               // the columns of `stats` (tester48 F14.2: "rows" here, "hash_size" there)
                               spec.tables[t].hash_size > 0 ? std::to_string(spec.tables[t].hash_size) : std::string("-"),
                               ts.low_rank_dim > 0 ? std::to_string(ts.low_rank_dim) : std::string("-"),
                               es::format_bytes(ts.total_weight_bytes()),
                               es::format_bytes(ts.total_optimizer_state_bytes()), es::format_bytes(ts.master_copy_bytes),
                               figure(ts.max_abs_error, "{:.3g}"), figure(ts.relative_error, "{:.3g}"),
                               figure(steps > 0 ? static_cast<double>(ts.hash_collisions) / steps : 0.0, "{:.1f}"));
    }
    std::cout << "\n";
  }
  if (const std::string host = host_placement_text(es::table_storage_json(r.table_storage, !simulated),
                                                   static_cast<int64_t>(r.step_time_ns.size()));
      !host.empty())
    std::cout << "tables in host memory (cache hit rate, rows and bytes moved per measured step):\n" << host << "\n";
  // tester51 F8: "unique rows" read as the rows a rank touched, but it is each step's distinct
  // rows summed (17,319 for criteo's rank 0 where the Load page counts 10,528 distinct ids)
  std::cout << fmt::format("{:<5} {:>14} {:>12} {:>14} {:>14} {:>12}\n", "rank", "ids looked up", "rows updated",
                           "bytes sent", "bytes received", "memory peak");
  for (const auto& rk : r.ranks)
    std::cout << fmt::format("{:<5} {:>14} {:>12} {:>14} {:>14} {:>12}\n", rk.rank, rk.ids_looked_up,
                             simulated ? std::string("-") : std::to_string(rk.unique_ids),  // not modelled
                             es::format_bytes(rk.bytes_sent), es::format_bytes(rk.bytes_received),
                             es::format_bytes(rk.memory_bytes));
  if (!simulated)
    std::cout << "(rows updated: distinct rows per step that the fused optimizer updated, summed over the steps - a row "
                 "updated in 3 steps counts 3; distinct over the steps is inspect-input's and the Load page's \"distinct "
                 "(all)\")\n";
  if (steady.drain_left_out > 0)  // tester48 F4: unique rows span the steps, so this table cannot leave them out
    std::cout << fmt::format("(ids, rows and bytes over all {} measured steps, the drain steps too; `stats`, `scenario` and "
                             "the workbench count the {} counted steps)\n",
                             r.step_time_ns.size(), static_cast<int64_t>(r.step_time_ns.size()) - steady.drain_left_out);
  std::cout << fmt::format("\n{}session: {}\n", r.ended == es::RunEnd::cancelled ? "cancelled; " : "", r.session_path);
  return 0;
}

struct RunState {
  WorkloadArgs args;
  bool json = false;
  std::string output;
  bool overwrite = false;
  std::string plan;
  std::vector<std::string> allow_storage;
  ProcessArgs process;
  int64_t held_out_batches = es::kDefaultHeldOutBatches;
  bool held_out_given = false;  // --held-out-batches on the command line (refused where nothing is evaluated)
};

// cmd_run, and under an MPI bootstrap the end every rank must reach (run_process.h): an error
// is reported here as main() would (exit 2 for bad input, 1 otherwise), then the ranks finish.
int run_then_finish(RunState& s) {
  int code = 0;
  try {
    code = cmd_run(s.args, s.json, s.output, s.overwrite, s.plan, s.process, s.held_out_batches, s.held_out_given,
                   s.allow_storage);
  } catch (const std::exception& e) {
    const ProcessArgs& p = s.process;
    // bad input (exit 2): a flag, the workload, the plan, or the session file (-o exists, is not a
    // regular file, or a live run writes it: SessionWriter::check_path); a full disk is not input
    const bool bad = dynamic_cast<const es::SpecError*>(&e) ||
                     (dynamic_cast<const embedscope::sessions::SessionError*>(&e) &&
                      !dynamic_cast<const embedscope::sessions::SessionWriteError*>(&e));
    if (bad && p.rank >= 0 && p.rank < p.world_size && p.world_size > 1 && !p.rendezvous.empty()) {
      // a refusal before this rank claimed its place: the ranks waiting in the rendezvous end
      // at once naming it (report_refused_rank; a rank that has claimed writes nothing), rather
      // than after the collective timeout (tester53 F1: an existing -o, a SessionError, was not
      // reported, and its peers waited 30 s)
      try {
        es::launch::report_refused_rank(p.rendezvous, p.run_id, p.rank, e.what());
      } catch (const std::exception&) {  // the store cannot be opened: the error above says so
      }
    }
    if (!s.process.mpi) throw;
    fmt::print(stderr, "error: {}\n", e.what());
    if (s.json) std::cout << dump(json{{"ended", bad ? "bad_input" : "failed"}, {"error", e.what()}}) << "\n";
    code = bad ? 2 : 1;
  }
  if (!s.process.mpi) return code;
  std::cout.flush();
  return finish_mpi_run(s.process, code, s.overwrite);
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto s = std::make_shared<RunState>();
  auto* run = app.add_subcommand(
      "run", "Run a workload on CPU ranks (Gloo) or GPUs (--backend cuda, NCCL) and print a summary");
  add_workload_options(run, s->args);
  run->add_flag("--json", s->json, "Print the summary as one JSON object on stdout");
  run->add_option("-o,--output", s->output,
                  "Session file to write (default: embedscope-YYYYmmdd-HHMMSS.db in the current directory; one rank "
                  "per process: {rank} in the name is the rank, default NAME.rank{rank}.db)")
      // an explicitly empty name was taken as "the default name" (tester49 F9)
      ->check(CLI::Validator(
          [](const std::string& v) {
            return v.empty() ? std::string("an empty name; leave -o out for the default embedscope-YYYYmmdd-HHMMSS.db")
                             : std::string();
          },
          "NAME"));
  run->add_flag("--force-overwrite", s->overwrite, "Replace the session file if it exists");
  run->add_option("--plan", s->plan,
                  "Run exactly this sharding plan (the JSON `embedscope plan --json` prints, edited by hand) instead "
                  "of planning; validated against the workload. `--plan auto`: the best plan of the planner's search "
                  "(`embedscope plan --auto`; a file named auto: ./auto)");
  run->add_option("--allow-storage", s->allow_storage,
                  "With --plan auto: when no plan of the workload as written fits, the storage the search may give "
                  "the largest tables (fp16, bf16_state, int8, host_cached; as `plan --auto --allow-storage`)")
      ->delimiter(',')
      ->allow_extra_args(false);  // one value a use: `--opt a,b work.json` leaves the file positional (tester44 F13)
  run->add_option("--held-out-batches", s->held_out_batches,
                  "After a complete run, evaluate the trained model (loss and ROC AUC) on this many global batches "
                  "the workload's generator makes from iterations training never reaches (0: none; cpu ranks in "
                  "this process, synthetic input)")
      ->check(at_least(0))
      ->capture_default_str()
      ->each([s](const std::string&) { s->held_out_given = true; });
  add_process_options(run, s->process);
  // load_lm refuses them for an lm_embedding workload (its ranks are threads of one process)
  s->args.given["--rank"] = s->process.rank_opt;
  s->args.given["--world-size"] = s->process.world_opt;
  s->args.given["--rendezvous"] = s->process.rendezvous_opt;
  s->args.given["--run-id"] = s->process.run_id_opt;
  s->args.given["--host"] = s->process.host_opt;
  return {run, [s] { return run_then_finish(*s); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli
